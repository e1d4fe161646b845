//! Capabilities: what the runtime behind a view can execute, announced by id in
//! `view.capabilities`. The runner announces them, the grammar switches actions on and off by
//! them, and the prompt shows them.

use cel_contracts::PlanningView;

/// Capability id (in `view.capabilities`) that switches native mouse and keyboard on.
pub const CAPABILITY_NATIVE_INPUT: &str = "native_input";

/// Capability ids starting with this prefix (`cdp_bound`, …) mean a Chrome DevTools
/// Protocol client is bound: `navigate` and `cdp_eval` become executable.
pub const CAPABILITY_CDP_PREFIX: &str = "cdp";

/// The capability id announcing that a screenshot accompanies the view.
pub const CAPABILITY_VISION: &str = "vision";

/// Runtime capabilities read from a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Native mouse and keyboard input is wired up.
    pub native_input: bool,
    /// A CDP client is bound.
    pub cdp: bool,
}

impl Capabilities {
    /// Read the capabilities of `view`. A view that lists none at all is a desktop
    /// with native input and no CDP.
    pub fn from_view(view: &PlanningView) -> Self {
        if view.capabilities.is_empty() {
            return Capabilities {
                native_input: true,
                cdp: false,
            };
        }
        let has = |pred: &dyn Fn(&str) -> bool| view.capabilities.iter().any(|c| pred(&c.id));
        Capabilities {
            native_input: has(&|id| id == CAPABILITY_NATIVE_INPUT),
            cdp: has(&|id| id.starts_with(CAPABILITY_CDP_PREFIX)),
        }
    }
}
