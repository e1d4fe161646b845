//! `sightline serve` (feature `serve`): the agent as an MCP server, and the local model behind
//! an OpenAI-compatible chat endpoint, from one loaded model.
//!
//! - **MCP** ([`mcp`]): tools `view`, `plan`, `act`, `run` and `verify` over stdio or
//!   streamable HTTP, with rmcp, the protocol's official Rust SDK. `act` and `run` drive the
//!   desktop through the same [`Runner`](crate::runner::Runner) as `sightline run`: the same
//!   gate, grants, budgets, resolver and settling.
//! - **OpenAI** ([`openai`]): `/v1/models`, `/v1/chat/completions` (images as data URLs or
//!   file paths, streaming, `response_format` `json_schema` decoded under the schema with
//!   llguidance) and `/health`; the model named `sightline` answers with the
//!   [`NextMove`](cel_contracts::NextMove) for the last user message's goal and image.
//!
//! Sharing, in one process: the model loads once ([`Brain`]) and serves every call. Model
//! work waits in a bounded [`ModelQueue`] (a full queue answers at once; a request that waits
//! or works past its deadline is cut off). The desktop is one screen and one pointer: a call
//! that needs it while another has it is answered at once with a clear error
//! ([`DesktopGate`]), never queued behind a run of minutes.
//!
//! Trust: grants (`--allow`) are the server's, given when it starts; no tool argument adds
//! one (a tool may only ask for less: a dry run, smaller budgets). The server listens on
//! loopback unless told otherwise, and another address needs a bearer token ([`Access`]).

mod auth;
mod brain;
mod desktop;
mod images;
pub mod mcp;
pub mod openai;
mod queue;

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use auth::{Access, MIN_TOKEN_CHARS, TOKEN_ENV};
pub use brain::{Brain, OwnedTurn, Planned};
pub use desktop::{BusyError, DesktopGate, DesktopLease};
pub use images::{image_from_base64, image_from_url, MAX_IMAGE_BYTES};
pub use queue::{Interrupt, ModelQueue, QueueError};

use crate::error::{Error, Result};
use crate::runner::RunOptions;

/// Where the MCP server listens (`--mcp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpListen {
    /// The process's stdin and stdout: what a desktop MCP host starts.
    Stdio,
    /// Streamable HTTP on `addr`, at `path` (default `/mcp`).
    Http {
        /// The address to bind.
        addr: SocketAddr,
        /// The endpoint's path.
        path: String,
    },
}

impl FromStr for McpListen {
    type Err = Error;

    /// `stdio`, or `http://HOST:PORT[/PATH]` with HOST an IP address (`127.0.0.1`, `[::1]`)
    /// or `localhost`.
    fn from_str(s: &str) -> Result<Self> {
        if s == "stdio" {
            return Ok(McpListen::Stdio);
        }
        let rest = s.strip_prefix("http://").ok_or_else(|| {
            Error::invalid_input(format!(
                "--mcp {s:?}: expected stdio or http://HOST:PORT[/PATH] (TLS is left to a proxy)"
            ))
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/mcp"),
        };
        let path = path.trim_end_matches('/');
        if path.is_empty() || path.contains(['?', '#', ' ']) {
            return Err(Error::invalid_input(format!(
                "--mcp {s:?}: the endpoint needs a plain path such as /mcp"
            )));
        }
        Ok(McpListen::Http {
            addr: parse_listen_addr(authority)
                .map_err(|e| Error::invalid_input(format!("--mcp {s:?}: {e}")))?,
            path: path.to_string(),
        })
    }
}

/// `HOST:PORT` with HOST an IP address or `localhost` (taken as 127.0.0.1): names are not
/// resolved, so what is bound is what was written.
pub fn parse_listen_addr(text: &str) -> std::result::Result<SocketAddr, String> {
    let text = text.trim();
    let spelled = match text.strip_prefix("localhost:") {
        Some(port) => format!("127.0.0.1:{port}"),
        None => text.to_string(),
    };
    spelled.parse().map_err(|_| {
        format!("{text:?} is not HOST:PORT with an IP address (127.0.0.1:8080, [::1]:8080)")
    })
}

/// Bounds on what a client may ask of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeLimits {
    /// Largest request body, in bytes (images travel inside it). Default 32 MiB.
    pub max_request_bytes: usize,
    /// Model calls that may wait while one runs; one more is refused at once. Default 16.
    pub max_queue: usize,
    /// Most time one request may wait for the model and then use it. Default 300 s.
    pub request_timeout: Duration,
    /// Most tokens one chat completion may generate (`max_tokens` above it is refused).
    /// Default 4,096.
    pub max_tokens: usize,
    /// Most images in one chat request. Default 8.
    pub max_images: usize,
}

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            max_request_bytes: 32 << 20,
            max_queue: 16,
            request_timeout: Duration::from_secs(300),
            max_tokens: 4096,
            max_images: 8,
        }
    }
}

/// Everything `sightline serve` is configured with besides the planner.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The MCP server, if any.
    pub mcp: Option<McpListen>,
    /// The OpenAI-compatible endpoint's address, if any.
    pub openai: Option<SocketAddr>,
    /// Who may connect.
    pub access: Access,
    /// Request bounds.
    pub limits: ServeLimits,
    /// What `act` and `run` run with: the grants, the budgets (a tool may lower them, never
    /// raise them), `dry_run`, settling, elements.
    pub run: RunOptions,
    /// The monitor tools use when they name none (`None`: the primary one).
    pub monitor: Option<usize>,
}

/// What every handler shares: the planner, the desktop, the model queue, the settings.
pub(crate) struct Shared {
    pub brain: Brain,
    pub desktop: Arc<DesktopGate>,
    pub queue: ModelQueue,
    pub config: ServeConfig,
}

/// A server whose listeners are bound (so their addresses, port 0 resolved, are known) and
/// that serves once [`run`](Self::run) is awaited.
pub struct BoundServer {
    shared: Arc<Shared>,
    mcp_stdio: bool,
    http: Vec<(SocketAddr, tokio::net::TcpListener, axum::Router)>,
    endpoints: Vec<String>,
}

impl std::fmt::Debug for BoundServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundServer")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl BoundServer {
    /// Checks the configuration against the access rules and binds every listener. Call
    /// inside a tokio runtime. Errors: [`Error::InvalidInput`] for a non-loopback address
    /// without `listen_any` and a token, an address that cannot be bound, nothing to serve.
    pub async fn bind(config: ServeConfig, brain: Brain) -> Result<Self> {
        if config.mcp.is_none() && config.openai.is_none() {
            return Err(Error::invalid_input(
                "nothing to serve: give --mcp stdio|http://127.0.0.1:PORT, --openai \
                 127.0.0.1:PORT, or both",
            ));
        }
        let mut wanted: Vec<SocketAddr> = Vec::new();
        if let Some(McpListen::Http { addr, .. }) = &config.mcp {
            wanted.push(*addr);
        }
        if let Some(addr) = config.openai {
            wanted.push(addr);
        }
        for addr in &wanted {
            config.access.check_bind(*addr)?;
        }
        let shared = Arc::new(Shared {
            queue: ModelQueue::new(config.limits.max_queue),
            desktop: Arc::new(DesktopGate::default()),
            brain,
            config,
        });
        let mut routers: Vec<(SocketAddr, axum::Router, Vec<String>)> = Vec::new();
        let mut add = |addr: SocketAddr, router: axum::Router, what: String| match routers
            .iter_mut()
            .find(|(a, _, _)| *a == addr && addr.port() != 0)
        {
            // One listener serves both when they share an address.
            Some((_, existing, names)) => {
                *existing = std::mem::take(existing).merge(router);
                names.push(what);
            }
            None => routers.push((addr, router, vec![what])),
        };
        let mut mcp_stdio = false;
        match &shared.config.mcp {
            Some(McpListen::Stdio) => mcp_stdio = true,
            Some(McpListen::Http { addr, path }) => add(
                *addr,
                mcp::http_router(Arc::clone(&shared), path),
                format!("MCP (streamable HTTP) at {path}"),
            ),
            None => {}
        }
        if let Some(addr) = shared.config.openai {
            add(
                addr,
                openai::router(Arc::clone(&shared)),
                "OpenAI-compatible API at /v1 (health at /health)".to_string(),
            );
        }
        let mut http = Vec::new();
        let mut endpoints = Vec::new();
        if mcp_stdio {
            endpoints.push("MCP on stdio".to_string());
        }
        for (addr, router, names) in routers {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| Error::invalid_input_caused(format!("cannot listen on {addr}"), e))?;
            let bound = listener
                .local_addr()
                .map_err(|e| Error::invalid_input_caused(format!("listening on {addr}"), e))?;
            let router = auth::guard(router, &shared.config);
            for name in names {
                endpoints.push(format!("{name} on http://{bound}"));
            }
            http.push((bound, listener, router));
        }
        Ok(Self {
            shared,
            mcp_stdio,
            http,
            endpoints,
        })
    }

    /// What is served where, one line each (`MCP (streamable HTTP) at /mcp on
    /// http://127.0.0.1:8765`), with bound ports.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// Serves until the MCP stdio session ends (its host closed stdin) or, without one,
    /// until the process is stopped. Errors: a listener that fails.
    pub async fn run(self) -> Result<()> {
        let mut tasks = tokio::task::JoinSet::new();
        for (addr, listener, router) in self.http {
            tasks.spawn(async move {
                axum::serve(listener, router)
                    .await
                    .map_err(|e| Error::invalid_input_caused(format!("serving on {addr}"), e))
            });
        }
        if self.mcp_stdio {
            let shared = Arc::clone(&self.shared);
            // The stdio session is the server's life: its host ends it by closing stdin.
            return tokio::select! {
                ended = mcp::serve_stdio(shared) => ended,
                Some(failed) = tasks.join_next() => flatten(failed),
            };
        }
        match tasks.join_next().await {
            Some(failed) => flatten(failed),
            None => Ok(()),
        }
    }
}

fn flatten(joined: std::result::Result<Result<()>, tokio::task::JoinError>) -> Result<()> {
    joined.map_err(|e| Error::internal(format!("a listener task failed: {e}")))?
}
