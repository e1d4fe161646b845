//! What the runner drives ([`Desktop`], the real [`XDesktop`]) and how target ids become
//! points on it ([`TargetResolver`], the default [`XyResolver`]).

use cel_contracts::PlanningView;

use super::capture::{self, Capture, MonitorInfo, ScreenCapturer};
use super::coords::{self, InputPoint, ScreenGeometry};
use super::input::{EnigoInput, InputDevice};
use crate::error::{Error, Result};

// ─── Desktop ────────────────────────────────────────────────────────────────

/// What the runner drives: a screen to capture and an input device.
pub trait Desktop {
    /// Captures the chosen monitor.
    fn capture(&mut self) -> Result<Capture>;
    /// The input device.
    fn input(&mut self) -> &mut dyn InputDevice;
}

/// The real desktop: xcap for screenshots, enigo for input, on `$DISPLAY`.
#[derive(Debug)]
pub struct XDesktop {
    capturer: ScreenCapturer,
    input: EnigoInput,
}

impl XDesktop {
    /// Opens monitor `monitor` (the primary one when `None`) and the input backend. Fails with
    /// a clear [`Error::Runner`] when there is no display, no such monitor, or no input backend.
    pub fn open(monitor: Option<usize>) -> Result<Self> {
        capture::check_display_env()?;
        let capturer = ScreenCapturer::open(monitor)?;
        let input = EnigoInput::connect(None)?;
        Ok(Self { capturer, input })
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
        match coords::parse_xy_target(target_id)? {
            Some(p) => geometry.to_input(p),
            None => {
                let known = view.elements.iter().any(|e| e.id == target_id);
                Err(Error::Runner(format!(
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
