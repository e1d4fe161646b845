//! `sightline eval`: task success on a desktop suite, click grounding on screenshots, and
//! merging sharded results. See the README's "Evaluating" section and [`sightline::eval`].

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use cel_contracts::{CapabilityRef, PlanningScreen, PlanningView};
use sightline::eval::desktop::{run_suite, Agent, DesktopEvalOptions};
use sightline::eval::grounding::{
    click_point, read_records, BoxFormat, GroundingResult, GroundingSummary,
};
use sightline::eval::{filter_tasks, load_suite, read_results, RunResult, Shard, Summary};
use sightline::moves::{ActionKind, CAPABILITY_NATIVE_INPUT, CAPABILITY_VISION};
use sightline::planner::{LocalPlanner, Turn};

use sightline::exit_code;
use sightline::input_file::{self, InputKind};
use sightline::settings::ModelArgs;

/// Arguments of `sightline eval`.
#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    #[command(subcommand)]
    command: EvalCommand,
}

#[derive(Debug, Clone, clap::Subcommand)]
enum EvalCommand {
    /// Run the desktop task suite: each task in a fresh virtual display, checked afterwards.
    Desktop(DesktopArgs),
    /// Click-grounding accuracy on ScreenSpot-style records.
    Grounding(GroundingArgs),
    /// Combine results files (shards) into one summary.
    Merge(MergeArgs),
}

/// Arguments of `sightline eval desktop`.
#[derive(Debug, Clone, clap::Args)]
pub struct DesktopArgs {
    /// The suite: a directory of task files.
    #[arg(long, default_value = "evals/desktop")]
    pub suite: PathBuf,
    /// The model for the agent, as `sightline run` takes it (each task's `sightline run`
    /// gets the same flags).
    #[command(flatten)]
    pub model: ModelArgs,
    /// Play each task's oracle replay instead of a model: every task must pass.
    #[arg(long, conflicts_with_all = ["replay", "model"])]
    pub oracle: bool,
    /// Play this replay for every task (a no-op replay shows the checkers fail when nothing
    /// is done).
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "model")]
    pub replay: Option<PathBuf>,
    /// Only tasks whose name matches one of these comma-separated globs.
    #[arg(long, value_name = "GLOB")]
    pub tasks: Option<String>,
    /// Runs per task.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Cap every task's step budget at this many steps.
    #[arg(long)]
    pub max_steps: Option<u32>,
    /// Cap every task's time budget at this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Run the I-th of N slices of the sorted task list (I from 0).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Output directory: results JSONL, summary JSON and each run's trace under runs/.
    #[arg(long, value_name = "DIR", default_value = "eval-out")]
    pub out: PathBuf,
    /// Print the summary as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Start no session bus for the tasks and run the agent with `--no-elements`
    /// (screenshots only).
    #[arg(long)]
    pub no_elements: bool,
}

/// Arguments of `sightline eval grounding`.
#[derive(Debug, Clone, clap::Args)]
pub struct GroundingArgs {
    /// The records: JSON Lines, or a JSON array (ScreenSpot's annotation files).
    pub data: PathBuf,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Resolve image paths against this directory instead of the data file's.
    #[arg(long, value_name = "DIR")]
    pub images: Option<PathBuf>,
    /// Box layout: xyxy (corners) or xywh (ScreenSpot: x, y, width, height).
    #[arg(long, default_value = "xyxy")]
    pub bbox: BoxFormatArg,
    /// Only the first N records.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Write one JSON line per record here.
    #[arg(long, value_name = "FILE.jsonl")]
    pub out: Option<PathBuf>,
    /// Print the summary as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--bbox`, parsed by [`BoxFormat`].
#[derive(Debug, Clone, Copy)]
pub struct BoxFormatArg(pub BoxFormat);

impl std::str::FromStr for BoxFormatArg {
    type Err = sightline::Error;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        s.parse().map(BoxFormatArg)
    }
}

/// Arguments of `sightline eval merge`.
#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// Results files (`results*.jsonl`) of `sightline eval desktop` runs or shards.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Print the summary as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Set by the Ctrl-C handler; every wait of an evaluation polls it.
static STOP: AtomicBool = AtomicBool::new(false);

impl EvalArgs {
    /// The model flags of the subcommand, where it loads a model.
    pub fn model(&self) -> Option<&ModelArgs> {
        match &self.command {
            EvalCommand::Desktop(a) => Some(&a.model),
            EvalCommand::Grounding(a) => Some(&a.model),
            EvalCommand::Merge(_) => None,
        }
    }
}

/// Runs `sightline eval`; returns the exit code.
pub fn eval(args: &EvalArgs) -> Result<i32> {
    match &args.command {
        EvalCommand::Desktop(a) => desktop(a),
        EvalCommand::Grounding(a) => grounding(a),
        EvalCommand::Merge(a) => merge(a),
    }
}

fn desktop(args: &DesktopArgs) -> Result<i32> {
    anyhow::ensure!(args.repeat >= 1, "--repeat must be at least 1");
    anyhow::ensure!(
        args.max_steps != Some(0) && args.timeout != Some(0),
        "--max-steps and --timeout must be at least 1"
    );
    let mut tasks = load_suite(&args.suite)?;
    if let Some(globs) = &args.tasks {
        tasks = filter_tasks(tasks, globs)?;
    }
    let shard_suffix = args
        .shard
        .map(|s| format!("-shard-{}-of-{}", s.index, s.count));
    if let Some(shard) = args.shard {
        tasks = shard.select(tasks);
    }
    let agent = match (args.oracle, &args.replay) {
        (true, _) => Agent::Oracle,
        (_, Some(replay)) => {
            anyhow::ensure!(
                replay.is_file(),
                "--replay {}: no such file",
                replay.display()
            );
            Agent::Replay(replay.canonicalize()?)
        }
        (false, None) => {
            // Resolved once here, so a bad --model is one clear error (and a download happens
            // once) rather than a failure in every task.
            args.model.resolve()?;
            Agent::Model(args.model.clone())
        }
    };
    if agent == Agent::Oracle {
        for t in &tasks {
            anyhow::ensure!(
                t.oracle.is_file(),
                "task {}: no oracle replay {}",
                t.name,
                t.oracle.display()
            );
        }
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create", args.out.display()))?;
    let out = args.out.canonicalize()?;
    let suffix = shard_suffix.unwrap_or_default();
    let results_path = out.join(format!("results{suffix}.jsonl"));
    let summary_path = out.join(format!("summary{suffix}.json"));
    let mut results_file = std::fs::File::create(&results_path)
        .with_context(|| format!("{}: cannot create", results_path.display()))?;
    let options = DesktopEvalOptions {
        runner_exe: std::env::current_exe().context("cannot find the sightline executable")?,
        agent,
        out_dir: out.clone(),
        scratch_root: None,
        max_steps_cap: args.max_steps,
        timeout_cap_s: args.timeout,
        elements: !args.no_elements,
    };
    ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst))
        .context("cannot install the Ctrl-C handler")?;

    let total = tasks.len() as u32 * args.repeat;
    let mut done = 0u32;
    let mut progress = |r: &RunResult| {
        done += 1;
        let verdict = if r.passed { "PASS" } else { "FAIL" };
        let why = if r.passed {
            String::new()
        } else {
            format!(" [{}] {}", r.reason, first_line(&r.detail))
        };
        eprintln!(
            "[{done}/{total}] {:<32} {verdict}  {} turn(s), {} step(s), {:.1} s{why}",
            format!("{}#{}", r.task, r.repeat),
            r.turns,
            r.steps,
            r.wall_ms as f64 / 1e3
        );
    };
    let started = Instant::now();
    let runs = run_suite(
        &tasks,
        args.repeat,
        &options,
        &mut results_file,
        &mut progress,
        &STOP,
    )?;
    let summary = Summary::of(&runs);
    std::fs::write(
        &summary_path,
        serde_json::to_string_pretty(&summary)? + "\n",
    )
    .with_context(|| format!("{}: cannot write", summary_path.display()))?;
    print_summary(&summary, args.json)?;
    eprintln!(
        "{} run(s) in {:.1} s; results in {}",
        runs.len(),
        started.elapsed().as_secs_f64(),
        results_path.display()
    );
    if STOP.load(Ordering::SeqCst) {
        eprintln!("stopped by Ctrl-C: the runs above are all that ran");
        return Ok(exit_code::INTERRUPTED);
    }
    if options.agent == Agent::Oracle && summary.passed < summary.runs {
        eprintln!("oracle runs must all pass: a task or its checker is broken");
        return Ok(exit_code::FAILED);
    }
    Ok(exit_code::SUCCESS)
}

/// The first line of `s`, cut to a terminal line's worth (a model's text can be long).
fn first_line(s: &str) -> String {
    const MAX_CHARS: usize = 100;
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > MAX_CHARS {
        format!("{}…", line.chars().take(MAX_CHARS).collect::<String>())
    } else {
        line.to_string()
    }
}

fn print_summary(summary: &Summary, json: bool) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        writeln!(stdout, "{}", serde_json::to_string(summary)?)?;
    } else {
        write!(stdout, "{}", summary.table())?;
    }
    Ok(())
}

fn merge(args: &MergeArgs) -> Result<i32> {
    let runs = read_results(&args.results)?;
    anyhow::ensure!(!runs.is_empty(), "no runs in the results files");
    for pair in runs.windows(2) {
        anyhow::ensure!(
            (&pair[0].task, pair[0].repeat, &pair[0].planner)
                != (&pair[1].task, pair[1].repeat, &pair[1].planner),
            "task {} run {} appears twice: do two results files overlap?",
            pair[0].task,
            pair[0].repeat
        );
    }
    print_summary(&Summary::of(&runs), args.json)?;
    Ok(exit_code::SUCCESS)
}

/// Token budget of each `purpose` (and `summary`, `reason`) in a grounding answer.
const GROUNDING_SENTENCE_TOKENS: usize = 12;

fn grounding(args: &GroundingArgs) -> Result<i32> {
    let mut records = read_records(&args.data, args.images.as_deref(), args.bbox.0)?;
    if let Some(n) = args.limit {
        records.truncate(n);
    }
    let mut options = args.model.resolve_planner_options()?;
    // One click is the only answer the grammar allows in a batch (done/fail/clarify remain
    // possible and score as misses).
    options.grammar.actions = vec![ActionKind::Click];
    options.grammar.coordinate_targets = true;
    // Few steps, short sentences: the first click is all that is scored, and a small model's
    // free-text purposes would otherwise dominate the time per record. (Two steps, not one:
    // the move grammar writes `(step){0,max-1}`, which llguidance rejects for a maximum of 1.)
    options.grammar.limits.max_steps = 2;
    options.grammar.limits.sentence_tokens = GROUNDING_SENTENCE_TOKENS;
    let planner = LocalPlanner::load(&options)?;
    let model_label = args.model.model.clone().unwrap_or_else(|| "default".into());
    let mut out = match &args.out {
        Some(p) => Some(
            std::fs::File::create(p).with_context(|| format!("{}: cannot create", p.display()))?,
        ),
        None => None,
    };
    let memory = serde_json::Value::Null;
    let mut results = Vec::with_capacity(records.len());
    for (i, rec) in records.iter().enumerate() {
        if STOP.load(Ordering::SeqCst) {
            break;
        }
        let png = input_file::read_bytes(&rec.image, InputKind::Image)
            .with_context(|| format!("line {}", rec.line))?;
        let (width, height) = image::image_dimensions(&rec.image)
            .with_context(|| format!("line {}: {}: not an image", rec.line, rec.image.display()))?;
        let view = grounding_view(&rec.instruction, width, height);
        let t0 = Instant::now();
        let planned = planner.plan(&Turn {
            goal: &rec.instruction,
            history: &[],
            shared_memory: &memory,
            view: &view,
            screenshot: Some(&png),
        });
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let (point, error) = match planned {
            Ok((mv, _stats)) => match click_point(&mv, width, height) {
                Ok(p) => (Some(p), None),
                Err(e) => (None, Some(e)),
            },
            Err(e) => (None, Some(format!("planner error: {e}"))),
        };
        let hit = point.is_some_and(|(x, y)| rec.target.contains(x, y));
        let result = GroundingResult {
            line: rec.line,
            instruction: rec.instruction.clone(),
            kind: rec.kind.clone(),
            platform: rec.platform.clone(),
            point,
            target: rec.target,
            hit,
            error,
            ms,
        };
        if let Some(f) = out.as_mut() {
            writeln!(f, "{}", serde_json::to_string(&result)?)?;
        }
        eprintln!(
            "[{}/{}] {} {}",
            i + 1,
            records.len(),
            if hit { "hit " } else { "miss" },
            rec.instruction
        );
        results.push(result);
    }
    let summary = GroundingSummary::of(&model_label, &results);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string(&summary)?)?;
    } else {
        write!(stdout, "{}", summary.table())?;
    }
    Ok(exit_code::SUCCESS)
}

/// The view of a grounding record: the screenshot alone, no elements, `xy:` targets.
fn grounding_view(instruction: &str, width: u32, height: u32) -> PlanningView {
    PlanningView {
        capabilities: vec![
            CapabilityRef {
                id: CAPABILITY_NATIVE_INPUT.into(),
                detail: Some(format!(
                    "mouse and keyboard; targets as xy:X,Y in 0-1000 over the {width}x{height} screenshot"
                )),
            },
            CapabilityRef {
                id: CAPABILITY_VISION.into(),
                detail: None,
            },
        ],
        ..sightline::view::view_of(instruction, PlanningScreen::default(), vec![])
    }
}
