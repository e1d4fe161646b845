//! The action types a move's steps may use, by their `type` tag, and what each needs from
//! the runtime.

use cel_contracts::PlannedAction;

/// The action types the grammar knows, by their `type` tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ActionKind {
    /// `click` an element or point (native input).
    Click,
    /// `type` text, optionally into a target first (native input).
    Type,
    /// Press one `key` (native input).
    Key,
    /// Press a `key_combo` of 2–4 keys (native input).
    KeyCombo,
    /// `set_value` through the accessibility API (not in the default set).
    SetValue,
    /// `scroll` by `dx`, `dy` (native input).
    Scroll,
    /// `drag` from one target to another (native input).
    Drag,
    /// `wait` some milliseconds.
    Wait,
    /// `select` text between two points of the 0–1000 grid (native input).
    Select,
    /// `extract` data from the screen.
    Extract,
    /// `navigate` to a URL (needs a CDP capability).
    Navigate,
    /// `cdp_eval` a JavaScript expression (needs a CDP capability).
    CdpEval,
}

impl ActionKind {
    /// Every action type, in the order the grammar lists them.
    pub const ALL: &'static [ActionKind] = &[
        ActionKind::Click,
        ActionKind::Type,
        ActionKind::Key,
        ActionKind::KeyCombo,
        ActionKind::SetValue,
        ActionKind::Scroll,
        ActionKind::Drag,
        ActionKind::Wait,
        ActionKind::Select,
        ActionKind::Extract,
        ActionKind::Navigate,
        ActionKind::CdpEval,
    ];

    /// The default desktop set.
    pub const DESKTOP: &'static [ActionKind] = &[
        ActionKind::Click,
        ActionKind::Type,
        ActionKind::Key,
        ActionKind::KeyCombo,
        ActionKind::Scroll,
        ActionKind::Drag,
        ActionKind::Wait,
        ActionKind::Select,
        ActionKind::Extract,
    ];

    /// The `type` tag as serde writes it.
    pub fn tag(self) -> &'static str {
        match self {
            ActionKind::Click => "click",
            ActionKind::Type => "type",
            ActionKind::Key => "key",
            ActionKind::KeyCombo => "key_combo",
            ActionKind::SetValue => "set_value",
            ActionKind::Scroll => "scroll",
            ActionKind::Drag => "drag",
            ActionKind::Wait => "wait",
            ActionKind::Select => "select",
            ActionKind::Extract => "extract",
            ActionKind::Navigate => "navigate",
            ActionKind::CdpEval => "cdp_eval",
        }
    }

    /// The kind of a planned action, `None` for actions the grammar never produces.
    pub fn of(action: &PlannedAction) -> Option<ActionKind> {
        Some(match action {
            PlannedAction::Click { .. } => ActionKind::Click,
            PlannedAction::Type { .. } => ActionKind::Type,
            PlannedAction::Key { .. } => ActionKind::Key,
            PlannedAction::KeyCombo { .. } => ActionKind::KeyCombo,
            PlannedAction::SetValue { .. } => ActionKind::SetValue,
            PlannedAction::Scroll { .. } => ActionKind::Scroll,
            PlannedAction::Drag { .. } => ActionKind::Drag,
            PlannedAction::Wait { .. } => ActionKind::Wait,
            PlannedAction::Select { .. } => ActionKind::Select,
            PlannedAction::Extract { .. } => ActionKind::Extract,
            PlannedAction::Navigate { .. } => ActionKind::Navigate,
            PlannedAction::CdpEval { .. } => ActionKind::CdpEval,
            _ => return None,
        })
    }

    /// Whether the action drives the native mouse or keyboard.
    pub fn needs_native_input(self) -> bool {
        matches!(
            self,
            ActionKind::Click
                | ActionKind::Type
                | ActionKind::Key
                | ActionKind::KeyCombo
                | ActionKind::Scroll
                | ActionKind::Drag
                | ActionKind::Select
        )
    }

    /// Whether the action needs a bound CDP client.
    pub fn needs_cdp(self) -> bool {
        matches!(self, ActionKind::Navigate | ActionKind::CdpEval)
    }
}
