//! A planner that replays recorded moves instead of asking a model: for demos, regression runs
//! and tests.
//!
//! The input is JSON Lines. Each non-blank line is either a bare [`NextMove`]
//! (`{"kind":"batch",…}`) or a turn record as [`super::trace::TraceWriter`] writes it (an object
//! with a `"move"` field; its `"verdict"`, when present, is replayed by `verify_done`). A trace
//! directory may be given instead of a file: its `turns.jsonl` is read. Turns whose planner call
//! failed (no `"move"`) are skipped.
//!
//! The replay does not look at the screen: it returns the recorded moves in order whatever the
//! view shows, and when the moves run out, `decide_next` returns an error, which ends the run as
//! failed.

use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use cel_contracts::{AttemptRecord, DoneVerdict, NextMove, PlanProducer, PlanningView};

use super::trace::TURNS_FILE;
use crate::error::{Error, Result};

#[derive(Debug, Default)]
struct Cursor {
    next: usize,
    /// The recorded verdict for the move last returned, if it was a `done` with a verdict.
    last_verdict: Option<DoneVerdict>,
}

/// Replays recorded [`NextMove`]s in order.
#[derive(Debug)]
pub struct ReplayPlanner {
    source: String,
    moves: Vec<(NextMove, Option<DoneVerdict>)>,
    cursor: Mutex<Cursor>,
}

impl ReplayPlanner {
    /// Reads a JSONL file of moves or turn records, or a trace directory.
    pub fn from_path(path: &Path) -> Result<Self> {
        let file = if path.is_dir() {
            path.join(TURNS_FILE)
        } else {
            path.to_path_buf()
        };
        let text = crate::input_file::read_string(&file, crate::input_file::InputKind::Replay)?;
        Self::from_jsonl(&text, &file.display().to_string())
    }

    /// Parses JSONL text; `source` names it in errors.
    pub fn from_jsonl(text: &str, source: &str) -> Result<Self> {
        let mut moves = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let bad = |what: &str, e: serde_json::Error| {
                Error::invalid_input_caused(format!("{source} line {}: {what}", i + 1), e)
            };
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| bad("not JSON", e))?;
            let (mv, verdict) = match value.get("move") {
                Some(mv) if value.get("kind").is_none() => {
                    let verdict = match value.get("verdict") {
                        Some(v) if !v.is_null() => Some(
                            serde_json::from_value::<DoneVerdict>(v.clone())
                                .map_err(|e| bad("bad verdict", e))?,
                        ),
                        _ => None,
                    };
                    (mv.clone(), verdict)
                }
                // A turn whose planner call failed has no move: nothing to replay.
                None if value.get("turn").is_some() && value.get("kind").is_none() => continue,
                _ => (value, None),
            };
            let mv: NextMove = serde_json::from_value(mv).map_err(|e| bad("not a NextMove", e))?;
            moves.push((mv, verdict));
        }
        if moves.is_empty() {
            return Err(Error::invalid_input(format!(
                "{source}: no moves to replay"
            )));
        }
        Ok(Self::recorded(source, moves))
    }

    /// Replays `moves` given in memory (no recorded verdicts); `source` names them in the
    /// error returned once they ran out.
    pub fn of_moves(source: &str, moves: Vec<NextMove>) -> Self {
        Self::recorded(source, moves.into_iter().map(|m| (m, None)).collect())
    }

    fn recorded(source: &str, moves: Vec<(NextMove, Option<DoneVerdict>)>) -> Self {
        Self {
            source: source.to_string(),
            moves,
            cursor: Mutex::new(Cursor::default()),
        }
    }

    /// The moves, in replay order.
    pub fn moves(&self) -> impl Iterator<Item = &NextMove> {
        self.moves.iter().map(|(m, _)| m)
    }

    /// How many moves have not been returned yet.
    pub fn remaining(&self) -> usize {
        let next = self
            .cursor
            .lock()
            .map(|c| c.next)
            .unwrap_or(self.moves.len());
        self.moves.len().saturating_sub(next)
    }

    /// The next recorded move (what `decide_next` returns), or an error once they ran out.
    pub fn next_move(&self) -> std::result::Result<NextMove, String> {
        let mut cursor = self
            .cursor
            .lock()
            .map_err(|_| "replay state poisoned by an earlier panic".to_string())?;
        let Some((mv, verdict)) = self.moves.get(cursor.next) else {
            return Err(format!(
                "replay {} exhausted after {} move(s)",
                self.source,
                self.moves.len()
            ));
        };
        cursor.next += 1;
        cursor.last_verdict = verdict.clone();
        Ok(mv.clone())
    }

    /// The verdict recorded with the last `done` move (what `verify_done` returns), or an
    /// accepting one when none was recorded (a bare move file).
    pub fn recorded_verdict(&self) -> std::result::Result<DoneVerdict, String> {
        let cursor = self
            .cursor
            .lock()
            .map_err(|_| "replay state poisoned by an earlier panic".to_string())?;
        Ok(cursor.last_verdict.clone().unwrap_or(DoneVerdict {
            verified: true,
            reason: String::new(),
            next_action_hint: None,
        }))
    }
}

#[async_trait]
impl PlanProducer for ReplayPlanner {
    async fn decide_next(
        &self,
        _goal: &str,
        _history: &[AttemptRecord],
        _shared_memory: &serde_json::Value,
        _view: &PlanningView,
        _screenshot_png: Option<&[u8]>,
    ) -> std::result::Result<NextMove, String> {
        self.next_move()
    }

    /// Returns the verdict recorded with the last `done` move, or accepts when none was
    /// recorded (a bare move file).
    async fn verify_done(
        &self,
        _goal: &str,
        _summary: &str,
        _shared_memory: &serde_json::Value,
        _view: &PlanningView,
        _screenshot_png: Option<&[u8]>,
    ) -> std::result::Result<DoneVerdict, String> {
        self.recorded_verdict()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::testing::{failure, source_as};

    /// A replay line that is not JSON is the caller's input error naming the line, with
    /// serde_json's error (line and column) kept as the source.
    #[test]
    fn a_replay_line_that_is_not_json_keeps_the_parsers_error() -> Result<()> {
        let err = failure(
            ReplayPlanner::from_jsonl("\n{\"move\": oops", "t.jsonl"),
            "parsing a broken replay",
        )?;
        let source: &serde_json::Error = source_as(&err)?;
        assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("invalid input: t.jsonl line 2: not JSON: {source}")
        );
        Ok(())
    }
}
