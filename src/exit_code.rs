//! The exit codes of the `sightline` commands, in one place.
//!
//! The binary returns them and `sightline eval` reads them back from the `sightline run`
//! children it starts, so they are vocabulary both sides share (ARCHITECTURE.md, "Layers").
//! Every command uses the same code for the same kind of ending; what "failed" means depends
//! on the command and is said on each constant.

/// The command did what it was asked: the goal succeeded (`run`), the move or verdict was
/// printed and, for `verify`, the claim was verified, the evaluation ran (`eval`).
pub const SUCCESS: i32 = 0;

/// The command ran and the answer is no: the run failed (the planner gave up or errored, the
/// failure budget or a step, time or turn budget ran out), `verify` rejected the claim, an
/// `eval --oracle` task failed with its own oracle replay.
pub const FAILED: i32 = 1;

/// Bad arguments or setup: an unknown model or flag value, a file that cannot be read, a
/// model that cannot be resolved or loaded, no display, a device that cannot be had. The
/// same code clap uses for usage errors, so every early failure reads alike.
pub const USAGE_OR_SETUP: i32 = 2;

/// `run`: the agent refused: the planner asked to clarify, or a step needed a permission the
/// user had not given and the run could not go on without it.
pub const REFUSED: i32 = 3;

/// The user stopped the command: Ctrl-C or the top-left-corner fail-safe (128 + SIGINT).
pub const INTERRUPTED: i32 = 130;
