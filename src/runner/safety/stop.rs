//! Stopping a run from outside: a flag Ctrl-C sets, checked between steps, and the pointer
//! pushed into the monitor's top-left corner.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::runner::coords::{InputPoint, ScreenGeometry};

/// A flag the runner checks between steps; setting it stops the run cleanly (no step is cut
/// in half, held keys are released).
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the run to stop at the next check.
    pub fn request_stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was requested.
    pub fn is_stop_requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Installs a Ctrl-C (SIGINT) handler that sets this flag. A second Ctrl-C while
    /// the flag is already set exits the process with status 130, for a runner stuck in a step.
    /// Only one handler can be installed per process; a second call is an error.
    pub fn install_ctrlc_handler(&self) -> Result<()> {
        let flag = self.clone();
        ctrlc::set_handler(move || {
            if flag.is_stop_requested() {
                std::process::exit(130);
            }
            flag.request_stop();
        })
        .map_err(|e| Error::Runner(format!("cannot install the Ctrl-C handler: {e}")))
    }
}

/// How close (in input pixels, both axes) to the monitor's top-left corner the pointer must be
/// for the fail-safe to fire. Small, like pyautogui's exact (0, 0), but tolerant of a pointer
/// that stops a pixel short of the edge.
pub const FAILSAFE_CORNER_PX: i32 = 2;

/// Whether `pointer` sits in the top-left corner of the monitor described by `geometry`.
pub fn in_failsafe_corner(pointer: InputPoint, geometry: &ScreenGeometry) -> bool {
    let dx = pointer.x - geometry.origin_x;
    let dy = pointer.y - geometry.origin_y;
    (0..=FAILSAFE_CORNER_PX).contains(&dx) && (0..=FAILSAFE_CORNER_PX).contains(&dy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corner_failsafe_is_relative_to_the_monitor_origin() {
        let g = ScreenGeometry::physical(1920, 0, 1280, 800);
        assert!(in_failsafe_corner(InputPoint { x: 1921, y: 1 }, &g));
        assert!(!in_failsafe_corner(InputPoint { x: 1925, y: 1 }, &g));
        assert!(!in_failsafe_corner(InputPoint { x: 1919, y: 0 }, &g));
    }
}
