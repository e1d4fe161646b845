//! Binding the configured listeners and serving them: MCP on stdio, and one HTTP listener
//! per address (the MCP endpoint and the OpenAI API share one when they share an address).

use std::net::SocketAddr;
use std::sync::Arc;

use super::desktop::DesktopGate;
use super::queue::ModelQueue;
use super::{auth, mcp, openai, Brain, McpListen, ServeConfig, Shared};
use crate::error::{Error, Result};

/// A server whose listeners are bound (so their addresses, port 0 resolved, are known) and
/// that serves once [`run`](Self::run) is awaited.
pub struct BoundServer {
    shared: Arc<Shared>,
    mcp_stdio: bool,
    http: Vec<(SocketAddr, tokio::net::TcpListener, axum::Router)>,
    endpoints: Vec<String>,
}

crate::debug_fields::debug_fields!(BoundServer { endpoints });

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
            let router = auth::guard(router, &shared.config.access);
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
