//! Command-line subcommands. Each module holds a clap `Args` struct and the function that runs
//! it, returning the process exit code.

pub mod bench;
pub mod dump_path;
#[cfg(feature = "desktop")]
pub mod eval;
pub mod generate;
pub mod models;
pub mod plan;
#[cfg(feature = "desktop")]
pub mod run;
#[cfg(feature = "desktop")]
pub mod view;
