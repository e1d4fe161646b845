//! `sightline run` as a user runs it, through the binary: flags, printed lines, exit codes,
//! Ctrl-C, the model planner, setup errors. Each test passes its own X server to the child
//! process (`DISPLAY`), so nothing here changes this process's environment.
#![cfg(feature = "desktop")]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use anyhow::{ensure, Context, Result};

use crate::runner_support::*;

const TOOLS: &[&str] = &["Xvfb", "xdpyinfo", "xdotool"];

/// `sightline run` on `display` (none: no `DISPLAY`, no `WAYLAND_DISPLAY`).
fn run_command(display: Option<&str>, argv: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sightline"));
    cmd.arg("run")
        .args(argv)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("WAYLAND_DISPLAY");
    match display {
        Some(d) => cmd.env("DISPLAY", d),
        None => cmd.env_remove("DISPLAY"),
    };
    cmd
}

/// Runs `sightline run` to the end: (exit code, stdout + stderr).
fn run_cli(display: Option<&str>, argv: &[&str]) -> Result<(i32, String)> {
    let Output {
        status,
        stdout,
        stderr,
    } = run_command(display, argv).stdin(Stdio::null()).output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    Ok((
        status
            .code()
            .context(format!("killed by a signal: {text}"))?,
        text,
    ))
}

fn write_moves(dir: &Path, name: &str, lines: &[&str]) -> Result<String> {
    let p = dir.join(name);
    std::fs::write(&p, lines.join("\n") + "\n")?;
    Ok(p.to_str().context("path")?.to_string())
}

// The binary's exit codes (`sightline run --help`, the README).
const SUCCESS: i32 = 0;
const FAILED: i32 = 1;
const USAGE_OR_SETUP: i32 = 2;
const REFUSED: i32 = 3;
const INTERRUPTED: i32 = 130;

const CLICK_THEN_DONE: &[&str] = &[
    r#"{"kind":"batch","purpose":"press the middle","steps":[{"purpose":"click centre","action":{"type":"click","target_id":"xy:500,500"}}]}"#,
    r#"{"kind":"done","summary":"pressed"}"#,
];

#[test]
fn flags_parse_and_model_conflicts_with_replay() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let moves = write_moves(dir.path(), "moves.jsonl", CLICK_THEN_DONE)?;
    // Every flag is accepted; with no display the run stops at setup, after parsing.
    let (code, out) = run_cli(
        None,
        &[
            "--replay",
            &moves,
            "--max-steps",
            "5",
            "--timeout",
            "9",
            "--dry-run",
            "--confirm",
            "--monitor",
            "1",
            "--trace",
            dir.path().join("t").to_str().context("path")?,
            "do it",
        ],
    )?;
    assert_eq!(code, USAGE_OR_SETUP, "{out}");
    assert!(out.contains("no display"), "{out}");

    let (code, out) = run_cli(None, &["--replay", &moves, "--model", "qwen3-vl-2b", "g"])?;
    assert_eq!(code, USAGE_OR_SETUP, "{out}");
    assert!(out.contains("cannot be used with"), "{out}");

    // The defaults, as `--help` documents them.
    let (code, help) = run_cli(None, &["--help"])?;
    assert_eq!(code, SUCCESS, "{help}");
    for default in [
        "[default: 30]",
        "[default: 300]",
        "[default: auto]",
        "[default: 3]",
    ] {
        assert!(help.contains(default), "{default} missing: {help}");
    }
    Ok(())
}

#[test]
fn replay_run_prints_batches_steps_and_outcome_and_exit_codes_differ() -> Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let xvfb = Xvfb::start(1280, 800)?;
    let display = Some(xvfb.display.as_str());
    let dir = tempfile::tempdir()?;

    let moves = write_moves(dir.path(), "moves.jsonl", CLICK_THEN_DONE)?;
    let trace = dir.path().join("trace");
    let (code, out) = run_cli(
        display,
        &[
            "--replay",
            &moves,
            "--trace",
            trace.to_str().context("path")?,
            "press it",
        ],
    )?;
    assert_eq!(code, SUCCESS, "{out}");
    assert!(out.contains("[turn 1] press the middle (1 step)"), "{out}");
    assert!(
        out.contains("ok       click xy:500,500 -- click centre"),
        "{out}"
    );
    assert!(out.contains("[done] pressed (verified)"), "{out}");
    assert!(out.contains("succeeded: pressed"), "{out}");
    assert!(trace.join("turns.jsonl").is_file());
    assert_eq!(xvfb.pointer()?, (640, 400));

    let (code, out) = run_cli(display, &["--replay", &moves, "--dry-run", "press it"])?;
    assert_eq!(code, SUCCESS);
    assert!(out.contains("dry-run  click xy:500,500"), "{out}");

    let refused = write_moves(
        dir.path(),
        "refused.jsonl",
        &[r#"{"kind":"clarify","question":"Which one?"}"#],
    )?;
    let (code, out) = run_cli(display, &["--replay", &refused, "g"])?;
    assert_eq!(code, REFUSED, "{out}");
    assert!(out.contains("refused: Which one?"));

    let failed = write_moves(
        dir.path(),
        "failed.jsonl",
        &[r#"{"kind":"fail","reason":"no such button"}"#],
    )?;
    let (code, out) = run_cli(display, &["--replay", &failed, "g"])?;
    assert_eq!(code, FAILED, "{out}");
    assert!(out.contains("no such button"));
    Ok(())
}

#[test]
fn ctrl_c_stops_between_steps_with_the_interrupted_code() -> Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let xvfb = Xvfb::start(1280, 800)?;
    let dir = tempfile::tempdir()?;
    // Waits long enough that the signal lands between two steps.
    let waits = format!(
        r#"{{"kind":"batch","purpose":"wait a while","steps":[{}]}}"#,
        vec![r#"{"purpose":"wait","action":{"type":"wait","ms":300}}"#; 20].join(",")
    );
    let moves = write_moves(dir.path(), "waits.jsonl", &[&waits])?;
    let mut child = run_command(Some(&xvfb.display), &["--replay", &moves, "g"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    // The first line comes after the Ctrl-C handler is installed.
    let first = lines.next().context("no output")??;
    assert!(first.starts_with("monitor"), "{first}");
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()?;
    ensure!(killed.success(), "kill -INT failed");
    let rest: Vec<String> = lines.collect::<std::io::Result<_>>()?;
    let status = child.wait()?;
    let out = rest.join("\n");
    assert_eq!(status.code(), Some(INTERRUPTED), "{out}");
    assert!(out.contains("Ctrl-C"), "{out}");
    Ok(())
}

#[test]
fn model_runs_through_the_local_planner_and_a_missing_model_is_a_setup_error() -> Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let xvfb = Xvfb::start(1280, 800)?;
    let display = Some(xvfb.display.as_str());
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tiny-a");
    // The real planner on the tiny GGUF pair: whatever the random model chooses, one step of
    // a dry run ends with an outcome, and the planner line names the local path.
    let (code, out) = run_cli(
        display,
        &[
            "--model",
            tiny.to_str().context("path")?,
            "--device",
            "cpu",
            "--dry-run",
            "--max-steps",
            "1",
            "press it",
        ],
    )?;
    assert!(matches!(code, SUCCESS | FAILED | REFUSED), "{out}");
    assert!(out.contains("local path"), "{out}");
    assert!(out.contains("loaded "), "{out}");

    // A model that cannot be resolved is a setup error naming it.
    let (code, out) = run_cli(display, &["--model", "./missing-model-dir", "press it"])?;
    assert_eq!(code, USAGE_OR_SETUP, "{out}");
    assert!(
        out.contains("missing-model-dir") && out.contains("does not exist"),
        "{out}"
    );
    Ok(())
}

#[test]
fn setup_errors_exit_with_the_setup_code() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let moves = write_moves(dir.path(), "moves.jsonl", CLICK_THEN_DONE)?;
    let (code, out) = run_cli(None, &["--replay", &moves, "g"])?;
    assert_eq!(code, USAGE_OR_SETUP);
    assert!(out.contains("no display"), "{out}");

    let (code, out) = run_cli(None, &["--replay", "/no/such/file.jsonl", "g"])?;
    assert_eq!(code, USAGE_OR_SETUP);
    assert!(out.contains("/no/such/file.jsonl"), "{out}");

    let bad = write_moves(dir.path(), "bad.jsonl", &[r#"{"kind":"teleport"}"#])?;
    let (code, out) = run_cli(None, &["--replay", &bad, "g"])?;
    assert_eq!(code, USAGE_OR_SETUP);
    assert!(out.contains("line 1"), "{out}");
    Ok(())
}
