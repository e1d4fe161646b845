//! The desktop runner: observe → decide → act, until the planner is done, refuses, fails or a
//! budget runs out (feature `desktop`).
//!
//! One turn: capture the chosen monitor with xcap and read the focused window; build a
//! [`PlanningView`] (screen, capabilities `native_input` and `vision`, the caller's elements);
//! ask any [`PlanProducer`] for the next move; run a batch's steps one by one with enigo; wait
//! for the screen to settle; look again. The runner knows the planner only through the trait, so
//! a model, a [`ReplayPlanner`] or a hosted planner are the same to it.
//!
//! Safety lives here, not only in the prompt (DESIGN.md, decision 9): budgets from
//! [`RunLimits`], `dry_run`, `confirm` (a [`ConfirmPrompt`] per batch), the top-left-corner
//! fail-safe and the Ctrl-C [`StopFlag`] (both checked between steps), and the destructive-step
//! gate ([`safety::check_step`]), which ends the run as [`GoalOutcome::Refused`]
//! ([`EndReason::EndedOnRefusal`]) unless the goal confirms the step. The gate applies in a dry
//! run too, so a dry run shows what a real run would refuse.
//!
//! ```no_run
//! use sightline::runner::{NoopObserver, ReplayPlanner, RunOptions, Runner, XDesktop};
//!
//! # async fn demo() -> sightline::Result<()> {
//! let planner = ReplayPlanner::from_path("moves.jsonl".as_ref())?;
//! let desktop = XDesktop::open(None)?; // the primary monitor of $DISPLAY
//! let mut runner = Runner::new(Box::new(desktop), RunOptions::default());
//! let report = runner.run("open the settings", &planner, &mut NoopObserver).await?;
//! println!("{:?} after {} steps", report.outcome, report.steps_used);
//! # Ok(())
//! # }
//! ```
//!
//! Budgets are checked between steps and after each planner call: a `decide_next` in progress
//! is not interrupted, so a slow planner can overrun `timeout_ms` by one call.
//!
//! Which actions run: `click`, `type`, `key`, `key_combo`, `scroll`, `drag`, `wait`, `select`,
//! `extract` and nested `batch`. Targets are `xy:X,Y` points (0–1000 over the screenshot the
//! planner saw, see [`coords`]) or element ids a caller's [`TargetResolver`] knows. Any other
//! action (`cdp_eval`, `navigate`, `set_value`, `ax_action`, …) is a non-recoverable step error
//! that says why, never a silent skip.

pub mod capture;
pub mod coords;
pub mod input;
pub mod replay;
pub mod safety;
pub mod trace;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cel_contracts::{
    AttemptRecord, CapabilityRef, DoneVerdict, FailureReport, GoalOutcome, NextMove, PlanProducer,
    PlannedAction, PlanningElement, PlanningScreen, PlanningView, RunLimits, RunProgress, Step,
    StepResult,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub use capture::{list_monitors, Capture, MonitorInfo, ScreenCapturer};
pub use coords::{InputPoint, RelativePoint, ScreenGeometry};
pub use input::{parse_key, parse_key_chord, ButtonAction, EnigoInput, InputDevice, KEY_NAMES};
pub use replay::ReplayPlanner;
pub use safety::{ConfirmPrompt, ScriptedPrompt, StopFlag, TerminalPrompt};
pub use trace::{RunMeta, TraceWriter, TurnRecord};

use crate::error::{Error, Result};
use crate::view::view_of;

/// The capability id announcing native mouse and keyboard input.
pub const CAPABILITY_NATIVE_INPUT: &str = "native_input";
/// The capability id announcing that a screenshot accompanies the view.
pub const CAPABILITY_VISION: &str = "vision";
/// Longest single `wait` step honoured; longer waits are cut to this (the run's timeout still
/// applies on top).
pub const MAX_WAIT_MS: u64 = 60_000;
/// Scroll amounts up to this magnitude are wheel notches; larger ones are taken as pixels
/// (planners trained on web agents often emit pixel deltas such as 300).
pub const MAX_SCROLL_NOTCHES: i32 = 25;
/// Pixels per wheel notch when a scroll amount is taken as pixels.
pub const SCROLL_PIXELS_PER_NOTCH: i32 = 100;
/// Intermediate pointer positions of a drag, so applications see motion between press and
/// release.
const DRAG_MOTION_STEPS: i32 = 10;

// ─── Desktop ────────────────────────────────────────────────────────────────

/// What the runner drives: a screen to capture and an input device.
pub trait Desktop {
    /// Captures the chosen monitor.
    fn capture(&mut self) -> Result<Capture>;
    /// The input device.
    fn input(&mut self) -> &mut dyn InputDevice;
}

/// The real desktop: xcap for screenshots, enigo for input, on `$DISPLAY`.
#[derive(Debug)]
pub struct XDesktop {
    capturer: ScreenCapturer,
    input: EnigoInput,
}

impl XDesktop {
    /// Opens monitor `monitor` (the primary one when `None`) and the input backend. Fails with
    /// a clear [`Error::Runner`] when there is no display, no such monitor, or no input backend.
    pub fn open(monitor: Option<usize>) -> Result<Self> {
        capture::check_display_env()?;
        let capturer = ScreenCapturer::open(monitor)?;
        let input = EnigoInput::connect(None)?;
        Ok(Self { capturer, input })
    }

    /// The monitor being driven.
    pub fn monitor(&self) -> &MonitorInfo {
        self.capturer.monitor()
    }
}

impl Desktop for XDesktop {
    fn capture(&mut self) -> Result<Capture> {
        self.capturer.capture()
    }

    fn input(&mut self) -> &mut dyn InputDevice {
        &mut self.input
    }
}

// ─── Target resolution ──────────────────────────────────────────────────────

/// Turns a target id into a point on screen.
pub trait TargetResolver: Send + Sync {
    /// Resolves `target_id` against the view and the screenshot geometry the planner saw.
    fn resolve(
        &self,
        target_id: &str,
        view: &PlanningView,
        geometry: &ScreenGeometry,
    ) -> Result<InputPoint>;
}

/// The default resolver: only `xy:X,Y` points. Element ids are an error that says a resolver
/// is needed, since a [`PlanningElement`] carries no bounds.
#[derive(Debug, Default, Clone, Copy)]
pub struct XyResolver;

impl TargetResolver for XyResolver {
    fn resolve(
        &self,
        target_id: &str,
        view: &PlanningView,
        geometry: &ScreenGeometry,
    ) -> Result<InputPoint> {
        match coords::parse_xy_target(target_id)? {
            Some(p) => geometry.to_input(p),
            None => {
                let known = view.elements.iter().any(|e| e.id == target_id);
                Err(Error::Runner(format!(
                    "target {target_id:?} is not an xy:X,Y point{}; this runner resolves only \
                     coordinate targets (give it a TargetResolver for element ids)",
                    if known {
                        " (it is an element of the view, but elements carry no screen bounds)"
                    } else {
                        " and not an element of the view"
                    }
                )))
            }
        }
    }
}

// ─── Options, events, report ────────────────────────────────────────────────

/// How long to wait for the screen to settle after a batch's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleOptions {
    /// Always wait this long first, so the application has received the events.
    pub min_ms: u64,
    /// Give up waiting for two identical frames after this long.
    pub max_ms: u64,
    /// Time between the frames compared.
    pub poll_ms: u64,
}

impl Default for SettleOptions {
    fn default() -> Self {
        Self {
            min_ms: 100,
            max_ms: 2_000,
            poll_ms: 150,
        }
    }
}

/// Everything a run is configured with besides the goal and the planner.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Budgets: `max_steps`, `timeout_ms`, `max_step_retries`.
    pub limits: RunLimits,
    /// Plan and report, execute no input.
    pub dry_run: bool,
    /// Ask the [`ConfirmPrompt`] before each batch.
    pub confirm: bool,
    /// Waiting for the screen after input.
    pub settle: SettleOptions,
    /// Pause between the steps of a batch, in milliseconds, so applications process events.
    pub step_pause_ms: u64,
    /// Write a trace here.
    pub trace_dir: Option<PathBuf>,
    /// Elements a caller knows about (from accessibility or DOM); empty from vision alone.
    pub elements: Vec<PlanningElement>,
    /// The planner's label for the trace (model id, replay file).
    pub planner_label: String,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            limits: RunLimits::default(),
            dry_run: false,
            confirm: false,
            settle: SettleOptions::default(),
            step_pause_ms: 50,
            trace_dir: None,
            elements: Vec::new(),
            planner_label: String::new(),
        }
    }
}

/// Which budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// `RunLimits::max_steps`.
    MaxSteps,
    /// `RunLimits::timeout_ms`.
    Timeout,
    /// `RunLimits::max_step_retries` for one step.
    StepRetries,
}

/// Why a run ended, finer than [`GoalOutcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum EndReason {
    /// `done`, accepted by `verify_done`.
    Succeeded,
    /// The planner answered `clarify`.
    Clarified,
    /// The destructive-step gate refused a step the goal did not confirm.
    EndedOnRefusal,
    /// The user declined a batch at the `--confirm` prompt.
    Declined,
    /// The planner answered `fail`.
    PlannerGaveUp,
    /// `decide_next` or `verify_done` returned an error.
    PlannerError,
    /// A step failed with a non-recoverable error.
    StepFailed,
    /// A budget ran out.
    BudgetExhausted {
        /// Which one.
        budget: Budget,
    },
    /// Ctrl-C (the stop flag).
    Interrupted,
    /// The pointer was moved into the top-left corner.
    FailSafe,
    /// Capturing the screen failed in the middle of the run.
    CaptureFailed,
}

impl EndReason {
    /// Whether the user stopped the run (Ctrl-C or the corner fail-safe).
    pub fn is_user_abort(self) -> bool {
        matches!(self, EndReason::Interrupted | EndReason::FailSafe)
    }
}

/// The result of a run.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The contract's outcome.
    pub outcome: GoalOutcome,
    /// Why the run ended.
    pub end: EndReason,
    /// Every attempt, oldest first, as the planner saw them.
    pub history: Vec<AttemptRecord>,
    /// Data extracted along the way.
    pub shared_memory: Value,
    /// Turns taken.
    pub turns: u32,
    /// Steps counted against `max_steps`.
    pub steps_used: u32,
    /// Wall-clock duration in milliseconds.
    pub elapsed_ms: u64,
    /// Where the trace was written.
    pub trace_dir: Option<PathBuf>,
}

/// Hears about a run as it goes (the CLI prints one line per call).
pub trait RunObserver {
    /// A batch is about to run.
    fn on_batch(&mut self, _turn: u32, _purpose: &str, _steps: &[Step]) {}
    /// A step attempt finished (or was skipped in a dry run).
    fn on_step(&mut self, _step: &Step, _attempt: u32, _result: &StepResult) {}
    /// The gate refused a step.
    fn on_refusal(&mut self, _step: &Step, _message: &str) {}
    /// The planner claimed `done` and the claim was checked.
    fn on_verdict(&mut self, _summary: &str, _verdict: &DoneVerdict) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopObserver;

impl RunObserver for NoopObserver {}

// ─── The runner ─────────────────────────────────────────────────────────────

/// Runs goals on a [`Desktop`].
pub struct Runner {
    desktop: Box<dyn Desktop>,
    options: RunOptions,
    resolver: Box<dyn TargetResolver>,
    prompt: Box<dyn ConfirmPrompt>,
    stop: StopFlag,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The state of one run, threaded through its turns.
struct RunState {
    start: Instant,
    deadline: Instant,
    history: Vec<AttemptRecord>,
    memory: Value,
    steps_used: u32,
    turns: u32,
    /// Where the runner itself last put the pointer: the fail-safe ignores that position, so a
    /// planned click at `xy:0,0` does not abort the run.
    runner_pointer: Option<InputPoint>,
    /// A capture taken while settling, reused as the next turn's observation.
    pending_capture: Option<Capture>,
    /// Geometry of the last capture, for the fail-safe.
    geometry: Option<ScreenGeometry>,
}

/// What one turn works from: the goal, the planner, and what it observed.
struct TurnInput<'a> {
    goal: &'a str,
    planner: &'a dyn PlanProducer,
    view: &'a PlanningView,
    geometry: ScreenGeometry,
    png: &'a [u8],
}

/// A failed step, before it becomes a [`StepResult::Err`].
struct StepError {
    message: String,
    recoverable: bool,
}

/// How a turn ended.
enum TurnEnd {
    Continue,
    Finish(GoalOutcome, EndReason),
}

impl Runner {
    /// A runner on `desktop` with the default [`XyResolver`], the [`TerminalPrompt`] and a fresh
    /// [`StopFlag`].
    pub fn new(desktop: Box<dyn Desktop>, options: RunOptions) -> Self {
        Self {
            desktop,
            options,
            resolver: Box::new(XyResolver),
            prompt: Box::new(TerminalPrompt),
            stop: StopFlag::new(),
        }
    }

    /// Uses another target resolver (for element ids).
    pub fn with_resolver(mut self, resolver: Box<dyn TargetResolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Uses another source of `--confirm` answers.
    pub fn with_prompt(mut self, prompt: Box<dyn ConfirmPrompt>) -> Self {
        self.prompt = prompt;
        self
    }

    /// Shares a stop flag (set it from a Ctrl-C handler or another thread).
    pub fn with_stop_flag(mut self, stop: StopFlag) -> Self {
        self.stop = stop;
        self
    }

    /// The stop flag this runner checks between steps.
    pub fn stop_flag(&self) -> &StopFlag {
        &self.stop
    }

    /// The options.
    pub fn options(&self) -> &RunOptions {
        &self.options
    }

    /// Runs `goal` with `planner` until it ends.
    ///
    /// Returns `Err` only for setup failures: the first screenshot cannot be taken, or the trace
    /// directory cannot be written (a trace that fails mid-run also stops the run, rather than
    /// leave the user without the record they asked for). Everything after that ends in a [`RunReport`]. The future
    /// blocks its thread while input is sent and the screen settles; drive it with `block_on`
    /// or on a dedicated thread.
    pub async fn run(
        &mut self,
        goal: &str,
        planner: &dyn PlanProducer,
        observer: &mut dyn RunObserver,
    ) -> Result<RunReport> {
        let start = Instant::now();
        let limits = self.options.limits.clone();
        let mut state = RunState {
            start,
            deadline: start + Duration::from_millis(limits.timeout_ms),
            history: Vec::new(),
            memory: json!({}),
            steps_used: 0,
            turns: 0,
            runner_pointer: None,
            pending_capture: None,
            geometry: None,
        };
        // The first capture is part of setup: no display, no monitor or denied capture is an
        // error for the caller, not a run outcome.
        state.pending_capture = Some(self.desktop.capture()?);
        let mut trace = match &self.options.trace_dir {
            Some(dir) => Some(TraceWriter::create(
                dir,
                &RunMeta {
                    goal: goal.to_string(),
                    limits: limits.clone(),
                    dry_run: self.options.dry_run,
                    confirm: self.options.confirm,
                    started_unix_ms: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_millis() as u64)
                        .unwrap_or(0),
                    planner: self.options.planner_label.clone(),
                    sightline_version: env!("CARGO_PKG_VERSION").to_string(),
                },
            )?),
            None => None,
        };

        let (outcome, end) = loop {
            state.turns += 1;
            let (end, record) = self
                .turn(goal, planner, observer, &mut state, trace.as_mut())
                .await;
            match (trace.as_mut(), record) {
                (Some(t), Some(rec)) => t.write_turn(&rec)?,
                (_, Some(_)) => {}
                // The turn ended before it observed anything: it does not count as a turn, so
                // `turns` matches the trace's lines.
                (_, None) => state.turns -= 1,
            }
            if let TurnEnd::Finish(outcome, end) = end {
                break (outcome, end);
            }
        };

        let elapsed_ms = state.start.elapsed().as_millis() as u64;
        let trace_dir = trace.as_ref().map(|t| t.dir().to_path_buf());
        if let Some(t) = trace {
            t.finish(&trace::OutcomeRecord {
                outcome: outcome.clone(),
                end,
                turns: state.turns,
                steps_used: state.steps_used,
                elapsed_ms,
            })?;
        }
        Ok(RunReport {
            outcome,
            end,
            history: state.history,
            shared_memory: state.memory,
            turns: state.turns,
            steps_used: state.steps_used,
            elapsed_ms,
            trace_dir,
        })
    }

    /// One turn. Returns how it ended and the record to trace (none when the turn ended before
    /// a screenshot was taken).
    async fn turn(
        &mut self,
        goal: &str,
        planner: &dyn PlanProducer,
        observer: &mut dyn RunObserver,
        state: &mut RunState,
        trace: Option<&mut TraceWriter>,
    ) -> (TurnEnd, Option<TurnRecord>) {
        if let Some(end) = self.between_steps_check(state, goal, "observe the screen") {
            return (end, None);
        }
        let turn_start = Instant::now();
        let started_ms = state.start.elapsed().as_millis() as u64;
        let capture = match state.pending_capture.take() {
            Some(c) => c,
            None => match self.desktop.capture() {
                Ok(c) => c,
                Err(e) => {
                    let report = failure(goal, "observe the screen", &state.history, e.to_string());
                    return (
                        TurnEnd::Finish(GoalOutcome::Failed(report), EndReason::CaptureFailed),
                        None,
                    );
                }
            },
        };
        state.geometry = Some(capture.geometry);
        let png = match capture.png() {
            Ok(p) => p,
            Err(e) => {
                let report = failure(goal, "encode the screenshot", &state.history, e.to_string());
                return (
                    TurnEnd::Finish(GoalOutcome::Failed(report), EndReason::CaptureFailed),
                    None,
                );
            }
        };
        let view = self.build_view(goal, &capture, state.steps_used);
        let mut record = TurnRecord {
            turn: state.turns,
            started_ms,
            screenshot: None,
            screenshot_size: Some((capture.image.width(), capture.image.height())),
            observe_ms: turn_start.elapsed().as_millis() as u64,
            view: view.clone(),
            decide_ms: 0,
            next_move: None,
            planner_error: None,
            steps: Vec::new(),
            verdict: None,
            verify_ms: None,
            settle_ms: 0,
        };
        if let Some(t) = trace {
            match t.write_screenshot(state.turns, &png) {
                Ok(rel) => record.screenshot = Some(rel),
                Err(e) => tracing::warn!("trace: {e}"),
            }
        }

        let t0 = Instant::now();
        let decided = planner
            .decide_next(goal, &state.history, &state.memory, &view, Some(&png))
            .await;
        record.decide_ms = t0.elapsed().as_millis() as u64;
        let mv = match decided {
            Ok(mv) => mv,
            Err(e) => {
                record.planner_error = Some(e.clone());
                let report = failure(
                    goal,
                    "decide the next move",
                    &state.history,
                    format!("planner error: {e}"),
                );
                return (
                    TurnEnd::Finish(GoalOutcome::Failed(report), EndReason::PlannerError),
                    Some(record),
                );
            }
        };
        record.next_move = Some(mv.clone());
        if let Some(end) = self.timeout_check(state, goal, "decide the next move") {
            return (end, Some(record));
        }

        let input = TurnInput {
            goal,
            planner,
            view: &view,
            geometry: capture.geometry,
            png: &png,
        };
        let end = match mv {
            NextMove::Clarify { question } => TurnEnd::Finish(
                GoalOutcome::Refused { summary: question },
                EndReason::Clarified,
            ),
            NextMove::Fail { reason } => TurnEnd::Finish(
                GoalOutcome::Failed(failure(goal, "planner gave up", &state.history, reason)),
                EndReason::PlannerGaveUp,
            ),
            NextMove::Done {
                summary,
                extracted_data,
            } => {
                self.on_done(
                    &input,
                    observer,
                    state,
                    &mut record,
                    summary,
                    extracted_data,
                )
                .await
            }
            NextMove::Batch { purpose, steps } => {
                self.run_batch(&input, observer, state, &mut record, &purpose, &steps)
            }
        };
        (end, Some(record))
    }

    async fn on_done(
        &mut self,
        input: &TurnInput<'_>,
        observer: &mut dyn RunObserver,
        state: &mut RunState,
        record: &mut TurnRecord,
        summary: String,
        extracted_data: Value,
    ) -> TurnEnd {
        let TurnInput {
            goal,
            planner,
            view,
            png,
            ..
        } = *input;
        let t0 = Instant::now();
        let verdict = planner
            .verify_done(goal, &summary, &state.memory, view, Some(png))
            .await;
        record.verify_ms = Some(t0.elapsed().as_millis() as u64);
        let verdict = match verdict {
            Ok(v) => v,
            Err(e) => {
                let report = failure(
                    goal,
                    "verify the done claim",
                    &state.history,
                    format!("verify_done error: {e}"),
                );
                return TurnEnd::Finish(GoalOutcome::Failed(report), EndReason::PlannerError);
            }
        };
        observer.on_verdict(&summary, &verdict);
        record.verdict = Some(verdict.clone());
        if verdict.verified {
            merge_extracted(&mut state.memory, extracted_data);
            return TurnEnd::Finish(
                GoalOutcome::Succeeded {
                    summary,
                    extracted_data: state.memory.clone(),
                },
                EndReason::Succeeded,
            );
        }
        // A rejected claim is an attempt like any other: the planner sees it with the hint,
        // and it counts against max_steps so a planner that keeps claiming done cannot loop.
        let claim = format!("claim the goal is done: {summary}");
        let budget_end = self.max_steps_check(state, goal, &claim);
        state.history.push(AttemptRecord {
            step_purpose: claim,
            action: PlannedAction::Done {
                summary: summary.clone(),
                evidence_ids: vec![],
            },
            succeeded: false,
            error: Some(format!("done rejected by verification: {}", verdict.reason)),
            data: Value::Null,
            next_action_hint: verdict.next_action_hint,
        });
        if let Some(end) = budget_end {
            return end;
        }
        state.steps_used += 1;
        TurnEnd::Continue
    }

    fn run_batch(
        &mut self,
        input: &TurnInput<'_>,
        observer: &mut dyn RunObserver,
        state: &mut RunState,
        record: &mut TurnRecord,
        purpose: &str,
        steps: &[Step],
    ) -> TurnEnd {
        let TurnInput {
            goal,
            view,
            geometry,
            ..
        } = *input;
        observer.on_batch(state.turns, purpose, steps);
        if steps.is_empty() {
            if let Some(end) = self.max_steps_check(state, purpose, "empty batch") {
                return end;
            }
            state.history.push(AttemptRecord {
                step_purpose: purpose.to_string(),
                action: PlannedAction::Batch { actions: vec![] },
                succeeded: false,
                error: Some("the batch had no steps; nothing was done".into()),
                data: Value::Null,
                next_action_hint: None,
            });
            state.steps_used += 1;
            return TurnEnd::Continue;
        }
        if self.options.confirm && !self.options.dry_run {
            let question = format!(
                "Run batch \"{purpose}\" ({} step{}: {})?",
                steps.len(),
                if steps.len() == 1 { "" } else { "s" },
                steps
                    .iter()
                    .map(|s| describe_action(&s.action))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            match self.prompt.confirm(&question) {
                Ok(true) => {}
                Ok(false) => {
                    return TurnEnd::Finish(
                        GoalOutcome::Refused {
                            summary: format!(
                                "the user declined the batch \"{purpose}\" at the confirm prompt"
                            ),
                        },
                        EndReason::Declined,
                    )
                }
                Err(e) => {
                    let report =
                        failure(purpose, "confirm the batch", &state.history, e.to_string());
                    return TurnEnd::Finish(GoalOutcome::Failed(report), EndReason::StepFailed);
                }
            }
        }

        let mut any_input = false;
        let max_attempts = self.options.limits.max_step_retries.max(1);
        for (index, step) in steps.iter().enumerate() {
            if let Some(end) = self.between_steps_check(state, purpose, &step.purpose) {
                return end;
            }
            if let Some(end) = self.max_steps_check(state, purpose, &step.purpose) {
                return end;
            }
            if let Some(refusal) = safety::check_step(goal, step, view) {
                observer.on_refusal(step, &refusal.message);
                let result = StepResult::Err {
                    message: refusal.message.clone(),
                    recoverable: false,
                };
                record.steps.push(trace::StepRecord {
                    index,
                    attempt: 1,
                    purpose: step.purpose.clone(),
                    action: step.action.clone(),
                    result,
                    duration_ms: 0,
                    dry_run: self.options.dry_run,
                    refused: Some(refusal.message.clone()),
                });
                state.history.push(AttemptRecord {
                    step_purpose: step.purpose.clone(),
                    action: step.action.clone(),
                    succeeded: false,
                    error: Some(refusal.message.clone()),
                    data: json!({ "refused": refusal.kind, "trigger": refusal.trigger }),
                    next_action_hint: None,
                });
                return TurnEnd::Finish(
                    GoalOutcome::Refused {
                        summary: refusal.message,
                    },
                    EndReason::EndedOnRefusal,
                );
            }
            state.steps_used += 1;
            let mut errors: Vec<String> = Vec::new();
            for attempt in 1..=max_attempts {
                if attempt > 1 {
                    if let Some(end) = self.between_steps_check(state, purpose, &step.purpose) {
                        return end;
                    }
                }
                let t0 = Instant::now();
                let result = if self.options.dry_run {
                    StepResult::Ok {
                        data: json!({ "dry_run": true, "would": describe_action(&step.action) }),
                        discovered_sub_goal: None,
                    }
                } else {
                    any_input = true;
                    match self.execute(&step.action, view, &geometry, state) {
                        Ok(data) => StepResult::Ok {
                            data,
                            discovered_sub_goal: None,
                        },
                        Err(e) => StepResult::Err {
                            message: e.message,
                            recoverable: e.recoverable,
                        },
                    }
                };
                observer.on_step(step, attempt, &result);
                record.steps.push(trace::StepRecord {
                    index,
                    attempt,
                    purpose: step.purpose.clone(),
                    action: step.action.clone(),
                    result: result.clone(),
                    duration_ms: t0.elapsed().as_millis() as u64,
                    dry_run: self.options.dry_run,
                    refused: None,
                });
                match result {
                    StepResult::Ok { data, .. } => {
                        state.history.push(AttemptRecord {
                            step_purpose: step.purpose.clone(),
                            action: step.action.clone(),
                            succeeded: true,
                            error: None,
                            data,
                            next_action_hint: None,
                        });
                        break;
                    }
                    StepResult::Err {
                        message,
                        recoverable,
                    } => {
                        state.history.push(AttemptRecord {
                            step_purpose: step.purpose.clone(),
                            action: step.action.clone(),
                            succeeded: false,
                            error: Some(message.clone()),
                            data: Value::Null,
                            next_action_hint: None,
                        });
                        errors.push(message);
                        if !recoverable {
                            return TurnEnd::Finish(
                                GoalOutcome::Failed(FailureReport {
                                    failing_sub_goal: purpose.to_string(),
                                    failing_step: step.purpose.clone(),
                                    attempts: errors,
                                }),
                                EndReason::StepFailed,
                            );
                        }
                        if attempt == max_attempts {
                            errors.push(format!(
                                "budget exhausted: max_step_retries ({max_attempts} attempts of \
                                 this step failed)"
                            ));
                            return TurnEnd::Finish(
                                GoalOutcome::Failed(FailureReport {
                                    failing_sub_goal: purpose.to_string(),
                                    failing_step: step.purpose.clone(),
                                    attempts: errors,
                                }),
                                EndReason::BudgetExhausted {
                                    budget: Budget::StepRetries,
                                },
                            );
                        }
                        self.pause(self.options.step_pause_ms, state);
                    }
                }
            }
            if index + 1 < steps.len() && !self.options.dry_run {
                self.pause(self.options.step_pause_ms, state);
            }
        }
        if any_input {
            let t0 = Instant::now();
            state.pending_capture = self.settle(state);
            record.settle_ms = t0.elapsed().as_millis() as u64;
        }
        TurnEnd::Continue
    }

    /// Checks made between steps: Ctrl-C, the corner fail-safe, the timeout.
    fn between_steps_check(
        &mut self,
        state: &mut RunState,
        sub_goal: &str,
        next_step: &str,
    ) -> Option<TurnEnd> {
        if self.stop.is_stop_requested() {
            let report = failure(
                sub_goal,
                next_step,
                &state.history,
                format!("stopped by the user (Ctrl-C) before \"{next_step}\""),
            );
            return Some(TurnEnd::Finish(
                GoalOutcome::Failed(report),
                EndReason::Interrupted,
            ));
        }
        if let Some(geometry) = state.geometry {
            // A pointer that cannot be read cannot trip the fail-safe; the next input will
            // surface the backend's error anyway.
            if let Ok(p) = self.desktop.input().pointer() {
                if safety::in_failsafe_corner(p, &geometry) && state.runner_pointer != Some(p) {
                    let report = failure(
                        sub_goal,
                        next_step,
                        &state.history,
                        format!(
                            "fail-safe: the pointer was moved into the top-left corner of the \
                             screen ({},{}); run aborted before \"{next_step}\"",
                            p.x, p.y
                        ),
                    );
                    return Some(TurnEnd::Finish(
                        GoalOutcome::Failed(report),
                        EndReason::FailSafe,
                    ));
                }
            }
        }
        self.timeout_check(state, sub_goal, next_step)
    }

    fn timeout_check(&self, state: &RunState, sub_goal: &str, next_step: &str) -> Option<TurnEnd> {
        if Instant::now() < state.deadline {
            return None;
        }
        let report = failure(
            sub_goal,
            next_step,
            &state.history,
            format!(
                "budget exhausted: timeout_ms ({} ms) reached after {} ms",
                self.options.limits.timeout_ms,
                state.start.elapsed().as_millis()
            ),
        );
        Some(TurnEnd::Finish(
            GoalOutcome::Failed(report),
            EndReason::BudgetExhausted {
                budget: Budget::Timeout,
            },
        ))
    }

    fn max_steps_check(
        &self,
        state: &RunState,
        sub_goal: &str,
        next_step: &str,
    ) -> Option<TurnEnd> {
        let max = self.options.limits.max_steps;
        if state.steps_used < max {
            return None;
        }
        let report = failure(
            sub_goal,
            next_step,
            &state.history,
            format!("budget exhausted: max_steps ({max} steps used of {max})"),
        );
        Some(TurnEnd::Finish(
            GoalOutcome::Failed(report),
            EndReason::BudgetExhausted {
                budget: Budget::MaxSteps,
            },
        ))
    }

    fn build_view(&self, goal: &str, capture: &Capture, steps_used: u32) -> PlanningView {
        let screen = PlanningScreen {
            active_app: capture.active_app.clone(),
            window: capture.window_title.clone(),
            summary: None,
            url: None,
        };
        PlanningView {
            capabilities: vec![
                CapabilityRef {
                    id: CAPABILITY_NATIVE_INPUT.into(),
                    detail: Some(format!(
                        "mouse and keyboard; targets as xy:X,Y in 0-1000 over the {}x{} screenshot",
                        capture.image.width(),
                        capture.image.height()
                    )),
                },
                CapabilityRef {
                    id: CAPABILITY_VISION.into(),
                    detail: None,
                },
            ],
            run_progress: RunProgress {
                steps_used,
                max_steps: self.options.limits.max_steps,
            },
            ..view_of(goal, screen, self.options.elements.clone())
        }
    }

    /// Sleeps up to `ms`, in short slices so Ctrl-C and the deadline cut it short.
    fn pause(&self, ms: u64, state: &RunState) {
        const SLICE_MS: u64 = 50;
        let until = (Instant::now() + Duration::from_millis(ms)).min(state.deadline);
        while !self.stop.is_stop_requested() {
            let now = Instant::now();
            if now >= until {
                break;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(SLICE_MS)));
        }
    }

    /// Waits until two consecutive frames are identical or the settle budget is spent. Returns
    /// the last frame to be reused as the next observation (none if capturing failed; the next
    /// turn will capture again and report the error).
    fn settle(&mut self, state: &RunState) -> Option<Capture> {
        let settle = self.options.settle;
        let started = Instant::now();
        self.pause(settle.min_ms, state);
        let mut last = self.desktop.capture().ok()?;
        loop {
            if started.elapsed() >= Duration::from_millis(settle.max_ms)
                || self.stop.is_stop_requested()
                || Instant::now() >= state.deadline
            {
                return Some(last);
            }
            self.pause(settle.poll_ms, state);
            let next = self.desktop.capture().ok()?;
            let same = next.image.as_raw() == last.image.as_raw();
            last = next;
            if same {
                return Some(last);
            }
        }
    }

    /// Executes one action. `Ok` carries the step's data; `Err` is the step's error result.
    fn execute(
        &mut self,
        action: &PlannedAction,
        view: &PlanningView,
        geometry: &ScreenGeometry,
        state: &mut RunState,
    ) -> std::result::Result<Value, StepError> {
        // Errors from resolving or parsing are the plan's fault: retrying the same step cannot
        // help. Errors from the input backend may be transient.
        let plan_err = |e: Error| StepError {
            message: e.to_string(),
            recoverable: false,
        };
        let input_err = |e: Error| StepError {
            message: e.to_string(),
            recoverable: true,
        };
        match action {
            PlannedAction::Click {
                target_id,
                expect_after,
            } => {
                let p = self
                    .resolver
                    .resolve(target_id, view, geometry)
                    .map_err(plan_err)?;
                self.click_at(p, state).map_err(input_err)?;
                let mut data = json!({ "clicked": [p.x, p.y] });
                if expect_after.is_some() {
                    data["expect_after"] =
                        json!("not checked: the desktop runner cannot observe page selectors");
                }
                Ok(data)
            }
            PlannedAction::Type { target_id, text } => {
                let mut data = json!({ "typed_chars": text.chars().count() });
                if let Some(id) = target_id {
                    let p = self
                        .resolver
                        .resolve(id, view, geometry)
                        .map_err(plan_err)?;
                    self.click_at(p, state).map_err(input_err)?;
                    std::thread::sleep(Duration::from_millis(self.options.step_pause_ms));
                    data["clicked"] = json!([p.x, p.y]);
                }
                self.desktop.input().text(text).map_err(input_err)?;
                Ok(data)
            }
            PlannedAction::Key { key } => {
                let keys = input::parse_key_chord(key).map_err(plan_err)?;
                input::press_chord(self.desktop.input(), &keys).map_err(input_err)?;
                Ok(json!({ "pressed": key }))
            }
            PlannedAction::KeyCombo { keys } => {
                let parsed = input::parse_key_combo(keys).map_err(plan_err)?;
                input::press_chord(self.desktop.input(), &parsed).map_err(input_err)?;
                Ok(json!({ "pressed": keys.join("+") }))
            }
            PlannedAction::Scroll { dx, dy } => {
                let (nx, ny) = (scroll_notches(*dx), scroll_notches(*dy));
                if ny != 0 {
                    self.desktop.input().scroll(ny, false).map_err(input_err)?;
                }
                if nx != 0 {
                    self.desktop.input().scroll(nx, true).map_err(input_err)?;
                }
                Ok(json!({ "scrolled_notches": [nx, ny] }))
            }
            PlannedAction::Drag {
                from_target_id,
                to_target_id,
            } => {
                let from = self
                    .resolver
                    .resolve(from_target_id, view, geometry)
                    .map_err(plan_err)?;
                let to = self
                    .resolver
                    .resolve(to_target_id, view, geometry)
                    .map_err(plan_err)?;
                self.drag(from, to, state).map_err(input_err)?;
                Ok(json!({ "dragged": [[from.x, from.y], [to.x, to.y]] }))
            }
            PlannedAction::Select {
                from_x,
                from_y,
                to_x,
                to_y,
            } => {
                // Select's coordinates follow the same 0–1000 convention as xy: targets.
                let rel_from =
                    RelativePoint::new((*from_x).into(), (*from_y).into()).map_err(plan_err)?;
                let rel_to =
                    RelativePoint::new((*to_x).into(), (*to_y).into()).map_err(plan_err)?;
                let from = geometry.to_input(rel_from).map_err(plan_err)?;
                let to = geometry.to_input(rel_to).map_err(plan_err)?;
                self.drag(from, to, state).map_err(input_err)?;
                Ok(json!({ "selected": [[from.x, from.y], [to.x, to.y]] }))
            }
            PlannedAction::Wait { ms } => {
                let ms = u64::from(*ms).min(MAX_WAIT_MS);
                self.pause(ms, state);
                Ok(json!({ "waited_ms": ms }))
            }
            PlannedAction::Extract { goal, data } => {
                let key = if goal.trim().is_empty() {
                    format!("extract_{}", state.history.len() + 1)
                } else {
                    goal.trim().to_string()
                };
                if let Value::Object(map) = &mut state.memory {
                    map.insert(key.clone(), Value::String(data.clone()));
                }
                Ok(json!({ key: data }))
            }
            PlannedAction::Batch { actions } => {
                let mut results = Vec::with_capacity(actions.len());
                for a in actions {
                    results.push(self.execute(a, view, geometry, state)?);
                    std::thread::sleep(Duration::from_millis(self.options.step_pause_ms));
                }
                Ok(Value::Array(results))
            }
            other => Err(StepError {
                message: unsupported_action_message(other),
                recoverable: false,
            }),
        }
    }

    fn click_at(&mut self, p: InputPoint, state: &mut RunState) -> Result<()> {
        let input = self.desktop.input();
        input.move_pointer(p)?;
        state.runner_pointer = Some(p);
        // Give the application a motion event before the press, as a hand would.
        std::thread::sleep(Duration::from_millis(20));
        input.left_button(ButtonAction::Click)
    }

    fn drag(&mut self, from: InputPoint, to: InputPoint, state: &mut RunState) -> Result<()> {
        let input = self.desktop.input();
        input.move_pointer(from)?;
        std::thread::sleep(Duration::from_millis(20));
        input.left_button(ButtonAction::Press)?;
        let mut result = Ok(());
        for i in 1..=DRAG_MOTION_STEPS {
            let p = InputPoint {
                x: from.x + (to.x - from.x) * i / DRAG_MOTION_STEPS,
                y: from.y + (to.y - from.y) * i / DRAG_MOTION_STEPS,
            };
            if let Err(e) = input.move_pointer(p) {
                result = Err(e);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Release even after a failed move, so the button is never left held.
        let released = input.left_button(ButtonAction::Release);
        state.runner_pointer = input.pointer().ok();
        result.and(released)
    }
}

/// Converts a scroll amount to wheel notches (see [`MAX_SCROLL_NOTCHES`]).
fn scroll_notches(v: i32) -> i32 {
    if v.abs() <= MAX_SCROLL_NOTCHES {
        v
    } else {
        let n = (v as f64 / f64::from(SCROLL_PIXELS_PER_NOTCH)).round() as i32;
        n.clamp(-MAX_SCROLL_NOTCHES, MAX_SCROLL_NOTCHES)
    }
}

/// Merges a `done` move's extracted data into shared memory: object keys are merged, any other
/// non-null value is stored under `extracted_data`.
fn merge_extracted(memory: &mut Value, extracted: Value) {
    let Value::Object(mem) = memory else { return };
    match extracted {
        Value::Null => {}
        Value::Object(map) => mem.extend(map),
        other => {
            mem.insert("extracted_data".into(), other);
        }
    }
}

/// A failure report whose attempts are the last errors of the run (at most three) followed by
/// `reason`.
fn failure(sub_goal: &str, step: &str, history: &[AttemptRecord], reason: String) -> FailureReport {
    const LAST_ERRORS: usize = 3;
    let mut attempts: Vec<String> = history
        .iter()
        .filter_map(|a| a.error.clone())
        .rev()
        .take(LAST_ERRORS)
        .collect();
    attempts.reverse();
    attempts.push(reason);
    FailureReport {
        failing_sub_goal: sub_goal.to_string(),
        failing_step: step.to_string(),
        attempts,
    }
}

/// The wire name of an action (`click`, `cdp_eval`, …).
pub fn action_type(action: &PlannedAction) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// A one-line description of an action for prompts and logs.
pub fn describe_action(action: &PlannedAction) -> String {
    match action {
        PlannedAction::Click { target_id, .. } => format!("click {target_id}"),
        PlannedAction::Type {
            target_id: Some(t),
            text,
        } => format!("type {text:?} into {t}"),
        PlannedAction::Type { text, .. } => format!("type {text:?}"),
        PlannedAction::Key { key } => format!("key {key}"),
        PlannedAction::KeyCombo { keys } => format!("key_combo {}", keys.join("+")),
        PlannedAction::Scroll { dx, dy } => format!("scroll dx={dx} dy={dy}"),
        PlannedAction::Drag {
            from_target_id,
            to_target_id,
        } => format!("drag {from_target_id} -> {to_target_id}"),
        PlannedAction::Select {
            from_x,
            from_y,
            to_x,
            to_y,
        } => format!("select ({from_x},{from_y}) -> ({to_x},{to_y})"),
        PlannedAction::Wait { ms } => format!("wait {ms} ms"),
        PlannedAction::Extract { goal, .. } => format!("extract {goal:?}"),
        PlannedAction::Batch { actions } => format!("batch of {}", actions.len()),
        other => action_type(other),
    }
}

/// Why an action cannot run on the desktop runner, naming the action and what would be needed.
fn unsupported_action_message(action: &PlannedAction) -> String {
    let name = action_type(action);
    let needs = match action {
        PlannedAction::CdpEval { .. }
        | PlannedAction::Navigate { .. }
        | PlannedAction::ExtractWithFallback { .. } => "a browser bound over CDP",
        PlannedAction::SetValue { .. } | PlannedAction::AxAction { .. } => {
            "an accessibility backend"
        }
        PlannedAction::ActivateApp { .. }
        | PlannedAction::LaunchApp { .. }
        | PlannedAction::QuitApp { .. }
        | PlannedAction::Window { .. }
        | PlannedAction::Dialog { .. }
        | PlannedAction::Dock { .. }
        | PlannedAction::MenuExtra { .. } => "an app/window-management backend",
        PlannedAction::WriteCells { .. } | PlannedAction::ReadCells { .. } => {
            "a spreadsheet adapter"
        }
        PlannedAction::Custom { .. } => "the named adapter",
        PlannedAction::Done { .. } | PlannedAction::Fail { .. } => {
            "to be a move (kind done/fail), not a step"
        }
        _ => "a backend this runner does not have",
    };
    format!(
        "cannot execute `{name}`: it needs {needs}; Sightline's desktop runner executes only \
         native input (click, type, key, key_combo, scroll, drag, wait, select, extract)"
    )
}
