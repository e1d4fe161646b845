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
mod server;

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

pub use auth::{Access, MIN_TOKEN_CHARS, TOKEN_ENV};
pub use brain::{Brain, OwnedTurn, Planned};
pub use desktop::{BusyError, DesktopGate, DesktopLease};
pub use images::{image_from_base64, image_from_url, MAX_IMAGE_BYTES};
pub use queue::{Interrupt, ModelQueue, QueueError};
pub use server::BoundServer;

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
