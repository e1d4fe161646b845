//! The elements a turn shows and its grammar accepts: one selection, shared by the prompt and
//! the grammar (ARCHITECTURE.md, decision 4).

use cel_contracts::{PlanningElement, PlanningView};

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
