//! One task's private desktop: a fresh Xvfb display, a private D-Bus session bus (unless the
//! task or the run turns accessibility off), a scratch directory and `HOME`, the task's
//! programs, and the checker. Everything is torn down when the [`TaskSession`] drops, on
//! success, on failure and on a panic alike.
//!
//! The session bus is what the accessibility elements need: GTK applications register with
//! the AT-SPI bus, whose launcher the session bus activates on first request, and the agent
//! (`sightline run`) reads the elements through the same bus. Toolkits that build their trees
//! only for assistive technology (Qt, browsers) are told it is on ([`ACCESSIBILITY_ENV`], and
//! the bus's `IsEnabled`, which `eval::desktop` sets before the task's programs start). The launcher, the AT-SPI bus
//! and its registry are activated as children of the session bus's `dbus-daemon` and stay in
//! its process group, so killing that group at teardown ends them all.
//!
//! Every program is started in its own process group and the whole group is killed at the
//! end (SIGTERM, a short grace, then SIGKILL), so a shell that started an application does not
//! leave the application running. Programs that detach themselves into a new session escape
//! this; the suite's programs do not.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::task::{Placeholders, SetupCommand, Task};
use crate::error::{Error, Result};

/// How long Xvfb gets to announce its display.
const XVFB_START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long `dbus-daemon` gets to announce its address.
const BUS_START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a foreground setup command may run.
const SETUP_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one checker attempt may run.
const CHECK_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(20);
/// Between checker attempts.
const CHECK_POLL: Duration = Duration::from_millis(250);
/// Between window searches.
const WINDOW_POLL: Duration = Duration::from_millis(100);
/// Between SIGTERM and SIGKILL at teardown.
const TERM_GRACE: Duration = Duration::from_millis(500);
/// Most time a SIGKILLed group gets to vanish from the process table.
const GROUP_EXIT_WAIT: Duration = Duration::from_secs(5);
/// The environment that switches accessibility on in toolkits that otherwise wait for a
/// screen reader, for the programs of a task with a session bus.
pub const ACCESSIBILITY_ENV: &[(&str, &str)] = &[
    ("QT_LINUX_ACCESSIBILITY_ALWAYS_ON", "1"),
    ("GNOME_ACCESSIBILITY", "1"),
    ("ACCESSIBILITY_ENABLED", "1"),
];
/// Most bytes of a command's output kept in a report.
pub const OUTPUT_KEEP_BYTES: usize = 2_000;

/// A child process that leads its own process group; the group is killed on drop.
#[derive(Debug)]
pub struct GroupChild {
    child: Child,
    label: String,
    /// Set once the group was killed and the leader reaped: the group id may be reused after.
    killed: bool,
}

impl GroupChild {
    /// Spawns `cmd` as the leader of a new process group.
    pub fn spawn(mut cmd: Command, label: &str) -> Result<Self> {
        cmd.process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| Error::runner_caused(format!("cannot start {label}"), e))?;
        Ok(Self {
            child,
            label: label.to_string(),
            killed: false,
        })
    }

    /// The underlying child (for its pipes).
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Whether it has exited, and how.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        self.child
            .try_wait()
            .map_err(|e| Error::runner_caused(self.label.clone(), e))
    }

    /// Sends `signal` to the whole group.
    pub fn signal_group(&self, signal: i32) {
        let Ok(pgid) = i32::try_from(self.child.id()) else {
            return;
        };
        // SAFETY: kill(2) with a negative pid signals the process group we created at spawn
        // (the leader's pid is the group id); it touches no memory of ours.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }

    /// Waits for the leader to exit until `deadline`, polling `stop`. Returns `None` when the
    /// deadline passed or a stop was requested (the child is still running).
    pub fn wait_until(
        &mut self,
        deadline: Instant,
        stop: &AtomicBool,
    ) -> Result<Option<ExitStatus>> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline || stop.load(Ordering::SeqCst) {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the group: SIGTERM, a short grace for the leader, SIGKILL, reap.
    pub fn kill_group(&mut self) {
        if self.killed {
            return;
        }
        if let Ok(None) = self.child.try_wait() {
            self.signal_group(libc::SIGTERM);
            let deadline = Instant::now() + TERM_GRACE;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Members other than the leader may outlive it: the group is killed either way.
        self.signal_group(libc::SIGKILL);
        let _ = self.child.wait();
        // SIGKILLed members die asynchronously (a browser's many threads take a while to
        // unmap); the caller removes their directories and display next, so wait for them.
        if let Ok(pgid) = i32::try_from(self.child.id()) {
            let deadline = Instant::now() + GROUP_EXIT_WAIT;
            while live_group_members(pgid) > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        self.killed = true;
    }
}

/// How many processes of group `pgid` are still alive (zombies are dead: their parent, or
/// init, reaps them, and a container's init may never do so).
fn live_group_members(pgid: i32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses.
            let Some((_, rest)) = stat.rsplit_once(") ") else {
                return false;
            };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            let pgrp = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
            pgrp == Some(pgid) && !matches!(state, Some("Z" | "X"))
        })
        .count()
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// A private X server on a display it picked itself (`-displayfd`), killed on drop.
#[derive(Debug)]
pub struct Xvfb {
    // Killed by `Drop for Xvfb`, which then tidies what a SIGKILLed server leaves.
    server: GroupChild,
    display: String,
}

impl Xvfb {
    /// Starts Xvfb with one `width`×`height`×24 screen. Xvfb picks a free display number and
    /// writes it to the descriptor `-displayfd` names, once it accepts connections; we give it
    /// its stdout, so there is no race for display numbers and no polling.
    pub fn start(width: u32, height: u32, stop: &AtomicBool) -> Result<Self> {
        let mut cmd = Command::new("Xvfb");
        cmd.args(["-displayfd", "1", "-screen", "0"])
            .arg(format!("{width}x{height}x24"))
            // -noreset: the server would otherwise reset whenever its last client leaves, and
            // the runner connects per capture.
            .args(["-nolisten", "tcp", "-noreset"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut server = GroupChild::spawn(cmd, "Xvfb (install the xvfb package)")?;
        let line = first_line(&mut server, "Xvfb", XVFB_START_TIMEOUT, stop)?;
        let n = line.trim();
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::runner("Xvfb exited without announcing a display"));
        }
        Ok(Self {
            server,
            display: format!(":{n}"),
        })
    }

    /// `:N`.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// Whether the server is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.server.try_wait(), Ok(None))
    }
}

impl Drop for Xvfb {
    /// A server that had to be SIGKILLed (slow to exit under load) leaves its lock file and
    /// socket in /tmp; once it is reaped they are removed, but only while the lock still names
    /// that server's pid (another server may have taken the number since).
    fn drop(&mut self) {
        let pid = self.server.child.id();
        self.server.kill_group();
        let n = self.display.trim_start_matches(':');
        let lock = format!("/tmp/.X{n}-lock");
        let ours = std::fs::read_to_string(&lock).is_ok_and(|s| s.trim() == pid.to_string());
        if ours {
            let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{n}"));
            let _ = std::fs::remove_file(lock);
        }
    }
}

/// Reads the first line `child` prints on its stdout (a server announcing where it listens),
/// within `timeout`. An empty line means it exited first.
fn first_line(
    child: &mut GroupChild,
    what: &str,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<String> {
    let stdout = child
        .child_mut()
        .stdout
        .take()
        .ok_or_else(|| Error::runner(format!("{what}: no stdout pipe")))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let deadline = Instant::now() + timeout;
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => return Ok(line),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() >= deadline || stop.load(Ordering::SeqCst) {
                    return Err(Error::runner(format!(
                        "{what} did not announce itself within {} s",
                        timeout.as_secs()
                    )));
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::runner(format!(
                    "{what}: the announcement thread died"
                )));
            }
        }
    }
}

/// A private D-Bus session bus listening in the task's runtime directory; its process group
/// (with the AT-SPI launcher, bus and registry it activates) is killed on drop.
#[derive(Debug)]
pub struct SessionBus {
    daemon: GroupChild,
    address: String,
}

impl SessionBus {
    /// Starts `dbus-daemon --session` on `<runtime>/bus`. The daemon's environment is the
    /// task's (`DISPLAY`, `HOME`, `XDG_RUNTIME_DIR`…), so the services it activates put their
    /// sockets in the task's runtime directory too.
    pub fn start(runtime: &Path, env: &[(String, String)], stop: &AtomicBool) -> Result<Self> {
        let socket = runtime.join("bus");
        let mut cmd = Command::new("dbus-daemon");
        cmd.args(["--session", "--nofork", "--print-address=1"])
            .arg(format!("--address=unix:path={}", socket.display()))
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env_remove("WAYLAND_DISPLAY")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut daemon = GroupChild::spawn(cmd, "dbus-daemon (install the dbus package)")?;
        let line = first_line(&mut daemon, "dbus-daemon", BUS_START_TIMEOUT, stop)?;
        let address = line.trim().to_string();
        if address.is_empty() {
            return Err(Error::runner(format!(
                "dbus-daemon exited without announcing an address (is {} too long for a \
                 socket path?)",
                socket.display()
            )));
        }
        Ok(Self { daemon, address })
    }

    /// The bus address, as `DBUS_SESSION_BUS_ADDRESS` takes it.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Kills the daemon and everything it activated.
    pub fn stop(&mut self) {
        self.daemon.kill_group();
    }
}

/// What a command printed and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandOutcome {
    /// The exit code; `None` when killed by a signal or timed out.
    pub exit_code: Option<i32>,
    /// Whether it ran out of time (and was killed).
    pub timed_out: bool,
    /// The end of its stdout and stderr together.
    pub output: String,
}

impl CommandOutcome {
    /// Exit 0 within the time.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

/// One task's desktop and directories. Drop order tears it down: programs first, then the
/// session bus, then the X server, then the directories.
#[derive(Debug)]
pub struct TaskSession {
    programs: Vec<GroupChild>,
    bus: Option<SessionBus>,
    xvfb: Xvfb,
    placeholders: Placeholders,
    env: Vec<(String, String)>,
    _scratch: tempfile::TempDir,
}

impl TaskSession {
    /// Starts the display (and, with `with_bus`, a private session bus) and makes the scratch
    /// and home directories (under `scratch_root`, or the system temp directory).
    pub fn start(
        task: &Task,
        scratch_root: Option<&Path>,
        with_bus: bool,
        stop: &AtomicBool,
    ) -> Result<Self> {
        let scratch = match scratch_root {
            Some(root) => {
                std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
                tempfile::Builder::new()
                    .prefix(&format!("{}-", task.name))
                    .tempdir_in(root)
            }
            None => tempfile::Builder::new()
                .prefix(&format!("sightline-eval-{}-", task.name))
                .tempdir(),
        }
        .map_err(|e| Error::runner_caused("cannot make a scratch directory", e))?;
        let tmp = scratch.path().join("tmp");
        let home = scratch.path().join("home");
        let runtime = home.join(".runtime");
        for d in [&tmp, &home, &runtime] {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        set_private(&runtime)?;
        let xvfb = Xvfb::start(task.screen.0, task.screen.1, stop)?;
        let suite = task
            .path
            .parent()
            .map(|p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf()))
            .unwrap_or_else(|| PathBuf::from("."));
        let placeholders = Placeholders {
            tmp: tmp.clone(),
            home: home.clone(),
            display: xvfb.display().to_string(),
            suite,
        };
        let home_s = home.to_string_lossy().into_owned();
        let mut env = vec![
            ("DISPLAY".to_string(), xvfb.display().to_string()),
            ("HOME".to_string(), home_s.clone()),
            ("XDG_CONFIG_HOME".to_string(), format!("{home_s}/.config")),
            (
                "XDG_DATA_HOME".to_string(),
                format!("{home_s}/.local/share"),
            ),
            ("XDG_CACHE_HOME".to_string(), format!("{home_s}/.cache")),
            (
                "XDG_RUNTIME_DIR".to_string(),
                runtime.to_string_lossy().into_owned(),
            ),
            // GTK settings in memory: no dconf daemon, nothing written outside HOME.
            ("GSETTINGS_BACKEND".to_string(), "memory".to_string()),
            ("LC_ALL".to_string(), "C.UTF-8".to_string()),
        ];
        let bus = if with_bus {
            let bus = SessionBus::start(&runtime, &env, stop)?;
            env.push((
                "DBUS_SESSION_BUS_ADDRESS".to_string(),
                bus.address().to_string(),
            ));
            // Applications that build their accessibility trees only for assistive
            // technology, told it is there from the start (the bus's `IsEnabled` is set too,
            // see `eval::desktop`): Qt, Firefox (Gecko) and Chromium.
            for (k, v) in ACCESSIBILITY_ENV {
                env.push((k.to_string(), v.to_string()));
            }
            Some(bus)
        } else {
            // No bus: without this GTK looks for the accessibility bus and waits for it.
            env.push(("NO_AT_BRIDGE".to_string(), "1".to_string()));
            None
        };
        for (k, v) in &task.env {
            env.retain(|(name, _)| name != k);
            env.push((k.clone(), placeholders.apply(v)));
        }
        Ok(Self {
            programs: Vec::new(),
            bus,
            xvfb,
            placeholders,
            env,
            _scratch: scratch,
        })
    }

    /// The placeholder values of this session.
    pub fn placeholders(&self) -> &Placeholders {
        &self.placeholders
    }

    /// `:N`.
    pub fn display(&self) -> &str {
        self.xvfb.display()
    }

    /// The task's session bus address, when it has one.
    pub fn bus_address(&self) -> Option<&str> {
        self.bus.as_ref().map(SessionBus::address)
    }

    /// A `sh -c` command with the task's environment, in the scratch directory.
    pub fn shell(&self, text: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(self.placeholders.apply(text))
            .current_dir(&self.placeholders.tmp)
            .env_remove("WAYLAND_DISPLAY")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null());
        cmd
    }

    /// Runs the task's setup commands in order. A foreground command must exit 0; a
    /// background one keeps running until teardown; a `wait_window` must appear in time.
    pub fn setup(&mut self, task: &Task, stop: &AtomicBool) -> Result<()> {
        for (i, command) in task.setup.iter().enumerate() {
            let what = format!("setup {} of {}", i + 1, task.name);
            if command.background {
                let log = self.placeholders.tmp.join(format!(".setup-{}.log", i + 1));
                let file = std::fs::File::create(&log).map_err(|e| Error::io(&log, e))?;
                let err = file.try_clone().map_err(|e| Error::io(&log, e))?;
                let mut cmd = self.shell(&command.run);
                cmd.stdout(file).stderr(err);
                self.programs.push(GroupChild::spawn(cmd, &what)?);
            } else {
                let outcome = run_to_end(self.shell(&command.run), SETUP_COMMAND_TIMEOUT, stop)?;
                if !outcome.success() {
                    return Err(Error::runner(format!(
                        "{what} failed ({}): {}",
                        describe_exit(&outcome),
                        outcome.output.trim()
                    )));
                }
            }
            self.wait_for_window(command, &what, stop)?;
        }
        Ok(())
    }

    fn wait_for_window(
        &mut self,
        command: &SetupCommand,
        what: &str,
        stop: &AtomicBool,
    ) -> Result<()> {
        let Some(pattern) = &command.wait_window else {
            return Ok(());
        };
        let deadline = Instant::now() + Duration::from_secs_f64(command.wait_window_s);
        loop {
            let out = self.x_tool(&["search", "--onlyvisible", "--name", pattern])?;
            if let Some(id) = out.lines().map(str::trim).find(|l| !l.is_empty()) {
                if let Some((x, y)) = command.place {
                    self.x_tool(&["windowmove", id, &x.to_string(), &y.to_string()])?;
                }
                return Ok(());
            }
            if !self.xvfb.is_running() {
                return Err(Error::runner(format!("{what}: the X server died")));
            }
            if Instant::now() >= deadline || stop.load(Ordering::SeqCst) {
                return Err(Error::runner(format!(
                    "{what}: no visible window named like /{pattern}/ within {} s",
                    command.wait_window_s
                )));
            }
            std::thread::sleep(WINDOW_POLL);
        }
    }

    /// Runs `xdotool` on this display; returns stdout (a search that finds nothing is "").
    fn x_tool(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("xdotool")
            .args(args)
            .env("DISPLAY", self.display())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::runner_caused("cannot run xdotool (install it)", e))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Polls the checker until it exits 0 or `wait_s` has passed; returns the last attempt.
    pub fn check(&self, task: &Task, stop: &AtomicBool) -> Result<CommandOutcome> {
        let deadline = Instant::now() + Duration::from_secs_f64(task.check.wait_s);
        loop {
            let outcome = run_to_end(self.shell(&task.check.run), CHECK_ATTEMPT_TIMEOUT, stop)?;
            if outcome.success() || Instant::now() >= deadline || stop.load(Ordering::SeqCst) {
                return Ok(outcome);
            }
            std::thread::sleep(CHECK_POLL);
        }
    }
}

impl Drop for TaskSession {
    fn drop(&mut self) {
        // Programs before the server, newest first, so none is left talking to a dead display.
        while let Some(mut p) = self.programs.pop() {
            p.kill_group();
        }
        // Then the bus, with the accessibility services it activated.
        if let Some(bus) = &mut self.bus {
            bus.stop();
        }
    }
}

fn set_private(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io(dir, e))
}

/// Runs `cmd` in its own process group to the end or `timeout`, collecting stdout and
/// stderr (the end of them). A stop request kills it.
pub fn run_to_end(
    mut cmd: Command,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<CommandOutcome> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = GroupChild::spawn(cmd, "command")?;
    let readers: Vec<_> = [
        child
            .child_mut()
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .child_mut()
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|mut r| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    })
    .collect();
    let status = child.wait_until(Instant::now() + timeout, stop)?;
    let timed_out = status.is_none();
    // Kills whatever the command left in its group (and the command itself on a timeout), so
    // the pipes close and the readers finish.
    child.kill_group();
    let mut output = Vec::new();
    for r in readers {
        output.extend(r.join().unwrap_or_default());
    }
    Ok(CommandOutcome {
        exit_code: status.and_then(|s| s.code()),
        timed_out,
        output: tail(&String::from_utf8_lossy(&output), OUTPUT_KEEP_BYTES),
    })
}

/// The last `max` bytes of `text`, cut at a character boundary.
pub fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

fn describe_exit(o: &CommandOutcome) -> String {
    match (o.timed_out, o.exit_code) {
        (true, _) => "timed out".into(),
        (false, Some(c)) => format!("exit {c}"),
        (false, None) => "killed by a signal".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// A program that cannot be started is an [`Error::Runner`] naming it, reading as
    /// before, with the spawn's I/O error as its source.
    #[test]
    fn a_program_that_will_not_start_keeps_the_spawn_error() -> Result<()> {
        let missing = "/nonexistent/sightline-test-no-such-program";
        let err = match GroupChild::spawn(Command::new(missing), "the test program") {
            Ok(_) => return Err(Error::internal(format!("{missing} started"))),
            Err(err) => err,
        };
        let source = err
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .ok_or_else(|| Error::internal(format!("no I/O source: {err:?}")))?;
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        assert!(matches!(err, Error::Runner { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("runner: cannot start the test program: {source}")
        );
        Ok(())
    }

    /// When `kill_group` returns, no member of the group is alive any more, the leader's
    /// children included (their directories are removed next).
    #[test]
    fn a_killed_group_has_no_live_member_left() -> Result<()> {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30 & wait"]);
        let mut group = GroupChild::spawn(cmd, "a group of sleepers")?;
        let pgid =
            i32::try_from(group.child_mut().id()).map_err(|e| Error::internal(e.to_string()))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while live_group_members(pgid) < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(live_group_members(pgid), 3);
        group.kill_group();
        assert_eq!(live_group_members(pgid), 0);
        Ok(())
    }

    #[test]
    fn run_to_end_reports_exit_output_and_timeouts() -> Result<()> {
        let stop = AtomicBool::new(false);
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let o = run_to_end(cmd, Duration::from_secs(10), &stop)?;
        assert_eq!(o.exit_code, Some(3));
        assert!(
            o.output.contains("out") && o.output.contains("err"),
            "{o:?}"
        );
        assert!(!o.success());

        // A command whose background grandchild holds the pipes open still ends: the group is
        // killed with it.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & echo started"]);
        let t0 = Instant::now();
        let o = run_to_end(cmd, Duration::from_secs(10), &stop)?;
        assert!(o.success(), "{o:?}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());

        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30"]);
        let o = run_to_end(cmd, Duration::from_millis(200), &stop)?;
        assert!(o.timed_out && !o.success());
        Ok(())
    }

    #[test]
    fn tail_keeps_the_end_on_a_char_boundary() {
        assert_eq!(tail("abc", 5), "abc");
        assert_eq!(tail("abcdef", 3), "…def");
        assert_eq!(tail("aé", 1), "…");
    }
}
