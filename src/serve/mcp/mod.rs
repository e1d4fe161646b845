//! The MCP server: tools `view`, `plan`, `act`, `run` and `verify` (rmcp), over stdio or
//! streamable HTTP.
//!
//! A tool that needs the screen takes the desktop for the whole call, or answers at once that
//! another call has it ([`BusyError`](super::BusyError)); a tool that needs the model waits in
//! the model's queue. `run` sends a progress notification per batch and per step when the
//! client gives a progress token, and stops between steps when the client cancels the call
//! (as for Ctrl-C in `sightline run`).
//!
//! Failures the caller should read (a busy desktop, an unreadable screen, a refused step, a
//! failed run) are tool results with `isError`, whose text says what happened; malformed
//! arguments are protocol errors (invalid params).

mod params;
mod results;

use std::sync::Arc;

use cel_contracts::{AttemptRecord, NextMove};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{
    tool, tool_handler, tool_router, ErrorData, Peer, RoleServer, ServerHandler, ServiceExt,
};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use super::brain::{OwnedTurn, Planned};
use super::desktop::{ProgressLines, RunJob, Screen, Seat};
use super::queue::QueueError;
use super::Shared;
use crate::error::{Error, Result};
use crate::runner::{RunOptions, StopFlag};
use params::{ActParams, PlanParams, RunParams, ScreenArgs, VerifyParams, ViewParams};

/// What the server tells a host about itself.
const INSTRUCTIONS: &str = "Sightline drives this computer's desktop with a local vision model. \
`view` shows the screen and its elements (ids usable as targets); `plan` asks the model for the \
next move toward a goal; `act` executes one move through the safety gate; `run` pursues a whole \
goal (progress per step; cancel to stop it); `verify` judges whether a goal is done. Steps the \
gate refuses come back as refusals naming the permission that would allow them: permissions are \
given by the user when the server starts (--allow), never by a tool argument. One call drives \
the screen at a time.";

/// The MCP handler; each session gets a clone over the same shared state.
#[derive(Clone)]
pub struct SightlineMcp {
    shared: Arc<Shared>,
}

crate::debug_fields::debug_fields!(SightlineMcp {});

/// A tool's failure as the host shows it: one line, `isError`.
fn failed(message: impl std::fmt::Display) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.to_string())])
}

/// The brain's answer as the tool's result (under `key`, see [`results::planned`]), or its
/// failure.
fn answered<T: serde::Serialize>(
    answer: std::result::Result<Planned<T>, QueueError>,
    key: &str,
) -> CallToolResult {
    answer.map_or_else(failed, |planned| results::planned(&planned, key))
}

/// A caller's malformed argument.
fn bad_params(e: Error) -> ErrorData {
    ErrorData::invalid_params(e.to_string(), None)
}

#[tool_router]
impl SightlineMcp {
    fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    fn seat(&self, monitor: Option<usize>) -> Seat {
        Seat {
            monitor: monitor.or(self.shared.config.monitor),
            use_elements: self.shared.config.run.use_elements,
        }
    }

    /// Captures the current screen (taking the desktop for it), or `Err` with the tool
    /// result to answer.
    async fn current_screen(
        &self,
        monitor: Option<usize>,
        goal: &str,
        why: &str,
    ) -> std::result::Result<Screen, CallToolResult> {
        let lease = self.shared.desktop.try_take(why).map_err(failed)?;
        let seat = self.seat(monitor);
        let goal = goal.to_string();
        tokio::task::spawn_blocking(move || seat.look(&lease, &goal))
            .await
            .map_err(|e| failed(format!("capturing the screen failed: {e}")))?
            .map_err(|e| failed(format!("cannot read the screen: {e}")))
    }

    /// The turn of a `plan` or `verify` call, on its screenshot and view (see
    /// [`ScreenArgs`]); no memory is `null`.
    async fn turn(
        &self,
        goal: String,
        history: Vec<AttemptRecord>,
        memory: Option<serde_json::Value>,
        screen: &ScreenArgs,
        why: &str,
    ) -> std::result::Result<OwnedTurn, ErrorOrResult> {
        let (screenshot, view) = if screen.wants_current_screen() {
            let seen = self
                .current_screen(screen.monitor, &goal, why)
                .await
                .map_err(ErrorOrResult::Result)?;
            (Some(seen.png), seen.view)
        } else {
            let screenshot = screen
                .screenshot()
                .map_err(|e| ErrorOrResult::Error(bad_params(e)))?;
            let view = screen
                .view()
                .map_err(|e| ErrorOrResult::Error(bad_params(e)))?
                .unwrap_or_else(|| crate::view::empty_view(&goal));
            (screenshot, view)
        };
        Ok(OwnedTurn {
            goal,
            history,
            memory: memory.unwrap_or(serde_json::Value::Null),
            view,
            screenshot,
        })
    }

    #[tool(
        description = "The current screen: a PNG screenshot and, as JSON, the planning view \
                       (the elements a planner sees, with ids usable as targets) and the \
                       element table with bounds in screen pixels.",
        annotations(read_only_hint = true)
    )]
    async fn view(
        &self,
        Parameters(p): Parameters<ViewParams>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        match self.current_screen(p.monitor, &p.goal, "view").await {
            Ok(screen) => Ok(results::view(&screen)),
            Err(answer) => Ok(answer),
        }
    }

    #[tool(
        description = "Ask the local model for the next move toward a goal: a cel-contracts \
                       NextMove (batch of steps, done, clarify or fail), with the turn's stage \
                       times. Plans on the current screen unless a screenshot or view is given; \
                       executes nothing (see act).",
        annotations(read_only_hint = true)
    )]
    async fn plan(
        &self,
        Parameters(p): Parameters<PlanParams>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        let history = params::history(p.history).map_err(bad_params)?;
        let turn = match self
            .turn(p.goal, history, p.memory, &p.screen, "plan")
            .await
        {
            Ok(turn) => turn,
            Err(e) => return e.into(),
        };
        let shared = &self.shared;
        let timeout = shared.config.limits.request_timeout;
        let planned = shared.brain.plan(&shared.queue, timeout, turn).await;
        Ok(answered(planned, "move"))
    }

    #[tool(
        description = "Judge whether a goal is done on the current screen (or a given \
                       screenshot and view): a cel-contracts DoneVerdict with a reason and a \
                       hint when rejected.",
        annotations(read_only_hint = true)
    )]
    async fn verify(
        &self,
        Parameters(p): Parameters<VerifyParams>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        let turn = match self
            .turn(p.goal, Vec::new(), p.memory, &p.screen, "verify")
            .await
        {
            Ok(turn) => turn,
            Err(e) => return e.into(),
        };
        let shared = &self.shared;
        let timeout = shared.config.limits.request_timeout;
        let verdict = shared
            .brain
            .verify(&shared.queue, timeout, turn, p.summary)
            .await;
        Ok(answered(verdict, "verdict"))
    }

    #[tool(
        description = "Execute one move (a batch of steps) on the desktop through the same \
                       safety gate and target resolver as a run, and report each step: done, \
                       failed, or refused with the permission that would allow it.",
        annotations(destructive_hint = true)
    )]
    async fn act(
        &self,
        Parameters(p): Parameters<ActParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        let next_move = params::batch(p.next_move).map_err(bad_params)?;
        let purpose = match &next_move {
            NextMove::Batch { purpose, .. } => purpose.clone(),
            _ => String::new(),
        };
        let goal = p.goal.unwrap_or_else(|| purpose.clone());
        let lease = match self.shared.desktop.try_take(&format!("act {purpose:?}")) {
            Ok(lease) => lease,
            Err(busy) => return Ok(failed(busy)),
        };
        let mut options = self.shared.config.run.clone();
        options.dry_run |= p.dry_run;
        let seat = self.seat(p.monitor);
        let acted = on_the_desktop(&ctx, move |stop, observer| {
            seat.act(&lease, options, stop, &goal, next_move, observer)
        })
        .await;
        match acted {
            Ok(Ok(report)) => Ok(results::acted(&report)),
            Ok(Err(e)) => Ok(failed(format!("act failed: {e}"))),
            Err(e) => Ok(failed(format!("act failed: {e}"))),
        }
    }

    #[tool(
        description = "Pursue a whole goal on the desktop with the local model (observe, plan, \
                       act through the safety gate, verify) until it is done, refused, failed or \
                       out of budget. Sends a progress notification per batch and per step; \
                       cancel the call to stop between steps.",
        annotations(destructive_hint = true)
    )]
    async fn run(
        &self,
        Parameters(p): Parameters<RunParams>,
        ctx: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        if p.goal.trim().is_empty() {
            return Err(bad_params(Error::invalid_input("the goal is empty")));
        }
        let lease = match self.shared.desktop.try_take(&format!("run {:?}", p.goal)) {
            Ok(lease) => lease,
            Err(busy) => return Ok(failed(busy)),
        };
        let options = run_options(&self.shared.config.run, &p);
        let seat = self.seat(p.monitor);
        let brain = &self.shared.brain;
        let job = RunJob {
            goal: p.goal,
            planner: brain.producer(),
            stats: brain.model().map(|planner| {
                let planner = planner.clone();
                Box::new(move || {
                    let stats = planner.last_stats().ok()?;
                    serde_json::to_value(stats.stage_times()).ok()
                }) as crate::runner::PlannerStats
            }),
        };
        let ran = on_the_desktop(&ctx, move |stop, observer| {
            seat.run(&lease, options, stop, job, observer)
        })
        .await;
        match ran {
            Ok(Ok(report)) => Ok(results::ran(&report)),
            Ok(Err(e)) => Ok(failed(format!("the run could not start: {e}"))),
            Err(e) => Ok(failed(format!("the run failed: {e}"))),
        }
    }
}

#[tool_handler]
impl ServerHandler for SightlineMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("sightline", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// A tool's early answer: a protocol error (bad arguments) or a result to return.
enum ErrorOrResult {
    Error(ErrorData),
    Result(CallToolResult),
}

impl From<ErrorOrResult> for std::result::Result<CallToolResult, ErrorData> {
    fn from(e: ErrorOrResult) -> Self {
        match e {
            ErrorOrResult::Error(e) => Err(e),
            ErrorOrResult::Result(r) => Ok(r),
        }
    }
}

/// The server's run options with a call's stricter budgets and dry run: a call may lower a
/// budget, never raise it.
fn run_options(server: &RunOptions, p: &RunParams) -> RunOptions {
    let mut options = server.clone();
    let limits = &mut options.limits;
    if let Some(n) = p.max_steps {
        limits.max_steps = limits.max_steps.min(n.max(1));
    }
    if let Some(s) = p.timeout_s {
        limits.timeout_ms = limits.timeout_ms.min(s.max(1).saturating_mul(1000));
    }
    if let Some(n) = p.max_failures {
        options.max_failures = options.max_failures.min(n.max(1));
    }
    options.dry_run |= p.dry_run;
    options
}

/// Runs `job` (an `act` or a `run`) on a blocking thread, with a stop flag set when the call
/// is cancelled and an observer that sends each progress line as a notification; returns
/// once every notification has gone out, so that none follows the result.
async fn on_the_desktop<T: Send + 'static>(
    ctx: &RequestContext<RoleServer>,
    job: impl FnOnce(StopFlag, &mut ProgressLines) -> T + Send + 'static,
) -> std::result::Result<T, tokio::task::JoinError> {
    let (stop, watcher) = stop_on_cancel(ctx.ct.clone().cancelled_owned());
    let (lines, forwarder) = forward_progress(ctx.peer.clone(), ctx.meta.get_progress_token());
    // The observer is dropped when `job` returns, which closes the channel and ends the
    // forwarder.
    let done = tokio::task::spawn_blocking(move || job(stop, &mut ProgressLines(lines))).await;
    watcher.abort();
    let _ = forwarder.await;
    done
}

/// A stop flag set when the call is cancelled (the client's cancel, or its connection
/// closing), and the task that watches for it.
fn stop_on_cancel(
    cancelled: impl std::future::Future<Output = ()> + Send + 'static,
) -> (StopFlag, tokio::task::JoinHandle<()>) {
    let stop = StopFlag::new();
    let flag = stop.clone();
    let watcher = tokio::spawn(async move {
        cancelled.await;
        flag.request_stop();
    });
    (stop, watcher)
}

/// A channel of progress lines and the task that sends each as a progress notification
/// (numbered from 1) while the client gave a token; it ends when the channel closes.
fn forward_progress(
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
) -> (UnboundedSender<String>, tokio::task::JoinHandle<()>) {
    let (lines, mut rx) = unbounded_channel::<String>();
    let forwarder = tokio::spawn(async move {
        let mut progress = 0u32;
        while let Some(line) = rx.recv().await {
            progress += 1;
            if let Some(token) = &token {
                let param = ProgressNotificationParam::new(token.clone(), f64::from(progress))
                    .with_message(line);
                if let Err(e) = peer.notify_progress(param).await {
                    tracing::debug!("progress notification not sent: {e}");
                }
            }
        }
    });
    (lines, forwarder)
}

/// The router serving MCP over streamable HTTP at `path`.
pub(crate) fn http_router(shared: Arc<Shared>, path: &str) -> axum::Router {
    let mut config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(shared.config.limits.max_request_bytes);
    if shared.config.access.listen_any {
        // The bearer token guards a server on another address; host names are the
        // deployment's (the access layer checks them on loopback).
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || Ok(SightlineMcp::new(Arc::clone(&shared))),
        LocalSessionManager::default().into(),
        config,
    );
    axum::Router::new().nest_service(path, service)
}

/// Serves one MCP session on stdin and stdout until the host closes it.
pub(crate) async fn serve_stdio(shared: Arc<Shared>) -> Result<()> {
    let session = SightlineMcp::new(shared)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::invalid_input(format!("MCP on stdio: {e}")))?;
    session
        .waiting()
        .await
        .map_err(|e| Error::internal(format!("MCP on stdio: {e}")))?;
    Ok(())
}
