//! The view of one observation: what the runner shows the planner of a capture.

use cel_contracts::{CapabilityRef, PlanningElement, PlanningScreen, PlanningView, RunProgress};

use super::capture::Capture;
use super::coords::ScreenGeometry;
use super::elements::ElementTable;
use crate::moves::{bounds_fact, RelativeBox, CAPABILITY_NATIVE_INPUT, CAPABILITY_VISION};

/// The view of a desktop capture as the runner gives it to the planner: the focused window as
/// the screen, the capabilities `native_input` (with the screenshot's size, the space of `xy:`
/// targets) and `vision`, `elements` (from the accessibility tree, possibly none) and the run's
/// progress. Where `table` holds an element's bounds, the view carries them (0–1000, as `xy:`
/// targets) in one adapter fact ([`bounds_fact`]). `sightline view` prints exactly this.
pub fn desktop_view(
    goal: &str,
    capture: &Capture,
    elements: Vec<PlanningElement>,
    table: Option<&ElementTable>,
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
        adapter_facts: table
            .map(|t| vec![bounds_fact(&relative_bounds(t, &capture.geometry))])
            .unwrap_or_default(),
        ..crate::view::view_of(goal, screen, elements)
    }
}

/// Each element's visible part in the 0–1000 space of `xy:` targets.
fn relative_bounds(table: &ElementTable, geometry: &ScreenGeometry) -> Vec<(String, RelativeBox)> {
    table
        .elements
        .iter()
        .map(|e| {
            let v = e.visible;
            let corner =
                |x: i32, y: i32| geometry.relative_of_pixel(x.max(0) as u32, y.max(0) as u32);
            let top_left = corner(v.x, v.y);
            let bottom_right = corner(v.x + v.width, v.y + v.height);
            (
                e.id.clone(),
                [top_left.x, top_left.y, bottom_right.x, bottom_right.y],
            )
        })
        .collect()
}
