//! What a capture keeps when the screen holds more elements than the budget (a browser page, a
//! long form): the rule, in the order elements are given up.
//!
//! Every element is first clipped to what is visible (the monitor, and for the sources that
//! know it, the scrolled viewport of its window), so nothing scrolled out of view competes.
//! Then elements are ranked:
//!
//! 1. **Controls** (rank 0): the focused element, text fields and anything `set_value` can set,
//!    and whatever a click acts on (buttons, links, check boxes, selectable rows, menu items,
//!    tabs…).
//! 2. **Landmarks** (rank 1): headings, page landmarks and the summaries of long lists (how
//!    many rows are out of view).
//! 3. **Text** (rank 2): labels, paragraphs, table cells and rows that no click acts on.
//!
//! The budget is filled by rank, and within a rank in reading order (top to bottom, then left
//! to right), so what is dropped first is the text lowest on the screen, and a control is
//! dropped only when the controls alone exceed the budget (then the lowest ones).

use super::{PixelRect, RawElement};

/// Roles that are read rather than acted on, even where a toolkit gives them an action (a
/// browser's label "clicks" its field).
const TEXT_ROLES: &[&str] = &["label", "paragraph", "cell", "header", "static"];
/// Roles that say where things are on a page or in a long list.
const LANDMARK_ROLES: &[&str] = &["heading", "landmark", "list", "table"];

/// The rank of an element: 0 controls, 1 landmarks, 2 text (see the module docs).
pub fn rank(e: &RawElement) -> u8 {
    let role = e.role.as_str();
    if e.state.focused || e.editable || e.settable {
        0
    } else if LANDMARK_ROLES.contains(&role) {
        1
    } else if e.clickable && !TEXT_ROLES.contains(&role) {
        0
    } else {
        2
    }
}

/// Keeps at most `max` of `elements` (each with its visible part) by [`rank`], then reading
/// order. The result is in no particular order.
pub fn keep_within_budget(
    mut elements: Vec<(RawElement, PixelRect)>,
    max: usize,
) -> Vec<(RawElement, PixelRect)> {
    if elements.len() <= max {
        return elements;
    }
    elements.sort_by(|(a, av), (b, bv)| {
        (rank(a), av.y, av.x, &a.role, &a.name).cmp(&(rank(b), bv.y, bv.x, &b.role, &b.name))
    });
    elements.truncate(max);
    elements
}

#[cfg(test)]
mod tests {
    use super::super::{ClickVia, ElementState, NameSource};
    use super::*;

    fn el(role: &str, y: i32, clickable: bool) -> (RawElement, PixelRect) {
        let bounds = PixelRect {
            x: 0,
            y,
            width: 50,
            height: 10,
        };
        let raw = RawElement {
            role: role.into(),
            name: format!("{role} {y}"),
            value: None,
            state: ElementState::default(),
            clickable,
            editable: false,
            actions: vec![],
            bounds,
            handle: format!("{role}{y}"),
            click: ClickVia::Pointer,
            settable: false,
            options: vec![],
            name_from: NameSource::Own,
        };
        (raw, bounds)
    }

    #[test]
    fn text_lowest_on_screen_goes_first_and_controls_last() {
        let elements = vec![
            el("label", 10, false),
            el("paragraph", 20, false),
            el("heading", 300, false),
            el("button", 400, true),
            el("link", 500, true),
            el("label", 5, true),
        ];
        let kept = keep_within_budget(elements.clone(), 4);
        let mut names: Vec<String> = kept.iter().map(|(e, _)| e.name.clone()).collect();
        names.sort();
        assert_eq!(names, ["button 400", "heading 300", "label 5", "link 500"]);
        // With room for only one control, the higher one stays.
        let kept = keep_within_budget(elements, 1);
        assert_eq!(kept[0].0.name, "button 400");
    }

    #[test]
    fn focused_and_settable_elements_rank_as_controls() {
        let (mut label, _) = el("label", 0, false);
        assert_eq!(rank(&label), 2);
        label.state.focused = true;
        assert_eq!(rank(&label), 0);
        let (mut slider, _) = el("slider", 0, false);
        slider.settable = true;
        assert_eq!(rank(&slider), 0);
        assert_eq!(rank(&el("list", 0, false).0), 1);
    }
}
