//! Safety enforced by the runner itself (ARCHITECTURE.md, decision 9), whatever the planner says:
//! a stop flag for Ctrl-C, the top-left-corner fail-safe, the confirm-each-batch prompt and the
//! destructive-step gate.
//!
//! The files, by concern: `stop.rs` (the Ctrl-C flag and the corner fail-safe), `confirm.rs`
//! (the `--confirm` prompt), `gate.rs` (the destructive-step gate and what a goal confirms),
//! which judges a step with `presses.rs` (clicks on committing controls, closing and deleting
//! key chords) and `shell.rs` (deleting or overwriting command lines in typed text).

mod confirm;
mod gate;
mod presses;
mod shell;
mod stop;

pub use confirm::{ConfirmPrompt, ScriptedPrompt, TerminalPrompt};
pub use gate::{check_batch_step, check_step, check_step_seen, goal_confirms, Refusal};
pub use presses::destructive_text;
pub use shell::delete_command_in;
pub use stop::{in_failsafe_corner, StopFlag, FAILSAFE_CORNER_PX};

/// Why a step counts as destructive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DestructiveKind {
    /// Typing a shell command that deletes (`rm -rf`, `shred`, `find -delete`, …) or pressing
    /// Shift+Delete (permanent delete in file managers).
    Deletes,
    /// A keystroke that closes a window or quits an app, which may discard unsaved work.
    ClosesWithoutSaving,
    /// Clicking a control labelled with an irreversible commitment (Delete, Pay, Send, Buy, …).
    Commits,
}
