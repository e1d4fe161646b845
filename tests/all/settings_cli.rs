//! One road from arguments to settings: every model command shares the same flags, checked
//! while the command line is parsed, so a typo fails before anything is resolved, downloaded
//! or loaded, and `run` without a display says so before it touches a model.

use std::process::Command;

use anyhow::{ensure, Result};
use sightline::exit_code::USAGE_OR_SETUP;

/// Every command that loads a model: its subcommand words, then the other arguments it needs
/// besides the model flags.
const MODEL_COMMANDS: &[(&[&str], &[&str])] = &[
    (&["plan"], &["goal"]),
    (
        &["verify"],
        &["--screenshot", "s.png", "--summary", "s", "goal"],
    ),
    (&["generate"], &["hello"]),
    (&["bench"], &[]),
    (&["serve"], &["--openai", "127.0.0.1:0"]),
    (
        &["grader", "fit"],
        &["--data", "d.jsonl", "--out", "h.safetensors"],
    ),
    #[cfg(feature = "desktop")]
    (&["run"], &["goal"]),
    #[cfg(feature = "desktop")]
    (&["eval", "desktop"], &[]),
    #[cfg(feature = "desktop")]
    (&["eval", "grounding"], &["data.jsonl"]),
];

/// `sightline ARGS` with an empty Hugging Face cache, offline, and no display: anything that
/// got past parsing would fail on the model or the screen, with a different message.
fn sightline(args: &[&str]) -> Result<(i32, String)> {
    sightline_on(None, args)
}

/// [`sightline`] with `DISPLAY` set to `display` when given.
fn sightline_on(display: Option<&str>, args: &[&str]) -> Result<(i32, String)> {
    let home = tempfile::tempdir()?;
    let mut command = Command::new(env!("CARGO_BIN_EXE_sightline"));
    command
        .args(args)
        .env("HF_HOME", home.path())
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY");
    if let Some(display) = display {
        command.env("DISPLAY", display);
    }
    let out = command.output()?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[test]
fn a_typo_in_a_model_flag_is_a_usage_error_for_every_model_command() -> Result<()> {
    for (flag, value) in [
        ("--device", "cuda:x"),
        ("--device", "gpu"),
        ("--quantize", "q3k"),
        ("--max-visual-tokens", "0"),
        ("--threads", "none"),
        ("--dtype", "f8"),
    ] {
        for (subcommand, rest) in MODEL_COMMANDS {
            let mut args: Vec<&str> = subcommand.to_vec();
            args.extend([flag, value, "--model", "someone/not-cached"]);
            args.extend(rest.iter());
            let (code, err) = sightline(&args)?;
            ensure!(code == USAGE_OR_SETUP, "{args:?}: exit {code}: {err}");
            // clap names the flag and the value; no model was looked up.
            ensure!(
                err.contains(flag) && err.contains(value) && !err.contains("not-cached"),
                "{args:?}: {err}"
            );
        }
    }
    Ok(())
}

#[test]
fn every_model_command_spells_the_model_flags_alike() -> Result<()> {
    for (subcommand, _) in MODEL_COMMANDS {
        let mut args: Vec<&str> = subcommand.to_vec();
        args.push("--help");
        let out = Command::new(env!("CARGO_BIN_EXE_sightline"))
            .args(&args)
            .output()?;
        let help = String::from_utf8_lossy(&out.stdout);
        for flag in [
            "--model <MODEL>",
            "--device <DEVICE>",
            "--quantize <QUANTIZE>",
            "--max-visual-tokens <MAX_VISUAL_TOKENS>",
            "--threads <THREADS>",
            "--dtype <DTYPE>",
        ] {
            ensure!(help.contains(flag), "{args:?} lacks {flag}:\n{help}");
        }
    }
    Ok(())
}

/// Without a display `run` stops at once, naming the problem, and never resolves the model
/// (a Hub repo that is not cached would be a hub error naming the repo).
#[cfg(feature = "desktop")]
#[test]
fn run_without_a_display_says_so_before_resolving_the_model() -> Result<()> {
    // No display at all, then one named that no X server serves.
    for display in [None, Some(":4321")] {
        let started = std::time::Instant::now();
        let (code, err) = sightline_on(
            display,
            &["run", "--model", "someone/not-cached", "open it"],
        )?;
        ensure!(code == USAGE_OR_SETUP, "{display:?}: exit {code}: {err}");
        ensure!(err.contains("display"), "{display:?}: {err}");
        ensure!(
            !err.contains("not-cached"),
            "{display:?}: the model was resolved first: {err}"
        );
        // Generous for a loaded CI machine; a model resolution or load takes far longer.
        ensure!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{display:?}: took {:?}",
            started.elapsed()
        );
    }
    Ok(())
}
