//! Compact history: what the model is told about earlier steps (ARCHITECTURE.md, decision 6).
//!
//! Context is the scarcest resource of a small local model and prefill is the latency, so a
//! step that landed says nothing (it only adds to a count), and a step that did not land gets
//! one line: the fact first, then exactly one continuation. Lines never name an action type,
//! so they cannot suggest a tool the model is not allowed to call this turn.

use cel_contracts::{AttemptRecord, NextActionHint, PlannedAction};

/// Prefixes of an [`AttemptRecord::error`] that mean the runtime refused or blocked the step
/// rather than trying it. Sightline's runner writes `refused: …`; other runtimes say
/// `blocked: …`.
const REFUSAL_PREFIXES: [&str; 2] = ["refused", "blocked"];

/// Longest error or reason quoted in a history line, in characters.
const MAX_QUOTED_CHARS: usize = 160;

/// What an earlier step amounted to, as the model needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// It succeeded. Renders nothing.
    Landed,
    /// Nothing was attempted: empty text, a zero scroll, an extract that found nothing.
    Null {
        /// What was empty, in a few words.
        what: &'static str,
    },
    /// The last try failed and nothing after it succeeded.
    EndedOnFailure {
        /// The runtime's error message.
        error: String,
    },
    /// The runtime refused or blocked the step.
    EndedOnRefusal {
        /// The runtime's reason.
        reason: String,
    },
    /// A `done` claim that `verify_done` rejected.
    DoneRejected {
        /// The grader's reason.
        reason: String,
        /// The grader's suggestion, if any.
        hint: Option<NextActionHint>,
    },
}

impl Finding {
    /// Classify one attempt.
    pub fn of(record: &AttemptRecord) -> Finding {
        if let PlannedAction::Done { .. } = record.action {
            if !record.succeeded {
                return Finding::DoneRejected {
                    reason: record.error.clone().unwrap_or_default(),
                    hint: record.next_action_hint,
                };
            }
        }
        if !record.succeeded {
            let error = record.error.clone().unwrap_or_default();
            let lower = error.trim_start().to_ascii_lowercase();
            if REFUSAL_PREFIXES.iter().any(|p| lower.starts_with(p)) {
                return Finding::EndedOnRefusal { reason: error };
            }
            return Finding::EndedOnFailure { error };
        }
        match null_action(&record.action, &record.data) {
            Some(what) => Finding::Null { what },
            None => Finding::Landed,
        }
    }

    /// The one line the model sees for this finding of `step` (its purpose), or `None` for a
    /// step that landed. `again` means the same step already ended the same way earlier.
    pub fn line(&self, step: &str, again: bool) -> Option<String> {
        let step = quote(step);
        let again_word = if again { " again" } else { "" };
        Some(match self {
            Finding::Landed => return None,
            Finding::Null { what } => format!(
                "{step} did nothing{again_word}: {what}. Next: {}",
                if again {
                    "stop repeating it and change what the step does."
                } else {
                    "give the step real content or drop it."
                }
            ),
            Finding::EndedOnFailure { error } => format!(
                "{step} failed{again_word}: {}. Next: {}",
                clip(error),
                if again {
                    "do not retry it as is; reach the same goal another way."
                } else {
                    "look at the screen and retry it once, adjusted."
                }
            ),
            Finding::EndedOnRefusal { reason } => format!(
                "{step} was refused by the runtime{again_word}: {}. Next: {}",
                clip(reason),
                "choose a step that does not need this, or ask the user with clarify."
            ),
            Finding::DoneRejected { reason, hint } => format!(
                "Your done claim was rejected{again_word}: {}. Next: {}",
                clip(reason),
                match hint {
                    Some(NextActionHint::RetryLastAction) =>
                        "repeat the last step exactly; it did not take effect.",
                    Some(NextActionHint::DifferentAction) =>
                        "same intent, but a different kind of step.",
                    Some(NextActionHint::DifferentTarget) =>
                        "same kind of step on a different target.",
                    Some(NextActionHint::GiveUp) => "if nothing else is left to try, answer fail.",
                    None => "finish what is still missing on screen before claiming done.",
                }
            ),
        })
    }
}

/// Why an action that "succeeded" did nothing, if it did nothing.
fn null_action(action: &PlannedAction, data: &serde_json::Value) -> Option<&'static str> {
    match action {
        PlannedAction::Type { text, .. } if text.is_empty() => Some("the text was empty"),
        PlannedAction::Scroll { dx: 0, dy: 0 } => Some("the scroll amount was zero"),
        PlannedAction::Wait { ms: 0 } => Some("the wait was zero milliseconds"),
        PlannedAction::KeyCombo { keys } if keys.is_empty() => Some("no keys were given"),
        PlannedAction::Extract { .. } if is_empty_value(data) => Some("nothing was extracted"),
        _ => None,
    }
}

fn is_empty_value(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null => true,
        serde_json::Value::String(s) => s.trim().is_empty(),
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn quote(step: &str) -> String {
    let step = step.trim();
    if step.is_empty() {
        "A step".to_string()
    } else {
        format!("Step \"{}\"", clip(step))
    }
}

fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The history section of a turn: a count of landed steps, then one line per step that did
/// not land, oldest first. Consecutive tries of the same step collapse into their last one;
/// a step that ends the same way as an earlier one is rendered in its `again` form.
pub fn render(history: &[AttemptRecord]) -> String {
    let mut landed = 0usize;
    let mut lines: Vec<String> = Vec::new();
    // (step, finding) of every non-landed outcome so far, for the `again` form.
    let mut seen: Vec<(String, Finding)> = Vec::new();
    let mut i = 0;
    while i < history.len() {
        // Retries of one step (same purpose, same action) collapse into the last try.
        let mut last = i;
        while last + 1 < history.len() && same_step(&history[last + 1], &history[i]) {
            last += 1;
        }
        let record = &history[last];
        let finding = Finding::of(record);
        match finding.line(&record.step_purpose, false) {
            None => landed += 1,
            Some(_) => {
                let key = (record.step_purpose.clone(), finding.clone());
                let again = seen.contains(&key);
                lines.extend(finding.line(&record.step_purpose, again));
                seen.push(key);
            }
        }
        i = last + 1;
    }
    let mut out = match landed {
        0 if lines.is_empty() => return "No steps yet.".to_string(),
        0 => String::new(),
        1 => "1 step landed.".to_string(),
        n => format!("{n} steps landed."),
    };
    for line in lines {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("- ");
        out.push_str(&line);
    }
    out
}

fn same_step(a: &AttemptRecord, b: &AttemptRecord) -> bool {
    a.step_purpose == b.step_purpose
        && serde_json::to_value(&a.action).ok() == serde_json::to_value(&b.action).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(
        purpose: &str,
        action: PlannedAction,
        ok: bool,
        error: Option<&str>,
    ) -> AttemptRecord {
        AttemptRecord {
            step_purpose: purpose.into(),
            action,
            succeeded: ok,
            error: error.map(String::from),
            data: serde_json::Value::Null,
            next_action_hint: None,
        }
    }

    fn click(target: &str) -> PlannedAction {
        PlannedAction::Click {
            target_id: target.into(),
            expect_after: None,
        }
    }

    #[test]
    fn landed_steps_render_nothing_but_a_count() {
        let h = vec![
            record("open menu", click("xy:1,2"), true, None),
            record("pick item", click("xy:3,4"), true, None),
        ];
        assert_eq!(Finding::of(&h[0]).line("open menu", false), None);
        assert_eq!(render(&h), "2 steps landed.");
        assert_eq!(render(&[]), "No steps yet.");
    }

    #[test]
    fn null_step_states_what_was_empty_first() {
        let r = record(
            "type name",
            PlannedAction::Type {
                target_id: None,
                text: String::new(),
            },
            true,
            None,
        );
        let f = Finding::of(&r);
        assert_eq!(
            f,
            Finding::Null {
                what: "the text was empty"
            }
        );
        let line = f.line("type name", false).unwrap_or_default();
        assert!(
            line.starts_with("Step \"type name\" did nothing: the text was empty."),
            "{line}"
        );
        assert_eq!(line.matches("Next:").count(), 1);
    }

    #[test]
    fn zero_scroll_and_empty_extract_are_null() {
        let scroll = record("scroll", PlannedAction::Scroll { dx: 0, dy: 0 }, true, None);
        assert!(matches!(Finding::of(&scroll), Finding::Null { .. }));
        let extract = record(
            "read price",
            PlannedAction::Extract {
                goal: "price".into(),
                data: String::new(),
            },
            true,
            None,
        );
        assert!(matches!(Finding::of(&extract), Finding::Null { .. }));
    }

    #[test]
    fn failure_line_quotes_the_error_and_offers_one_continuation() {
        let r = record(
            "click Save",
            click("xy:5,5"),
            false,
            Some("no window at point"),
        );
        let line = Finding::of(&r)
            .line("click Save", false)
            .unwrap_or_default();
        assert!(
            line.starts_with("Step \"click Save\" failed: no window at point."),
            "{line}"
        );
        assert_eq!(line.matches("Next:").count(), 1);
    }

    #[test]
    fn refusal_is_recognised_from_the_runtime_prefix() {
        let r = record(
            "wipe disk",
            click("xy:5,5"),
            false,
            Some("refused: destructive step"),
        );
        assert!(matches!(Finding::of(&r), Finding::EndedOnRefusal { .. }));
        let line = Finding::of(&r).line("wipe disk", false).unwrap_or_default();
        assert!(line.contains("was refused by the runtime"), "{line}");
    }

    #[test]
    fn the_same_failure_twice_uses_the_again_form() {
        let h = vec![
            record("click Save", click("xy:5,5"), false, Some("timeout")),
            record("look", click("xy:9,9"), true, None),
            record("click Save", click("xy:6,6"), false, Some("timeout")),
        ];
        let text = render(&h);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "1 step landed.");
        assert!(lines[1].contains("failed: timeout"), "{text}");
        assert!(lines[2].contains("failed again: timeout"), "{text}");
        assert!(lines[2].contains("another way"), "{text}");
    }

    #[test]
    fn retries_of_one_step_collapse_into_the_last_try() {
        let h = vec![
            record("click Save", click("xy:5,5"), false, Some("timeout")),
            record("click Save", click("xy:5,5"), true, None),
        ];
        assert_eq!(render(&h), "1 step landed.");
    }

    #[test]
    fn a_rejected_done_shows_the_grader_hint() {
        let mut r = record(
            "finish",
            PlannedAction::Done {
                summary: "saved".into(),
                evidence_ids: vec![],
            },
            false,
            Some("the dialog is still open"),
        );
        r.next_action_hint = Some(NextActionHint::RetryLastAction);
        let line = Finding::of(&r).line("finish", false).unwrap_or_default();
        assert!(
            line.starts_with("Your done claim was rejected: the dialog is still open."),
            "{line}"
        );
        assert!(line.contains("repeat the last step exactly"), "{line}");
    }

    #[test]
    fn no_line_names_an_action_type() {
        let findings = [
            Finding::Null {
                what: "the text was empty",
            },
            Finding::EndedOnFailure { error: "x".into() },
            Finding::EndedOnRefusal { reason: "x".into() },
            Finding::DoneRejected {
                reason: "x".into(),
                hint: None,
            },
        ];
        for f in findings {
            for again in [false, true] {
                let line = f.line("s", again).unwrap_or_default();
                let next = line.split("Next:").nth(1).unwrap_or_default();
                for tool in [
                    "click",
                    "type",
                    "scroll",
                    "cdp_eval",
                    "navigate",
                    "key_combo",
                    "wait(",
                ] {
                    assert!(!next.contains(tool), "{line}");
                }
            }
        }
    }
}
