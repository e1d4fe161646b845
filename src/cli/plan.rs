//! `sightline plan` and `sightline verify`: one planner turn from files, printed as JSON.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cel_contracts::{AttemptRecord, PlanningView};
use serde::de::DeserializeOwned;
use sightline::decode::{check_top_p, Sampling};
use sightline::exit_code;
use sightline::image::InputLimits;
use sightline::input_file::{self, InputKind};
use sightline::planner::{LocalPlanner, Turn, TurnStats};
use sightline::settings::ModelArgs;

/// Arguments of `sightline plan`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// The goal (with --trace: default, the run's goal).
    #[cfg_attr(feature = "desktop", arg(required_unless_present = "trace"))]
    pub goal: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// The screenshot (PNG or JPEG); without one the turn is text-only.
    #[arg(long)]
    pub screenshot: Option<PathBuf>,
    /// A `PlanningView` as JSON (default: an empty desktop view).
    #[arg(long)]
    pub view: Option<PathBuf>,
    /// Earlier attempts: a JSON array of `AttemptRecord`s.
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Plan a turn of a run's trace again (`run --trace DIR`): its view, its screenshot and
    /// the history the planner had at that turn. With --show-prompt, the prompt that turn's
    /// planner read.
    #[cfg(feature = "desktop")]
    #[arg(long, value_name = "DIR", conflicts_with_all = ["screenshot", "view", "history"])]
    pub trace: Option<PathBuf>,
    /// With --trace: the turn to plan, from 1 (default: the last one).
    #[cfg(feature = "desktop")]
    #[arg(long, requires = "trace")]
    pub turn: Option<u32>,
    /// Shared memory: any JSON value.
    #[arg(long)]
    pub memory: Option<PathBuf>,
    /// Sample at this temperature instead of greedy decoding (needs --seed).
    #[arg(long, requires = "seed")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass, with --temperature.
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Seed for sampling.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print the turn's per-stage timings and what the prompt clipped on stderr.
    #[arg(long)]
    pub stats: bool,
    /// Print the rendered turn (system, screen with an `<image × N>` placeholder, task)
    /// on stderr.
    #[arg(long)]
    pub show_prompt: bool,
    /// Let the model write a short thought of at most N tokens before its move (a
    /// `"thought"` key, or a Thinking template's thought before `</think>`; dropped from the
    /// printed move, shown with --stats). Default 0: off (a Thinking template's thought is
    /// then closed empty).
    #[arg(long, default_value_t = 0)]
    pub think_tokens: usize,
}

/// Arguments of `sightline verify`.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// The goal.
    pub goal: String,
    #[command(flatten)]
    pub model: ModelArgs,
    /// The screenshot to judge (PNG or JPEG).
    #[arg(long)]
    pub screenshot: PathBuf,
    /// A `PlanningView` as JSON (default: an empty desktop view).
    #[arg(long)]
    pub view: Option<PathBuf>,
    /// What the agent claims it achieved.
    #[arg(long)]
    pub summary: String,
    /// Accept when the grader's probability is at least this.
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f32,
    /// A trained grader head (safetensors) instead of the zero-shot one.
    #[arg(long)]
    pub grader_head: Option<PathBuf>,
    /// Print the turn's per-stage timings on stderr.
    #[arg(long)]
    pub stats: bool,
}

/// Runs `sightline plan`; returns the exit code.
pub fn plan(args: &PlanArgs) -> Result<i32> {
    plan_inner(args).map(|()| exit_code::SUCCESS)
}

/// Runs `sightline verify`; returns the exit code.
pub fn verify(args: &VerifyArgs) -> Result<i32> {
    verify_inner(args)
}

fn plan_inner(args: &PlanArgs) -> Result<()> {
    // Every input is read and checked before the model loads: a bad file is reported at
    // once, naming it, not after a load of many seconds.
    let sampling = match (args.temperature, args.seed) {
        (Some(temperature), Some(seed)) => Some(Sampling::top_p(temperature, args.top_p, seed)?),
        _ => {
            check_top_p(args.top_p)?;
            None
        }
    };
    let TurnFiles {
        goal,
        view,
        history,
        screenshot,
    } = turn_files(args)?;
    let memory = match &args.memory {
        Some(path) => read_json(path, InputKind::Memory)?,
        None => serde_json::Value::Null,
    };
    // The clarify rule needs no model: answer before resolving or loading one (the planner
    // would give the same answer as its first step, after a load of seconds).
    if let Some(question) = sightline::planner::clarify::clarify_question(&goal, &view) {
        println!(
            "{}",
            serde_json::to_string(&cel_contracts::NextMove::Clarify { question })?
        );
        if args.stats {
            eprintln!(
                "clarify    answered by the clarify rule before any model loaded: 0 forward passes"
            );
        }
        return Ok(());
    }
    let mut options = args.model.resolve_planner_options()?;
    if let Some(sampling) = sampling {
        options.decode.sampling = sampling;
    }
    options.grammar.limits.thought_tokens = args.think_tokens;
    let planner = LocalPlanner::load(&options)?;
    let result = planner.plan(&Turn {
        goal: &goal,
        history: &history,
        shared_memory: &memory,
        view: &view,
        screenshot: screenshot.as_deref(),
    });
    if args.show_prompt {
        eprintln!("{}", planner.last_prompt()?);
    }
    let (next_move, stats) = result?;
    println!("{}", serde_json::to_string(&next_move)?);
    if args.stats {
        print_stats(&planner, &stats);
    }
    Ok(())
}

/// What one `plan` turn is made of: from the flags, or from a turn of a trace.
struct TurnFiles {
    goal: String,
    view: PlanningView,
    history: Vec<AttemptRecord>,
    screenshot: Option<Vec<u8>>,
}

fn turn_files(args: &PlanArgs) -> Result<TurnFiles> {
    #[cfg(feature = "desktop")]
    if let Some(dir) = &args.trace {
        return trace_turn(dir, args.turn, args.goal.as_deref());
    }
    let goal = args.goal.clone().unwrap_or_default();
    let view = match &args.view {
        Some(path) => read_json::<PlanningView>(path, InputKind::View)?,
        None => sightline::view::empty_view(&goal),
    };
    let history: Vec<AttemptRecord> = match &args.history {
        Some(path) => read_json(path, InputKind::History)?,
        None => Vec::new(),
    };
    let screenshot = args
        .screenshot
        .as_deref()
        .map(read_screenshot)
        .transpose()?;
    Ok(TurnFiles {
        goal,
        view,
        history,
        screenshot,
    })
}

/// Turn `turn` (default: the last) of the trace in `dir`, as its planner saw it.
#[cfg(feature = "desktop")]
fn trace_turn(dir: &Path, turn: Option<u32>, goal: Option<&str>) -> Result<TurnFiles> {
    use sightline::runner::trace::{history_before, read_meta, read_turns};
    let meta = read_meta(dir)?;
    let turns = read_turns(dir)?;
    let record = match turn {
        Some(n) => turns.iter().find(|t| t.turn == n),
        None => turns.last(),
    }
    .with_context(|| {
        format!(
            "{}: no turn {} (the trace has {} turns)",
            dir.display(),
            turn.map_or("at all".to_string(), |n| n.to_string()),
            turns.len()
        )
    })?;
    let screenshot = record
        .screenshot
        .as_deref()
        .map(|rel| read_screenshot(&dir.join(rel)))
        .transpose()?;
    Ok(TurnFiles {
        goal: goal.map_or(meta.goal, str::to_string),
        view: record.view.clone(),
        history: history_before(&turns, record.turn),
        screenshot,
    })
}

fn verify_inner(args: &VerifyArgs) -> Result<i32> {
    let view = match &args.view {
        Some(path) => read_json::<PlanningView>(path, InputKind::View)?,
        None => sightline::view::empty_view(&args.goal),
    };
    let screenshot = read_screenshot(&args.screenshot)?;
    let mut options = args.model.resolve_planner_options()?;
    options.grader_head = args.grader_head.clone();
    options.grader_threshold = args.threshold;
    let planner = LocalPlanner::load(&options)?;
    let memory = serde_json::Value::Null;
    let (verdict, stats) = planner.verify(
        &Turn {
            goal: &args.goal,
            history: &[],
            shared_memory: &memory,
            view: &view,
            screenshot: Some(&screenshot),
        },
        &args.summary,
    )?;
    println!("{}", serde_json::to_string(&verdict)?);
    if args.stats {
        print_stats(&planner, &stats);
    }
    Ok(if verdict.verified {
        exit_code::SUCCESS
    } else {
        exit_code::FAILED
    })
}

/// Reads a screenshot or image through [`input_file`] and decodes it once to check it, so a
/// bad image is an error naming the file before any model loads.
pub fn read_screenshot(path: &Path) -> Result<Vec<u8>> {
    let bytes = input_file::read_bytes(path, InputKind::Image)?;
    sightline::image::decode(&bytes, &InputLimits::default())
        .with_context(|| format!("{}", path.display()))?;
    Ok(bytes)
}

/// Read a JSON file into `T`; the error names the file and whether it is not JSON at all or
/// JSON of the wrong shape.
pub fn read_json<T: DeserializeOwned>(path: &Path, kind: InputKind) -> Result<T> {
    let what = kind.name();
    let bytes = input_file::read_bytes(path, kind)?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} ({what}): not JSON", path.display()))?;
    serde_json::from_value(value)
        .with_context(|| format!("{} ({what}): not a valid {what}", path.display()))
}

fn print_stats(planner: &LocalPlanner, s: &TurnStats) {
    let r = planner.report();
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "model      {} ({}, {})", r.model, r.quant, r.device);
    let _ = writeln!(err, "load       {:>9.1} ms", ms(r.load_time));
    for (stage, time) in &r.stages {
        let _ = writeln!(err, "  {stage:<17} {:>9.1} ms", ms(*time));
    }
    let _ = writeln!(err, "preprocess {:>9.1} ms", ms(s.preprocess));
    let _ = writeln!(
        err,
        "vision     {:>9.1} ms{}",
        ms(s.vision),
        if s.image_encoded { "" } else { " (reused)" }
    );
    let _ = writeln!(
        err,
        "prefill    {:>9.1} ms  {} new tokens, {}",
        ms(s.prefill),
        s.prefill_new,
        s.stage_times().reused_words()
    );
    let _ = writeln!(
        err,
        "decode     {:>9.1} ms  {} tokens, {:.0}% forced, {} forward passes",
        ms(s.decode),
        s.generated,
        100.0 * s.forced_share(),
        s.forward_passes
    );
    let w = &s.grammar_warm_up;
    let _ = writeln!(
        err,
        "grammar    {:>9.1} ms  {}",
        ms(s.grammar),
        if s.grammar_reused {
            "the last turn's".to_string()
        } else {
            format!(
                "compiled; {} warm-up walks ({} tokens) beside the prefill",
                w.walks, w.tokens
            )
        }
    );
    let _ = writeln!(err, "total      {:>9.1} ms", ms(s.total));
    if let Some(thought) = &s.thought {
        let _ = writeln!(err, "thought    {thought}");
    }
    for note in &s.truncation {
        let _ = writeln!(err, "prompt     {note}");
    }
}
