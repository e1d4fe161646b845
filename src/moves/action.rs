//! The action types a move's steps may use, by their `type` tag: their fields in order, what
//! each means, and what each needs from the runtime.
//!
//! [`ActionKind::fields`] is the one description of an action's shape: the grammar renders
//! its rules from it (Lark and JSON schema), the decoder's token budget sums it, and the
//! prompt's instructions show it ([`super::language`]), so the model is told exactly what the
//! grammar accepts.

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

    /// Whether the action can be written at all without `xy:` points (`select` has only
    /// coordinates).
    pub fn needs_coordinate_targets(self) -> bool {
        self == ActionKind::Select
    }

    /// Whether the action needs a bound CDP client.
    pub fn needs_cdp(self) -> bool {
        matches!(self, ActionKind::Navigate | ActionKind::CdpEval)
    }

    /// The action's fields after its `type` tag, in the order serde writes them (which is
    /// the order the grammar forces).
    pub fn fields(self) -> &'static [Field] {
        use FieldKind::*;
        const fn f(name: &'static str, kind: FieldKind) -> Field {
            Field {
                name,
                kind,
                optional: false,
            }
        }
        const fn opt(name: &'static str, kind: FieldKind) -> Field {
            Field {
                name,
                kind,
                optional: true,
            }
        }
        match self {
            ActionKind::Click => {
                const { &[f("target_id", Target), opt("expect_after", ExpectAfter)] }
            }
            ActionKind::Type => const { &[opt("target_id", Target), f("text", Text)] },
            ActionKind::Key => const { &[f("key", Key)] },
            ActionKind::KeyCombo => const { &[f("keys", Keys)] },
            ActionKind::SetValue => {
                const {
                    &[
                        f("target_id", Target),
                        f("value", Text),
                        opt("expect_after", ExpectAfter),
                    ]
                }
            }
            ActionKind::Scroll => const { &[f("dx", Scroll), f("dy", Scroll)] },
            ActionKind::Drag => const { &[f("from_target_id", Target), f("to_target_id", Target)] },
            ActionKind::Wait => const { &[f("ms", WaitMs)] },
            ActionKind::Select => {
                const {
                    &[
                        f("from_x", Coordinate),
                        f("from_y", Coordinate),
                        f("to_x", Coordinate),
                        f("to_y", Coordinate),
                    ]
                }
            }
            ActionKind::Extract => const { &[f("goal", Text), f("data", Text)] },
            ActionKind::Navigate => const { &[f("url", Text)] },
            ActionKind::CdpEval => const { &[f("expression", Text)] },
        }
    }

    /// What the action does, in one sentence, for the prompt.
    pub fn explanation(self) -> &'static str {
        match self {
            ActionKind::Click => "clicks an element or a point",
            ActionKind::Type => {
                "types text where the keyboard focus is, or into the target after clicking it"
            }
            ActionKind::Key => "presses one key",
            ActionKind::KeyCombo => {
                "presses 2 to 4 keys together, modifiers first (ctrl, alt, shift, meta)"
            }
            ActionKind::SetValue => "sets a field's value directly, without typing",
            ActionKind::Scroll => {
                "turns the mouse wheel where the pointer is: dy > 0 scrolls down (the content \
                 moves up), dy < 0 up, dx > 0 right, dx < 0 left, in wheel notches"
            }
            ActionKind::Drag => "drags from one target to another with the left button",
            ActionKind::Wait => "waits, when the screen needs time to change",
            ActionKind::Select => {
                "selects text by dragging from one point to another (coordinates as in xy: \
                 targets)"
            }
            ActionKind::Extract => {
                "records what the screen shows (data) under a name (goal), for later steps and \
                 the final answer"
            }
            ActionKind::Navigate => "opens a URL in the bound browser",
            ActionKind::CdpEval => "evaluates a JavaScript expression in the bound browser",
        }
    }
}

/// One field of an action, after its `type` tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The JSON key.
    pub name: &'static str,
    /// What its value is.
    pub kind: FieldKind,
    /// Whether a step may leave it out.
    pub optional: bool,
}

/// What an action field holds; each kind has one rule in the grammar and one placeholder in
/// the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A target: an element id of the view or an `xy:X,Y` point.
    Target,
    /// A string (bounded by the text token limit).
    Text,
    /// One key name.
    Key,
    /// 2 to 4 key names.
    Keys,
    /// A signed scroll amount.
    Scroll,
    /// Milliseconds to wait.
    WaitMs,
    /// A coordinate 0..=1000.
    Coordinate,
    /// `{"kind":"dom_changed","timeout_ms":N}`: the screen must change within N ms.
    ExpectAfter,
}
