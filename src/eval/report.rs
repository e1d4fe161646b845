//! What one task run produced ([`RunResult`], one JSONL line each) and the summary over many
//! ([`Summary`]): success rate with a Wilson 95% interval, steps and turns per task, time per
//! turn by stage, failures and refusals by reason.
//!
//! The summary is a pure function of the run lines, so shards merged afterwards
//! (`sightline eval merge`) give the same summary as one unsharded run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::planner::StageMs;

/// The normal quantile of a two-sided 95% interval.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// Failure reason of a run whose checker passed: none.
pub const REASON_PASSED: &str = "passed";
/// The task's setup failed (a program missing, a window that never appeared).
pub const REASON_SETUP: &str = "setup_error";
/// The runner could not start or exited with a setup error.
pub const REASON_RUNNER_ERROR: &str = "runner_error";
/// The agent claimed success but the checker disagreed.
pub const REASON_CLAIMED_DONE: &str = "claimed_done_but_check_failed";
/// The run was stopped by the user.
pub const REASON_INTERRUPTED: &str = "interrupted";
/// The runner overran its budget and was killed.
pub const REASON_KILLED: &str = "runner_killed_after_timeout";

/// Summed time of a run's turns by runner stage, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunnerStages {
    /// Capture, PNG encoding, building the view.
    pub observe_ms: u64,
    /// `decide_next` (the planner).
    pub decide_ms: u64,
    /// Executing the batch's steps.
    pub act_ms: u64,
    /// Waiting for the screen to settle.
    pub settle_ms: u64,
    /// `verify_done`.
    pub verify_ms: u64,
}

/// Time of the planner's own stages over some planner calls, in milliseconds: summed over a
/// run's calls in each [`RunResult`] (from the model planner's per-turn stats in the trace;
/// absent for replays), and the mean per call in the [`Summary`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PlannerStages {
    /// Planner calls (`decide_next` and `verify_done`) covered.
    pub calls: u64,
    /// Their stages' times (flat in JSON: `preprocess_ms`, `vision_ms`, …).
    #[serde(flatten)]
    pub ms: StageMs,
}

/// What the checker said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    /// Exit 0 in time.
    pub passed: bool,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The end of its output.
    pub output: String,
}

/// One run of one task: one JSONL line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The task's name.
    pub task: String,
    /// The task's tags.
    pub tags: Vec<String>,
    /// Which repetition, from 0.
    pub repeat: u32,
    /// `oracle` or the model as given.
    pub planner: String,
    /// The checker passed: the task was done, whatever the agent claimed.
    pub passed: bool,
    /// [`REASON_PASSED`], or why not: the runner's end reason (`budget_exhausted:max_steps`,
    /// `planner_error`, `clarified`, …) or one of the `REASON_*` constants.
    pub reason: String,
    /// The run ended as a refusal (a clarifying question or the destructive-step gate).
    pub refused: bool,
    /// The runner reported success (the agent said done and verification accepted it).
    pub claimed_done: bool,
    /// The runner's exit code.
    pub runner_exit: Option<i32>,
    /// One line of detail for a failure (the runner's failure, a setup error).
    pub detail: String,
    /// Turns taken.
    pub turns: u32,
    /// Steps counted against the budget.
    pub steps: u32,
    /// The runner's own duration, milliseconds.
    pub run_ms: u64,
    /// Setup, run and check together, milliseconds.
    pub wall_ms: u64,
    /// Time by runner stage.
    pub stages: RunnerStages,
    /// Time by planner stage, when the planner reports it.
    pub planner_stages: Option<PlannerStages>,
    /// The checker's verdict.
    pub check: CheckRecord,
    /// The run's trace directory.
    pub trace_dir: Option<String>,
}

/// The Wilson score interval for `successes` of `n` at normal quantile `z`; `(0, 1)` for
/// `n = 0`. Unlike the normal approximation it stays inside [0, 1] and is not empty at 0% or
/// 100%, which matters for the small suites task evaluations have.
pub fn wilson_interval(successes: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n_f = n as f64;
    let p = successes as f64 / n_f;
    let z2 = z * z;
    let denom = 1.0 + z2 / n_f;
    let centre = (p + z2 / (2.0 * n_f)) / denom;
    let half = z / denom * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// One task's line of the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSummary {
    /// The task.
    pub task: String,
    /// Runs of it.
    pub runs: u32,
    /// Runs whose checker passed.
    pub passed: u32,
    /// Mean steps per run.
    pub mean_steps: f64,
    /// Mean turns per run.
    pub mean_turns: f64,
    /// Mean wall time per run, seconds.
    pub mean_wall_s: f64,
    /// Reasons of its failed runs, with counts.
    pub failures: BTreeMap<String, u32>,
}

/// Mean time per turn by stage, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StagesPerTurn {
    /// Turns averaged over.
    pub turns: u64,
    /// Observe.
    pub observe_ms: f64,
    /// Decide (the planner).
    pub decide_ms: f64,
    /// Act.
    pub act_ms: f64,
    /// Settle.
    pub settle_ms: f64,
    /// Verify.
    pub verify_ms: f64,
}

/// The summary of a set of runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The planners the runs used (usually one).
    pub planners: Vec<String>,
    /// Distinct tasks.
    pub tasks: u32,
    /// Runs.
    pub runs: u32,
    /// Runs whose checker passed.
    pub passed: u32,
    /// `passed / runs`.
    pub success_rate: f64,
    /// Wilson 95% interval of the success rate.
    pub ci95: (f64, f64),
    /// Runs that ended as a refusal.
    pub refusals: u32,
    /// Failed runs by reason.
    pub failures: BTreeMap<String, u32>,
    /// Per task, sorted by name.
    pub per_task: Vec<TaskSummary>,
    /// Mean time per turn by runner stage.
    pub stages_per_turn: StagesPerTurn,
    /// Mean time per planner call by planner stage, when the planner reported it.
    pub planner_stages_per_call: Option<PlannerStages>,
}

impl Summary {
    /// Summarizes `runs` (in any order: the result does not depend on it).
    pub fn of(runs: &[RunResult]) -> Self {
        let mut by_task: BTreeMap<&str, Vec<&RunResult>> = BTreeMap::new();
        for r in runs {
            by_task.entry(&r.task).or_default().push(r);
        }
        let mut planners: Vec<String> = runs.iter().map(|r| r.planner.clone()).collect();
        planners.sort();
        planners.dedup();
        let passed = runs.iter().filter(|r| r.passed).count() as u32;
        let n = runs.len() as u32;
        let mut failures = BTreeMap::new();
        for r in runs.iter().filter(|r| !r.passed) {
            *failures.entry(r.reason.clone()).or_insert(0) += 1;
        }
        let per_task = by_task
            .iter()
            .map(|(task, rs)| {
                let k = rs.len() as f64;
                let mut fails = BTreeMap::new();
                for r in rs.iter().filter(|r| !r.passed) {
                    *fails.entry(r.reason.clone()).or_insert(0) += 1;
                }
                TaskSummary {
                    task: task.to_string(),
                    runs: rs.len() as u32,
                    passed: rs.iter().filter(|r| r.passed).count() as u32,
                    mean_steps: rs.iter().map(|r| f64::from(r.steps)).sum::<f64>() / k,
                    mean_turns: rs.iter().map(|r| f64::from(r.turns)).sum::<f64>() / k,
                    mean_wall_s: rs.iter().map(|r| r.wall_ms as f64).sum::<f64>() / k / 1e3,
                    failures: fails,
                }
            })
            .collect();
        let turns: u64 = runs.iter().map(|r| u64::from(r.turns)).sum();
        let per_turn = |f: fn(&RunnerStages) -> u64| {
            if turns == 0 {
                0.0
            } else {
                runs.iter().map(|r| f(&r.stages) as f64).sum::<f64>() / turns as f64
            }
        };
        let stages_per_turn = StagesPerTurn {
            turns,
            observe_ms: per_turn(|s| s.observe_ms),
            decide_ms: per_turn(|s| s.decide_ms),
            act_ms: per_turn(|s| s.act_ms),
            settle_ms: per_turn(|s| s.settle_ms),
            verify_ms: per_turn(|s| s.verify_ms),
        };
        let planner: Vec<&PlannerStages> = runs
            .iter()
            .filter_map(|r| r.planner_stages.as_ref())
            .collect();
        let calls: u64 = planner.iter().map(|p| p.calls).sum();
        let planner_stages_per_call = (calls > 0).then(|| {
            let mut sum = StageMs::default();
            for p in &planner {
                sum.add(&p.ms);
            }
            PlannerStages {
                calls,
                ms: sum.divided_by(calls as f64),
            }
        });
        Summary {
            planners,
            tasks: by_task.len() as u32,
            runs: n,
            passed,
            success_rate: if n == 0 {
                0.0
            } else {
                f64::from(passed) / f64::from(n)
            },
            ci95: wilson_interval(u64::from(passed), u64::from(n), Z_95),
            refusals: runs.iter().filter(|r| r.refused).count() as u32,
            failures,
            per_task,
            stages_per_turn,
            planner_stages_per_call,
        }
    }

    /// The summary as a text table (what `sightline eval` prints without `--json`).
    pub fn table(&self) -> String {
        let mut s = String::new();
        let width = self
            .per_task
            .iter()
            .map(|t| t.task.chars().count())
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = writeln!(
            s,
            "{:<width$}  {:>4}  {:>6}  {:>6}  {:>6}  {:>7}  failures",
            "task", "runs", "passed", "steps", "turns", "wall s"
        );
        for t in &self.per_task {
            let fails = t
                .failures
                .iter()
                .map(|(r, c)| format!("{r}×{c}"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                s,
                "{:<width$}  {:>4}  {:>6}  {:>6.1}  {:>6.1}  {:>7.1}  {}",
                t.task, t.runs, t.passed, t.mean_steps, t.mean_turns, t.mean_wall_s, fails
            );
        }
        let _ = writeln!(
            s,
            "\nsuccess {}/{} = {:.1}% (95% CI {:.1}–{:.1}%), {} task(s), planner {}",
            self.passed,
            self.runs,
            100.0 * self.success_rate,
            100.0 * self.ci95.0,
            100.0 * self.ci95.1,
            self.tasks,
            self.planners.join(", ")
        );
        let _ = writeln!(s, "refusals {}", self.refusals);
        if !self.failures.is_empty() {
            let list = self
                .failures
                .iter()
                .map(|(r, c)| format!("{r} {c}"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(s, "failures by reason: {list}");
        }
        let p = &self.stages_per_turn;
        let _ = writeln!(
            s,
            "per turn ({} turns): observe {:.0} ms, decide {:.0} ms, act {:.0} ms, settle {:.0} ms, verify {:.0} ms",
            p.turns, p.observe_ms, p.decide_ms, p.act_ms, p.settle_ms, p.verify_ms
        );
        if let Some(m) = &self.planner_stages_per_call {
            let _ = writeln!(
                s,
                "per planner call ({} calls): preprocess {:.1} ms, vision {:.1} ms, prefill {:.1} ms, decode {:.1} ms, grammar {:.1} ms, total {:.1} ms",
                m.calls, m.ms.preprocess_ms, m.ms.vision_ms, m.ms.prefill_ms, m.ms.decode_ms, m.ms.grammar_ms, m.ms.total_ms
            );
        }
        s
    }
}

/// Reads run lines from JSONL files (`sightline eval merge`); a bad line is an error naming
/// the file and line.
pub fn read_results(paths: &[impl AsRef<Path>]) -> Result<Vec<RunResult>> {
    let mut runs = Vec::new();
    for path in paths {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let run: RunResult = serde_json::from_str(line).map_err(|e| {
                let at = format!("{} line {}: not a run result", path.display(), i + 1);
                Error::invalid_input_caused(at, e)
            })?;
            runs.push(run);
        }
    }
    // Stable order whatever the file order: by task, then repetition.
    runs.sort_by(|a, b| (&a.task, a.repeat).cmp(&(&b.task, b.repeat)));
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interval ends compared to published values to this many decimals' worth.
    const CI_TOL: f64 = 1e-4;

    #[test]
    fn wilson_interval_matches_known_values() {
        // 8 of 10: the textbook Wilson interval (0.4902, 0.9433).
        let (lo, hi) = wilson_interval(8, 10, Z_95);
        assert!(
            (lo - 0.4902).abs() < CI_TOL && (hi - 0.9433).abs() < CI_TOL,
            "{lo} {hi}"
        );
        // 15 of 15: the upper end is 1, the lower end 1 / (1 + z²/n) = 0.7961.
        let (lo, hi) = wilson_interval(15, 15, Z_95);
        assert!(
            (lo - 0.7961).abs() < CI_TOL && (hi - 1.0).abs() < 1e-12,
            "{lo} {hi}"
        );
        let (lo, hi) = wilson_interval(0, 15, Z_95);
        assert!(
            lo.abs() < 1e-12 && (hi - 0.2039).abs() < CI_TOL,
            "{lo} {hi}"
        );
        assert_eq!(wilson_interval(0, 0, Z_95), (0.0, 1.0));
    }

    fn run(task: &str, repeat: u32, passed: bool, reason: &str) -> RunResult {
        RunResult {
            task: task.into(),
            tags: vec![],
            repeat,
            planner: "oracle".into(),
            passed,
            reason: reason.into(),
            refused: reason == "clarified",
            claimed_done: passed,
            runner_exit: Some(0),
            detail: String::new(),
            turns: 2,
            steps: 3,
            run_ms: 1000,
            wall_ms: 2000,
            stages: RunnerStages {
                observe_ms: 10,
                decide_ms: 20,
                act_ms: 30,
                settle_ms: 40,
                verify_ms: 2,
            },
            planner_stages: None,
            check: CheckRecord::default(),
            trace_dir: None,
        }
    }

    #[test]
    fn summary_counts_rates_reasons_and_means_whatever_the_order() {
        let mut runs = vec![
            run("b", 0, true, REASON_PASSED),
            run("a", 0, false, "clarified"),
            run("a", 1, true, REASON_PASSED),
            run("b", 1, false, REASON_CLAIMED_DONE),
        ];
        let s = Summary::of(&runs);
        assert_eq!((s.tasks, s.runs, s.passed, s.refusals), (2, 4, 2, 1));
        assert_eq!(s.success_rate, 0.5);
        assert_eq!(s.failures.get("clarified"), Some(&1));
        assert_eq!(s.failures.get(REASON_CLAIMED_DONE), Some(&1));
        assert_eq!(s.per_task[0].task, "a");
        assert_eq!(s.per_task[0].mean_steps, 3.0);
        assert_eq!(s.stages_per_turn.turns, 8);
        assert_eq!(s.stages_per_turn.decide_ms, 10.0);
        assert!(s.planner_stages_per_call.is_none());
        runs.reverse();
        assert_eq!(Summary::of(&runs), s);
        assert!(s.table().contains("success 2/4 = 50.0%"), "{}", s.table());
    }
}
