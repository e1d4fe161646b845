//! One given move executed on the desktop ([`Runner::act`]), for callers that plan
//! elsewhere and want the runner only for its hands: `sightline serve`'s `act` tool.
//!
//! It is one turn of a run in which the planner's answer is the caller's move, so the move
//! meets exactly what a run's moves meet: the screen is captured and its elements read, each
//! step goes through the destructive-step gate and the same target resolver (a stale element
//! id is a step error, never a click elsewhere), `dry_run` and `confirm` apply, and the screen
//! settles after the input.

use std::time::Instant;

use cel_contracts::{AttemptRecord, GoalOutcome, NextMove};

use super::options::{EndReason, RunObserver};
use super::replay::ReplayPlanner;
use super::trace::StepRecord;
use super::{RunState, Runner, TurnEnd};
use crate::error::{Error, Result};

/// What [`Runner::act`] did.
#[derive(Debug, Clone)]
pub struct ActReport {
    /// Each step attempt in order, as a trace records it: the result, and for a step the gate
    /// refused, the refusal (what it would have done and the grant that would allow it).
    pub steps: Vec<StepRecord>,
    /// The attempts as a run's history records them, what a planner would read next turn
    /// (a refused step's `data` names what it needs).
    pub attempts: Vec<AttemptRecord>,
    /// Set when the batch was cut short by more than one step's failure: the stop flag, the
    /// corner fail-safe, the timeout or `max_steps` of the runner's limits, a declined
    /// `confirm`, or the failure budget when it is 1.
    pub ended: Option<(GoalOutcome, EndReason)>,
    /// Time spent waiting for the screen to settle after the input, in milliseconds.
    pub settle_ms: u64,
    /// The whole call, in milliseconds.
    pub elapsed_ms: u64,
}

impl Runner {
    /// Executes `next_move`, which must be a batch, on the current screen as one turn of a
    /// run would (see the module docs); no planner is asked anything. The runner's options
    /// apply (limits, `dry_run`, `confirm`, grants); its trace directory does not: one move
    /// is not a run.
    ///
    /// Errors: [`Error::InvalidInput`] for a move that is not a batch (a `done` claim is
    /// judged by a planner's `verify_done`; `clarify` and `fail` do nothing on a screen), and
    /// the setup errors of [`Runner::run`] (the screen cannot be captured). A step that fails
    /// or is refused is not an error: it is in the report.
    pub async fn act(
        &mut self,
        goal: &str,
        next_move: NextMove,
        observer: &mut dyn RunObserver,
    ) -> Result<ActReport> {
        if !matches!(next_move, NextMove::Batch { .. }) {
            return Err(Error::invalid_input(
                "act executes a batch of steps; a done claim is judged by verify, and clarify \
                 or fail move nothing on the screen",
            ));
        }
        let start = Instant::now();
        let mut state = RunState::new(self.options.limits.timeout_ms, self.options.grants.clone());
        state.pending_capture = Some(self.desktop.capture()?);
        state.turns = 1;
        // The planner of an `act` turn is the caller's move, once.
        let given = ReplayPlanner::of_moves("the given move", vec![next_move]);
        let (end, record) = self.turn(goal, &given, observer, &mut state, None).await;
        let ended = match end {
            TurnEnd::Continue => None,
            TurnEnd::Finish(outcome, reason) => Some((outcome, reason)),
        };
        let (steps, settle_ms) = record.map_or((Vec::new(), 0), |r| (r.steps, r.settle_ms));
        Ok(ActReport {
            steps,
            attempts: state.history,
            ended,
            settle_ms,
            elapsed_ms: start.elapsed().as_millis() as u64,
        })
    }
}
