//! One-line descriptions of planned actions, for the trace, the terminal and the gate's
//! refusals (a file of its own so the gate, which the batch loop calls, does not depend on
//! the loop).

use cel_contracts::PlannedAction;
use serde_json::Value;

/// The wire name of an action (`click`, `cdp_eval`, …).
pub fn action_type(action: &PlannedAction) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
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
