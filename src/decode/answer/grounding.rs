//! The grounding dialects' grammars: a bare point (UI-Venus-1.5) or MAI-UI's reasoning and
//! tagged answer, coordinates on the 0–1000 grid.

use super::AnswerSpec;
use crate::decode::bounds::TextSpan;
use crate::decode::schema::{lit, STRING_OVERSHOOT_TOKENS};
use crate::moves::dialect::grounding::{
    ANSWER_CLOSE, ANSWER_OPEN, NO_POINT, THINK_CLOSE, THINK_OPEN,
};
use crate::moves::target::int_regex;
use crate::moves::{Dialect, COORDINATE_MAX};

impl AnswerSpec {
    /// The grammar of a grounding answer, its first rule named `start`. The comma of a point
    /// may be followed by a space (MAI-UI's prompt writes one, its answers none).
    pub(super) fn grounding_lark(&self, start: &str) -> String {
        let point = "G_COORD \",\" \" \"? G_COORD";
        let mut g = if self.dialect == Dialect::GroundingPoint {
            format!("{start}: \"[\" {point} \"]\" | {}\n", lit(NO_POINT))
        } else {
            let think = if self.thought_tokens > 0 {
                format!(
                    "{} G_THINK {}",
                    lit(THINK_OPEN),
                    lit(&format!("{THINK_CLOSE}\n"))
                )
            } else {
                lit(&format!("{THINK_OPEN}\n{THINK_CLOSE}\n"))
            };
            format!(
                "{start}: {think} {} {point} {}\nG_THINK: /[^<]+/\n",
                lit(ANSWER_OPEN),
                lit(ANSWER_CLOSE)
            )
        };
        g += &format!("G_COORD: /{}/\n", int_regex(COORDINATE_MAX, false));
        g
    }

    /// MAI-UI's reasoning, bounded like a thought (it ends at the `<` of its closing tag).
    pub(super) fn grounding_spans(&self) -> Vec<TextSpan> {
        if self.thought_tokens == 0 {
            return Vec::new();
        }
        vec![TextSpan {
            after: THINK_OPEN.as_bytes().to_vec(),
            end: b'<',
            tokens: self.thought_tokens,
        }]
    }

    /// The most tokens a grounding answer can take (fixed text a token per byte).
    pub(super) fn grounding_max_tokens(&self) -> usize {
        let point = 2 * COORDINATE_MAX.to_string().len() + 2;
        if self.dialect == Dialect::GroundingPoint {
            return (point + 2).max(NO_POINT.len());
        }
        let think = THINK_OPEN.len()
            + THINK_CLOSE.len()
            + 2
            + if self.thought_tokens > 0 {
                self.thought_tokens + STRING_OVERSHOOT_TOKENS
            } else {
                0
            };
        think + ANSWER_OPEN.len() + point + ANSWER_CLOSE.len()
    }
}
