//! Elements from the accessibility tree, end to end on real parts: a private Xvfb, a private
//! D-Bus session bus, the AT-SPI bus its launcher starts on demand, and a GTK 3 test window
//! (`tests/apps/a11y_window.py`) that logs what happens to each of its controls.
//!
//! Needs `Xvfb`, `xdpyinfo`, `dbus-daemon`, at-spi2-core and Debian's `/usr/bin/python3` with
//! `python3-gi` and `gir1.2-gtk-3.0`. Without them the tests say so and pass, unless
//! `SIGHTLINE_REQUIRE_X11_TESTS=1` (as in CI), which makes them fail.
//!
//! A separate test binary: the in-process test sets `DBUS_SESSION_BUS_ADDRESS` for the
//! process (the runner connects through it), like `DISPLAY`, under the same lock.
#![cfg(feature = "desktop")]

mod runner_support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use cel_contracts::{GoalOutcome, RunLimits};
use runner_support::*;
use serde_json::Value;
use sightline::decode::{GrammarOptions, MoveSpec};
use sightline::runner::{ElementClick, NoopObserver, RunOptions, Runner, SettleOptions, XDesktop};

/// The test window's place on the root window and its controls' layout inside it (the same
/// numbers as in `tests/apps/a11y_window.py`): id, role, name, x, y, width, height.
const WINDOW_ORIGIN: (i32, i32) = (100, 120);
const LAYOUT: &[(&str, &str, &str, i32, i32, i32, i32)] = &[
    ("button_alpha", "button", "Alpha", 20, 20, 120, 40),
    ("button_beta", "button", "Beta", 160, 20, 120, 40),
    ("button_delete", "button", "Delete", 300, 20, 120, 40),
    ("text_name", "text", "Name", 20, 80, 400, 36),
    ("checkbox_notify", "checkbox", "Notify", 20, 136, 200, 30),
];
/// How far reported bounds may be from the layout, in pixels (toolkit rounding).
const BOUNDS_TOLERANCE_PX: i64 = 3;
const SCREEN: (u32, u32) = (1280, 800);

const TOOLS: &[&str] = &["Xvfb", "xdpyinfo", "dbus-daemon"];
const PYTHON: &str = "/usr/bin/python3";
const BUS_LAUNCHER: &str = "/usr/libexec/at-spi-bus-launcher";

/// Whether everything the tests need is installed; like [`tools_available`], a skip unless
/// CI requires them.
fn stack_available() -> anyhow::Result<bool> {
    if !tools_available(TOOLS)? {
        return Ok(false);
    }
    let gtk = Command::new(PYTHON)
        .args(["-c", "import gi; gi.require_version('Gtk', '3.0')"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if gtk && Path::new(BUS_LAUNCHER).exists() {
        return Ok(true);
    }
    if std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1") {
        bail!("missing the accessibility test stack: at-spi2-core, python3-gi, gir1.2-gtk-3.0");
    }
    eprintln!(
        "SKIPPED: missing at-spi2-core or {PYTHON} with python3-gi and gir1.2-gtk-3.0 (set \
         {REQUIRE_ENV}=1 to fail instead)"
    );
    Ok(false)
}

/// A private session bus (the AT-SPI bus launcher is activated on it) and the test window on
/// a private Xvfb; everything is killed on drop.
struct Session {
    _xvfb: Xvfb,
    display: String,
    bus_address: String,
    dir: tempfile::TempDir,
    _bus: Proc,
    _app: Proc,
}

impl Session {
    fn start() -> anyhow::Result<Self> {
        let xvfb = Xvfb::start(SCREEN.0, SCREEN.1)?;
        let display = xvfb.display.clone();
        let dir = tempfile::tempdir()?;
        // The bus launcher puts its socket under XDG_RUNTIME_DIR: a private one keeps
        // concurrent sessions apart.
        let runtime = dir.path().join("runtime");
        std::fs::create_dir(&runtime)?;
        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .env("DISPLAY", &display)
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting dbus-daemon")?;
        let stdout = bus.stdout.take().context("dbus-daemon stdout")?;
        let bus = Proc(bus);
        let mut bus_address = String::new();
        BufReader::new(stdout).read_line(&mut bus_address)?;
        let bus_address = bus_address.trim().to_string();
        ensure!(!bus_address.is_empty(), "dbus-daemon printed no address");
        let log = dir.path().join("events.log");
        let app = Command::new(PYTHON)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/a11y_window.py"))
            .arg(&log)
            .env("DISPLAY", &display)
            .env("DBUS_SESSION_BUS_ADDRESS", &bus_address)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env_remove("NO_AT_BRIDGE")
            .env("GTK_MODULES", "gail:atk-bridge")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the test window")?;
        let app = Proc(app);
        let session = Self {
            _xvfb: xvfb,
            display,
            bus_address,
            dir,
            _bus: bus,
            _app: app,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if session.events()?.iter().any(|l| l == "ready") {
                return Ok(session);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("the test window did not log \"ready\" within 20 s")
    }

    /// The lines the test window logged so far.
    fn events(&self) -> anyhow::Result<Vec<String>> {
        let path = self.dir.path().join("events.log");
        Ok(std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// Waits until the window logged `line` (its text field logs once typing pauses).
    fn wait_for_event(&self, line: &str) -> anyhow::Result<bool> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.events()?.iter().any(|l| l == line) {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(false)
    }

    /// `sightline ARGS` on this session; returns (exit code, stdout, stderr).
    fn sightline(&self, args: &[&str]) -> anyhow::Result<(i32, String, String)> {
        self.sightline_on_bus(args, &self.bus_address)
    }

    fn sightline_on_bus(
        &self,
        args: &[&str],
        bus_address: &str,
    ) -> anyhow::Result<(i32, String, String)> {
        let out = Command::new(env!("CARGO_BIN_EXE_sightline"))
            .args(args)
            .env("DISPLAY", &self.display)
            .env("DBUS_SESSION_BUS_ADDRESS", bus_address)
            .env_remove("WAYLAND_DISPLAY")
            .output()
            .context("running sightline")?;
        Ok((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// Writes a replay file of JSONL moves.
    fn moves(&self, name: &str, lines: &[String]) -> anyhow::Result<PathBuf> {
        let p = self.dir.path().join(name);
        std::fs::write(&p, lines.join("\n") + "\n")?;
        Ok(p)
    }

    /// `sightline run --replay FILE GOAL` with quick settling.
    fn run_replay(&self, moves: &Path, goal: &str) -> anyhow::Result<(i32, String, String)> {
        let path = moves.to_str().context("path")?;
        self.sightline(&["run", "--replay", path, "--timeout", "30", goal])
    }
}

fn view_json(session: &Session) -> anyhow::Result<Value> {
    let (code, stdout, stderr) = session.sightline(&["view", "--json"])?;
    ensure!(code == 0, "view exited {code}: {stdout}{stderr}");
    Ok(serde_json::from_str(&stdout)?)
}

fn batch(purpose: &str, steps: &[(&str, Value)]) -> String {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(p, a)| serde_json::json!({ "purpose": p, "action": a }))
        .collect();
    serde_json::json!({ "kind": "batch", "purpose": purpose, "steps": steps }).to_string()
}

fn done(summary: &str) -> String {
    serde_json::json!({ "kind": "done", "summary": summary }).to_string()
}

fn click(target: &str) -> Value {
    serde_json::json!({ "type": "click", "target_id": target })
}

#[test]
fn view_json_lists_the_windows_controls_with_their_layouts_bounds() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    let doc = view_json(&session)?;
    let table = doc["elements"]["elements"]
        .as_array()
        .context("no elements table in view --json")?;
    let view_ids: Vec<&str> = doc["view"]["elements"]
        .as_array()
        .context("no view elements")?
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    for &(id, role, name, x, y, w, h) in LAYOUT {
        let e = table
            .iter()
            .find(|e| e["id"] == id)
            .with_context(|| format!("{id} missing from {table:#?}"))?;
        assert_eq!(e["role"], role, "{id}");
        assert_eq!(e["name"], name, "{id}");
        let b = &e["bounds"];
        let got = [&b["x"], &b["y"], &b["width"], &b["height"]].map(|v| v.as_i64().unwrap_or(-1));
        let want = [
            i64::from(WINDOW_ORIGIN.0 + x),
            i64::from(WINDOW_ORIGIN.1 + y),
            i64::from(w),
            i64::from(h),
        ];
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= BOUNDS_TOLERANCE_PX,
                "{id}: bounds {got:?}, layout says {want:?}"
            );
        }
        assert!(got[0] >= 0 && got[1] >= 0);
        assert!(got[0] + got[2] <= i64::from(SCREEN.0) && got[1] + got[3] <= i64::from(SCREEN.1));
        assert!(view_ids.contains(&id), "{id} not in the planner's view");
    }
    let checkbox = table.iter().find(|e| e["id"] == "checkbox_notify");
    assert_eq!(
        checkbox.map(|e| &e["state"]["checked"]),
        Some(&Value::Bool(false))
    );
    assert!(table
        .iter()
        .any(|e| e["role"] == "label" && e["name"] == "Status: ready"));
    assert_eq!(
        doc["screenshot_size"],
        serde_json::json!([SCREEN.0, SCREEN.1])
    );
    // The planner's grammar for this view allows exactly these ids, and xy: points.
    let view: cel_contracts::PlanningView = serde_json::from_value(doc["view"].clone())?;
    let spec = MoveSpec::new(&view, &GrammarOptions::default())?;
    for &(id, ..) in LAYOUT {
        assert!(spec.is_valid_target(id), "{id}");
    }
    assert!(spec.is_valid_target("xy:500,500"));
    assert!(!spec.is_valid_target("button_gamma"));
    assert_eq!(spec.target_ids().len(), table.len());
    // An unchanged screen gives the same ids and bounds on every capture.
    let again = view_json(&session)?;
    assert_eq!(again["view"]["elements"], doc["view"]["elements"]);
    assert_eq!(again["elements"]["elements"], doc["elements"]["elements"]);
    // The text form names the same elements.
    let (code, text, _) = session.sightline(&["view"])?;
    assert_eq!(code, 0);
    assert!(
        text.contains("button_beta") && text.contains("from atspi in"),
        "{text}"
    );
    Ok(())
}

#[test]
fn replayed_element_clicks_and_typing_reach_the_window() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    let moves = session.moves(
        "moves.jsonl",
        &[
            batch(
                "fill the form",
                &[
                    ("press Beta", click("button_beta")),
                    (
                        "type the name",
                        serde_json::json!({ "type": "type", "target_id": "text_name", "text": "hello" }),
                    ),
                    ("tick the box", click("checkbox_notify")),
                ],
            ),
            done("filled"),
        ],
    )?;
    let (code, stdout, stderr) = session.run_replay(&moves, "fill in the form")?;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        session.wait_for_event("clicked Beta")?,
        "{:?}",
        session.events()?
    );
    assert!(
        session.wait_for_event("text hello")?,
        "{:?}",
        session.events()?
    );
    assert!(
        session.wait_for_event("toggled Notify on")?,
        "{:?}",
        session.events()?
    );
    // Nothing else was pressed.
    assert!(!session
        .events()?
        .iter()
        .any(|l| l.contains("Alpha") || l.contains("Delete")));
    Ok(())
}

#[test]
fn a_stale_element_id_is_a_step_error_not_a_click_elsewhere() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    // Alpha removes itself when clicked: the second click names an element that is gone since
    // the screenshot the plan was made from.
    let moves = session.moves(
        "moves.jsonl",
        &[
            batch(
                "press Alpha twice",
                &[
                    ("press Alpha", click("button_alpha")),
                    (
                        "let it go",
                        serde_json::json!({ "type": "wait", "ms": 500 }),
                    ),
                    ("press Alpha again", click("button_alpha")),
                ],
            ),
            done("pressed"),
        ],
    )?;
    let (code, stdout, stderr) = session.run_replay(&moves, "press alpha")?;
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("\"button_alpha\"") && stdout.contains("stale"),
        "{stdout}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let events = session.events()?;
    assert_eq!(
        events.iter().filter(|l| l.starts_with("clicked")).count(),
        1,
        "{events:?}"
    );
    Ok(())
}

#[test]
fn a_click_on_delete_is_refused_by_its_real_name_unless_the_goal_confirms() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    // The purposes say nothing about deleting; only the element's own name does.
    let by_id = session.moves(
        "by_id.jsonl",
        &[
            batch(
                "tidy up",
                &[("press the third button", click("button_delete"))],
            ),
            done("tidied"),
        ],
    )?;
    let (code, stdout, stderr) = session.run_replay(&by_id, "tidy up the form")?;
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(
        stdout.contains("refused") && stdout.contains("delete"),
        "{stdout}"
    );

    // An xy: point on the Delete button: the gate asks the tree what is under it.
    let (x, y, w, h) = (300 + 60, 20 + 20, SCREEN.0, SCREEN.1);
    let point = xy_for_pixel(
        (WINDOW_ORIGIN.0 + x) as u32,
        (WINDOW_ORIGIN.1 + y) as u32,
        w,
        h,
    );
    let by_point = session.moves(
        "by_point.jsonl",
        &[
            batch("tidy up", &[("press the third button", click(&point))]),
            done("tidied"),
        ],
    )?;
    let (code, stdout, stderr) = session.run_replay(&by_point, "tidy up the form")?;
    assert_eq!(code, 3, "{stdout}{stderr}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !session.events()?.iter().any(|l| l == "clicked Delete"),
        "a refused click reached the window"
    );

    // Confirmed in the goal: the same plan runs.
    let (code, stdout, stderr) =
        session.run_replay(&by_id, "delete the record; I confirm the deletion")?;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(session.wait_for_event("clicked Delete")?);
    Ok(())
}

#[test]
fn without_an_accessibility_bus_or_with_no_elements_targets_are_points() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    let beta = xy_for_pixel(
        (WINDOW_ORIGIN.0 + 220) as u32,
        (WINDOW_ORIGIN.1 + 40) as u32,
        SCREEN.0,
        SCREEN.1,
    );
    let moves = session.moves(
        "moves.jsonl",
        &[
            batch("press Beta", &[("press Beta", click(&beta))]),
            done("pressed"),
        ],
    )?;
    let path = moves.to_str().context("path")?;
    let nowhere = format!(
        "unix:path={}",
        session.dir.path().join("no-such-bus").display()
    );
    let (code, stdout, stderr) = session.sightline_on_bus(
        &["run", "--replay", path, "--timeout", "30", "press beta"],
        &nowhere,
    )?;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        stderr.matches("no accessibility bus").count(),
        1,
        "said once: {stderr}"
    );
    assert!(session.wait_for_event("clicked Beta")?);
    let (code, stdout, _) = session.sightline_on_bus(&["view", "--json"], &nowhere)?;
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&stdout)?;
    assert_eq!(doc["view"]["elements"], serde_json::json!([]));

    // --no-elements with the bus up: no elements, and an element id is an error that says so.
    let (_, text, _) = session.sightline(&["view", "--no-elements"])?;
    assert!(text.contains("no elements"), "{text}");
    let by_id = session.moves(
        "by_id.jsonl",
        &[
            batch("press Beta", &[("press Beta", click("button_beta"))]),
            done("pressed"),
        ],
    )?;
    let (code, stdout, _) = session.sightline(&[
        "run",
        "--no-elements",
        "--replay",
        by_id.to_str().context("path")?,
        "press beta",
    ])?;
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("not an element of the view"), "{stdout}");
    Ok(())
}

/// Restores an environment variable on drop.
struct EnvGuard(&'static str, Option<std::ffi::OsString>);

impl Drop for EnvGuard {
    fn drop(&mut self) {
        match &self.1 {
            Some(v) => std::env::set_var(self.0, v),
            None => std::env::remove_var(self.0),
        }
    }
}

#[test]
fn pointer_clicks_land_on_the_visible_centre_and_the_planner_sees_the_elements(
) -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    let _env = EnvGuard(
        "DBUS_SESSION_BUS_ADDRESS",
        std::env::var_os("DBUS_SESSION_BUS_ADDRESS"),
    );
    std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &session.bus_address);
    let options = RunOptions {
        limits: RunLimits {
            max_steps: 10,
            timeout_ms: 30_000,
            max_step_retries: 1,
            ..RunLimits::default()
        },
        settle: SettleOptions {
            min_ms: 50,
            max_ms: 400,
            poll_ms: 60,
        },
        element_click: ElementClick::Pointer,
        ..RunOptions::default()
    };
    let planner = ScriptedPlanner::new(vec![
        batch_move(
            "press Beta",
            vec![step("press Beta", click_action("button_beta"))],
        ),
        runner_support::done("pressed"),
    ]);
    let mut runner = Runner::new(Box::new(XDesktop::open(None)?), options);
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let report = rt.block_on(runner.run("press beta", &planner, &mut NoopObserver))?;
    ensure!(
        matches!(report.outcome, GoalOutcome::Succeeded { .. }),
        "{:?}",
        report.outcome
    );
    assert!(session.wait_for_event("clicked Beta")?);
    // The pointer went to the centre of Beta's visible part.
    let clicked = &report.history[0].data["clicked"];
    assert_eq!(
        clicked,
        &serde_json::json!([WINDOW_ORIGIN.0 + 160 + 60, WINDOW_ORIGIN.1 + 20 + 20]),
        "{:?}",
        report.history[0]
    );
    let seen = planner.seen.lock().map_err(|e| anyhow::anyhow!("{e}"))?;
    let ids: Vec<&str> = seen[0]
        .view
        .elements
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    for &(id, ..) in LAYOUT {
        assert!(ids.contains(&id), "{id} not shown to the planner: {ids:?}");
    }
    Ok(())
}

fn batch_move(purpose: &str, steps: Vec<cel_contracts::Step>) -> cel_contracts::NextMove {
    runner_support::batch(purpose, steps)
}

fn click_action(target: &str) -> cel_contracts::PlannedAction {
    runner_support::click(target)
}
