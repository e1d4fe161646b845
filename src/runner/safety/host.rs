//! What the gate asks of the machine: whether a file exists, whether a command name is an
//! executable on `PATH`, where `~` is, and which shells sit at a prompt on this machine's
//! terminals (so a relative path in a typed line can be checked against their working
//! directories). A trait, so tests give fixed answers.

use std::path::{Path, PathBuf};

/// What is at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Nothing: writing there creates a file (a dangling symbolic link counts as nothing, since
    /// writing through it creates its target).
    Missing,
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A device, FIFO or socket.
    Special,
    /// The gate cannot tell (no permission to look): judged as an existing file.
    Unknown,
}

/// A shell waiting at a prompt on a terminal: typed text goes to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellAtPrompt {
    /// Its program name (`bash`, `zsh`, `fish`, …).
    pub name: String,
    /// Its working directory.
    pub cwd: PathBuf,
}

/// The machine as the gate sees it.
pub trait HostFacts {
    /// The directory `~` stands for.
    fn home(&self) -> Option<PathBuf>;
    /// What is at `path` (symbolic links followed).
    fn file_kind(&self, path: &Path) -> FileKind;
    /// `path` with its symbolic links resolved, if it exists.
    fn canonical(&self, path: &Path) -> Option<PathBuf>;
    /// Whether `name` is an executable file in a `PATH` directory.
    fn on_path(&self, name: &str) -> bool;
    /// The shells at a prompt on this machine's terminals, or `None` when that cannot be told
    /// (not Linux, a terminal runs a remote or elevated session such as `ssh` or `su`, a
    /// shell's directory cannot be read, or no shell waits anywhere).
    fn shells_at_prompt(&self) -> Option<Vec<ShellAtPrompt>>;
}

/// Shell programs whose prompt reads typed lines.
pub const SHELL_NAMES: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ksh93", "ash", "yash", "busybox", "fish", "tcsh",
    "csh", "nu", "elvish", "xonsh", "pwsh", "rbash", "lksh", "posh", "oksh", "loksh",
];

/// Programs in a terminal's foreground that pass typed lines to a shell the gate cannot
/// inspect (another machine, another user, a container).
const REMOTE_OR_ELEVATED: &[&str] = &[
    "ssh",
    "mosh-client",
    "telnet",
    "rlogin",
    "su",
    "sudo",
    "doas",
    "run0",
    "pkexec",
    "docker",
    "podman",
    "kubectl",
    "lxc",
    "incus",
    "machinectl",
    "nsenter",
    "chroot",
    "distrobox",
    "toolbox",
    "vagrant",
    "virsh",
    "screen",
    "tmux",
    "script",
];

/// The real machine: the file system, `PATH`, `HOME` and (on Linux) `/proc`.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalHost;

impl HostFacts for LocalHost {
    fn home(&self) -> Option<PathBuf> {
        super::grants::home_dir()
    }

    fn file_kind(&self, path: &Path) -> FileKind {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => FileKind::File,
            Ok(m) if m.is_dir() => FileKind::Dir,
            Ok(_) => FileKind::Special,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileKind::Missing,
            Err(_) => FileKind::Unknown,
        }
    }

    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        std::fs::canonicalize(path).ok()
    }

    fn on_path(&self, name: &str) -> bool {
        if name.is_empty() || name.contains('/') {
            return false;
        }
        let Some(paths) = std::env::var_os("PATH") else {
            return false;
        };
        std::env::split_paths(&paths).any(|dir| is_executable(&dir.join(name)))
            // Case-insensitive file systems (macOS, Windows) run `Make` as `make`.
            || (cfg!(not(target_os = "linux"))
                && std::env::split_paths(&paths)
                    .any(|dir| is_executable(&dir.join(name.to_lowercase()))))
    }

    fn shells_at_prompt(&self) -> Option<Vec<ShellAtPrompt>> {
        #[cfg(target_os = "linux")]
        {
            let table = proc_table::read()?;
            shells_from_table(&table, &proc_table::own())
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// One process as `/proc/PID/stat` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcEntry {
    /// Process id.
    pub pid: i32,
    /// Program name (`comm`).
    pub name: String,
    /// Process group.
    pub pgrp: i32,
    /// Session.
    pub session: i32,
    /// Controlling terminal (`tty_nr`), 0 for none.
    pub tty: i64,
    /// Foreground process group of that terminal.
    pub tpgid: i32,
    /// Working directory, when it can be read.
    pub cwd: Option<PathBuf>,
}

/// The calling process's session and terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnProcess {
    /// Our session id.
    pub session: i32,
    /// Our controlling terminal (0 for none).
    pub tty: i64,
}

/// Whether a `tty_nr` is a pseudo-terminal (Unix98 pty slaves, majors 136–143): a terminal
/// window's.
fn is_pty(tty: i64) -> bool {
    let major = (tty >> 8) & 0xfff;
    (136..=143).contains(&major)
}

/// The shells at a prompt in a process table. On each pseudo-terminal, the foreground process
/// group reads typed text: its shells count, with their directories; a remote or elevated
/// session there (ssh, su, a container) makes the answer unknown; other programs (an editor,
/// a pager) do not run lines as commands and are skipped. On our own terminal the foreground is
/// this program, which reads no typed text: the shell that started it (the session leader)
/// reads it once we exit, so that shell counts.
pub fn shells_from_table(table: &[ProcEntry], own: &OwnProcess) -> Option<Vec<ShellAtPrompt>> {
    let mut shells = Vec::new();
    for p in table.iter().filter(|p| is_pty(p.tty)) {
        let ours = own.tty != 0 && p.tty == own.tty;
        let reads = if ours {
            p.pid == own.session
        } else {
            p.pgrp == p.tpgid
        };
        if !reads {
            continue;
        }
        let name = p.name.as_str();
        if REMOTE_OR_ELEVATED.contains(&name) {
            return None;
        }
        if SHELL_NAMES.contains(&name) {
            shells.push(ShellAtPrompt {
                name: name.to_string(),
                cwd: p.cwd.clone()?,
            });
        }
    }
    if shells.is_empty() {
        None
    } else {
        Some(shells)
    }
}

#[cfg(target_os = "linux")]
mod proc_table {
    use super::{OwnProcess, ProcEntry};

    /// Every process in `/proc` (those that vanish while read are skipped).
    pub(super) fn read() -> Option<Vec<ProcEntry>> {
        let dir = std::fs::read_dir("/proc").ok()?;
        let mut out = Vec::new();
        for entry in dir.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            if let Some(mut p) = parse_stat(pid, &stat) {
                if super::is_pty(p.tty) {
                    p.cwd = std::fs::read_link(entry.path().join("cwd")).ok();
                }
                out.push(p);
            }
        }
        Some(out)
    }

    /// This process's session and terminal.
    pub(super) fn own() -> OwnProcess {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let p = parse_stat(0, &stat);
        OwnProcess {
            session: p.as_ref().map_or(0, |p| p.session),
            tty: p.as_ref().map_or(0, |p| p.tty),
        }
    }

    /// `pid (comm) state ppid pgrp session tty_nr tpgid …`; the name may hold spaces and
    /// parentheses, so the fields are read after the last ')'.
    pub(super) fn parse_stat(pid: i32, stat: &str) -> Option<ProcEntry> {
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let name = stat.get(open + 1..close)?.to_string();
        let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
        // fields[0] state, [1] ppid, [2] pgrp, [3] session, [4] tty_nr, [5] tpgid
        Some(ProcEntry {
            pid,
            name,
            pgrp: fields.get(2)?.parse().ok()?,
            session: fields.get(3)?.parse().ok()?,
            tty: fields.get(4)?.parse().ok()?,
            tpgid: fields.get(5)?.parse().ok()?,
            cwd: None,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn stat_lines_with_odd_names_parse() -> Result<(), String> {
            let p = parse_stat(7, "7 (a (b) c) S 1 7 7 34816 7 4194560 0")
                .ok_or("the stat line did not parse")?;
            assert_eq!(p.name, "a (b) c");
            assert_eq!((p.pgrp, p.session, p.tty, p.tpgid), (7, 7, 34816, 7));
            assert!(super::super::is_pty(p.tty));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i32, name: &str, pgrp: i32, tty: i64, tpgid: i32, cwd: &str) -> ProcEntry {
        ProcEntry {
            pid,
            name: name.into(),
            pgrp,
            session: pgrp,
            tty,
            tpgid,
            cwd: Some(PathBuf::from(cwd)),
        }
    }

    const PTS0: i64 = 136 << 8;
    const PTS1: i64 = (136 << 8) + 1;
    const NO_TTY: OwnProcess = OwnProcess { session: 1, tty: 0 };

    #[test]
    fn foreground_shells_on_ptys_count_and_editors_do_not() {
        let table = vec![
            entry(10, "bash", 10, PTS0, 10, "/home/u/work"),
            entry(20, "zsh", 20, PTS1, 21, "/home/u"),
            entry(21, "vim", 21, PTS1, 21, "/home/u"),
            entry(30, "bash", 30, 0, -1, "/"),
        ];
        let shells = shells_from_table(&table, &NO_TTY);
        assert_eq!(
            shells,
            Some(vec![ShellAtPrompt {
                name: "bash".into(),
                cwd: "/home/u/work".into()
            }])
        );
    }

    #[test]
    fn a_remote_session_or_an_unreadable_shell_makes_it_unknown() {
        let ssh = vec![
            entry(10, "bash", 10, PTS0, 10, "/home/u"),
            entry(20, "bash", 20, PTS1, 21, "/home/u"),
            entry(21, "ssh", 21, PTS1, 21, "/home/u"),
        ];
        assert_eq!(shells_from_table(&ssh, &NO_TTY), None);
        let mut root = entry(10, "bash", 10, PTS0, 10, "/");
        root.cwd = None;
        assert_eq!(shells_from_table(&[root], &NO_TTY), None);
        assert_eq!(shells_from_table(&[], &NO_TTY), None);
    }

    #[test]
    fn on_our_own_terminal_the_shell_that_started_us_reads_what_is_typed() {
        let table = vec![
            entry(10, "bash", 10, PTS0, 11, "/home/u/project"),
            entry(11, "sightline", 11, PTS0, 11, "/home/u/project"),
        ];
        let own = OwnProcess {
            session: 10,
            tty: PTS0,
        };
        let shells = shells_from_table(&table, &own).unwrap_or_default();
        assert_eq!(shells.len(), 1);
        assert_eq!(shells[0].cwd, PathBuf::from("/home/u/project"));
    }
}
