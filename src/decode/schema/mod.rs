//! The per-turn move grammar: what a [`NextMove`](cel_contracts::NextMove) may look like
//! on this screen, for this runtime.
//!
//! [`MoveSpec::new`] resolves a [`PlanningView`] and [`GrammarOptions`] into the set of
//! actions the runtime can execute and the targets on screen. The spec renders two
//! equivalent grammars:
//!
//! - [`MoveSpec::json_schema`]: a JSON schema derived from the `cel-contracts` types
//!   (tag first, `additionalProperties: false`, compact JSON through llguidance's
//!   `x-guidance` options). Strings are bounded by `maxLength`.
//! - [`MoveSpec::lark`]: the same language as an llguidance Lark grammar, the engine's
//!   default. Strings are one unbounded lexeme there, bounded by **tokens** instead:
//!   [`MoveSpec::string_caps`] gives each string's bound and the decoder closes a
//!   string that reaches it. A character-counted string makes every mask inside it
//!   walk the vocabulary trie (p99 ~0.9 ms with Qwen's vocabulary); an unbounded
//!   lexeme lets llguidance answer from its precomputed token slices. llguidance's
//!   own `max_tokens` is no substitute: it truncates a lexeme anywhere, inside a
//!   UTF-8 character or an escape (the property test caught it).
//!
//! Steps always carry `kind`, as serde writes them, so the key is forced rather
//! than sampled.
//!
//! Both put each object's tag (`kind`, `type`) first, in serde's field order, and
//! allow no whitespace, so the model cannot pad. Element ids are user data: they are
//! escaped through `serde_json`, never by string formatting.
//!
//! The files, by concern: this one holds [`MoveSpec`] (what is allowed this turn, and
//! [`MoveSpec::check`]); `options.rs` the caller's options; `lexemes.rs` the terminals both
//! grammars share (strings, numbers); the vocabulary itself (action kinds, targets and their
//! pattern, keys, capabilities, limits, the element selection shared with the prompt) is
//! [`crate::moves`];
//! `lark.rs` and `json.rs` the two renderings; `budget.rs` the token bounds the decoder
//! enforces and its budget for a whole move.

mod budget;
mod json;
mod lark;
mod lexemes;
mod options;

use cel_contracts::{NextMove, PlannedAction, PlanningView};

use crate::error::{Error, Result};

pub use budget::StringCaps;
pub(crate) use budget::STRING_OVERSHOOT_TOKENS;
pub(crate) use lark::{lit, regex_literal, up_to};
pub(crate) use lexemes::{json_string, STRING_BODY};
pub use options::GrammarOptions;

use crate::moves::{
    parse_point, selected_elements, ActionKind, Capabilities, MoveLimits, COORDINATE_MAX, KEY_NAMES,
};

/// The resolved grammar of one turn: allowed actions, targets on screen, bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct MoveSpec {
    actions: Vec<ActionKind>,
    target_ids: Vec<String>,
    coordinate_targets: bool,
    limits: MoveLimits,
}

impl MoveSpec {
    /// Resolve `view` and `options` into this turn's grammar. The targets are
    /// [`selected_elements`]: the same elements, in the same order, as the prompt
    /// shows. Errors on limits that allow nothing (zero steps or tokens).
    pub fn new(view: &PlanningView, options: &GrammarOptions) -> Result<Self> {
        let limits = options.limits.clone();
        if limits.max_steps == 0
            || limits.sentence_tokens == 0
            || limits.text_tokens == 0
            || limits.data_string_tokens == 0
            || limits.chars_per_token == 0
        {
            return Err(Error::invalid_input(format!(
                "grammar limits must be positive: {limits:?}"
            )));
        }
        let target_ids: Vec<String> = selected_elements(view)
            .into_iter()
            .map(|e| e.id.clone())
            .collect();
        let caps = Capabilities::from_view(view);
        let has_targets = !target_ids.is_empty() || options.coordinate_targets;
        let actions = ActionKind::ALL
            .iter()
            .copied()
            .filter(|a| options.actions.contains(a))
            .filter(|a| caps.native_input || !a.needs_native_input())
            .filter(|a| caps.cdp || !a.needs_cdp())
            .filter(|a| {
                has_targets
                    || !matches!(
                        a,
                        ActionKind::Click | ActionKind::Drag | ActionKind::SetValue
                    )
            })
            .filter(|a| options.coordinate_targets || !a.needs_coordinate_targets())
            .collect();
        Ok(MoveSpec {
            actions,
            target_ids,
            coordinate_targets: options.coordinate_targets,
            limits,
        })
    }

    /// The action types a batch step may use this turn. Empty means no `batch`.
    pub fn allowed_actions(&self) -> &[ActionKind] {
        &self.actions
    }

    /// The element ids a target may name.
    pub fn target_ids(&self) -> &[String] {
        &self.target_ids
    }

    /// Whether `xy:X,Y` targets are allowed.
    pub fn coordinate_targets(&self) -> bool {
        self.coordinate_targets
    }

    /// The fields `kind` has this turn: all of [`ActionKind::fields`], but an optional
    /// target where no target exists (a `type` with nothing to type into).
    pub(crate) fn fields_this_turn(&self, kind: ActionKind) -> Vec<crate::moves::Field> {
        let has_targets = !self.target_ids.is_empty() || self.coordinate_targets;
        kind.fields()
            .iter()
            .filter(|f| has_targets || f.kind != crate::moves::FieldKind::Target)
            .copied()
            .collect()
    }

    /// The bounds this grammar enforces.
    pub fn limits(&self) -> &MoveLimits {
        &self.limits
    }

    /// Whether `id` is a target this grammar allows.
    pub fn is_valid_target(&self, id: &str) -> bool {
        self.target_ids.iter().any(|t| t == id)
            || (self.coordinate_targets && parse_point(id).is_some())
    }

    /// Check a move against the rules this grammar enforces (actions, targets, keys,
    /// step count, non-empty sentences, number ranges). String token bounds are not
    /// checked (they need the tokenizer). Returns the first violation.
    pub fn check(&self, mv: &NextMove) -> std::result::Result<(), String> {
        let non_empty = |what: &str, s: &str| {
            if s.is_empty() {
                Err(format!("{what} is empty"))
            } else {
                Ok(())
            }
        };
        match mv {
            NextMove::Batch { purpose, steps } => {
                non_empty("batch purpose", purpose)?;
                if steps.is_empty() || steps.len() > self.limits.max_steps {
                    return Err(format!("batch has {} steps", steps.len()));
                }
                for step in steps {
                    non_empty("step purpose", &step.purpose)?;
                    self.check_action(&step.action)?;
                }
                Ok(())
            }
            NextMove::Done { summary, .. } => non_empty("done summary", summary),
            NextMove::Fail { reason } => non_empty("fail reason", reason),
            NextMove::Clarify { question } => non_empty("clarify question", question),
        }
    }

    fn check_action(&self, action: &PlannedAction) -> std::result::Result<(), String> {
        let kind = ActionKind::of(action)
            .ok_or_else(|| format!("action {action:?} is outside the grammar"))?;
        if !self.actions.contains(&kind) {
            return Err(format!("action {} is not allowed this turn", kind.tag()));
        }
        let target = |id: &str| {
            if self.is_valid_target(id) {
                Ok(())
            } else {
                Err(format!("target {id:?} is not on screen"))
            }
        };
        let key = |k: &str| {
            if KEY_NAMES.contains(&k) {
                Ok(())
            } else {
                Err(format!("key {k:?} is not a known key"))
            }
        };
        let coordinate = |v: i32| {
            if (0..=COORDINATE_MAX as i32).contains(&v) {
                Ok(())
            } else {
                Err(format!("coordinate {v} is outside 0..={COORDINATE_MAX}"))
            }
        };
        match action {
            PlannedAction::Click { target_id, .. } => target(target_id),
            PlannedAction::Type { target_id, .. } => target_id.as_deref().map_or(Ok(()), target),
            PlannedAction::SetValue { target_id, .. } => target(target_id),
            PlannedAction::Drag {
                from_target_id,
                to_target_id,
            } => target(from_target_id).and_then(|()| target(to_target_id)),
            PlannedAction::Key { key: k } => key(k),
            PlannedAction::KeyCombo { keys } => {
                if !(2..=4).contains(&keys.len()) {
                    return Err(format!("key_combo has {} keys", keys.len()));
                }
                keys.iter().try_for_each(|k| key(k))
            }
            PlannedAction::Scroll { dx, dy } => {
                let max = self.limits.max_scroll as i64;
                if (*dx as i64).abs() > max || (*dy as i64).abs() > max {
                    Err(format!("scroll ({dx},{dy}) exceeds {max}"))
                } else {
                    Ok(())
                }
            }
            PlannedAction::Wait { ms } => {
                if *ms > self.limits.max_wait_ms {
                    Err(format!("wait {ms} ms exceeds {}", self.limits.max_wait_ms))
                } else {
                    Ok(())
                }
            }
            PlannedAction::Select {
                from_x,
                from_y,
                to_x,
                to_y,
            } => [*from_x, *from_y, *to_x, *to_y]
                .into_iter()
                .try_for_each(coordinate),
            PlannedAction::Navigate { url, .. } => non_empty_str("navigate url", url),
            PlannedAction::CdpEval { expression } => {
                non_empty_str("cdp_eval expression", expression)
            }
            _ => Ok(()),
        }
    }
}

fn non_empty_str(what: &str, s: &str) -> std::result::Result<(), String> {
    if s.is_empty() {
        Err(format!("{what} is empty"))
    } else {
        Ok(())
    }
}
