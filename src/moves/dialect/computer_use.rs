//! Qwen's `computer_use` tool-call dialect: Qwen3-VL's own computer-use format, which
//! GUI-Owl-1.5 and UI-MOPD were trained on too (the latter two with an `Action:` sentence
//! first).
//!
//! An answer is one call of the `computer_use` function in Qwen's function-calling format,
//! its JSON written as Python's `json.dumps` writes it:
//!
//! ```text
//! Action: Click the Files application icon on the left dock.
//! <tool_call>
//! {"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [18, 559]}}
//! </tool_call>
//! ```
//!
//! [`CuAction`] is the one description of the tool: each action's name, the sentence the
//! tool schema gives it, its parameters in order, and the Sightline action it becomes. The
//! system prompt's tool schema ([`ToolLanguage::system_prompt`]), the grammar
//! (`crate::decode`, from [`CuAction::params`] and [`Param`]) and the translation
//! ([`translate`]) are written from it.
//!
//! Actions of the tool that Sightline cannot execute as the model means them are left out of
//! the schema and the grammar: `mouse_move` (no hover in a `NextMove`), `left_click_drag`
//! (drags from wherever a previous `mouse_move` left the pointer; a turn here is one call),
//! `right_click` and `middle_click` (a `NextMove` click is a left click), `interact`
//! (GUI-Owl's "ask the user"). A `double_click` becomes two clicks at the point in one batch
//! and a `triple_click` three: a batch's steps run back to back, so the desktop sees a double
//! or triple click when its input arrives within the system's double-click interval.

use cel_contracts::{NextMove, PlannedAction, Step, StepKind};
use serde_json::{json, Map, Value};

use super::{not_a_move, point_target, python_json};
use crate::error::Result;
use crate::moves::{ActionKind, MoveLimits, COORDINATE_MAX, KEY_NAMES};

/// The function's name in every call.
pub const FUNCTION_NAME: &str = "computer_use";

/// The token that opens the call (an added token of Qwen3's vocabulary).
pub const TOOL_CALL_OPEN: &str = "<tool_call>";

/// The token that closes it.
pub const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// What opens the `Action:` line.
pub const ACTION_LINE_PREFIX: &str = "Action: ";

/// The most keys one `key` call presses (a `NextMove` key combination's limit).
pub const MAX_KEYS: usize = 4;

/// An action of the `computer_use` tool that Sightline executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CuAction {
    /// `key`: press the keys in order, release them in reverse.
    Key,
    /// `type`: type a text.
    Type,
    /// `left_click` at a point.
    LeftClick,
    /// `double_click` at a point.
    DoubleClick,
    /// `triple_click` at a point.
    TripleClick,
    /// `scroll` the wheel; positive scrolls up.
    Scroll,
    /// `hscroll`: scroll horizontally.
    HScroll,
    /// `wait` some seconds.
    Wait,
    /// `terminate` the task as a success or a failure.
    Terminate,
    /// `answer` a question.
    Answer,
}

/// A parameter of the tool's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Param {
    /// `keys`: key names (pyautogui's).
    Keys,
    /// `text`: a string.
    Text,
    /// `coordinate`: `[x, y]` on the 0–1000 grid.
    Coordinate,
    /// `pixels`: a signed scroll amount.
    Pixels,
    /// `time`: seconds.
    Time,
    /// `status`: `"success"` or `"failure"`.
    Status,
}

impl CuAction {
    /// Every action, in the order the tool schema lists them (Qwen's order).
    pub const ALL: &'static [CuAction] = &[
        CuAction::Key,
        CuAction::Type,
        CuAction::LeftClick,
        CuAction::DoubleClick,
        CuAction::TripleClick,
        CuAction::Scroll,
        CuAction::HScroll,
        CuAction::Wait,
        CuAction::Terminate,
        CuAction::Answer,
    ];

    /// The action's name in a call.
    pub fn name(self) -> &'static str {
        match self {
            CuAction::Key => "key",
            CuAction::Type => "type",
            CuAction::LeftClick => "left_click",
            CuAction::DoubleClick => "double_click",
            CuAction::TripleClick => "triple_click",
            CuAction::Scroll => "scroll",
            CuAction::HScroll => "hscroll",
            CuAction::Wait => "wait",
            CuAction::Terminate => "terminate",
            CuAction::Answer => "answer",
        }
    }

    /// The action by its name; `None` for the tool's actions Sightline leaves out.
    pub fn from_name(name: &str) -> Option<CuAction> {
        CuAction::ALL.iter().copied().find(|a| a.name() == name)
    }

    /// Its sentence in the tool schema (the GUI-Owl-1.5 desktop runner's wording, which
    /// Qwen's cookbook and UI-MOPD share up to small edits).
    pub fn description(self) -> &'static str {
        match self {
            CuAction::Key => {
                "Performs key down presses on the arguments passed in order, then performs key \
                 releases in reverse order."
            }
            CuAction::Type => "Type a string of text on the keyboard.",
            CuAction::LeftClick => {
                "Click the left mouse button at a specified (x, y) pixel coordinate on the screen."
            }
            CuAction::DoubleClick => {
                "Double-click the left mouse button at a specified (x, y) pixel coordinate on the \
                 screen."
            }
            CuAction::TripleClick => {
                "Triple-click the left mouse button at a specified (x, y) pixel coordinate on the \
                 screen."
            }
            CuAction::Scroll => "Performs a scroll of the mouse scroll wheel.",
            CuAction::HScroll => "Performs a horizontal scroll.",
            CuAction::Wait => "Wait specified seconds for the change to happen.",
            CuAction::Terminate => "Terminate the current task and report its completion status.",
            CuAction::Answer => "Answer a question.",
        }
    }

    /// Its parameters after `action`, in the order a call writes them.
    pub fn params(self) -> &'static [Param] {
        match self {
            CuAction::Key => &[Param::Keys],
            CuAction::Type | CuAction::Answer => &[Param::Text],
            CuAction::LeftClick | CuAction::DoubleClick | CuAction::TripleClick => {
                &[Param::Coordinate]
            }
            CuAction::Scroll | CuAction::HScroll => &[Param::Pixels],
            CuAction::Wait => &[Param::Time],
            CuAction::Terminate => &[Param::Status],
        }
    }

    /// Clicks of a click action (1, 2, 3); 0 for the others.
    pub fn clicks(self) -> usize {
        match self {
            CuAction::LeftClick => 1,
            CuAction::DoubleClick => 2,
            CuAction::TripleClick => 3,
            _ => 0,
        }
    }
}

impl Param {
    /// Every parameter, in the order the tool schema lists them.
    pub const ALL: &'static [Param] = &[
        Param::Keys,
        Param::Text,
        Param::Coordinate,
        Param::Pixels,
        Param::Time,
        Param::Status,
    ];

    /// Its key in a call.
    pub fn name(self) -> &'static str {
        match self {
            Param::Keys => "keys",
            Param::Text => "text",
            Param::Coordinate => "coordinate",
            Param::Pixels => "pixels",
            Param::Time => "time",
            Param::Status => "status",
        }
    }

    /// What the schema says of it before "Required only by …".
    fn meaning(self) -> &'static str {
        match self {
            Param::Keys | Param::Text => "",
            Param::Coordinate => {
                "(x, y): The x (pixels from the left edge) and y (pixels from the top edge) \
                 coordinates to move the mouse to. "
            }
            Param::Pixels => {
                "The amount of scrolling to perform. Positive values scroll up, negative values \
                 scroll down. "
            }
            Param::Time => "The seconds to wait. ",
            Param::Status => "The status of the task. ",
        }
    }

    /// Its JSON schema type.
    fn json_type(self) -> &'static str {
        match self {
            Param::Keys | Param::Coordinate => "array",
            Param::Text | Param::Status => "string",
            Param::Pixels | Param::Time => "number",
        }
    }
}

/// The two values of `status`.
pub const STATUSES: [&str; 2] = ["success", "failure"];

/// Key names as pyautogui spells them (the names the models were trained on), each with the
/// Sightline key ([`KEY_NAMES`]) it presses; letters, digits and F-keys are spelled the same
/// in both and are added by [`key_table`].
const NAMED_KEYS: &[(&str, &str)] = &[
    ("enter", "enter"),
    ("return", "enter"),
    ("tab", "tab"),
    ("esc", "escape"),
    ("escape", "escape"),
    ("backspace", "backspace"),
    ("delete", "delete"),
    ("del", "delete"),
    ("space", "space"),
    ("up", "up"),
    ("down", "down"),
    ("left", "left"),
    ("right", "right"),
    ("home", "home"),
    ("end", "end"),
    ("pageup", "page_up"),
    ("pagedown", "page_down"),
    ("insert", "insert"),
    ("ctrl", "ctrl"),
    ("alt", "alt"),
    ("shift", "shift"),
    ("win", "meta"),
    ("command", "meta"),
];

/// Every key name the grammar offers in `keys`, with the Sightline key it presses: the named
/// keys of pyautogui, then the letters, digits and F-keys of [`KEY_NAMES`].
pub fn key_table() -> Vec<(&'static str, &'static str)> {
    let mut table = NAMED_KEYS.to_vec();
    for key in KEY_NAMES {
        let plain = key.len() == 1
            || (key.starts_with('f')
                && key.len() > 1
                && key[1..].bytes().all(|b| b.is_ascii_digit()));
        if plain {
            table.push((key, key));
        }
    }
    table
}

/// The Sightline key a pyautogui key name presses.
pub fn sightline_key(name: &str) -> Option<&'static str> {
    key_table()
        .into_iter()
        .find(|(py, _)| *py == name)
        .map(|(_, key)| key)
}

/// The tool as one planner offers it: the actions its runtime executes, and whether answers
/// start with an `Action:` line.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolLanguage {
    /// The actions offered, in [`CuAction::ALL`] order.
    pub actions: Vec<CuAction>,
    /// Whether an `Action:` sentence comes before the call.
    pub action_line: bool,
}

impl ToolLanguage {
    /// The tool's actions a runtime executing `actions` (Sightline's action kinds), with or
    /// without `xy:` points and up to `max_steps` steps a batch, can carry out: a click needs
    /// points, a double click two steps and a triple click three; `terminate` and `answer`
    /// are always there (they end the task).
    pub fn new(
        actions: &[ActionKind],
        coordinate_targets: bool,
        max_steps: usize,
        action_line: bool,
    ) -> Self {
        let has = |k: ActionKind| actions.contains(&k);
        let offered = CuAction::ALL
            .iter()
            .copied()
            .filter(|a| match a {
                CuAction::Key => has(ActionKind::Key) || has(ActionKind::KeyCombo),
                CuAction::Type => has(ActionKind::Type),
                CuAction::LeftClick | CuAction::DoubleClick | CuAction::TripleClick => {
                    has(ActionKind::Click) && coordinate_targets && a.clicks() <= max_steps
                }
                CuAction::Scroll | CuAction::HScroll => has(ActionKind::Scroll),
                CuAction::Wait => has(ActionKind::Wait),
                CuAction::Terminate | CuAction::Answer => true,
            })
            .collect();
        ToolLanguage {
            actions: offered,
            action_line,
        }
    }

    /// The parameters the offered actions use, in [`Param::ALL`] order.
    pub fn params(&self) -> Vec<Param> {
        Param::ALL
            .iter()
            .copied()
            .filter(|p| self.actions.iter().any(|a| a.params().contains(p)))
            .collect()
    }

    /// The tool's schema as the prompt shows it: a function `computer_use` whose `action`
    /// enumerates the offered actions, each parameter saying which actions need it.
    pub fn schema(&self) -> Value {
        let bullets: String = self
            .actions
            .iter()
            .map(|a| format!("\n* `{}`: {}", a.name(), a.description()))
            .collect();
        let mut properties = Map::new();
        properties.insert(
            "action".into(),
            json!({
                "description": format!("The action to perform. The available actions are:{bullets}"),
                "enum": self.actions.iter().map(|a| a.name()).collect::<Vec<_>>(),
                "type": "string",
            }),
        );
        for param in self.params() {
            let users: Vec<String> = self
                .actions
                .iter()
                .filter(|a| a.params().contains(&param))
                .map(|a| format!("`action={}`", a.name()))
                .collect();
            let mut schema = json!({
                "description": format!("{}Required only by {}.", param.meaning(), and_list(&users)),
                "type": param.json_type(),
            });
            if param == Param::Status {
                schema["enum"] = json!(STATUSES);
            }
            properties.insert(param.name().into(), schema);
        }
        json!({
            "type": "function",
            "function": {
                "name": FUNCTION_NAME,
                "description": tool_description(),
                "parameters": {
                    "properties": properties,
                    "required": ["action"],
                    "type": "object",
                },
            },
        })
    }

    /// The system prompt: Qwen's function-calling block with the tool's schema (as
    /// qwen-agent's `NousFnCallPrompt` writes it), after Qwen's default system sentence for
    /// the bare call, or followed by the response-format rules of GUI-Owl-1.5 and UI-MOPD for
    /// the `Action:` line.
    pub fn system_prompt(&self) -> String {
        let tools = format!(
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
             You are provided with function signatures within <tools></tools> XML tags:\n\
             <tools>\n{}\n</tools>\n\n\
             For each function call, return a json object with function name and arguments \
             within {TOOL_CALL_OPEN}{TOOL_CALL_CLOSE} XML tags:\n{TOOL_CALL_OPEN}\n\
             {{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n{TOOL_CALL_CLOSE}",
            python_json(&self.schema())
        );
        if self.action_line {
            format!(
                "{tools}\n\n# Response format\n\nResponse format for every step:\n\
                 1) Action: a short imperative describing what to do in the UI.\n\
                 2) A single {TOOL_CALL_OPEN}...{TOOL_CALL_CLOSE} block containing only the JSON: \
                 {{\"name\": <function-name>, \"arguments\": <args-json-object>}}.\n\n\
                 Rules:\n\
                 - Output exactly in the order: Action, {TOOL_CALL_OPEN}.\n\
                 - Be brief: one sentence for Action.\n\
                 - Do not output anything else outside those two parts.\n\
                 - If finishing, use action=terminate in the tool call."
            )
        } else {
            format!("You are a helpful assistant.\n\n{tools}")
        }
    }
}

/// The tool's own description (GUI-Owl-1.5's desktop runner), the grid size from
/// [`COORDINATE_MAX`].
fn tool_description() -> String {
    format!(
        "Use a mouse and keyboard to interact with a computer, and take screenshots.\n\
         * This is an interface to a desktop GUI. You do not have access to a terminal or \
         applications menu. You must click on desktop icons to start applications.\n\
         * Some applications may take time to start or process actions, so you may need to \
         wait and take successive screenshots to see the results of your actions. E.g. if you \
         click on Firefox and a window doesn't open, try wait and taking another screenshot.\n\
         * The screen's resolution is {COORDINATE_MAX}x{COORDINATE_MAX}.\n\
         * Make sure to click any buttons, links, icons, etc with the cursor tip in the center \
         of the element. Don't click boxes on their edges unless asked."
    )
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The user turn's text after the screenshot (OSWorld's Qwen3-VL agent, GUI-Owl-1.5's and
/// UI-MOPD's desktop format): the instruction and the earlier steps' `Action:` sentences, one
/// `Step N: …` line each from `Step {first_step}`, or `None`.
pub fn user_text(goal: &str, previous_actions: &[String], first_step: usize) -> String {
    let previous = if previous_actions.is_empty() {
        "None".to_string()
    } else {
        previous_actions
            .iter()
            .enumerate()
            .map(|(i, a)| format!("Step {}: {a}", first_step + i))
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "\nPlease generate the next move according to the UI screenshot, instruction and \
         previous actions.\n\nInstruction: {goal}\n\nPrevious actions:\n{previous}"
    )
}

/// Translate one answer (the text after any thought) into a [`NextMove`].
///
/// - `key` with one key is a `key` step, with 2–4 a `key_combo` (pyautogui names mapped by
///   [`key_table`]);
/// - `type` types into the focused element;
/// - `left_click` / `double_click` / `triple_click` are 1 / 2 / 3 clicks at `xy:X,Y`;
/// - `scroll` by `pixels` is a `scroll` with `dy = -pixels` (the tool scrolls up for positive
///   values, Sightline down), `hscroll` one with `dx = pixels`;
/// - `wait` waits `time` seconds, at most `limits.max_wait_ms`;
/// - `terminate` is `done` (`success`) or `fail` (`failure`), `answer` is `done` with the
///   text as its extracted data.
///
/// The `Action:` sentence is the batch's and each step's purpose (and a `done`'s summary or a
/// `fail`'s reason); without one, a description of the call is. Errors ([`Error::Decode`]
/// with the text): an answer not in the dialect, an action Sightline leaves out, a key it
/// does not know, a number out of the limits.
///
/// [`Error::Decode`]: crate::Error::Decode
pub fn translate(answer: &str, action_line: bool, limits: &MoveLimits) -> Result<NextMove> {
    let fail = |reason: String| not_a_move(reason, answer);
    let mut rest = answer.trim_start();
    let mut sentence = None;
    if action_line {
        let line = rest
            .strip_prefix(ACTION_LINE_PREFIX.trim_end())
            .ok_or_else(|| fail("the answer does not start with an Action: line".into()))?;
        let (line, after) = line
            .split_once('\n')
            .ok_or_else(|| fail("the Action: line does not end".into()))?;
        sentence = Some(unquote(line.trim()).to_string()).filter(|s| !s.is_empty());
        rest = after;
    }
    let call = rest
        .trim()
        .strip_prefix(TOOL_CALL_OPEN)
        .and_then(|c| c.strip_suffix(TOOL_CALL_CLOSE))
        .ok_or_else(|| fail(format!("no {TOOL_CALL_OPEN}…{TOOL_CALL_CLOSE} block")))?;
    let call: Value = serde_json::from_str(call.trim())
        .map_err(|e| crate::Error::decode_caused(answer, "the tool call is not JSON", e))?;
    if call.get("name").and_then(Value::as_str) != Some(FUNCTION_NAME) {
        return Err(fail(format!("the call is not to {FUNCTION_NAME}")));
    }
    let args = call
        .get("arguments")
        .and_then(Value::as_object)
        .ok_or_else(|| fail("the call has no arguments object".into()))?;
    let name = args
        .get("action")
        .and_then(Value::as_str)
        .ok_or_else(|| fail("the call names no action".into()))?;
    let action = CuAction::from_name(name).ok_or_else(|| {
        fail(format!(
            "action {name:?} has no NextMove equivalent Sightline executes (it offers {})",
            CuAction::ALL
                .iter()
                .map(|a| a.name())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let param = |p: Param| {
        args.get(p.name())
            .ok_or_else(|| fail(format!("{name} needs {}", p.name())))
    };
    let purpose = sentence
        .clone()
        .unwrap_or_else(|| describe_call(name, args));
    let batch = |actions: Vec<PlannedAction>| NextMove::Batch {
        purpose: purpose.clone(),
        steps: actions
            .into_iter()
            .map(|action| Step {
                purpose: purpose.clone(),
                kind: StepKind::Deterministic,
                action,
            })
            .collect(),
    };
    let integer = |v: &Value, what: &str| {
        v.as_i64()
            .ok_or_else(|| fail(format!("{what} {v} is not an integer")))
    };
    Ok(match action {
        CuAction::Key => {
            let names = param(Param::Keys)?
                .as_array()
                .ok_or_else(|| fail("keys is not a list".into()))?;
            if names.is_empty() || names.len() > MAX_KEYS {
                return Err(fail(format!(
                    "{} keys; a key call presses 1 to {MAX_KEYS}",
                    names.len()
                )));
            }
            let keys = names
                .iter()
                .map(|k| {
                    k.as_str()
                        .and_then(sightline_key)
                        .map(str::to_string)
                        .ok_or_else(|| fail(format!("unknown key {k}")))
                })
                .collect::<Result<Vec<String>>>()?;
            batch(vec![match keys.as_slice() {
                [one] => PlannedAction::Key { key: one.clone() },
                _ => PlannedAction::KeyCombo { keys },
            }])
        }
        CuAction::Type => batch(vec![PlannedAction::Type {
            target_id: None,
            text: text_param(param(Param::Text)?, &fail)?,
        }]),
        CuAction::LeftClick | CuAction::DoubleClick | CuAction::TripleClick => {
            let point = param(Param::Coordinate)?
                .as_array()
                .filter(|p| p.len() == 2)
                .ok_or_else(|| fail("coordinate is not [x, y]".into()))?;
            let target = point_target(integer(&point[0], "x")?, integer(&point[1], "y")?, answer)?;
            let click = PlannedAction::Click {
                target_id: target,
                expect_after: None,
            };
            batch(vec![click; action.clicks()])
        }
        CuAction::Scroll | CuAction::HScroll => {
            let pixels = integer(param(Param::Pixels)?, "pixels")?;
            let max = i64::from(limits.max_scroll);
            if pixels.abs() > max {
                return Err(fail(format!("scroll {pixels} exceeds {max}")));
            }
            // Within ±max_scroll (a u32 limit of at most a few thousand): fits an i32.
            let amount = pixels as i32;
            batch(vec![if action == CuAction::Scroll {
                PlannedAction::Scroll { dx: 0, dy: -amount }
            } else {
                PlannedAction::Scroll { dx: amount, dy: 0 }
            }])
        }
        CuAction::Wait => {
            let seconds = param(Param::Time)?
                .as_f64()
                .filter(|s| *s >= 0.0)
                .ok_or_else(|| fail("time is not a number of seconds".into()))?;
            let ms = (seconds * 1000.0)
                .round()
                .min(f64::from(limits.max_wait_ms));
            batch(vec![PlannedAction::Wait { ms: ms as u32 }])
        }
        CuAction::Terminate => match param(Param::Status)?.as_str() {
            Some("success") => NextMove::Done {
                summary: sentence.unwrap_or_else(|| "The task is complete.".into()),
                extracted_data: Value::Null,
            },
            Some("failure") => NextMove::Fail {
                reason: sentence.unwrap_or_else(|| "The task cannot be completed.".into()),
            },
            _ => return Err(fail("status is neither success nor failure".into())),
        },
        CuAction::Answer => {
            let text = text_param(param(Param::Text)?, &fail)?;
            NextMove::Done {
                summary: sentence.unwrap_or_else(|| format!("Answered: {text}")),
                extracted_data: Value::String(text),
            }
        }
    })
}

/// A non-empty string parameter.
fn text_param(v: &Value, fail: &dyn Fn(String) -> crate::Error) -> Result<String> {
    v.as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| fail(format!("text {v} is not a non-empty string")))
}

/// A purpose for a call that came without an `Action:` sentence: the call itself in words.
fn describe_call(name: &str, args: &Map<String, Value>) -> String {
    let params: Vec<String> = args
        .iter()
        .filter(|(k, _)| k.as_str() != "action")
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    if params.is_empty() {
        format!("computer_use {name}")
    } else {
        format!("computer_use {name}, {}", params.join(", "))
    }
}

/// A sentence without one pair of surrounding quotes (Qwen's mobile cookbook shows the
/// `Action:` sentence quoted).
fn unquote(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .filter(|inner| !inner.is_empty())
        .unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pyautogui_key_presses_a_key_the_runner_knows() {
        for (py, key) in key_table() {
            assert!(KEY_NAMES.contains(&key), "{py} -> {key}");
        }
        assert_eq!(sightline_key("esc"), Some("escape"));
        assert_eq!(sightline_key("pagedown"), Some("page_down"));
        assert_eq!(sightline_key("f12"), Some("f12"));
        assert_eq!(sightline_key("q"), Some("q"));
        assert_eq!(sightline_key("hyper"), None);
    }

    #[test]
    fn a_runtime_without_points_or_steps_is_offered_no_clicks_it_cannot_run() {
        let all = ToolLanguage::new(ActionKind::DESKTOP, true, 5, false);
        assert_eq!(all.actions, CuAction::ALL);
        let no_points = ToolLanguage::new(ActionKind::DESKTOP, false, 5, false);
        assert!(no_points.actions.iter().all(|a| a.clicks() == 0));
        let two_steps = ToolLanguage::new(ActionKind::DESKTOP, true, 2, false);
        assert!(two_steps.actions.contains(&CuAction::DoubleClick));
        assert!(!two_steps.actions.contains(&CuAction::TripleClick));
        let only_wait = ToolLanguage::new(&[ActionKind::Wait], true, 5, false);
        assert_eq!(
            only_wait.actions,
            [CuAction::Wait, CuAction::Terminate, CuAction::Answer]
        );
    }
}
