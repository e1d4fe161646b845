//! The terminals both renderings share: JSON strings, bounded numbers and integers, `xy:`
//! coordinate targets, `expect_after` and the step-kind tags.

use cel_contracts::StepKind;

/// How an `expect_after` value opens (`dom_changed` is the only kind the grammar emits).
pub(super) const EXPECT_VALUE_OPEN: &str = r#"{"kind":"dom_changed","timeout_ms":"#;

/// A JSON string body: printable characters or the simple escapes. `\u` escapes are
/// left out: they would let a model write a lone surrogate that serde rejects.
pub(crate) const STRING_BODY: &str = r#"(?:[^"\\\x00-\x1F\x7F]|\\["\\\/bfnrt])+"#;

/// A JSON number of bounded size (no exponent).
pub(super) const NUMBER: &str = r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,6})?";

/// Longest text [`NUMBER`] matches: sign, 15 digits, point, 6 digits.
pub(super) const NUMBER_MAX_BYTES: usize = 1 + 15 + 1 + 6;

/// `s` as a JSON string, quotes included.
pub(crate) fn json_string(s: &str) -> String {
    // Serializing a &str cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

pub(super) fn step_kind_tag(kind: StepKind) -> &'static str {
    match kind {
        StepKind::Deterministic => "deterministic",
        StepKind::LlmAssisted => "llm_assisted",
    }
}
