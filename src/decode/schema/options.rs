//! What the caller asks of a turn's grammar: the actions its runtime executes, whether `xy:`
//! points are targets, and the move's limits.

use crate::moves::{ActionKind, MoveLimits};

/// What the caller's runtime can execute, and how moves are bounded.
#[derive(Debug, Clone, PartialEq)]
pub struct GrammarOptions {
    /// Action types the runtime can execute. The view's capabilities then switch
    /// off those it cannot run this turn (native input, CDP). Default: the desktop
    /// set plus `navigate` and `cdp_eval` (which only a CDP capability enables).
    pub actions: Vec<ActionKind>,
    /// Allow `xy:X,Y` targets (integers 0–1000 on the screenshot) besides element
    /// ids. On for Sightline's runner; off for runtimes that resolve only ids, where
    /// a view without elements allows no `click`, `drag` or `set_value`, and no
    /// `select` (which is coordinates only).
    pub coordinate_targets: bool,
    /// Bounds on steps, strings and numbers.
    pub limits: MoveLimits,
}

impl Default for GrammarOptions {
    fn default() -> Self {
        let mut actions = ActionKind::DESKTOP.to_vec();
        actions.extend([ActionKind::Navigate, ActionKind::CdpEval]);
        GrammarOptions {
            actions,
            coordinate_targets: true,
            limits: MoveLimits::default(),
        }
    }
}
