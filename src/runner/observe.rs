//! The view of one observation: what the runner shows the planner of a capture.

use cel_contracts::{CapabilityRef, PlanningElement, PlanningScreen, PlanningView, RunProgress};

use super::capture::Capture;
use crate::moves::{CAPABILITY_NATIVE_INPUT, CAPABILITY_VISION};

/// The view of a desktop capture as the runner gives it to the planner: the focused window as
/// the screen, the capabilities `native_input` (with the screenshot's size, the space of `xy:`
/// targets) and `vision`, `elements` (from the accessibility tree, possibly none) and the run's
/// progress. `sightline view` prints exactly this.
pub fn desktop_view(
    goal: &str,
    capture: &Capture,
    elements: Vec<PlanningElement>,
    run_progress: RunProgress,
) -> PlanningView {
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
        ..crate::view::view_of(goal, screen, elements)
    }
}
