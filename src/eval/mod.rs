//! Task-success evaluation (`sightline eval`): how often the agent reaches a goal, not only
//! how fast it decides.
//!
//! - [`task`]: the desktop suite's task files (setup, goal, checker, budgets, tags), suites,
//!   `--tasks` globs and `--shard I/N` slices.
//! - [`session`]: one task's private desktop (a fresh Xvfb, a scratch `HOME`, its programs in
//!   process groups), torn down on drop.
//! - [`desktop`]: running a task through `sightline run` (the oracle replay or a model) and
//!   checking it (feature `desktop`).
//! - [`report`]: one JSONL line per run and the summary (Wilson 95% interval, steps, turns,
//!   time per stage, failures by reason); merging shards.
//! - [`grounding`]: ScreenSpot-style click grounding: records, the model's click, hit scoring.
//!
//! Task success is what a task's checker says, whatever the agent claimed (ARCHITECTURE.md,
//! decision 11).

#[cfg(feature = "desktop")]
pub mod desktop;
pub mod grounding;
pub mod report;
pub mod session;
pub mod task;

pub use report::{read_results, wilson_interval, RunResult, Summary};
pub use task::{filter_tasks, load_suite, Shard, Task};
