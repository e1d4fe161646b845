//! The Linux element source: AT-SPI2 over D-Bus (`atspi` proxies on zbus's blocking API).
//!
//! Connection: the session bus's `org.a11y.Bus.GetAddress` names the accessibility bus (the
//! bus launcher starts it on demand); every call below goes to that bus. Each object is one
//! proxy with property caching off: caching would cost a `GetAll` and a signal subscription
//! per object, more than the one or two properties read.
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
mod read;
pub mod switch;
mod table;
mod walk;
mod xwindows;

use std::collections::HashMap;
use std::time::Instant;

use atspi::proxy::accessible::AccessibleProxyBlocking;
use atspi::proxy::action::ActionProxyBlocking;
use atspi::proxy::application::ApplicationProxyBlocking;
use atspi::proxy::bus::BusProxyBlocking;
use atspi::proxy::component::ComponentProxyBlocking;
use atspi::proxy::editable_text::EditableTextProxyBlocking;
use atspi::proxy::selection::SelectionProxyBlocking;
use atspi::proxy::table::TableProxyBlocking;
use atspi::proxy::table_cell::TableCellProxyBlocking;
use atspi::proxy::text::TextProxyBlocking;
use atspi::proxy::value::ValueProxyBlocking;
use atspi::{CoordType, State};
use zbus::blocking::Connection;
use zbus::proxy::CacheProperties;

use super::labels::name_fields_by_labels;
use super::{ElementBudget, ElementSource, ElementTable, RawElement, ScreenElement};
use crate::error::{Error, Result};
use crate::runner::coords::ScreenGeometry;

/// The registry's well-known name and the path of every application's root.
const REGISTRY: &str = "org.a11y.atspi.Registry";
const ROOT_PATH: &str = "/org/a11y/atspi/accessible/root";

/// How long an element that looks hidden or without extents is looked at again before it
/// is called stale.
const STALE_RECHECK: std::time::Duration = std::time::Duration::from_millis(500);
/// Between those looks.
const STALE_RECHECK_POLL: std::time::Duration = std::time::Duration::from_millis(100);
/// Between two reads of a screen whose page is still loading.
const LOADING_POLL: std::time::Duration = std::time::Duration::from_millis(150);

/// A builder of one blocking proxy on `conn` for `dest` + `path`, caching off.
macro_rules! proxy {
    ($proxy:ident, $conn:expr, $dest:expr, $path:expr) => {
        $proxy::builder($conn)
            .destination($dest.to_string())
            .and_then(|b| b.path($path.to_string()))
            .and_then(|b| b.cache_properties(CacheProperties::No).build())
    };
}

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

/// Reads elements over AT-SPI2.
pub struct AtspiSource {
    conn: Connection,
    /// Puts `IsEnabled` back when the source is dropped, if it was off.
    _switch: Option<switch::AccessibilitySwitch>,
    /// Toolkits by application bus name, read once per application.
    toolkits: HashMap<String, Toolkit>,
    /// The X server's top-level windows, for toolkits with window-relative extents.
    xwindows: xwindows::XWindows,
    /// Offsets of the windows of the last capture, by bus name, for refreshes.
    frames: HashMap<String, Frame>,
}

impl std::fmt::Debug for AtspiSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtspiSource")
            .field("toolkits", &self.toolkits)
            .finish_non_exhaustive()
    }
}

impl AtspiSource {
    /// Connects to the accessibility bus of this session and switches accessibility on (see
    /// [`switch`]). Fails with a [`Error::Runner`] that says why (no session bus, no
    /// `org.a11y.Bus`, the bus address unreachable).
    pub fn connect() -> Result<Self> {
        let no_bus = |what: &str, e: zbus::Error| {
            Error::runner_caused(format!("no accessibility bus: {what}"), e)
        };
        let session = Connection::session().map_err(|e| no_bus("no D-Bus session bus", e))?;
        let address = BusProxyBlocking::new(&session)
            .and_then(|bus| bus.get_address())
            .map_err(|e| no_bus("org.a11y.Bus.GetAddress on the session bus failed", e))?;
        let conn = zbus::blocking::connection::Builder::address(address.as_str())
            .and_then(|b| b.build())
            .map_err(|e| no_bus(&format!("cannot connect to {address}"), e))?;
        let switch = match switch::AccessibilitySwitch::turn_on(session) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!("cannot switch accessibility on (org.a11y.Status): {e}");
                None
            }
        };
        let source = Self {
            conn,
            toolkits: HashMap::new(),
            xwindows: xwindows::XWindows::default(),
            frames: HashMap::new(),
            _switch: None,
        };
        let switched_on = switch.as_ref().is_some_and(|s| s.switched_on());
        if switched_on {
            switch::wait_for_applications(|| source.application_count());
        }
        Ok(Self {
            _switch: switch,
            ..source
        })
    }

    fn accessible(&self, node: &Node) -> zbus::Result<AccessibleProxyBlocking<'static>> {
        proxy!(AccessibleProxyBlocking, &self.conn, node.dest, node.path)
    }

    fn component(&self, node: &Node) -> zbus::Result<ComponentProxyBlocking<'static>> {
        proxy!(ComponentProxyBlocking, &self.conn, node.dest, node.path)
    }

    fn action(&self, node: &Node) -> zbus::Result<ActionProxyBlocking<'static>> {
        proxy!(ActionProxyBlocking, &self.conn, node.dest, node.path)
    }

    fn text(&self, node: &Node) -> zbus::Result<TextProxyBlocking<'static>> {
        proxy!(TextProxyBlocking, &self.conn, node.dest, node.path)
    }

    fn editable_text(&self, node: &Node) -> zbus::Result<EditableTextProxyBlocking<'static>> {
        proxy!(EditableTextProxyBlocking, &self.conn, node.dest, node.path)
    }

    fn value(&self, node: &Node) -> zbus::Result<ValueProxyBlocking<'static>> {
        proxy!(ValueProxyBlocking, &self.conn, node.dest, node.path)
    }

    fn selection(&self, node: &Node) -> zbus::Result<SelectionProxyBlocking<'static>> {
        proxy!(SelectionProxyBlocking, &self.conn, node.dest, node.path)
    }

    fn table(&self, node: &Node) -> zbus::Result<TableProxyBlocking<'static>> {
        proxy!(TableProxyBlocking, &self.conn, node.dest, node.path)
    }

    fn table_cell(&self, node: &Node) -> zbus::Result<TableCellProxyBlocking<'static>> {
        proxy!(TableCellProxyBlocking, &self.conn, node.dest, node.path)
    }

    /// How many applications are registered (to see when newly enabled ones have come).
    fn application_count(&self) -> usize {
        self.accessible(&Node::new(REGISTRY, ROOT_PATH))
            .and_then(|root| root.child_count())
            .map(|n| n.max(0) as usize)
            .unwrap_or(0)
    }

    /// The toolkit of the application on bus name `dest`, read once.
    fn toolkit(&mut self, dest: &str, app_path: &str) -> Toolkit {
        if let Some(t) = self.toolkits.get(dest) {
            return *t;
        }
        let read = proxy!(ApplicationProxyBlocking, &self.conn, dest, app_path)
            .and_then(|app| Ok((app.toolkit_name()?, app.version()?)));
        let toolkit = match read {
            Ok((name, version)) => Toolkit::from_name_and_version(&name, &version),
            Err(_) => Toolkit::default(),
        };
        self.toolkits.insert(dest.to_string(), toolkit);
        toolkit
    }

    /// Every application's top-level windows, applications in the registry's order.
    fn top_level(&self) -> zbus::Result<Vec<TopLevel>> {
        let root = self.accessible(&Node::new(REGISTRY, ROOT_PATH))?;
        let mut out = Vec::new();
        for app in root.get_children()? {
            let Some(app_node) = Node::of(&app, REGISTRY) else {
                continue;
            };
            // One application that does not answer (busy, or gone between the two calls) must
            // not hide the others.
            let Ok(windows) = self
                .accessible(&app_node)
                .and_then(|proxy| proxy.get_children())
            else {
                continue;
            };
            for w in windows {
                let Some(node) = Node::of(&w, &app_node.dest) else {
                    continue;
                };
                let Ok(states) = self.accessible(&node).and_then(|p| p.get_state()) else {
                    continue;
                };
                out.push(TopLevel {
                    app: app_node.clone(),
                    node,
                    showing: states.contains(State::Showing),
                    active: states.contains(State::Active),
                });
            }
        }
        Ok(out)
    }

    /// The top-level windows to walk: every showing window of the applications that own an
    /// active window (the focused application, with its menus and dialogs, which are windows
    /// of their own), else every showing window.
    fn windows(&mut self) -> zbus::Result<Vec<WindowRoot>> {
        let all = self.top_level()?;
        let active_apps: std::collections::HashSet<&Node> =
            all.iter().filter(|w| w.active).map(|w| &w.app).collect();
        let mut roots = Vec::new();
        for w in all
            .iter()
            .filter(|w| w.showing)
            .filter(|w| active_apps.is_empty() || active_apps.contains(&w.app))
        {
            let toolkit = self.toolkit(&w.app.dest, &w.app.path);
            let frame = if toolkit.window_relative {
                let title = self
                    .accessible(&w.node)
                    .and_then(|p| p.name())
                    .unwrap_or_default();
                let size = self
                    .component(&w.node)
                    .and_then(|c| c.get_extents(CoordType::Window))
                    .map(|(_, _, width, height)| (width, height))
                    .unwrap_or((0, 0));
                let pid = self.process_id(&w.node.dest);
                Frame {
                    offset: self.xwindows.origin_of(&title, pid, size).unwrap_or((0, 0)),
                    window_coords: true,
                }
            } else {
                Frame::default()
            };
            roots.push(WindowRoot {
                node: w.node.clone(),
                toolkit,
                frame,
            });
        }
        Ok(roots)
    }

    /// The process id behind a bus name on the accessibility bus, when the bus says.
    fn process_id(&self, dest: &str) -> Option<u32> {
        let dbus = zbus::blocking::fdo::DBusProxy::new(&self.conn).ok()?;
        let name = zbus::names::BusName::try_from(dest).ok()?;
        dbus.get_connection_unix_process_id(name).ok()
    }

    /// One look at an element for [`Self::reread`]: the element, or why it is stale and
    /// whether that may pass.
    fn reread_once(
        &self,
        node: &Node,
        captured: &RawElement,
        toolkit: Toolkit,
        frame: Frame,
        geometry: &ScreenGeometry,
    ) -> std::result::Result<RawElement, (String, bool)> {
        let proxy = self
            .accessible(node)
            .map_err(|e| (format!("it cannot be reached ({e})"), false))?;
        let states = proxy
            .get_state()
            .map_err(|_| ("it is gone".to_string(), false))?;
        if states.contains(State::Defunct) {
            return Err(("it is gone".to_string(), false));
        }
        let shown = states.contains(State::Showing)
            || (toolkit.trust_visible && states.contains(State::Visible));
        if !shown || !states.contains(State::Visible) {
            return Err(("it is no longer shown".to_string(), true));
        }
        read::read_again(self, node, captured, toolkit, frame, geometry)
            .map_err(|_| ("it is gone".to_string(), false))?
            .ok_or_else(|| ("it has no extents any more".to_string(), true))
    }

    /// Reads `node` again, as the capture read it.
    fn reread(&mut self, element: &ScreenElement, geometry: &ScreenGeometry) -> Result<RawElement> {
        let node = Node::from_handle(&element.raw.handle)?;
        let stale = |why: String| {
            Error::runner(format!(
                "element {:?} ({} {:?}) is stale: {why} (the screen changed since the \
                 screenshot); look again",
                element.id, element.raw.role, element.raw.name
            ))
        };
        let toolkit = self.toolkits.get(&node.dest).copied().unwrap_or_default();
        let frame = self.frames.get(&node.dest).copied().unwrap_or_default();
        // A browser's tree follows its page from another process: an element may be missing
        // its states or extents for a moment while the page changes (typing into the field
        // before it), so what may pass is looked at again for a short while.
        let started = Instant::now();
        let now = loop {
            let attempt = self.reread_once(&node, &element.raw, toolkit, frame, geometry);
            match attempt {
                Ok(now) => break now,
                Err((why, passing)) => {
                    if !passing || started.elapsed() >= STALE_RECHECK {
                        return Err(stale(why));
                    }
                    std::thread::sleep(STALE_RECHECK_POLL);
                }
            }
        };
        // Object paths can be reused by toolkits: a different role or name is another control.
        let same_name = !element.raw.name_from.is_intrinsic() || now.name == element.raw.name;
        if now.role != element.raw.role || !same_name {
            return Err(stale(format!(
                "the object is now {} {:?}",
                now.role, now.name
            )));
        }
        Ok(RawElement {
            name: element.raw.name.clone(),
            name_from: element.raw.name_from,
            ..now
        })
    }
}

impl ElementSource for AtspiSource {
    fn name(&self) -> &'static str {
        "atspi"
    }

    fn windows_signature(&mut self) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let windows = self.top_level().ok()?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        windows
            .iter()
            .filter(|w| w.showing)
            .for_each(|w| w.hash(&mut hasher));
        Some(hasher.finish())
    }

    fn capture(
        &mut self,
        geometry: &ScreenGeometry,
        budget: &ElementBudget,
    ) -> Result<ElementTable> {
        let started = Instant::now();
        let windows = self
            .windows()
            .map_err(|e| Error::runner_caused("accessibility tree: cannot list windows", e))?;
        self.frames = windows
            .iter()
            .map(|w| (w.node.dest.clone(), w.frame))
            .collect();
        let mut walk = walk::Walk::new(self, geometry, budget, started);
        loop {
            for window in &windows {
                // A window that closes mid-walk loses its elements, not the capture.
                if let Err(e) = walk.window(window) {
                    tracing::debug!("accessibility walk of {}: {e}", window.node.handle());
                }
            }
            // A page still being built is read again, within the capture's time budget.
            if !walk.loading || started.elapsed() + LOADING_POLL * 2 >= budget.max_time() {
                break;
            }
            std::thread::sleep(LOADING_POLL);
            walk.restart();
        }
        let (found, nodes_walked, walk_truncated) = walk.finish();
        let raw = name_fields_by_labels(found);
        let mut table = ElementTable::from_raw(
            raw,
            geometry.image_width,
            geometry.image_height,
            budget.max_elements,
        );
        table.truncated |= walk_truncated;
        table.nodes_walked = nodes_walked;
        table.source = self.name().to_string();
        table.capture_ms = started.elapsed().as_millis() as u64;
        if walk_truncated {
            tracing::warn!(
                "element capture cut short by its budget ({} elements, {} nodes, {} ms)",
                table.elements.len(),
                table.nodes_walked,
                table.capture_ms
            );
        }
        Ok(table)
    }

    fn refresh(
        &mut self,
        element: &ScreenElement,
        geometry: &ScreenGeometry,
    ) -> Result<RawElement> {
        self.reread(element, geometry)
    }

    fn invoke(&mut self, element: &ScreenElement, action: &str) -> Result<()> {
        act::invoke(self, element, action)
    }

    fn focus(&mut self, element: &ScreenElement) -> Result<()> {
        act::focus(self, element)
    }

    fn select(&mut self, element: &ScreenElement) -> Result<()> {
        act::select(self, element)
    }

    fn set_value(&mut self, element: &ScreenElement, value: &str) -> Result<&'static str> {
        act::set_value(self, element, value)
    }
}
