//! The Linux element source: AT-SPI2 over D-Bus (`atspi` proxies on zbus's blocking API).
//!
//! Connection ([`bus`]): the session bus's `org.a11y.Bus.GetAddress` names the accessibility
//! bus (the bus launcher starts it on demand); every call goes to that bus. [`AtspiSource`]
//! (`source.rs`) lists the windows, runs the walk and the actions; this file holds what the
//! parts share.
//!
//! Switching accessibility on ([`switch`]): browsers, Qt and Electron applications build
//! their accessibility trees only while the session says assistive technology is on
//! (`org.a11y.Status.IsEnabled`, which screen readers set). The source sets it when it
//! connects, gives the applications a moment to register, and puts it back when it is
//! dropped if it was off.
//!
//! The walk ([`walk`]): the registry's root lists the applications; their children are
//! top-level windows. The showing windows of the application owning the `active` window are
//! walked (the focused application; its menus and dialogs are windows of their own); when no
//! window is active (no window manager, as on a bare Xvfb) every showing window is. Elements
//! are read by [`read`] (names from the element, its `labelled-by` relation, description,
//! placeholder or children, values from its Text, Value or Selection), tables and lists with a
//! Table interface row by row by [`table`], and [`super::labels`] names the fields left
//! nameless by the label beside them. Toolkit quirks are [`Toolkit`]'s: GTK 4 reports
//! extents relative to its window and marks its widgets `visible` but not `showing`.
//!
//! Actions ([`act`]): a named accessible action, a focus grab (Component), a selection in the
//! containing table or list (Selection, Table), and `set_value` through EditableText, Value
//! or the options' Selection.

mod act;
mod bus;
mod read;
mod source;
pub mod switch;
mod table;
mod walk;
mod xwindows;

pub use source::AtspiSource;

use atspi::CoordType;

use super::PixelRect;
use crate::error::{Error, Result};

/// The registry's well-known name and the path of every application's root.
const REGISTRY: &str = "org.a11y.atspi.Registry";
const ROOT_PATH: &str = "/org/a11y/atspi/accessible/root";

/// What the source must allow for in one application's toolkit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Toolkit {
    /// Extents are relative to the top-level window, whatever coordinate type is asked
    /// (GTK 4 on X11): the window's place on the screen is added.
    window_relative: bool,
    /// Widgets on screen are `visible` but not `showing` (GTK 4.8), so `visible` is trusted.
    trust_visible: bool,
    /// A nameless widget is named after its class (`GtkEntry`, `GtkSpinButton`, GTK 4.8):
    /// such names are no names.
    class_names: bool,
}

impl Toolkit {
    fn from_name_and_version(name: &str, version: &str) -> Self {
        let gtk4 = name.eq_ignore_ascii_case("gtk") && version.starts_with("4.");
        Toolkit {
            window_relative: gtk4,
            trust_visible: gtk4,
            class_names: gtk4,
        }
    }
}

/// An object on the accessibility bus: the application's bus name and the object's path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Node {
    dest: String,
    path: String,
}

impl Node {
    fn new(dest: &str, path: &str) -> Self {
        Self {
            dest: dest.to_string(),
            path: path.to_string(),
        }
    }

    /// The node an object reference names, `None` for the null reference.
    fn of(r: &atspi::ObjectRefOwned, parent_dest: &str) -> Option<Self> {
        if r.is_null() || r.path_as_str() == "/org/a11y/atspi/null" {
            return None;
        }
        Some(Self::new(
            r.name_as_str().unwrap_or(parent_dest),
            r.path_as_str(),
        ))
    }

    /// `dest` + `path`, the handle elements carry.
    fn handle(&self) -> String {
        format!("{}{}", self.dest, self.path)
    }

    fn from_handle(handle: &str) -> Result<Self> {
        handle
            .find('/')
            .map(|i| {
                let (dest, path) = handle.split_at(i);
                Self::new(dest, path)
            })
            .ok_or_else(|| Error::runner(format!("malformed AT-SPI element handle {handle:?}")))
    }
}

/// How a window's extents map to the screen: AT-SPI's screen coordinates, or for toolkits
/// that know only their window's (GTK 4), window coordinates plus the window's place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Frame {
    /// Added to every extent.
    offset: (i32, i32),
    /// Extents are asked in window coordinates (GTK 4 warns on every screen request).
    window_coords: bool,
}

impl Frame {
    fn coord_type(self) -> CoordType {
        if self.window_coords {
            CoordType::Window
        } else {
            CoordType::Screen
        }
    }
}

/// One application's top-level window, as the registry lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TopLevel {
    app: Node,
    node: Node,
    showing: bool,
    active: bool,
}

/// A top-level window to walk, with what its toolkit needs.
#[derive(Debug, Clone)]
pub(super) struct WindowRoot {
    node: Node,
    toolkit: Toolkit,
    /// How its extents map to the screen.
    frame: Frame,
}

/// Where in the tree a node is, as its descendants need to know.
#[derive(Debug, Clone)]
pub(super) struct Context {
    pub toolkit: Toolkit,
    pub frame: Frame,
    /// The visible area so far, in input coordinates (`None`: the whole screen).
    pub clip: Option<PixelRect>,
    /// The handle of the parent node (labels name fields of the same container).
    pub container: String,
    /// Below a kept element: text is part of its name.
    pub inside_kept: bool,
    /// Inside a table row: cells are read by the table, only controls are kept here.
    pub in_row: bool,
    /// Inside a combo box: a popup with no extents is closed.
    pub in_combobox: bool,
}
