//! Commands that change the machine, the session or the shell itself: stopping processes
//! (`close`), power, disks, users, packages and services (`system`, with their read-only
//! subcommands allowed), the crontab, the clock and the host name, and the shell's own
//! definitions (`alias`, `trap`, variables that change what later commands run: `shell`).

use super::opts::Opts;
use super::variables::judge_assignment;
use super::walker::{Arg, Invocation, Walker};
use crate::runner::safety::grants::{GrantKind, Target};

pub(super) fn kill(w: &mut Walker<'_>, inv: &Invocation) {
    let listing = inv
        .args
        .iter()
        .all(|a| matches!(a.fixed(), Some("-l" | "-L" | "--list" | "--table")));
    if inv.name == "kill" && (inv.args.is_empty() || listing) {
        return;
    }
    let what: Vec<String> = inv.args.iter().map(Arg::text).collect();
    w.need(
        GrantKind::Close,
        Target::Unknown,
        format!("stopping processes with {} {}", inv.name, what.join(" "))
            .trim_end()
            .to_string(),
    );
}

pub(super) fn power(w: &mut Walker<'_>, inv: &Invocation) {
    // `shutdown -c` cancels a pending shutdown.
    let harmless = !inv.args.is_empty()
        && inv
            .args
            .iter()
            .all(|a| matches!(a.fixed(), Some("-c" | "--help" | "--no-wall")));
    if !harmless {
        system(w, inv, "shutting down or restarting the machine");
    }
}

pub(super) fn system(w: &mut Walker<'_>, inv: &Invocation, what: &str) {
    let args: Vec<String> = inv.args.iter().map(Arg::text).collect();
    w.need(
        GrantKind::System,
        Target::Unknown,
        format!("{what} ({} {})", inv.name, args.join(" ")).replace(" )", ")"),
    );
}

pub(super) fn crontab(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &["-u"]);
    if opts.has(&["-l"]) {
        return;
    }
    if opts.has(&["-r"]) {
        w.need(
            GrantKind::Delete,
            Target::Unknown,
            "deleting the crontab with crontab -r",
        );
    } else {
        w.need(
            GrantKind::System,
            Target::Unknown,
            "replacing or editing the crontab",
        );
    }
}

// ─── Settings of the shell and the machine ──────────────────────────────────

pub(super) fn date(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &["-d", "-f", "-r", "-I", "--date", "--file", "--reference"],
    );
    if opts.has(&["-s", "--set"]) {
        system(w, inv, "setting the clock");
    }
}

pub(super) fn hostname(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &[]);
    if !opts.operands.is_empty() || opts.has(&["-F", "--file", "-b", "--boot"]) {
        system(w, inv, "renaming the machine");
    }
}

pub(super) fn alias(w: &mut Walker<'_>, inv: &Invocation) {
    for a in &inv.args {
        if a.text().contains('=') {
            let name = a.text().split('=').next().unwrap_or_default().to_string();
            w.need_shell(format!(
                "defining the alias {name}, which changes what a later command runs"
            ));
        }
    }
}

pub(super) fn trap(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &[]);
    if opts.has(&["-p", "-l"]) || opts.operands.len() < 2 {
        return;
    }
    match opts.operands[0].fixed() {
        Some("-") | Some("") => {}
        Some(code) => {
            w.need_shell("setting a trap that runs a command later");
            w.nested(code);
        }
        None => w.need_shell("setting a trap that runs a command later"),
    }
}

pub(super) fn declare(w: &mut Walker<'_>, inv: &Invocation) {
    for a in &inv.args {
        let text = a.text();
        if let Some((name, _)) = text.split_once('=') {
            judge_assignment(w, name.trim_end_matches('+'));
        }
    }
}

// ─── The machine's state ────────────────────────────────────────────────────

/// Tools that change the machine whatever their arguments (listing forms aside).
pub(super) fn is_system_tool(name: &str) -> bool {
    #[rustfmt::skip]
    const TOOLS: &[&str] = &[
        "mkfs", "mke2fs", "mkswap", "mkdosfs", "mkntfs", "fdisk", "sfdisk", "cfdisk", "gdisk",
        "sgdisk", "parted", "wipefs", "blkdiscard", "badblocks", "hdparm", "cryptsetup", "losetup",
        "swapon", "swapoff", "fsck", "e2fsck", "tune2fs", "resize2fs", "lvremove", "vgremove",
        "pvremove", "lvcreate", "lvresize", "useradd", "userdel", "usermod", "adduser", "deluser",
        "passwd", "chpasswd", "chsh", "chfn", "groupadd", "groupdel", "groupmod", "gpasswd",
        "newusers", "visudo", "vipw", "modprobe", "rmmod", "insmod", "update-grub", "grub-install",
        "efibootmgr", "sysrq", "rtcwake", "pm-suspend", "mount", "umount",
    ];
    TOOLS.contains(&name) || name.starts_with("mkfs.")
}

/// Read-only subcommands (or flags) of tools that otherwise change the machine; an empty
/// argument list counts as read-only where listed with `""`.
#[rustfmt::skip]
pub(super) fn query_subcommands(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "systemctl" => &[
            "", "status", "show", "cat", "list-units", "list-unit-files", "list-sockets",
            "list-timers", "list-jobs", "list-dependencies", "list-machines", "list-automounts",
            "list-paths", "is-active", "is-enabled", "is-failed", "is-system-running",
            "get-default", "help", "show-environment", "--version",
        ],
        "loginctl" => &[
            "", "list-sessions", "list-users", "list-seats", "session-status", "show-session",
            "user-status", "show-user", "seat-status", "show-seat",
        ],
        "apt" | "apt-get" | "aptitude" => &[
            "list", "search", "show", "showsrc", "policy", "depends", "rdepends", "changelog",
            "--version", "help", "check", "download", "source",
        ],
        "apt-cache" => &[
            
            "", "search", "show", "showpkg", "policy", "depends", "rdepends", "stats", "dump",
            "pkgnames", "madison",
        ],
        "dpkg" => &[
            "-l", "-L", "-s", "-S", "-p", "-c", "--list", "--listfiles", "--status", "--search",
            "--print-avail", "--contents", "--get-selections", "--print-architecture", "--version",
            "--help",
        ],
        "snap" => &[
            "list", "info", "find", "search", "version", "changes", "connections", "interfaces",
            "help",
        ],
        "flatpak" => &[
            "list", "info", "search", "remotes", "history", "ps", "--version",
        ],
        "dnf" | "yum" => &[
            "list", "info", "search", "provides", "repolist", "history", "check-update",
            "--version", "help", "repoquery",
        ],
        "rpm" => &[
            
            "-q", "-qa", "-qi", "-ql", "-qf", "--query", "-V", "--verify",
        ],
        "pacman" => &[
            "-Q", "-Qi", "-Ql", "-Qs", "-Qo", "-Qe", "-Qdt", "-Ss", "-Si", "-Sl", "-Sg", "-F",
            "-Fl", "-Fx", "-V", "-h", "--version",
        ],
        "zypper" => &[
            "search", "se", "info", "if", "list-updates", "lu", "repos", "lr", "packages", "pa",
            "patches",
        ],
        "apk" => &["info", "search", "list", "policy", "stats"],
        "brew" => &[
            "list", "info", "search", "outdated", "config", "doctor", "deps", "uses", "--version",
        ],
        "timedatectl" | "hostnamectl" | "localectl" => &[
            "", "status", "show", "list-timezones", "list-locales", "list-keymaps",
        ],
        "nmcli" => &["", "monitor", "m"],
        "ufw" => &["status"],
        "iptables" | "ip6tables" | "nft" => &["-L", "--list", "-S", "--list-rules", "list"],
        "ifconfig" | "route" | "iwconfig" => &["", "-a", "-n"],
        "rfkill" => &["", "list"],
        "pip" | "pip3" | "npm" | "gem" | "cargo" => &[
            "list", "show", "freeze", "search", "--version", "help", "ls", "view", "outdated",
            "tree",
        ],
        _ => return None,
    })
}

/// A tool judged by its first word: a listed read-only subcommand passes, anything else
/// changes the machine (`system`), and for language package managers runs code (`shell`).
pub(super) fn subcommand_tool(w: &mut Walker<'_>, inv: &Invocation) {
    let Some(read_only) = query_subcommands(&inv.name) else {
        return;
    };
    let first = inv
        .args
        .iter()
        .find(|a| !a.is_option() || read_only.contains(&a.text().as_str()));
    let first = match first {
        None if read_only.contains(&"") => return,
        None => "",
        Some(a) => match a.fixed() {
            Some(s) => s,
            None => {
                w.need_shell(format!(
                    "{} with a subcommand known only at run time",
                    inv.name
                ));
                return;
            }
        },
    };
    if read_only.contains(&first) {
        return;
    }
    if matches!(inv.name.as_str(), "pip" | "pip3" | "npm" | "gem" | "cargo") {
        w.need_shell(format!(
            "{} {first}, which may run a package's or the project's code",
            inv.name
        ));
    } else {
        system(w, inv, "changing the system");
    }
}

pub(super) fn ip(w: &mut Walker<'_>, inv: &Invocation) {
    const CHANGES: &[&str] = &[
        "add", "del", "delete", "set", "change", "replace", "flush", "down", "up", "exec",
        "append", "prepend",
    ];
    if inv
        .args
        .iter()
        .any(|a| a.fixed().is_some_and(|s| CHANGES.contains(&s)) || a.fixed().is_none())
    {
        system(w, inv, "changing the network configuration");
    }
}

pub(super) fn sysctl(w: &mut Walker<'_>, inv: &Invocation) {
    if inv.args.iter().any(|a| {
        a.text().contains('=')
            || matches!(
                a.fixed(),
                Some("-w" | "--write" | "-p" | "--load" | "--system")
            )
    }) {
        system(w, inv, "changing kernel settings");
    }
}
