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

/// The adapter of the view fact that carries element bounds (see [`bounds_fact`]).
pub const BOUNDS_FACT_ADAPTER: &str = "sightline";
/// The kind of that fact.
pub const BOUNDS_FACT_KIND: &str = "element_bounds";

/// An element's box on the screenshot in the coordinates of `xy:` targets (0–1000 each way):
/// left, top, right, bottom.
pub type RelativeBox = [u32; 4];

/// The fact that tells the planner where each element is: the contract's `PlanningElement`
/// has no bounds, so the runner adds them as one adapter fact, `{id: [left, top, right,
/// bottom]}` in 0–1000, which the prompt renders beside each element (two elements named
/// alike are then told apart by position, and ids relate to the image).
pub fn bounds_fact(bounds: &[(String, RelativeBox)]) -> cel_contracts::AdapterFactRef {
    let payload: serde_json::Map<String, serde_json::Value> = bounds
        .iter()
        .map(|(id, b)| (id.clone(), serde_json::json!(b)))
        .collect();
    cel_contracts::AdapterFactRef {
        id: None,
        adapter: BOUNDS_FACT_ADAPTER.into(),
        kind: BOUNDS_FACT_KIND.into(),
        payload: serde_json::Value::Object(payload),
    }
}

/// Whether `fact` is the bounds fact (which the prompt shows beside the elements, not among
/// the facts).
pub fn is_bounds_fact(fact: &cel_contracts::AdapterFactRef) -> bool {
    fact.adapter == BOUNDS_FACT_ADAPTER && fact.kind == BOUNDS_FACT_KIND
}

/// The bounds of element `id` from the view's bounds fact, when the view has one and it holds
/// a well-formed box for `id` (the fact is input: anything else is ignored).
pub fn element_bounds(view: &PlanningView, id: &str) -> Option<RelativeBox> {
    let fact = view.adapter_facts.iter().find(|f| is_bounds_fact(f))?;
    let values = fact.payload.get(id)?.as_array()?;
    let mut out = [0u32; 4];
    if values.len() != 4 {
        return None;
    }
    for (slot, v) in out.iter_mut().zip(values) {
        *slot = u32::try_from(v.as_u64()?)
            .ok()
            .filter(|c| *c <= super::COORDINATE_MAX)?;
    }
    Some(out)
}
