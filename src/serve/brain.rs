//! The planner behind the served tools: a loaded model, or recorded moves (`--replay`).

use std::sync::Arc;
use std::time::Duration;

use cel_contracts::{DoneVerdict, NextMove, PlanProducer};

use super::queue::{ModelQueue, QueueError};
use crate::error::Error;
pub use crate::planner::OwnedTurn;
use crate::planner::{LocalPlanner, TurnStats};
use crate::runner::ReplayPlanner;

/// What answers `plan`, `verify`, `run` and the `sightline` chat model.
#[derive(Debug, Clone)]
pub enum Brain {
    /// A loaded model: it also serves chat completions.
    Model {
        /// The planner over the model.
        planner: LocalPlanner,
        /// The name clients use for free chat with it (the `--model` given).
        name: String,
    },
    /// Recorded moves, returned in order across every call (for demos and tests); no chat
    /// model.
    Replay {
        /// The replay.
        planner: Arc<ReplayPlanner>,
        /// Where the moves come from, for logs.
        label: String,
    },
}

/// An answer and, from a model, the turn's stats.
#[derive(Debug, Clone)]
pub struct Planned<T> {
    /// The move or verdict.
    pub answer: T,
    /// Stage times and counts (none from a replay).
    pub stats: Option<TurnStats>,
}

impl Brain {
    /// The planner in words, for logs and `/v1/models`.
    pub fn label(&self) -> &str {
        match self {
            Brain::Model { name, .. } => name,
            Brain::Replay { label, .. } => label,
        }
    }

    /// The loaded model's planner, when there is one.
    pub fn model(&self) -> Option<&LocalPlanner> {
        match self {
            Brain::Model { planner, .. } => Some(planner),
            Brain::Replay { .. } => None,
        }
    }

    /// The planner as a runner sees it.
    pub fn producer(&self) -> Arc<dyn PlanProducer + Send + Sync> {
        match self {
            Brain::Model { planner, .. } => Arc::new(planner.clone()),
            Brain::Replay { planner, .. } => {
                Arc::clone(planner) as Arc<dyn PlanProducer + Send + Sync>
            }
        }
    }

    /// `decide_next` for `turn`, through the model's queue.
    pub async fn plan(
        &self,
        queue: &ModelQueue,
        timeout: Duration,
        turn: OwnedTurn,
    ) -> Result<Planned<NextMove>, QueueError> {
        self.ask(
            queue,
            timeout,
            move |planner| planner.plan(&turn.turn()),
            ReplayPlanner::next_move,
        )
        .await
    }

    /// `verify_done` of `summary` for `turn`, through the model's queue.
    pub async fn verify(
        &self,
        queue: &ModelQueue,
        timeout: Duration,
        turn: OwnedTurn,
        summary: String,
    ) -> Result<Planned<DoneVerdict>, QueueError> {
        self.ask(
            queue,
            timeout,
            move |planner| planner.verify(&turn.turn(), &summary),
            ReplayPlanner::recorded_verdict,
        )
        .await
    }

    /// One answer through the model's queue: `model` asks a loaded model, `replay` takes
    /// the recorded one (a replay does not look at the turn).
    async fn ask<T: Send + 'static>(
        &self,
        queue: &ModelQueue,
        timeout: Duration,
        model: impl FnOnce(&LocalPlanner) -> crate::error::Result<(T, TurnStats)> + Send + 'static,
        replay: impl FnOnce(&ReplayPlanner) -> Result<T, String> + Send + 'static,
    ) -> Result<Planned<T>, QueueError> {
        let brain = self.clone();
        queue
            .run(timeout, move |_| match brain {
                Brain::Model { planner, .. } => model(&planner).map(|(answer, stats)| Planned {
                    answer,
                    stats: Some(stats),
                }),
                Brain::Replay { planner, .. } => replay(&planner)
                    .map(|answer| Planned {
                        answer,
                        stats: None,
                    })
                    .map_err(Error::invalid_input),
            })
            .await
    }
}
