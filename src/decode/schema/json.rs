//! The move grammar as a JSON schema (llguidance's dialect), strings bounded by characters.

use cel_contracts::StepKind;
use serde_json::{json, Map, Value};

use super::lexemes::step_kind_tag;
use super::MoveSpec;
use crate::moves::{
    coordinate_regex, ActionKind, FieldKind, COORDINATE_MAX, KEY_NAMES, MAX_EXPECT_MS,
};

impl MoveSpec {
    /// The grammar as a JSON schema (llguidance dialect: `x-guidance` makes the JSON
    /// compact). Strings are bounded by `maxLength`.
    pub fn json_schema(&self) -> Value {
        let l = &self.limits;
        let chars = |tokens: usize| tokens * l.chars_per_token;
        let string =
            |tokens: usize| json!({"type": "string", "minLength": 1, "maxLength": chars(tokens)});
        let sentence = string(l.sentence_tokens);
        let mut variants = Vec::new();
        if !self.actions.is_empty() {
            let actions: Vec<Value> = self
                .actions
                .iter()
                .map(|a| self.action_schema(*a))
                .collect();
            let step_kind = json!({"enum": [step_kind_tag(StepKind::Deterministic), step_kind_tag(StepKind::LlmAssisted)]});
            variants.push(object(vec![
                ("kind", json!({"const": "batch"})),
                ("purpose", sentence.clone()),
                (
                    "steps",
                    json!({
                        "type": "array", "minItems": 1, "maxItems": l.max_steps,
                        "items": object(
                            vec![("purpose", sentence.clone()), ("kind", step_kind), ("action", json!({"anyOf": actions}))],
                        ),
                    }),
                ),
            ]));
        }
        let data_string = string(l.data_string_tokens);
        let scalar = json!({"anyOf": [data_string, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]});
        let data = json!({"anyOf": [
            {"type": "null"},
            data_string,
            {"type": "object", "maxProperties": l.data_entries, "additionalProperties": scalar},
            {"type": "array", "maxItems": l.data_entries, "items": scalar},
        ]});
        variants.push(object(vec![
            ("kind", json!({"const": "done"})),
            ("summary", sentence.clone()),
            ("extracted_data", data),
        ]));
        variants.push(object(vec![
            ("kind", json!({"const": "fail"})),
            ("reason", sentence.clone()),
        ]));
        variants.push(object(vec![
            ("kind", json!({"const": "clarify"})),
            ("question", sentence),
        ]));
        if l.thought_tokens > 0 {
            let thought = string(l.thought_tokens);
            for variant in &mut variants {
                with_thought_first(variant, &thought);
            }
        }
        json!({
            "x-guidance": {"whitespace_flexible": false, "item_separator": ",", "key_separator": ":"},
            "anyOf": variants,
        })
    }

    fn target_schema(&self) -> Value {
        let mut options = Vec::new();
        if !self.target_ids.is_empty() {
            options.push(json!({"enum": self.target_ids}));
        }
        if self.coordinate_targets {
            options.push(json!({"type": "string", "pattern": format!("^{}$", coordinate_regex())}));
        }
        json!({"anyOf": options})
    }

    /// The schema of one action, from its fields ([`ActionKind::fields`]).
    fn action_schema(&self, kind: ActionKind) -> Value {
        let l = &self.limits;
        let key = json!({"enum": KEY_NAMES});
        let value = |field_kind: FieldKind| match field_kind {
            FieldKind::Target => self.target_schema(),
            FieldKind::Text => {
                json!({"type": "string", "minLength": 1, "maxLength": l.text_tokens * l.chars_per_token})
            }
            FieldKind::Key => key.clone(),
            FieldKind::Keys => {
                json!({"type": "array", "minItems": 2, "maxItems": 4, "items": key.clone()})
            }
            FieldKind::Scroll => {
                json!({"type": "integer", "minimum": -(l.max_scroll as i64), "maximum": l.max_scroll})
            }
            FieldKind::WaitMs => json!({"type": "integer", "minimum": 0, "maximum": l.max_wait_ms}),
            FieldKind::Coordinate => {
                json!({"type": "integer", "minimum": 0, "maximum": COORDINATE_MAX})
            }
            FieldKind::ExpectAfter => expect_schema(),
        };
        let fields = self.fields_this_turn(kind);
        let mut properties = vec![("type", json!({"const": kind.tag()}))];
        properties.extend(fields.iter().map(|f| (f.name, value(f.kind))));
        let optional: Vec<&str> = fields
            .iter()
            .filter(|f| f.optional)
            .map(|f| f.name)
            .collect();
        object_with_optional(properties, &optional)
    }
}

/// The `expect_after` the grammar allows: the screen changes within a timeout.
fn expect_schema() -> Value {
    object(vec![
        ("kind", json!({"const": "dom_changed"})),
        (
            "timeout_ms",
            json!({"type": "integer", "minimum": 0, "maximum": MAX_EXPECT_MS}),
        ),
    ])
}

/// Put a required `thought` property first in a move variant's object schema.
fn with_thought_first(variant: &mut Value, thought: &Value) {
    let Some(object) = variant.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        let mut reordered = Map::new();
        reordered.insert("thought".to_string(), thought.clone());
        reordered.extend(std::mem::take(properties));
        *properties = reordered;
    }
    if let Some(Value::Array(required)) = object.get_mut("required") {
        required.insert(0, json!("thought"));
    }
}

/// A closed object schema with all `fields` required, in order.
fn object(fields: Vec<(&str, Value)>) -> Value {
    object_with_optional(fields, &[])
}

fn object_with_optional(fields: Vec<(&str, Value)>, optional: &[&str]) -> Value {
    let required: Vec<&str> = fields
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !optional.contains(k))
        .collect();
    let mut properties = Map::new();
    for (k, v) in fields {
        properties.insert(k.to_string(), v);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}
