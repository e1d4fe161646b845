//! The desktop runner: observe → decide → act, until the planner is done, refuses, fails or a
//! budget runs out (feature `desktop`).
//!
//! One turn: capture the chosen monitor with xcap and read the focused window; build a
//! [`PlanningView`] (screen, capabilities `native_input` and `vision`, the caller's elements);
//! ask any [`PlanProducer`] for the next move; run a batch's steps one by one with enigo; wait
//! for the screen to settle; look again. The runner knows the planner only through the trait, so
//! a model, a [`ReplayPlanner`] or a hosted planner are the same to it.
//!
//! Safety lives here, not only in the prompt (ARCHITECTURE.md, decision 9): budgets from
//! [`RunLimits`](cel_contracts::RunLimits), `dry_run`, the top-left-corner fail-safe and the
//! Ctrl-C [`StopFlag`] (both checked between steps), and the destructive-step gate
//! ([`safety::Gate`]), which lets a step run only when the run's [`safety::Grants`]
//! (`RunOptions::grants`, `--allow`) cover it, or when the approval callback
//! ([`Runner::with_approver`]) or, under `confirm`, the [`ConfirmPrompt`] approves that one
//! step (a step the user declines there ends the run, [`EndReason::Declined`]). The goal's
//! text is never an input to the gate. The gate applies in a dry run too, so a dry run shows
//! what a real run would refuse.
//!
//! A failed step is a turn, not an ending: a step the gate refuses, a stale element id, an unmet
//! `expect_after` or an input error that outlasts its retries ends its batch; the attempt goes
//! into the history with its error (for a refusal, the [`safety::Refusal`] naming the grant
//! that would allow it), and the next turn lets the planner read it and choose another way.
//! [`RunOptions::max_failures`] batches in a row that end so end the run, as
//! [`GoalOutcome::Refused`] when the last one was a refusal, else as failed
//! ([`Budget::Failures`]).
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
//! Elements: each turn the desktop's accessibility tree (AT-SPI2 on Linux, see [`elements`])
//! gives the view its elements, with ids the planner's grammar then allows beside `xy:` points.
//! The runner keeps that capture's [`ElementTable`] (bounds, actions) for the turn: a click on
//! an element id re-reads the element (a stale id is a step error, never a click elsewhere),
//! moves the pointer to it, gives it focus and then invokes its accessible action, selects it
//! (a row) or, for a text field, leaves it focused, else clicks the centre of its visible part
//! ([`ElementClick`], `element_steps.rs`); `type` into an element clicks it that way first;
//! `set_value` sets a field's text, a slider's number or a combo box's option through the
//! accessibility API; and the gate judges the element's real name (for an `xy:` click, the
//! element under the point). Without an accessibility bus the view has no elements and
//! targets are points only.
//!
//! Which actions run: `click`, `type`, `key`, `key_combo`, `scroll`, `drag`, `wait`, `select`,
//! `extract`, `set_value` (on element ids) and nested `batch`. Targets are `xy:X,Y` points
//! (0–1000 over the screenshot the planner saw, see [`coords`]), element ids of the capture,
//! or ids a caller's [`TargetResolver`] knows. Any other action (`cdp_eval`, `navigate`,
//! `ax_action`, …) is a non-recoverable step error that says why, never a silent skip.

mod act;
pub mod capture;
pub mod coords;
pub mod elements;
pub mod input;
pub mod replay;
pub mod safety;
pub mod trace;

mod describe;
mod desktop;
mod element_steps;
mod execute;
mod observe;
mod options;
pub mod settle;

use std::time::{Duration, Instant};

use cel_contracts::{
    AttemptRecord, FailureReport, GoalOutcome, NextMove, PlanProducer, PlannedAction, PlanningView,
    RunProgress,
};
use serde_json::{json, Value};

pub use act::ActReport;
pub use capture::{list_monitors, Capture, MonitorInfo, ScreenCapturer};
pub use coords::{InputPoint, ScreenGeometry};
pub use describe::{action_type, describe_action, step_line};
pub use desktop::{
    capture_elements, element_facts, Desktop, ElementClick, ElementResolver, ElementTarget,
    TargetResolver, XDesktop, XyResolver,
};
pub use elements::{
    ClickVia, ElementBudget, ElementFacts, ElementSource, ElementTable, ScreenElement,
};
pub use input::{parse_key, parse_key_chord, ButtonAction, EnigoInput, InputDevice, KEY_NAMES};
pub use observe::desktop_view;
pub use options::{
    Budget, EndReason, NoopObserver, RunObserver, RunOptions, RunReport, SettleOptions,
    DEFAULT_MAX_FAILURES,
};
pub use replay::ReplayPlanner;
pub use safety::{
    Approver, ConfirmPrompt, GrantKind, Grants, Refusal, ScriptedPrompt, StopFlag, TerminalPrompt,
};
use settle::{SettleKind, SettleStep, Settler};
pub use trace::{RunMeta, TraceWriter, TurnRecord};

use crate::error::{Error, Result};

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

// ─── The runner ─────────────────────────────────────────────────────────────

/// The planner's own account of its last call, as JSON for the trace (see
/// [`Runner::with_planner_stats`]).
pub type PlannerStats = Box<dyn Fn() -> Option<Value> + Send + Sync>;

/// Runs goals on a [`Desktop`].
pub struct Runner {
    desktop: Box<dyn Desktop>,
    options: RunOptions,
    resolver: Box<dyn TargetResolver>,
    prompt: Box<dyn ConfirmPrompt>,
    approver: Option<Box<dyn Approver>>,
    stop: StopFlag,
    planner_stats: Option<PlannerStats>,
}

crate::debug_fields::debug_fields!(Runner { options });

/// The state of one run, threaded through its turns.
struct RunState {
    start: Instant,
    deadline: Instant,
    history: Vec<AttemptRecord>,
    memory: Value,
    steps_used: u32,
    turns: u32,
    /// Batches in a row that ended on a failed or refused step.
    failed_batches: u32,
    /// Where the runner itself last put the pointer: the fail-safe ignores that position, so a
    /// planned click at `xy:0,0` does not abort the run.
    runner_pointer: Option<InputPoint>,
    /// A capture taken while settling, reused as the next turn's observation.
    pending_capture: Option<Capture>,
    /// Geometry of the last capture, for the fail-safe.
    geometry: Option<ScreenGeometry>,
    /// The destructive-step gate, with the line a terminal holds across batches.
    gate: safety::Gate,
}

impl RunState {
    /// A run starting now, ending at the latest `timeout_ms` from now, gated by `grants`.
    fn new(timeout_ms: u64, grants: safety::Grants) -> Self {
        let start = Instant::now();
        Self {
            start,
            deadline: start + Duration::from_millis(timeout_ms),
            history: Vec::new(),
            memory: json!({}),
            steps_used: 0,
            turns: 0,
            failed_batches: 0,
            runner_pointer: None,
            pending_capture: None,
            geometry: None,
            gate: safety::Gate::new(grants),
        }
    }
}

/// What one turn works from: the goal, the planner, and what it observed.
struct TurnInput<'a> {
    goal: &'a str,
    planner: &'a dyn PlanProducer,
    view: &'a PlanningView,
    geometry: ScreenGeometry,
    png: &'a [u8],
    /// The elements of this turn's capture, with bounds.
    elements: Option<&'a ElementTable>,
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
            approver: None,
            stop: StopFlag::new(),
            planner_stats: None,
        }
    }

    /// Asks `stats` after each `decide_next` and `verify_done` for the planner's own account
    /// of the call (its stage timings and token counts) and writes it into the trace. The
    /// runner knows the planner only as a `PlanProducer`; whoever built the planner knows how
    /// to ask it.
    pub fn with_planner_stats(mut self, stats: PlannerStats) -> Self {
        self.planner_stats = Some(stats);
        self
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

    /// Puts each step the gate refuses to `approver` (a closure `|refusal| -> bool` will do):
    /// `true` runs that one step. It is asked instead of the `confirm` prompt.
    pub fn with_approver(mut self, approver: Box<dyn Approver>) -> Self {
        self.approver = Some(approver);
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
        let limits = self.options.limits.clone();
        let mut state = RunState::new(limits.timeout_ms, self.options.grants.clone());
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
                    allowed: self.options.grants.iter().map(|g| g.to_string()).collect(),
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
        let history_before = state.history.len();
        let capture_failed = |doing: &str, reason: String| {
            let report = failure(goal, doing, &state.history, reason);
            (
                TurnEnd::Finish(GoalOutcome::Failed(report), EndReason::CaptureFailed),
                None,
            )
        };
        let capture = match state.pending_capture.take() {
            Some(c) => c,
            None => match self.desktop.capture() {
                Ok(c) => c,
                Err(e) => return capture_failed("observe the screen", e.to_string()),
            },
        };
        state.geometry = Some(capture.geometry);
        let png = match capture.png() {
            Ok(p) => p,
            Err(e) => return capture_failed("encode the screenshot", e.to_string()),
        };
        let elements = if self.options.use_elements {
            capture_elements(
                self.desktop.as_mut(),
                &capture.geometry,
                &self.options.element_budget,
            )
        } else {
            None
        };
        let view = self.build_view(goal, &capture, state.steps_used, elements.as_ref());
        state.gate.start_turn(&view);
        let mut record = TurnRecord {
            turn: state.turns,
            started_ms,
            screenshot: None,
            screenshot_size: Some((capture.image.width(), capture.image.height())),
            observe_ms: turn_start.elapsed().as_millis() as u64,
            view: view.clone(),
            elements: elements.clone(),
            decide_ms: 0,
            decide_stats: None,
            next_move: None,
            planner_error: None,
            steps: Vec::new(),
            verdict: None,
            verify_ms: None,
            verify_stats: None,
            attempts: Vec::new(),
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
        record.decide_stats = self.planner_stats.as_ref().and_then(|stats| stats());
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
            elements: elements.as_ref(),
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
        record.attempts = state.history[history_before..].to_vec();
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
        record.verify_stats = self.planner_stats.as_ref().and_then(|stats| stats());
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

    fn build_view(
        &self,
        goal: &str,
        capture: &Capture,
        steps_used: u32,
        table: Option<&ElementTable>,
    ) -> PlanningView {
        let mut elements = self.options.elements.clone();
        if let Some(t) = table {
            elements.extend(t.planning_elements());
        }
        let progress = RunProgress {
            steps_used,
            max_steps: self.options.limits.max_steps,
        };
        desktop_view(goal, capture, elements, table, progress)
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

    /// Waits for the application to react to a batch of `kind` ([`settle`] has the rule).
    /// Returns the last frame, to be reused as the next observation (none if capturing failed;
    /// the next turn will capture again and report the error).
    fn settle(&mut self, state: &RunState, kind: SettleKind) -> Option<Capture> {
        let options = self.options.settle;
        let started = Instant::now();
        let mut settler = Settler::new(options, kind);
        let mut last = self.desktop.capture().ok()?;
        let mut windows = self.desktop.windows_signature();
        loop {
            if self.stop.is_stop_requested() || Instant::now() >= state.deadline {
                return Some(last);
            }
            self.pause(options.poll_ms, state);
            let next = self.desktop.capture().ok()?;
            let now_windows = self.desktop.windows_signature();
            let frame_changed = next.image.as_raw() != last.image.as_raw();
            let windows_changed = now_windows != windows;
            last = next;
            windows = now_windows;
            let now_ms = started.elapsed().as_millis() as u64;
            match settler.observe(now_ms, frame_changed, windows_changed) {
                SettleStep::Wait => continue,
                SettleStep::Settled | SettleStep::TimedOut => {
                    tracing::debug!(?kind, now_ms, reacted = settler.reacted(), "settled");
                    return Some(last);
                }
            }
        }
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
