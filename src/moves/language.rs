//! The move language explained to the model: the instructions the prompt carries, written from
//! the same description the grammar is rendered from ([`ActionKind::fields`], the limits, the
//! key names, the target syntax), so the prompt explains exactly what the grammar accepts.

use std::fmt::Write;

use super::action::{ActionKind, Field, FieldKind};
use super::keys::KEY_NAMES;
use super::limits::{MoveLimits, MAX_EXPECT_MS};
use super::target::COORDINATE_MAX;

/// Characters per token assumed when a token limit is stated in characters for the model
/// (Qwen's tokenizer averages about four on English text; three keeps the figure safe for
/// other text).
pub const PROMPT_CHARS_PER_TOKEN: usize = 3;

/// What a planner's moves may contain: the actions its runtime executes, whether `xy:` points
/// are targets, and the limits.
#[derive(Debug, Clone, Copy)]
pub struct MoveLanguage<'a> {
    /// The actions a batch may use (a turn may allow fewer; it lists them).
    pub actions: &'a [ActionKind],
    /// Whether `xy:X,Y` points are targets besides element ids.
    pub coordinate_targets: bool,
    /// The bounds the grammar enforces.
    pub limits: &'a MoveLimits,
}

impl MoveLanguage<'_> {
    /// The actions a move can contain at all: the given ones but those that need `xy:`
    /// points where points are not targets.
    pub fn actions(&self) -> Vec<ActionKind> {
        self.actions
            .iter()
            .copied()
            .filter(|a| self.coordinate_targets || !a.needs_coordinate_targets())
            .collect()
    }

    /// The instructions: the four kinds of move, each action with its fields, the targets,
    /// the keys, the limits. Written once per planner (the prompt's cached system turn).
    pub fn instructions(&self) -> String {
        let l = self.limits;
        let mut out = String::new();
        let thought = if l.thought_tokens > 0 {
            r#""thought":"...","#
        } else {
            ""
        };
        out.push_str("Answer with one JSON object and nothing else, in one of four forms:\n");
        let actions = self.actions();
        if !actions.is_empty() {
            let _ = writeln!(
                out,
                r#"{{{thought}"kind":"batch","purpose":"...","steps":[{{"purpose":"...","kind":"deterministic","action":{{...}}}}]}} runs 1 to {} steps, then you see the screen again. A step's kind is "deterministic" when its action is fully decided now, "llm_assisted" when its details depend on what the screen will show."#,
                l.max_steps
            );
        }
        let _ = writeln!(
            out,
            r#"{{{thought}"kind":"done","summary":"...","extracted_data":null}} when the screen shows the goal achieved; extracted_data is what the goal asked to find out (a string, or an object or list of at most {} entries), else null."#,
            l.data_entries
        );
        let _ = writeln!(
            out,
            r#"{{{thought}"kind":"fail","reason":"..."}} when the goal cannot be achieved from here."#
        );
        let _ = writeln!(
            out,
            r#"{{{thought}"kind":"clarify","question":"..."}} when the goal is ambiguous, or a step it needs was refused for lack of the user's permission."#
        );
        if l.thought_tokens > 0 {
            let _ = writeln!(
                out,
                "Start with \"thought\": one short sentence of reasoning (at most {} tokens).",
                l.thought_tokens
            );
        }
        if actions.is_empty() {
            return out;
        }
        out.push_str("\nActions (each turn lists the ones allowed then):\n");
        for kind in &actions {
            let forms: Vec<String> = self
                .forms(*kind)
                .iter()
                .map(|f| example(*kind, f))
                .collect();
            let _ = writeln!(out, "- {} {}.", forms.join(" or "), kind.explanation());
        }
        let kinds: Vec<FieldKind> = actions
            .iter()
            .flat_map(|a| a.fields().iter().map(|f| f.kind))
            .collect();
        out.push('\n');
        if kinds.contains(&FieldKind::Target) {
            if self.coordinate_targets {
                let _ = writeln!(
                    out,
                    "T, a target: an element id from the screen description, copied exactly, or a \
                     point \"xy:X,Y\" with X and Y integers from 0 to {COORDINATE_MAX} over the \
                     screenshot: xy:0,0 is its top-left corner, xy:{COORDINATE_MAX},{COORDINATE_MAX} \
                     its bottom-right. Elements are listed with their bounds in the same \
                     coordinates; two elements with the same name differ by their bounds."
                );
            } else {
                out.push_str(
                    "T, a target: an element id from the screen description, copied exactly.\n",
                );
            }
        }
        if kinds.contains(&FieldKind::Text) {
            let _ = writeln!(
                out,
                "S, a text: at most {} tokens (about {} characters); a longer text is cut there, \
                 so split it across several type steps, each going on where the last one \
                 stopped (the history shows how each typed text ended).",
                l.text_tokens,
                l.text_tokens * PROMPT_CHARS_PER_TOKEN
            );
        }
        if kinds.contains(&FieldKind::Key) || kinds.contains(&FieldKind::Keys) {
            let _ = writeln!(out, "K, a key name: {}.", KEY_NAMES.join(", "));
        }
        if kinds.contains(&FieldKind::Scroll) {
            let _ = writeln!(
                out,
                "DX, DY: scroll amounts from -{m} to {m}; up to 25 they are wheel notches, \
                 larger ones pixels.",
                m = l.max_scroll
            );
        }
        if kinds.contains(&FieldKind::Coordinate) {
            let _ = writeln!(
                out,
                "X: a coordinate from 0 to {COORDINATE_MAX} over the screenshot, as in xy: \
                 points."
            );
        }
        if kinds.contains(&FieldKind::WaitMs) {
            let _ = writeln!(out, "MS: milliseconds, at most {}.", l.max_wait_ms);
        }
        if kinds.contains(&FieldKind::ExpectAfter) {
            let _ = writeln!(
                out,
                "N: milliseconds, at most {MAX_EXPECT_MS}; with expect_after the step fails when \
                 the screen has not visibly changed within N ms."
            );
        }
        let _ = writeln!(
            out,
            "Sentences (purpose, summary, reason, question) are at most {} tokens.",
            l.sentence_tokens
        );
        out
    }

    /// Every form of `kind` the grammar accepts: one per combination of its optional fields
    /// (an optional target only where targets exist).
    pub fn forms(&self, kind: ActionKind) -> Vec<Vec<Field>> {
        let fields: Vec<Field> = kind.fields().to_vec();
        let optional: Vec<usize> = (0..fields.len()).filter(|&i| fields[i].optional).collect();
        (0..1usize << optional.len())
            .map(|mask| {
                fields
                    .iter()
                    .enumerate()
                    .filter(|(i, f)| {
                        !f.optional
                            || optional
                                .iter()
                                .position(|o| o == i)
                                .is_some_and(|bit| mask & (1 << bit) != 0)
                    })
                    .map(|(_, f)| *f)
                    .collect()
            })
            .collect()
    }
}

/// One form of an action as the prompt shows it: `{"type":"click","target_id":T}`, each
/// field's value a placeholder the instructions then explain.
pub fn example(kind: ActionKind, fields: &[Field]) -> String {
    let mut out = format!(r#"{{"type":"{}""#, kind.tag());
    for field in fields {
        let value = match field.kind {
            FieldKind::Target => "T".to_string(),
            FieldKind::Text => "S".to_string(),
            FieldKind::Key => "K".to_string(),
            FieldKind::Keys => "[K,K]".to_string(),
            FieldKind::Scroll => if field.name == "dx" { "DX" } else { "DY" }.to_string(),
            FieldKind::WaitMs => "MS".to_string(),
            FieldKind::Coordinate => "X".to_string(),
            FieldKind::ExpectAfter => r#"{"kind":"dom_changed","timeout_ms":N}"#.to_string(),
        };
        let _ = write!(out, r#","{}":{value}"#, field.name);
    }
    out.push('}');
    out
}
