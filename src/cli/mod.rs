//! Command-line subcommands. Each module holds a clap `Args` struct and the function that runs
//! it, returning the process exit code.

pub mod bench;
pub mod dump_path;
#[cfg(feature = "desktop")]
pub mod eval;
pub mod generate;
pub mod grader;
pub mod models;
pub mod plan;
#[cfg(feature = "desktop")]
pub mod run;
#[cfg(feature = "serve")]
pub mod serve;
#[cfg(feature = "desktop")]
pub mod view;

/// An error and its causes on one line, `message: cause: cause…`, for the `error:` lines.
/// A cause whose text the line already ends with is skipped: Sightline's errors keep their
/// cause as a source and also show it in their message.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}
