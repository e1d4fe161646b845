//! Building a [`PlanningView`]. The contract type has seventeen fields and a desktop view
//! fills a handful: [`view_of`] gives one with everything else empty, and callers set the
//! rest with struct-update syntax (`PlanningView { capabilities, ..view_of(…) }`).

use cel_contracts::{OmittedCounts, PlanningBudget, PlanningElement, PlanningScreen, PlanningView};

/// A view of `screen` showing `elements`, for `goal`; every other part empty, default budget.
pub fn view_of(goal: &str, screen: PlanningScreen, elements: Vec<PlanningElement>) -> PlanningView {
    PlanningView {
        goal: goal.to_string(),
        budget: PlanningBudget::default(),
        screen,
        elements,
        adapter_facts: vec![],
        adapter_actions: vec![],
        capabilities: vec![],
        run_progress: Default::default(),
        memories: vec![],
        knowledge: vec![],
        recent_events: vec![],
        blockers: vec![],
        anomalies: vec![],
        evidence: vec![],
        selection_rationale: None,
        omitted_counts: OmittedCounts::default(),
        adapter_actions_prompt: None,
    }
}

/// The view of a desktop nothing is known about but its screenshot: no elements, no
/// capabilities listed (so a desktop with native input is assumed).
pub fn empty_view(goal: &str) -> PlanningView {
    view_of(goal, PlanningScreen::default(), vec![])
}
