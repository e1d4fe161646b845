//! `sightline run "goal"`: drive the desktop until the goal is done, refused, failed or out of
//! budget, printing one line per batch and per step, then the outcome.
//!
//! The planner is a replay (`--replay FILE.jsonl` or a trace directory) or a model
//! (`--model`, a [`LocalPlanner`]). The display is opened before the model is resolved, so a
//! run that cannot see a screen says so before any download or load.

use std::io::Write;
use std::path::PathBuf;

use cel_contracts::{DoneVerdict, GoalOutcome, PlanProducer, Step, StepResult};
use sightline::exit_code;
use sightline::planner::LocalPlanner;
use sightline::runner::{
    describe_action, step_line, ConfirmPrompt, EndReason, Grants, PlannerStats, ReplayPlanner,
    RunObserver, RunOptions, RunReport, Runner, StopFlag, TerminalPrompt, XDesktop,
};
use sightline::settings::{ModelArgs, RunBudgetArgs};

/// Arguments of `sightline run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The goal, in plain words. Its wording never allows a destructive step (deleting,
    /// overwriting, closing, sending, paying, changing the system, running unknown commands):
    /// only `--allow` or an approval at `--confirm` does.
    pub goal: String,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Replay recorded moves (JSONL of NextMoves or a trace's turns.jsonl, or a trace
    /// directory) instead of asking a model.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "model")]
    pub replay: Option<PathBuf>,
    #[command(flatten)]
    pub budget: RunBudgetArgs,
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

/// Runs `sightline run` on the terminal and returns the exit code. Progress and the
/// outcome go to stdout; a setup error is returned for `main` to print.
pub fn run(args: &RunArgs) -> anyhow::Result<i32> {
    let mut stdout = std::io::stdout();
    let env = RunEnv::terminal(&mut stdout);
    let RunEnv {
        out,
        prompt,
        stop,
        install_ctrlc,
    } = env;
    let report = setup_and_run(args, out, prompt, stop, install_ctrlc)?;
    print_outcome(out, &report);
    Ok(exit_code_for(&report))
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
    out: &mut dyn Write,
    prompt: Box<dyn ConfirmPrompt>,
    stop: StopFlag,
    install_ctrlc: bool,
) -> anyhow::Result<RunReport> {
    if args.goal.trim().is_empty() {
        anyhow::bail!("the goal is empty");
    }
    // The grants are checked first: an unknown kind is a usage error before anything opens.
    let grants = Grants::parse(&args.allow)?;
    // A replay is read first (a local file, checked at once); then the display: without one
    // nothing else matters, and resolving a model may download gigabytes.
    let replay = match &args.replay {
        Some(path) => Some(ReplayPlanner::from_path(path)?),
        None => None,
    };
    let mut desktop = XDesktop::open(args.monitor)?;
    if args.no_elements {
        desktop = desktop.without_elements();
    }
    let mut planner_stats: Option<PlannerStats> = None;
    let (planner, label): (Box<dyn PlanProducer>, String) = match (replay, &args.replay) {
        (Some(replay), Some(path)) => (Box::new(replay), format!("replay {}", path.display())),
        _ => {
            let model = args.model.resolve()?;
            let label = format!("{} ({})", model.spec, model.source);
            let planner = LocalPlanner::load(&args.model.planner_options(&model)?)?;
            eprintln!("{}", planner.report().summary());
            // The trace gets the model's own stage times of every call.
            let handle = planner.clone();
            planner_stats = Some(Box::new(move || {
                let stats = handle.last_stats().ok()?;
                serde_json::to_value(stats.stage_times()).ok()
            }));
            (Box::new(planner), label)
        }
    };
    if install_ctrlc {
        stop.install_ctrlc_handler()?;
    }
    let options = RunOptions {
        limits: args.budget.limits(),
        max_failures: args.budget.max_failures,
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
    if let Some(stats) = planner_stats {
        runner = runner.with_planner_stats(stats);
    }
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
        let line = step_line(
            step,
            attempt,
            result,
            ["  dry-run  ", "  ok       ", "  error    "],
        );
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
