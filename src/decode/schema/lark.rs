//! The move grammar in llguidance's Lark dialect, strings one unbounded lexeme each (their
//! token bounds are the decoder's, `budget.rs`).

use cel_contracts::StepKind;

use super::lexemes::{json_string, step_kind_tag, EXPECT_VALUE_OPEN, NUMBER, STRING_BODY};
use super::MoveSpec;
use crate::moves::target::int_regex;
use crate::moves::{
    coordinate_regex, ActionKind, FieldKind, COORDINATE_MAX, KEY_NAMES, MAX_EXPECT_MS,
};

impl MoveSpec {
    /// The grammar in llguidance's Lark dialect, strings bounded by tokens.
    pub fn lark(&self) -> String {
        self.lark_from("start")
    }

    /// [`lark`](Self::lark) with the move's rule named `start` (instead of `start`), so
    /// another grammar can put something before the move (a Thinking variant's thought).
    /// The move's other rules keep their names.
    pub fn lark_from(&self, start: &str) -> String {
        let l = &self.limits;
        let mut g = String::new();
        let mut kinds = Vec::new();
        if !self.actions.is_empty() {
            kinds.push("batch");
        }
        kinds.extend(["done", "fail", "clarify"]);
        // With a thought, the move object opens with it and each kind's rule starts
        // after the `{`: `{"thought":"…","kind":…}`.
        let open = if l.thought_tokens > 0 {
            g += &format!(
                "{start}: {} sentence \",\" ({})\n",
                lit(r#"{"thought":"#),
                kinds.join(" | ")
            );
            ""
        } else {
            g += &format!("{start}: {}\n", kinds.join(" | "));
            "{"
        };
        if !self.actions.is_empty() {
            g += &format!(
                "batch: {} sentence {} step {} \"]}}\"\n",
                lit(&format!(r#"{open}"kind":"batch","purpose":"#)),
                lit(r#","steps":["#),
                up_to(&format!("{} step", lit(",")), l.max_steps - 1),
            );
            g += &format!(
                "step: {} sentence ({} | {}) {} action \"}}\"\n",
                lit(r#"{"purpose":"#),
                lit(&format!(
                    r#","kind":"{}""#,
                    step_kind_tag(StepKind::Deterministic)
                )),
                lit(&format!(
                    r#","kind":"{}""#,
                    step_kind_tag(StepKind::LlmAssisted)
                )),
                lit(r#","action":"#),
            );
            let names: Vec<String> = self
                .actions
                .iter()
                .map(|a| format!("act_{}", a.tag()))
                .collect();
            g += &format!("action: {}\n", names.join(" | "));
            for a in &self.actions {
                g += &self.action_lark(*a);
            }
            g += &self.number_terminals();
            g += &self.targets_lark();
        }
        g += &format!(
            "done: {} sentence {} data \"}}\"\n",
            lit(&format!(r#"{open}"kind":"done","summary":"#)),
            lit(r#","extracted_data":"#),
        );
        g += &format!(
            "fail: {} sentence \"}}\"\n",
            lit(&format!(r#"{open}"kind":"fail","reason":"#))
        );
        g += &format!(
            "clarify: {} sentence \"}}\"\n",
            lit(&format!(r#"{open}"kind":"clarify","question":"#))
        );

        // Strings: one unbounded lexeme, so llguidance answers masks inside them from
        // its precomputed token slices. Their token bounds are enforced by the decoder
        // (see `string_caps`): llguidance's own `max_tokens` truncates a lexeme
        // anywhere, even inside a UTF-8 character or an escape.
        g +=
            &format!("sentence: STRING\ntext: STRING\ndstr: STRING\nSTRING: /\"{STRING_BODY}\"/\n");
        let more = l.data_entries.saturating_sub(1);
        g += &format!(
            "data: \"null\" | dstr | \"{{\" (entry {})? \"}}\" | \"[\" (scalar {})? \"]\"\n",
            up_to("\",\" entry", more),
            up_to("\",\" scalar", more),
        );
        g += "entry: dstr \":\" scalar\n";
        g += &format!(
            "scalar: dstr | NUMBER | \"true\" | \"false\" | \"null\"\nNUMBER: /{NUMBER}/\n"
        );
        g
    }

    /// The rule of one action, rendered from its fields ([`ActionKind::fields`]): one
    /// alternative per combination of its optional fields, each field's key forced and its
    /// value one rule of its [`FieldKind`].
    fn action_lark(&self, kind: ActionKind) -> String {
        let fields = self.fields_this_turn(kind);
        let optional: Vec<usize> = (0..fields.len()).filter(|&i| fields[i].optional).collect();
        let forms: Vec<String> = (0..1usize << optional.len())
            .map(|mask| {
                let present = fields.iter().enumerate().filter(|(i, f)| {
                    !f.optional
                        || optional
                            .iter()
                            .position(|o| o == i)
                            .is_some_and(|bit| mask & (1 << bit) != 0)
                });
                let mut parts = Parts::default();
                parts.literal(&format!(r#"{{"type":"{}","#, kind.tag()));
                for (n, (_, field)) in present.enumerate() {
                    let comma = if n > 0 { "," } else { "" };
                    parts.literal(&format!(r#"{comma}"{}":"#, field.name));
                    parts.value(field.kind);
                }
                parts.literal("}");
                parts.render()
            })
            .collect();
        format!("act_{}: {}\n", kind.tag(), forms.join(" | "))
    }

    /// The terminals of the bounded numbers the allowed actions use, each defined once.
    fn number_terminals(&self) -> String {
        let l = &self.limits;
        let kinds: Vec<FieldKind> = self
            .actions
            .iter()
            .flat_map(|a| a.fields().iter().map(|f| f.kind))
            .collect();
        let mut g = String::new();
        if kinds.contains(&FieldKind::Scroll) {
            g += &format!("SCROLL: /{}/\n", int_regex(l.max_scroll, true));
        }
        if kinds.contains(&FieldKind::WaitMs) {
            g += &format!("WAIT_MS: /{}/\n", int_regex(l.max_wait_ms, false));
        }
        if kinds.contains(&FieldKind::Coordinate) {
            g += &format!("COORD: /{}/\n", int_regex(COORDINATE_MAX, false));
        }
        g
    }

    /// Element ids and key names as one terminal each (a regex alternation of their
    /// JSON strings) rather than one literal per name: the same language, but one
    /// lexeme instead of hundreds, which makes compiling the grammar cheaper.
    fn targets_lark(&self) -> String {
        let mut g = String::new();
        let mut alternatives = Vec::new();
        if !self.target_ids.is_empty() {
            let ids: Vec<String> = self
                .target_ids
                .iter()
                .map(|id| regex_literal(&json_string(id)))
                .collect();
            alternatives.push("ELEMENT_ID");
            g += &format!("ELEMENT_ID: /{}/\n", ids.join("|"));
        }
        if self.coordinate_targets {
            alternatives.push("XY_TARGET");
            g += &format!("XY_TARGET: /\"{}\"/\n", coordinate_regex());
        }
        if !alternatives.is_empty() {
            g += &format!("target: {}\n", alternatives.join(" | "));
        }
        // `expect_after`: the one expectation a screen-only runtime can check (the
        // screen changes within the timeout); selector expectations need a page.
        g += &format!(
            "expect_value: {} EXPECT_MS \"}}\"\nEXPECT_MS: /{}/\n",
            lit(EXPECT_VALUE_OPEN),
            int_regex(MAX_EXPECT_MS, false)
        );
        let keys: Vec<String> = KEY_NAMES
            .iter()
            .map(|k| regex_literal(&json_string(k)))
            .collect();
        g += &format!("key: KEY\nKEY: /{}/\n", keys.join("|"));
        g
    }
}

/// A rule's body as it is built: literals and rule names, adjacent literals merged (one
/// lexeme, so the forced text is one run).
#[derive(Default)]
struct Parts {
    items: Vec<String>,
    pending: String,
}

impl Parts {
    fn literal(&mut self, text: &str) {
        self.pending.push_str(text);
    }

    fn value(&mut self, kind: FieldKind) {
        let rule = match kind {
            FieldKind::Target => "target",
            FieldKind::Text => "text",
            FieldKind::Key => "key",
            FieldKind::Keys => "\"[\" key \",\" key (\",\" key){0,2} \"]\"",
            FieldKind::Scroll => "SCROLL",
            FieldKind::WaitMs => "WAIT_MS",
            FieldKind::Coordinate => "COORD",
            FieldKind::ExpectAfter => "expect_value",
        };
        self.flush();
        self.items.push(rule.to_string());
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.items.push(lit(&std::mem::take(&mut self.pending)));
        }
    }

    fn render(mut self) -> String {
        self.flush();
        self.items.join(" ")
    }
}

/// `(item){0,max}` in Lark, or nothing when `max` is 0: llguidance rejects a `{0,0}`
/// repetition ("End number in range cannot be 0"), which a one-step or one-entry limit made.
pub(crate) fn up_to(item: &str, max: usize) -> String {
    if max == 0 {
        String::new()
    } else {
        format!("({item}){{0,{max}}}")
    }
}

/// A regex matching exactly `s`: ASCII letters and digits as they are, every other
/// character as a `\x{…}` escape (ids are user data: quotes, slashes, backslashes,
/// control characters and any Unicode are all literal here, in Lark's `/…/` too).
pub(crate) fn regex_literal(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_string()
            } else {
                format!("\\x{{{:X}}}", c as u32)
            }
        })
        .collect()
}

/// `s` as a Lark string literal. Lark literals use JSON string syntax, except that
/// a raw DEL (which serde_json leaves unescaped) is not allowed in them.
pub(crate) fn lit(s: &str) -> String {
    json_string(s).replace('\u{7f}', "\\u007f")
}
