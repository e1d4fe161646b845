//! `sightline run "goal"`: drive the desktop until the goal is done, refused, failed or out of
//! budget, printing one line per batch and per step, then the outcome.
//!
//! The planner is a replay (`--replay FILE.jsonl` or a trace directory) or a model
//! (`--model`), built by a [`PlannerFactory`] the binary supplies once the local planner
//! exists; without one, `--model` is a setup error that says so.

use std::io::Write;
use std::path::PathBuf;

use crate::cli::resolve;
use cel_contracts::{DoneVerdict, GoalOutcome, PlanProducer, RunLimits, Step, StepResult};
use sightline::hub::ResolvedModel;
use sightline::runner::{
    describe_action, ConfirmPrompt, EndReason, Grants, ReplayPlanner, RunObserver, RunOptions,
    RunReport, Runner, StopFlag, TerminalPrompt, XDesktop,
};

/// Exit codes of `sightline run`.
pub mod exit_code {
    /// The goal succeeded (`done`, verified).
    pub const SUCCESS: i32 = 0;
    /// The run failed: the planner gave up or errored, a step failed, a budget ran out.
    pub const FAILED: i32 = 1;
    /// Bad arguments or setup: unknown model, no display, no input backend, unreadable replay,
    /// no planner for `--model`. Matches clap's own exit code for usage errors.
    pub const USAGE_OR_SETUP: i32 = 2;
    /// The agent refused: the planner asked to clarify, the destructive-step gate refused a
    /// step no `--allow` covered, or the user declined a step at `--confirm`.
    pub const REFUSED: i32 = 3;
    /// The user stopped the run: Ctrl-C or the top-left-corner fail-safe (128 + SIGINT).
    pub const INTERRUPTED: i32 = 130;
}

/// Arguments of `sightline run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The goal, in plain words. Its wording never allows a destructive step (deleting,
    /// overwriting, closing, sending, paying, changing the system, running unknown commands):
    /// only `--allow` or an approval at `--confirm` does.
    pub goal: String,
    /// Model: a manifest id (`qwen3-vl-2b`, `qwen3-vl-4b:q8_0`), a Hub repo id or a local path.
    /// Default: the manifest marked default.
    #[arg(long, conflicts_with = "replay")]
    pub model: Option<String>,
    /// Replay recorded moves (JSONL of NextMoves or a trace's turns.jsonl, or a trace
    /// directory) instead of asking a model.
    #[arg(long, value_name = "FILE.jsonl")]
    pub replay: Option<PathBuf>,
    /// Device for the model: cpu, cuda, cuda:N, metal.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Step budget: the run fails when this many steps have run.
    #[arg(long, default_value_t = 30)]
    pub max_steps: u32,
    /// Wall-clock budget in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub timeout: u64,
    /// Attempts per step before the run fails.
    #[arg(long, default_value_t = 3)]
    pub max_step_retries: u32,
    /// Plan and print, execute no input.
    #[arg(long)]
    pub dry_run: bool,
    /// Ask on the terminal about each step the gate refuses, showing it; yes runs that one
    /// step.
    #[arg(long)]
    pub confirm: bool,
    /// Allow a kind of destructive step for this run: delete, overwrite, close, send, pay,
    /// system or shell; delete and overwrite may be limited to paths
    /// (`--allow delete:~/tmp/**`). Repeat for several.
    #[arg(long = "allow", value_name = "KIND[:PATHS]")]
    pub allow: Vec<String>,
    /// Monitor index to capture and drive (default: the primary monitor).
    #[arg(long)]
    pub monitor: Option<usize>,
    /// Write a trace (turns.jsonl, screenshots, outcome) into this directory.
    #[arg(long, value_name = "DIR")]
    pub trace: Option<PathBuf>,
    /// Read no elements from the accessibility tree: the planner sees the screenshot and
    /// targets xy: points only.
    #[arg(long)]
    pub no_elements: bool,
}

/// What a planner factory gets to build a model planner from.
#[derive(Debug, Clone)]
pub struct PlannerRequest {
    /// The resolved model files.
    pub model: ResolvedModel,
    /// The `--device` value.
    pub device: String,
}

/// Builds the model planner for `--model`. The binary passes one once `LocalPlanner` exists.
pub type PlannerFactory = dyn Fn(&PlannerRequest) -> anyhow::Result<Box<dyn PlanProducer>>;

/// Where the run's side inputs come from; the CLI uses [`RunEnv::terminal`], tests their own.
pub struct RunEnv<'a> {
    /// Where progress lines and the outcome are printed.
    pub out: &'a mut dyn Write,
    /// Answers for `--confirm`.
    pub prompt: Box<dyn ConfirmPrompt>,
    /// The stop flag; `install_ctrlc` hooks it to Ctrl-C.
    pub stop: StopFlag,
    /// Whether to install the Ctrl-C handler (once per process).
    pub install_ctrlc: bool,
}

impl<'a> RunEnv<'a> {
    /// Stdout, the terminal prompt, and a Ctrl-C handler.
    pub fn terminal(out: &'a mut dyn Write) -> Self {
        Self {
            out,
            prompt: Box::new(TerminalPrompt),
            stop: StopFlag::new(),
            install_ctrlc: true,
        }
    }
}

/// Runs `sightline run` on the terminal and returns the exit code.
/// Progress and the outcome go to stdout, a setup error to stderr.
pub fn run(args: &RunArgs, model_planner: Option<&PlannerFactory>) -> i32 {
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    run_reporting(
        args,
        model_planner,
        RunEnv::terminal(&mut stdout),
        &mut stderr,
    )
}

/// Runs `sightline run` in `env`, printing a setup error on `errors`; returns the exit code.
fn run_reporting(
    args: &RunArgs,
    model_planner: Option<&PlannerFactory>,
    env: RunEnv<'_>,
    errors: &mut dyn Write,
) -> i32 {
    let RunEnv {
        out,
        prompt,
        stop,
        install_ctrlc,
    } = env;
    match setup_and_run(args, model_planner, out, prompt, stop, install_ctrlc) {
        Ok(report) => {
            print_outcome(out, &report);
            exit_code_for(&report)
        }
        Err(e) => {
            let _ = writeln!(errors, "error: {}", crate::cli::error_line(&e));
            exit_code::USAGE_OR_SETUP
        }
    }
}

/// The exit code for a finished run.
pub fn exit_code_for(report: &RunReport) -> i32 {
    if report.end.is_user_abort() {
        return exit_code::INTERRUPTED;
    }
    match report.outcome {
        GoalOutcome::Succeeded { .. } => exit_code::SUCCESS,
        GoalOutcome::Refused { .. } => exit_code::REFUSED,
        GoalOutcome::Failed(_) => exit_code::FAILED,
    }
}

fn setup_and_run(
    args: &RunArgs,
    model_planner: Option<&PlannerFactory>,
    out: &mut dyn Write,
    prompt: Box<dyn ConfirmPrompt>,
    stop: StopFlag,
    install_ctrlc: bool,
) -> anyhow::Result<RunReport> {
    if args.goal.trim().is_empty() {
        anyhow::bail!("the goal is empty");
    }
    if args.max_steps == 0 || args.timeout == 0 || args.max_step_retries == 0 {
        anyhow::bail!("--max-steps, --timeout and --max-step-retries must be at least 1");
    }
    let grants = Grants::parse(&args.allow)?;
    let (planner, label): (Box<dyn PlanProducer>, String) = match &args.replay {
        Some(path) => (
            Box::new(ReplayPlanner::from_path(path)?),
            format!("replay {}", path.display()),
        ),
        None => {
            let spec = resolve::model_spec(args.model.as_deref())?;
            // Checked before resolving, which may download gigabytes.
            let Some(factory) = model_planner else {
                anyhow::bail!(
                    "--model {spec}: this build has no local model planner yet; use --replay \
                     FILE.jsonl"
                );
            };
            let model = resolve::resolve_model(Some(&spec))?;
            let label = format!("{} ({})", spec, model.source);
            let planner = factory(&PlannerRequest {
                model,
                device: args.device.clone(),
            })?;
            (planner, label)
        }
    };
    let mut desktop = XDesktop::open(args.monitor)?;
    if args.no_elements {
        desktop = desktop.without_elements();
    }
    if install_ctrlc {
        stop.install_ctrlc_handler()?;
    }
    let options = RunOptions {
        limits: RunLimits {
            max_steps: args.max_steps,
            timeout_ms: args.timeout.saturating_mul(1000),
            max_step_retries: args.max_step_retries,
            ..RunLimits::default()
        },
        dry_run: args.dry_run,
        confirm: args.confirm,
        grants,
        trace_dir: args.trace.clone(),
        use_elements: !args.no_elements,
        planner_label: label,
        ..RunOptions::default()
    };
    let allowed: Vec<String> = options.grants.iter().map(|g| g.to_string()).collect();
    let _ = writeln!(
        out,
        "monitor {} ({}), planner {}{}{}",
        desktop.monitor().index,
        desktop.monitor().name,
        options.planner_label,
        if args.dry_run {
            ", dry run: no input"
        } else {
            ""
        },
        if allowed.is_empty() {
            String::new()
        } else {
            format!(", allowed: {}", allowed.join(" "))
        }
    );
    let mut runner = Runner::new(Box::new(desktop), options)
        .with_prompt(prompt)
        .with_stop_flag(stop);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    let mut printer = LinePrinter { out };
    let report = rt.block_on(runner.run(&args.goal, planner.as_ref(), &mut printer))?;
    Ok(report)
}

/// Prints one line per batch and per step.
struct LinePrinter<'a> {
    out: &'a mut dyn Write,
}

impl RunObserver for LinePrinter<'_> {
    fn on_batch(&mut self, turn: u32, purpose: &str, steps: &[Step]) {
        let _ = writeln!(
            self.out,
            "[turn {turn}] {purpose} ({} step{})",
            steps.len(),
            if steps.len() == 1 { "" } else { "s" }
        );
    }

    fn on_step(&mut self, step: &Step, attempt: u32, result: &StepResult) {
        let retry = if attempt > 1 {
            format!(" (attempt {attempt})")
        } else {
            String::new()
        };
        let what = describe_action(&step.action);
        let line = match result {
            StepResult::Ok { data, .. } if data.get("dry_run").is_some() => {
                format!("  dry-run  {what} -- {}", step.purpose)
            }
            StepResult::Ok { .. } => format!("  ok       {what} -- {}{retry}", step.purpose),
            StepResult::Err { message, .. } => {
                format!("  error    {what} -- {}{retry}: {message}", step.purpose)
            }
        };
        let _ = writeln!(self.out, "{line}");
    }

    fn on_refusal(&mut self, step: &Step, message: &str) {
        let _ = writeln!(
            self.out,
            "  refused  {} -- {message}",
            describe_action(&step.action)
        );
    }

    fn on_verdict(&mut self, summary: &str, verdict: &DoneVerdict) {
        let _ = if verdict.verified {
            writeln!(self.out, "[done] {summary} (verified)")
        } else {
            writeln!(
                self.out,
                "[done] {summary} (rejected: {}{})",
                verdict.reason,
                verdict
                    .next_action_hint
                    .map(|h| format!("; hint {h:?}"))
                    .unwrap_or_default()
            )
        };
    }
}

fn print_outcome(out: &mut dyn Write, report: &RunReport) {
    let end = match report.end {
        EndReason::BudgetExhausted { budget } => format!("budget exhausted ({budget:?})"),
        other => format!("{other:?}"),
    };
    let _ = match &report.outcome {
        GoalOutcome::Succeeded { summary, .. } => writeln!(out, "succeeded: {summary}"),
        GoalOutcome::Refused { summary } => writeln!(out, "refused: {summary}"),
        GoalOutcome::Failed(r) => {
            let _ = writeln!(
                out,
                "failed: {} / {} [{end}]",
                r.failing_sub_goal, r.failing_step
            );
            for a in &r.attempts {
                let _ = writeln!(out, "  - {a}");
            }
            Ok(())
        }
    };
    let _ = writeln!(
        out,
        "{} turn(s), {} step(s), {:.1} s{}",
        report.turns,
        report.steps_used,
        report.elapsed_ms as f64 / 1000.0,
        report
            .trace_dir
            .as_ref()
            .map(|d| format!(", trace in {}", d.display()))
            .unwrap_or_default()
    );
}
