//! What a source reads, before the table gives ids: the element as read, its rectangle in
//! screenshot pixels, its states, where its name came from and how a click reaches it. In a
//! file of their own so the passes that finish a capture (`keep`, `labels`) and the sources
//! use them without depending on the table that calls those passes.

use serde::{Deserialize, Serialize};

/// A rectangle in screenshot pixels (may extend past the image; see [`ScreenElement::visible`](super::ScreenElement::visible)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PixelRect {
    /// Left edge.
    pub x: i32,
    /// Top edge.
    pub y: i32,
    /// Width (≥ 0).
    pub width: i32,
    /// Height (≥ 0).
    pub height: i32,
}

impl PixelRect {
    /// The overlap of two rectangles, `None` when they do not overlap.
    pub fn intersect(&self, other: &PixelRect) -> Option<PixelRect> {
        let x0 = self.x.max(other.x);
        let y0 = self.y.max(other.y);
        let x1 = (self.x + self.width).min(other.x + other.width);
        let y1 = (self.y + self.height).min(other.y + other.height);
        (x1 > x0 && y1 > y0).then_some(PixelRect {
            x: x0,
            y: y0,
            width: x1 - x0,
            height: y1 - y0,
        })
    }

    /// Whether the pixel `(px, py)` lies inside.
    pub fn contains(&self, px: i32, py: i32) -> bool {
        px >= self.x && py >= self.y && px < self.x + self.width && py < self.y + self.height
    }

    /// The centre pixel.
    pub fn centre(&self) -> (i32, i32) {
        (self.x + self.width / 2, self.y + self.height / 2)
    }

    /// The area in pixels.
    pub fn area(&self) -> i64 {
        i64::from(self.width) * i64::from(self.height)
    }

    /// The rectangle of a whole `width`×`height` image.
    pub fn image(width: u32, height: u32) -> PixelRect {
        PixelRect {
            x: 0,
            y: 0,
            width: i32::try_from(width).unwrap_or(i32::MAX),
            height: i32::try_from(height).unwrap_or(i32::MAX),
        }
    }
}

/// An element as a source reads it, before ids are given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawElement {
    /// Short role name (`button`, `text`, `checkbox`, `row`, …), the view's `element_type`.
    pub role: String,
    /// What the element is called (see [`NameSource`] for where the name came from).
    pub name: String,
    /// Current value or text, clipped to [`MAX_VALUE_CHARS`](super::MAX_VALUE_CHARS): a field's text, a slider's
    /// number, a combo box's chosen option, a row's other columns.
    pub value: Option<String>,
    /// Focused, selected, enabled, checked, expanded, focusable.
    pub state: ElementState,
    /// Whether a click does something (a control, or an element with an action).
    pub clickable: bool,
    /// Whether it takes typed text.
    pub editable: bool,
    /// The accessible actions it offers, by name (`click`, `press`, `activate`, `toggle`…).
    pub actions: Vec<String>,
    /// Bounds in screenshot pixels.
    pub bounds: PixelRect,
    /// Where the source finds the element again (for AT-SPI: `bus name` + object path).
    pub handle: String,
    /// How a click reaches it without the pointer, as the source judged it.
    #[serde(default)]
    pub click: ClickVia,
    /// Whether `set_value` can set it: editable text, a number in a range, a choice of options.
    #[serde(default)]
    pub settable: bool,
    /// The options of a combo box, at most [`MAX_OPTIONS`](super::MAX_OPTIONS) (what `set_value` accepts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Where the name came from.
    #[serde(default)]
    pub name_from: NameSource,
}

/// Where an element's name came from, in the order they are tried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NameSource {
    /// Its own accessible name.
    #[default]
    Own,
    /// The label an application relates to it (AT-SPI `labelled-by`).
    Relation,
    /// Its accessible description.
    Description,
    /// The placeholder text of an empty field.
    Placeholder,
    /// The text of its children (a list item's label, a table cell's text nodes).
    Children,
    /// The text of the row it is in (a check box cell named by its row).
    Row,
    /// The label beside or above it in the same container ([`labels`]).
    Beside,
    /// No name was found.
    None,
}

impl NameSource {
    /// Whether the element itself says this name, so that a re-read must find it again (a
    /// name from the screen around it cannot be re-read from the element alone).
    pub fn is_intrinsic(self) -> bool {
        !matches!(self, NameSource::Row | NameSource::Beside)
    }
}

/// How a click on an element is carried out without the pointer. The source chooses, knowing
/// the toolkit: a GTK 3 text field's only action is `activate`, which acts like Enter and
/// submits its form, so fields are focused instead; a table row is selected in its table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClickVia {
    /// The accessible action of this name (`click`, `press`, `toggle`, `jump`…).
    Action(String),
    /// Select it in its container (a table row): what a click on a row does.
    Select,
    /// Give it keyboard focus (text fields, terminals).
    Focus,
    /// Nothing accessible fits: the pointer, at the centre of its visible part.
    #[default]
    Pointer,
}

/// The states the planner needs, as in [`PlanningElementState`] (which is not serializable
/// with defaults the way this table is written).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElementState {
    /// Has keyboard focus.
    pub focused: bool,
    /// Selected (list rows, tabs).
    pub selected: bool,
    /// Sensitive to input.
    pub enabled: bool,
    /// Checked or pressed (check boxes, toggles).
    pub checked: bool,
    /// Expanded (trees, combo boxes).
    pub expanded: bool,
    /// Can take keyboard focus (after an accessible action the runner gives it focus).
    #[serde(default)]
    pub focusable: bool,
}
