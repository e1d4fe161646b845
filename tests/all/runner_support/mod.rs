//! Shared helpers for the desktop tests: a private Xvfb per test, X11 probes (xdotool, xev),
//! and a scripted planner.
//!
//! The in-process desktop tests (`tests/runner_desktop.rs`, its own binary) set `DISPLAY` for
//! the whole process (xcap reads it on every call) with [`Xvfb::start_as_process_display`], so
//! every test that touches X holds [`x11_lock`] for its whole duration. Tests of the binary pass
//! [`Xvfb::display`] to the child process instead and leave the process environment alone.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use async_trait::async_trait;
use cel_contracts::{
    AttemptRecord, DoneVerdict, NextMove, PlanProducer, PlannedAction, PlanningView, Step, StepKind,
};

/// Set to `1` (CI does) to make a missing Xvfb a failure instead of a skip.
pub const REQUIRE_ENV: &str = "SIGHTLINE_REQUIRE_X11_TESTS";

static X11_LOCK: Mutex<()> = Mutex::new(());

/// Serializes the tests that set `DISPLAY`. A test that panicked poisons nothing we rely on.
pub fn x11_lock() -> MutexGuard<'static, ()> {
    X11_LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Whether the X tools a test needs are installed. When they are not and [`REQUIRE_ENV`] is
/// unset, the test prints why and passes vacuously; with it set, the test fails.
pub fn tools_available(programs: &[&str]) -> anyhow::Result<bool> {
    let missing: Vec<&str> = programs.iter().copied().filter(|p| !have(p)).collect();
    if missing.is_empty() {
        return Ok(true);
    }
    if std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1") {
        bail!("missing X11 test tools: {}", missing.join(", "));
    }
    eprintln!(
        "SKIPPED: missing {} (install xvfb, xdotool, x11-utils, xterm; set {REQUIRE_ENV}=1 to fail instead)",
        missing.join(", ")
    );
    Ok(false)
}

/// A private X server; killed on drop.
pub struct Xvfb {
    child: Child,
    /// `:N`.
    pub display: String,
    pub width: u32,
    pub height: u32,
}

impl Xvfb {
    /// Starts Xvfb on a free display with one screen of `width`×`height` and waits until it
    /// answers. The process environment is left alone: pass [`Xvfb::display`] to children.
    pub fn start(width: u32, height: u32) -> anyhow::Result<Self> {
        let base = 80 + (std::process::id() % 50) * 10;
        for n in base..base + 200 {
            if Path::new(&format!("/tmp/.X{n}-lock")).exists()
                || Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()
            {
                continue;
            }
            let display = format!(":{n}");
            let child = Command::new("Xvfb")
                .args([
                    &display,
                    "-screen",
                    "0",
                    &format!("{width}x{height}x24"),
                    "-nolisten",
                    "tcp",
                    // Without it the server resets whenever its last client leaves, and a
                    // connection made during the reset fails (xcap connects per call).
                    "-noreset",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("starting Xvfb")?;
            let mut x = Xvfb {
                child,
                display: display.clone(),
                width,
                height,
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = x.child.try_wait() {
                    break; // lost a race for this display number; try the next
                }
                let ok = Command::new("xdpyinfo")
                    .args(["-display", &display])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .map(|s| s.success())
                    .unwrap_or(false);
                if ok {
                    return Ok(x);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = x.child.kill();
            let _ = x.child.wait();
        }
        bail!("could not start Xvfb on any display")
    }
}

impl Xvfb {
    /// [`Xvfb::start`], then points this process's `DISPLAY` at it (for in-process xcap and
    /// enigo); hold [`x11_lock`] while it lives.
    pub fn start_as_process_display(width: u32, height: u32) -> anyhow::Result<Self> {
        let x = Self::start(width, height)?;
        std::env::set_var("DISPLAY", &x.display);
        std::env::remove_var("WAYLAND_DISPLAY");
        Ok(x)
    }

    /// The pointer position on this server (`xdotool getmouselocation`).
    pub fn pointer(&self) -> anyhow::Result<(i32, i32)> {
        let out = Command::new("xdotool")
            .args(["getmouselocation", "--shell"])
            .env("DISPLAY", &self.display)
            .output()
            .context("running xdotool")?;
        parse_pointer(&String::from_utf8_lossy(&out.stdout))
    }
}

impl Drop for Xvfb {
    /// SIGTERM first: a server killed outright leaves `/tmp/.X<n>-lock` and its socket behind,
    /// and enough of those (tests killed under load, runs repeated) exhaust the display range
    /// `start` searches. If it does not go in time it is killed and its files are removed here.
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let n = self.display.trim_start_matches(':');
        let _ = std::fs::remove_file(format!("/tmp/.X{n}-lock"));
        let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{n}"));
    }
}

/// A background process killed on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs a command on the current display and returns stdout.
pub fn cmd(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "{program} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The pointer position as X reports it (`xdotool getmouselocation`).
pub fn pointer() -> anyhow::Result<(i32, i32)> {
    parse_pointer(&cmd("xdotool", &["getmouselocation", "--shell"])?)
}

fn parse_pointer(out: &str) -> anyhow::Result<(i32, i32)> {
    let get = |k: &str| -> anyhow::Result<i32> {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .context("no coordinate in xdotool output")?
            .trim()
            .parse()
            .context("bad coordinate")
    };
    Ok((get("X")?, get("Y")?))
}

/// Moves the pointer like a user would.
pub fn move_pointer(x: i32, y: i32) -> anyhow::Result<()> {
    cmd("xdotool", &["mousemove", &x.to_string(), &y.to_string()]).map(|_| ())
}

/// `xev` listening on the root window for button and key events, its output in a file. With
/// no window manager and the pointer over the root window, clicks and (PointerRoot focus)
/// keystrokes go to the root window, where xev sees them.
pub struct RootEvents {
    _proc: Proc,
    log: PathBuf,
}

impl RootEvents {
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        let log = dir.join("xev.log");
        let file = std::fs::File::create(&log)?;
        let child = Command::new("stdbuf")
            .args([
                "-oL", "xev", "-root", "-event", "button", "-event", "keyboard",
            ])
            .stdout(file)
            .stderr(Stdio::null())
            .spawn()
            .context("starting xev")?;
        // xev selects its events on start-up; give it a moment before anything happens.
        std::thread::sleep(Duration::from_millis(300));
        Ok(Self {
            _proc: Proc(child),
            log,
        })
    }

    pub fn text(&self) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(&self.log)?)
    }

    /// Root coordinates of every ButtonPress so far.
    pub fn button_presses(&self) -> anyhow::Result<Vec<(i32, i32)>> {
        let text = self.text()?;
        let mut out = Vec::new();
        let mut in_press = false;
        for line in text.lines() {
            if line.starts_with("ButtonPress") {
                in_press = true;
            } else if in_press {
                if let Some(rest) = line.split("root:(").nth(1) {
                    let coords = rest.split(')').next().unwrap_or("");
                    if let Some((x, y)) = coords.split_once(',') {
                        out.push((x.trim().parse()?, y.trim().parse()?));
                    }
                    in_press = false;
                }
            }
        }
        Ok(out)
    }

    pub fn key_presses(&self) -> anyhow::Result<usize> {
        Ok(self
            .text()?
            .lines()
            .filter(|l| l.starts_with("KeyPress"))
            .count())
    }

    /// Waits until `n` button presses were logged, up to 10 s: xev lags the input, by seconds
    /// on a loaded machine. A test expecting exactly `n` returns as soon as they arrive.
    pub fn wait_for_presses(&self, n: usize) -> anyhow::Result<Vec<(i32, i32)>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let p = self.button_presses()?;
            if p.len() >= n || Instant::now() > deadline {
                return Ok(p);
            }
            std::thread::sleep(Duration::from_millis(30));
        }
    }
}

/// Starts an xterm whose shell runs in `dir`, at `+x+y`, and waits until its window is mapped.
pub fn start_xterm(dir: &Path, x: i32, y: i32) -> anyhow::Result<Proc> {
    let child = Command::new("xterm")
        .args([
            "-geometry",
            &format!("80x24+{x}+{y}"),
            "-e",
            "sh",
            "-c",
            &format!("cd '{}' && PS1='$ ' exec sh", dir.display()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting xterm")?;
    let proc = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(out) = cmd("xdotool", &["search", "--onlyvisible", "--class", "xterm"]) {
            if !out.trim().is_empty() {
                // The shell needs a moment after the window maps.
                std::thread::sleep(Duration::from_millis(400));
                return Ok(proc);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("xterm did not map a window within 10 s")
}

/// Polls for a file to exist with some content.
pub fn wait_for_file(path: &Path, timeout: Duration) -> Option<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(s) = std::fs::read_to_string(path) {
            if !s.is_empty() {
                return Some(s);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

// ─── A scripted planner ─────────────────────────────────────────────────────

/// What a [`ScriptedPlanner`] saw on one `decide_next` call.
#[derive(Debug, Clone)]
pub struct Seen {
    pub view: PlanningView,
    pub history: Vec<AttemptRecord>,
    pub screenshot_len: usize,
}

type Hook = Box<dyn Fn(usize) + Send + Sync>;

/// Returns scripted moves in order (then `Fail` if a script runs dry, or repeats the last move
/// when `repeat_last` is set), and scripted verdicts for `done`.
pub struct ScriptedPlanner {
    moves: Mutex<VecDeque<NextMove>>,
    verdicts: Mutex<VecDeque<DoneVerdict>>,
    repeat_last: Option<NextMove>,
    /// Called with the call index (from 0) at the start of each `decide_next`.
    hook: Option<Hook>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl ScriptedPlanner {
    pub fn new(moves: Vec<NextMove>) -> Self {
        Self {
            moves: Mutex::new(moves.into()),
            verdicts: Mutex::new(VecDeque::new()),
            repeat_last: None,
            hook: None,
            seen: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Returns `mv` forever.
    pub fn forever(mv: NextMove) -> Self {
        let mut p = Self::new(vec![]);
        p.repeat_last = Some(mv);
        p
    }

    pub fn with_verdicts(self, verdicts: Vec<DoneVerdict>) -> Self {
        *self.verdicts.lock().unwrap_or_else(|p| p.into_inner()) = verdicts.into();
        self
    }

    pub fn with_hook(mut self, hook: impl Fn(usize) + Send + Sync + 'static) -> Self {
        self.hook = Some(Box::new(hook));
        self
    }
}

#[async_trait]
impl PlanProducer for ScriptedPlanner {
    async fn decide_next(
        &self,
        _goal: &str,
        history: &[AttemptRecord],
        _shared_memory: &serde_json::Value,
        view: &PlanningView,
        screenshot_png: Option<&[u8]>,
    ) -> Result<NextMove, String> {
        let call = {
            let mut seen = self.seen.lock().map_err(|e| e.to_string())?;
            seen.push(Seen {
                view: view.clone(),
                history: history.to_vec(),
                screenshot_len: screenshot_png.map(|p| p.len()).unwrap_or(0),
            });
            seen.len() - 1
        };
        if let Some(h) = &self.hook {
            h(call);
        }
        let next = self.moves.lock().map_err(|e| e.to_string())?.pop_front();
        match (next, &self.repeat_last) {
            (Some(mv), _) => Ok(mv),
            (None, Some(mv)) => Ok(mv.clone()),
            (None, None) => Ok(NextMove::Fail {
                reason: "script exhausted".into(),
            }),
        }
    }

    async fn verify_done(
        &self,
        _goal: &str,
        _summary: &str,
        _shared_memory: &serde_json::Value,
        _view: &PlanningView,
        _screenshot_png: Option<&[u8]>,
    ) -> Result<DoneVerdict, String> {
        let v = self.verdicts.lock().map_err(|e| e.to_string())?.pop_front();
        Ok(v.unwrap_or(DoneVerdict {
            verified: true,
            reason: String::new(),
            next_action_hint: None,
        }))
    }
}

// ─── Move builders ──────────────────────────────────────────────────────────

pub fn step(purpose: &str, action: PlannedAction) -> Step {
    Step {
        purpose: purpose.into(),
        kind: StepKind::Deterministic,
        action,
    }
}

pub fn batch(purpose: &str, steps: Vec<Step>) -> NextMove {
    NextMove::Batch {
        purpose: purpose.into(),
        steps,
    }
}

pub fn done(summary: &str) -> NextMove {
    NextMove::Done {
        summary: summary.into(),
        extracted_data: serde_json::Value::Null,
    }
}

pub fn click(target: &str) -> PlannedAction {
    PlannedAction::Click {
        target_id: target.into(),
        expect_after: None,
    }
}

pub fn type_text(text: &str) -> PlannedAction {
    PlannedAction::Type {
        target_id: None,
        text: text.into(),
    }
}

pub fn key(k: &str) -> PlannedAction {
    PlannedAction::Key { key: k.into() }
}

pub fn wait(ms: u32) -> PlannedAction {
    PlannedAction::Wait { ms }
}

/// The `xy:` target for pixel (px, py) of a `w`×`h` screen, as a planner would name it.
pub fn xy_for_pixel(px: u32, py: u32, w: u32, h: u32) -> String {
    let rel = |p: u32, s: u32| ((f64::from(p) * 1000.0 / f64::from(s)).round() as u32).min(1000);
    format!("xy:{},{}", rel(px, w), rel(py, h))
}
