//! The tools' arguments, as the MCP host sends them, and their checks.
//!
//! The contract's types (`PlanningView`, `AttemptRecord`, `NextMove`) arrive as JSON and are
//! read here with serde, so a malformed one is the caller's error naming the argument.
//! Nothing here can widen what the server allows: grants are not an argument, and budgets
//! and `dry_run` can only be made stricter.

use cel_contracts::{AttemptRecord, NextMove, PlanningView};
use rmcp::schemars;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::serve::images::{image_from_base64, image_from_path};

/// `view`: the current screen.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ViewParams {
    /// Monitor index to capture (default: the server's monitor, else the primary one).
    pub monitor: Option<usize>,
    /// A goal to put in the view, as a planner would see it (default: none).
    #[serde(default)]
    pub goal: String,
}

/// A screenshot and a view to plan or judge on; without either, the current screen. The
/// screen arguments of `plan` and `verify`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct ScreenArgs {
    /// A screenshot, PNG or JPEG, as base64 or a data: URL.
    pub screenshot_base64: Option<String>,
    /// A screenshot file on the server's machine (absolute path).
    pub screenshot_path: Option<String>,
    /// A cel-contracts PlanningView (JSON object). Default: the current screen's view when
    /// no screenshot is given either (the screen is then captured), else an empty view.
    pub view: Option<Value>,
    /// Monitor index, when the current screen is captured.
    pub monitor: Option<usize>,
}

/// `plan`: one move.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanParams {
    /// The goal, in plain words.
    pub goal: String,
    /// Earlier attempts: a JSON array of cel-contracts AttemptRecords, oldest first.
    pub history: Option<Value>,
    /// Shared memory: any JSON value.
    pub memory: Option<Value>,
    /// The screen to plan on.
    #[serde(flatten)]
    pub screen: ScreenArgs,
}

/// `verify`: judge a done claim.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyParams {
    /// The goal.
    pub goal: String,
    /// What the agent claims it achieved.
    pub summary: String,
    /// Shared memory: any JSON value.
    pub memory: Option<Value>,
    /// The screen to judge on.
    #[serde(flatten)]
    pub screen: ScreenArgs,
}

/// `act`: execute one move.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActParams {
    /// The move: a cel-contracts NextMove of kind batch, e.g. {"kind":"batch","purpose":
    /// "open the file menu","steps":[{"purpose":"click File","action":{"type":"click",
    /// "target_id":"menu_item_file"}}]}. Targets are element ids from `view` or xy:X,Y
    /// points (0-1000 over the screenshot).
    #[serde(rename = "move")]
    pub next_move: Value,
    /// The goal the move serves (default: the batch's purpose).
    pub goal: Option<String>,
    /// Monitor index to act on.
    pub monitor: Option<usize>,
    /// Report what each step would do, sending no input.
    #[serde(default)]
    pub dry_run: bool,
}

/// `run`: a whole goal.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    /// The goal, in plain words.
    pub goal: String,
    /// Step budget (at most the server's).
    pub max_steps: Option<u32>,
    /// Wall-clock budget in seconds (at most the server's).
    pub timeout_s: Option<u64>,
    /// Batches in a row that may fail before the run ends (at most the server's).
    pub max_failures: Option<u32>,
    /// Monitor index to drive.
    pub monitor: Option<usize>,
    /// Plan and report, sending no input.
    #[serde(default)]
    pub dry_run: bool,
}

/// `value` read as `T`, or the caller's error naming `what`.
pub fn parse<T: DeserializeOwned>(what: &str, value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| {
        Error::invalid_input_caused(format!("{what} is not a valid {}", short_type::<T>()), e)
    })
}

fn short_type<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    name.rsplit("::").next().unwrap_or(name)
}

/// The history argument.
pub fn history(value: Option<Value>) -> Result<Vec<AttemptRecord>> {
    value.map_or(Ok(Vec::new()), |v| parse("history", v))
}

/// The move argument of `act`: a batch with at least one step.
pub fn batch(value: Value) -> Result<NextMove> {
    let next_move: NextMove = parse("move", value)?;
    match &next_move {
        NextMove::Batch { steps, .. } if !steps.is_empty() => Ok(next_move),
        NextMove::Batch { .. } => Err(Error::invalid_input("move: the batch has no steps")),
        _ => Err(Error::invalid_input(
            "move: act executes a batch; judge a done claim with verify",
        )),
    }
}

impl ScreenArgs {
    /// The screenshot given, if any (both forms at once is an error).
    pub fn screenshot(&self) -> Result<Option<Vec<u8>>> {
        match (&self.screenshot_base64, &self.screenshot_path) {
            (Some(_), Some(_)) => Err(Error::invalid_input(
                "give screenshot_base64 or screenshot_path, not both",
            )),
            (Some(text), None) => image_from_base64(text).map(Some),
            (None, Some(path)) => image_from_path(path.as_ref()).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// The view given, if any.
    pub fn view(&self) -> Result<Option<PlanningView>> {
        self.view.clone().map(|v| parse("view", v)).transpose()
    }

    /// Whether the current screen is to be captured: neither a screenshot nor a view given.
    pub fn wants_current_screen(&self) -> bool {
        self.screenshot_base64.is_none() && self.screenshot_path.is_none() && self.view.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The screen arguments are read into [`ScreenArgs`], and an argument neither the call
    /// nor the screen knows is still refused.
    #[test]
    fn screen_arguments_are_flattened_and_unknown_ones_refused() -> Result<()> {
        let p: PlanParams = parse(
            "plan",
            serde_json::json!({"goal": "g", "screenshot_path": "/tmp/s.png", "monitor": 1}),
        )?;
        assert_eq!(p.screen.screenshot_path.as_deref(), Some("/tmp/s.png"));
        assert_eq!(p.screen.monitor, Some(1));
        assert!(!p.screen.wants_current_screen());
        let v: VerifyParams = parse("verify", serde_json::json!({"goal": "g", "summary": "s"}))?;
        assert!(v.screen.wants_current_screen());
        for (what, args) in [
            (
                "plan",
                serde_json::json!({"goal": "g", "grants": ["delete"]}),
            ),
            (
                "verify",
                serde_json::json!({"goal": "g", "summary": "s", "dry": 1}),
            ),
        ] {
            let refused = if what == "plan" {
                parse::<PlanParams>(what, args).is_err()
            } else {
                parse::<VerifyParams>(what, args).is_err()
            };
            assert!(refused, "{what}");
        }
        let schema = serde_json::to_value(schemars::schema_for!(PlanParams))
            .map_err(|e| Error::internal(e.to_string()))?;
        assert!(
            schema["properties"]["screenshot_base64"].is_object(),
            "{schema}"
        );
        assert_eq!(schema["additionalProperties"], serde_json::json!(false));
        Ok(())
    }
}
