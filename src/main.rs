//! The `sightline` command-line tool: drive the desktop, plan or verify one turn, manage
//! models, generate freely. See the README for what each command prints.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

mod cli;

/// A fully offline planner and runner for computer-use agents.
#[derive(Debug, Parser)]
#[command(name = "sightline", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log what each stage does (same as SIGHTLINE_LOG=info).
    #[arg(long, short, global = true)]
    verbose: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Drive the desktop toward a goal: look, plan, act, look again.
    #[cfg(feature = "desktop")]
    Run(cli::run::RunArgs),
    /// Print the current screen's planning view as the planner would see it: elements from
    /// the accessibility tree with ids, roles, names and bounds (`--json`: view plus bounds).
    #[cfg(feature = "desktop")]
    View(cli::view::ViewArgs),
    /// Plan one turn from a screenshot and a view; print the NextMove JSON.
    Plan(cli::plan::PlanArgs),
    /// Judge a "done" claim against a screenshot; print the DoneVerdict JSON.
    Verify(cli::plan::VerifyArgs),
    /// List, download and describe models.
    Models(cli::models::ModelsArgs),
    /// Continue a chat prompt (and an optional image) with no grammar; print the text, and
    /// the prefill and decode speed on stderr.
    Generate(cli::generate::GenerateArgs),
    /// Measure load, memory, vision, prefill, decode, grammar and whole turns on a
    /// real-shape random model; optionally side by side with llama.cpp.
    Bench(cli::bench::BenchArgs),
    /// Measure task success: a desktop task suite, click grounding, merging shards.
    #[cfg(feature = "desktop")]
    Eval(cli::eval::EvalArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = if cli.verbose { "info" } else { "warn" };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("SIGHTLINE_LOG")
                .unwrap_or_else(|_| EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    let code = match &cli.command {
        #[cfg(feature = "desktop")]
        Command::Run(args) => cli::run::run(args, Some(&model_planner)),
        #[cfg(feature = "desktop")]
        Command::View(args) => cli::view::view(args),
        Command::Plan(args) => cli::plan::plan(args),
        Command::Verify(args) => cli::plan::verify(args),
        Command::Models(args) => cli::models::models(args),
        Command::Generate(args) => cli::generate::generate(args),
        Command::Bench(args) => cli::bench::bench(args),
        #[cfg(feature = "desktop")]
        Command::Eval(args) => cli::eval::eval(args),
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The `--model` planner of `sightline run`: a [`LocalPlanner`] on the resolved files.
#[cfg(feature = "desktop")]
fn model_planner(
    request: &cli::run::PlannerRequest,
) -> anyhow::Result<Box<dyn cel_contracts::PlanProducer>> {
    use sightline::planner::{LocalPlanner, PlannerOptions};
    let mut options = PlannerOptions::new(cli::plan::model_source(&request.model)?);
    options.device = request.device.parse()?;
    options.max_visual_tokens = Some(request.model.visual_token_budget as usize);
    let planner = LocalPlanner::load(&options)?;
    let report = planner.report();
    eprintln!(
        "loaded {} ({}) on {} in {:.1} s",
        report.model,
        report.quant,
        report.device,
        report.load_time.as_secs_f64()
    );
    Ok(Box::new(planner))
}
