//! `sightline serve` driven by the real clients people use, not by hand-written JSON-RPC or
//! HTTP: the official MCP Python SDK (`mcp` from PyPI) over stdio on the accessibility test
//! desktop, and the `openai` Python client against the OpenAI-compatible endpoint on the tiny
//! fixture model. The clients' scripts are `tests/clients/*.py`; they check what they get and
//! exit non-zero with the reason otherwise, and these tests check what the desktop saw.
//!
//! The Python with both clients installed is `SIGHTLINE_CLIENTS_PYTHON` (`.ci/run` makes the
//! venv). Without it the tests say so and pass, except where `CI` is set or
//! `SIGHTLINE_REQUIRE_X11_TESTS=1` (as `.ci/run` sets), where they fail: CI must not skip
//! them silently.
#![cfg(feature = "serve")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

use crate::a11y_support::{stack_available, Session};
use crate::runner_support::{x11_lock, REQUIRE_ENV};
use crate::serve_openai::{fixtures, Server, TOKEN};

const PYTHON_ENV: &str = "SIGHTLINE_CLIENTS_PYTHON";

/// The venv's Python, `None` (a skip) where it is not configured outside CI.
fn client_python() -> Result<Option<PathBuf>> {
    match std::env::var_os(PYTHON_ENV) {
        Some(python) => Ok(Some(PathBuf::from(python))),
        None if std::env::var_os("CI").is_some()
            || std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1") =>
        {
            bail!("{PYTHON_ENV} is not set: CI must run the real-client tests (see .ci/run)")
        }
        None => {
            eprintln!(
                "SKIPPED: {PYTHON_ENV} is not set (a Python with `mcp` and `openai` installed; \
                 .ci/run makes one)"
            );
            Ok(None)
        }
    }
}

fn client_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(name)
}

/// What the client printed as its last stdout line, once it exited 0.
fn client_report(out: &Output) -> Result<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success(),
        "the client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let last = stdout
        .lines()
        .last()
        .context("the client printed nothing")?;
    // What the client saw, for the test log.
    eprintln!("client report: {last}");
    serde_json::from_str(last).with_context(|| format!("not JSON: {last}"))
}

fn batch(purpose: &str, target: &str) -> String {
    json!({"kind": "batch", "purpose": purpose, "steps": [
        {"purpose": purpose, "action": {"type": "click", "target_id": target}}]})
    .to_string()
}

#[test]
fn the_mcp_python_sdk_views_acts_runs_with_progress_and_hears_a_refusal() -> Result<()> {
    let Some(python) = client_python()? else {
        return Ok(());
    };
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    // What `run` is answered: press Alpha, then done.
    let replay = session.moves(
        "moves.jsonl",
        &[
            batch("press Alpha", "button_alpha"),
            json!({"kind": "done", "summary": "pressed Alpha"}).to_string(),
        ],
    )?;
    let out = Command::new(&python)
        .arg(client_script("mcp_client.py"))
        .arg(env!("CARGO_BIN_EXE_sightline"))
        .arg(&replay)
        .current_dir(session.dir.path())
        .env("DISPLAY", &session.display)
        .env("DBUS_SESSION_BUS_ADDRESS", &session.bus_address)
        .env_remove("WAYLAND_DISPLAY")
        .env("HF_HUB_OFFLINE", "1")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    let report = client_report(&out)?;
    assert_eq!(report["act"], "done", "{report}");

    // The clicks landed on the window's buttons, and the refused one never reached it.
    for line in ["clicked Beta", "clicked Alpha"] {
        ensure!(
            session.wait_for_event(line)?,
            "no {line:?} in the window's log: {:?}",
            session.events()?
        );
    }
    ensure!(
        !session.events()?.iter().any(|l| l == "clicked Delete"),
        "a refused click reached the window: {:?}",
        session.events()?
    );
    Ok(())
}

#[test]
fn the_openai_python_client_streams_gets_schema_json_and_clear_4xx_errors() -> Result<()> {
    let Some(python) = client_python()? else {
        return Ok(());
    };
    let server = Server::start()?;
    let out = Command::new(&python)
        .arg(client_script("openai_client.py"))
        .arg(format!("http://{}/v1", server.addr))
        .arg(TOKEN)
        .arg(fixtures().join("screens/ui_resize.png"))
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    let report = client_report(&out)?;
    let errors = &report["errors"];
    for case in [
        "bad base64",
        "100 MB image",
        "rejected schema",
        "missing model",
    ] {
        let status = errors[case]["status"].as_u64().context("status")?;
        ensure!((400..500).contains(&status), "{case}: {report}");
    }
    assert_eq!(errors["100 MB image"]["status"], 413, "{report}");
    Ok(())
}
