//! The `computer_use` tool call's grammar, rendered from the tool's description
//! ([`CuAction::params`], [`Param`]): one alternative per action the turn offers, its
//! parameters in order, JSON spelled as Python's `json.dumps` spells it, as the models were
//! trained.

use super::AnswerSpec;
use crate::decode::bounds::TextSpan;
use crate::decode::schema::{
    json_string, lit, regex_literal, up_to, STRING_BODY, STRING_OVERSHOOT_TOKENS,
};
use crate::moves::dialect::computer_use::{
    key_table, CuAction, Param, ACTION_LINE_PREFIX, FUNCTION_NAME, MAX_KEYS, STATUSES,
    TOOL_CALL_CLOSE, TOOL_CALL_OPEN,
};
use crate::moves::target::int_regex;
use crate::moves::{ActionKind, COORDINATE_MAX};

/// What a call writes before its action's name.
fn call_open() -> String {
    format!("\n{{\"name\": \"{FUNCTION_NAME}\", \"arguments\": {{\"action\": ")
}

/// What a call writes after its last parameter.
const CALL_CLOSE: &str = "}}\n";

impl AnswerSpec {
    /// The grammar of a `computer_use` answer, its first rule named `start`.
    pub(super) fn computer_use_lark(&self, start: &str) -> String {
        let Some(tool) = &self.tool else {
            return String::new();
        };
        let mut g = String::new();
        let call = format!(
            "<{TOOL_CALL_OPEN}> {} cu_action {} <{TOOL_CALL_CLOSE}>",
            lit(&call_open()),
            lit(CALL_CLOSE)
        );
        if tool.action_line {
            g += &format!(
                "{start}: {} ACTION_SENTENCE \"\\n\" {call}\nACTION_SENTENCE: /[^\\n]+/\n",
                lit(ACTION_LINE_PREFIX)
            );
        } else {
            g += &format!("{start}: {call}\n");
        }
        let names: Vec<String> = tool
            .actions
            .iter()
            .map(|a| format!("cu_{}", a.name()))
            .collect();
        g += &format!("cu_action: {}\n", names.join(" | "));
        for action in &tool.actions {
            // The action's name and each parameter's key as one literal: one forced run.
            let mut parts = Vec::new();
            let mut pending = format!("\"{}\"", action.name());
            for param in action.params() {
                pending += &format!(", \"{}\": ", param.name());
                parts.push(lit(&std::mem::take(&mut pending)));
                parts.push(self.param_rule(*param));
            }
            if !pending.is_empty() {
                parts.push(lit(&pending));
            }
            g += &format!("cu_{}: {}\n", action.name(), parts.join(" "));
        }
        let l = self.moves.limits();
        let params = tool.params();
        if params.contains(&Param::Keys) {
            let keys: Vec<String> = key_table()
                .iter()
                .map(|(name, _)| regex_literal(&json_string(name)))
                .collect();
            g += &format!("PY_KEY: /{}/\n", keys.join("|"));
        }
        if params.contains(&Param::Text) {
            g += &format!("CU_TEXT: /\"{STRING_BODY}\"/\n");
        }
        if params.contains(&Param::Coordinate) {
            g += &format!("CU_COORD: /{}/\n", int_regex(COORDINATE_MAX, false));
        }
        if params.contains(&Param::Pixels) {
            g += &format!("CU_PIXELS: /{}/\n", int_regex(l.max_scroll, true));
        }
        if params.contains(&Param::Time) {
            // Whole seconds up to the longest wait, or one decimal (a longer wait is cut to
            // the limit when translated).
            g += &format!(
                "CU_SECONDS: /{}(\\.[0-9])?/\n",
                int_regex(l.max_wait_ms / 1000, false)
            );
        }
        g
    }

    /// The rule of one parameter's value.
    fn param_rule(&self, param: Param) -> String {
        match param {
            Param::Keys => {
                let (min, max) = self.key_counts();
                let mut rule = String::from("\"[\" PY_KEY");
                for _ in 1..min {
                    rule += " \", \" PY_KEY";
                }
                let more = up_to("\", \" PY_KEY", max - min);
                if !more.is_empty() {
                    rule += &format!(" {more}");
                }
                rule + " \"]\""
            }
            Param::Text => "CU_TEXT".into(),
            Param::Coordinate => "\"[\" CU_COORD \", \" CU_COORD \"]\"".into(),
            Param::Pixels => "CU_PIXELS".into(),
            Param::Time => "CU_SECONDS".into(),
            Param::Status => {
                let statuses: Vec<String> = STATUSES.iter().map(|s| lit(&json_string(s))).collect();
                format!("({})", statuses.join(" | "))
            }
        }
    }

    /// How many keys a `key` call presses: 1 when a single `key` is allowed, else from 2;
    /// up to [`MAX_KEYS`] when `key_combo` is allowed, else 1.
    fn key_counts(&self) -> (usize, usize) {
        let allowed = self.moves.allowed_actions();
        let min = if allowed.contains(&ActionKind::Key) {
            1
        } else {
            2
        };
        let max = if allowed.contains(&ActionKind::KeyCombo) {
            MAX_KEYS
        } else {
            1
        };
        (min, max.max(min))
    }

    /// The `Action:` sentence, bounded like a sentence of a JSON move.
    pub(super) fn computer_use_spans(&self) -> Vec<TextSpan> {
        vec![TextSpan {
            after: ACTION_LINE_PREFIX.as_bytes().to_vec(),
            end: b'\n',
            tokens: self.moves.limits().sentence_tokens,
        }]
    }

    /// The most tokens a `computer_use` answer can take (fixed text a token per byte).
    pub(super) fn computer_use_max_tokens(&self) -> usize {
        let Some(tool) = &self.tool else {
            return 0;
        };
        let l = self.moves.limits();
        let line = if tool.action_line {
            ACTION_LINE_PREFIX.len() + l.sentence_tokens + STRING_OVERSHOOT_TOKENS
        } else {
            0
        };
        let key = key_table()
            .iter()
            .map(|(name, _)| name.len() + 2)
            .max()
            .unwrap_or(0);
        let int = |max: u32| max.to_string().len() + 1;
        let value = |param: &Param| match param {
            Param::Keys => 2 + MAX_KEYS * (key + 2),
            Param::Text => l.text_tokens + STRING_OVERSHOOT_TOKENS,
            Param::Coordinate => 2 * int(COORDINATE_MAX) + 4,
            Param::Pixels => int(l.max_scroll),
            Param::Time => int(l.max_wait_ms / 1000) + 2,
            Param::Status => STATUSES.iter().map(|s| s.len() + 2).max().unwrap_or(0),
        };
        let action = tool
            .actions
            .iter()
            .map(|a: &CuAction| {
                a.name().len()
                    + 2
                    + a.params()
                        .iter()
                        .map(|p| p.name().len() + 6 + value(p))
                        .sum::<usize>()
            })
            .max()
            .unwrap_or(0);
        line + 1 + call_open().len() + action + CALL_CLOSE.len() + 1
    }
}
