//! The prompt of one turn, in Qwen3-VL's chat format.
//!
//! A turn is three token runs, in this order, so that each can be cached and reused:
//!
//! 1. **system** — [`SYSTEM_PROMPT`], identical every turn: its KV is computed once per loaded
//!    planner and the cache is cut back to it at the start of each turn.
//! 2. **screen** — the user turn's opening, the screenshot's `<|image_pad|>` run and the view
//!    (screen, elements, blockers, anomalies, adapter actions). `verify_done` reuses
//!    system + screen from the last `decide_next` when the screenshot is the same.
//! 3. **task** — goal, progress, memory, history, the actions allowed this turn, and the
//!    opening of the assistant turn; or, for `verify_done`, the grader question.
//!
//! Each run is tokenized on its own and ends with a newline, which Qwen's pre-tokenizer never
//! merges with the letter that follows, so the concatenation equals tokenizing the whole text.

use std::fmt::Write;

use cel_contracts::{AttemptRecord, PlanningElement, PlanningView};
use tokenizers::Tokenizer;

use crate::error::{Error, Result};
use crate::planner::history;
use crate::tokenizer::SpecialTokens;

/// The static system prompt: role, move format, coordinates, batch discipline, terminals.
pub const SYSTEM_PROMPT: &str = "\
You are Sightline, a computer-use agent. You see a screenshot of the user's screen and a \
description of it, and you decide the next move toward the user's goal.

Answer with one JSON object and nothing else, in one of four forms:
{\"kind\":\"batch\",\"purpose\":\"...\",\"steps\":[{\"purpose\":\"...\",\"action\":{...}}]} \
runs 1 to 5 steps, then you see the screen again.
{\"kind\":\"done\",\"summary\":\"...\",\"extracted_data\":null} when the screen shows the goal achieved.
{\"kind\":\"fail\",\"reason\":\"...\"} when the goal cannot be achieved from here.
{\"kind\":\"clarify\",\"question\":\"...\"} when the goal is ambiguous, or destructive (delete, \
overwrite, send, pay, buy, transfer) and the user did not explicitly confirm it.

Actions: {\"type\":\"click\",\"target_id\":\"...\"}, {\"type\":\"type\",\"text\":\"...\"}, \
{\"type\":\"key\",\"key\":\"enter\"}, {\"type\":\"key_combo\",\"keys\":[\"ctrl\",\"s\"]}, \
{\"type\":\"scroll\",\"dx\":0,\"dy\":3}, {\"type\":\"drag\",\"from_target_id\":\"...\",\"to_target_id\":\"...\"}, \
{\"type\":\"wait\",\"ms\":500}, {\"type\":\"extract\",\"goal\":\"...\",\"data\":\"...\"}. \
Only the actions listed as allowed in the turn are accepted.
Targets: an element id from the screen description, or a point \"xy:X,Y\" where X and Y are \
integers from 0 to 1000 relative to the screenshot: xy:0,0 is its top-left corner and \
xy:1000,1000 its bottom-right corner.
Keep batches short: end a batch at any step whose result you need to see before going on. \
Never repeat a step that failed the same way. Never claim done before the screen shows it.
";

/// Most elements rendered from a view, whatever its budget says.
pub const MAX_ELEMENTS: usize = 200;
/// Longest label, value or description rendered, in characters.
pub const MAX_FIELD_CHARS: usize = 120;
/// Longest rendering of the shared memory, in characters.
pub const MAX_MEMORY_CHARS: usize = 1_500;

/// The three token runs of a turn (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnTokens {
    /// Run 2: user-turn opening, image pads, view.
    pub screen: Vec<u32>,
    /// Run 3: goal, progress, memory, history, allowed actions, assistant opening.
    pub task: Vec<u32>,
}

/// What a turn's task part is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct TaskInput<'a> {
    /// The user's goal.
    pub goal: &'a str,
    /// Every earlier attempt, oldest first.
    pub history: &'a [AttemptRecord],
    /// Data the runner has accumulated.
    pub shared_memory: &'a serde_json::Value,
    /// The view (for its run progress).
    pub view: &'a PlanningView,
    /// The action types the grammar allows this turn.
    pub allowed_actions: &'a [&'a str],
}

/// Renders turns and tokenizes them with the model's tokenizer.
#[derive(Debug, Clone)]
pub struct PromptRenderer {
    tokenizer: Tokenizer,
    special: SpecialTokens,
}

impl PromptRenderer {
    /// A renderer for `tokenizer`, which must carry the Qwen3-VL special tokens.
    pub fn new(tokenizer: Tokenizer) -> Result<Self> {
        let special = SpecialTokens::from_tokenizer(&tokenizer)?;
        Ok(PromptRenderer { tokenizer, special })
    }

    /// The special-token ids.
    pub fn special(&self) -> &SpecialTokens {
        &self.special
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Run 1: the system turn.
    pub fn system(&self) -> Result<Vec<u32>> {
        self.encode(&format!("<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"))
    }

    /// Run 2: the user turn's opening, `image_tokens` image pads (none for a text-only
    /// turn) and the view.
    pub fn screen(&self, view: &PlanningView, image_tokens: Option<usize>) -> Result<Vec<u32>> {
        let mut ids = self.encode("<|im_start|>user\n")?;
        if let Some(n) = image_tokens {
            ids.push(self.special.vision_start);
            ids.extend(std::iter::repeat_n(self.special.image_pad, n));
            ids.push(self.special.vision_end);
        }
        ids.extend(self.encode(&render_view(view, image_tokens.is_some()))?);
        Ok(ids)
    }

    /// Run 3 of `decide_next`.
    pub fn task(&self, input: &TaskInput<'_>) -> Result<Vec<u32>> {
        self.encode(&render_task(input))
    }

    /// Run 3 of `verify_done`: the grader question, ending where the answer word goes.
    pub fn grader_question(&self, goal: &str, summary: &str) -> Result<Vec<u32>> {
        self.encode(&render_grader_question(goal, summary))
    }

    /// The first token of each word, as the model would start its answer with it.
    pub fn answer_token(&self, word: &str) -> Result<u32> {
        let ids = self.encode(word)?;
        ids.first()
            .copied()
            .ok_or_else(|| Error::Tokenizer(format!("{word:?} encodes to no token")))
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self
            .tokenizer
            .encode(text, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?
            .get_ids()
            .to_vec())
    }
}

/// The view as the model reads it.
pub fn render_view(view: &PlanningView, has_screenshot: bool) -> String {
    let mut out = String::new();
    if !has_screenshot {
        out.push_str("(No screenshot this turn: decide from the description.)\n");
    }
    let screen = &view.screen;
    let _ = write!(out, "Screen: app {}", quoted(&screen.active_app));
    if !screen.window.is_empty() {
        let _ = write!(out, ", window {}", quoted(&screen.window));
    }
    if let Some(url) = &screen.url {
        let _ = write!(out, ", url {}", quoted(url));
    }
    out.push('\n');
    if let Some(summary) = &screen.summary {
        let _ = writeln!(out, "Summary: {}", clip(summary));
    }
    let limit = (view.budget.max_elements as usize).min(MAX_ELEMENTS);
    let shown = view.elements.len().min(limit);
    let omitted = view.elements.len() - shown + view.omitted_counts.elements as usize;
    if view.elements.is_empty() {
        out.push_str("Elements: none listed; target points as xy:X,Y.\n");
    } else {
        let _ = write!(out, "Elements ({shown}");
        if omitted > 0 {
            let _ = write!(out, ", {omitted} more not shown");
        }
        out.push_str("):\n");
        for element in &view.elements[..shown] {
            render_element(&mut out, element);
        }
    }
    for blocker in &view.blockers {
        let _ = writeln!(
            out,
            "Blocker ({}): {}",
            clip(&blocker.kind),
            clip(&blocker.description)
        );
    }
    for anomaly in &view.anomalies {
        let _ = writeln!(
            out,
            "Anomaly ({}): {}",
            clip(&anomaly.kind),
            clip(&anomaly.description)
        );
    }
    for action in &view.adapter_actions {
        let _ = writeln!(
            out,
            "Adapter action {}.{}: {}",
            clip(&action.adapter),
            clip(&action.action),
            clip(&action.description)
        );
    }
    out
}

fn render_element(out: &mut String, e: &PlanningElement) {
    // Ids are never clipped: the model must be able to copy them exactly.
    let _ = write!(out, "- {} {}", json_string(&e.id), clip(&e.element_type));
    if let Some(label) = &e.label {
        let _ = write!(out, " {}", quoted(label));
    }
    if let Some(value) = &e.value {
        let _ = write!(out, " value={}", quoted(value));
    }
    let s = &e.state;
    let flags = [
        (s.focused, "focused"),
        (s.selected, "selected"),
        (!s.enabled, "disabled"),
        (s.checked, "checked"),
        (s.expanded, "expanded"),
    ];
    for (on, name) in flags {
        if on {
            let _ = write!(out, " [{name}]");
        }
    }
    if let Some(options) = &e.select_options {
        let _ = write!(out, " options={}", quoted(options));
    }
    out.push('\n');
}

/// The task part of a `decide_next` turn, ending with the assistant turn's opening.
pub fn render_task(input: &TaskInput<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Goal: {}", defuse(input.goal.trim()));
    let progress = &input.view.run_progress;
    if progress.max_steps > 0 {
        let _ = writeln!(
            out,
            "Progress: {} of {} steps used.",
            progress.steps_used, progress.max_steps
        );
    }
    if !input.shared_memory.is_null() {
        let memory = input.shared_memory.to_string();
        let _ = writeln!(out, "Memory: {}", clip_to(&memory, MAX_MEMORY_CHARS));
    }
    let _ = writeln!(out, "History: {}", history::render(input.history));
    let _ = writeln!(
        out,
        "Allowed actions: {}.",
        input.allowed_actions.join(", ")
    );
    out.push_str("<|im_end|>\n<|im_start|>assistant\n");
    out
}

/// The grader question (see `planner::grader` for the answer words).
pub fn render_grader_question(goal: &str, summary: &str) -> String {
    format!(
        "Goal: {}\nThe agent claims: {}\nIs the goal done on this screen? Answer with one word: \
Yes if it is done; otherwise Retry (the last action did not take effect), Switch (a different \
kind of action is needed), Target (a different element is needed) or Stop (the goal cannot be \
reached).<|im_end|>\n<|im_start|>assistant\n",
        defuse(goal.trim()),
        clip_to(summary.trim(), MAX_MEMORY_CHARS)
    )
}

fn quoted(text: &str) -> String {
    json_string(&clip(text))
}

/// JSON string syntax: ids and labels are user data and may hold quotes or newlines.
fn json_string(text: &str) -> String {
    defuse(&serde_json::Value::String(text.to_string()).to_string())
}

fn clip(text: &str) -> String {
    clip_to(text, MAX_FIELD_CHARS)
}

fn clip_to(text: &str, max_chars: usize) -> String {
    let clipped = match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    };
    defuse(&clipped)
}

/// User text must not smuggle chat-control tokens into the prompt: the tokenizer would read
/// `<|im_end|>` in a window title as the real end of the turn. A zero-width space after the
/// `<` keeps the text readable and breaks the match.
fn defuse(text: &str) -> String {
    text.replace("<|", "<\u{200b}|")
}
