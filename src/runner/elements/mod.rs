//! Elements from the accessibility tree: what a user can act on or read on the captured monitor,
//! with short stable ids, roles, names, states and bounds in screenshot pixels. On the desktop
//! they are the view's elements, so the planner's grammar allows exactly their ids plus `xy:`
//! points; without an accessibility bus the view has none and targets are points only.
//!
//! An [`ElementSource`] reads the platform's accessibility tree into an [`ElementTable`]: the
//! [`PlanningElement`]s the planner sees (ids, roles, names, values, states) plus, per id, what
//! the contract's element has no field for: the bounds in screenshot pixels, the visible part,
//! the accessible actions, and a handle to find the element again. The runner keeps the table of
//! the capture the planner saw; the [`ElementResolver`](super::ElementResolver) resolves ids
//! against it, re-checking the element on execute, and the destructive-step gate judges the
//! element's real name.
//!
//! # Ids
//!
//! `{role}_{slug of the name}` (`button_beta`, `text_name`, `checkbox_notify`), numbered
//! `_2`, `_3`… in reading order (top to bottom, then left to right) when two elements share
//! role and name. An unchanged screen gives the same ids on every capture, so an id from
//! `sightline view` or a trace resolves in a later run. Ids never contain `:`, so they cannot be
//! mistaken for an `xy:` point.
//!
//! # Sources
//!
//! - Linux: [`AtspiSource`] on AT-SPI2 (feature `accessibility`, part of `desktop`).
//! - Windows (not built): UI Automation through the `windows` crate: `IUIAutomation::
//!   GetFocusedElement` → its top-level window, a `TreeWalker` over the control view with a
//!   `CacheRequest` for `ControlType`, `Name`, `BoundingRectangle`, `IsOffscreen`,
//!   `IsEnabled`, `HasKeyboardFocus`, `ToggleState` and the `Invoke`/`Value` patterns (one
//!   cross-process call per subtree instead of one per property). Bounds are physical screen
//!   pixels, as `SendInput` wants them; `Invoke()` is the accessible action, `SetFocus()` the
//!   focus, `ElementFromPoint` the hit test. COM must be initialized on the runner's thread.
//! - macOS (not built): the AX API through `objc2-application-services`:
//!   `AXUIElementCreateApplication(frontmost pid)`, `kAXChildrenAttribute` walks,
//!   `kAXRoleAttribute`/`kAXTitleAttribute`/`kAXValueAttribute`/`kAXPositionAttribute`/
//!   `kAXSizeAttribute` (batched with `AXUIElementCopyMultipleAttributeValues`),
//!   `AXUIElementPerformAction(kAXPressAction)`, `AXUIElementCopyElementAtPosition`. Positions
//!   are in points, which is the input unit there (see [`ScreenGeometry`]); the process needs
//!   the Accessibility permission, whose absence must read like "no accessibility bus" here.
//!
//! Each maps to this trait unchanged: a capture into a table, a refresh by handle, an action by
//! name, a focus grab, a selection, a value set (`Value.SetValue`, `SelectionItem.Select` in UI
//! Automation; `kAXValueAttribute`, `kAXSelectedAttribute` in AX).
//!
//! # What a capture keeps
//!
//! Sources report what they find; two passes shared by every source finish the table:
//! [`labels`] names the fields left nameless by the label beside or above them, and [`keep`]
//! says which elements stay when more are in view than the budget holds.

#[cfg(all(target_os = "linux", feature = "accessibility"))]
mod atspi;
pub mod keep;
pub mod labels;
mod raw;

pub use raw::{ClickVia, ElementState, NameSource, PixelRect, RawElement};

#[cfg(all(target_os = "linux", feature = "accessibility"))]
pub use atspi::{switch::switch_on_session, AtspiSource};

use std::time::Duration;

use cel_contracts::{PlanningElement, PlanningElementState};
use serde::{Deserialize, Serialize};

use super::coords::{InputPoint, ScreenGeometry};
use crate::error::Result;

/// Longest value or text kept for an element, in characters.
pub const MAX_VALUE_CHARS: usize = 80;
/// Longest name slug in an id, in characters.
pub const MAX_SLUG_CHARS: usize = 24;
/// Most options of a combo box listed in the view.
pub const MAX_OPTIONS: usize = 24;

/// Limits on one element capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElementBudget {
    /// Elements kept at most (the planner's prompt and grammar grow with each one).
    pub max_elements: usize,
    /// Tree levels walked below a top-level window at most.
    pub max_depth: usize,
    /// Wall-clock time for one capture; the walk stops there and keeps what it has.
    pub max_ms: u64,
}

impl Default for ElementBudget {
    fn default() -> Self {
        Self {
            // The view's own default element budget: the planner shows no more.
            max_elements: cel_contracts::PlanningBudget::default().max_elements as usize,
            max_depth: 40,
            // A large browser page reads in about 0.4 s; a machine busy with other work can
            // take several times that, and a capture cut short hides the controls the
            // planner needs (1.5 s cut a file chooser and a form in the desktop suite under
            // load).
            max_ms: 3_000,
        }
    }
}

impl ElementBudget {
    /// The time budget as a duration.
    pub fn max_time(&self) -> Duration {
        Duration::from_millis(self.max_ms)
    }
}

/// One element of a capture: its id, what the planner sees, and where it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScreenElement {
    /// The id in the view.
    pub id: String,
    /// What was read.
    #[serde(flatten)]
    pub raw: RawElement,
    /// The part of `bounds` on the captured image (never empty: elements off the monitor are
    /// not kept).
    pub visible: PixelRect,
}

impl ScreenElement {
    /// The element as the planner sees it.
    pub fn planning_element(&self) -> PlanningElement {
        let s = self.raw.state;
        PlanningElement {
            id: self.id.clone(),
            element_type: self.raw.role.clone(),
            label: (!self.raw.name.is_empty()).then(|| self.raw.name.clone()),
            value: self.raw.value.clone(),
            state: PlanningElementState {
                focused: s.focused,
                selected: s.selected,
                enabled: s.enabled,
                checked: s.checked,
                expanded: s.expanded,
            },
            clickable: self.raw.clickable,
            settable: self.raw.settable || self.raw.editable,
            select_options: (!self.raw.options.is_empty()).then(|| self.raw.options.join(", ")),
        }
    }

    /// The pixel a click aims at: the centre of the visible part.
    pub fn click_pixel(&self) -> (i32, i32) {
        self.visible.centre()
    }
}

/// The elements of one capture, in reading order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ElementTable {
    /// The elements.
    pub elements: Vec<ScreenElement>,
    /// The source that read them (`atspi`).
    pub source: String,
    /// How long the capture took, in milliseconds.
    pub capture_ms: u64,
    /// Whether a budget cut the walk short or left elements out.
    pub truncated: bool,
    /// Accessibility nodes the capture looked at (walked, or probed in a long list).
    #[serde(default)]
    pub nodes_walked: usize,
    /// Elements found on the image but left out by the element budget ([`keep`]).
    #[serde(default)]
    pub dropped: usize,
}

impl ElementTable {
    /// Builds the table from raw elements: drops those not on the image and repeats of one
    /// handle, keeps at most `max_elements` by the rule of [`keep`], sorts them in reading
    /// order and gives ids.
    pub fn from_raw(
        raw: Vec<RawElement>,
        image_width: u32,
        image_height: u32,
        max_elements: usize,
    ) -> Self {
        let screen = PixelRect::image(image_width, image_height);
        let mut handles = std::collections::HashSet::new();
        let on_image: Vec<(RawElement, PixelRect)> = raw
            .into_iter()
            .filter(|r| handles.insert(r.handle.clone()))
            .filter_map(|r| r.bounds.intersect(&screen).map(|v| (r, v)))
            .collect();
        let found = on_image.len();
        let mut kept = keep::keep_within_budget(on_image, max_elements);
        let dropped = found - kept.len();
        // Reading order, then role and name so that ties are ordered the same every capture.
        kept.sort_by(|(a, av), (b, bv)| {
            (av.y, av.x, &a.role, &a.name).cmp(&(bv.y, bv.x, &b.role, &b.name))
        });
        let mut seen: std::collections::HashMap<String, usize> = Default::default();
        let elements = kept
            .into_iter()
            .map(|(raw, visible)| {
                let base = element_id_base(&raw.role, &raw.name);
                let n = seen.entry(base.clone()).or_insert(0);
                *n += 1;
                let id = if *n == 1 { base } else { format!("{base}_{n}") };
                ScreenElement { id, raw, visible }
            })
            .collect();
        Self {
            elements,
            source: String::new(),
            capture_ms: 0,
            truncated: dropped > 0,
            nodes_walked: 0,
            dropped,
        }
    }

    /// The element with this id.
    pub fn get(&self, id: &str) -> Option<&ScreenElement> {
        self.elements.iter().find(|e| e.id == id)
    }

    /// The elements as the planner sees them.
    pub fn planning_elements(&self) -> Vec<PlanningElement> {
        self.elements
            .iter()
            .map(ScreenElement::planning_element)
            .collect()
    }

    /// The innermost element whose visible part holds the pixel `(px, py)`: the smallest by
    /// area, since a control lies inside its labels' and containers' extents.
    pub fn hit_test(&self, px: i32, py: i32) -> Option<&ScreenElement> {
        self.elements
            .iter()
            .filter(|e| e.visible.contains(px, py))
            .min_by_key(|e| e.visible.area())
    }
}

/// `{role}_{slug}`, or the role alone for a nameless element.
pub fn element_id_base(role: &str, name: &str) -> String {
    let slug = slug(name);
    if slug.is_empty() {
        role.to_string()
    } else {
        format!("{role}_{slug}")
    }
}

/// Lower-case ASCII letters and digits of `name`, words joined by `-`, at most
/// [`MAX_SLUG_CHARS`] characters, cut at a word boundary where one is near.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for word in name
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word: String = word
            .chars()
            .flat_map(char::to_lowercase)
            .filter(char::is_ascii_alphanumeric)
            .collect();
        if word.is_empty() {
            continue;
        }
        let extra = word.len() + usize::from(!out.is_empty());
        if out.len() + extra > MAX_SLUG_CHARS {
            if out.is_empty() {
                out = word.chars().take(MAX_SLUG_CHARS).collect();
            }
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word);
    }
    out
}

/// Clips a value to [`MAX_VALUE_CHARS`] characters, marking the cut with `…`.
pub fn clip_value(text: &str) -> String {
    if text.chars().count() <= MAX_VALUE_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(MAX_VALUE_CHARS - 1).collect();
    s.push('…');
    s
}

/// What the screen says about a step's target, for the destructive-step gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementFacts {
    /// The element's id in the table.
    pub id: String,
    /// Its short role.
    pub role: String,
    /// Its accessible name as read now.
    pub name: String,
}

/// Reads a platform's accessibility tree.
///
/// Coordinates a source reports are input coordinates (as [`InputPoint`]); the table maps them
/// to the screenshot's pixels with [`ScreenGeometry`]. Every method may block on a
/// cross-process call and is bounded in time by the source.
pub trait ElementSource: Send {
    /// A short name (`atspi`), for traces and `sightline view`.
    fn name(&self) -> &'static str;

    /// Reads the elements of the focused application (or the visible top-level windows when no
    /// window is active) that lie on the monitor of `geometry`.
    fn capture(
        &mut self,
        geometry: &ScreenGeometry,
        budget: &ElementBudget,
    ) -> Result<ElementTable>;

    /// Reads `element` again, now: its current bounds, states and name. An element that is gone,
    /// hidden, or is now another control is an error saying so (the id is stale).
    fn refresh(&mut self, element: &ScreenElement, geometry: &ScreenGeometry)
        -> Result<RawElement>;

    /// Performs the accessible action named `action` on `element`.
    fn invoke(&mut self, element: &ScreenElement, action: &str) -> Result<()>;

    /// Gives `element` keyboard focus (and its window, where the toolkit does that), as a
    /// click would. An error when the element cannot take focus, or does not report it
    /// within a moment (the caller clicks instead).
    fn focus(&mut self, element: &ScreenElement) -> Result<()>;

    /// Selects `element` in its container (a row in its table), as a click on it would.
    fn select(&mut self, element: &ScreenElement) -> Result<()>;

    /// Sets `element`'s value to `value`: the text of a text field, the number of a slider or
    /// spin button (within its range), the option of a combo box (by its name). Returns how
    /// (`text`, `number`, `option`); an error that says what the element takes otherwise.
    fn set_value(&mut self, element: &ScreenElement, value: &str) -> Result<&'static str>;

    /// A fingerprint of the top-level windows (which are showing, which is active), for the
    /// runner to see a window open, close or take focus while it waits; `None` where the
    /// source cannot tell. Costs a few calls per application.
    fn windows_signature(&mut self) -> Option<u64> {
        None
    }
}

/// Maps a rectangle in input coordinates to screenshot pixels.
pub fn input_rect_to_pixels(
    geometry: &ScreenGeometry,
    x: i32,
    y: i32,
    width: i32,
    height: i32,
) -> PixelRect {
    let (x0, y0) = geometry.pixel_of_input(InputPoint { x, y });
    let (x1, y1) = geometry.pixel_of_input(InputPoint {
        x: x.saturating_add(width.max(0)),
        y: y.saturating_add(height.max(0)),
    });
    let (x0, y0, x1, y1) = (x0.round(), y0.round(), x1.round(), y1.round());
    PixelRect {
        x: x0 as i32,
        y: y0 as i32,
        width: (x1 - x0).max(0.0) as i32,
        height: (y1 - y0).max(0.0) as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(role: &str, name: &str, x: i32, y: i32) -> RawElement {
        RawElement {
            role: role.into(),
            name: name.into(),
            value: None,
            state: ElementState::default(),
            clickable: true,
            editable: false,
            actions: vec![],
            bounds: PixelRect {
                x,
                y,
                width: 100,
                height: 30,
            },
            handle: format!("{role}{x},{y}"),
            click: ClickVia::Pointer,
            settable: false,
            options: vec![],
            name_from: NameSource::Own,
        }
    }

    #[test]
    fn ids_are_role_and_slug_numbered_in_reading_order_and_stable() {
        let input = vec![
            raw("button", "OK", 300, 50),
            raw("button", "OK", 10, 50),
            raw("text", "", 10, 10),
            raw("label", "Status: ready!", 10, 100),
            raw("button", "Off screen", 5000, 10),
        ];
        let table = ElementTable::from_raw(input.clone(), 1280, 800, 10);
        let ids: Vec<&str> = table.elements.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            ["text", "button_ok", "button_ok_2", "label_status-ready"]
        );
        assert_eq!(table.get("button_ok").map(|e| e.raw.bounds.x), Some(10));
        // The same screen read in another order gives the same ids.
        let mut reversed = input;
        reversed.reverse();
        assert_eq!(ElementTable::from_raw(reversed, 1280, 800, 10), table);
    }

    #[test]
    fn slugs_are_short_ascii_and_cut_at_words() {
        assert_eq!(slug("Save As…"), "save-as");
        assert_eq!(slug("Größe ändern"), "gre-ndern");
        assert_eq!(
            slug("a very long button name that goes on and on"),
            "a-very-long-button-name"
        );
        assert_eq!(slug("!!!"), "");
        assert!(!element_id_base("button", "xy:1,2").contains(':'));
    }

    #[test]
    fn visible_part_is_clipped_to_the_image_and_budget_truncates() {
        let t = ElementTable::from_raw(vec![raw("button", "Edge", 1250, 790)], 1280, 800, 10);
        let e = &t.elements[0];
        assert_eq!(
            e.visible,
            PixelRect {
                x: 1250,
                y: 790,
                width: 30,
                height: 10
            }
        );
        assert_eq!(e.click_pixel(), (1265, 795));
        let many: Vec<RawElement> = (0..5).map(|i| raw("button", "B", 0, i * 40)).collect();
        let t = ElementTable::from_raw(many, 1280, 800, 3);
        assert_eq!(t.elements.len(), 3);
        assert!(t.truncated);
    }

    #[test]
    fn hit_test_picks_the_innermost_element() {
        let mut big = raw("label", "Panel", 0, 0);
        big.bounds.width = 500;
        big.bounds.height = 500;
        let t = ElementTable::from_raw(vec![big, raw("button", "Delete", 50, 50)], 1280, 800, 10);
        assert_eq!(
            t.hit_test(60, 60).map(|e| e.id.as_str()),
            Some("button_delete")
        );
        assert_eq!(
            t.hit_test(400, 400).map(|e| e.id.as_str()),
            Some("label_panel")
        );
        assert!(t.hit_test(900, 900).is_none());
    }

    #[test]
    fn values_are_clipped() {
        let long = "x".repeat(200);
        assert_eq!(clip_value(&long).chars().count(), MAX_VALUE_CHARS);
        assert_eq!(clip_value("short"), "short");
    }
}
