//! Run traces: a directory a run can be read from afterwards and replayed from.
//!
//! ```text
//! DIR/run.json          goal, limits, options, start time, planner label
//! DIR/turns.jsonl       one TurnRecord per line (view, move, step results, timings, verdict)
//! DIR/screens/turn-NNNN.png   the screenshot each turn's planner call saw
//! DIR/outcome.json      the GoalOutcome, why the run ended, totals
//! DIR/grader_examples.jsonl   each done claim and the grader's verdict, unlabelled, in the
//!                             format `sightline grader fit` reads (label `verified`, `hint`)
//! ```
//!
//! Each turn line is written and flushed when the turn ends, so a crashed run still leaves
//! every finished turn readable. [`super::replay::ReplayPlanner`] reads `turns.jsonl` (or the
//! directory) back into `decide_next`.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::elements::ElementTable;
use cel_contracts::{
    DoneVerdict, GoalOutcome, NextMove, PlannedAction, PlanningView, RunLimits, StepResult,
};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// File name of the per-turn records inside a trace directory.
pub const TURNS_FILE: &str = "turns.jsonl";
/// File name of the run's metadata.
pub const RUN_FILE: &str = "run.json";
/// File name of the final outcome.
pub const OUTCOME_FILE: &str = "outcome.json";
/// Sub-directory holding the screenshots.
pub const SCREENS_DIR: &str = "screens";
/// File name of the done claims, as grader examples to label.
pub const GRADER_EXAMPLES_FILE: &str = "grader_examples.jsonl";

/// What `run.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMeta {
    /// The goal as given.
    pub goal: String,
    /// The budgets.
    pub limits: RunLimits,
    /// Whether input was suppressed.
    pub dry_run: bool,
    /// Whether steps the gate refused were put to the user on the terminal (`--confirm`).
    pub confirm: bool,
    /// What the user allowed for the run (`--allow` values), so a trace says under which
    /// permissions its steps ran.
    #[serde(default)]
    pub allowed: Vec<String>,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// A label for the planner (model id, replay file, …).
    pub planner: String,
    /// The Sightline version that wrote the trace.
    pub sightline_version: String,
}

/// One executed (or refused, or dry-run) step attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    /// Index of the step in its batch, from 0.
    pub index: usize,
    /// Attempt number, from 1.
    pub attempt: u32,
    /// The step's purpose.
    pub purpose: String,
    /// The action as planned.
    pub action: PlannedAction,
    /// What happened.
    pub result: StepResult,
    /// Time spent executing, in milliseconds.
    pub duration_ms: u64,
    /// True when `--dry-run` suppressed the input.
    #[serde(default)]
    pub dry_run: bool,
    /// The gate's refusal message when the destructive-step gate refused the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// One turn: observe, decide, act.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TurnRecord {
    /// Turn number, from 1.
    pub turn: u32,
    /// Start of the turn, milliseconds since the run started.
    pub started_ms: u64,
    /// The screenshot the planner saw, relative to the trace directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<String>,
    /// Size of that screenshot in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot_size: Option<(u32, u32)>,
    /// Time to observe: capture (unless the settle wait's last frame was reused), PNG encoding
    /// and building the view, in milliseconds.
    #[serde(default)]
    pub observe_ms: u64,
    /// The planning view given to `decide_next`.
    pub view: PlanningView,
    /// The view's elements with their bounds, as the accessibility tree gave them (absent
    /// when the run had no element source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<ElementTable>,
    /// Time `decide_next` took, in milliseconds.
    pub decide_ms: u64,
    /// The planner's own account of the `decide_next` turn (stage timings, tokens), when it
    /// gives one ([`Runner::with_planner_stats`](super::Runner::with_planner_stats)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decide_stats: Option<serde_json::Value>,
    /// The planner's move, absent when the planner returned an error.
    #[serde(rename = "move", default, skip_serializing_if = "Option::is_none")]
    pub next_move: Option<NextMove>,
    /// The planner's error, when `decide_next` failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner_error: Option<String>,
    /// Every step attempt of a batch, in order.
    #[serde(default)]
    pub steps: Vec<StepRecord>,
    /// The verdict on a `done` move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<DoneVerdict>,
    /// Time `verify_done` took, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_ms: Option<u64>,
    /// The planner's own account of the `verify_done` call, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_stats: Option<serde_json::Value>,
    /// The history records this turn added, in order: the history the planner saw at turn
    /// N is the concatenation of the earlier turns' records (see [`history_before`]).
    #[serde(default)]
    pub attempts: Vec<cel_contracts::AttemptRecord>,
    /// Time spent waiting for the screen to settle after the batch, in milliseconds.
    #[serde(default)]
    pub settle_ms: u64,
}

/// What `outcome.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutcomeRecord {
    /// The run's outcome.
    pub outcome: GoalOutcome,
    /// Why the run ended, in the runner's words (`succeeded`, `budget_exhausted`, …).
    pub end: super::EndReason,
    /// Turns taken.
    pub turns: u32,
    /// Steps counted against `max_steps`.
    pub steps_used: u32,
    /// Wall-clock duration in milliseconds.
    pub elapsed_ms: u64,
}

/// Writes a trace directory.
#[derive(Debug)]
pub struct TraceWriter {
    dir: PathBuf,
    turns: BufWriter<File>,
    goal: String,
}

impl TraceWriter {
    /// Creates the directory (and parents) and writes `run.json`. Refuses a directory that
    /// already holds a trace, so one run never overwrites another.
    pub fn create(dir: &Path, meta: &RunMeta) -> Result<Self> {
        let turns_path = dir.join(TURNS_FILE);
        if turns_path.exists() {
            return Err(Error::runner(format!(
                "trace directory {} already holds a run ({TURNS_FILE} exists); choose a new one",
                dir.display()
            )));
        }
        let screens = dir.join(SCREENS_DIR);
        fs::create_dir_all(&screens).map_err(|e| Error::io(&screens, e))?;
        write_json(&dir.join(RUN_FILE), meta)?;
        let file = File::create(&turns_path).map_err(|e| Error::io(&turns_path, e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            turns: BufWriter::new(file),
            goal: meta.goal.clone(),
        })
    }

    /// The trace directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Saves a turn's screenshot; returns its path relative to the trace directory.
    pub fn write_screenshot(&mut self, turn: u32, png: &[u8]) -> Result<String> {
        let rel = format!("{SCREENS_DIR}/turn-{turn:04}.png");
        let path = self.dir.join(&rel);
        fs::write(&path, png).map_err(|e| Error::io(&path, e))?;
        Ok(rel)
    }

    /// Appends one turn line and flushes it.
    pub fn write_turn(&mut self, record: &TurnRecord) -> Result<()> {
        let path = self.dir.join(TURNS_FILE);
        let line = serde_json::to_string(record)
            .map_err(|e| Error::runner_caused(format!("serializing turn {}", record.turn), e))?;
        writeln!(self.turns, "{line}")
            .and_then(|_| self.turns.flush())
            .map_err(|e| Error::io(&path, e))?;
        self.write_grader_example(record)
    }

    /// A judged done claim becomes an unlabelled grader example (see
    /// [`GraderExample`](crate::moves::GraderExample)).
    fn write_grader_example(&mut self, record: &TurnRecord) -> Result<()> {
        let (Some(NextMove::Done { summary, .. }), Some(verdict), Some(screenshot)) =
            (&record.next_move, &record.verdict, &record.screenshot)
        else {
            return Ok(());
        };
        let example = crate::moves::GraderExample {
            screenshot: PathBuf::from(screenshot),
            view: Some(record.view.clone()),
            goal: self.goal.clone(),
            summary: summary.clone(),
            verified: None,
            hint: None,
            grader_verified: Some(verdict.verified),
        };
        let path = self.dir.join(GRADER_EXAMPLES_FILE);
        let line = serde_json::to_string(&example)
            .map_err(|e| Error::runner_caused("serializing a grader example", e))?;
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| writeln!(f, "{line}"))
            .map_err(|e| Error::io(&path, e))
    }

    /// Writes `outcome.json`.
    pub fn finish(mut self, outcome: &OutcomeRecord) -> Result<()> {
        let path = self.dir.join(TURNS_FILE);
        self.turns.flush().map_err(|e| Error::io(&path, e))?;
        write_json(&self.dir.join(OUTCOME_FILE), outcome)
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::runner_caused(format!("serializing {}", path.display()), e))?;
    fs::write(path, text + "\n").map_err(|e| Error::io(path, e))
}

/// Reads a trace directory's `run.json`.
pub fn read_meta(dir: &Path) -> Result<RunMeta> {
    let file = dir.join(RUN_FILE);
    let text = crate::input_file::read_string(&file, crate::input_file::InputKind::Config)?;
    serde_json::from_str(&text).map_err(|e| {
        Error::invalid_input_caused(format!("{}: not a run record", file.display()), e)
    })
}

/// The history the planner was given at `turn` (from 1): every record the earlier turns
/// added, in order.
pub fn history_before(turns: &[TurnRecord], turn: u32) -> Vec<cel_contracts::AttemptRecord> {
    turns
        .iter()
        .filter(|t| t.turn < turn)
        .flat_map(|t| t.attempts.iter().cloned())
        .collect()
}

/// Reads every turn of a trace (a directory or its `turns.jsonl`), oldest first. A malformed
/// line is an error naming the file and line.
pub fn read_turns(path: &Path) -> Result<Vec<TurnRecord>> {
    let file = if path.is_dir() {
        path.join(TURNS_FILE)
    } else {
        path.to_path_buf()
    };
    let text = crate::input_file::read_string(&file, crate::input_file::InputKind::Replay)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                let at = format!("{} line {}: not a turn record", file.display(), i + 1);
                Error::invalid_input_caused(at, e)
            })
        })
        .collect()
}
