//! What the runner drives ([`Desktop`], the real [`XDesktop`]) and how target ids become
//! points on it ([`TargetResolver`], the default [`XyResolver`]; element ids of the
//! accessibility tree go through [`ElementResolver`]).

use std::sync::atomic::{AtomicBool, Ordering};

use cel_contracts::PlanningView;

use super::capture::{self, Capture, MonitorInfo, ScreenCapturer};
use super::coords::{InputPoint, ScreenGeometry};
use super::elements::{
    ClickVia, ElementBudget, ElementFacts, ElementSource, ElementTable, ScreenElement,
};
use super::input::{EnigoInput, InputDevice};
use crate::error::{Error, Result};
use crate::moves::{parse_point, parse_target, Target};

// ─── Desktop ────────────────────────────────────────────────────────────────

/// What the runner drives: a screen to capture and an input device.
pub trait Desktop {
    /// Captures the chosen monitor.
    fn capture(&mut self) -> Result<Capture>;
    /// The input device.
    fn input(&mut self) -> &mut dyn InputDevice;
    /// Where on-screen elements come from, when this desktop has an accessibility tree.
    fn elements(&mut self) -> Option<&mut dyn ElementSource> {
        None
    }
    /// A fingerprint of the top-level windows (which exist, which has focus), where the
    /// desktop can tell; the runner compares it while it waits for the application
    /// ([`settle`](super::settle)).
    fn windows_signature(&mut self) -> Option<u64> {
        None
    }
}

/// Whether the "no accessibility bus" notice was printed (once per process).
static NO_BUS_NOTICE: AtomicBool = AtomicBool::new(false);

/// The element source of an [`XDesktop`]: connected on first use, so a run without elements
/// never touches D-Bus.
enum ElementsState {
    NotTried,
    Connected(Box<dyn ElementSource>),
    Unavailable,
}

impl std::fmt::Debug for ElementsState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NotTried => "NotTried",
            Self::Connected(_) => "Connected",
            Self::Unavailable => "Unavailable",
        })
    }
}

/// The real desktop: xcap for screenshots, enigo for input, on `$DISPLAY`.
#[derive(Debug)]
pub struct XDesktop {
    capturer: ScreenCapturer,
    input: EnigoInput,
    elements: ElementsState,
}

impl XDesktop {
    /// Opens monitor `monitor` (the primary one when `None`) and the input backend. Fails with
    /// a clear [`Error::Runner`] when there is no display, no such monitor, or no input backend.
    pub fn open(monitor: Option<usize>) -> Result<Self> {
        capture::check_display_env()?;
        let capturer = ScreenCapturer::open(monitor)?;
        let input = EnigoInput::connect(None)?;
        Ok(Self {
            capturer,
            input,
            elements: ElementsState::NotTried,
        })
    }

    /// A desktop that reads no accessibility tree: the planner sees points only.
    pub fn without_elements(mut self) -> Self {
        self.elements = ElementsState::Unavailable;
        self
    }

    /// Connects the platform's element source. Without one (no accessibility bus, another
    /// platform) the desktop has no elements, and says so once on stderr.
    fn connect_elements() -> ElementsState {
        #[cfg(all(target_os = "linux", feature = "accessibility"))]
        let connected =
            super::elements::AtspiSource::connect().map(|s| Box::new(s) as Box<dyn ElementSource>);
        #[cfg(not(all(target_os = "linux", feature = "accessibility")))]
        let connected: Result<Box<dyn ElementSource>> = Err(Error::runner(
            "no accessibility tree: this build reads elements only from AT-SPI2 on Linux",
        ));
        match connected {
            Ok(source) => ElementsState::Connected(source),
            Err(e) => {
                if !NO_BUS_NOTICE.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "sightline: {e}; the planner sees the screenshot and xy: points only"
                    );
                }
                ElementsState::Unavailable
            }
        }
    }

    /// The monitor being driven.
    pub fn monitor(&self) -> &MonitorInfo {
        self.capturer.monitor()
    }
}

impl Desktop for XDesktop {
    fn capture(&mut self) -> Result<Capture> {
        self.capturer.capture()
    }

    fn input(&mut self) -> &mut dyn InputDevice {
        &mut self.input
    }

    fn elements(&mut self) -> Option<&mut dyn ElementSource> {
        if matches!(self.elements, ElementsState::NotTried) {
            self.elements = Self::connect_elements();
        }
        match &mut self.elements {
            ElementsState::Connected(source) => Some(source.as_mut()),
            _ => None,
        }
    }

    /// The window manager's client list with the focused window (empty on a display without
    /// one, such as a bare Xvfb), and the accessibility tree's top-level windows where there is
    /// a bus: either one seeing a window open is enough.
    fn windows_signature(&mut self) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        capture::window_list().hash(&mut hasher);
        if !matches!(self.elements, ElementsState::Unavailable) {
            self.elements()
                .and_then(|source| source.windows_signature())
                .hash(&mut hasher);
        }
        Some(hasher.finish())
    }
}

/// Reads the elements of one capture from `desktop`, or `None` when it has no source or the
/// read fails (logged: a turn goes on with points only rather than fail).
pub fn capture_elements(
    desktop: &mut dyn Desktop,
    geometry: &ScreenGeometry,
    budget: &ElementBudget,
) -> Option<ElementTable> {
    let source = desktop.elements()?;
    match source.capture(geometry, budget) {
        Ok(table) => Some(table),
        Err(e) => {
            tracing::warn!("element capture failed, points only this turn: {e}");
            None
        }
    }
}

// ─── Target resolution ──────────────────────────────────────────────────────

/// Turns a target id into a point on screen.
pub trait TargetResolver: Send + Sync {
    /// Resolves `target_id` against the view and the screenshot geometry the planner saw.
    fn resolve(
        &self,
        target_id: &str,
        view: &PlanningView,
        geometry: &ScreenGeometry,
    ) -> Result<InputPoint>;
}

/// The default resolver: only `xy:X,Y` points. Element ids are an error that says a resolver
/// is needed, since a [`PlanningElement`](cel_contracts::PlanningElement) carries no bounds.
#[derive(Debug, Default, Clone, Copy)]
pub struct XyResolver;

impl TargetResolver for XyResolver {
    fn resolve(
        &self,
        target_id: &str,
        view: &PlanningView,
        geometry: &ScreenGeometry,
    ) -> Result<InputPoint> {
        match parse_target(target_id)? {
            Target::Point(p) => geometry.to_input(p),
            Target::Element(_) => {
                let known = view.elements.iter().any(|e| e.id == target_id);
                Err(Error::runner(format!(
                    "target {target_id:?} is not an xy:X,Y point{}; this runner resolves only \
                     coordinate targets (give it a TargetResolver for element ids)",
                    if known {
                        " (it is an element of the view, but elements carry no screen bounds)"
                    } else {
                        " and not an element of the view"
                    }
                )))
            }
        }
    }
}

// ─── Element ids ────────────────────────────────────────────────────────────

/// How a click on an element id is carried out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementClick {
    /// The way the element's source judged right ([`ClickVia`]): its accessible action (a
    /// button's `click`, a check box's `toggle`), a selection (a table row), a focus grab (a
    /// text field, whose only action may submit its form), else the pointer; and the pointer
    /// where the accessible way fails. The default: an action reaches the control even where
    /// the pointer would land on a tooltip, a popup or an overlapping window, needs no window
    /// manager to hand over focus, and cannot hit a neighbour when bounds are a pixel off.
    #[default]
    Action,
    /// Always the pointer, at the centre of the element's visible part, as a hand would.
    Pointer,
}

/// An element id resolved against the capture the planner saw and checked again now.
#[derive(Debug, Clone)]
pub struct ElementTarget {
    /// The element as captured, with its bounds and visible part updated to now.
    pub element: ScreenElement,
    /// Where a pointer click aims: the centre of the visible part, in input coordinates.
    pub point: InputPoint,
    /// How a click reaches it.
    pub click: ClickVia,
}

/// Resolves element ids of an [`ElementTable`]: each resolution re-reads the element through
/// its source, so an id whose element is gone, hidden or replaced since the capture is a
/// stale-id error, never a click at the old place.
pub struct ElementResolver<'a> {
    /// The capture the planner saw.
    pub table: &'a ElementTable,
    /// Its source, to re-read elements and invoke actions.
    pub source: &'a mut dyn ElementSource,
    /// The geometry of that capture.
    pub geometry: &'a ScreenGeometry,
    /// How clicks are carried out.
    pub click: ElementClick,
}

impl ElementResolver<'_> {
    /// The element `id` as it is now, or `Ok(None)` when `id` is not in the table.
    pub fn resolve(&mut self, id: &str) -> Result<Option<ElementTarget>> {
        let Some(captured) = self.table.get(id) else {
            return Ok(None);
        };
        let now = self.source.refresh(captured, self.geometry)?;
        let screen = super::elements::PixelRect::image(
            self.geometry.image_width,
            self.geometry.image_height,
        );
        let visible = now.bounds.intersect(&screen).ok_or_else(|| {
            Error::runner(format!(
                "element {id:?} is stale: it moved off the captured monitor since the screenshot"
            ))
        })?;
        let element = ScreenElement {
            id: captured.id.clone(),
            raw: now,
            visible,
        };
        let (px, py) = element.click_pixel();
        let point = self.geometry.input_of_pixel(px, py);
        let click = match self.click {
            ElementClick::Pointer => ClickVia::Pointer,
            ElementClick::Action => element.raw.click.clone(),
        };
        Ok(Some(ElementTarget {
            element,
            point,
            click,
        }))
    }

    /// Invokes an accessible action on a resolved element.
    pub fn invoke(&mut self, target: &ElementTarget, action: &str) -> Result<()> {
        self.source.invoke(&target.element, action)
    }
}

/// What the screen says a target is: the element of that id (as re-read now, or as captured
/// when it cannot be re-read), or for an `xy:` point the innermost captured element under it.
pub fn element_facts(
    target_id: &str,
    table: &ElementTable,
    source: Option<&mut dyn ElementSource>,
    geometry: &ScreenGeometry,
) -> Option<ElementFacts> {
    let facts = |e: &ScreenElement, name: String| ElementFacts {
        id: e.id.clone(),
        role: e.raw.role.clone(),
        name,
    };
    if let Some(e) = table.get(target_id) {
        let name = source
            .and_then(|s| s.refresh(e, geometry).ok())
            .map(|now| now.name)
            .unwrap_or_else(|| e.raw.name.clone());
        return Some(facts(e, name));
    }
    let rel = parse_point(target_id)?;
    let p = geometry.to_input(rel).ok()?;
    let (px, py) = geometry.pixel_of_input(p);
    table
        .hit_test(px.round() as i32, py.round() as i32)
        .map(|e| facts(e, e.raw.name.clone()))
}
