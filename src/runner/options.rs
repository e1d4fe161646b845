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
    /// The destructive-step gate refused a step no grant covered.
    EndedOnRefusal,
    /// The user (or the approval callback) declined a step the gate put to them.
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
