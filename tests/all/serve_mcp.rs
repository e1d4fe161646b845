//! `sightline serve --mcp stdio` as an MCP host drives it: raw JSON-RPC over the child's
//! stdin and stdout, on a private X server, with a replay planner (no model load). The host
//! lists the tools, views the screen, acts (the click lands where the move said), sees a
//! destructive step come back as a refusal naming its grant, runs a goal with progress
//! notifications, meets a busy desktop while the run holds it, and plans on a given
//! screenshot.
#![cfg(feature = "serve")]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

use crate::runner_support::{tools_available, Xvfb};

/// How long one answer may take: a hang guard, not a speed target.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);
/// How close the pointer must land to the asked point, in pixels (the 0-1000 grid rounds).
const POINTER_TOLERANCE_PX: i32 = 2;

/// The server child and its lines.
struct Host {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    next_id: u64,
    /// Notifications read while waiting for an answer.
    notes: Vec<Value>,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Host {
    fn start(display: &str, replay: &str, extra: &[&str]) -> Result<Self> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sightline"))
            .args(["serve", "--mcp", "stdio", "--replay", replay])
            .args(extra)
            .env("DISPLAY", display)
            .env_remove("WAYLAND_DISPLAY")
            .env("HF_HUB_OFFLINE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    Err(_) => eprintln!("not JSON on the protocol's stdout: {line}"),
                }
            }
        });
        let mut host = Self {
            child,
            stdin,
            lines,
            next_id: 1,
            notes: Vec::new(),
        };
        let init = host.call(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "sightline-test", "version": "0"}
            }),
        )?;
        ensure!(
            init["result"]["serverInfo"]["name"] == "sightline",
            "{init}"
        );
        host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(host)
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        writeln!(self.stdin, "{message}")?;
        self.stdin.flush()?;
        Ok(())
    }

    /// Sends a request and returns its id without waiting.
    fn request(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    /// Waits for the answer to `id`, keeping notifications.
    fn answer(&mut self, id: u64) -> Result<Value> {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.lines.recv_timeout(left) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => bail!("no answer to request {id}"),
                Err(RecvTimeoutError::Disconnected) => bail!("the server exited"),
            };
            if message["id"] == json!(id) {
                return Ok(message);
            }
            self.notes.push(message);
        }
    }

    /// Waits for the first notification whose method is `method`.
    fn note(&mut self, method: &str) -> Result<Value> {
        if let Some(i) = self.notes.iter().position(|n| n["method"] == method) {
            return Ok(self.notes.remove(i));
        }
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .lines
                .recv_timeout(left)
                .with_context(|| format!("no {method} notification"))?;
            if message["method"] == method {
                return Ok(message);
            }
            self.notes.push(message);
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.request(method, params)?;
        self.answer(id)
    }

    fn tool(&mut self, name: &str, arguments: Value) -> Result<Value> {
        let answer = self.call("tools/call", json!({"name": name, "arguments": arguments}))?;
        answer
            .get("result")
            .cloned()
            .with_context(|| format!("{name}: no result: {answer}"))
    }
}

/// The text blocks of a tool result, joined.
fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn an_mcp_host_views_acts_runs_and_is_told_of_refusals_and_a_busy_desktop() -> Result<()> {
    if !tools_available(&["Xvfb", "xdpyinfo", "xdotool"])? {
        return Ok(());
    }
    let (width, height) = (800, 600);
    let x = Xvfb::start(width, height)?;
    let dir = tempfile::tempdir()?;
    // The replay answers `run` (a slow batch, then done) and then `plan`.
    let replay = dir.path().join("moves.jsonl");
    let moves = [
        json!({"kind": "batch", "purpose": "wait for the screen", "steps": [
            {"purpose": "let the window settle", "action": {"type": "wait", "ms": 3000}}]}),
        json!({"kind": "done", "summary": "waited"}),
        json!({"kind": "batch", "purpose": "planned", "steps": [
            {"purpose": "click the middle", "action": {"type": "click", "target_id": "xy:500,500"}}]}),
    ];
    let text: Vec<String> = moves.iter().map(Value::to_string).collect();
    std::fs::write(&replay, text.join("\n") + "\n")?;
    let mut host = Host::start(&x.display, replay.to_str().context("path")?, &[])?;

    let listed = host.call("tools/list", json!({}))?;
    let mut names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .context("tools")?
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["act", "plan", "run", "verify", "view"]);

    let view = host.tool("view", json!({}))?;
    ensure!(view["isError"] != json!(true), "{view}");
    assert_eq!(view["content"][0]["type"], "image");
    assert_eq!(view["content"][0]["mimeType"], "image/png");
    assert_eq!(
        view["structuredContent"]["screenshot_size"],
        json!([width, height])
    );

    // A click at xy:250,750 lands at a quarter of the width and three quarters of the height.
    let click = json!({"kind": "batch", "purpose": "click", "steps": [
        {"purpose": "click a point", "action": {"type": "click", "target_id": "xy:250,750"}}]});
    let acted = host.tool("act", json!({"move": click}))?;
    ensure!(acted["isError"] != json!(true), "{acted}");
    assert_eq!(acted["structuredContent"]["outcome"], "done", "{acted}");
    let (px, py) = x.pointer()?;
    let (wx, wy) = (width as i32 / 4, height as i32 * 3 / 4);
    ensure!(
        (px - wx).abs() <= POINTER_TOLERANCE_PX && (py - wy).abs() <= POINTER_TOLERANCE_PX,
        "the pointer is at ({px}, {py}), the click asked for ({wx}, {wy})"
    );

    // Closing a window is destructive: refused, naming the grant, and nothing is sent.
    let close = json!({"kind": "batch", "purpose": "close", "steps": [
        {"purpose": "close the window", "action": {"type": "key", "key": "alt+F4"}}]});
    let refused = host.tool("act", json!({"move": close}))?;
    assert_eq!(refused["isError"], json!(true), "{refused}");
    assert_eq!(
        refused["structuredContent"]["outcome"], "refused",
        "{refused}"
    );
    let refusal = &refused["structuredContent"]["refusals"][0];
    ensure!(
        refusal["message"]
            .as_str()
            .is_some_and(|m| m.contains("close")),
        "{refusal}"
    );
    ensure!(
        text_of(&refused).contains("--allow"),
        "{}",
        text_of(&refused)
    );

    // A run with a progress token: its batch is announced while it holds the desktop, so a
    // view in the meantime hears the desktop is busy.
    let run_id = host.request(
        "tools/call",
        json!({"name": "run", "arguments": {"goal": "wait a little"},
               "_meta": {"progressToken": "run-1"}}),
    )?;
    let first = host.note("notifications/progress")?;
    assert_eq!(first["params"]["progressToken"], "run-1");
    let busy = host.tool("view", json!({}))?;
    assert_eq!(busy["isError"], json!(true), "{busy}");
    ensure!(
        text_of(&busy).contains("the desktop is busy: run"),
        "{}",
        text_of(&busy)
    );
    let ran = host.answer(run_id)?;
    let ran = &ran["result"];
    ensure!(ran["isError"] != json!(true), "{ran}");
    assert_eq!(
        ran["structuredContent"]["outcome"]["status"], "succeeded",
        "{ran}"
    );
    let mut progress = vec![first];
    progress.extend(
        host.notes
            .drain(..)
            .filter(|n| n["method"] == "notifications/progress"),
    );
    let messages: Vec<&str> = progress
        .iter()
        .filter_map(|n| n["params"]["message"].as_str())
        .collect();
    ensure!(
        messages.iter().any(|m| m.starts_with("turn 1:"))
            && messages.iter().any(|m| m.starts_with("ok: wait"))
            && messages.iter().any(|m| m.starts_with("done: waited")),
        "progress: {messages:?}"
    );

    // Planning on a given screenshot asks the planner, not the screen.
    let png = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("models/fixtures/screens")
            .read_dir()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|e| e == "png"))
            .context("a fixture screenshot")?,
    )?;
    use base64::Engine;
    let planned = host.tool(
        "plan",
        json!({"goal": "click the middle",
               "screenshot_base64": base64::engine::general_purpose::STANDARD.encode(png)}),
    )?;
    ensure!(planned["isError"] != json!(true), "{planned}");
    assert_eq!(planned["structuredContent"]["move"]["purpose"], "planned");

    // A malformed argument is a protocol error, and the server goes on.
    let bad = host.call(
        "tools/call",
        json!({"name": "act", "arguments": {"move": {"kind": "batch"}}}),
    )?;
    ensure!(bad.get("error").is_some(), "{bad}");
    let again = host.tool("view", json!({}))?;
    ensure!(again["isError"] != json!(true), "{again}");
    Ok(())
}
