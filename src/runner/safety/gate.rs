//! The destructive-step gate: a step (with the command line its batch has typed so far) is
//! refused when it deletes, closes without saving or commits, unless the goal confirms that
//! act.

use cel_contracts::{PlannedAction, PlanningView, Step};

use super::presses::{chord_trigger, click_trigger};
use super::shell::delete_command_in;
use super::DestructiveKind;
use crate::runner::elements::ElementFacts;
use crate::text_norm::{affirms, normalize, words};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::safety::destructive_text;
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
}
