//! Running desktop tasks: each in its own [`TaskSession`] (fresh Xvfb, scratch `HOME`), the
//! agent being `sightline run` as a child process pointed at that display, then the checker.
//!
//! The child is the same runner users run (`sightline run --replay …` for the oracle,
//! `--model …` for a model), so an evaluation measures exactly what ships; it also isolates
//! each task's `DISPLAY` (xcap and enigo read it from the process environment) and lets a
//! model run be killed cleanly when it overruns.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::report::{
    CheckRecord, PlannerStages, RunResult, RunnerStages, REASON_CLAIMED_DONE, REASON_INTERRUPTED,
    REASON_KILLED, REASON_PASSED, REASON_RUNNER_ERROR, REASON_SETUP,
};
use super::session::{GroupChild, TaskSession};
use super::task::Task;
use crate::error::{Error, Result};
use crate::planner::StageTimes;
use crate::runner::trace::{read_turns, OutcomeRecord, TurnRecord, OUTCOME_FILE};
use crate::runner::EndReason;
use crate::settings::{ModelArgs, RunBudgetArgs};

/// Extra time a runner child gets past its own `--timeout` (model load, a planner call in
/// progress when the budget ran out) before it is killed.
pub const RUNNER_GRACE: Duration = Duration::from_secs(120);
/// After a stop request, how long the child gets to stop on its own (it stops between steps).
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Who plays the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Agent {
    /// Each task's oracle replay.
    Oracle,
    /// A replay file for every task (a no-op replay shows a checker fails when nothing is
    /// done).
    Replay(PathBuf),
    /// A model, with the model flags of `sightline run`.
    Model(ModelArgs),
}

impl Agent {
    /// The label in reports.
    pub fn label(&self) -> String {
        match self {
            Agent::Oracle => "oracle".into(),
            Agent::Replay(p) => format!("replay {}", p.display()),
            Agent::Model(args) => args.model.clone().unwrap_or_else(|| "default".into()),
        }
    }
}

/// How to run tasks.
#[derive(Debug, Clone)]
pub struct DesktopEvalOptions {
    /// The `sightline` executable to run as the agent (the current one, normally).
    pub runner_exe: PathBuf,
    /// Who plays the agent.
    pub agent: Agent,
    /// Where each run's directory (trace, logs) goes: `OUT/runs/<task>/<repeat>/`.
    pub out_dir: PathBuf,
    /// Where scratch directories go (default: the system temp directory).
    pub scratch_root: Option<PathBuf>,
    /// Caps every task's step budget (a quick look at a slow model).
    pub max_steps_cap: Option<u32>,
    /// Caps every task's time budget, in seconds.
    pub timeout_cap_s: Option<u64>,
    /// Whether the agent reads accessibility elements: each task (unless its file says
    /// `accessibility = false`) gets a private session bus. Off: no bus, and the agent runs
    /// with `--no-elements`.
    pub elements: bool,
}

/// Runs one task once and returns its result. Setup failures are results too (reason
/// [`REASON_SETUP`]), so one broken task does not stop a suite; only an output directory that
/// cannot be written is an error.
pub fn run_task(
    task: &Task,
    repeat: u32,
    options: &DesktopEvalOptions,
    stop: &AtomicBool,
) -> Result<RunResult> {
    let start = Instant::now();
    let run_dir = options
        .out_dir
        .join("runs")
        .join(&task.name)
        .join(repeat.to_string());
    if run_dir.exists() {
        fs::remove_dir_all(&run_dir).map_err(|e| Error::io(&run_dir, e))?;
    }
    fs::create_dir_all(&run_dir).map_err(|e| Error::io(&run_dir, e))?;
    let mut result = RunResult {
        task: task.name.clone(),
        tags: task.tags.clone(),
        repeat,
        planner: options.agent.label(),
        passed: false,
        reason: REASON_SETUP.into(),
        refused: false,
        claimed_done: false,
        runner_exit: None,
        detail: String::new(),
        turns: 0,
        steps: 0,
        run_ms: 0,
        wall_ms: 0,
        stages: RunnerStages::default(),
        planner_stages: None,
        check: CheckRecord::default(),
        trace_dir: None,
    };
    // The session lives exactly as long as this block: dropping it tears the desktop down.
    {
        let with_bus = options.elements && task.accessibility;
        let mut session =
            match TaskSession::start(task, options.scratch_root.as_deref(), with_bus, stop)
                .and_then(|mut s| {
                    switch_accessibility_on(&s)?;
                    s.setup(task, stop).map(|()| s)
                }) {
                Ok(s) => s,
                Err(e) => {
                    result.detail = e.to_string();
                    result.wall_ms = start.elapsed().as_millis() as u64;
                    return Ok(result);
                }
            };
        let trace_dir = run_dir.join("trace");
        match run_agent(task, &mut session, options, &run_dir, &trace_dir, stop) {
            Ok(agent) => fill_from_agent(&mut result, &agent, &trace_dir),
            Err(e) => {
                result.reason = REASON_RUNNER_ERROR.into();
                result.detail = e.to_string();
            }
        }
        if !stop.load(Ordering::SeqCst) {
            let check = session.check(task, stop)?;
            result.check = CheckRecord {
                passed: check.success(),
                exit_code: check.exit_code,
                output: check.output,
            };
        }
    }
    result.passed = result.check.passed;
    if result.passed {
        result.reason = REASON_PASSED.into();
    } else if result.claimed_done {
        result.reason = REASON_CLAIMED_DONE.into();
    }
    if stop.load(Ordering::SeqCst) {
        result.passed = false;
        result.reason = REASON_INTERRUPTED.into();
    }
    result.wall_ms = start.elapsed().as_millis() as u64;
    Ok(result)
}

/// Sets the session's `org.a11y.Status.IsEnabled` before the task's programs start, as a
/// screen reader running on the desktop would: browsers and Qt applications then build their
/// accessibility trees from the start. Nothing to do without a session bus.
fn switch_accessibility_on(session: &TaskSession) -> Result<()> {
    let Some(address) = session.bus_address() else {
        return Ok(());
    };
    #[cfg(all(target_os = "linux", feature = "accessibility"))]
    crate::runner::elements::switch_on_session(address)?;
    #[cfg(not(all(target_os = "linux", feature = "accessibility")))]
    let _ = address;
    Ok(())
}

/// How the agent's process ended.
struct AgentRun {
    exit_code: Option<i32>,
    killed: bool,
    log: String,
}

fn run_agent(
    task: &Task,
    session: &mut TaskSession,
    options: &DesktopEvalOptions,
    run_dir: &Path,
    trace_dir: &Path,
    stop: &AtomicBool,
) -> Result<AgentRun> {
    let mut cmd = Command::new(&options.runner_exe);
    cmd.arg("run");
    match &options.agent {
        Agent::Oracle | Agent::Replay(_) => {
            let source = match &options.agent {
                Agent::Replay(p) => p.clone(),
                _ => task.oracle.clone(),
            };
            let text = fs::read_to_string(&source).map_err(|e| Error::io(&source, e))?;
            // The oracle may name the task's files: its placeholders are filled like the
            // task's commands, JSON-escaped.
            let replay = run_dir.join("replay.jsonl");
            let filled = session.placeholders().apply_json(&text);
            fs::write(&replay, filled).map_err(|e| Error::io(&replay, e))?;
            cmd.arg("--replay").arg(replay);
        }
        Agent::Model(args) => {
            cmd.args(args.to_cli_args());
        }
    }
    let goal = session.placeholders().apply(&task.goal);
    let max_steps = options
        .max_steps_cap
        .map_or(task.budget.max_steps, |cap| cap.min(task.budget.max_steps));
    let timeout_s = options
        .timeout_cap_s
        .map_or(task.budget.timeout_s, |cap| cap.min(task.budget.timeout_s));
    // Elements need the task's bus; without one the agent works from the screenshot alone.
    if session.bus_address().is_none() {
        cmd.arg("--no-elements");
    }
    for grant in &task.allow {
        cmd.arg("--allow").arg(session.placeholders().apply(grant));
    }
    let budget = RunBudgetArgs {
        max_steps: max_steps.max(1),
        timeout: timeout_s.max(1),
        ..RunBudgetArgs::default()
    };
    cmd.args(budget.to_cli_args())
        .arg("--trace")
        .arg(trace_dir)
        .arg("--")
        .arg(&goal);
    let log_path = run_dir.join("run.log");
    let log = fs::File::create(&log_path).map_err(|e| Error::io(&log_path, e))?;
    let log_err = log.try_clone().map_err(|e| Error::io(&log_path, e))?;
    // The agent keeps the user's HOME (the model cache lives there) but sees only the task's
    // display and session bus. The planner's per-turn stats come back in the trace.
    cmd.env("DISPLAY", session.display())
        .env_remove("WAYLAND_DISPLAY")
        .env("NO_COLOR", "1")
        .env_remove("DBUS_SESSION_BUS_ADDRESS");
    if let Some(address) = session.bus_address() {
        cmd.env("DBUS_SESSION_BUS_ADDRESS", address);
    }
    cmd.stdin(Stdio::null()).stdout(log).stderr(log_err);
    let mut child = GroupChild::spawn(cmd, "the runner (sightline run)")?;
    let deadline = Instant::now() + Duration::from_secs(timeout_s) + RUNNER_GRACE;
    let mut status = child.wait_until(deadline, stop)?;
    let mut killed = false;
    if status.is_none() {
        // Ctrl-C: ask the runner to stop between steps as a user would, then kill.
        if stop.load(Ordering::SeqCst) {
            child.signal_group(libc::SIGINT);
            status = child.wait_until(Instant::now() + STOP_GRACE, &AtomicBool::new(false))?;
        }
        if status.is_none() {
            killed = true;
            child.kill_group();
        }
    }
    drop(child);
    let log = fs::read_to_string(&log_path).unwrap_or_default();
    Ok(AgentRun {
        exit_code: status.and_then(|s| s.code()),
        killed,
        log,
    })
}

fn fill_from_agent(result: &mut RunResult, agent: &AgentRun, trace_dir: &Path) {
    result.runner_exit = agent.exit_code;
    if trace_dir.join("turns.jsonl").is_file() {
        result.trace_dir = Some(trace_dir.display().to_string());
        if let Ok(turns) = read_turns(trace_dir) {
            result.planner_stages = planner_stages_from_trace(&turns);
            for t in &turns {
                result.stages.observe_ms += t.observe_ms;
                result.stages.decide_ms += t.decide_ms;
                result.stages.act_ms += t.steps.iter().map(|s| s.duration_ms).sum::<u64>();
                result.stages.settle_ms += t.settle_ms;
                result.stages.verify_ms += t.verify_ms.unwrap_or(0);
            }
            result.turns = turns.len() as u32;
        }
    }
    let outcome: Option<OutcomeRecord> = fs::read_to_string(trace_dir.join(OUTCOME_FILE))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    match outcome {
        Some(o) => {
            result.turns = o.turns;
            result.steps = o.steps_used;
            result.run_ms = o.elapsed_ms;
            result.claimed_done = matches!(o.end, EndReason::Succeeded);
            result.refused = matches!(
                o.end,
                EndReason::Clarified | EndReason::EndedOnRefusal | EndReason::Declined
            );
            result.reason = end_reason_name(&o.end);
            result.detail = match &o.outcome {
                cel_contracts::GoalOutcome::Succeeded { summary, .. } => summary.clone(),
                cel_contracts::GoalOutcome::Refused { summary } => summary.clone(),
                cel_contracts::GoalOutcome::Failed(r) => {
                    r.attempts.last().cloned().unwrap_or_default()
                }
            };
        }
        None => {
            result.reason = if agent.killed {
                REASON_KILLED.into()
            } else {
                REASON_RUNNER_ERROR.into()
            };
            // The runner prints its setup error as the last line.
            result.detail = agent
                .log
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .or_else(|| agent.log.lines().last())
                .unwrap_or("")
                .to_string();
            if agent.exit_code == Some(crate::exit_code::USAGE_OR_SETUP) && result.detail.is_empty()
            {
                result.detail = "sightline run exited with a setup error".into();
            }
        }
    }
}

/// The planner's own stage times summed over a run's calls, from the trace (each turn's
/// `decide_stats` and `verify_stats`, which the model planner writes); `None` when no call
/// left any (a replay).
pub fn planner_stages_from_trace(turns: &[TurnRecord]) -> Option<PlannerStages> {
    let mut sums = PlannerStages::default();
    let calls = turns
        .iter()
        .flat_map(|t| [t.decide_stats.as_ref(), t.verify_stats.as_ref()])
        .flatten()
        .filter_map(|v| serde_json::from_value::<StageTimes>(v.clone()).ok());
    for s in calls {
        sums.calls += 1;
        sums.ms.add(&s.ms);
    }
    (sums.calls > 0).then_some(sums)
}

/// `budget_exhausted:max_steps`, `planner_error`, … : the runner's end reason as one word.
fn end_reason_name(end: &EndReason) -> String {
    let value = serde_json::to_value(end).unwrap_or_default();
    let reason = value
        .get("reason")
        .and_then(|r| r.as_str())
        .unwrap_or("unknown")
        .to_string();
    match value.get("budget").and_then(|b| b.as_str()) {
        Some(b) => format!("{reason}:{b}"),
        None => reason,
    }
}

/// Runs `tasks` `repeat` times each, appending each result as a JSON line to `results` as it
/// finishes (so an interrupted suite keeps what it ran), and calling `progress` per run.
pub fn run_suite(
    tasks: &[Task],
    repeat: u32,
    options: &DesktopEvalOptions,
    results: &mut dyn Write,
    progress: &mut dyn FnMut(&RunResult),
    stop: &AtomicBool,
) -> Result<Vec<RunResult>> {
    let mut all = Vec::new();
    for task in tasks {
        for r in 0..repeat {
            if stop.load(Ordering::SeqCst) {
                return Ok(all);
            }
            let result = run_task(task, r, options, stop)?;
            let line = serde_json::to_string(&result)
                .map_err(|e| Error::runner_caused("serializing a result", e))?;
            writeln!(results, "{line}")
                .and_then(|()| results.flush())
                .map_err(|e| Error::runner_caused("writing results", e))?;
            progress(&result);
            all.push(result);
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::StageMs;

    #[test]
    fn planner_stats_are_read_from_the_trace() -> crate::error::Result<()> {
        let json = |e| crate::error::Error::internal_caused("a trace record", e);
        let view = serde_json::to_value(crate::view::empty_view("g")).map_err(json)?;
        let stats = |pre: f64, total: f64| {
            serde_json::to_value(StageTimes {
                ms: StageMs {
                    preprocess_ms: pre,
                    total_ms: total,
                    ..StageMs::default()
                },
                ..StageTimes::default()
            })
        };
        let turns: Vec<TurnRecord> = [
            serde_json::json!({ "turn": 1, "started_ms": 0, "view": view, "decide_ms": 3,
                                "decide_stats": stats(1.5, 11.0).map_err(json)? }),
            serde_json::json!({ "turn": 2, "started_ms": 5, "view": view, "decide_ms": 3,
                                "decide_stats": stats(0.5, 1.0).map_err(json)?,
                                "verify_stats": stats(0.0, 0.5).map_err(json)? }),
        ]
        .into_iter()
        .map(serde_json::from_value)
        .collect::<std::result::Result<_, _>>()
        .map_err(json)?;
        let p = planner_stages_from_trace(&turns)
            .ok_or_else(|| crate::error::Error::internal("three calls traced, none read"))?;
        assert_eq!(p.calls, 3);
        assert_eq!(p.ms.preprocess_ms, 2.0);
        assert_eq!(p.ms.total_ms, 12.5);
        assert!(planner_stages_from_trace(&turns[..0]).is_none());
        Ok(())
    }
    use crate::runner::Budget;

    #[test]
    fn end_reasons_read_as_one_word() {
        assert_eq!(end_reason_name(&EndReason::Succeeded), "succeeded");
        assert_eq!(end_reason_name(&EndReason::PlannerError), "planner_error");
        assert_eq!(
            end_reason_name(&EndReason::BudgetExhausted {
                budget: Budget::MaxSteps
            }),
            "budget_exhausted:max_steps"
        );
    }
}
