//! The terminals both renderings share: JSON strings, bounded numbers and integers, `xy:`
//! coordinate targets, `expect_after` and the step-kind tags.

use cel_contracts::StepKind;

/// Longest `expect_after` timeout a move may ask for, in milliseconds.
pub const MAX_EXPECT_MS: u32 = 5_000;

/// How a move's `expect_after` opens (`dom_changed` is the only kind the grammar emits).
pub(super) const EXPECT_AFTER_OPEN: &str = r#","expect_after":{"kind":"dom_changed","timeout_ms":"#;

/// Largest coordinate of an `xy:X,Y` target (Qwen3-VL's relative 0–1000 grid).
pub const COORDINATE_MAX: u32 = 1000;

/// A JSON string body: printable characters or the simple escapes. `\u` escapes are
/// left out: they would let a model write a lone surrogate that serde rejects.
pub(crate) const STRING_BODY: &str = r#"(?:[^"\\\x00-\x1F\x7F]|\\["\\\/bfnrt])+"#;

/// A JSON number of bounded size (no exponent).
pub(super) const NUMBER: &str = r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,6})?";

/// Longest text [`NUMBER`] matches: sign, 15 digits, point, 6 digits.
pub(super) const NUMBER_MAX_BYTES: usize = 1 + 15 + 1 + 6;

/// The `xy:X,Y` pattern, X and Y integers 0..=1000 without leading zeros.
pub fn coordinate_regex() -> String {
    let c = int_regex(COORDINATE_MAX, false);
    format!("xy:{c},{c}")
}

/// Parse an `xy:X,Y` target into its coordinates (0..=1000), `None` if it is not one.
pub fn parse_coordinate_target(id: &str) -> Option<(u32, u32)> {
    let rest = id.strip_prefix("xy:")?;
    let (x, y) = rest.split_once(',')?;
    let parse = |s: &str| -> Option<u32> {
        let canonical = !s.is_empty() && (s == "0" || !s.starts_with('0'));
        let all_digits = s.bytes().all(|b| b.is_ascii_digit());
        if !canonical || !all_digits || s.len() > 4 {
            return None;
        }
        s.parse().ok().filter(|v| *v <= COORDINATE_MAX)
    };
    Some((parse(x)?, parse(y)?))
}

/// A regex for the decimal integers 0..=`max` (no leading zeros), with an optional
/// minus sign for nonzero values when `signed`.
pub(super) fn int_regex(max: u32, signed: bool) -> String {
    if max == 0 {
        return "0".into();
    }
    let digits: Vec<u8> = max.to_string().bytes().map(|b| b - b'0').collect();
    let n = digits.len();
    let mut alternatives = Vec::new();
    // Fewer digits than max: any such number.
    if n >= 2 {
        alternatives.push(format!("[1-9][0-9]{{0,{}}}", n - 2));
    }
    // Exactly n digits, no larger than max: share a prefix of max, then a smaller digit.
    for i in 0..n {
        let d = digits[i];
        let low = if i == 0 { 1 } else { 0 };
        if d > low {
            let prefix: String = digits[..i].iter().map(|d| char::from(b'0' + d)).collect();
            alternatives.push(format!("{prefix}[{low}-{}][0-9]{{{}}}", d - 1, n - i - 1));
        }
    }
    alternatives.push(max.to_string());
    let nonzero = format!("(?:{})", alternatives.join("|"));
    if signed {
        format!("(?:0|-?{nonzero})")
    } else {
        format!("(?:0|{nonzero})")
    }
}

/// `s` as a JSON string, quotes included.
pub(super) fn json_string(s: &str) -> String {
    // Serializing a &str cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

pub(super) fn step_kind_tag(kind: StepKind) -> &'static str {
    match kind {
        StepKind::Deterministic => "deterministic",
        StepKind::LlmAssisted => "llm_assisted",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_regex_covers_exactly_the_range() {
        let rx = |max, signed| regex_lite_match(&int_regex(max, signed));
        for max in [0u32, 7, 10, 99, 100, 1000, 5000, 10_000, 12_345] {
            let m = rx(max, false);
            for v in 0..=(max + 50) {
                assert_eq!(m(&v.to_string()), v <= max, "max {max} value {v}");
            }
            assert!(!m("01"));
            let s = rx(max, true);
            assert!(s(&format!("-{max}")) || max == 0);
            assert!(!s("-0"));
        }
    }

    /// A tiny matcher for the regexes above, built on llguidance's own regex engine.
    fn regex_lite_match(rx: &str) -> impl Fn(&str) -> bool {
        let mut builder = llguidance::derivre::RegexBuilder::new();
        let expr = builder
            .mk_regex(&format!("^{rx}$"))
            .unwrap_or_else(|e| panic!("{rx}: {e}"));
        let regex = std::cell::RefCell::new(builder.to_regex(expr));
        move |s: &str| regex.borrow_mut().is_match(s)
    }

    #[test]
    fn coordinate_targets_parse_only_canonical_points_in_range() {
        assert_eq!(parse_coordinate_target("xy:0,1000"), Some((0, 1000)));
        assert_eq!(parse_coordinate_target("xy:500,20"), Some((500, 20)));
        for bad in [
            "xy:1001,0",
            "xy:01,2",
            "xy:-1,2",
            "xy:1,",
            "xy:1.5,2",
            "xy:1,2,3",
            "1,2",
        ] {
            assert_eq!(parse_coordinate_target(bad), None, "{bad}");
        }
    }
}
