//! The planner: Sightline's offline [`cel_contracts::PlanProducer`].
//!
//! [`LocalPlanner`] ties the model and the constrained decoder together: it renders each turn
//! ([`prompt`]), keeps the system prefix's KV cache across turns, tells the model only what it
//! needs of the history ([`history`]), refuses destructive or ambiguous goals before any
//! model runs ([`clarify`]), and judges `done` claims with a small head on the model's hidden
//! state ([`grader`]).

mod cache;
pub mod clarify;
pub mod grader;
pub mod history;
mod local;
pub mod prefix_store;
pub mod prompt;

pub use local::{
    DeviceChoice, LoadReport, LocalPlanner, ModelLoan, OwnedTurn, PlannerOptions, StageMs,
    StageTimes, Turn, TurnStats,
};
