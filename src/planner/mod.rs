//! The planner: Sightline's offline [`cel_contracts::PlanProducer`].

pub mod clarify;
pub mod grader;
pub mod history;
pub mod prompt;
