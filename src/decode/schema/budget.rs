//! Token bounds: each string's bound, which the decoder enforces, and the most tokens any
//! move of a grammar can take, which is the decoder's budget for it.

use super::lexemes::{json_string, EXPECT_VALUE_OPEN, NUMBER_MAX_BYTES};
use super::MoveSpec;
use crate::moves::{ActionKind, FieldKind, COORDINATE_MAX, KEY_NAMES, MAX_EXPECT_MS};

/// Token bounds on JSON string values, enforced by the decoder: once a string has
/// taken its bound, the next token must close it (as soon as the grammar allows:
/// a character or an escape in progress is finished first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StringCaps {
    /// Bound of the string value of each key.
    pub by_key: Vec<(String, usize)>,
    /// Bound of every other string (object keys, array items, values of other keys).
    pub default_tokens: usize,
}

impl StringCaps {
    /// The bound of a string value of `key` (`None`: not the value of a key).
    pub fn for_key(&self, key: Option<&[u8]>) -> usize {
        key.and_then(|k| self.by_key.iter().find(|(name, _)| name.as_bytes() == k))
            .map_or(self.default_tokens, |(_, cap)| *cap)
    }
}

/// Tokens a bounded string may take beyond its bound: an escape finished (one), a
/// UTF-8 character finished (up to three, see `TokenEnv::character_finishers`), and the
/// token that closes it (one).
pub(crate) const STRING_OVERSHOOT_TOKENS: usize = 5;

impl MoveSpec {
    /// Token bounds of this grammar's strings, by the JSON key they are the value of;
    /// the decoder enforces them.
    pub fn string_caps(&self) -> StringCaps {
        let l = &self.limits;
        let mut by_key = Vec::new();
        for key in ["purpose", "summary", "reason", "question"] {
            by_key.push((key.to_string(), l.sentence_tokens));
        }
        if l.thought_tokens > 0 {
            by_key.push(("thought".to_string(), l.thought_tokens));
        }
        for key in ["text", "value", "goal", "data", "url", "expression"] {
            by_key.push((key.to_string(), l.text_tokens));
        }
        StringCaps {
            by_key,
            default_tokens: l.data_string_tokens,
        }
    }

    /// The most tokens any move of this grammar can take: the decoder's budget for it
    /// (so a decode always ends with a complete move). Derived from the Lark grammar's
    /// shape: every token outside strings carries at least one byte, so fixed text and
    /// numbers count one token per byte; a string counts its token bound plus
    /// `STRING_OVERSHOOT_TOKENS`. An over-estimate, never an under-estimate.
    pub fn max_move_tokens(&self) -> usize {
        let l = &self.limits;
        let string = |cap: usize| cap + STRING_OVERSHOOT_TOKENS;
        let sentence = string(l.sentence_tokens);
        let dstr = string(l.data_string_tokens);
        let thought = if l.thought_tokens > 0 {
            r#"{"thought":"#.len() + string(l.thought_tokens) + 1
        } else {
            0
        };
        // `"null"`, a string, or an object / array of `data_entries` scalars.
        let scalar = dstr.max(NUMBER_MAX_BYTES).max("false".len());
        let entries = l.data_entries.max(1);
        let data = (2 + entries * (dstr + 1 + scalar) + entries)
            .max(2 + entries * (scalar + 1))
            .max(dstr);
        let done = r#"{"kind":"done","summary":"#.len()
            + sentence
            + r#","extracted_data":"#.len()
            + data
            + 1;
        let fail = r#"{"kind":"fail","reason":"#.len() + sentence + 1;
        let clarify = r#"{"kind":"clarify","question":"#.len() + sentence + 1;
        let mut longest = done.max(fail).max(clarify);
        if let Some(action) = self
            .actions
            .iter()
            .map(|a| self.action_max_tokens(*a))
            .max()
        {
            let step = r#"{"purpose":"#.len()
                + sentence
                + r#","kind":"llm_assisted""#.len()
                + r#","action":"#.len()
                + action
                + 1;
            let batch = r#"{"kind":"batch","purpose":"#.len()
                + sentence
                + r#","steps":["#.len()
                + l.max_steps * (step + 1)
                + 2;
            longest = longest.max(batch);
        }
        thought + longest
    }

    /// The most tokens one action can take, from its fields ([`ActionKind::fields`]), each
    /// optional one counted as present.
    fn action_max_tokens(&self, kind: ActionKind) -> usize {
        let l = &self.limits;
        let text = l.text_tokens + STRING_OVERSHOOT_TOKENS;
        let target = self
            .target_ids
            .iter()
            .map(|id| json_string(id).len())
            .max()
            .unwrap_or(0)
            .max(r#""xy:1000,1000""#.len());
        let key = KEY_NAMES.iter().map(|k| k.len() + 2).max().unwrap_or(0);
        let int = |max: u32| max.to_string().len() + 1;
        let value = |field_kind: FieldKind| match field_kind {
            FieldKind::Target => target,
            FieldKind::Text => text,
            FieldKind::Key => key,
            FieldKind::Keys => 2 + 4 * (key + 1),
            FieldKind::Scroll => int(l.max_scroll),
            FieldKind::WaitMs => int(l.max_wait_ms),
            FieldKind::Coordinate => int(COORDINATE_MAX),
            FieldKind::ExpectAfter => EXPECT_VALUE_OPEN.len() + int(MAX_EXPECT_MS) + 1,
        };
        // `{"type":"…"` and the closing brace, then `,"name":value` for each field.
        let head = r#"{"type":"""#.len() + kind.tag().len() + 1;
        head + self
            .fields_this_turn(kind)
            .iter()
            .map(|f| 1 + f.name.len() + 3 + value(f.kind))
            .sum::<usize>()
    }
}
