//! History the model can read (ARCHITECTURE.md, decision 6).
//!
//! Sightline renders every turn fresh, so the model sees no earlier assistant turn: the
//! last [`DETAILED_STEPS`] steps are shown with their action (type, target, clipped text)
//! and outcome; older ones are summarized as counts. A step that did nothing, failed or
//! was refused states the fact first and offers exactly one continuation, and the
//! continuation never names an action type, so it cannot suggest a tool the model is
//! not allowed to call this turn.
//!
//! Cost: one pass over the records (retries collapse, repeats are found by hashing), so a
//! history of any length renders in time and memory linear in it and text bounded by
//! `DETAILED_STEPS` lines of clipped fields.

use std::fmt::Write;

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
        self.line_for(&quote(step), again)
    }

    /// [`line`](Self::line) with the step already labelled (`Step "…" (click "ok")`).
    fn line_for(&self, step: &str, again: bool) -> Option<String> {
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

/// Steps shown in detail (action and outcome); older ones are summarized as counts.
pub const DETAILED_STEPS: usize = 6;

/// Longest text, target or goal quoted inside an action's description, in characters.
const MAX_ACTION_TEXT_CHARS: usize = 40;

/// The history section with the last [`DETAILED_STEPS`] steps in detail.
pub fn render(history: &[AttemptRecord]) -> String {
    render_detailed(history, DETAILED_STEPS)
}

/// The history section of a turn: failed tries of a step followed by another try of it
/// collapse into the last try; the same step landing several times in a row is one line with
/// its count (`×3`), so the model can count presses; the last `detailed` such lines get one
/// line each (action, outcome fact first, and what an `extract` read), older ones a line of
/// counts. A step that ends the same way as an earlier one is rendered in its `again` form.
pub fn render_detailed(history: &[AttemptRecord], detailed: usize) -> String {
    if history.is_empty() {
        return "No steps yet.".to_string();
    }
    let steps = group_steps(history);
    let split = steps.len().saturating_sub(detailed);
    // (step purpose, outcome) of every step that did not land, for the `again` form.
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut counts = [0usize; 5];
    for &(record, times) in &steps[..split] {
        let finding = Finding::of(record);
        counts[finding.class()] += times;
        if let Some(line) = finding.line(&record.step_purpose, false) {
            seen.insert(line);
        }
    }
    let mut out = String::new();
    if split > 0 {
        let names = [
            "landed",
            "did nothing",
            "failed",
            "refused",
            "done claim rejected",
        ];
        let parts: Vec<String> = counts
            .iter()
            .zip(names)
            .filter(|(n, _)| **n > 0)
            .map(|(n, name)| format!("{n} {name}"))
            .collect();
        let _ = write!(
            out,
            "{split} earlier step{}: {}.",
            if split == 1 { "" } else { "s" },
            parts.join(", ")
        );
    }
    if split < steps.len() {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = write!(
            out,
            "Last {} step{}, oldest first:",
            steps.len() - split,
            if steps.len() - split == 1 { "" } else { "s" }
        );
    }
    for &(record, times) in &steps[split..] {
        let finding = Finding::of(record);
        let label = format!(
            "{} ({})",
            quote(&record.step_purpose),
            describe(&record.action)
        );
        let line = match finding.line(&record.step_purpose, false) {
            None => {
                let times = if times > 1 {
                    format!(" ×{times}")
                } else {
                    String::new()
                };
                format!("{label} landed{times}.{}", extracted(record))
            }
            Some(plain) => {
                let again = !seen.insert(plain);
                finding.line_for(&label, again).unwrap_or_default()
            }
        };
        out.push_str("\n- ");
        out.push_str(&line);
    }
    out
}

impl Finding {
    /// Index of the finding's kind in the older steps' counts.
    fn class(&self) -> usize {
        match self {
            Finding::Landed => 0,
            Finding::Null { .. } => 1,
            Finding::EndedOnFailure { .. } => 2,
            Finding::EndedOnRefusal { .. } => 3,
            Finding::DoneRejected { .. } => 4,
        }
    }
}

/// What an action did, in a few words: its type, target and clipped text.
pub fn describe(action: &PlannedAction) -> String {
    let q = |text: &str| {
        let clipped = match text.char_indices().nth(MAX_ACTION_TEXT_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_string(),
        };
        serde_json::Value::String(clipped).to_string()
    };
    match action {
        PlannedAction::Click { target_id, .. } => format!("click {}", q(target_id)),
        PlannedAction::Type { target_id, text } => {
            // Exactly what was typed matters for what comes next: a long text is shown by its
            // length, start and end, so the model knows where it stopped.
            let chars = text.chars().count();
            let shown = if chars > MAX_ACTION_TEXT_CHARS {
                let tail: String = text
                    .chars()
                    .skip(chars - MAX_ACTION_TEXT_CHARS / 2)
                    .collect();
                format!(
                    "{} ({chars} characters, ending {})",
                    q(text),
                    serde_json::Value::String(tail)
                )
            } else {
                q(text)
            };
            match target_id {
                Some(target) => format!("type {shown} into {}", q(target)),
                None => format!("type {shown}"),
            }
        }
        PlannedAction::Key { key } => format!("key {}", q(key)),
        PlannedAction::KeyCombo { keys } => {
            let keys: Vec<&str> = keys.iter().take(4).map(String::as_str).collect();
            format!("key_combo {}", q(&keys.join("+")))
        }
        PlannedAction::SetValue {
            target_id, value, ..
        } => format!("set_value {} on {}", q(value), q(target_id)),
        PlannedAction::Scroll { dx, dy } => format!("scroll dx={dx} dy={dy}"),
        PlannedAction::Drag {
            from_target_id,
            to_target_id,
        } => format!("drag {} to {}", q(from_target_id), q(to_target_id)),
        PlannedAction::Wait { ms } => format!("wait {ms} ms"),
        PlannedAction::Select {
            from_x,
            from_y,
            to_x,
            to_y,
        } => format!("select xy:{from_x},{from_y} to xy:{to_x},{to_y}"),
        PlannedAction::Extract { goal, .. } => format!("extract {}", q(goal)),
        PlannedAction::Navigate { url, .. } => format!("navigate {}", q(url)),
        PlannedAction::CdpEval { expression } => format!("cdp_eval {}", q(expression)),
        PlannedAction::Done { summary, .. } => format!("done {}", q(summary)),
        other => serde_json::to_value(other)
            .ok()
            .and_then(|v| v.get("type").and_then(|t| t.as_str().map(str::to_string)))
            .unwrap_or_else(|| "an action".to_string()),
    }
}

/// The history as steps: failed tries of a step that is tried again collapse into the last
/// try (a retry), and a step that lands several times in a row becomes one entry with its
/// count.
fn group_steps(history: &[AttemptRecord]) -> Vec<(&AttemptRecord, usize)> {
    let mut steps: Vec<(&AttemptRecord, usize)> = Vec::new();
    for record in history {
        match steps.last_mut() {
            // The previous try failed and this is the same step again: a retry.
            Some((last, 1)) if !last.succeeded && same_step(last, record) => *last = record,
            // The same step landed again: a repeat.
            Some((last, times))
                if last.succeeded && record.succeeded && same_step(last, record) =>
            {
                *times += 1
            }
            _ => steps.push((record, 1)),
        }
    }
    steps
}

/// What a landed `extract` read, for its history line; empty for other steps.
fn extracted(record: &AttemptRecord) -> String {
    let PlannedAction::Extract { data, .. } = &record.action else {
        return String::new();
    };
    format!(" It read: {}.", serde_json::Value::String(clip(data)))
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
    fn landed_steps_show_their_action() {
        let h = vec![
            record("open menu", click("xy:1,2"), true, None),
            record("pick item", click("xy:3,4"), true, None),
        ];
        assert_eq!(Finding::of(&h[0]).line("open menu", false), None);
        assert_eq!(
            render(&h),
            "Last 2 steps, oldest first:\n- Step \"open menu\" (click \"xy:1,2\") landed.\n\
             - Step \"pick item\" (click \"xy:3,4\") landed."
        );
        assert_eq!(render(&[]), "No steps yet.");
    }

    #[test]
    fn older_steps_are_counted_and_the_last_ones_detailed() {
        let mut h: Vec<AttemptRecord> = (0..10_000)
            .map(|i| {
                record(
                    &format!("step {i}"),
                    click("xy:1,2"),
                    i % 10 != 0,
                    Some("missed"),
                )
            })
            .collect();
        h.push(record(
            "type name",
            PlannedAction::Type {
                target_id: Some("name-field".into()),
                text: "x".repeat(500),
            },
            false,
            Some("the field is read-only"),
        ));
        let text = render(&h);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 + DETAILED_STEPS, "{text}");
        assert!(
            lines[0].starts_with("9995 earlier steps: 8995 landed, 1000 failed."),
            "{text}"
        );
        let last = lines[lines.len() - 1];
        assert!(
            last.starts_with("- Step \"type name\" (type \"xxxx")
                && last.contains("(500 characters, ending \"xxxxxxxxxxxxxxxxxxxx\") into \"name-field\") failed: the field is read-only."),
            "{last}"
        );
        assert!(text.len() < 2_000, "{} bytes", text.len());
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
        assert_eq!(lines[0], "Last 3 steps, oldest first:");
        assert!(lines[1].contains("failed: timeout"), "{text}");
        assert!(
            lines[3].contains("(click \"xy:6,6\") failed again: timeout"),
            "{text}"
        );
        assert!(lines[3].contains("another way"), "{text}");
        // Also when the first failure is among the summarized steps.
        assert!(render_detailed(&h, 1).contains("failed again: timeout"));
    }

    #[test]
    fn retries_of_one_step_collapse_into_the_last_try() {
        let h = vec![
            record("click Save", click("xy:5,5"), false, Some("timeout")),
            record("click Save", click("xy:5,5"), true, None),
        ];
        assert_eq!(
            render(&h),
            "Last 1 step, oldest first:\n- Step \"click Save\" (click \"xy:5,5\") landed."
        );
    }

    #[test]
    fn the_same_step_landing_three_times_is_counted() {
        let down = || PlannedAction::Key { key: "down".into() };
        let h = vec![
            record("next row", down(), true, None),
            record("next row", down(), true, None),
            record("next row", down(), true, None),
            record("open it", click("xy:5,5"), true, None),
        ];
        assert_eq!(
            render(&h),
            "Last 2 steps, oldest first:\n- Step \"next row\" (key \"down\") landed ×3.\n\
             - Step \"open it\" (click \"xy:5,5\") landed."
        );
        // Counted among the older steps too.
        assert!(render_detailed(&h, 1).starts_with("1 earlier step: 3 landed."));
    }

    #[test]
    fn a_failed_try_then_a_landed_repeat_is_a_retry_not_a_repeat() {
        let down = || PlannedAction::Key { key: "down".into() };
        let h = vec![
            record("next row", down(), false, Some("input busy")),
            record("next row", down(), true, None),
            record("next row", down(), true, None),
        ];
        assert!(render(&h).contains("landed ×2."), "{}", render(&h));
    }

    #[test]
    fn extracted_data_and_long_typed_text_stay_visible() {
        let mut read = record(
            "read price",
            PlannedAction::Extract {
                goal: "price".into(),
                data: "12.50 EUR".into(),
            },
            true,
            None,
        );
        read.data = serde_json::json!({ "price": "12.50 EUR" });
        let typed = record(
            "write essay",
            PlannedAction::Type {
                target_id: None,
                text: format!("{}THE END", "word ".repeat(120)),
            },
            true,
            None,
        );
        let text = render(&[read, typed]);
        assert!(text.contains("landed. It read: \"12.50 EUR\"."), "{text}");
        assert!(
            text.contains("(607 characters, ending \"rd word word THE END\")"),
            "{text}"
        );
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
