//! The HTTP side of Hub requests (feature `download`): agents over rustls with the system's
//! CA certificates, the token only towards the Hub, and each failure sorted into "try again"
//! (connection errors, 429, 5xx) or "say why" (401/403/404 as one line that says what to do).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::download_error::DownloadError;
use super::retry::Failure;
use super::Hub;

/// Redirects followed for a file's bytes (the Hub sends one, to its storage).
const DATA_REDIRECTS: u32 = 5;

/// The TLS setup, built once per process: the system's CA certificates (the OS store, or the
/// PEM files `SSL_CERT_FILE` / `SSL_CERT_DIR` name), so corporate and private CAs work; Mozilla's
/// roots only where the system has none (a minimal container without `ca-certificates`).
fn tls_config() -> Option<Arc<rustls::ClientConfig>> {
    static CONFIG: OnceLock<Option<Arc<rustls::ClientConfig>>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            let native = rustls_native_certs::load_native_certs();
            for e in &native.errors {
                tracing::warn!("reading the system's CA certificates: {e}");
            }
            let (added, _ignored) = roots.add_parsable_certificates(native.certs);
            if added == 0 {
                tracing::warn!(
                    "no system CA certificates found (install ca-certificates, or set \
                     SSL_CERT_FILE); using the Mozilla root certificates built in"
                );
                roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            match rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
            {
                Ok(builder) => Some(Arc::new(
                    builder.with_root_certificates(roots).with_no_client_auth(),
                )),
                // Not reached with ring; ureq's own setup (Mozilla's roots) still verifies.
                Err(e) => {
                    tracing::error!("TLS setup: {e}; using ureq's default roots");
                    None
                }
            }
        })
        .clone()
}

impl Hub {
    fn agent(&self, redirects: u32, read_timeout: Duration) -> ureq::Agent {
        let builder = match tls_config() {
            Some(config) => ureq::AgentBuilder::new().tls_config(config),
            None => ureq::AgentBuilder::new(),
        };
        builder
            .try_proxy_from_env(true)
            .redirects(redirects)
            .timeout_connect(self.etag_timeout)
            .timeout_read(read_timeout)
            .user_agent(concat!("sightline/", env!("CARGO_PKG_VERSION")))
            .build()
    }

    /// For metadata and listings: no redirect followed (the Hub's headers are on its own
    /// answer), `HF_HUB_ETAG_TIMEOUT` for the answer.
    pub(super) fn metadata_agent(&self) -> ureq::Agent {
        self.agent(0, self.etag_timeout)
    }

    /// For a file's bytes: redirects followed (to the storage host, which never sees the
    /// token: ureq drops `Authorization` on redirects), `HF_HUB_DOWNLOAD_TIMEOUT` per read.
    pub(super) fn data_agent(&self) -> ureq::Agent {
        self.agent(DATA_REDIRECTS, self.download_timeout)
    }

    /// A GET with the bearer token when one is configured.
    pub(super) fn get(&self, agent: &ureq::Agent, url: &str) -> ureq::Request {
        let req = agent.get(url);
        match &self.token {
            Some(token) => req.set("Authorization", &format!("Bearer {}", token.secret())),
            None => req,
        }
    }

    /// Sorts a failed request. `repo` and `what` (the file, or the repo for a listing) name
    /// it in the one-line errors.
    pub(super) fn classify(&self, error: ureq::Error, repo: &str, what: &str) -> Failure {
        match error {
            ureq::Error::Status(status, response) => {
                let code = response.header("X-Error-Code").map(str::to_string);
                let retry_after = response
                    .header("Retry-After")
                    .and_then(|v| v.trim().parse::<u64>().ok());
                self.status_failure(status, code.as_deref(), retry_after, repo, what)
            }
            ureq::Error::Transport(t) => {
                let retry = matches!(
                    t.kind(),
                    ureq::ErrorKind::ConnectionFailed
                        | ureq::ErrorKind::Io
                        | ureq::ErrorKind::ProxyConnect
                );
                let error = DownloadError::Network {
                    attempts: 1,
                    source: Box::new(t),
                };
                if retry {
                    Failure::Transient {
                        error,
                        retry_after: None,
                        progressed: false,
                    }
                } else {
                    Failure::Fatal(error)
                }
            }
        }
    }

    fn status_failure(
        &self,
        status: u16,
        error_code: Option<&str>,
        retry_after: Option<u64>,
        repo: &str,
        what: &str,
    ) -> Failure {
        let page = format!("{}/{repo}", self.endpoint());
        match status {
            404 => DownloadError::NotFound { what: what.into() }.into(),
            // The Hub answers 401 for a private or absent repo and a gated one alike when no
            // token is sent; `X-Error-Code` (`GatedRepo`, `RepoNotFound`) is read only to pick
            // the message, never shown.
            401 | 403 => match (&self.token, error_code) {
                (_, Some("RepoNotFound")) if self.token.is_some() => DownloadError::NotFound {
                    what: format!("the Hub repo {repo}"),
                }
                .into(),
                (Some(token), _) if status == 401 && error_code != Some("GatedRepo") => {
                    DownloadError::TokenRefused {
                        repo: repo.into(),
                        origin: token.origin.clone(),
                    }
                    .into()
                }
                (Some(token), _) => DownloadError::NoAccess {
                    repo: repo.into(),
                    status,
                    origin: token.origin.clone(),
                    page,
                }
                .into(),
                (None, _) => DownloadError::NeedsToken {
                    repo: repo.into(),
                    status,
                    page,
                    token_path: super::env::token_path(),
                }
                .into(),
            },
            429 => Failure::Transient {
                error: DownloadError::RateLimited {
                    attempts: 1,
                    retry_after,
                },
                retry_after: retry_after.map(Duration::from_secs),
                progressed: false,
            },
            500 | 502 | 503 | 504 => Failure::Transient {
                error: DownloadError::Status {
                    status,
                    attempts: 1,
                },
                retry_after: retry_after.map(Duration::from_secs),
                progressed: false,
            },
            _ => DownloadError::Status {
                status,
                attempts: 1,
            }
            .into(),
        }
    }
}
