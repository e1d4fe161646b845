//! Action dialects: the output language a model family was trained to answer in, and how an
//! answer in it becomes a [`NextMove`](cel_contracts::NextMove).
//!
//! Sightline's own language is the `NextMove` JSON ([`Dialect::Json`], the default): the
//! prompt teaches it ([`super::MoveLanguage`]) and the grammar forces it. GUI fine-tunes of
//! Qwen3-VL were trained on their own formats instead, and forcing them into another one
//! throws away what they learned. A dialect here is three things rendered from one
//! description, as for the JSON language (ARCHITECTURE.md, decision 18):
//!
//! - the prompt the model was trained with (system text, the user turn's wording),
//! - the grammar that constrains decoding to the dialect, built per turn from what the runtime
//!   can execute (`crate::decode` renders it from the same tables), and
//! - the translation of an answer into a `NextMove` ([`computer_use::translate`],
//!   [`grounding::translate`]).
//!
//! | dialect | answer | models |
//! |---|---|---|
//! | `json` | Sightline's `NextMove` JSON | any (the default) |
//! | `qwen-computer-use` | `<tool_call>` with a `computer_use` call | Qwen3-VL (the cookbook's agent) |
//! | `qwen-computer-use-action` | `Action: <sentence>` then the same tool call | GUI-Owl-1.5, UI-MOPD, OSWorld's Qwen3-VL agent |
//! | `grounding-point` | a bare point `[x,y]`, or `[-1,-1]` | UI-Venus-1.5 |
//! | `grounding-answer` | `<grounding_think>…</grounding_think>` then `<answer>{"coordinate":[x,y]}</answer>` | MAI-UI |
//!
//! Every coordinate of these dialects is on the 0–1000 grid over the screenshot, which is
//! Sightline's own `xy:` space (decision 5), so points translate one to one. The dialects other
//! than `json` have no element ids: their models were trained on screenshots alone.

pub mod computer_use;
pub mod grounding;
mod py_json;

use crate::error::{Error, Result};
use crate::named_text::named_text;

pub use py_json::python_json;

/// A model family's output language (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Dialect {
    /// Sightline's `NextMove` JSON, taught by its own prompt.
    #[default]
    Json,
    /// Qwen's `computer_use` tool call alone: `<tool_call>\n{"name": "computer_use",
    /// "arguments": {...}}\n</tool_call>`.
    ComputerUse,
    /// The same tool call after a one-sentence `Action:` line.
    ComputerUseAction,
    /// A grounding model's bare point `[x,y]` (`[-1,-1]`: no such element).
    GroundingPoint,
    /// A grounding model's `<grounding_think>` reasoning, then
    /// `<answer>\n{"coordinate":[x,y]}\n</answer>`.
    GroundingAnswer,
}

impl Dialect {
    /// Every dialect, in the order the README lists them.
    pub const ALL: &'static [Dialect] = &[
        Dialect::Json,
        Dialect::ComputerUse,
        Dialect::ComputerUseAction,
        Dialect::GroundingPoint,
        Dialect::GroundingAnswer,
    ];

    /// The name manifests use.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Json => "json",
            Dialect::ComputerUse => "qwen-computer-use",
            Dialect::ComputerUseAction => "qwen-computer-use-action",
            Dialect::GroundingPoint => "grounding-point",
            Dialect::GroundingAnswer => "grounding-answer",
        }
    }

    /// What its answers look like, in a few words (`sightline models info`).
    pub fn summary(self) -> &'static str {
        match self {
            Dialect::Json => "Sightline's NextMove JSON",
            Dialect::ComputerUse => "a computer_use tool call, coordinates 0-1000",
            Dialect::ComputerUseAction => {
                "an Action: sentence, then a computer_use tool call, coordinates 0-1000"
            }
            Dialect::GroundingPoint => "one point [x,y] on 0-1000 (a click), [-1,-1] for none",
            Dialect::GroundingAnswer => {
                "<grounding_think> reasoning, then <answer>{\"coordinate\":[x,y]}</answer> \
                 on 0-1000 (a click)"
            }
        }
    }

    /// Whether answers name elements of the view by id (only Sightline's own JSON does; the
    /// other dialects point with coordinates).
    pub fn has_element_ids(self) -> bool {
        self == Dialect::Json
    }

    /// Whether the dialect only ever clicks: a grounding model answers one point.
    pub fn is_grounding(self) -> bool {
        matches!(self, Dialect::GroundingPoint | Dialect::GroundingAnswer)
    }

    /// Whether answers are a `computer_use` tool call.
    pub fn is_computer_use(self) -> bool {
        matches!(self, Dialect::ComputerUse | Dialect::ComputerUseAction)
    }

    /// Whether a one-sentence `Action:` line comes before the tool call.
    pub fn has_action_line(self) -> bool {
        self == Dialect::ComputerUseAction
    }
}

named_text!(Dialect, "action dialect");

/// An answer that is not in its dialect, or that has no `NextMove` equivalent: an
/// [`Error::Decode`] carrying the text, as for a JSON move that does not parse.
fn not_a_move(reason: impl Into<String>, text: &str) -> Error {
    Error::decode(text, reason)
}

/// A point answer as Sightline's `xy:` target, checked to lie on the 0–1000 grid.
fn point_target(x: i64, y: i64, text: &str) -> Result<String> {
    super::RelativePoint::new(x, y)
        .map(super::RelativePoint::target_id)
        .map_err(|e| not_a_move(e.to_string(), text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dialect_name_reads_back_and_unknown_names_list_the_known_ones() -> Result<()> {
        for d in Dialect::ALL {
            assert_eq!(d.name().parse::<Dialect>()?, *d);
        }
        let err = match "qwen".parse::<Dialect>() {
            Err(e) => e.to_string(),
            Ok(d) => return Err(Error::internal(format!("qwen parsed as {d}"))),
        };
        assert!(err.contains("qwen-computer-use-action"), "{err}");
        Ok(())
    }

    #[test]
    fn dialect_names_round_trip_and_an_unknown_one_lists_the_known() {
        for d in Dialect::ALL {
            assert_eq!(format!(" {d} ").parse::<Dialect>().ok(), Some(*d));
            let json = serde_json::Value::String(d.name().into());
            assert_eq!(serde_json::from_value::<Dialect>(json).ok(), Some(*d));
        }
        let known: Vec<&str> = Dialect::ALL.iter().map(|d| d.name()).collect();
        assert_eq!(
            "x".parse::<Dialect>().err().map(|e| e.to_string()),
            Some(format!(
                "invalid input: unknown action dialect \"x\"; known: {}",
                known.join(", ")
            ))
        );
    }
}
