//! What the caller asks of a turn's grammar (actions, coordinate targets, bounds), what the
//! view says the runtime can do, and the one element selection the prompt and the grammar
//! share.

use cel_contracts::{PlanningElement, PlanningView};

use super::action::ActionKind;

/// Capability id (in `view.capabilities`) that switches native mouse and keyboard on.
pub const CAPABILITY_NATIVE_INPUT: &str = "native_input";

/// Capability ids starting with this prefix (`cdp_bound`, …) mean a Chrome DevTools
/// Protocol client is bound: `navigate` and `cdp_eval` become executable.
pub const CAPABILITY_CDP_PREFIX: &str = "cdp";

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
    /// [`parse_move`](crate::decode::parse_move)). 0, the default, leaves it out.
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
