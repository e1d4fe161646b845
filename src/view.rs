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

/// The capability id announcing that a screenshot accompanies the view.
pub const CAPABILITY_VISION: &str = "vision";

/// The view of a desktop capture as the runner gives it to the planner: the focused window as
/// the screen, the capabilities `native_input` (with the screenshot's size, the space of `xy:`
/// targets) and `vision`, `elements` (from the accessibility tree, possibly none) and the run's
/// progress. `sightline view` prints exactly this.
#[cfg(feature = "desktop")]
pub fn desktop_view(
    goal: &str,
    capture: &crate::runner::Capture,
    elements: Vec<PlanningElement>,
    run_progress: cel_contracts::RunProgress,
) -> PlanningView {
    use crate::decode::CAPABILITY_NATIVE_INPUT;
    use cel_contracts::CapabilityRef;
    let screen = PlanningScreen {
        active_app: capture.active_app.clone(),
        window: capture.window_title.clone(),
        summary: None,
        url: None,
    };
    let targets = if elements.is_empty() {
        "targets as xy:X,Y"
    } else {
        "targets as element ids or xy:X,Y"
    };
    PlanningView {
        capabilities: vec![
            CapabilityRef {
                id: CAPABILITY_NATIVE_INPUT.into(),
                detail: Some(format!(
                    "mouse and keyboard; {targets} in 0-1000 over the {}x{} screenshot",
                    capture.image.width(),
                    capture.image.height()
                )),
            },
            CapabilityRef {
                id: CAPABILITY_VISION.into(),
                detail: None,
            },
        ],
        run_progress,
        ..view_of(goal, screen, elements)
    }
}

/// The view of a desktop nothing is known about but its screenshot: no elements, no
/// capabilities listed (so a desktop with native input is assumed).
pub fn empty_view(goal: &str) -> PlanningView {
    view_of(goal, PlanningScreen::default(), vec![])
}
