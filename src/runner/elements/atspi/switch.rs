//! Switching accessibility on, as a screen reader does, and back off afterwards.
//!
//! GTK 3 applications register with the accessibility bus whatever the session says; browsers
//! (Firefox, Chromium), Qt and Electron applications build their trees only while the bus
//! launcher's `org.a11y.Status.IsEnabled` property is true, which a screen reader sets when
//! it starts. A desktop without one has it false, and such an application shows no elements.
//! The source sets `IsEnabled` when it connects and, if it was false, sets it back when the
//! source is dropped (the end of a `run` or a `view`). `ScreenReaderEnabled` is left alone:
//! it tells applications that speech is on, and some change how they behave for it.
//!
//! Applications that were already running register and build their trees once they see the
//! property change: [`wait_for_applications`] gives them that moment.

use std::time::{Duration, Instant};

use atspi::proxy::accessible::AccessibleProxyBlocking;
use atspi::proxy::bus::{BusProxyBlocking, StatusProxyBlocking};
use zbus::blocking::Connection;

use crate::error::{Error, Result};

/// Longest wait for applications to register after accessibility was switched on.
pub const REGISTER_WAIT_MAX: Duration = Duration::from_millis(3_000);
/// The registry must list the same number of applications for this long to end the wait.
pub const REGISTER_STABLE: Duration = Duration::from_millis(800);
/// Between looks at the registry.
const REGISTER_POLL: Duration = Duration::from_millis(100);

/// `IsEnabled` switched on, and put back when dropped if it was off.
pub struct AccessibilitySwitch {
    session: Connection,
    restore: bool,
}

impl AccessibilitySwitch {
    /// Sets `IsEnabled` on the session bus `session`; remembers whether it was off.
    pub fn turn_on(session: Connection) -> zbus::Result<Self> {
        let status = StatusProxyBlocking::new(&session)?;
        let was_on = status.is_enabled()?;
        if !was_on {
            status.set_is_enabled(true)?;
        }
        Ok(Self {
            session,
            restore: !was_on,
        })
    }

    /// Whether this switch turned accessibility on (it was off).
    pub fn switched_on(&self) -> bool {
        self.restore
    }
}

impl Drop for AccessibilitySwitch {
    fn drop(&mut self) {
        if !self.restore {
            return;
        }
        let restored =
            StatusProxyBlocking::new(&self.session).and_then(|status| status.set_is_enabled(false));
        if let Err(e) = restored {
            tracing::warn!("could not switch accessibility back off (org.a11y.Status): {e}");
        }
    }
}

/// Sets `IsEnabled` on the session bus at `address` and leaves it on, and wakes the
/// accessibility registry: for a session made for one task, whose applications should start
/// with their trees, as under a screen reader. A Qt application that starts before anything
/// has called the registry (which the accessibility bus starts on the first call) finds it
/// unreachable and never registers.
pub fn switch_on_session(address: &str) -> Result<()> {
    let fail = |e: zbus::Error| {
        Error::runner_caused(
            format!("cannot switch accessibility on for the session bus at {address}"),
            e,
        )
    };
    let session = zbus::blocking::connection::Builder::address(address)
        .and_then(|b| b.build())
        .map_err(fail)?;
    StatusProxyBlocking::new(&session)
        .and_then(|status| status.set_is_enabled(true))
        .map_err(fail)?;
    let a11y_address = BusProxyBlocking::new(&session)
        .and_then(|bus| bus.get_address())
        .map_err(fail)?;
    let a11y = zbus::blocking::connection::Builder::address(a11y_address.as_str())
        .and_then(|b| b.build())
        .map_err(fail)?;
    AccessibleProxyBlocking::builder(&a11y)
        .destination(super::REGISTRY)
        .and_then(|b| b.path(super::ROOT_PATH))
        .and_then(|b| b.cache_properties(zbus::proxy::CacheProperties::No).build())
        .and_then(|root| root.get_children())
        .map_err(fail)?;
    Ok(())
}

/// Waits until `count` (the applications registered) has stayed the same for
/// [`REGISTER_STABLE`], at most [`REGISTER_WAIT_MAX`].
pub fn wait_for_applications(count: impl Fn() -> usize) {
    let started = Instant::now();
    let mut last = count();
    let mut stable_since = Instant::now();
    while started.elapsed() < REGISTER_WAIT_MAX {
        std::thread::sleep(REGISTER_POLL);
        let now = count();
        if now != last {
            last = now;
            stable_since = Instant::now();
        } else if stable_since.elapsed() >= REGISTER_STABLE {
            return;
        }
    }
}
