//! The tools' results: a line or two a person (or a host's model) reads first, then the same
//! as JSON, also given as the result's structured content.

use base64::Engine;
use cel_contracts::{GoalOutcome, StepResult};
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::{json, Value};

use crate::runner::{describe_action, ActReport, RunReport};
use crate::serve::brain::Planned;
use crate::serve::desktop::Screen;

/// A result of `lines` and the JSON `doc`; `is_error` when the call did not do what was asked.
fn result(lines: String, doc: Value, is_error: bool) -> CallToolResult {
    let mut result = if is_error {
        CallToolResult::error(vec![
            ContentBlock::text(lines),
            ContentBlock::text(doc.to_string()),
        ])
    } else {
        CallToolResult::success(vec![
            ContentBlock::text(lines),
            ContentBlock::text(doc.to_string()),
        ])
    };
    result.structured_content = Some(doc);
    result
}

/// `view`: the screenshot as an image, then the view and element table.
pub fn view(screen: &Screen) -> CallToolResult {
    let doc = json!({
        "view": screen.view,
        "elements": screen.elements,
        "screenshot_size": [screen.size.0, screen.size.1],
    });
    let png = base64::engine::general_purpose::STANDARD.encode(&screen.png);
    let mut result = CallToolResult::success(vec![
        ContentBlock::image(png, "image/png"),
        ContentBlock::text(doc.to_string()),
    ]);
    result.structured_content = Some(doc);
    result
}

/// `plan` and `verify`: the answer under `key`, and the turn's stats from a model.
pub fn planned<T: Serialize>(planned: &Planned<T>, key: &str) -> CallToolResult {
    let answer = serde_json::to_value(&planned.answer).unwrap_or(Value::Null);
    let mut doc = json!({ key: answer });
    if let Some(stats) = &planned.stats {
        doc["stats"] = serde_json::to_value(stats.stage_times()).unwrap_or(Value::Null);
        if !stats.truncation.is_empty() {
            doc["truncation"] = json!(stats.truncation);
        }
        if let Some(thought) = &stats.thought {
            doc["thought"] = json!(thought);
        }
    }
    result(answer.to_string(), doc, false)
}

/// `act`: each step, the refusals with what would allow them, and how it ended.
pub fn acted(report: &ActReport) -> CallToolResult {
    let mut lines = Vec::new();
    let mut refusals = Vec::new();
    let mut failed = false;
    for step in &report.steps {
        let what = describe_action(&step.action);
        if let Some(message) = &step.refused {
            // The history's record of this refusal names the grants that would allow it.
            let allow = report
                .attempts
                .iter()
                .find(|a| a.error.as_deref() == Some(message.as_str()))
                .and_then(|a| a.data.get("allow").cloned())
                .unwrap_or(Value::Null);
            lines.push(format!("refused: {what} -- {message}"));
            refusals.push(json!({
                "step": step.index,
                "purpose": step.purpose,
                "action": what,
                "message": message,
                "allow": allow,
                "how": "grants are given when the server starts (sightline serve --allow ...), \
                        never by a tool call",
            }));
            continue;
        }
        match &step.result {
            StepResult::Ok { .. } => lines.push(format!("ok: {what} -- {}", step.purpose)),
            StepResult::Err { message, .. } => {
                failed = true;
                lines.push(format!("error: {what} -- {}: {message}", step.purpose));
            }
        }
    }
    let outcome = match (&report.ended, refusals.is_empty(), failed) {
        (Some(_), _, _) => "stopped",
        (None, false, _) => "refused",
        (None, true, true) => "failed",
        (None, true, false) => "done",
    };
    if let Some((ended, reason)) = &report.ended {
        lines.push(format!("stopped ({reason:?}): {}", outcome_line(ended)));
    }
    let doc = json!({
        "outcome": outcome,
        "steps": report.steps,
        "refusals": refusals,
        "ended": report.ended.as_ref().map(|(o, r)| json!({ "outcome": o, "end": r })),
        "attempts": report.attempts,
        "settle_ms": report.settle_ms,
        "elapsed_ms": report.elapsed_ms,
    });
    lines.insert(0, format!("act: {outcome}"));
    result(lines.join("\n"), doc, outcome != "done")
}

/// `run`: the outcome, why it ended, and the whole history.
pub fn ran(report: &RunReport) -> CallToolResult {
    let doc = json!({
        "outcome": report.outcome,
        "end": report.end,
        "turns": report.turns,
        "steps_used": report.steps_used,
        "elapsed_ms": report.elapsed_ms,
        "shared_memory": report.shared_memory,
        "history": report.history,
    });
    let line = format!(
        "{} ({} turn(s), {} step(s), {:.1} s)",
        outcome_line(&report.outcome),
        report.turns,
        report.steps_used,
        report.elapsed_ms as f64 / 1000.0
    );
    let succeeded = matches!(report.outcome, GoalOutcome::Succeeded { .. });
    result(line, doc, !succeeded)
}

fn outcome_line(outcome: &GoalOutcome) -> String {
    match outcome {
        GoalOutcome::Succeeded { summary, .. } => format!("succeeded: {summary}"),
        GoalOutcome::Refused { summary } => format!("refused: {summary}"),
        GoalOutcome::Failed(r) => format!(
            "failed: {} / {}: {}",
            r.failing_sub_goal,
            r.failing_step,
            r.attempts.last().map(String::as_str).unwrap_or("")
        ),
    }
}
