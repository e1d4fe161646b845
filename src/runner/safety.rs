//! Safety enforced by the runner itself (ARCHITECTURE.md, decision 9), whatever the planner says:
//! a stop flag for Ctrl-C, the top-left-corner fail-safe, the confirm-each-batch prompt and the
//! destructive-step gate.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cel_contracts::{PlannedAction, PlanningView, Step};
use enigo::Key;

use super::coords::{parse_xy_target, InputPoint, ScreenGeometry};
use super::elements::ElementFacts;
use super::input::{parse_key_chord, parse_key_combo};
use crate::error::{Error, Result};
use crate::text_norm::{affirms, normalize, words};

// ─── Stop flag (Ctrl-C) ─────────────────────────────────────────────────────

/// A flag the runner checks between steps; setting it stops the run cleanly (no step is cut
/// in half, held keys are released).
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the run to stop at the next check.
    pub fn request_stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was requested.
    pub fn is_stop_requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Installs a Ctrl-C (SIGINT) handler that sets this flag. A second Ctrl-C while
    /// the flag is already set exits the process with status 130, for a runner stuck in a step.
    /// Only one handler can be installed per process; a second call is an error.
    pub fn install_ctrlc_handler(&self) -> Result<()> {
        let flag = self.clone();
        ctrlc::set_handler(move || {
            if flag.is_stop_requested() {
                std::process::exit(130);
            }
            flag.request_stop();
        })
        .map_err(|e| Error::Runner(format!("cannot install the Ctrl-C handler: {e}")))
    }
}

// ─── Corner fail-safe ───────────────────────────────────────────────────────

/// How close (in input pixels, both axes) to the monitor's top-left corner the pointer must be
/// for the fail-safe to fire. Small, like pyautogui's exact (0, 0), but tolerant of a pointer
/// that stops a pixel short of the edge.
pub const FAILSAFE_CORNER_PX: i32 = 2;

/// Whether `pointer` sits in the top-left corner of the monitor described by `geometry`.
pub fn in_failsafe_corner(pointer: InputPoint, geometry: &ScreenGeometry) -> bool {
    let dx = pointer.x - geometry.origin_x;
    let dy = pointer.y - geometry.origin_y;
    (0..=FAILSAFE_CORNER_PX).contains(&dx) && (0..=FAILSAFE_CORNER_PX).contains(&dy)
}

// ─── Confirm prompt ─────────────────────────────────────────────────────────

/// Where `--confirm` answers come from: the terminal in the CLI, a script in tests.
pub trait ConfirmPrompt: Send {
    /// Asks a yes/no question; `Ok(true)` lets the batch run.
    fn confirm(&mut self, question: &str) -> Result<bool>;
}

/// Asks on the terminal: the question on stderr, one line from stdin; only `y` or `yes`
/// (any case) accepts, and end of input declines.
#[derive(Debug, Default, Clone, Copy)]
pub struct TerminalPrompt;

impl ConfirmPrompt for TerminalPrompt {
    fn confirm(&mut self, question: &str) -> Result<bool> {
        let mut err = std::io::stderr();
        // A failed write to stderr leaves the question unseen; decline rather than act blind.
        if write!(err, "{question} [y/N] ")
            .and_then(|_| err.flush())
            .is_err()
        {
            return Ok(false);
        }
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| Error::io("<stdin>", e))?;
        Ok(matches!(line.trim().to_lowercase().as_str(), "y" | "yes"))
    }
}

/// Answers from a fixed list, recording each question; once the list is exhausted it declines.
#[derive(Debug, Default, Clone)]
pub struct ScriptedPrompt {
    answers: VecDeque<bool>,
    /// The questions asked so far, oldest first.
    pub asked: Vec<String>,
}

impl ScriptedPrompt {
    /// A prompt that gives these answers in order.
    pub fn new(answers: impl IntoIterator<Item = bool>) -> Self {
        Self {
            answers: answers.into_iter().collect(),
            asked: Vec::new(),
        }
    }
}

impl ConfirmPrompt for ScriptedPrompt {
    fn confirm(&mut self, question: &str) -> Result<bool> {
        self.asked.push(question.to_string());
        Ok(self.answers.pop_front().unwrap_or(false))
    }
}

// ─── Destructive-step gate ──────────────────────────────────────────────────

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

/// A step the gate refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What kind of destructive step it is.
    pub kind: DestructiveKind,
    /// The trigger found (the command word, the chord, the label word).
    pub trigger: String,
    /// A sentence for the user and the planner: what was refused and how to confirm it.
    pub message: String,
}

/// Shell commands whose purpose is deleting or irrecoverably overwriting data.
const DELETE_COMMANDS: &[&str] = &[
    "rm",
    "rmdir",
    "shred",
    "unlink",
    "srm",
    "wipe",
    "wipefs",
    "remove-item",
    "mkfs",
];

/// Windows `cmd` deletions whose names are also ordinary words ("Del Mar", "erase the board"):
/// they count only when an argument looks like a path or a `/flag`.
const CMD_DELETE_COMMANDS: &[&str] = &["del", "erase", "rd"];

/// Label words that commit to something irreversible when clicked.
const COMMIT_WORDS: &[&str] = &[
    "delete",
    "remove",
    "erase",
    "discard",
    "pay",
    "send",
    "buy",
    "purchase",
    "checkout",
    "transfer",
    "uninstall",
    "wipe",
    "format",
];

/// Multi-word labels with the same effect.
const COMMIT_PHRASES: &[&str] = &[
    "don't save",
    "dont save",
    "do not save",
    "place order",
    "check out",
    "empty trash",
    "confirm payment",
    "submit payment",
];

/// Phrases by which a goal's author explicitly confirms a destructive act.
const CONFIRMATION_MARKERS: &[&str] = &[
    "i confirm",
    "confirmed",
    "confirm:",
    "i am sure",
    "i'm sure",
    "without asking",
    "no confirmation needed",
];

/// Words that must also appear in the goal for a [`DestructiveKind`] to count as confirmed
/// (besides the trigger itself): a goal confirming a purchase does not confirm `rm -rf`.
fn kind_words(kind: DestructiveKind) -> &'static [&'static str] {
    match kind {
        DestructiveKind::Deletes => &["delete", "deletion", "remove", "erase", "wipe", "rm"],
        DestructiveKind::ClosesWithoutSaving => &["close", "quit", "exit", "discard"],
        DestructiveKind::Commits => &[],
    }
}

/// Whether the goal explicitly confirms a destructive step of this kind: it must carry a
/// confirmation marker ("I confirm", "confirmed", …) affirmatively — not negated ("not
/// confirmed", "I don't confirm", "unconfirmed" do not count; see
/// [`crate::text_norm::affirms`]) — and name the act (the trigger, or a word of the kind such
/// as "delete" for deletions). The goal is read through [`normalize`].
pub fn goal_confirms(goal: &str, kind: DestructiveKind, trigger: &str) -> bool {
    let goal = normalize(goal);
    let marked = affirms(&goal, CONFIRMATION_MARKERS);
    let trigger = normalize(trigger);
    // Kind words match whole words: "confirm the" must not count as naming `rm`.
    let goal_words = words(&goal);
    let named = (!trigger.is_empty() && goal.contains(&trigger))
        || kind_words(kind).iter().any(|w| goal_words.contains(w));
    marked && named
}

/// Checks a step against the gate. Returns the refusal when the step is destructive and the
/// goal does not confirm it; `None` lets it run. This judges the step alone; the runner uses
/// [`check_batch_step`], which also sees the command line typed by the earlier steps.
pub fn check_step(goal: &str, step: &Step, view: &PlanningView) -> Option<Refusal> {
    check_batch_step(goal, "", std::slice::from_ref(step), 0, view, &|_| None)
}

/// [`check_step`] with what the screen says each target is (`seen`: target id → the element's
/// accessible name and role, for an `xy:` point the element under it): a click is judged by
/// that real name as well as by the view's label, whatever the planner wrote as `purpose`.
pub fn check_step_seen(
    goal: &str,
    step: &Step,
    view: &PlanningView,
    seen: &dyn Fn(&str) -> Option<ElementFacts>,
) -> Option<Refusal> {
    check_batch_step(goal, "", std::slice::from_ref(step), 0, view, seen)
}

/// Checks step `index` of a batch: the step itself (chords, clicks, typed text, judged with
/// what the screen says each target is, as [`check_step_seen`]), and the command line the
/// batch has typed so far. Typed text is concatenated across the batch's steps, an Enter key
/// adding a newline, so `rm` typed in one step and ` -rf ~` in the next are judged as the one
/// line `rm -rf ~`. `batch_purpose` stands in for a coordinate click's missing purpose.
pub fn check_batch_step(
    goal: &str,
    batch_purpose: &str,
    steps: &[Step],
    index: usize,
    view: &PlanningView,
    seen: &dyn Fn(&str) -> Option<ElementFacts>,
) -> Option<Refusal> {
    let step = steps.get(index)?;
    let found = action_trigger(&step.action, &step.purpose, batch_purpose, view, seen)
        .or_else(|| typed_line_trigger(&steps[..=index]));
    let (kind, trigger) = found?;
    if goal_names_redirect_target(goal, &trigger) {
        return None;
    }
    if goal_confirms(goal, kind, &trigger) {
        return None;
    }
    let what = match kind {
        DestructiveKind::Deletes => format!("`{trigger}` deletes or overwrites data"),
        DestructiveKind::ClosesWithoutSaving => {
            format!("`{trigger}` closes a window or app and may discard unsaved work")
        }
        DestructiveKind::Commits => {
            format!("clicking \"{trigger}\" commits an irreversible action")
        }
    };
    let message = format!(
        "refused step \"{}\": {what}, and the goal does not confirm it; to allow it, say so in \
         the goal (for example \"... I confirm the {}\")",
        step.purpose,
        match kind {
            DestructiveKind::Deletes => "deletion".to_string(),
            DestructiveKind::ClosesWithoutSaving => "close".to_string(),
            DestructiveKind::Commits => trigger.to_lowercase(),
        }
    );
    Some(Refusal {
        kind,
        trigger,
        message,
    })
}

/// Whether the trigger is a `>` redirection onto a file the goal itself names ("write hello
/// into hello.txt" → `echo hello > hello.txt`): writing the file the user asked for is the task,
/// not a destructive side effect. Any other truncating redirection needs a confirmation.
fn goal_names_redirect_target(goal: &str, trigger: &str) -> bool {
    let Some(target) = trigger.strip_prefix("> ") else {
        return false;
    };
    let name = normalize(target.rsplit('/').next().unwrap_or(target));
    !name.is_empty() && normalize(goal).contains(&name)
}

/// The deleting command in the text the steps type, concatenated (an Enter key is a newline).
fn typed_line_trigger(steps: &[Step]) -> Option<(DestructiveKind, String)> {
    let mut line = String::new();
    for step in steps {
        append_typed(&step.action, &mut line);
    }
    delete_command_in(&line).map(|t| (DestructiveKind::Deletes, t))
}

fn append_typed(action: &PlannedAction, line: &mut String) {
    match action {
        PlannedAction::Type { text, .. } => line.push_str(text),
        PlannedAction::Key { key } if is_enter(key) => line.push('\n'),
        PlannedAction::KeyCombo { keys } if keys.len() == 1 && is_enter(&keys[0]) => {
            line.push('\n')
        }
        PlannedAction::Batch { actions } => actions.iter().for_each(|a| append_typed(a, line)),
        _ => {}
    }
}

fn is_enter(key: &str) -> bool {
    matches!(
        key.trim().to_lowercase().as_str(),
        "enter" | "return" | "kp_enter" | "\n"
    )
}

/// Whether a text — a control's accessible name, a label, a click's purpose — names an
/// irreversible commitment (Delete, Pay, Send, "Don't save", …), judged after [`normalize`]
/// (look-alike letters, full-width forms, invisible characters, quotes around the word).
/// Returns the word or phrase found. The runner's gate uses it for every click; callers that
/// know the real element name judge that name with it too.
pub fn destructive_text(text: &str) -> Option<String> {
    commit_word_in(text)
}

fn action_trigger(
    action: &PlannedAction,
    purpose: &str,
    batch_purpose: &str,
    view: &PlanningView,
    seen: &dyn Fn(&str) -> Option<ElementFacts>,
) -> Option<(DestructiveKind, String)> {
    match action {
        PlannedAction::Type { target_id, text } => delete_command_in(text)
            .map(|t| (DestructiveKind::Deletes, t))
            .or_else(|| {
                target_id
                    .as_deref()
                    .and_then(|id| click_trigger(id, purpose, batch_purpose, view, seen))
            }),
        PlannedAction::Key { key } => chord_trigger(std::slice::from_ref(key)),
        PlannedAction::KeyCombo { keys } => chord_trigger(keys),
        PlannedAction::Click { target_id, .. } => {
            click_trigger(target_id, purpose, batch_purpose, view, seen)
        }
        PlannedAction::Batch { actions } => actions
            .iter()
            .find_map(|a| action_trigger(a, purpose, batch_purpose, view, seen)),
        _ => None,
    }
}

/// What a coordinate click with no description is called in a refusal.
const UNDESCRIBED_POINT_CLICK: &str = "an undescribed point";

/// For a click: the element's real accessible name (`seen`), its label and value from the
/// view; for an `xy:` point, the name of the element under it and the step's purpose (the
/// planner's own description of what it clicks), else the batch's purpose. A point click with
/// no element name under it and no words in either purpose is refused: nothing says what it
/// presses, so the gate cannot tell a Delete button from a blank spot, and the planner can
/// always describe a click (rule chosen so an empty purpose is never a way around the gate).
fn click_trigger(
    target_id: &str,
    purpose: &str,
    batch_purpose: &str,
    view: &PlanningView,
    seen: &dyn Fn(&str) -> Option<ElementFacts>,
) -> Option<(DestructiveKind, String)> {
    let seen_name = seen(target_id).map(|f| f.name);
    let mut texts: Vec<&str> = Vec::new();
    texts.extend(seen_name.as_deref());
    if let Some(el) = view.elements.iter().find(|e| e.id == target_id) {
        texts.extend(el.label.as_deref());
        texts.extend(el.value.as_deref());
    }
    if matches!(parse_xy_target(target_id), Ok(Some(_))) {
        let described = |t: &str| !words(&normalize(t)).is_empty();
        if described(purpose) {
            texts.push(purpose);
        } else if described(batch_purpose) {
            texts.push(batch_purpose);
        } else if seen_name.is_none() {
            return Some((
                DestructiveKind::Commits,
                UNDESCRIBED_POINT_CLICK.to_string(),
            ));
        }
    }
    texts
        .into_iter()
        .find_map(commit_word_in)
        .map(|w| (DestructiveKind::Commits, w))
}

/// The commit word or phrase in a label, matched on whole words, case-insensitively.
fn commit_word_in(label: &str) -> Option<String> {
    let normalized = normalize(label);
    let words = words(&normalized);
    let joined = format!(" {} ", words.join(" "));
    if let Some(p) = COMMIT_PHRASES
        .iter()
        .find(|p| joined.contains(&format!(" {p} ")))
    {
        return Some(p.to_string());
    }
    COMMIT_WORDS
        .iter()
        .find(|w| words.contains(w))
        .map(|w| w.to_string())
}

/// A chord that closes a window or quits (Alt+F4, Ctrl/Super+W, Ctrl/Super+Q) or deletes
/// permanently (Shift+Delete). A chord counts when it CONTAINS such a combination, whatever
/// else it holds and in whatever order (`alt+f4+x`, `ctrl+w+a`, `q+ctrl`): pressing the extra
/// key does not stop the close. A chord the input layer cannot parse is judged by its key
/// names, so a misspelling is not a way around the gate.
fn chord_trigger(keys: &[String]) -> Option<(DestructiveKind, String)> {
    let spelled = keys.join("+");
    let parsed = parse_key_combo(keys)
        .ok()
        .or_else(|| parse_key_chord(&spelled).ok());
    let names: Vec<String> = keys
        .iter()
        .flat_map(|k| k.split(['+', ' ']))
        .map(|n| normalize(n.trim()))
        .filter(|n| !n.is_empty())
        .collect();
    let named = |set: &[&str]| names.iter().any(|n| set.contains(&n.as_str()));
    let pressed =
        |k: Key, set: &[&str]| parsed.as_ref().is_some_and(|p| p.contains(&k)) || named(set);
    let alt = pressed(Key::Alt, &["alt", "option", "alt_l", "alt_r"]);
    let f4 = pressed(Key::F4, &["f4"]);
    let ctrl_or_super = pressed(Key::Control, &["ctrl", "control", "ctrl_l", "ctrl_r"])
        || pressed(
            Key::Meta,
            &["super", "meta", "cmd", "command", "win", "windows", "logo"],
        );
    let letter = |c: char| {
        parsed.as_ref().is_some_and(|p| {
            p.contains(&Key::Unicode(c)) || p.contains(&Key::Unicode(c.to_ascii_uppercase()))
        }) || named(&[c.encode_utf8(&mut [0; 4])])
    };
    if (alt && f4) || (ctrl_or_super && (letter('w') || letter('q'))) {
        return Some((DestructiveKind::ClosesWithoutSaving, spelled));
    }
    let shift = pressed(Key::Shift, &["shift", "shift_l", "shift_r"]);
    if shift && pressed(Key::Delete, &["delete", "del"]) {
        return Some((DestructiveKind::Deletes, spelled));
    }
    None
}

/// Commands run before the real command word: wrappers (`sudo`, `xargs`), and shells and
/// evaluators whose argument is itself a command line (`bash -c '…'`, `eval`, `su -c`).
const COMMAND_PREFIXES: &[&str] = &[
    "sudo",
    "doas",
    "env",
    "xargs",
    "nohup",
    "time",
    "command",
    "exec",
    "busybox",
    "nice",
    "ionice",
    "timeout",
    "watch",
    "stdbuf",
    "setsid",
    "bash",
    "sh",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "csh",
    "tcsh",
    "su",
    "eval",
    "builtin",
    "run0",
    "pkexec",
    "cmd",
    "cmd.exe",
    "powershell",
    "pwsh",
];

/// Library calls that delete from inside an interpreter (`python -c`, `perl -e`, `node -e`).
const INTERPRETER_DELETES: &[&str] = &[
    "rmtree",
    "os.remove",
    "os.unlink",
    "os.rmdir",
    "removedirs",
    ".unlink(",
    "unlink(",
    "fs.rm",
    "rmsync",
    "rimraf",
    "remove_dir_all",
    "fileutils.rm",
];

/// Where a `>` redirection may point without overwriting anything.
const HARMLESS_REDIRECT_TARGETS: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];

/// Finds a deleting or overwriting shell command in typed text: the command word of any
/// segment (split at `;`, `&`, `|`, newlines, parentheses, `$(`, backquotes and braces), after
/// wrappers, shells and evaluators (`sudo`, `bash -c '…'`, `eval`), with quotes and
/// backslashes removed from the command word (`'rm'`, `\rm`); plus `find … -delete`/`-exec
/// rm`, `git clean`/`git rm`, `dd of=`, `truncate`, `mv … /dev/null`, `rsync --delete`,
/// recursive `chmod`/`chown`, interpreter deletions (`shutil.rmtree`, `os.remove`) and a `>`
/// redirection that truncates a file. The text is read through
/// [`crate::text_norm::normalize`]. Returns the segment as typed, which names the command in
/// the refusal.
pub fn delete_command_in(text: &str) -> Option<String> {
    // Case matters for flags (`chmod -R` recurses, `-r` does not), so fold look-alikes and
    // invisible characters here but lower-case only command words.
    let text = crate::text_norm::fold(text);
    if let Some(t) = truncating_redirect(&text) {
        return Some(t);
    }
    let lower = text.to_lowercase();
    if let Some(p) = INTERPRETER_DELETES.iter().find(|p| lower.contains(*p)) {
        return Some(p.to_string());
    }
    for segment in text.split(['\n', ';', '&', '|', '(', ')', '`', '{', '}']) {
        if segment_deletes(segment) {
            return Some(segment.trim().to_string());
        }
    }
    None
}

fn segment_deletes(segment: &str) -> bool {
    let tokens: Vec<String> = segment
        .split_whitespace()
        .map(|t| t.replace(['\'', '"'], ""))
        .filter(|t| !t.is_empty())
        .collect();
    let mut i = 0;
    // Skip wrappers, their flags (`sudo -u x`, `bash -c`), numbers (`timeout 5`) and
    // environment assignments.
    while i < tokens.len() {
        let t = tokens[i].as_str();
        let base = command_base(t);
        if COMMAND_PREFIXES.contains(&base.as_str())
            || t.starts_with('-')
            || t.starts_with('/') && t.len() <= 3 // `cmd /c`
            || t.contains('=')
            || t.chars().all(|c| c.is_ascii_digit() || c == '.')
        {
            i += 1;
        } else {
            break;
        }
    }
    let Some(cmd) = tokens.get(i) else {
        return false;
    };
    let base = command_base(cmd);
    let rest: Vec<&str> = tokens[i + 1..].iter().map(String::as_str).collect();
    let path_like = |t: &&str| t.contains(['/', '\\', '.', '*', ':']);
    let has = |flag: &str| rest.contains(&flag);
    let base = base.as_str();
    DELETE_COMMANDS.contains(&base)
        || (CMD_DELETE_COMMANDS.contains(&base) && rest.iter().any(path_like))
        || base.starts_with("mkfs.")
        || base == "truncate"
        || (base == "find"
            && (has("-delete")
                || rest.windows(2).any(|w| {
                    matches!(w[0], "-exec" | "-execdir" | "-ok" | "-okdir")
                        && DELETE_COMMANDS.contains(&command_base(w[1]).as_str())
                })))
        || (base == "git" && matches!(rest.first(), Some(&"clean") | Some(&"rm")))
        || (base == "dd" && rest.iter().any(|t| t.starts_with("of=")))
        || (base == "mv" && has("/dev/null"))
        || (base == "rsync"
            && rest
                .iter()
                .any(|t| t.starts_with("--delete") || *t == "--remove-source-files"))
        || (matches!(base, "chmod" | "chown" | "chgrp")
            && rest.iter().any(|t| {
                *t == "--recursive"
                    || (t.starts_with('-') && !t.starts_with("--") && t.contains('R'))
            }))
}

/// A `>` (or `>|`) redirection outside quotes whose target is a file, which truncates it;
/// `>>` appends and `>&2`, `2>&1`, `> /dev/null` overwrite nothing.
fn truncating_redirect(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut quote: Option<char> = None;
    for (i, &c) in chars.iter().enumerate() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '>') => {
                let prev = i.checked_sub(1).map(|j| chars[j]);
                let next = chars.get(i + 1).copied();
                if prev == Some('>') || next == Some('>') || next == Some('&') || prev == Some('-')
                {
                    continue;
                }
                let skip = usize::from(next == Some('|'));
                let target: String = chars[i + 1 + skip..]
                    .iter()
                    .skip_while(|c| c.is_whitespace())
                    .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '&' | '|' | ')'))
                    .collect();
                let target = target.replace(['\'', '"'], "");
                if !target.is_empty() && !HARMLESS_REDIRECT_TARGETS.contains(&target.as_str()) {
                    return Some(format!("> {target}"));
                }
            }
            _ => {}
        }
    }
    None
}

/// A command word without its directory, quotes and escapes, in lower case (`/bin/rm` →
/// `rm`, `\rm` → `rm`, `Remove-Item` → `remove-item`).
fn command_base(token: &str) -> String {
    let token = token.trim_start_matches('\\');
    token
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(token)
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel_contracts::{PlanningElement, PlanningScreen};

    fn view(elements: Vec<PlanningElement>) -> PlanningView {
        crate::view::view_of("", PlanningScreen::default(), elements)
    }

    fn step(purpose: &str, action: PlannedAction) -> Step {
        Step {
            purpose: purpose.into(),
            kind: Default::default(),
            action,
        }
    }

    #[test]
    fn delete_commands_are_found_behind_prefixes_and_separators() {
        for text in [
            "rm -rf /tmp/x",
            "sudo rm -r build",
            "cd /tmp && /bin/rm -fr *",
            "ls; shred secret.txt",
            "find . -name '*.o' -delete",
            "bash -c 'rm -rf ~/x'",
            "sh -c \"cd /tmp && rm -r y\"",
            "eval rm -rf build",
            "echo $(rm -rf ~)",
            "echo `rm -rf ~`",
            "'rm' -rf ~",
            "\\rm -rf ~",
            "python3 -c 'import shutil; shutil.rmtree(\"/home\")'",
            "python -c 'import os; os.remove(\"a\")'",
            "truncate -s 0 notes.txt",
            "echo > notes.txt",
            ": >| notes.txt",
            "mv notes.txt /dev/null",
            "rsync -a --delete empty/ ~/docs/",
            "chmod -R 000 ~",
            "chown -R nobody /home",
            "find . -exec rm {} +",
            "timeout 5 rm -rf x",
            "git clean -fdx",
            "dd if=/dev/zero of=/dev/sda",
            "Remove-Item -Recurse C:\\data",
            "FOO=1 xargs -0 rm",
            "mkfs.ext4 /dev/sdb1",
            "del /q C:\\tmp\\*.log",
        ] {
            assert!(delete_command_in(text).is_some(), "{text}");
        }
        for text in [
            "echo ok >> out.txt",
            "ls 2>&1",
            "make > /dev/null",
            "echo 'a > b'",
            "chmod -r notes.txt",
            "echo hello",
            "ls -la",
            "grep rm notes.txt",
            "find . -name x",
            "git commit -m 'rm old'",
            "firmware update",
            "Del Mar beach trip",
        ] {
            assert!(delete_command_in(text).is_none(), "{text}");
        }
    }

    #[test]
    fn gate_refuses_rm_rf_unless_goal_confirms_deletion() {
        let s = step(
            "wipe the scratch dir",
            PlannedAction::Type {
                target_id: None,
                text: "rm -rf /tmp/scratch\n".into(),
            },
        );
        let v = view(vec![]);
        let refusal = check_step("clean up the scratch dir", &s, &v);
        assert_eq!(refusal.map(|r| r.kind), Some(DestructiveKind::Deletes));
        assert!(check_step(
            "delete /tmp/scratch with rm -rf, I confirm the deletion",
            &s,
            &v
        )
        .is_none());
        // A confirmation for something else does not cover a deletion.
        assert!(check_step("buy the book, I confirm the purchase", &s, &v).is_some());
    }

    #[test]
    fn gate_refuses_closing_chords_and_labelled_commit_buttons() {
        let v = view(vec![PlanningElement {
            id: "a11y:7".into(),
            element_type: "button".into(),
            label: Some("Pay now".into()),
            value: None,
            state: Default::default(),
            clickable: true,
            settable: false,
            select_options: None,
        }]);
        let close = step(
            "close it",
            PlannedAction::Key {
                key: "alt+F4".into(),
            },
        );
        assert_eq!(
            check_step("tidy up", &close, &v).map(|r| r.kind),
            Some(DestructiveKind::ClosesWithoutSaving)
        );
        let quit = step(
            "quit",
            PlannedAction::KeyCombo {
                keys: vec!["ctrl".into(), "q".into()],
            },
        );
        assert!(check_step("tidy up", &quit, &v).is_some());
        let pay = step(
            "press the button",
            PlannedAction::Click {
                target_id: "a11y:7".into(),
                expect_after: None,
            },
        );
        let r = check_step("finish the order", &pay, &v);
        assert_eq!(r.as_ref().map(|r| r.trigger.as_str()), Some("pay"));
        assert!(check_step("pay the invoice, confirmed", &pay, &v).is_none());
        let send = step(
            "Click the Send button",
            PlannedAction::Click {
                target_id: "xy:900,950".into(),
                expect_after: None,
            },
        );
        assert!(check_step("write a reply", &send, &v).is_some());
        let harmless = step(
            "Click the Sender field",
            PlannedAction::Click {
                target_id: "xy:100,100".into(),
                expect_after: None,
            },
        );
        assert!(check_step("write a reply", &harmless, &v).is_none());
        let save = step(
            "save",
            PlannedAction::Key {
                key: "ctrl+s".into(),
            },
        );
        assert!(check_step("save the file", &save, &v).is_none());
    }

    fn typed(text: &str) -> Step {
        step(
            "type",
            PlannedAction::Type {
                target_id: None,
                text: text.into(),
            },
        )
    }

    #[test]
    fn gate_judges_the_command_line_typed_across_steps() {
        let v = view(vec![]);
        let steps = vec![
            typed("r"),
            typed("m -rf ~"),
            step(
                "run",
                PlannedAction::Key {
                    key: "Return".into(),
                },
            ),
        ];
        assert!(check_batch_step("tidy up", "", &steps, 0, &v, &|_| None).is_none());
        assert!(check_batch_step("tidy up", "", &steps, 1, &v, &|_| None).is_some());
        let harmless = vec![
            typed("echo "),
            typed("hello"),
            step(
                "run",
                PlannedAction::Key {
                    key: "Return".into(),
                },
            ),
        ];
        assert!((0..3)
            .all(|i| check_batch_step("say hello", "", &harmless, i, &v, &|_| None).is_none()));
    }

    #[test]
    fn chords_containing_a_closing_chord_close() {
        let v = view(vec![]);
        for key in [
            "alt+f4+x",
            "x+alt+F4",
            "ctrl+w+a",
            "ctrl+shift+q",
            "super+q",
            "shift+delete+a",
        ] {
            let s = step("key", PlannedAction::Key { key: key.into() });
            assert!(check_step("tidy up", &s, &v).is_some(), "{key}");
        }
        for key in ["ctrl+s", "alt+tab", "ctrl+a", "F4"] {
            let s = step("key", PlannedAction::Key { key: key.into() });
            assert!(check_step("tidy up", &s, &v).is_none(), "{key}");
        }
    }

    #[test]
    fn negated_confirmation_does_not_confirm() {
        let v = view(vec![]);
        let s = typed("rm -rf /tmp/scratch\n");
        for goal in [
            "delete /tmp/scratch (not confirmed)",
            "delete /tmp/scratch, unconfirmed",
            "I don't confirm the deletion",
            "delete it without confirmation",
        ] {
            assert!(check_step(goal, &s, &v).is_some(), "{goal}");
        }
    }

    #[test]
    fn point_clicks_are_judged_by_normalized_purpose_and_need_one() {
        let v = view(vec![]);
        let click = |purpose: &str| {
            step(
                purpose,
                PlannedAction::Click {
                    target_id: "xy:500,500".into(),
                    expect_after: None,
                },
            )
        };
        for purpose in ["'Delete", "\"Delete\"", "Click D\u{0435}lete", "", "  "] {
            assert!(
                check_step("tidy up", &click(purpose), &v).is_some(),
                "{purpose:?}"
            );
        }
        assert!(check_step("tidy up", &click("Open the File menu"), &v).is_none());
        // An empty step purpose falls back to the batch's purpose.
        let steps = vec![click("")];
        assert!(check_batch_step("tidy up", "open the menu", &steps, 0, &v, &|_| None).is_none());
        assert_eq!(destructive_text("Ｄｅｌｅｔｅ"), Some("delete".to_string()));
    }

    #[test]
    fn gate_judges_the_seen_element_name_not_the_purpose() {
        let v = view(vec![]);
        let press = |target: &str| {
            step(
                "press the third button",
                PlannedAction::Click {
                    target_id: target.into(),
                    expect_after: None,
                },
            )
        };
        let seen = |id: &str| {
            (id == "button_3" || id == "xy:500,40").then(|| ElementFacts {
                id: "button_3".into(),
                role: "button".into(),
                name: "Delete".into(),
            })
        };
        for target in ["button_3", "xy:500,40"] {
            let r = check_step_seen("tidy up", &press(target), &v, &seen);
            assert_eq!(r.map(|r| r.trigger), Some("delete".to_string()), "{target}");
            assert!(check_step_seen(
                "delete it, I confirm the deletion",
                &press(target),
                &v,
                &seen
            )
            .is_none());
        }
        // Without what the screen says, the same steps pass: the purpose is harmless.
        assert!(check_step("tidy up", &press("xy:500,40"), &v).is_none());
        assert!(check_step_seen("tidy up", &press("xy:10,10"), &v, &seen).is_none());
    }

    #[test]
    fn corner_failsafe_is_relative_to_the_monitor_origin() {
        let g = ScreenGeometry::physical(1920, 0, 1280, 800);
        assert!(in_failsafe_corner(InputPoint { x: 1921, y: 1 }, &g));
        assert!(!in_failsafe_corner(InputPoint { x: 1925, y: 1 }, &g));
        assert!(!in_failsafe_corner(InputPoint { x: 1919, y: 0 }, &g));
    }

    #[test]
    fn scripted_prompt_answers_in_order_then_declines() -> Result<()> {
        let mut p = ScriptedPrompt::new([true]);
        assert!(p.confirm("one?")?);
        assert!(!p.confirm("two?")?);
        assert_eq!(p.asked, vec!["one?", "two?"]);
        Ok(())
    }
}
