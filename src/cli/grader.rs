//! `sightline grader fit`: train the done-grader's linear head on labelled examples.
//!
//! Reads a JSONL file of [`GraderExample`]s (the format `run --trace` writes), runs the
//! model once per labelled example to get the hidden state after the grader question,
//! fits the `(5, hidden)` head by logistic regression on a seeded split, prints the
//! held-out accuracy and writes the head as safetensors for `verify --grader-head`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use sightline::moves::GraderExample;
use sightline::planner::grader::{fit_head, read_examples, FitOptions};
use sightline::planner::{LocalPlanner, Turn};

use sightline::exit_code;
use sightline::settings::ModelArgs;

/// Arguments of `sightline grader`.
#[derive(Debug, Clone, clap::Args)]
pub struct GraderArgs {
    #[command(subcommand)]
    pub command: GraderCommand,
}

/// The `grader` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum GraderCommand {
    /// Fit a grader head on labelled examples; print the held-out accuracy.
    Fit(FitArgs),
}

/// Arguments of `sightline grader fit`.
#[derive(Debug, Clone, clap::Args)]
pub struct FitArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Labelled examples, one JSON object per line (see the README for the format).
    #[arg(long)]
    pub data: PathBuf,
    /// Where to write the head (safetensors).
    #[arg(long)]
    pub out: PathBuf,
    /// Seed of the train / held-out split.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Share of the examples held out to measure the accuracy.
    #[arg(long, default_value_t = 0.25)]
    pub held_out: f32,
}

impl GraderArgs {
    /// The model flags of the subcommand.
    pub fn model(&self) -> &ModelArgs {
        let GraderCommand::Fit(fit) = &self.command;
        &fit.model
    }
}

/// Runs `sightline grader …`; returns the exit code.
pub fn grader(args: &GraderArgs) -> Result<i32> {
    let GraderCommand::Fit(fit) = &args.command;
    fit_inner(fit).map(|()| exit_code::SUCCESS)
}

fn fit_inner(args: &FitArgs) -> Result<()> {
    let examples: Vec<GraderExample> = read_examples(&args.data)?
        .into_iter()
        .filter(|e| e.verified.is_some())
        .collect();
    if examples.len() < 4 {
        bail!(
            "{}: {} labelled examples (with \"verified\" set); at least 4 are needed",
            args.data.display(),
            examples.len()
        );
    }
    let planner = LocalPlanner::load(&args.model.resolve_planner_options()?)?;
    let memory = serde_json::Value::Null;
    let mut features = Vec::with_capacity(examples.len());
    for example in &examples {
        let screenshot = crate::cli::plan::read_screenshot(&example.screenshot)?;
        let view = example
            .view
            .clone()
            .unwrap_or_else(|| sightline::view::empty_view(&example.goal));
        let hidden = planner
            .grader_features(
                &Turn {
                    goal: &example.goal,
                    history: &[],
                    shared_memory: &memory,
                    view: &view,
                    screenshot: Some(&screenshot),
                },
                &example.summary,
            )
            .with_context(|| format!("{}", example.screenshot.display()))?;
        features.push(hidden);
    }
    let verified: Vec<bool> = examples.iter().map(|e| e.verified == Some(true)).collect();
    let hints: Vec<_> = examples.iter().map(|e| e.hint).collect();
    let report = fit_head(
        &features,
        &verified,
        &hints,
        &FitOptions {
            seed: args.seed,
            held_out: args.held_out,
            ..FitOptions::default()
        },
    )?;
    report.save(&args.out, planner.grader_setup())?;
    println!(
        "{}",
        serde_json::json!({
            "examples": examples.len(),
            "train": report.train_len,
            "held_out": report.held_out_len,
            "train_accuracy": report.train_accuracy,
            "held_out_accuracy": report.held_out_accuracy,
            "out": args.out,
        })
    );
    Ok(())
}
