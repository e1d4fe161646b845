//! `sightline run` as the binary runs it (the CLI module is compiled into this test): flags,
//! printed lines, exit codes, the planner-factory hook, setup errors.
#![cfg(feature = "desktop")]

#[path = "../src/cli/run.rs"]
#[allow(dead_code)]
mod run;
mod runner_support;

use std::path::Path;

use anyhow::Context;
use clap::Parser;
use run::{exit_code, run_with, PlannerRequest, RunArgs, RunEnv};
use runner_support::*;
use sightline::hub::ModelFiles;
use sightline::runner::{ReplayPlanner, ScriptedPrompt, StopFlag};

const TOOLS: &[&str] = &["Xvfb", "xdpyinfo", "xdotool"];

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: RunArgs,
}

fn parse(argv: &[&str]) -> anyhow::Result<RunArgs> {
    let mut full = vec!["sightline-run"];
    full.extend_from_slice(argv);
    Ok(Cli::try_parse_from(full)?.args)
}

fn write_moves(dir: &Path, lines: &[&str]) -> anyhow::Result<String> {
    let p = dir.join("moves.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n")?;
    Ok(p.to_str().context("path")?.to_string())
}

fn run_cli(args: &RunArgs, factory: Option<&run::PlannerFactory>, stop: StopFlag) -> (i32, String) {
    let mut out = Vec::new();
    let code = run_with(
        args,
        factory,
        RunEnv {
            out: &mut out,
            prompt: Box::new(ScriptedPrompt::new([])),
            stop,
            install_ctrlc: false,
        },
    );
    (code, String::from_utf8_lossy(&out).into_owned())
}

const CLICK_THEN_DONE: &[&str] = &[
    r#"{"kind":"batch","purpose":"press the middle","steps":[{"purpose":"click centre","action":{"type":"click","target_id":"xy:500,500"}}]}"#,
    r#"{"kind":"done","summary":"pressed"}"#,
];

#[test]
fn flags_parse_and_model_conflicts_with_replay() -> anyhow::Result<()> {
    let a = parse(&[
        "--replay",
        "m.jsonl",
        "--max-steps",
        "5",
        "--timeout",
        "9",
        "--dry-run",
        "--confirm",
        "--monitor",
        "1",
        "--trace",
        "t",
        "do it",
    ])?;
    assert_eq!(a.goal, "do it");
    assert_eq!((a.max_steps, a.timeout, a.monitor), (5, 9, Some(1)));
    assert!(a.dry_run && a.confirm);
    assert!(parse(&["--replay", "m.jsonl", "--model", "qwen3-vl-2b", "g"]).is_err());
    let d = parse(&["g"])?;
    assert_eq!(
        (d.max_steps, d.timeout, d.device.as_str()),
        (30, 300, "cpu")
    );
    Ok(())
}

#[test]
fn replay_run_prints_batches_steps_and_outcome_and_exit_codes_differ() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let _xvfb = Xvfb::start(1280, 800)?;
    let dir = tempfile::tempdir()?;

    let moves = write_moves(dir.path(), CLICK_THEN_DONE)?;
    let trace = dir.path().join("trace");
    let args = parse(&[
        "--replay",
        &moves,
        "--trace",
        trace.to_str().context("path")?,
        "press it",
    ])?;
    let (code, out) = run_cli(&args, None, StopFlag::new());
    assert_eq!(code, exit_code::SUCCESS, "{out}");
    assert!(out.contains("[turn 1] press the middle (1 step)"), "{out}");
    assert!(
        out.contains("ok       click xy:500,500 -- click centre"),
        "{out}"
    );
    assert!(out.contains("[done] pressed (verified)"), "{out}");
    assert!(out.contains("succeeded: pressed"), "{out}");
    assert!(trace.join("turns.jsonl").is_file());
    assert_eq!(pointer()?, (640, 400));

    let args = parse(&["--replay", &moves, "--dry-run", "press it"])?;
    let (code, out) = run_cli(&args, None, StopFlag::new());
    assert_eq!(code, exit_code::SUCCESS);
    assert!(out.contains("dry-run  click xy:500,500"), "{out}");

    let refused = write_moves(
        dir.path(),
        &[r#"{"kind":"clarify","question":"Which one?"}"#],
    )?;
    let (code, out) = run_cli(&parse(&["--replay", &refused, "g"])?, None, StopFlag::new());
    assert_eq!(code, exit_code::REFUSED, "{out}");
    assert!(out.contains("refused: Which one?"));

    let failed = write_moves(
        dir.path(),
        &[r#"{"kind":"fail","reason":"no such button"}"#],
    )?;
    let (code, out) = run_cli(&parse(&["--replay", &failed, "g"])?, None, StopFlag::new());
    assert_eq!(code, exit_code::FAILED, "{out}");
    assert!(out.contains("no such button"));

    let stop = StopFlag::new();
    stop.request_stop();
    let (code, out) = run_cli(&parse(&["--replay", &moves, "g"])?, None, stop);
    assert_eq!(code, exit_code::INTERRUPTED, "{out}");
    assert!(out.contains("Ctrl-C"), "{out}");
    Ok(())
}

#[test]
fn model_runs_through_the_planner_factory_and_fail_clearly_without_one() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let _xvfb = Xvfb::start(1280, 800)?;
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tiny-a");
    let args = parse(&[
        "--model",
        tiny.to_str().context("path")?,
        "--device",
        "cpu",
        "press it",
    ])?;

    let (code, out) = run_cli(&args, None, StopFlag::new());
    assert_eq!(code, exit_code::USAGE_OR_SETUP, "{out}");
    assert!(out.contains("no local model planner"), "{out}");

    let factory = |req: &PlannerRequest| -> anyhow::Result<Box<dyn cel_contracts::PlanProducer>> {
        anyhow::ensure!(req.device == "cpu");
        anyhow::ensure!(matches!(req.model.files, ModelFiles::Gguf { .. }));
        Ok(Box::new(ReplayPlanner::from_jsonl(
            &CLICK_THEN_DONE.join("\n"),
            "inline",
        )?))
    };
    let (code, out) = run_cli(&args, Some(&factory), StopFlag::new());
    assert_eq!(code, exit_code::SUCCESS, "{out}");
    assert!(out.contains("local path"), "{out}");

    // A model that cannot be resolved is a setup error naming it.
    let args = parse(&["--model", "./missing-model-dir", "press it"])?;
    let (code, out) = run_cli(&args, Some(&factory), StopFlag::new());
    assert_eq!(code, exit_code::USAGE_OR_SETUP, "{out}");
    assert!(
        out.contains("missing-model-dir") && out.contains("does not exist"),
        "{out}"
    );
    Ok(())
}

#[test]
fn setup_errors_exit_with_the_setup_code() -> anyhow::Result<()> {
    let _x = x11_lock();
    let dir = tempfile::tempdir()?;
    let moves = write_moves(dir.path(), CLICK_THEN_DONE)?;
    let saved = std::env::var_os("DISPLAY");
    std::env::remove_var("DISPLAY");
    std::env::remove_var("WAYLAND_DISPLAY");
    let (code, out) = run_cli(&parse(&["--replay", &moves, "g"])?, None, StopFlag::new());
    if let Some(d) = saved {
        std::env::set_var("DISPLAY", d);
    }
    assert_eq!(code, exit_code::USAGE_OR_SETUP);
    assert!(out.contains("no display"), "{out}");

    let (code, out) = run_cli(
        &parse(&["--replay", "/no/such/file.jsonl", "g"])?,
        None,
        StopFlag::new(),
    );
    assert_eq!(code, exit_code::USAGE_OR_SETUP);
    assert!(out.contains("/no/such/file.jsonl"), "{out}");

    let bad = write_moves(dir.path(), &[r#"{"kind":"teleport"}"#])?;
    let (code, out) = run_cli(&parse(&["--replay", &bad, "g"])?, None, StopFlag::new());
    assert_eq!(code, exit_code::USAGE_OR_SETUP);
    assert!(out.contains("line 1"), "{out}");
    Ok(())
}
