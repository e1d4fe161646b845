//! The accessibility test session, shared by `a11y_elements` (tests of the binary) and the
//! in-process `runner_desktop` tests: a private Xvfb, a private D-Bus session bus (the AT-SPI
//! bus launcher is activated on it), and the GTK 3 test window (`tests/apps/a11y_window.py`)
//! that logs what happens to each of its controls.
//!
//! Needs `Xvfb`, `xdpyinfo`, `dbus-daemon`, at-spi2-core and Debian's `/usr/bin/python3` with
//! `python3-gi` and `gir1.2-gtk-3.0`. Without them the tests say so and pass, unless
//! `SIGHTLINE_REQUIRE_X11_TESTS=1` (as in CI), which makes them fail.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};

use crate::runner_support::{tools_available, Proc, Xvfb, REQUIRE_ENV};

/// The test window's place on the root window and its controls' layout inside it (the same
/// numbers as in `tests/apps/a11y_window.py`): id, role, name, x, y, width, height.
pub const WINDOW_ORIGIN: (i32, i32) = (100, 120);
pub const LAYOUT: &[(&str, &str, &str, i32, i32, i32, i32)] = &[
    ("button_alpha", "button", "Alpha", 20, 20, 120, 40),
    ("button_beta", "button", "Beta", 160, 20, 120, 40),
    ("button_delete", "button", "Delete", 300, 20, 120, 40),
    ("text_name", "text", "Name", 20, 80, 400, 36),
    ("checkbox_notify", "checkbox", "Notify", 20, 136, 200, 30),
];
/// How far reported bounds may be from the layout, in pixels (toolkit rounding).
pub const BOUNDS_TOLERANCE_PX: i64 = 3;
pub const SCREEN: (u32, u32) = (1280, 800);

const TOOLS: &[&str] = &["Xvfb", "xdpyinfo", "dbus-daemon"];
const PYTHON: &str = "/usr/bin/python3";
const BUS_LAUNCHER: &str = "/usr/libexec/at-spi-bus-launcher";

/// Whether everything the tests need is installed; like [`tools_available`], a skip unless
/// CI requires them.
pub fn stack_available() -> anyhow::Result<bool> {
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

/// A private session bus (the AT-SPI bus launcher is activated on it) and the programs of a
/// test (the test window, dialogs) on a private Xvfb; everything is killed on drop.
pub struct Session {
    _xvfb: Xvfb,
    /// The X display, `:N`.
    pub display: String,
    /// The session bus's address.
    pub bus_address: String,
    /// Where the window's log and the tests' files live.
    pub dir: tempfile::TempDir,
    _bus: Proc,
    /// The programs started in the session (the test window, dialogs), killed on drop.
    apps: Vec<Proc>,
}

impl Session {
    /// The session with the test window, once it logged "ready".
    pub fn start() -> anyhow::Result<Self> {
        let mut session = Self::bare()?;
        let log = session.dir.path().join("events.log");
        let window = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/a11y_window.py");
        let window = window.to_str().context("path")?.to_string();
        session.spawn(PYTHON, &[&window, log.to_str().context("path")?])?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if session.events()?.iter().any(|l| l == "ready") {
                return Ok(session);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("the test window did not log \"ready\" within 20 s")
    }

    /// Starts `program` with `args` in the session (its display, bus and runtime directory,
    /// its working directory the session's), killed when the session drops.
    pub fn spawn(&mut self, program: &str, args: &[&str]) -> anyhow::Result<()> {
        let runtime = self.dir.path().join("runtime");
        let app = Command::new(program)
            .args(args)
            .current_dir(self.dir.path())
            .env("DISPLAY", &self.display)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.bus_address)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("GSETTINGS_BACKEND", "memory")
            .env_remove("NO_AT_BRIDGE")
            .env_remove("WAYLAND_DISPLAY")
            .env("GTK_MODULES", "gail:atk-bridge")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {program}"))?;
        self.apps.push(Proc(app));
        Ok(())
    }

    /// Waits until a visible window's name matches `pattern` (xdotool's search).
    pub fn wait_for_window(&self, pattern: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let found = Command::new("xdotool")
                .args(["search", "--onlyvisible", "--name", pattern])
                .env("DISPLAY", &self.display)
                .output()
                .is_ok_and(|o| !o.stdout.is_empty());
            if found {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("no window named like /{pattern}/ within 20 s")
    }

    /// Xvfb and the session bus, no program yet.
    pub fn bare() -> anyhow::Result<Self> {
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
        Ok(Self {
            _xvfb: xvfb,
            display,
            bus_address,
            dir,
            _bus: bus,
            apps: Vec::new(),
        })
    }

    /// The lines the test window logged so far.
    pub fn events(&self) -> anyhow::Result<Vec<String>> {
        let path = self.dir.path().join("events.log");
        Ok(std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// Waits until the window logged `line` (its text field logs once typing pauses).
    pub fn wait_for_event(&self, line: &str) -> anyhow::Result<bool> {
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
    pub fn sightline(&self, args: &[&str]) -> anyhow::Result<(i32, String, String)> {
        self.sightline_on_bus(args, &self.bus_address)
    }

    pub fn sightline_on_bus(
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
    pub fn moves(&self, name: &str, lines: &[String]) -> anyhow::Result<PathBuf> {
        let p = self.dir.path().join(name);
        std::fs::write(&p, lines.join("\n") + "\n")?;
        Ok(p)
    }

    /// `sightline run --replay FILE GOAL` with quick settling.
    pub fn run_replay(&self, moves: &Path, goal: &str) -> anyhow::Result<(i32, String, String)> {
        let path = moves.to_str().context("path")?;
        self.sightline(&["run", "--replay", path, "--timeout", "30", goal])
    }
}
