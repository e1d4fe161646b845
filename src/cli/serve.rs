//! `sightline serve`: the agent as an MCP server (`--mcp`) and the loaded model behind an
//! OpenAI-compatible endpoint (`--openai`), one model loaded once for both.
//!
//! Everything the server says goes to stderr: on `--mcp stdio`, stdout is the protocol's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sightline::planner::LocalPlanner;
use sightline::runner::{Grants, ReplayPlanner, RunOptions};
use sightline::serve::{
    parse_listen_addr, Access, BoundServer, Brain, McpListen, ServeConfig, ServeLimits, TOKEN_ENV,
};
use sightline::settings::{ModelArgs, RunBudgetArgs};

/// Arguments of `sightline serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Serve MCP: `stdio` (what a desktop MCP host starts) or streamable HTTP at
    /// `http://127.0.0.1:PORT[/PATH]` (path default /mcp).
    #[arg(long, value_name = "stdio|http://HOST:PORT")]
    pub mcp: Option<McpListen>,
    /// Serve the OpenAI-compatible API (/v1/models, /v1/chat/completions, /health) on
    /// HOST:PORT.
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_listen_addr)]
    pub openai: Option<std::net::SocketAddr>,
    /// Allow listening on an address other than loopback; needs a bearer token.
    #[arg(long)]
    pub listen_any: bool,
    /// The bearer token every HTTP request must carry (also read from SIGHTLINE_TOKEN, which
    /// `ps` does not show).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Answer `plan`, `verify`, `run` and the `sightline` chat model with recorded moves
    /// (JSONL of NextMoves, or a trace) instead of a model; no chat model is served.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "model")]
    pub replay: Option<PathBuf>,
    /// Allow a kind of destructive step for every `act` and `run` of this server: delete,
    /// overwrite, close, send, pay, system or shell (`--allow delete:~/tmp/**`). No tool
    /// argument can add one.
    #[arg(long = "allow", value_name = "KIND[:PATHS]")]
    pub allow: Vec<String>,
    #[command(flatten)]
    pub budget: RunBudgetArgs,
    /// `act` and `run` send no input: each step is reported as it would run.
    #[arg(long)]
    pub dry_run: bool,
    /// Monitor the tools use when a call names none (default: the primary monitor).
    #[arg(long)]
    pub monitor: Option<usize>,
    /// Read no elements from the accessibility tree.
    #[arg(long)]
    pub no_elements: bool,
    /// Largest request body, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_request_mb: u32,
    /// Model calls that may wait while one runs; more are refused at once (503).
    #[arg(long, default_value_t = 16)]
    pub max_queue: usize,
    /// Seconds one request may wait for the model and use it.
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: u64,
    /// Most tokens one chat completion may generate.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: u32,
}

/// Runs the server until its stdio session ends or the process is stopped.
pub fn serve(args: &ServeArgs) -> anyhow::Result<i32> {
    // Grants and access are checked first: a typo is a usage error before any load.
    let grants = Grants::parse(&args.allow)?;
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()));
    let access = Access {
        listen_any: args.listen_any,
        token,
    };
    if args.mcp.is_none() && args.openai.is_none() {
        anyhow::bail!("nothing to serve: give --mcp stdio|http://127.0.0.1:PORT, --openai 127.0.0.1:PORT, or both");
    }
    // Where the server may listen is settled before a model is loaded for it.
    let http_mcp = match &args.mcp {
        Some(McpListen::Http { addr, .. }) => Some(*addr),
        _ => None,
    };
    for addr in http_mcp.iter().chain(args.openai.iter()) {
        access.check_bind(*addr)?;
    }
    let brain = match &args.replay {
        Some(path) => Brain::Replay {
            planner: Arc::new(ReplayPlanner::from_path(path)?),
            label: format!("replay {}", path.display()),
        },
        None => {
            let model = args.model.resolve()?;
            let planner = LocalPlanner::load(&args.model.planner_options(&model)?)?;
            eprintln!("{}", planner.report().summary());
            Brain::Model {
                planner,
                name: served_name(&model.spec),
            }
        }
    };
    let config = ServeConfig {
        mcp: args.mcp.clone(),
        openai: args.openai,
        access,
        limits: ServeLimits {
            max_request_bytes: (args.max_request_mb as usize) << 20,
            max_queue: args.max_queue,
            request_timeout: Duration::from_secs(args.request_timeout),
            max_tokens: args.max_tokens as usize,
            ..ServeLimits::default()
        },
        run: RunOptions {
            limits: args.budget.limits(),
            max_failures: args.budget.max_failures,
            dry_run: args.dry_run,
            confirm: false,
            grants,
            trace_dir: None,
            use_elements: !args.no_elements,
            planner_label: brain.label().to_string(),
            ..RunOptions::default()
        },
        monitor: args.monitor,
    };
    let allowed: Vec<String> = config.run.grants.iter().map(|g| g.to_string()).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    rt.block_on(async move {
        let server = BoundServer::bind(config, brain).await?;
        for line in server.endpoints() {
            eprintln!("serving {line}");
        }
        eprintln!(
            "allowed: {}{}",
            if allowed.is_empty() {
                "nothing destructive".to_string()
            } else {
                allowed.join(" ")
            },
            if args.dry_run {
                " (dry run: no input)"
            } else {
                ""
            }
        );
        server.run().await?;
        anyhow::Ok(())
    })?;
    Ok(sightline::exit_code::SUCCESS)
}

/// The name chat clients use for the model: the `--model` text, or a path's or repo id's
/// last part (`models/tiny-b` → `tiny-b`).
fn served_name(spec: &str) -> String {
    Path::new(spec.trim_end_matches('/'))
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(spec)
        .to_string()
}
