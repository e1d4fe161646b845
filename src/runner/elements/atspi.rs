//! The Linux element source: AT-SPI2 over D-Bus (`atspi` proxies on zbus's blocking API).
//!
//! Connection: the session bus's `org.a11y.Bus.GetAddress` names the accessibility bus (the
//! bus launcher starts it on demand); every call below goes to that bus. Each object is one
//! proxy with property caching off: caching would cost a `GetAll` and a signal subscription
//! per object, more than the one or two properties read.
//!
//! The walk: the registry's root lists the applications; their children are top-level
//! windows. The showing windows of the application owning the `active` window are walked (the
//! focused application; its menus and dialogs are windows of their own); when no window is
//! active (no window manager, as on a bare Xvfb) every showing window is. Below a window, a
//! subtree that is not `showing` is skipped whole (toolkits hide children with their parent),
//! and an element is kept when its role is one a user acts on or reads, it is `showing` and
//! `visible`, and its extents meet the monitor. One capture costs about three calls per
//! container and seven per kept element; the [`ElementBudget`] bounds them.

use std::time::Instant;

use atspi::proxy::accessible::AccessibleProxyBlocking;
use atspi::proxy::action::ActionProxyBlocking;
use atspi::proxy::bus::BusProxyBlocking;
use atspi::proxy::component::ComponentProxyBlocking;
use atspi::proxy::text::TextProxyBlocking;
use atspi::{CoordType, Interface, Role, State, StateSet};
use zbus::blocking::Connection;
use zbus::proxy::CacheProperties;

use super::{
    clip_value, input_rect_to_pixels, ElementBudget, ElementSource, ElementState, ElementTable,
    RawElement, ScreenElement,
};
use crate::error::{Error, Result};
use crate::runner::coords::ScreenGeometry;

/// The registry's well-known name and the path of every application's root.
const REGISTRY: &str = "org.a11y.atspi.Registry";
const ROOT_PATH: &str = "/org/a11y/atspi/accessible/root";
/// Characters of an editable text read for its value (more are clipped anyway).
const MAX_TEXT_READ: i32 = 200;

/// One application's top-level window, as the registry lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TopLevel {
    app: String,
    dest: String,
    path: String,
    showing: bool,
    active: bool,
}

/// Reads elements over AT-SPI2.
#[derive(Debug)]
pub struct AtspiSource {
    conn: Connection,
}

impl AtspiSource {
    /// Connects to the accessibility bus of this session. Fails with a [`Error::Runner`] that
    /// says why (no session bus, no `org.a11y.Bus`, the bus address unreachable).
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
        Ok(Self { conn })
    }

    fn accessible(&self, dest: &str, path: &str) -> zbus::Result<AccessibleProxyBlocking<'static>> {
        AccessibleProxyBlocking::builder(&self.conn)
            .destination(dest.to_string())?
            .path(path.to_string())?
            .cache_properties(CacheProperties::No)
            .build()
    }

    fn component(&self, dest: &str, path: &str) -> zbus::Result<ComponentProxyBlocking<'static>> {
        ComponentProxyBlocking::builder(&self.conn)
            .destination(dest.to_string())?
            .path(path.to_string())?
            .cache_properties(CacheProperties::No)
            .build()
    }

    fn action(&self, dest: &str, path: &str) -> zbus::Result<ActionProxyBlocking<'static>> {
        ActionProxyBlocking::builder(&self.conn)
            .destination(dest.to_string())?
            .path(path.to_string())?
            .cache_properties(CacheProperties::No)
            .build()
    }

    fn text(&self, dest: &str, path: &str) -> zbus::Result<TextProxyBlocking<'static>> {
        TextProxyBlocking::builder(&self.conn)
            .destination(dest.to_string())?
            .path(path.to_string())?
            .cache_properties(CacheProperties::No)
            .build()
    }

    /// Every application's top-level windows, as (application, destination, path, showing,
    /// active), applications in the registry's order.
    fn top_level(&self) -> zbus::Result<Vec<TopLevel>> {
        let root = self.accessible(REGISTRY, ROOT_PATH)?;
        let mut out = Vec::new();
        for app in root.get_children()? {
            let Some(app_name) = app.name_as_str().map(str::to_string) else {
                continue;
            };
            // One application that does not answer (busy, or gone between the two calls) must
            // not hide the others.
            let Ok(app_proxy) = self.accessible(&app_name, app.path_as_str()) else {
                continue;
            };
            let Ok(windows) = app_proxy.get_children() else {
                continue;
            };
            for w in windows {
                let path = w.path_as_str().to_string();
                let dest = w.name_as_str().unwrap_or(&app_name).to_string();
                let Ok(states) = self.accessible(&dest, &path).and_then(|p| p.get_state()) else {
                    continue;
                };
                out.push(TopLevel {
                    app: app_name.clone(),
                    dest,
                    path,
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
    fn windows(&self) -> zbus::Result<Vec<(String, String)>> {
        let all = self.top_level()?;
        let active_apps: std::collections::HashSet<&str> = all
            .iter()
            .filter(|w| w.active)
            .map(|w| w.app.as_str())
            .collect();
        Ok(all
            .iter()
            .filter(|w| w.showing)
            .filter(|w| active_apps.is_empty() || active_apps.contains(w.app.as_str()))
            .map(|w| (w.dest.clone(), w.path.clone()))
            .collect())
    }

    /// Reads one element's details (name, value, bounds, actions); `None` when it has no
    /// on-screen extents.
    fn read_element(
        &self,
        dest: &str,
        path: &str,
        proxy: &AccessibleProxyBlocking<'_>,
        role: Role,
        states: StateSet,
        geometry: &ScreenGeometry,
    ) -> zbus::Result<Option<RawElement>> {
        let Some(kind) = short_role(role) else {
            return Ok(None);
        };
        let interfaces = proxy.get_interfaces()?;
        if !interfaces.contains(Interface::Component) {
            return Ok(None);
        }
        let (x, y, w, h) = self.component(dest, path)?.get_extents(CoordType::Screen)?;
        if w <= 0 || h <= 0 {
            return Ok(None);
        }
        let mut name = proxy.name()?;
        if name.trim().is_empty() {
            name = proxy.description().unwrap_or_default();
        }
        let name = clip_value(name.trim());
        let editable = states.contains(State::Editable);
        let value = if editable && interfaces.contains(Interface::Text) {
            self.read_text(dest, path).ok().filter(|t| !t.is_empty())
        } else {
            None
        };
        // A label without text says nothing to the planner.
        if kind == "label" && name.is_empty() {
            return Ok(None);
        }
        let actions = if interfaces.contains(Interface::Action) {
            self.action(dest, path)?
                .get_actions()
                .map(|a| a.into_iter().map(|a| a.name).collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        Ok(Some(RawElement {
            role: kind.to_string(),
            name,
            value,
            state: element_state(states),
            clickable: is_control(kind) || !actions.is_empty(),
            editable,
            actions,
            bounds: input_rect_to_pixels(geometry, x, y, w, h),
            handle: format!("{dest}{path}"),
        }))
    }

    fn read_text(&self, dest: &str, path: &str) -> zbus::Result<String> {
        let text = self.text(dest, path)?;
        let count = text.character_count()?.clamp(0, MAX_TEXT_READ);
        Ok(clip_value(&text.get_text(0, count)?))
    }

    fn walk(&self, dest: &str, path: &str, depth: usize, walk: &mut Walk<'_>) -> zbus::Result<()> {
        if walk.out_of_budget() {
            walk.truncated = true;
            return Ok(());
        }
        let proxy = self.accessible(dest, path)?;
        let states = proxy.get_state()?;
        if !states.contains(State::Showing) || states.contains(State::Defunct) {
            return Ok(());
        }
        let role = proxy.get_role()?;
        if states.contains(State::Visible) {
            if let Some(el) = self.read_element(dest, path, &proxy, role, states, walk.geometry)? {
                walk.found.push(el);
            }
        }
        if depth >= walk.budget.max_depth {
            walk.truncated = true;
            return Ok(());
        }
        // A container managing its descendants (large tables, trees) creates children on
        // demand: walking it would create thousands of objects in the application.
        if states.contains(State::ManagesDescendants) {
            return Ok(());
        }
        for child in proxy.get_children()? {
            let child_dest = child.name_as_str().unwrap_or(dest).to_string();
            // A child that vanished mid-walk is not an error of the capture.
            let _ = self.walk(&child_dest, child.path_as_str(), depth + 1, walk);
        }
        Ok(())
    }

    fn split_handle(handle: &str) -> Result<(&str, &str)> {
        handle
            .find('/')
            .map(|i| handle.split_at(i))
            .ok_or_else(|| Error::runner(format!("malformed AT-SPI element handle {handle:?}")))
    }
}

struct Walk<'a> {
    geometry: &'a ScreenGeometry,
    budget: &'a ElementBudget,
    started: Instant,
    found: Vec<RawElement>,
    truncated: bool,
}

impl Walk<'_> {
    fn out_of_budget(&self) -> bool {
        // Twice the kept maximum: elements off the monitor are dropped only afterwards.
        self.found.len() >= self.budget.max_elements.saturating_mul(2)
            || self.started.elapsed() >= self.budget.max_time()
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
        let mut walk = Walk {
            geometry,
            budget,
            started,
            found: Vec::new(),
            truncated: false,
        };
        for (dest, path) in &windows {
            // A window that closes mid-walk loses its elements, not the capture.
            if let Err(e) = self.walk(dest, path, 0, &mut walk) {
                tracing::debug!("accessibility walk of {dest}{path}: {e}");
            }
        }
        let truncated = walk.truncated;
        let mut table = ElementTable::from_raw(
            walk.found,
            geometry.image_width,
            geometry.image_height,
            budget.max_elements,
        );
        table.truncated |= truncated;
        table.source = self.name().to_string();
        table.capture_ms = started.elapsed().as_millis() as u64;
        if table.truncated {
            tracing::warn!(
                "element capture cut short by its budget ({} elements, {} ms)",
                table.elements.len(),
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
        let (dest, path) = Self::split_handle(&element.raw.handle)?;
        let stale = |why: String| {
            Error::runner(format!(
                "element {:?} ({} {:?}) is stale: {why} (the screen changed since the \
                 screenshot); look again",
                element.id, element.raw.role, element.raw.name
            ))
        };
        let proxy = self
            .accessible(dest, path)
            .map_err(|e| stale(format!("it cannot be reached ({e})")))?;
        let states = proxy
            .get_state()
            .map_err(|_| stale("it is gone".to_string()))?;
        if states.contains(State::Defunct) {
            return Err(stale("it is gone".to_string()));
        }
        if !states.contains(State::Showing) || !states.contains(State::Visible) {
            return Err(stale("it is no longer shown".to_string()));
        }
        let role = proxy
            .get_role()
            .map_err(|_| stale("it is gone".to_string()))?;
        let now = self
            .read_element(dest, path, &proxy, role, states, geometry)
            .map_err(|_| stale("it is gone".to_string()))?
            .ok_or_else(|| stale("it has no extents any more".to_string()))?;
        // Object paths can be reused by toolkits: a different role or name is another control.
        if now.role != element.raw.role || now.name != element.raw.name {
            return Err(stale(format!(
                "the object is now {} {:?}",
                now.role, now.name
            )));
        }
        Ok(now)
    }

    fn invoke(&mut self, element: &ScreenElement, action: &str) -> Result<()> {
        let (dest, path) = Self::split_handle(&element.raw.handle)?;
        let what = format!("accessible action {action:?} on {:?}", element.id);
        let failed = |e: zbus::Error| Error::runner_caused(what.clone(), e);
        let refused = |why: &str| Error::runner(format!("{what}: {why}"));
        let proxy = self.action(dest, path).map_err(failed)?;
        let actions = proxy.get_actions().map_err(failed)?;
        let index = actions
            .iter()
            .position(|a| a.name == action)
            .ok_or_else(|| refused("the element no longer offers it"))?;
        let index = i32::try_from(index).map_err(|e| Error::runner_caused(what.clone(), e))?;
        match proxy.do_action(index) {
            Ok(true) => Ok(()),
            Ok(false) => Err(refused("the application refused it")),
            Err(e) => Err(failed(e)),
        }
    }
}

/// The short role name of roles a user acts on or reads; `None` for containers, decoration
/// and everything else.
fn short_role(role: Role) -> Option<&'static str> {
    Some(match role {
        Role::Button | Role::PushButtonMenu => "button",
        Role::ToggleButton => "toggle",
        Role::CheckBox => "checkbox",
        Role::RadioButton => "radio",
        Role::MenuItem | Role::CheckMenuItem | Role::RadioMenuItem | Role::TearoffMenuItem => {
            "menuitem"
        }
        Role::Menu => "menu",
        Role::Link => "link",
        Role::Entry | Role::Text | Role::PasswordText => "text",
        // Kept apart from text fields: the gate judges what is typed into a terminal as a
        // command line.
        Role::Terminal => "terminal",
        Role::SpinButton => "spin",
        Role::ComboBox => "combobox",
        Role::Slider => "slider",
        Role::ListItem => "listitem",
        Role::TreeItem => "treeitem",
        Role::TableCell => "cell",
        Role::PageTab => "tab",
        Role::Label | Role::Static | Role::Caption | Role::StatusBar => "label",
        Role::Heading => "heading",
        Role::Paragraph => "paragraph",
        _ => return None,
    })
}

/// Whether elements of this short role are controls (clicking them does something).
fn is_control(kind: &str) -> bool {
    !matches!(kind, "label" | "heading" | "paragraph")
}

fn element_state(states: StateSet) -> ElementState {
    ElementState {
        focused: states.contains(State::Focused),
        selected: states.contains(State::Selected),
        enabled: states.contains(State::Enabled) || states.contains(State::Sensitive),
        checked: states.contains(State::Checked) || states.contains(State::Pressed),
        expanded: states.contains(State::Expanded),
    }
}
