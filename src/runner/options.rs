//! How a run is configured ([`RunOptions`]), what it reports ([`RunReport`], [`EndReason`]) and
//! who hears about it as it goes ([`RunObserver`]).

use std::path::PathBuf;

use cel_contracts::{
    AttemptRecord, DoneVerdict, GoalOutcome, PlanningElement, RunLimits, Step, StepResult,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::desktop::ElementClick;
use super::elements::ElementBudget;

// ─── Options, events, report ────────────────────────────────────────────────

/// How long to wait for the application after a batch's input (see
/// [`settle`](super::settle) for the rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleOptions {
    /// Time between the frames (and window sets) compared. Default 100 ms.
    pub poll_ms: u64,
    /// The screen and the window set unchanged this long means settled. Default 300 ms.
    pub quiet_ms: u64,
    /// After a step that may open or close a window (a click on a button, Enter, a key
    /// combination), how long to watch for a reaction that has not shown yet, unless the window
    /// set changes first. Default 2,500 ms.
    pub react_ms: u64,
    /// Most time spent waiting after one batch. Default 8,000 ms.
    pub max_ms: u64,
}

impl Default for SettleOptions {
    fn default() -> Self {
        Self {
            poll_ms: 100,
            quiet_ms: 300,
            react_ms: 2_500,
            max_ms: 8_000,
        }
    }
}

/// The default failure budget: batches in a row that may end on a failed step.
pub const DEFAULT_MAX_FAILURES: u32 = 3;

/// Everything a run is configured with besides the goal and the planner.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Budgets: `max_steps`, `timeout_ms`, `max_step_retries`.
    pub limits: RunLimits,
    /// Plan and report, execute no input.
    pub dry_run: bool,
    /// Ask the [`ConfirmPrompt`](super::ConfirmPrompt) about each step the gate refuses,
    /// showing it; a yes runs that one step (`--confirm`).
    pub confirm: bool,
    /// What the user allows (`--allow`): destructive steps the gate lets run without asking.
    /// None by default.
    pub grants: super::safety::Grants,
    /// Waiting for the screen after input.
    pub settle: SettleOptions,
    /// Pause between the steps of a batch, in milliseconds, so applications process events.
    pub step_pause_ms: u64,
    /// Write a trace here.
    pub trace_dir: Option<PathBuf>,
    /// Elements a caller knows about (from DOM or another source), shown before the desktop's
    /// own elements.
    pub elements: Vec<PlanningElement>,
    /// Read the desktop's elements from its accessibility tree each turn (`--no-elements`
    /// turns this off: the planner then sees the screenshot and `xy:` points only).
    pub use_elements: bool,
    /// Limits on one element capture.
    pub element_budget: ElementBudget,
    /// How clicks on element ids are carried out.
    pub element_click: ElementClick,
    /// The planner's label for the trace (model id, replay file).
    pub planner_label: String,
    /// Batches in a row that may end on a failed or refused step before the run ends
    /// ([`Budget::Failures`]); each such batch is a turn the planner learns from. Default 3.
    pub max_failures: u32,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            limits: RunLimits::default(),
            dry_run: false,
            confirm: false,
            grants: super::safety::Grants::none(),
            settle: SettleOptions::default(),
            step_pause_ms: 50,
            trace_dir: None,
            elements: Vec::new(),
            use_elements: true,
            element_budget: ElementBudget::default(),
            element_click: ElementClick::default(),
            planner_label: String::new(),
            max_failures: DEFAULT_MAX_FAILURES,
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
    /// [`RunOptions::max_failures`]: batches in a row ended on a failed step.
    Failures,
}

/// Why a run ended, finer than [`GoalOutcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum EndReason {
    /// `done`, accepted by `verify_done`.
    Succeeded,
    /// The planner answered `clarify`.
    Clarified,
    /// The failure budget ran out on a step the gate refused: it needs a permission the user
    /// has not given (`--allow`, or an approval at `--confirm`).
    EndedOnRefusal,
    /// The user (or the approval callback) declined a step the gate put to them.
    Declined,
    /// The planner answered `fail`.
    PlannerGaveUp,
    /// `decide_next` or `verify_done` returned an error.
    PlannerError,
    /// The run could not go on with a batch: the `--confirm` prompt could not be answered.
    /// (A failed step ends only its batch; see [`Budget::Failures`].)
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
