//! The desktop, one caller at a time: [`DesktopGate`] answers a second caller at once with
//! what holds the screen, and the jobs below (look, act, run) run on the blocking pool while
//! their [`DesktopLease`] is held.
//!
//! Each job opens the display for itself, as `sightline view` and `sightline run` do: the
//! X connections and the accessibility bus are the job's, and a display that went away since
//! the last call is an error of this call only.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use cel_contracts::{
    DoneVerdict, NextMove, PlanProducer, PlanningView, RunProgress, Step, StepResult,
};
use tokio::sync::mpsc::UnboundedSender;

use crate::error::Result;
use crate::runner::{
    capture_elements, describe_action, desktop_view, step_line, ActReport, Desktop, ElementTable,
    PlannerStats, RunObserver, RunOptions, RunReport, Runner, ScriptedPrompt, StopFlag, XDesktop,
};

/// Who holds the desktop.
#[derive(Debug, Default)]
pub struct DesktopGate {
    holder: Mutex<Option<(String, Instant)>>,
}

/// The desktop was held by another call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusyError {
    /// What holds it (`run "open the settings"`).
    pub holder: String,
    /// For how long, in seconds.
    pub held_s: u64,
}

impl std::fmt::Display for BusyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the desktop is busy: {} has held it for {} s; one call drives the screen at a \
             time, so call again when it ends",
            self.holder, self.held_s
        )
    }
}

/// The desktop, held until dropped.
#[derive(Debug)]
pub struct DesktopLease {
    gate: Arc<DesktopGate>,
}

impl DesktopGate {
    /// Takes the desktop for `what`, or says at once who has it.
    pub fn try_take(self: &Arc<Self>, what: &str) -> std::result::Result<DesktopLease, BusyError> {
        // A panic while the lock was held cannot leave the holder half written.
        let mut holder = self.holder.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((holder, since)) = holder.as_ref() {
            return Err(BusyError {
                holder: holder.clone(),
                held_s: since.elapsed().as_secs(),
            });
        }
        *holder = Some((what.to_string(), Instant::now()));
        Ok(DesktopLease {
            gate: Arc::clone(self),
        })
    }

    /// What holds the desktop now, if anything.
    pub fn holder(&self) -> Option<String> {
        let holder = self.holder.lock().unwrap_or_else(|p| p.into_inner());
        holder.as_ref().map(|(what, _)| what.clone())
    }
}

impl Drop for DesktopLease {
    fn drop(&mut self) {
        let mut holder = self.gate.holder.lock().unwrap_or_else(|p| p.into_inner());
        *holder = None;
    }
}

/// A screen as a run's turn sees it.
#[derive(Debug, Clone)]
pub(crate) struct Screen {
    pub png: Vec<u8>,
    pub view: PlanningView,
    pub elements: Option<ElementTable>,
    pub size: (u32, u32),
}

/// Where the jobs run and with what.
#[derive(Debug, Clone)]
pub(crate) struct Seat {
    pub monitor: Option<usize>,
    pub use_elements: bool,
}

impl Seat {
    fn open(&self) -> Result<XDesktop> {
        let desktop = XDesktop::open(self.monitor)?;
        Ok(if self.use_elements {
            desktop
        } else {
            desktop.without_elements()
        })
    }

    /// Captures the screen and reads its elements, exactly as one turn of a run does.
    pub fn look(&self, _lease: &DesktopLease, goal: &str) -> Result<Screen> {
        let mut desktop = self.open()?;
        let capture = desktop.capture()?;
        let table = if self.use_elements {
            capture_elements(&mut desktop, &capture.geometry, &Default::default())
        } else {
            None
        };
        let elements = table
            .as_ref()
            .map(|t| t.planning_elements())
            .unwrap_or_default();
        let view = desktop_view(
            goal,
            &capture,
            elements,
            table.as_ref(),
            RunProgress::default(),
        );
        Ok(Screen {
            png: capture.png()?,
            size: (capture.image.width(), capture.image.height()),
            view,
            elements: table,
        })
    }

    fn runner(&self, options: RunOptions, stop: StopFlag) -> Result<Runner> {
        let options = RunOptions {
            // Nobody is at a terminal to answer: the server never asks.
            confirm: false,
            use_elements: self.use_elements && options.use_elements,
            ..options
        };
        Ok(Runner::new(Box::new(self.open()?), options)
            .with_prompt(Box::new(ScriptedPrompt::new([])))
            .with_stop_flag(stop))
    }

    /// Executes one move ([`Runner::act`]).
    pub fn act(
        &self,
        _lease: &DesktopLease,
        options: RunOptions,
        stop: StopFlag,
        goal: &str,
        next_move: NextMove,
        observer: &mut dyn RunObserver,
    ) -> Result<ActReport> {
        let mut runner = self.runner(options, stop)?;
        tokio::runtime::Handle::current().block_on(runner.act(goal, next_move, observer))
    }

    /// Runs a goal ([`Runner::run`]).
    pub fn run(
        &self,
        _lease: &DesktopLease,
        options: RunOptions,
        stop: StopFlag,
        job: RunJob,
        observer: &mut dyn RunObserver,
    ) -> Result<RunReport> {
        let mut runner = self.runner(options, stop)?;
        if let Some(stats) = job.stats {
            runner = runner.with_planner_stats(stats);
        }
        tokio::runtime::Handle::current().block_on(runner.run(
            &job.goal,
            job.planner.as_ref(),
            observer,
        ))
    }
}

/// What a `run` job runs.
pub(crate) struct RunJob {
    pub goal: String,
    pub planner: Arc<dyn PlanProducer + Send + Sync>,
    pub stats: Option<PlannerStats>,
}

/// A run's events as one line each, sent as they happen (the MCP tools turn them into
/// progress notifications).
pub(crate) struct ProgressLines(pub UnboundedSender<String>);

impl RunObserver for ProgressLines {
    fn on_batch(&mut self, turn: u32, purpose: &str, steps: &[Step]) {
        let _ = self.0.send(format!(
            "turn {turn}: {purpose} ({} step{})",
            steps.len(),
            if steps.len() == 1 { "" } else { "s" }
        ));
    }

    fn on_step(&mut self, step: &Step, attempt: u32, result: &StepResult) {
        let _ = self.0.send(step_line(
            step,
            attempt,
            result,
            ["dry run: ", "ok: ", "error: "],
        ));
    }

    fn on_refusal(&mut self, step: &Step, message: &str) {
        let _ = self.0.send(format!(
            "refused: {} -- {message}",
            describe_action(&step.action)
        ));
    }

    fn on_verdict(&mut self, summary: &str, verdict: &DoneVerdict) {
        let _ = self.0.send(if verdict.verified {
            format!("done: {summary} (verified)")
        } else {
            format!("done claimed: {summary} (rejected: {})", verdict.reason)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_caller_hears_who_holds_the_desktop_until_it_is_released() {
        let gate = Arc::new(DesktopGate::default());
        let lease = gate.try_take("run \"open settings\"");
        assert!(lease.is_ok());
        let busy = gate.try_take("view");
        match &busy {
            Err(e) => {
                assert_eq!(e.holder, "run \"open settings\"");
                assert!(e.to_string().starts_with("the desktop is busy: run"));
            }
            Ok(_) => panic!("a second lease was given"),
        }
        drop(lease);
        assert!(gate.holder().is_none());
        assert!(gate.try_take("view").is_ok());
    }
}
