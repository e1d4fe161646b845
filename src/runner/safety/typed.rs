//! The command line a terminal holds, as the gate models it across steps and batches: typed
//! text and key presses join one line (keys `r`, `m`, then ` -rf ~`, then Enter is the line
//! `rm -rf ~`); Enter (or a newline in typed text, Ctrl+J, Ctrl+M, Ctrl+O) submits it; text
//! the gate never saw — a completion (Tab), a recalled history line (Up, Ctrl+R, Ctrl+S),
//! a yank (Ctrl+Y) — taints the line, so submitting it needs `shell`; a paste (Ctrl+Shift+V,
//! Shift+Insert, Ctrl+V) may hold a newline and run at once, so it needs `shell` itself.
//!
//! Every step is judged on what would run if the line were submitted right after it, so
//! typed text a grant does not cover never reaches the terminal: the refusal falls on the
//! step that types it, not on a later Enter. A taint is judged when the line is submitted
//! (Enter), which is when the unseen text would run. A line that is not complete yet (an open quote, `&&` at
//! the end, a here-document) waits for more; a line that is a syntax error runs nothing in a
//! bash-family shell and is judged word by word (see `shell::fallback_scan`).
//!
//! Keys that clear a line in a terminal (Ctrl+C, Ctrl+U) are not taken to clear it here: the
//! same keys copy or underline in other windows, and forgetting a line the terminal still
//! holds would let its end be typed later unjudged.

use super::grants::{GrantKind, Target};
use super::host::HostFacts;
use super::refusal::Need;
use super::shell::{judge_line, Parsed};

/// One change a step makes to a terminal's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Edit {
    /// Text inserted (a newline in it submits the line).
    Text(String),
    /// Enter and its equivalents.
    Submit,
    /// Backspace: the last character goes.
    Backspace,
    /// Delete: the character under the cursor goes (nothing at the end of the line).
    DeleteForward,
    /// The cursor moves inside the line (Left, Home, Ctrl+A, …).
    CursorMove,
    /// Text the gate never saw may be inserted (Tab completion, history, a search), named.
    Taint(&'static str),
}

/// The terminal line and what has been allowed for it so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct TypedLine {
    /// Text since the last complete command (may span lines when the command is incomplete).
    buffer: String,
    /// What unseen text went into the buffer, if any.
    taint: Option<&'static str>,
    /// The cursor moved inside a non-empty line: later text lands at an unknown place.
    cursor_moved: bool,
    /// Needs already allowed for the text in the buffer (by a grant or an approval), so the
    /// Enter after an approved line does not ask again.
    pub allowed: Vec<Need>,
}

impl TypedLine {
    /// Whether nothing is pending.
    pub(super) fn is_empty(&self) -> bool {
        self.buffer.is_empty() && self.taint.is_none()
    }

    /// The pending text, for messages.
    pub(super) fn pending(&self) -> &str {
        &self.buffer
    }

    /// Applies `edits` to a copy of this line: the line after them, and what would run —
    /// every line they submit, and what remains as if submitted now.
    pub(super) fn apply(&self, edits: &[Edit], host: &dyn HostFacts) -> (TypedLine, Vec<Need>) {
        let mut line = self.clone();
        let mut needs: Vec<Need> = Vec::new();
        for edit in edits {
            match edit {
                Edit::Text(text) => {
                    for c in text.chars() {
                        if c == '\n' || c == '\r' {
                            line.submit(host, &mut needs);
                        } else {
                            if line.cursor_moved {
                                line.taint = line
                                    .taint
                                    .or(Some("text typed after the cursor moved inside the line"));
                            }
                            line.buffer.push(c);
                        }
                    }
                }
                Edit::Submit => line.submit(host, &mut needs),
                Edit::Backspace => {
                    if line.cursor_moved {
                        line.taint = line
                            .taint
                            .or(Some("an edit after the cursor moved inside the line"));
                    } else {
                        line.buffer.pop();
                    }
                }
                Edit::DeleteForward => {
                    if line.cursor_moved {
                        line.taint = line
                            .taint
                            .or(Some("an edit after the cursor moved inside the line"));
                    }
                }
                Edit::CursorMove => {
                    if !line.buffer.is_empty() {
                        line.cursor_moved = true;
                    }
                }
                Edit::Taint(what) => line.taint = line.taint.or(Some(what)),
            }
        }
        // What the typed rest would run if submitted now. A taint waits for the submission:
        // the unseen text is not this step's, nothing runs before Enter, and judging it here
        // would refuse every Ctrl+S (a save in an editor, a search in a shell) followed by
        // typing.
        if !line.buffer.is_empty() {
            let text = format!("{}\n", line.buffer);
            add_judged(&text, None, host, &mut needs);
        }
        (line, needs)
    }

    /// Enter: the buffer runs if complete (or is dropped as a syntax error), else waits.
    fn submit(&mut self, host: &dyn HostFacts, needs: &mut Vec<Need>) {
        let text = format!("{}\n", self.buffer);
        if self.buffer.is_empty() && self.taint.is_none() {
            return;
        }
        if add_judged(&text, self.taint, host, needs) {
            self.buffer.push('\n');
        } else {
            self.buffer.clear();
            self.taint = None;
            self.cursor_moved = false;
        }
    }
}

/// Adds what `text` needs (with a taint's `shell` need); true when it is incomplete.
fn add_judged(
    text: &str,
    taint: Option<&'static str>,
    host: &dyn HostFacts,
    needs: &mut Vec<Need>,
) -> bool {
    let mut found = match judge_line(text, host) {
        Parsed::Complete(n) | Parsed::SyntaxError(n) => n,
        Parsed::Incomplete => return true,
    };
    if let Some(what) = taint {
        found.push(Need::new(
            GrantKind::Shell,
            Target::Unknown,
            format!("a command line holding text the gate never saw ({what})"),
        ));
    }
    if let Some(expansion) = history_expansion(text) {
        found.push(Need::new(
            GrantKind::Shell,
            Target::Unknown,
            format!("the history expansion {expansion}, which runs a command the gate never saw"),
        ));
    }
    for n in found {
        if !needs.contains(&n) {
            needs.push(n);
        }
    }
    false
}

/// A bash/zsh history expansion in a typed line (`!!`, `!rm`, `!-2`, `!$`), which an
/// interactive shell replaces with an earlier command; also how `:!cmd` in vim and `!cmd` in
/// `less` run commands. Outside single quotes, a `!` followed by anything but a blank, `=`,
/// `(` or a quote counts.
fn history_expansion(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut single = false;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if !single => i += 1,
            '\'' => single = !single,
            '!' if !single => {
                let next = chars.get(i + 1).copied().unwrap_or(' ');
                if !(next.is_whitespace() || matches!(next, '=' | '(' | '"' | '\'')) {
                    let word: String = chars[i..]
                        .iter()
                        .take_while(|c| !c.is_whitespace())
                        .take(24)
                        .collect();
                    return Some(word);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_expansions_are_found_outside_single_quotes() {
        for line in [
            "!!",
            "sudo !!",
            "!rm",
            "!-2",
            "echo !$",
            ":!rm -rf ~",
            "echo \"a!b\"",
        ] {
            assert!(history_expansion(line).is_some(), "{line}");
        }
        for line in [
            "echo hi!",
            "echo 'a!b'",
            "[ ! -f x ]",
            "a != b",
            "echo \"done!\"",
        ] {
            assert!(history_expansion(line).is_none(), "{line}");
        }
    }
}
