//! Who may connect: loopback by default, another address only with `--listen-any` and a
//! bearer token, and on loopback no request a web page could have made.
//!
//! A server on 127.0.0.1 is still reachable from every web page the user's browser opens:
//! a page cannot read the answer of a cross-origin request, but a "simple" one (a form post)
//! is still sent, and a page on a rebound DNS name looks same-origin. So on loopback every
//! request must name a loopback host (`Host`) and, when a browser says where it comes from
//! (`Origin`), a loopback origin; the chat endpoint also takes JSON bodies only, which no
//! form can send. With a token, every request but `/health` must carry it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::openai::error::ApiError;
use crate::error::{Error, Result};

/// The environment variable a token may come from (`--token` shows in `ps`).
pub const TOKEN_ENV: &str = "SIGHTLINE_TOKEN";

/// Who may connect.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Allow a non-loopback address (`--listen-any`); needs a token.
    pub listen_any: bool,
    /// The bearer token every HTTP request must carry (`--token`, `SIGHTLINE_TOKEN`).
    pub token: Option<String>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("listen_any", &self.listen_any)
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .finish()
    }
}

impl Access {
    /// Whether the server may bind `addr`: loopback always; any other address with
    /// `listen_any` and a token of at least [`MIN_TOKEN_CHARS`] characters.
    pub fn check_bind(&self, addr: SocketAddr) -> Result<()> {
        if addr.ip().is_loopback() {
            return Ok(());
        }
        if !self.listen_any {
            return Err(Error::invalid_input(format!(
                "{addr} is not a loopback address: anyone who reaches it could drive this \
                 desktop; give --listen-any and a token (--token or {TOKEN_ENV}) to serve there"
            )));
        }
        match &self.token {
            Some(t) if t.chars().count() >= MIN_TOKEN_CHARS => Ok(()),
            Some(_) => Err(Error::invalid_input(format!(
                "the token is shorter than {MIN_TOKEN_CHARS} characters; a guessable token on \
                 {addr} is no protection"
            ))),
            None => Err(Error::invalid_input(format!(
                "--listen-any on {addr} needs a bearer token (--token or {TOKEN_ENV})"
            ))),
        }
    }
}

/// The shortest token accepted for a non-loopback address.
pub const MIN_TOKEN_CHARS: usize = 16;

struct Policy {
    token: Option<String>,
    check_origin: bool,
}

/// `router` behind the access checks of the module docs.
pub(crate) fn guard(router: axum::Router, access: &Access) -> axum::Router {
    let policy = Arc::new(Policy {
        token: access.token.clone(),
        check_origin: !access.listen_any,
    });
    router.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let policy = Arc::clone(&policy);
            async move {
                match refusal(&policy, request.uri().path(), request.headers()) {
                    Some(refused) => refused,
                    None => next.run(request).await,
                }
            }
        },
    ))
}

/// The response refusing a request, or `None` to let it through.
fn refusal(policy: &Policy, path: &str, headers: &HeaderMap) -> Option<Response> {
    if policy.check_origin {
        if let Some(host) = header_text(headers, header::HOST) {
            if !is_loopback_host(host_name(host)) {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    &format!("Host {host:?} is not a loopback name; this server is local"),
                ));
            }
        }
        if let Some(origin) = header_text(headers, header::ORIGIN) {
            let host = origin.split_once("://").map_or("", |(_, rest)| {
                host_name(rest.split('/').next().unwrap_or(""))
            });
            if !is_loopback_host(host) {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    &format!("requests from web pages of {origin} are not served"),
                ));
            }
        }
    }
    let token = policy.token.as_deref()?;
    if path == "/health" {
        return None;
    }
    let given = header_text(headers, header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(given) if same_secret(given.as_bytes(), token.as_bytes()) => None,
        Some(_) => Some(unauthorized("the bearer token is wrong")),
        None => Some(unauthorized(
            "this server needs a bearer token: Authorization: Bearer TOKEN",
        )),
    }
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The host of `host[:port]` or `[v6][:port]`, without brackets or port.
fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Compares in time independent of where the first difference is.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

fn unauthorized(message: &str) -> Response {
    let mut response = refuse(StatusCode::UNAUTHORIZED, "invalid_api_key", message);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    ApiError::new(status, code, message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Result<HeaderMap> {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(
                header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| Error::internal(e.to_string()))?,
                header::HeaderValue::from_str(v).map_err(|e| Error::internal(e.to_string()))?,
            );
        }
        Ok(map)
    }

    fn status(policy: &Policy, path: &str, pairs: &[(&str, &str)]) -> Result<Option<u16>> {
        Ok(refusal(policy, path, &headers(pairs)?).map(|r| r.status().as_u16()))
    }

    #[test]
    fn loopback_server_refuses_foreign_hosts_and_web_origins() -> Result<()> {
        let local = Policy {
            token: None,
            check_origin: true,
        };
        for host in ["127.0.0.1:8080", "localhost:1", "[::1]:80", "127.0.0.2"] {
            assert_eq!(
                status(&local, "/v1/models", &[("host", host)])?,
                None,
                "{host}"
            );
        }
        for host in ["evil.example:8080", "192.168.1.5:8080", "[2001:db8::1]:80"] {
            assert_eq!(
                status(&local, "/mcp", &[("host", host)])?,
                Some(403),
                "{host}"
            );
        }
        let page = [
            ("host", "127.0.0.1:8080"),
            ("origin", "https://evil.example"),
        ];
        assert_eq!(status(&local, "/v1/chat/completions", &page)?, Some(403));
        let dev = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://localhost:3000"),
        ];
        assert_eq!(status(&local, "/v1/chat/completions", &dev)?, None);
        Ok(())
    }

    #[test]
    fn a_token_is_required_everywhere_but_health() -> Result<()> {
        let policy = Policy {
            token: Some("0123456789abcdef".into()),
            check_origin: false,
        };
        assert_eq!(status(&policy, "/v1/models", &[])?, Some(401));
        let wrong = [("authorization", "Bearer 0123456789abcdeX")];
        assert_eq!(status(&policy, "/v1/models", &wrong)?, Some(401));
        let right = [("authorization", "Bearer 0123456789abcdef")];
        assert_eq!(status(&policy, "/v1/models", &right)?, None);
        assert_eq!(status(&policy, "/health", &[])?, None);
        // Without Origin checks (--listen-any), any host may connect with the token.
        let far = [
            ("host", "sightline.example"),
            ("authorization", "Bearer 0123456789abcdef"),
        ];
        assert_eq!(status(&policy, "/mcp", &far)?, None);
        Ok(())
    }

    #[test]
    fn only_loopback_binds_without_listen_any_and_a_long_token() -> Result<()> {
        let any: SocketAddr = "0.0.0.0:8080"
            .parse()
            .map_err(|e| Error::internal(format!("{e}")))?;
        let local: SocketAddr = "127.0.0.1:0"
            .parse()
            .map_err(|e| Error::internal(format!("{e}")))?;
        assert!(Access::default().check_bind(local).is_ok());
        assert!(Access::default().check_bind(any).is_err());
        let no_token = Access {
            listen_any: true,
            token: None,
        };
        assert!(no_token.check_bind(any).is_err());
        let short = Access {
            listen_any: true,
            token: Some("secret".into()),
        };
        assert!(short.check_bind(any).is_err());
        let ok = Access {
            listen_any: true,
            token: Some("a-token-of-enough-length".into()),
        };
        assert!(ok.check_bind(any).is_ok());
        Ok(())
    }
}
