//! Safety enforced by the runner itself (ARCHITECTURE.md, decision 9), whatever the planner
//! says: a stop flag for Ctrl-C, the top-left-corner fail-safe, and the destructive-step gate,
//! which lets a step run only under the user's permission — a grant given outside the goal
//! (`--allow KIND[:SCOPE]`, [`Grants`]), or an approval of that one step (`--confirm`, or the
//! library's [`Approver`] callback). The goal's wording is never an input to the gate.
//!
//! The files, by concern:
//! - `grants.rs`: the seven grant kinds, `--allow` parsing, path scopes (`glob.rs`);
//! - `gate.rs`: [`Gate`], which judges each step against the grants and keeps the state a
//!   run needs (the line a terminal holds, where keys go);
//! - `shell/`: typed command lines parsed with a real shell parser (`brush-parser`) and
//!   judged default-deny (`shell/commands.rs`: the command tables; `shell/wrappers.rs`:
//!   wrappers, shells, interpreters, terminals);
//! - `typed.rs`: how typed text and key presses join into a terminal's line;
//! - `presses.rs`: clicks, chords and drags, judged with `labels.rs`, the label table in ten
//!   languages;
//! - `host.rs`: what the gate asks of the machine (files, `PATH`, shells at a prompt);
//! - `refusal.rs`: what a step needs and the structured [`Refusal`];
//! - `approval.rs`, `confirm.rs`: approving one step (the callback, the terminal prompt);
//! - `stop.rs`: the Ctrl-C flag and the corner fail-safe.

mod approval;
mod confirm;
mod gate;
mod glob;
mod grants;
mod host;
pub mod labels;
mod presses;
mod refusal;
mod shell;
mod stop;
mod typed;

pub use approval::{question, Approver, PromptApprover};
pub use confirm::{ConfirmPrompt, ScriptedPrompt, TerminalPrompt};
pub use gate::{check_batch, Checked, Gate, GateContext};
pub use grants::{home_dir, Grant, GrantKind, Grants, Target};
pub use host::{
    shells_from_table, FileKind, HostFacts, LocalHost, OwnProcess, ProcEntry, ShellAtPrompt,
};
pub use refusal::{tilde, Need, Refusal};
pub use shell::{command_line_needs, MAX_LINE_BYTES};
pub use shell::{CREATING_COMMANDS, INTERACTIVE_COMMANDS, READ_ONLY_COMMANDS};
pub use stop::{in_failsafe_corner, StopFlag, FAILSAFE_CORNER_PX};
