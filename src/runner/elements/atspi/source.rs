//! [`AtspiSource`]: the element source on the accessibility bus, which lists the windows to
//! walk, walks them ([`super::walk`]), reads elements again for the runner and acts on them
//! ([`super::act`]).

use std::collections::HashMap;
use std::time::Instant;

use atspi::proxy::bus::BusProxyBlocking;
use atspi::{CoordType, Role, State};
use zbus::blocking::Connection;

use super::bus::Bus;
use super::read::{self, extents, Place, Seen};
use super::{act, switch, table, walk, xwindows, Frame, Node, Toolkit, WindowRoot};
use crate::error::{Error, Result};
use crate::runner::coords::ScreenGeometry;
use crate::runner::elements::labels::name_fields_by_labels;
use crate::runner::elements::{
    input_rect_to_pixels, ElementBudget, ElementSource, ElementTable, RawElement, ScreenElement,
};

/// How long an element that looks hidden or without extents is looked at again before it
/// is called stale.
const STALE_RECHECK: std::time::Duration = std::time::Duration::from_millis(500);
/// Between those looks.
const STALE_RECHECK_POLL: std::time::Duration = std::time::Duration::from_millis(100);
/// Between two reads of a screen whose page is still loading.
const LOADING_POLL: std::time::Duration = std::time::Duration::from_millis(150);

/// Reads elements over AT-SPI2.
pub struct AtspiSource {
    bus: Bus,
    /// Puts `IsEnabled` back when the source is dropped, if it was off.
    _switch: Option<switch::AccessibilitySwitch>,
    /// Toolkits by application bus name, read once per application.
    toolkits: HashMap<String, Toolkit>,
    /// The X server's top-level windows, for toolkits with window-relative extents.
    xwindows: xwindows::XWindows,
    /// Offsets of the windows of the last capture, by bus name, for refreshes.
    frames: HashMap<String, Frame>,
}

crate::debug_fields::debug_fields!(AtspiSource { toolkits });

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
            bus: Bus::new(conn),
            toolkits: HashMap::new(),
            xwindows: xwindows::XWindows::default(),
            frames: HashMap::new(),
            _switch: None,
        };
        let switched_on = switch.as_ref().is_some_and(|s| s.switched_on());
        if switched_on {
            switch::wait_for_applications(|| source.bus.application_count());
        }
        Ok(Self {
            _switch: switch,
            ..source
        })
    }

    /// The toolkit of the application on bus name `dest`, read once.
    fn toolkit(&mut self, dest: &str, app_path: &str) -> Toolkit {
        if let Some(t) = self.toolkits.get(dest) {
            return *t;
        }
        let toolkit = self.bus.toolkit_of(&Node::new(dest, app_path));
        self.toolkits.insert(dest.to_string(), toolkit);
        toolkit
    }

    /// The top-level windows to walk: every showing window of the applications that own an
    /// active window (the focused application, with its menus and dialogs, which are windows
    /// of their own), else every showing window.
    fn windows(&mut self) -> zbus::Result<Vec<WindowRoot>> {
        let all = self.bus.top_level()?;
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
                    .bus
                    .accessible(&w.node)
                    .and_then(|p| p.name())
                    .unwrap_or_default();
                let size = self
                    .bus
                    .component(&w.node)
                    .and_then(|c| c.get_extents(CoordType::Window))
                    .map(|(_, _, width, height)| (width, height))
                    .unwrap_or((0, 0));
                let pid = self.bus.process_id(&w.node.dest);
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
            .bus
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
        read_again(&self.bus, node, captured, toolkit, frame, geometry)
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
        let windows = self.bus.top_level().ok()?;
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
        let mut walk = walk::Walk::new(&self.bus, geometry, budget, started);
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
        act::invoke(&self.bus, element, action)
    }

    fn focus(&mut self, element: &ScreenElement) -> Result<()> {
        act::focus(&self.bus, element)
    }

    fn select(&mut self, element: &ScreenElement) -> Result<()> {
        act::select(&self.bus, element)
    }

    fn set_value(&mut self, element: &ScreenElement, value: &str) -> Result<&'static str> {
        act::set_value(&self.bus, element, value)
    }
}

/// Reads an element again for a refresh, the way the capture read it: rows and row check
/// boxes from their table cell ([`super::table`]), everything else with [`read_element`].
fn read_again(
    src: &Bus,
    node: &Node,
    captured: &RawElement,
    toolkit: Toolkit,
    frame: Frame,
    geometry: &ScreenGeometry,
) -> zbus::Result<Option<RawElement>> {
    let proxy = src.accessible(node)?;
    let states = proxy.get_state()?;
    let role = proxy.get_role()?;
    let rect = extents(src, node, frame);
    let place = Place { toolkit, geometry };
    if matches!(captured.role.as_str(), "list" | "table") {
        // The summary of a long list: the list itself, as it is now.
        return Ok(rect.map(|r| RawElement {
            bounds: input_rect_to_pixels(geometry, r.x, r.y, r.width, r.height),
            ..captured.clone()
        }));
    }
    if matches!(role, Role::TableCell | Role::ListItem | Role::TreeItem)
        && matches!(captured.role.as_str(), "row" | "checkbox")
    {
        return Ok(rect.map(|rect| {
            table::cell_as_row_again(src, node, &proxy, states, rect, place, captured)
        }));
    }
    let seen = Seen {
        node,
        proxy: &proxy,
        role,
        states,
        rect,
    };
    Ok(read::read_element(src, &seen, place, "")?.map(|f| f.raw))
}
