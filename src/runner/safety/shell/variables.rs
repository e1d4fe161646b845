//! Variables whose value changes what later commands run (`PATH`, `LD_PRELOAD`,
//! `PROMPT_COMMAND`, a pager or an editor): assigning one needs `shell`, whether bare, after
//! `export`/`declare`, or before a command (`env`, `sudo`).

use super::walker::Walker;

/// Variables whose value changes what later commands run or how they are found.
#[rustfmt::skip]
const DANGEROUS_VARIABLES: &[&str] = &[
    "PATH", "HOME", "CDPATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV",
    "PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS3", "PS4", "SHELLOPTS", "BASHOPTS", "IFS", "PAGER",
    "MANPAGER", "SYSTEMD_PAGER", "GIT_PAGER", "EDITOR", "VISUAL", "GIT_EDITOR", "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF", "LESSOPEN", "LESSCLOSE", "PYTHONSTARTUP", "PYTHONPATH", "NODE_OPTIONS",
    "PERL5OPT", "PERL5LIB", "RUBYOPT", "precmd_functions", "preexec_functions",
];

/// An assignment to a variable that changes what later commands run needs `shell`.
pub(super) fn judge_assignment(w: &mut Walker<'_>, name: &str) {
    if DANGEROUS_VARIABLES.contains(&name) {
        w.need_shell(format!(
            "setting {name}, which changes what later commands run"
        ));
    }
}
