//! The `sightline` command-line tool: drive the desktop, plan or verify one turn, manage
//! models, generate freely. See the README for what each command prints.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sightline::exit_code;
use sightline::settings::ModelArgs;
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
    /// Train the done-grader's head on labelled examples (`grader fit`).
    Grader(cli::grader::GraderArgs),
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
    /// Serve the agent as MCP tools and the model behind an OpenAI-compatible API.
    #[cfg(feature = "serve")]
    Serve(cli::serve::ServeArgs),
}

impl Command {
    /// The model flags of a command that loads a model in this process.
    fn model_args(&self) -> Option<&ModelArgs> {
        match self {
            #[cfg(feature = "desktop")]
            Command::Run(args) => Some(&args.model),
            Command::Plan(args) => Some(&args.model),
            Command::Verify(args) => Some(&args.model),
            Command::Generate(args) => Some(&args.model),
            Command::Bench(args) => Some(&args.model),
            Command::Grader(args) => Some(args.model()),
            #[cfg(feature = "desktop")]
            Command::Eval(args) => args.model(),
            #[cfg(feature = "desktop")]
            Command::View(_) => None,
            Command::Models(_) => None,
            #[cfg(feature = "serve")]
            Command::Serve(args) => (args.replay.is_none()).then_some(&args.model),
        }
    }
}

fn main() -> ExitCode {
    // Before any thread starts: a forced low kernel path also holds candle's quantized
    // kernels at AVX2 (see `cpu::apply_forced_path_to_candle`).
    sightline::cpu::apply_forced_path_to_candle();
    let cli = Cli::parse();
    let default_level = if cli.verbose { "info" } else { "warn" };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("SIGHTLINE_LOG")
                .unwrap_or_else(|_| EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    // Before any tensor work: candle's and rayon's pools size themselves once.
    if let Some(model) = cli.command.model_args() {
        model.apply_threads();
    }
    let result = match &cli.command {
        #[cfg(feature = "desktop")]
        Command::Run(args) => cli::run::run(args),
        #[cfg(feature = "desktop")]
        Command::View(args) => cli::view::view(args),
        Command::Plan(args) => cli::plan::plan(args),
        Command::Verify(args) => cli::plan::verify(args),
        Command::Grader(args) => cli::grader::grader(args),
        Command::Models(args) => cli::models::models(args),
        Command::Generate(args) => cli::generate::generate(args),
        Command::Bench(args) => cli::bench::bench(args),
        #[cfg(feature = "desktop")]
        Command::Eval(args) => cli::eval::eval(args),
        #[cfg(feature = "serve")]
        Command::Serve(args) => cli::serve::serve(args),
    };
    // The one place an error becomes a line: every command's setup errors read alike.
    let code = result.unwrap_or_else(|e| {
        eprintln!("error: {}", cli::error_line(&e));
        exit_code::USAGE_OR_SETUP
    });
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
