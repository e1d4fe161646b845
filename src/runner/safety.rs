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
/// confirmation marker ("I confirm", "confirmed", …) and name the act (the trigger word, or a
/// word of the kind such as "delete" for deletions).
pub fn goal_confirms(goal: &str, kind: DestructiveKind, trigger: &str) -> bool {
    let goal = goal.to_lowercase();
    let marked = CONFIRMATION_MARKERS.iter().any(|m| goal.contains(m));
    let trigger = trigger.to_lowercase();
    // Kind words match whole words: "confirm the" must not count as naming `rm`.
    let words: Vec<&str> = goal
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let named = (!trigger.is_empty() && goal.contains(&trigger))
        || kind_words(kind).iter().any(|w| words.contains(w));
    marked && named
}

/// Checks a step against the gate. Returns the refusal when the step is destructive and the
/// goal does not confirm it; `None` lets it run.
pub fn check_step(goal: &str, step: &Step, view: &PlanningView) -> Option<Refusal> {
    check_step_seen(goal, step, view, &|_| None)
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
    let found = action_trigger(&step.action, &step.purpose, view, seen)?;
    let (kind, trigger) = found;
    if goal_confirms(goal, kind, &trigger) {
        return None;
    }
    let what = match kind {
        DestructiveKind::Deletes => format!("`{trigger}` deletes data"),
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

fn action_trigger(
    action: &PlannedAction,
    purpose: &str,
    view: &PlanningView,
    seen: &dyn Fn(&str) -> Option<ElementFacts>,
) -> Option<(DestructiveKind, String)> {
    match action {
        PlannedAction::Type { target_id, text } => delete_command_in(text)
            .map(|t| (DestructiveKind::Deletes, t))
            .or_else(|| {
                target_id
                    .as_deref()
                    .and_then(|id| click_trigger(id, purpose, view, seen))
            }),
        PlannedAction::Key { key } => parse_key_chord(key)
            .ok()
            .and_then(|k| chord_trigger(&k, key)),
        PlannedAction::KeyCombo { keys } => parse_key_combo(keys)
            .ok()
            .and_then(|k| chord_trigger(&k, &keys.join("+"))),
        PlannedAction::Click { target_id, .. } => click_trigger(target_id, purpose, view, seen),
        PlannedAction::Batch { actions } => actions
            .iter()
            .find_map(|a| action_trigger(a, purpose, view, seen)),
        _ => None,
    }
}

/// For a click: the element's real accessible name (`seen`), its label and value from the
/// view; for an `xy:` point, the name of the element under it and the step's purpose (the
/// planner's own description of what it clicks).
fn click_trigger(
    target_id: &str,
    purpose: &str,
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
        texts.push(purpose);
    }
    texts
        .into_iter()
        .find_map(commit_word_in)
        .map(|w| (DestructiveKind::Commits, w))
}

/// The commit word or phrase in a label, matched on whole words, case-insensitively.
fn commit_word_in(label: &str) -> Option<String> {
    let lower = label.to_lowercase().replace('’', "'");
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
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
/// permanently (Shift+Delete).
fn chord_trigger(keys: &[Key], spelled: &str) -> Option<(DestructiveKind, String)> {
    let has = |k: Key| keys.contains(&k);
    let last = *keys.last()?;
    let ctrl_or_super = has(Key::Control) || has(Key::Meta);
    let closes = (has(Key::Alt) && last == Key::F4)
        || (ctrl_or_super
            && matches!(
                last,
                Key::Unicode('w') | Key::Unicode('q') | Key::Unicode('W') | Key::Unicode('Q')
            ));
    if closes {
        return Some((DestructiveKind::ClosesWithoutSaving, spelled.to_string()));
    }
    if has(Key::Shift) && last == Key::Delete {
        return Some((DestructiveKind::Deletes, spelled.to_string()));
    }
    None
}

/// Finds a deleting shell command in typed text: the command word of any segment (split at
/// `;`, `&`, `|`, newlines, parentheses and backquotes, after `sudo`/`env`/`xargs`-style
/// prefixes), plus `find … -delete`, `git clean`/`git rm` and `dd of=`. Returns the segment as
/// typed, which names the command in the refusal.
pub fn delete_command_in(text: &str) -> Option<String> {
    const PREFIXES: &[&str] = &[
        "sudo", "doas", "env", "xargs", "nohup", "time", "command", "exec", "busybox", "nice",
    ];
    for segment in text.split(['\n', ';', '&', '|', '(', ')', '`', '{', '}']) {
        let tokens: Vec<&str> = segment.split_whitespace().collect();
        let mut i = 0;
        // Skip wrappers, their flags (`sudo -u x`, `xargs -0`) and environment assignments.
        while i < tokens.len() {
            let t = tokens[i];
            let base = command_base(t);
            if PREFIXES.contains(&base.as_str()) || t.starts_with('-') || t.contains('=') {
                i += 1;
            } else {
                break;
            }
        }
        let Some(cmd) = tokens.get(i) else { continue };
        let base = command_base(cmd);
        let rest = &tokens[i + 1..];
        let path_like = |t: &&str| t.contains(['/', '\\', '.', '*', ':']);
        let deletes = DELETE_COMMANDS.contains(&base.as_str())
            || (CMD_DELETE_COMMANDS.contains(&base.as_str()) && rest.iter().any(path_like))
            || base.starts_with("mkfs.")
            || (base == "find" && rest.contains(&"-delete"))
            || (base == "git" && matches!(rest.first(), Some(&"clean") | Some(&"rm")))
            || (base == "dd" && rest.iter().any(|t| t.starts_with("of=")));
        if deletes {
            return Some(segment.trim().to_string());
        }
    }
    None
}

/// A command word without its directory and in lower case (`/bin/rm` → `rm`, `Remove-Item`
/// → `remove-item`).
fn command_base(token: &str) -> String {
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
            "echo ok > out.txt",
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
