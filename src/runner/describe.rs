//! One-line descriptions of planned actions, for the trace, the terminal and the gate's
//! refusals (a file of its own so the gate, which the batch loop calls, does not depend on
//! the loop).

use cel_contracts::{PlannedAction, Step, StepResult};
use serde_json::Value;

/// The wire name of an action (`click`, `cdp_eval`, …).
pub fn action_type(action: &PlannedAction) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// A step's line in a run's progress output (the terminal's, the MCP tools' notifications):
/// `labels` open the line of a dry run, of a step done and of a step failed; a retried
/// step's line (dry runs aside) ends with its attempt.
pub fn step_line(
    step: &Step,
    attempt: u32,
    result: &StepResult,
    [dry_run, ok, error]: [&str; 3],
) -> String {
    let retry = if attempt > 1 {
        format!(" (attempt {attempt})")
    } else {
        String::new()
    };
    let what = describe_action(&step.action);
    match result {
        StepResult::Ok { data, .. } if data.get("dry_run").is_some() => {
            format!("{dry_run}{what} -- {}", step.purpose)
        }
        StepResult::Ok { .. } => format!("{ok}{what} -- {}{retry}", step.purpose),
        StepResult::Err { message, .. } => {
            format!("{error}{what} -- {}{retry}: {message}", step.purpose)
        }
    }
}

/// A one-line description of an action for prompts and logs.
pub fn describe_action(action: &PlannedAction) -> String {
    match action {
        PlannedAction::Click { target_id, .. } => format!("click {target_id}"),
        PlannedAction::Type {
            target_id: Some(t),
            text,
        } => format!("type {text:?} into {t}"),
        PlannedAction::Type { text, .. } => format!("type {text:?}"),
        PlannedAction::Key { key } => format!("key {key}"),
        PlannedAction::KeyCombo { keys } => format!("key_combo {}", keys.join("+")),
        PlannedAction::Scroll { dx, dy } => format!("scroll dx={dx} dy={dy}"),
        PlannedAction::Drag {
            from_target_id,
            to_target_id,
        } => format!("drag {from_target_id} -> {to_target_id}"),
        PlannedAction::Select {
            from_x,
            from_y,
            to_x,
            to_y,
        } => format!("select ({from_x},{from_y}) -> ({to_x},{to_y})"),
        PlannedAction::Wait { ms } => format!("wait {ms} ms"),
        PlannedAction::SetValue {
            target_id, value, ..
        } => format!("set_value {value:?} on {target_id}"),
        PlannedAction::Extract { goal, .. } => format!("extract {goal:?}"),
        PlannedAction::Batch { actions } => format!("batch of {}", actions.len()),
        other => action_type(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_lines_open_with_their_label_and_name_a_retry() -> anyhow::Result<()> {
        let step: Step = serde_json::from_str(
            r#"{"purpose":"Save","kind":"deterministic","action":{"type":"click","target_id":"el-1"}}"#,
        )?;
        let labels = ["D ", "O ", "E "];
        let ok = |data| StepResult::Ok {
            data,
            discovered_sub_goal: None,
        };
        let failed = StepResult::Err {
            message: "gone".into(),
            recoverable: true,
        };
        let dry = ok(serde_json::json!({ "dry_run": true }));
        assert_eq!(step_line(&step, 2, &dry, labels), "D click el-1 -- Save");
        assert_eq!(
            step_line(&step, 1, &ok(Value::Null), labels),
            "O click el-1 -- Save"
        );
        assert_eq!(
            step_line(&step, 2, &ok(Value::Null), labels),
            "O click el-1 -- Save (attempt 2)"
        );
        assert_eq!(
            step_line(&step, 3, &failed, labels),
            "E click el-1 -- Save (attempt 3): gone"
        );
        Ok(())
    }
}
