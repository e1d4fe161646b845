//! The per-turn move grammar: what a [`NextMove`](cel_contracts::NextMove) may look like
//! on this screen, for this runtime.
//!
//! [`MoveSpec::new`] resolves a [`PlanningView`] and [`GrammarOptions`] into the set of
//! actions the runtime can execute and the targets on screen. The spec renders two
//! equivalent grammars:
//!
//! - [`MoveSpec::json_schema`]: a JSON schema derived from the `cel-contracts` types
//!   (tag first, `additionalProperties: false`, compact JSON through llguidance's
//!   `x-guidance` options). Strings are bounded by `maxLength`.
//! - [`MoveSpec::lark`]: the same language as an llguidance Lark grammar, the engine's
//!   default. Strings are one unbounded lexeme there, bounded by **tokens** instead:
//!   [`MoveSpec::string_caps`] gives each string's bound and the decoder closes a
//!   string that reaches it. A character-counted string makes every mask inside it
//!   walk the vocabulary trie (p99 ~0.9 ms with Qwen's vocabulary); an unbounded
//!   lexeme lets llguidance answer from its precomputed token slices. llguidance's
//!   own `max_tokens` is no substitute: it truncates a lexeme anywhere, inside a
//!   UTF-8 character or an escape (the property test caught it).
//!
//! Steps always carry `kind`, as serde writes them, so the key is forced rather
//! than sampled.
//!
//! Both put each object's tag (`kind`, `type`) first, in serde's field order, and
//! allow no whitespace, so the model cannot pad. Element ids are user data: they are
//! escaped through `serde_json`, never by string formatting.

use cel_contracts::{NextMove, PlannedAction, PlanningElement, PlanningView, StepKind};
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};

/// Key names the runner can press, for `key` and `key_combo` actions: the grammar allows
/// exactly these (one list with the runner's, in [`crate::keys`]).
pub use crate::keys::KEY_NAMES;

/// Longest `expect_after` timeout a move may ask for, in milliseconds.
pub const MAX_EXPECT_MS: u32 = 5_000;

/// How a move's `expect_after` opens (`dom_changed` is the only kind the grammar emits).
const EXPECT_AFTER_OPEN: &str = r#","expect_after":{"kind":"dom_changed","timeout_ms":"#;

/// Largest coordinate of an `xy:X,Y` target (Qwen3-VL's relative 0–1000 grid).
pub const COORDINATE_MAX: u32 = 1000;

/// Capability id (in `view.capabilities`) that switches native mouse and keyboard on.
pub const CAPABILITY_NATIVE_INPUT: &str = "native_input";

/// Capability ids starting with this prefix (`cdp_bound`, …) mean a Chrome DevTools
/// Protocol client is bound: `navigate` and `cdp_eval` become executable.
pub const CAPABILITY_CDP_PREFIX: &str = "cdp";

/// The action types the grammar knows, by their `type` tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ActionKind {
    /// `click` an element or point (native input).
    Click,
    /// `type` text, optionally into a target first (native input).
    Type,
    /// Press one `key` (native input).
    Key,
    /// Press a `key_combo` of 2–4 keys (native input).
    KeyCombo,
    /// `set_value` through the accessibility API (not in the default set).
    SetValue,
    /// `scroll` by `dx`, `dy` (native input).
    Scroll,
    /// `drag` from one target to another (native input).
    Drag,
    /// `wait` some milliseconds.
    Wait,
    /// `select` text between two points of the 0–1000 grid (native input).
    Select,
    /// `extract` data from the screen.
    Extract,
    /// `navigate` to a URL (needs a CDP capability).
    Navigate,
    /// `cdp_eval` a JavaScript expression (needs a CDP capability).
    CdpEval,
}

impl ActionKind {
    /// Every action type, in the order the grammar lists them.
    pub const ALL: &'static [ActionKind] = &[
        ActionKind::Click,
        ActionKind::Type,
        ActionKind::Key,
        ActionKind::KeyCombo,
        ActionKind::SetValue,
        ActionKind::Scroll,
        ActionKind::Drag,
        ActionKind::Wait,
        ActionKind::Select,
        ActionKind::Extract,
        ActionKind::Navigate,
        ActionKind::CdpEval,
    ];

    /// The default desktop set.
    pub const DESKTOP: &'static [ActionKind] = &[
        ActionKind::Click,
        ActionKind::Type,
        ActionKind::Key,
        ActionKind::KeyCombo,
        ActionKind::Scroll,
        ActionKind::Drag,
        ActionKind::Wait,
        ActionKind::Select,
        ActionKind::Extract,
    ];

    /// The `type` tag as serde writes it.
    pub fn tag(self) -> &'static str {
        match self {
            ActionKind::Click => "click",
            ActionKind::Type => "type",
            ActionKind::Key => "key",
            ActionKind::KeyCombo => "key_combo",
            ActionKind::SetValue => "set_value",
            ActionKind::Scroll => "scroll",
            ActionKind::Drag => "drag",
            ActionKind::Wait => "wait",
            ActionKind::Select => "select",
            ActionKind::Extract => "extract",
            ActionKind::Navigate => "navigate",
            ActionKind::CdpEval => "cdp_eval",
        }
    }

    /// The kind of a planned action, `None` for actions the grammar never produces.
    pub fn of(action: &PlannedAction) -> Option<ActionKind> {
        Some(match action {
            PlannedAction::Click { .. } => ActionKind::Click,
            PlannedAction::Type { .. } => ActionKind::Type,
            PlannedAction::Key { .. } => ActionKind::Key,
            PlannedAction::KeyCombo { .. } => ActionKind::KeyCombo,
            PlannedAction::SetValue { .. } => ActionKind::SetValue,
            PlannedAction::Scroll { .. } => ActionKind::Scroll,
            PlannedAction::Drag { .. } => ActionKind::Drag,
            PlannedAction::Wait { .. } => ActionKind::Wait,
            PlannedAction::Select { .. } => ActionKind::Select,
            PlannedAction::Extract { .. } => ActionKind::Extract,
            PlannedAction::Navigate { .. } => ActionKind::Navigate,
            PlannedAction::CdpEval { .. } => ActionKind::CdpEval,
            _ => return None,
        })
    }

    /// Whether the action drives the native mouse or keyboard.
    pub fn needs_native_input(self) -> bool {
        matches!(
            self,
            ActionKind::Click
                | ActionKind::Type
                | ActionKind::Key
                | ActionKind::KeyCombo
                | ActionKind::Scroll
                | ActionKind::Drag
                | ActionKind::Select
        )
    }

    /// Whether the action needs a bound CDP client.
    pub fn needs_cdp(self) -> bool {
        matches!(self, ActionKind::Navigate | ActionKind::CdpEval)
    }
}

/// Bounds on every free-form part of a move. Token bounds apply to the Lark grammar;
/// the JSON schema turns them into character bounds of
/// [`chars_per_token`](Self::chars_per_token) each.
#[derive(Debug, Clone, PartialEq)]
pub struct GrammarLimits {
    /// Most steps in a batch (at least 1). Default 5.
    pub max_steps: usize,
    /// Tokens in a sentence: `purpose`, `summary`, `reason`, `question`. Default 48.
    pub sentence_tokens: usize,
    /// Tokens in a longer text: `type.text`, `set_value.value`, `extract.goal`/`data`,
    /// `navigate.url`, `cdp_eval.expression`. Default 128.
    pub text_tokens: usize,
    /// Tokens in one string of `done.extracted_data` (keys and values). Default 32.
    pub data_string_tokens: usize,
    /// Entries in the object or array of `done.extracted_data`. Default 16.
    pub data_entries: usize,
    /// Longest `wait`, in milliseconds. Default 10,000.
    pub max_wait_ms: u32,
    /// Largest `scroll` amount either way, per axis. Default 5,000.
    pub max_scroll: u32,
    /// Characters per token when the JSON schema bounds strings. Default 4.
    pub chars_per_token: usize,
    /// Tokens of an optional reasoning sentence written before the move, as a
    /// `"thought"` key first in the move object (stripped by
    /// [`parse_move`](super::parse_move)). 0, the default, leaves it out.
    pub thought_tokens: usize,
}

impl Default for GrammarLimits {
    fn default() -> Self {
        GrammarLimits {
            max_steps: 5,
            sentence_tokens: 48,
            text_tokens: 128,
            data_string_tokens: 32,
            data_entries: 16,
            max_wait_ms: 10_000,
            max_scroll: 5_000,
            chars_per_token: 4,
            thought_tokens: 0,
        }
    }
}

/// What the caller's runtime can execute, and how moves are bounded.
#[derive(Debug, Clone, PartialEq)]
pub struct GrammarOptions {
    /// Action types the runtime can execute. The view's capabilities then switch
    /// off those it cannot run this turn (native input, CDP). Default: the desktop
    /// set plus `navigate` and `cdp_eval` (which only a CDP capability enables).
    pub actions: Vec<ActionKind>,
    /// Allow `xy:X,Y` targets (integers 0–1000 on the screenshot) besides element
    /// ids. On for Sightline's runner; off for runtimes that resolve only ids, where
    /// a view without elements allows no `click`, `drag` or `set_value`, and no
    /// `select` (which is coordinates only).
    pub coordinate_targets: bool,
    /// Bounds on steps, strings and numbers.
    pub limits: GrammarLimits,
}

impl Default for GrammarOptions {
    fn default() -> Self {
        let mut actions = ActionKind::DESKTOP.to_vec();
        actions.extend([ActionKind::Navigate, ActionKind::CdpEval]);
        GrammarOptions {
            actions,
            coordinate_targets: true,
            limits: GrammarLimits::default(),
        }
    }
}

/// Runtime capabilities read from a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Native mouse and keyboard input is wired up.
    pub native_input: bool,
    /// A CDP client is bound.
    pub cdp: bool,
}

impl Capabilities {
    /// Read the capabilities of `view`. A view that lists none at all is a desktop
    /// with native input and no CDP.
    pub fn from_view(view: &PlanningView) -> Self {
        if view.capabilities.is_empty() {
            return Capabilities {
                native_input: true,
                cdp: false,
            };
        }
        let has = |pred: &dyn Fn(&str) -> bool| view.capabilities.iter().any(|c| pred(&c.id));
        Capabilities {
            native_input: has(&|id| id == CAPABILITY_NATIVE_INPUT),
            cdp: has(&|id| id.starts_with(CAPABILITY_CDP_PREFIX)),
        }
    }
}

/// Token bounds on JSON string values, enforced by the decoder: once a string has
/// taken its bound, the next token must close it (as soon as the grammar allows:
/// a character or an escape in progress is finished first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StringCaps {
    /// Bound of the string value of each key.
    pub by_key: Vec<(String, usize)>,
    /// Bound of every other string (object keys, array items, values of other keys).
    pub default_tokens: usize,
}

impl StringCaps {
    /// The bound of a string value of `key` (`None`: not the value of a key).
    pub fn for_key(&self, key: Option<&[u8]>) -> usize {
        key.and_then(|k| self.by_key.iter().find(|(name, _)| name.as_bytes() == k))
            .map_or(self.default_tokens, |(_, cap)| *cap)
    }
}

/// Most elements a turn shows (and its grammar accepts), whatever the view's budget says.
pub const MAX_ELEMENTS: usize = 200;

/// Longest element id, in characters, a turn shows and accepts. An element with a
/// longer id is left out of both (and counted as not shown): an id cannot be clipped,
/// since the model must copy it exactly, and a huge one would blow the prompt.
pub const MAX_ID_CHARS: usize = 200;

/// The elements of `view` a turn shows and its grammar accepts, in view order: the
/// first element of each id, ids of at most [`MAX_ID_CHARS`] characters that hold no
/// chat-control sequence (`<|`, which the prompt must defuse and so could not show
/// verbatim), at most `min(view.budget.max_elements, MAX_ELEMENTS)` of them.
///
/// This is the one selection the prompt and the grammar share (ARCHITECTURE.md,
/// decision 4): the prompt may show fewer, to fit the turn's token budget, and
/// then builds the grammar from the view it rendered, whose selection is that prefix.
pub fn selected_elements(view: &PlanningView) -> Vec<&PlanningElement> {
    let limit = (view.budget.max_elements as usize).min(MAX_ELEMENTS);
    let mut seen = std::collections::HashSet::new();
    view.elements
        .iter()
        .filter(|e| e.id.chars().nth(MAX_ID_CHARS).is_none() && !e.id.contains("<|"))
        .filter(|e| seen.insert(e.id.as_str()))
        .take(limit)
        .collect()
}

/// Tokens a bounded string may take beyond its bound: an escape finished (one), a
/// UTF-8 character finished (up to three, see `TokenEnv::character_finishers`), and the
/// token that closes it (one).
pub(crate) const STRING_OVERSHOOT_TOKENS: usize = 5;

/// The resolved grammar of one turn: allowed actions, targets on screen, bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct MoveSpec {
    actions: Vec<ActionKind>,
    target_ids: Vec<String>,
    coordinate_targets: bool,
    limits: GrammarLimits,
}

impl MoveSpec {
    /// Resolve `view` and `options` into this turn's grammar. The targets are
    /// [`selected_elements`]: the same elements, in the same order, as the prompt
    /// shows. Errors on limits that allow nothing (zero steps or tokens).
    pub fn new(view: &PlanningView, options: &GrammarOptions) -> Result<Self> {
        let limits = options.limits.clone();
        if limits.max_steps == 0
            || limits.sentence_tokens == 0
            || limits.text_tokens == 0
            || limits.data_string_tokens == 0
            || limits.chars_per_token == 0
        {
            return Err(Error::InvalidInput(format!(
                "grammar limits must be positive: {limits:?}"
            )));
        }
        let target_ids: Vec<String> = selected_elements(view)
            .into_iter()
            .map(|e| e.id.clone())
            .collect();
        let caps = Capabilities::from_view(view);
        let has_targets = !target_ids.is_empty() || options.coordinate_targets;
        let actions = ActionKind::ALL
            .iter()
            .copied()
            .filter(|a| options.actions.contains(a))
            .filter(|a| caps.native_input || !a.needs_native_input())
            .filter(|a| caps.cdp || !a.needs_cdp())
            .filter(|a| {
                has_targets
                    || !matches!(
                        a,
                        ActionKind::Click | ActionKind::Drag | ActionKind::SetValue
                    )
            })
            .filter(|a| options.coordinate_targets || *a != ActionKind::Select)
            .collect();
        Ok(MoveSpec {
            actions,
            target_ids,
            coordinate_targets: options.coordinate_targets,
            limits,
        })
    }

    /// The action types a batch step may use this turn. Empty means no `batch`.
    pub fn allowed_actions(&self) -> &[ActionKind] {
        &self.actions
    }

    /// The element ids a target may name.
    pub fn target_ids(&self) -> &[String] {
        &self.target_ids
    }

    /// Whether `xy:X,Y` targets are allowed.
    pub fn coordinate_targets(&self) -> bool {
        self.coordinate_targets
    }

    /// The bounds this grammar enforces.
    pub fn limits(&self) -> &GrammarLimits {
        &self.limits
    }

    /// Whether `id` is a target this grammar allows.
    pub fn is_valid_target(&self, id: &str) -> bool {
        self.target_ids.iter().any(|t| t == id)
            || (self.coordinate_targets && parse_coordinate_target(id).is_some())
    }

    /// Check a move against the rules this grammar enforces (actions, targets, keys,
    /// step count, non-empty sentences, number ranges). String token bounds are not
    /// checked (they need the tokenizer). Returns the first violation.
    pub fn check(&self, mv: &NextMove) -> std::result::Result<(), String> {
        let non_empty = |what: &str, s: &str| {
            if s.is_empty() {
                Err(format!("{what} is empty"))
            } else {
                Ok(())
            }
        };
        match mv {
            NextMove::Batch { purpose, steps } => {
                non_empty("batch purpose", purpose)?;
                if steps.is_empty() || steps.len() > self.limits.max_steps {
                    return Err(format!("batch has {} steps", steps.len()));
                }
                for step in steps {
                    non_empty("step purpose", &step.purpose)?;
                    self.check_action(&step.action)?;
                }
                Ok(())
            }
            NextMove::Done { summary, .. } => non_empty("done summary", summary),
            NextMove::Fail { reason } => non_empty("fail reason", reason),
            NextMove::Clarify { question } => non_empty("clarify question", question),
        }
    }

    fn check_action(&self, action: &PlannedAction) -> std::result::Result<(), String> {
        let kind = ActionKind::of(action)
            .ok_or_else(|| format!("action {action:?} is outside the grammar"))?;
        if !self.actions.contains(&kind) {
            return Err(format!("action {} is not allowed this turn", kind.tag()));
        }
        let target = |id: &str| {
            if self.is_valid_target(id) {
                Ok(())
            } else {
                Err(format!("target {id:?} is not on screen"))
            }
        };
        let key = |k: &str| {
            if KEY_NAMES.contains(&k) {
                Ok(())
            } else {
                Err(format!("key {k:?} is not a known key"))
            }
        };
        let coordinate = |v: i32| {
            if (0..=COORDINATE_MAX as i32).contains(&v) {
                Ok(())
            } else {
                Err(format!("coordinate {v} is outside 0..={COORDINATE_MAX}"))
            }
        };
        match action {
            PlannedAction::Click { target_id, .. } => target(target_id),
            PlannedAction::Type { target_id, .. } => target_id.as_deref().map_or(Ok(()), target),
            PlannedAction::SetValue { target_id, .. } => target(target_id),
            PlannedAction::Drag {
                from_target_id,
                to_target_id,
            } => target(from_target_id).and_then(|()| target(to_target_id)),
            PlannedAction::Key { key: k } => key(k),
            PlannedAction::KeyCombo { keys } => {
                if !(2..=4).contains(&keys.len()) {
                    return Err(format!("key_combo has {} keys", keys.len()));
                }
                keys.iter().try_for_each(|k| key(k))
            }
            PlannedAction::Scroll { dx, dy } => {
                let max = self.limits.max_scroll as i64;
                if (*dx as i64).abs() > max || (*dy as i64).abs() > max {
                    Err(format!("scroll ({dx},{dy}) exceeds {max}"))
                } else {
                    Ok(())
                }
            }
            PlannedAction::Wait { ms } => {
                if *ms > self.limits.max_wait_ms {
                    Err(format!("wait {ms} ms exceeds {}", self.limits.max_wait_ms))
                } else {
                    Ok(())
                }
            }
            PlannedAction::Select {
                from_x,
                from_y,
                to_x,
                to_y,
            } => [*from_x, *from_y, *to_x, *to_y]
                .into_iter()
                .try_for_each(coordinate),
            PlannedAction::Navigate { url, .. } => non_empty_str("navigate url", url),
            PlannedAction::CdpEval { expression } => {
                non_empty_str("cdp_eval expression", expression)
            }
            _ => Ok(()),
        }
    }

    /// Token bounds of this grammar's strings, by the JSON key they are the value of;
    /// the decoder enforces them.
    pub fn string_caps(&self) -> StringCaps {
        let l = &self.limits;
        let mut by_key = Vec::new();
        for key in ["purpose", "summary", "reason", "question"] {
            by_key.push((key.to_string(), l.sentence_tokens));
        }
        if l.thought_tokens > 0 {
            by_key.push(("thought".to_string(), l.thought_tokens));
        }
        for key in ["text", "value", "goal", "data", "url", "expression"] {
            by_key.push((key.to_string(), l.text_tokens));
        }
        StringCaps {
            by_key,
            default_tokens: l.data_string_tokens,
        }
    }

    /// The most tokens any move of this grammar can take: the decoder's budget for it
    /// (so a decode always ends with a complete move). Derived from the Lark grammar's
    /// shape: every token outside strings carries at least one byte, so fixed text and
    /// numbers count one token per byte; a string counts its token bound plus
    /// [`STRING_OVERSHOOT_TOKENS`]. An over-estimate, never an under-estimate.
    pub fn max_move_tokens(&self) -> usize {
        let l = &self.limits;
        let string = |cap: usize| cap + STRING_OVERSHOOT_TOKENS;
        let sentence = string(l.sentence_tokens);
        let dstr = string(l.data_string_tokens);
        let thought = if l.thought_tokens > 0 {
            r#"{"thought":"#.len() + string(l.thought_tokens) + 1
        } else {
            0
        };
        // `"null"`, a string, or an object / array of `data_entries` scalars.
        let scalar = dstr.max(NUMBER_MAX_BYTES).max("false".len());
        let entries = l.data_entries.max(1);
        let data = (2 + entries * (dstr + 1 + scalar) + entries)
            .max(2 + entries * (scalar + 1))
            .max(dstr);
        let done = r#"{"kind":"done","summary":"#.len()
            + sentence
            + r#","extracted_data":"#.len()
            + data
            + 1;
        let fail = r#"{"kind":"fail","reason":"#.len() + sentence + 1;
        let clarify = r#"{"kind":"clarify","question":"#.len() + sentence + 1;
        let mut longest = done.max(fail).max(clarify);
        if let Some(action) = self
            .actions
            .iter()
            .map(|a| self.action_max_tokens(*a))
            .max()
        {
            let step = r#"{"purpose":"#.len()
                + sentence
                + r#","kind":"llm_assisted""#.len()
                + r#","action":"#.len()
                + action
                + 1;
            let batch = r#"{"kind":"batch","purpose":"#.len()
                + sentence
                + r#","steps":["#.len()
                + l.max_steps * (step + 1)
                + 2;
            longest = longest.max(batch);
        }
        thought + longest
    }

    fn action_max_tokens(&self, kind: ActionKind) -> usize {
        let l = &self.limits;
        let text = l.text_tokens + STRING_OVERSHOOT_TOKENS;
        let target = self
            .target_ids
            .iter()
            .map(|id| json_string(id).len())
            .max()
            .unwrap_or(0)
            .max(r#""xy:1000,1000""#.len());
        let key = KEY_NAMES.iter().map(|k| k.len() + 2).max().unwrap_or(0);
        let int = |max: u32| max.to_string().len() + 1;
        // `{"type":"…",` and the closing brace.
        let head = r#"{"type":"","#.len() + kind.tag().len() + 1;
        let expect = EXPECT_AFTER_OPEN.len() + int(MAX_EXPECT_MS) + 1;
        head + match kind {
            ActionKind::Click => r#""target_id":"#.len() + target + expect,
            ActionKind::Type => r#""target_id":"#.len() + target + r#","text":"#.len() + text,
            ActionKind::Key => r#""key":"#.len() + key,
            ActionKind::KeyCombo => r#""keys":["#.len() + 4 * (key + 1) + 1,
            ActionKind::SetValue => {
                r#""target_id":"#.len() + target + r#","value":"#.len() + text + expect
            }
            ActionKind::Scroll => r#""dx":,"dy":"#.len() + 2 * int(l.max_scroll),
            ActionKind::Drag => r#""from_target_id":,"to_target_id":"#.len() + 2 * target,
            ActionKind::Wait => r#""ms":"#.len() + int(l.max_wait_ms),
            ActionKind::Select => {
                r#""from_x":,"from_y":,"to_x":,"to_y":"#.len() + 4 * int(COORDINATE_MAX)
            }
            ActionKind::Extract => r#""goal":,"data":"#.len() + 2 * text,
            ActionKind::Navigate => r#""url":"#.len() + text,
            ActionKind::CdpEval => r#""expression":"#.len() + text,
        }
    }

    /// The grammar as a JSON schema (llguidance dialect: `x-guidance` makes the JSON
    /// compact). Strings are bounded by `maxLength`.
    pub fn json_schema(&self) -> Value {
        let l = &self.limits;
        let chars = |tokens: usize| tokens * l.chars_per_token;
        let string =
            |tokens: usize| json!({"type": "string", "minLength": 1, "maxLength": chars(tokens)});
        let sentence = string(l.sentence_tokens);
        let mut variants = Vec::new();
        if !self.actions.is_empty() {
            let actions: Vec<Value> = self
                .actions
                .iter()
                .map(|a| self.action_schema(*a))
                .collect();
            let step_kind = json!({"enum": [step_kind_tag(StepKind::Deterministic), step_kind_tag(StepKind::LlmAssisted)]});
            variants.push(object(vec![
                ("kind", json!({"const": "batch"})),
                ("purpose", sentence.clone()),
                (
                    "steps",
                    json!({
                        "type": "array", "minItems": 1, "maxItems": l.max_steps,
                        "items": object(
                            vec![("purpose", sentence.clone()), ("kind", step_kind), ("action", json!({"anyOf": actions}))],
                        ),
                    }),
                ),
            ]));
        }
        let data_string = string(l.data_string_tokens);
        let scalar = json!({"anyOf": [data_string, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]});
        let data = json!({"anyOf": [
            {"type": "null"},
            data_string,
            {"type": "object", "maxProperties": l.data_entries, "additionalProperties": scalar},
            {"type": "array", "maxItems": l.data_entries, "items": scalar},
        ]});
        variants.push(object(vec![
            ("kind", json!({"const": "done"})),
            ("summary", sentence.clone()),
            ("extracted_data", data),
        ]));
        variants.push(object(vec![
            ("kind", json!({"const": "fail"})),
            ("reason", sentence.clone()),
        ]));
        variants.push(object(vec![
            ("kind", json!({"const": "clarify"})),
            ("question", sentence),
        ]));
        if l.thought_tokens > 0 {
            let thought = string(l.thought_tokens);
            for variant in &mut variants {
                with_thought_first(variant, &thought);
            }
        }
        json!({
            "x-guidance": {"whitespace_flexible": false, "item_separator": ",", "key_separator": ":"},
            "anyOf": variants,
        })
    }

    fn target_schema(&self) -> Value {
        let mut options = Vec::new();
        if !self.target_ids.is_empty() {
            options.push(json!({"enum": self.target_ids}));
        }
        if self.coordinate_targets {
            options.push(json!({"type": "string", "pattern": format!("^{}$", coordinate_regex())}));
        }
        json!({"anyOf": options})
    }

    fn action_schema(&self, kind: ActionKind) -> Value {
        let l = &self.limits;
        let text = json!({"type": "string", "minLength": 1, "maxLength": l.text_tokens * l.chars_per_token});
        let key = json!({"enum": KEY_NAMES});
        let coordinate = json!({"type": "integer", "minimum": 0, "maximum": COORDINATE_MAX});
        let scroll =
            json!({"type": "integer", "minimum": -(l.max_scroll as i64), "maximum": l.max_scroll});
        let tag = ("type", json!({"const": kind.tag()}));
        let target = Self::target_schema;
        let has_targets = !self.target_ids.is_empty() || self.coordinate_targets;
        match kind {
            ActionKind::Click => object_with_optional(
                vec![
                    tag,
                    ("target_id", target(self)),
                    ("expect_after", expect_schema()),
                ],
                &["expect_after"],
            ),
            ActionKind::Type if has_targets => object_with_optional(
                vec![tag, ("target_id", target(self)), ("text", text)],
                &["target_id"],
            ),
            ActionKind::Type => object(vec![tag, ("text", text)]),
            ActionKind::Key => object(vec![tag, ("key", key)]),
            ActionKind::KeyCombo => object(vec![
                tag,
                (
                    "keys",
                    json!({"type": "array", "minItems": 2, "maxItems": 4, "items": key}),
                ),
            ]),
            ActionKind::SetValue => object_with_optional(
                vec![
                    tag,
                    ("target_id", target(self)),
                    ("value", text),
                    ("expect_after", expect_schema()),
                ],
                &["expect_after"],
            ),
            ActionKind::Scroll => object(vec![tag, ("dx", scroll.clone()), ("dy", scroll)]),
            ActionKind::Drag => object(vec![
                tag,
                ("from_target_id", target(self)),
                ("to_target_id", target(self)),
            ]),
            ActionKind::Wait => object(vec![
                tag,
                (
                    "ms",
                    json!({"type": "integer", "minimum": 0, "maximum": l.max_wait_ms}),
                ),
            ]),
            ActionKind::Select => object(vec![
                tag,
                ("from_x", coordinate.clone()),
                ("from_y", coordinate.clone()),
                ("to_x", coordinate.clone()),
                ("to_y", coordinate),
            ]),
            ActionKind::Extract => object(vec![tag, ("goal", text.clone()), ("data", text)]),
            ActionKind::Navigate => object(vec![tag, ("url", text)]),
            ActionKind::CdpEval => object(vec![tag, ("expression", text)]),
        }
    }

    /// The grammar in llguidance's Lark dialect, strings bounded by tokens.
    pub fn lark(&self) -> String {
        let l = &self.limits;
        let mut g = String::new();
        let mut kinds = Vec::new();
        if !self.actions.is_empty() {
            kinds.push("batch");
        }
        kinds.extend(["done", "fail", "clarify"]);
        // With a thought, the move object opens with it and each kind's rule starts
        // after the `{`: `{"thought":"…","kind":…}`.
        let open = if l.thought_tokens > 0 {
            g += &format!(
                "start: {} sentence \",\" ({})\n",
                lit(r#"{"thought":"#),
                kinds.join(" | ")
            );
            ""
        } else {
            g += &format!("start: {}\n", kinds.join(" | "));
            "{"
        };
        if !self.actions.is_empty() {
            g += &format!(
                "batch: {} sentence {} step {} \"]}}\"\n",
                lit(&format!(r#"{open}"kind":"batch","purpose":"#)),
                lit(r#","steps":["#),
                up_to(&format!("{} step", lit(",")), l.max_steps - 1),
            );
            g += &format!(
                "step: {} sentence ({} | {}) {} action \"}}\"\n",
                lit(r#"{"purpose":"#),
                lit(&format!(
                    r#","kind":"{}""#,
                    step_kind_tag(StepKind::Deterministic)
                )),
                lit(&format!(
                    r#","kind":"{}""#,
                    step_kind_tag(StepKind::LlmAssisted)
                )),
                lit(r#","action":"#),
            );
            let names: Vec<String> = self
                .actions
                .iter()
                .map(|a| format!("act_{}", a.tag()))
                .collect();
            g += &format!("action: {}\n", names.join(" | "));
            for a in &self.actions {
                g += &self.action_lark(*a);
            }
            g += &self.targets_lark();
        }
        g += &format!(
            "done: {} sentence {} data \"}}\"\n",
            lit(&format!(r#"{open}"kind":"done","summary":"#)),
            lit(r#","extracted_data":"#),
        );
        g += &format!(
            "fail: {} sentence \"}}\"\n",
            lit(&format!(r#"{open}"kind":"fail","reason":"#))
        );
        g += &format!(
            "clarify: {} sentence \"}}\"\n",
            lit(&format!(r#"{open}"kind":"clarify","question":"#))
        );

        // Strings: one unbounded lexeme, so llguidance answers masks inside them from
        // its precomputed token slices. Their token bounds are enforced by the decoder
        // (see `string_caps`): llguidance's own `max_tokens` truncates a lexeme
        // anywhere, even inside a UTF-8 character or an escape.
        g +=
            &format!("sentence: STRING\ntext: STRING\ndstr: STRING\nSTRING: /\"{STRING_BODY}\"/\n");
        let more = l.data_entries.saturating_sub(1);
        g += &format!(
            "data: \"null\" | dstr | \"{{\" (entry {})? \"}}\" | \"[\" (scalar {})? \"]\"\n",
            up_to("\",\" entry", more),
            up_to("\",\" scalar", more),
        );
        g += "entry: dstr \":\" scalar\n";
        g += &format!(
            "scalar: dstr | NUMBER | \"true\" | \"false\" | \"null\"\nNUMBER: /{NUMBER}/\n"
        );
        g
    }

    fn action_lark(&self, kind: ActionKind) -> String {
        let l = &self.limits;
        let head = |fields: &str| format!(r#"{{"type":"{}",{fields}"#, kind.tag());
        let rule = format!("act_{}", kind.tag());
        let has_targets = !self.target_ids.is_empty() || self.coordinate_targets;
        let body = match kind {
            ActionKind::Click => format!(
                "{} target expect_after? \"}}\"",
                lit(&head(r#""target_id":"#))
            ),
            ActionKind::Type if has_targets => format!(
                "({} | {} target {}) text \"}}\"",
                lit(&head(r#""text":"#)),
                lit(&head(r#""target_id":"#)),
                lit(r#","text":"#),
            ),
            ActionKind::Type => format!("{} text \"}}\"", lit(&head(r#""text":"#))),
            ActionKind::Key => format!("{} key \"}}\"", lit(&head(r#""key":"#))),
            ActionKind::KeyCombo => format!(
                "{} key \",\" key (\",\" key){{0,2}} \"]}}\"",
                lit(&head(r#""keys":["#))
            ),
            ActionKind::SetValue => format!(
                "{} target {} text expect_after? \"}}\"",
                lit(&head(r#""target_id":"#)),
                lit(r#","value":"#)
            ),
            ActionKind::Scroll => format!(
                "{} SCROLL {} SCROLL \"}}\"\nSCROLL: /{}/",
                lit(&head(r#""dx":"#)),
                lit(r#","dy":"#),
                int_regex(l.max_scroll, true)
            ),
            ActionKind::Drag => format!(
                "{} target {} target \"}}\"",
                lit(&head(r#""from_target_id":"#)),
                lit(r#","to_target_id":"#)
            ),
            ActionKind::Wait => format!(
                "{} WAIT_MS \"}}\"\nWAIT_MS: /{}/",
                lit(&head(r#""ms":"#)),
                int_regex(l.max_wait_ms, false)
            ),
            ActionKind::Select => format!(
                "{} COORD {} COORD {} COORD {} COORD \"}}\"\nCOORD: /{}/",
                lit(&head(r#""from_x":"#)),
                lit(r#","from_y":"#),
                lit(r#","to_x":"#),
                lit(r#","to_y":"#),
                int_regex(COORDINATE_MAX, false)
            ),
            ActionKind::Extract => format!(
                "{} text {} text \"}}\"",
                lit(&head(r#""goal":"#)),
                lit(r#","data":"#)
            ),
            ActionKind::Navigate => format!("{} text \"}}\"", lit(&head(r#""url":"#))),
            ActionKind::CdpEval => format!("{} text \"}}\"", lit(&head(r#""expression":"#))),
        };
        format!("{rule}: {body}\n")
    }

    /// Element ids and key names as one terminal each (a regex alternation of their
    /// JSON strings) rather than one literal per name: the same language, but one
    /// lexeme instead of hundreds, which makes compiling the grammar cheaper.
    fn targets_lark(&self) -> String {
        let mut g = String::new();
        let mut alternatives = Vec::new();
        if !self.target_ids.is_empty() {
            let ids: Vec<String> = self
                .target_ids
                .iter()
                .map(|id| regex_literal(&json_string(id)))
                .collect();
            alternatives.push("ELEMENT_ID");
            g += &format!("ELEMENT_ID: /{}/\n", ids.join("|"));
        }
        if self.coordinate_targets {
            alternatives.push("XY_TARGET");
            g += &format!("XY_TARGET: /\"{}\"/\n", coordinate_regex());
        }
        if !alternatives.is_empty() {
            g += &format!("target: {}\n", alternatives.join(" | "));
        }
        // `expect_after`: the one expectation a screen-only runtime can check (the
        // screen changes within the timeout); selector expectations need a page.
        g += &format!(
            "expect_after: {} EXPECT_MS \"}}\"\nEXPECT_MS: /{}/\n",
            lit(EXPECT_AFTER_OPEN),
            int_regex(MAX_EXPECT_MS, false)
        );
        let keys: Vec<String> = KEY_NAMES
            .iter()
            .map(|k| regex_literal(&json_string(k)))
            .collect();
        g += &format!("key: KEY\nKEY: /{}/\n", keys.join("|"));
        g
    }
}

fn non_empty_str(what: &str, s: &str) -> std::result::Result<(), String> {
    if s.is_empty() {
        Err(format!("{what} is empty"))
    } else {
        Ok(())
    }
}

/// A JSON string body: printable characters or the simple escapes. `\u` escapes are
/// left out: they would let a model write a lone surrogate that serde rejects.
pub(crate) const STRING_BODY: &str = r#"(?:[^"\\\x00-\x1F\x7F]|\\["\\\/bfnrt])+"#;

/// A JSON number of bounded size (no exponent).
/// `(item){0,max}` in Lark, or nothing when `max` is 0: llguidance rejects a `{0,0}`
/// repetition ("End number in range cannot be 0"), which a one-step or one-entry limit made.
fn up_to(item: &str, max: usize) -> String {
    if max == 0 {
        String::new()
    } else {
        format!("({item}){{0,{max}}}")
    }
}

const NUMBER: &str = r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,6})?";

/// Longest text [`NUMBER`] matches: sign, 15 digits, point, 6 digits.
const NUMBER_MAX_BYTES: usize = 1 + 15 + 1 + 6;

/// The `xy:X,Y` pattern, X and Y integers 0..=1000 without leading zeros.
pub fn coordinate_regex() -> String {
    let c = int_regex(COORDINATE_MAX, false);
    format!("xy:{c},{c}")
}

/// Parse an `xy:X,Y` target into its coordinates (0..=1000), `None` if it is not one.
pub fn parse_coordinate_target(id: &str) -> Option<(u32, u32)> {
    let rest = id.strip_prefix("xy:")?;
    let (x, y) = rest.split_once(',')?;
    let parse = |s: &str| -> Option<u32> {
        let canonical = !s.is_empty() && (s == "0" || !s.starts_with('0'));
        let all_digits = s.bytes().all(|b| b.is_ascii_digit());
        if !canonical || !all_digits || s.len() > 4 {
            return None;
        }
        s.parse().ok().filter(|v| *v <= COORDINATE_MAX)
    };
    Some((parse(x)?, parse(y)?))
}

/// A regex for the decimal integers 0..=`max` (no leading zeros), with an optional
/// minus sign for nonzero values when `signed`.
fn int_regex(max: u32, signed: bool) -> String {
    if max == 0 {
        return "0".into();
    }
    let digits: Vec<u8> = max.to_string().bytes().map(|b| b - b'0').collect();
    let n = digits.len();
    let mut alternatives = Vec::new();
    // Fewer digits than max: any such number.
    if n >= 2 {
        alternatives.push(format!("[1-9][0-9]{{0,{}}}", n - 2));
    }
    // Exactly n digits, no larger than max: share a prefix of max, then a smaller digit.
    for i in 0..n {
        let d = digits[i];
        let low = if i == 0 { 1 } else { 0 };
        if d > low {
            let prefix: String = digits[..i].iter().map(|d| char::from(b'0' + d)).collect();
            alternatives.push(format!("{prefix}[{low}-{}][0-9]{{{}}}", d - 1, n - i - 1));
        }
    }
    alternatives.push(max.to_string());
    let nonzero = format!("(?:{})", alternatives.join("|"));
    if signed {
        format!("(?:0|-?{nonzero})")
    } else {
        format!("(?:0|{nonzero})")
    }
}

/// `s` as a JSON string, quotes included.
fn json_string(s: &str) -> String {
    // Serializing a &str cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

/// A regex matching exactly `s`: ASCII letters and digits as they are, every other
/// character as a `\x{…}` escape (ids are user data: quotes, slashes, backslashes,
/// control characters and any Unicode are all literal here, in Lark's `/…/` too).
fn regex_literal(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_string()
            } else {
                format!("\\x{{{:X}}}", c as u32)
            }
        })
        .collect()
}

/// `s` as a Lark string literal. Lark literals use JSON string syntax, except that
/// a raw DEL (which serde_json leaves unescaped) is not allowed in them.
fn lit(s: &str) -> String {
    json_string(s).replace('\u{7f}', "\\u007f")
}

fn step_kind_tag(kind: StepKind) -> &'static str {
    match kind {
        StepKind::Deterministic => "deterministic",
        StepKind::LlmAssisted => "llm_assisted",
    }
}

/// The `expect_after` the grammar allows: the screen changes within a timeout.
fn expect_schema() -> Value {
    object(vec![
        ("kind", json!({"const": "dom_changed"})),
        (
            "timeout_ms",
            json!({"type": "integer", "minimum": 0, "maximum": MAX_EXPECT_MS}),
        ),
    ])
}

/// Put a required `thought` property first in a move variant's object schema.
fn with_thought_first(variant: &mut Value, thought: &Value) {
    let Some(object) = variant.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        let mut reordered = Map::new();
        reordered.insert("thought".to_string(), thought.clone());
        reordered.extend(std::mem::take(properties));
        *properties = reordered;
    }
    if let Some(Value::Array(required)) = object.get_mut("required") {
        required.insert(0, json!("thought"));
    }
}

/// A closed object schema with all `fields` required, in order.
fn object(fields: Vec<(&str, Value)>) -> Value {
    object_with_optional(fields, &[])
}

fn object_with_optional(fields: Vec<(&str, Value)>, optional: &[&str]) -> Value {
    let required: Vec<&str> = fields
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !optional.contains(k))
        .collect();
    let mut properties = Map::new();
    for (k, v) in fields {
        properties.insert(k.to_string(), v);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_regex_covers_exactly_the_range() {
        let rx = |max, signed| regex_lite_match(&int_regex(max, signed));
        for max in [0u32, 7, 10, 99, 100, 1000, 5000, 10_000, 12_345] {
            let m = rx(max, false);
            for v in 0..=(max + 50) {
                assert_eq!(m(&v.to_string()), v <= max, "max {max} value {v}");
            }
            assert!(!m("01"));
            let s = rx(max, true);
            assert!(s(&format!("-{max}")) || max == 0);
            assert!(!s("-0"));
        }
    }

    /// A tiny matcher for the regexes above, built on llguidance's own regex engine.
    fn regex_lite_match(rx: &str) -> impl Fn(&str) -> bool {
        let mut builder = llguidance::derivre::RegexBuilder::new();
        let expr = builder
            .mk_regex(&format!("^{rx}$"))
            .unwrap_or_else(|e| panic!("{rx}: {e}"));
        let regex = std::cell::RefCell::new(builder.to_regex(expr));
        move |s: &str| regex.borrow_mut().is_match(s)
    }

    #[test]
    fn coordinate_targets_parse_only_canonical_points_in_range() {
        assert_eq!(parse_coordinate_target("xy:0,1000"), Some((0, 1000)));
        assert_eq!(parse_coordinate_target("xy:500,20"), Some((500, 20)));
        for bad in [
            "xy:1001,0",
            "xy:01,2",
            "xy:-1,2",
            "xy:1,",
            "xy:1.5,2",
            "xy:1,2,3",
            "1,2",
        ] {
            assert_eq!(parse_coordinate_target(bad), None, "{bad}");
        }
    }
}
