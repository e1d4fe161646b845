//! Target syntax: a step's `target_id` names an element of the view, or a point `xy:X,Y` on
//! the screenshot the planner saw.
//!
//! Points are Qwen3-VL's own convention: integers from 0 to [`COORDINATE_MAX`] over the
//! image, `xy:0,0` its top-left corner and `xy:1000,1000` its bottom-right (ARCHITECTURE.md,
//! decision 5). [`parse_target`] is the one parser of that syntax (the grammar's check, the
//! runner, eval and replays all use it) and [`coordinate_regex`] the one pattern the grammar
//! constrains decoding with; a test pins that they accept the same strings.

use crate::error::{Error, Result};

/// The prefix of a point target.
pub const XY_PREFIX: &str = "xy:";

/// The largest coordinate of a point target (inclusive): the far edge of the screenshot.
pub const COORDINATE_MAX: u32 = 1000;

/// A point in the planner's relative space: both coordinates in `0..=COORDINATE_MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RelativePoint {
    /// Horizontal position, 0 = left edge, 1000 = right edge of the screenshot.
    pub x: u32,
    /// Vertical position, 0 = top edge, 1000 = bottom edge of the screenshot.
    pub y: u32,
}

impl RelativePoint {
    /// A point after checking both coordinates are within `0..=COORDINATE_MAX`.
    pub fn new(x: i64, y: i64) -> Result<Self> {
        let max = i64::from(COORDINATE_MAX);
        if !(0..=max).contains(&x) || !(0..=max).contains(&y) {
            return Err(Error::invalid_input(format!(
                "coordinate ({x},{y}) is outside the 0..={COORDINATE_MAX} space of the screenshot"
            )));
        }
        // Both values were just checked to lie in 0..=1000, so they fit a u32.
        Ok(Self {
            x: x as u32,
            y: y as u32,
        })
    }

    /// The target id naming this point (`xy:X,Y`).
    pub fn target_id(self) -> String {
        format!("{XY_PREFIX}{},{}", self.x, self.y)
    }
}

/// What a `target_id` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A point on the screenshot.
    Point(RelativePoint),
    /// An element of the view, by id.
    Element(&'a str),
}

/// Reads a target id: a point when it starts with `xy:`, else an element id.
///
/// A point is written exactly as the grammar writes it: `xy:X,Y`, X and Y decimal integers
/// 0..=1000 without sign, spaces or leading zeros. An id with the prefix and anything else
/// after it is an error naming the id (a replay written by hand, a caller's typo), never an
/// element id and never a point somewhere else.
pub fn parse_target(id: &str) -> Result<Target<'_>> {
    let Some(body) = id.strip_prefix(XY_PREFIX) else {
        return Ok(Target::Element(id));
    };
    let malformed = || {
        Error::invalid_input(format!(
            "target {id:?} is not a point xy:X,Y with integers 0..={COORDINATE_MAX} (no spaces \
             or leading zeros)"
        ))
    };
    let (x, y) = body.split_once(',').ok_or_else(malformed)?;
    let coordinate = |s: &str| -> Option<u32> {
        let canonical = s == "0" || (!s.is_empty() && !s.starts_with('0'));
        let digits = s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit());
        if canonical && digits {
            s.parse().ok().filter(|v| *v <= COORDINATE_MAX)
        } else {
            None
        }
    };
    match (coordinate(x), coordinate(y)) {
        (Some(x), Some(y)) => Ok(Target::Point(RelativePoint { x, y })),
        _ => Err(malformed()),
    }
}

/// The point a target id names; `None` for element ids and malformed points alike.
pub fn parse_point(id: &str) -> Option<RelativePoint> {
    match parse_target(id) {
        Ok(Target::Point(p)) => Some(p),
        _ => None,
    }
}

/// The regex of a point target, for the grammar: exactly the strings [`parse_target`]
/// reads as a point.
pub fn coordinate_regex() -> String {
    let c = int_regex(COORDINATE_MAX, false);
    format!("xy:{c},{c}")
}

/// A regex for the decimal integers 0..=`max` (no leading zeros), with an optional minus
/// sign for nonzero values when `signed`.
pub(crate) fn int_regex(max: u32, signed: bool) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A matcher for the regexes above, built on llguidance's own regex engine.
    fn regex_match(rx: &str) -> impl Fn(&str) -> bool {
        let mut builder = llguidance::derivre::RegexBuilder::new();
        let expr = builder
            .mk_regex(&format!("^{rx}$"))
            .unwrap_or_else(|e| panic!("{rx}: {e}"));
        let regex = std::cell::RefCell::new(builder.to_regex(expr));
        move |s: &str| regex.borrow_mut().is_match(s)
    }

    #[test]
    fn int_regex_covers_exactly_the_range() {
        for max in [0u32, 7, 10, 99, 100, 1000, 5000, 10_000, 12_345] {
            let m = regex_match(&int_regex(max, false));
            for v in 0..=(max + 50) {
                assert_eq!(m(&v.to_string()), v <= max, "max {max} value {v}");
            }
            assert!(!m("01"));
            let s = regex_match(&int_regex(max, true));
            assert!(s(&format!("-{max}")) || max == 0);
            assert!(!s("-0"));
        }
    }

    /// The grammar's pattern and the parser agree on every string of a hostile corpus:
    /// whatever the model can write parses, and nothing else parses as a point.
    #[test]
    fn the_parser_and_the_grammars_pattern_accept_the_same_points() -> Result<()> {
        let regex = regex_match(&coordinate_regex());
        let mut corpus: Vec<String> = [
            "xy:0,0",
            "xy:1000,1000",
            "xy:500,20",
            "xy:1001,0",
            "xy:01,2",
            "xy:-1,2",
            "xy:1,",
            "xy:,1",
            "xy:1.5,2",
            "xy:1,2,3",
            "xy: 1,2",
            "xy:1 ,2",
            "xy:+1,2",
            "xy:00,0",
            "xy:１,2",
            "XY:1,2",
            "xy:10000,1",
            "xy:",
            "1,2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for x in [0, 1, 9, 10, 99, 100, 999, 1000, 1001, 9999] {
            corpus.push(format!("xy:{x},{}", 1000 - x.min(1000)));
        }
        for id in &corpus {
            let point = parse_point(id);
            assert_eq!(point.is_some(), regex(id), "{id:?}");
            if let Some(p) = point {
                assert_eq!(&p.target_id(), id);
            }
            if id.starts_with(XY_PREFIX) && point.is_none() {
                assert!(parse_target(id).is_err(), "{id:?} must be an error");
            }
        }
        assert_eq!(parse_target("button_ok")?, Target::Element("button_ok"));
        Ok(())
    }
}
