//! The command tables: what each command the gate knows needs, by its arguments.
//!
//! - [`READ_ONLY`] commands print or compute and change nothing, whatever their arguments
//!   (their redirects are judged apart); [`CREATING`] ones make new things only.
//! - Commands with rules: the deleting ones (`rm`, `shred`, `find -delete`, `git clean`, …),
//!   the copying ones (`cp`, `mv`, `ln -f`, `install`, `rsync`: an existing destination is
//!   overwritten), the editing ones (`sed -i`, `truncate`, `dd of=`, `tee`, `sort -o`,
//!   `chmod` that takes permissions away, `chown`), `git` by subcommand, `tar`, `curl` and
//!   `wget` (uploads need `send`, output files are writes), process and session control
//!   (`kill`, `exit`: `close`), the machine's state (`shutdown`, `systemctl`, package
//!   managers, disks, users, `crontab`: `system`, with their read-only subcommands allowed),
//!   and the shell's own definitions (`alias`, `trap`, `source`, `eval`, variables that
//!   change what later commands run: `shell`).
//! - Wrappers, shells, interpreters and terminals are in `wrappers.rs`.
//! - Anything else found on the `PATH`, or a shell builtin not listed, needs `shell`.

use super::wrappers;
use super::{Arg, Cwd, Invocation, Walker};
use crate::runner::safety::grants::{GrantKind, Target};

/// Commands that change nothing, whatever their arguments.
pub const READ_ONLY: &[&str] = &[
    ":",
    "true",
    "false",
    "echo",
    "printf",
    "cat",
    "tac",
    "nl",
    "head",
    "tail",
    "ls",
    "dir",
    "vdir",
    "tree",
    "pwd",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "diff",
    "cmp",
    "comm",
    "cut",
    "paste",
    "join",
    "tr",
    "fold",
    "fmt",
    "column",
    "expand",
    "unexpand",
    "rev",
    "od",
    "hexdump",
    "strings",
    "file",
    "stat",
    "du",
    "df",
    "free",
    "uptime",
    "cal",
    "whoami",
    "id",
    "groups",
    "who",
    "w",
    "users",
    "uname",
    "which",
    "whereis",
    "type",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "seq",
    "yes",
    "sleep",
    "test",
    "[",
    "[[",
    "expr",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "sum",
    "base64",
    "base32",
    "printenv",
    "locale",
    "help",
    "clear",
    "tput",
    "jobs",
    "fg",
    "bg",
    "wait",
    "ps",
    "pgrep",
    "pidof",
    "lscpu",
    "lsblk",
    "lsusb",
    "lspci",
    "lsof",
    "nproc",
    "getconf",
    "ping",
    "host",
    "dig",
    "nslookup",
    "jq",
    "read",
    "shift",
    "unset",
    "umask",
    "ulimit",
    "times",
    "getopts",
    "return",
    "break",
    "continue",
    "history",
    "unalias",
    "dirs",
    "caller",
    "let",
    "mapfile",
    "readarray",
    "set",
    "shopt",
    "tty",
    "logname",
    "arch",
    "look",
    "numfmt",
    "tsort",
    "pr",
    "zcat",
    "zless",
    "zgrep",
    "bzcat",
    "xzcat",
    "zstdcat",
    "lsattr",
    "getfacl",
];

/// Interactive programs: they change nothing by being started, and what is typed into them
/// afterwards is still judged as a command line (so `!rm` in `less` or `:!rm` in `vim`, a
/// history expansion to bash, needs `shell`). What they save is the user's editing.
pub const INTERACTIVE: &[&str] = &[
    "less", "more", "most", "man", "info", "top", "htop", "vim", "vi", "nvim", "nano", "pico",
    "micro", "emacs", "ed",
];

/// Commands that only make new things (a directory, an empty file, a FIFO, a temporary file):
/// `touch` on an existing file changes only its time.
pub const CREATING: &[&str] = &["mkdir", "touch", "mktemp", "mkfifo"];

/// Builtins of bash, zsh and fish that are neither read-only nor given a rule: each needs
/// `shell` (they change what later commands run, or run code the gate never sees).
const SHELL_BUILTINS: &[&str] = &[
    "coproc",
    "disown",
    "suspend",
    "compopt",
    "complete",
    "compgen",
    "autoload",
    "zmodload",
    "bindkey",
    "zle",
    "zstyle",
    "setopt",
    "unsetopt",
    "emulate",
    "noglob",
    "nocorrect",
    "print",
    "whence",
    "where",
    "rehash",
    "functions",
    "vared",
    "sched",
    "zcompile",
    "zparseopts",
    "compdef",
    "abbr",
    "funced",
    "funcsave",
    "function",
    "begin",
    "end",
    "status",
    "string",
    "math",
    "argparse",
    "contains",
];

/// Variables whose value changes what later commands run or how they are found.
const DANGEROUS_VARIABLES: &[&str] = &[
    "PATH",
    "HOME",
    "CDPATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
    "PAGER",
    "MANPAGER",
    "SYSTEMD_PAGER",
    "GIT_PAGER",
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "LESSOPEN",
    "LESSCLOSE",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "NODE_OPTIONS",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "precmd_functions",
    "preexec_functions",
];

/// Whether a command changes nothing (or only creates).
pub(super) fn is_read_only(name: &str) -> bool {
    READ_ONLY.contains(&name) || CREATING.contains(&name) || INTERACTIVE.contains(&name)
}

/// Whether the gate has a rule or a table entry for a command.
pub(super) fn is_known(name: &str) -> bool {
    is_read_only(name) || rule_for(name).is_some() || SHELL_BUILTINS.contains(&name)
}

type Rule = fn(&mut Walker<'_>, &Invocation);

/// The rule for a command, if it has one.
fn rule_for(name: &str) -> Option<Rule> {
    if let Some(rule) = wrappers::rule_for(name) {
        return Some(rule);
    }
    let rule: Rule = match name {
        "rm" | "rmdir" | "unlink" | "shred" | "srm" | "wipe" | "trash" | "trash-put"
        | "gvfs-trash" => delete_operands,
        "truncate" => truncate,
        "cp" | "install" => |w, inv| copy(w, inv, false),
        "mv" => |w, inv| copy(w, inv, true),
        "ln" => link,
        "tee" => tee,
        "dd" => dd,
        "sed" => sed,
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => awk,
        "git" => git,
        "tar" => tar,
        "rsync" => rsync,
        "chmod" => chmod,
        "chown" | "chgrp" | "chattr" | "setfacl" => chown,
        "kill" | "pkill" | "killall" | "xkill" | "skill" => kill,
        "exit" | "logout" => |w, inv| {
            w.need(
                GrantKind::Close,
                Target::Unknown,
                format!(
                    "ending the shell session with `{}` (the terminal closes)",
                    inv.name
                ),
            )
        },
        "shutdown" | "reboot" | "poweroff" | "halt" => power,
        "init" | "telinit" => |w, inv| system(w, inv, "changing the run level"),
        "crontab" => crontab,
        "curl" => curl,
        "wget" => wget,
        "sort" | "shuf" | "iconv" => output_option,
        "uniq" | "xxd" => second_operand_output,
        "date" => date,
        "hostname" => hostname,
        "alias" => alias,
        "trap" => trap,
        "export" | "declare" | "typeset" | "local" | "readonly" => declare,
        "source" | "." => |w, inv| {
            let file = inv.args.first().map(Arg::text).unwrap_or_default();
            w.need_shell(format!("running the commands in the file {file}"))
        },
        "fc" => |w, inv| {
            if !has_option(&inv.args, &["-l"]) {
                w.need_shell("re-running a command from the history with fc");
            }
        },
        "r" => |w, _| w.need_shell("re-running the last command (zsh's r)"),
        "enable" => |w, _| w.need_shell("enabling a builtin, which may load code"),
        "hash" => |w, inv| {
            if has_option(&inv.args, &["-p"]) {
                w.need_shell("binding a command name to another program with hash -p");
            }
        },
        "bind" => |w, inv| {
            if has_option(&inv.args, &["-x"]) {
                w.need_shell("binding a key to a command with bind -x");
            }
        },
        "cd" | "pushd" | "chdir" => |w, inv| {
            let dir = inv.args.iter().find(|a| !a.is_option());
            match dir {
                Some(a) if a.fixed() == Some("-") => w.cwd = Cwd::Unknown,
                other => w.change_dir(other),
            }
        },
        "popd" => |w, _| w.cwd = Cwd::Unknown,
        "unzip" => unzip,
        "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz" | "unxz" | "lzma" | "unlzma" | "zstd"
        | "unzstd" | "lz4" | "compress" | "uncompress" => compress,
        "gio" => gio,
        "ip" => ip,
        "sysctl" => sysctl,
        n if is_system_tool(n) => |w, inv| {
            // `mount`, `swapon` and `losetup` alone list what is there.
            let listing =
                inv.args.is_empty() && matches!(inv.name.as_str(), "mount" | "swapon" | "losetup");
            if !listing {
                system(w, inv, "changing the system");
            }
        },
        n if query_subcommands(n).is_some() => subcommand_tool,
        _ => return None,
    };
    Some(rule)
}

/// Judges one command.
pub(super) fn judge(w: &mut Walker<'_>, inv: &Invocation) {
    if let Some(rule) = rule_for(&inv.name) {
        rule(w, inv);
        return;
    }
    if is_read_only(&inv.name) {
        return;
    }
    // A command that exists nowhere only prints "command not found" — unless it is on
    // another machine, where the gate cannot look.
    if w.remote || SHELL_BUILTINS.contains(&inv.name.as_str()) || w.host.on_path(&inv.name) {
        w.need_shell(format!(
            "running `{}`, a command the gate does not know",
            inv.name
        ));
    }
}

/// An assignment to a variable that changes what later commands run needs `shell`.
pub(super) fn judge_assignment(w: &mut Walker<'_>, name: &str) {
    if DANGEROUS_VARIABLES.contains(&name) {
        w.need_shell(format!(
            "setting {name}, which changes what later commands run"
        ));
    }
}

// ─── Options ────────────────────────────────────────────────────────────────

/// A command's arguments split into options (with their values) and operands.
pub(super) struct Opts {
    /// Each option as written (`-f`, `--force`) with its value, if it takes one.
    pub options: Vec<(String, Option<Arg>)>,
    /// The operands, in order.
    pub operands: Vec<Arg>,
}

impl Opts {
    /// Splits `args`: `--` ends the options; `--name=value`; `valued` lists the options that
    /// take the next word (or, for a short one, the rest of its cluster) as their value;
    /// `-abc` is `-a -b -c`. A word the gate cannot resolve is an operand.
    pub(super) fn parse(args: &[Arg], valued: &[&str]) -> Self {
        let mut options = Vec::new();
        let mut operands = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            let Some(text) = arg.fixed().filter(|_| arg.is_option()) else {
                operands.push(arg.clone());
                continue;
            };
            if text == "--" {
                operands.extend(args[i..].iter().cloned());
                break;
            }
            if let Some(long) = text.strip_prefix("--") {
                match long.split_once('=') {
                    Some((name, value)) => {
                        options.push((format!("--{name}"), Some(Arg::Fixed(value.to_string()))))
                    }
                    None if valued.contains(&text) => {
                        options.push((text.to_string(), args.get(i).cloned()));
                        i += 1;
                    }
                    None => options.push((text.to_string(), None)),
                }
                continue;
            }
            let cluster: Vec<char> = text[1..].chars().collect();
            for (k, c) in cluster.iter().enumerate() {
                let name = format!("-{c}");
                if valued.contains(&name.as_str()) {
                    let rest: String = cluster[k + 1..].iter().collect();
                    let value = if rest.is_empty() {
                        let v = args.get(i).cloned();
                        i += 1;
                        v
                    } else {
                        Some(Arg::Fixed(rest))
                    };
                    options.push((name, value));
                    break;
                }
                options.push((name, None));
            }
        }
        Self { options, operands }
    }

    /// Parses options only up to the first operand (a wrapper's command): returns them and
    /// the arguments from that operand on.
    pub(super) fn leading<'a>(args: &'a [Arg], valued: &[&str]) -> (Self, &'a [Arg]) {
        let mut end = 0;
        while end < args.len() {
            let arg = &args[end];
            let Some(text) = arg.fixed().filter(|_| arg.is_option()) else {
                break;
            };
            end += 1;
            if text == "--" {
                let opts = Self::parse(&args[..end - 1], valued);
                return (opts, &args[end..]);
            }
            let takes_next = if text.starts_with("--") {
                !text.contains('=') && valued.contains(&text)
            } else {
                // The last valued letter of a cluster with nothing after it takes the next word.
                let cluster: Vec<char> = text[1..].chars().collect();
                cluster.iter().enumerate().any(|(k, c)| {
                    valued.contains(&format!("-{c}").as_str()) && k + 1 == cluster.len()
                }) && !cluster[..cluster.len().saturating_sub(1)]
                    .iter()
                    .any(|c| valued.contains(&format!("-{c}").as_str()))
            };
            if takes_next {
                end += 1;
            }
        }
        let end = end.min(args.len());
        (Self::parse(&args[..end], valued), &args[end..])
    }

    /// Whether any of `names` was given.
    pub(super) fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(n, _)| names.contains(&n.as_str()))
    }

    /// The values of the options in `names`, in order.
    pub(super) fn values(&self, names: &[&str]) -> Vec<Arg> {
        self.options
            .iter()
            .filter(|(n, _)| names.contains(&n.as_str()))
            .filter_map(|(_, v)| v.clone())
            .collect()
    }
}

/// Whether a fixed argument equals one of `names` (for flags without values).
fn has_option(args: &[Arg], names: &[&str]) -> bool {
    args.iter()
        .any(|a| a.fixed().is_some_and(|s| names.contains(&s)))
}

// ─── Deleting and writing ───────────────────────────────────────────────────

fn delete_operands(w: &mut Walker<'_>, inv: &Invocation) {
    for arg in Opts::parse(&inv.args, &["-n", "-s", "--iterations", "--size"]).operands {
        w.delete(&arg, &inv.name);
    }
}

fn truncate(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &["-s", "-r", "--size", "--reference"]);
    for arg in &opts.operands {
        w.write_target(arg, "truncate");
    }
}

/// `cp`, `install`, `mv`: an existing destination is overwritten (unless `-n` or a backup
/// option keeps it); `mv` onto a device takes its sources away.
fn copy(w: &mut Walker<'_>, inv: &Invocation, moving: bool) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-t",
            "-S",
            "-m",
            "-o",
            "-g",
            "--target-directory",
            "--suffix",
            "--mode",
            "--owner",
            "--group",
        ],
    );
    if inv.name == "install" && opts.has(&["-d", "--directory"]) {
        return;
    }
    let keeps = opts.has(&["-n", "--no-clobber", "-b", "--backup"])
        || opts
            .options
            .iter()
            .any(|(n, v)| n == "--update" && v.as_ref().and_then(Arg::fixed) == Some("none"));
    let (sources, dest, dest_is_dir) = match opts.values(&["-t", "--target-directory"]).pop() {
        Some(dir) => (opts.operands.clone(), dir, Some(true)),
        None => {
            let Some((dest, sources)) = opts.operands.split_last() else {
                return;
            };
            let is_dir = if opts.has(&["-T", "--no-target-directory"]) {
                Some(false)
            } else {
                dest.fixed().and_then(|d| w.is_dir(d))
            };
            (sources.to_vec(), dest.clone(), is_dir)
        }
    };
    if sources.is_empty() {
        return;
    }
    if moving {
        if let Some(d) = dest.fixed() {
            if d.starts_with("/dev/") {
                for s in &sources {
                    w.delete(s, "mv onto a device");
                }
                return;
            }
        }
    }
    if keeps {
        return;
    }
    let by = inv.name.as_str();
    // The destination is a directory: each source lands inside it under its own name.
    let into_dir = |w: &mut Walker<'_>, dir: &str| {
        for s in &sources {
            match s
                .fixed()
                .and_then(|s| s.trim_end_matches('/').rsplit('/').next())
            {
                Some(name) if !name.is_empty() => {
                    let inside = format!("{}/{name}", dir.trim_end_matches('/'));
                    w.write_target(&Arg::Fixed(inside.clone()), by);
                    // A directory copied onto an existing one merges into it.
                    if w.is_dir(&inside) != Some(false) {
                        w.write_target(&Arg::Glob(format!("{inside}/*")), by);
                    }
                }
                _ => w.write_target(&Arg::Dynamic(s.text()), by),
            }
        }
    };
    match (dest.fixed().map(str::to_string), dest_is_dir) {
        (Some(d), Some(true)) => into_dir(w, &d),
        (Some(_), Some(false)) => w.write_target(&dest, by),
        (Some(d), None) => {
            w.write_target(&dest, by);
            into_dir(w, &d);
        }
        (None, _) => w.write_target(&dest, by),
    }
}

/// A `Glob` write target means "files inside": judged as modifying them.
fn link(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &["-t", "-S", "--target-directory", "--suffix"]);
    if !opts.has(&["-f", "--force"]) || opts.has(&["-b", "--backup"]) {
        return;
    }
    let dest = match opts.values(&["-t", "--target-directory"]).pop() {
        Some(dir) => {
            for s in &opts.operands {
                let name = s
                    .fixed()
                    .and_then(|s| s.rsplit('/').next())
                    .unwrap_or_default();
                let target = match dir.fixed() {
                    Some(d) if !name.is_empty() => Arg::Fixed(format!("{d}/{name}")),
                    _ => Arg::Dynamic(s.text()),
                };
                w.write_target(&target, "ln -f");
            }
            return;
        }
        None => opts.operands.last().cloned(),
    };
    if let Some(dest) = dest {
        if opts.operands.len() >= 2 {
            w.write_target(&dest, "ln -f");
        }
    }
}

fn tee(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &[]);
    if opts.has(&["-a", "--append"]) {
        return;
    }
    for arg in &opts.operands {
        w.write_target(arg, "tee");
    }
}

fn dd(w: &mut Walker<'_>, inv: &Invocation) {
    for arg in &inv.args {
        match arg {
            Arg::Fixed(s) => {
                if let Some(path) = s.strip_prefix("of=") {
                    w.write_target(&Arg::Fixed(path.to_string()), "dd");
                }
            }
            other if other.text().contains("of=") => {
                w.write_target(&Arg::Dynamic(other.text()), "dd")
            }
            _ => {}
        }
    }
}

/// `sort -o`, `shuf -o`, `iconv -o`: the output file is written; a compressor program runs.
fn output_option(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-o",
            "--output",
            "-k",
            "-t",
            "-S",
            "-T",
            "-n",
            "-i",
            "-f",
            "--key",
            "--field-separator",
            "--buffer-size",
            "--temporary-directory",
            "--head-count",
            "--input-range",
            "--from-code",
            "--to-code",
            "--random-source",
            "--files0-from",
            "--compress-program",
            "--parallel",
            "--batch-size",
        ],
    );
    for out in opts.values(&["-o", "--output"]) {
        w.write_target(&out, &inv.name);
    }
    if opts.has(&["--compress-program"]) {
        w.need_shell(format!("{} running a compressor program", inv.name));
    }
}

/// `uniq IN OUT`, `xxd IN OUT`: the second operand is written.
fn second_operand_output(w: &mut Walker<'_>, inv: &Invocation) {
    let valued: &[&str] = if inv.name == "uniq" {
        &[
            "-f",
            "-s",
            "-w",
            "--skip-fields",
            "--skip-chars",
            "--check-chars",
        ]
    } else {
        &["-c", "-g", "-l", "-s", "-o", "-n", "-cols", "-len", "-seek"]
    };
    let opts = Opts::parse(&inv.args, valued);
    if let Some(out) = opts.operands.get(1) {
        w.write_target(out, &inv.name);
    }
}

// ─── sed and awk ────────────────────────────────────────────────────────────

fn sed(w: &mut Walker<'_>, inv: &Invocation) {
    let mut scripts: Vec<Arg> = Vec::new();
    let mut files: Vec<Arg> = Vec::new();
    let mut in_place: Option<String> = None;
    let mut sandbox = false;
    let mut i = 0;
    let args = &inv.args;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let Some(s) = arg.fixed().filter(|_| arg.is_option()) else {
            files.push(arg.clone());
            continue;
        };
        match s {
            "--" => {
                files.extend(args[i..].iter().cloned());
                break;
            }
            "-e" | "--expression" => {
                scripts.extend(args.get(i).cloned());
                i += 1;
            }
            "-f" | "--file" => {
                w.need_shell("sed reading its script from a file");
                i += 1;
            }
            "-l" | "--line-length" => i += 1,
            "--sandbox" => sandbox = true,
            _ if s.starts_with("--expression=") => {
                scripts.push(Arg::Fixed(s["--expression=".len()..].to_string()))
            }
            _ if s.starts_with("--file=") => w.need_shell("sed reading its script from a file"),
            _ if s.starts_with("--in-place") => {
                in_place = Some(
                    s.split_once('=')
                        .map(|(_, v)| v.to_string())
                        .unwrap_or_default(),
                )
            }
            _ if !s.starts_with("--") => {
                // A short cluster: `-i` takes the rest as a backup suffix; `-e`/`-f` the next
                // word unless the rest of the cluster is it.
                let cluster: Vec<char> = s[1..].chars().collect();
                for (k, c) in cluster.iter().enumerate() {
                    let rest: String = cluster[k + 1..].iter().collect();
                    match c {
                        'i' => {
                            in_place = Some(rest);
                            break;
                        }
                        'e' => {
                            if rest.is_empty() {
                                scripts.extend(args.get(i).cloned());
                                i += 1;
                            } else {
                                scripts.push(Arg::Fixed(rest));
                            }
                            break;
                        }
                        'f' => {
                            w.need_shell("sed reading its script from a file");
                            if rest.is_empty() {
                                i += 1;
                            }
                            break;
                        }
                        'l' => {
                            if rest.is_empty() {
                                i += 1;
                            }
                            break;
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if scripts.is_empty() && !files.is_empty() {
        scripts.push(files.remove(0));
    }
    for script in &scripts {
        match script.fixed().map(sed_effects) {
            _ if sandbox => {}
            Some(Some(effects)) => {
                if effects.executes {
                    w.need_shell("sed running a command (its e command or s///e)");
                }
                for file in effects.writes {
                    w.write_target(&Arg::Fixed(file), "sed's w command");
                }
            }
            Some(None) => w.need_shell("a sed script the gate cannot read"),
            None => w.need_shell("a sed script known only when the line runs"),
        }
    }
    // `-i.bak` keeps the old contents in a backup; a bare `-i` replaces them.
    if in_place.as_deref() == Some("") {
        for file in &files {
            w.modify(file, "editing {} in place with sed -i");
        }
    }
}

/// What a sed script does besides printing.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct SedEffects {
    /// Files its `w`/`W` commands and `s///w` flags write.
    pub writes: Vec<String>,
    /// Whether it runs commands (`e`, `s///e`).
    pub executes: bool,
}

/// Reads a sed script command by command; `None` when it holds something the reader does
/// not know (judged as unknown).
pub(super) fn sed_effects(script: &str) -> Option<SedEffects> {
    let s: Vec<char> = script.chars().collect();
    let mut fx = SedEffects::default();
    let mut i = 0;
    let to_eol = |i: &mut usize| -> String {
        let start = *i;
        while *i < s.len() && s[*i] != '\n' {
            *i += 1;
        }
        s[start..*i].iter().collect::<String>().trim().to_string()
    };
    let delimited = |i: &mut usize, delim: char| -> Option<()> {
        while *i < s.len() {
            match s[*i] {
                '\\' => *i += 2,
                c if c == delim => {
                    *i += 1;
                    return Some(());
                }
                '\n' if delim != '\n' => return None,
                _ => *i += 1,
            }
        }
        None
    };
    while i < s.len() {
        match s[i] {
            ' ' | '\t' | '\n' | ';' | '}' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        // Addresses: numbers, `$`, `/re/`, `\cREc`, with `,`, `~N`, `+N` and `!`.
        loop {
            match s.get(i) {
                Some(c) if c.is_ascii_digit() || matches!(c, '$' | ',' | '~' | '+' | '!' | ' ') => {
                    i += 1
                }
                Some('/') => {
                    i += 1;
                    delimited(&mut i, '/')?;
                    while matches!(s.get(i), Some('I' | 'M')) {
                        i += 1;
                    }
                }
                Some('\\') => {
                    let d = *s.get(i + 1)?;
                    i += 2;
                    delimited(&mut i, d)?;
                }
                _ => break,
            }
        }
        let Some(&cmd) = s.get(i) else { break };
        i += 1;
        match cmd {
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => {}
            'l' | 'L' | 'q' | 'Q' => {
                while s.get(i).is_some_and(char::is_ascii_digit) {
                    i += 1;
                }
            }
            '#' | 'a' | 'i' | 'c' | 'r' | 'R' | 'v' => {
                to_eol(&mut i);
            }
            ':' | 'b' | 't' | 'T' => {
                while i < s.len() && !matches!(s[i], ';' | '\n' | '}') {
                    i += 1;
                }
            }
            'w' | 'W' => fx.writes.push(to_eol(&mut i)),
            'e' => {
                fx.executes = true;
                to_eol(&mut i);
            }
            's' | 'y' => {
                let d = *s.get(i)?;
                if d == '\\' || d == '\n' {
                    return None;
                }
                i += 1;
                delimited(&mut i, d)?;
                delimited(&mut i, d)?;
                if cmd == 's' {
                    while let Some(&f) = s.get(i) {
                        match f {
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' => i += 1,
                            c if c.is_ascii_digit() => i += 1,
                            'e' => {
                                fx.executes = true;
                                i += 1;
                            }
                            'w' => {
                                i += 1;
                                fx.writes.push(to_eol(&mut i));
                            }
                            _ => break,
                        }
                    }
                }
            }
            _ => return None,
        }
    }
    Some(fx)
}

fn awk(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-F",
            "-v",
            "-f",
            "-e",
            "-i",
            "-l",
            "-E",
            "--field-separator",
            "--assign",
            "--file",
            "--source",
            "--include",
            "--load",
            "--exec",
        ],
    );
    if opts.has(&["-f", "--file", "-l", "--load", "-E", "--exec"]) {
        w.need_shell(format!("{} running a program from a file", inv.name));
    }
    let mut in_place = false;
    for inc in opts.values(&["-i", "--include"]) {
        if inc.fixed() == Some("inplace") {
            in_place = true;
        } else {
            w.need_shell(format!("{} loading an include file", inv.name));
        }
    }
    let mut operands = opts.operands.clone();
    let mut programs = opts.values(&["-e", "--source"]);
    if programs.is_empty() && !opts.has(&["-f", "--file"]) && !operands.is_empty() {
        programs.push(operands.remove(0));
    }
    for program in &programs {
        match program.fixed() {
            Some(text) => awk_program(w, text, &inv.name),
            None => w.need_shell("an awk program known only when the line runs"),
        }
    }
    if in_place {
        for file in operands.iter().filter(|a| !a.text().contains('=')) {
            w.modify(file, "editing {} in place with awk -i inplace");
        }
    }
}

/// An awk program runs commands through `system()` and pipes, and writes files with
/// `print > "file"`.
fn awk_program(w: &mut Walker<'_>, program: &str, name: &str) {
    let code = strip_awk_strings_and_regexes(program);
    if code.contains("system") || code.replace("||", "").contains('|') {
        w.need_shell(format!("{name} running a command (system() or a pipe)"));
    }
    // Output redirections inside print/printf statements.
    let bytes: Vec<char> = program.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let rest: String = bytes[i..].iter().take(6).collect();
        let at_word = i == 0 || !(bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_');
        if at_word && rest.starts_with("print") {
            // Scan the statement for a '>' at parenthesis depth 0, outside strings.
            let mut j = i + 5;
            let mut depth = 0i32;
            let mut in_string = false;
            while j < bytes.len() {
                let c = bytes[j];
                if in_string {
                    if c == '\\' {
                        j += 1;
                    } else if c == '"' {
                        in_string = false;
                    }
                } else {
                    match c {
                        '"' => in_string = true,
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        ';' | '\n' | '}' if depth <= 0 => break,
                        '>' if depth <= 0 => {
                            if bytes.get(j + 1) != Some(&'>') && bytes.get(j - 1) != Some(&'>') {
                                let target: String = bytes[j + 1..].iter().collect();
                                let target = target.trim_start();
                                match target.strip_prefix('"').and_then(|t| t.split_once('"')) {
                                    Some((file, _)) => {
                                        w.write_target(&Arg::Fixed(file.to_string()), name)
                                    }
                                    None => w.write_target(
                                        &Arg::Dynamic(target.chars().take(40).collect()),
                                        name,
                                    ),
                                }
                            }
                            break;
                        }
                        _ => {}
                    }
                }
                j += 1;
            }
            i = j;
        }
        i += 1;
    }
}

/// An awk program with its string literals and regular expressions blanked, so a `|` or the
/// word `system` inside them does not count.
fn strip_awk_strings_and_regexes(program: &str) -> String {
    let chars: Vec<char> = program.chars().collect();
    let mut out = String::with_capacity(program.len());
    let mut i = 0;
    let mut last_significant = ' ';
    while i < chars.len() {
        let c = chars[i];
        let regex_start = c == '/'
            && matches!(
                last_significant,
                ' ' | '(' | ',' | '!' | '~' | '{' | ';' | '&' | '|' | '\n'
            );
        if c == '"' || regex_start {
            let close = c;
            i += 1;
            while i < chars.len() && chars[i] != close {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            out.push(' ');
            i += 1;
            last_significant = 'x';
            continue;
        }
        out.push(c);
        if !c.is_whitespace() || c == '\n' {
            last_significant = c;
        }
        i += 1;
    }
    out
}

// ─── git ────────────────────────────────────────────────────────────────────

/// git subcommands that change nothing but the index, refs of the local repository, or
/// create things; their destructive forms are checked by flags below.
const GIT_PLAIN: &[&str] = &[
    "status",
    "log",
    "show",
    "diff",
    "blame",
    "annotate",
    "shortlog",
    "describe",
    "rev-parse",
    "rev-list",
    "ls-files",
    "ls-tree",
    "ls-remote",
    "cat-file",
    "grep",
    "help",
    "version",
    "whatchanged",
    "show-branch",
    "count-objects",
    "fsck",
    "check-ignore",
    "name-rev",
    "merge-base",
    "for-each-ref",
    "fetch",
    "init",
    "clone",
    "add",
    "commit",
    "mv",
    "merge",
    "rebase",
    "pull",
    "cherry-pick",
    "revert",
    "am",
    "apply",
    "format-patch",
    "request-pull",
    "bisect",
    "show-ref",
    "verify-commit",
    "verify-tag",
    "range-diff",
    "difftool",
    "citool",
    "gui",
    "gitk",
    "instaweb",
    "var",
    "check-attr",
    "check-ref-format",
    "stage",
    "notes",
    "switch",
    "checkout",
    "restore",
    "reset",
    "clean",
    "rm",
    "push",
    "branch",
    "tag",
    "stash",
    "remote",
    "config",
    "gc",
    "prune",
    "reflog",
    "worktree",
    "submodule",
    "update-ref",
    "filter-branch",
    "archive",
    "bundle",
    "send-email",
    "replace",
    "sparse-checkout",
];

fn git(w: &mut Walker<'_>, inv: &Invocation) {
    let args = &inv.args;
    let mut i = 0;
    let saved = w.cwd.clone();
    // Global options before the subcommand.
    while let Some(a) = args.get(i) {
        let Some(s) = a.fixed().filter(|_| a.is_option()) else {
            break;
        };
        i += 1;
        match s {
            "-C" => {
                let dir = args.get(i).cloned();
                i += 1;
                w.change_dir(dir.as_ref());
            }
            "-c" => {
                w.need_shell("git run with a configuration (-c) that may name a command");
                i += 1;
            }
            "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix" | "--config-env" => {
                i += 1
            }
            _ if s.starts_with("--exec-path=") || s.starts_with("--config-env") => {
                w.need_shell("git run with another program path");
            }
            _ => {}
        }
    }
    let Some(sub) = args.get(i) else {
        w.cwd = saved;
        return;
    };
    let rest = &args[i + 1..];
    let Some(sub) = sub.fixed() else {
        w.need_shell("a git subcommand known only when the line runs");
        w.cwd = saved;
        return;
    };
    if !GIT_PLAIN.contains(&sub) {
        // Unknown subcommands include aliases, which may run anything (`!rm -rf ~`).
        w.need_shell(format!(
            "git {sub}, which may be an alias the gate cannot see"
        ));
        w.cwd = saved;
        return;
    }
    let opts = Opts::parse(
        rest,
        &[
            "-m",
            "-F",
            "-C",
            "-c",
            "-b",
            "-B",
            "-o",
            "-u",
            "-t",
            "--message",
            "--file",
            "--upload-pack",
            "--receive-pack",
            "--exec",
            "--template",
            "--reference",
            "--depth",
            "--branch",
            "--origin",
            "--output",
            "--format",
            "--prefix",
        ],
    );
    let flag = |names: &[&str]| opts.has(names);
    let first = opts.operands.first().and_then(Arg::fixed).unwrap_or("");
    let whole_repo = Arg::Glob("./*".to_string());
    match sub {
        _ if opts.has(&["--upload-pack", "--receive-pack", "--exec", "-u"])
            && matches!(
                sub,
                "clone" | "fetch" | "pull" | "push" | "ls-remote" | "archive"
            ) =>
        {
            w.need_shell(format!(
                "git {sub} running another program on the remote side"
            ))
        }
        "reset" if flag(&["--hard", "--merge", "--keep"]) => w.modify(
            &whole_repo,
            "discarding uncommitted changes to {} with git reset --hard",
        ),
        "clean" if !flag(&["-n", "--dry-run"]) => w.delete(&whole_repo, "git clean"),
        "rm" if !flag(&["--cached"]) => {
            for p in &opts.operands {
                w.delete(p, "git rm");
            }
        }
        "checkout"
            if flag(&["-f", "--force", "-p", "--patch", "--ours", "--theirs", "-B"])
                || rest.iter().any(|a| a.fixed() == Some("--"))
                || opts.operands.iter().any(|a| a.fixed() == Some(".")) =>
        {
            w.modify(&whole_repo, "discarding changes to {} with git checkout")
        }
        "checkout" => {
            // `git checkout NAME`: a branch switch, or restoring a file of that name.
            for p in &opts.operands {
                if let Some(s) = p.fixed() {
                    if w.resolve(s).is_none_or(|paths| {
                        paths
                            .iter()
                            .any(|p| w.host.file_kind(p) != super::FileKind::Missing)
                    }) {
                        w.modify(p, "restoring {} with git checkout (discarding its changes)");
                    }
                }
            }
        }
        "switch" if flag(&["-f", "--force", "--discard-changes", "-C", "--force-create"]) => {
            w.modify(&whole_repo, "discarding changes to {} with git switch")
        }
        "restore" if !(flag(&["-S", "--staged"]) && !flag(&["-W", "--worktree"])) => {
            for p in &opts.operands {
                w.modify(p, "discarding changes to {} with git restore");
            }
        }
        "push" => {
            let forced = flag(&[
                "-f",
                "--force",
                "--force-with-lease",
                "--force-if-includes",
                "--mirror",
                "-d",
                "--delete",
                "--prune",
            ]) || opts
                .operands
                .iter()
                .skip(1)
                .any(|r| r.text().starts_with('+') || r.text().starts_with(':'));
            if forced {
                w.need(
                    GrantKind::Overwrite,
                    Target::Unknown,
                    "rewriting or deleting the remote's history with a forced git push",
                );
            }
            w.need(
                GrantKind::Send,
                Target::Unknown,
                "publishing commits with git push",
            );
        }
        "send-email" => w.need(
            GrantKind::Send,
            Target::Unknown,
            "sending mail with git send-email",
        ),
        "branch" | "tag" if flag(&["-d", "-D", "--delete"]) => w.need(
            GrantKind::Delete,
            Target::Unknown,
            format!("deleting a {sub} with git {sub} -d"),
        ),
        "branch" | "tag" if flag(&["-f", "--force", "-M", "-C"]) => w.need(
            GrantKind::Overwrite,
            Target::Unknown,
            format!("replacing a {sub} with git {sub} --force"),
        ),
        "stash" if matches!(first, "drop" | "clear") => w.need(
            GrantKind::Delete,
            Target::Unknown,
            format!("deleting stashed changes with git stash {first}"),
        ),
        "reflog" if matches!(first, "expire" | "delete") => w.need(
            GrantKind::Delete,
            Target::Unknown,
            "deleting reflog entries (the way back to lost commits)",
        ),
        "gc" if rest.iter().any(|a| a.text().starts_with("--prune")) => w.need(
            GrantKind::Delete,
            Target::Unknown,
            "deleting unreachable commits with git gc --prune",
        ),
        "prune" => w.need(
            GrantKind::Delete,
            Target::Unknown,
            "deleting unreachable objects with git prune",
        ),
        "worktree" if matches!(first, "remove" | "prune") => w.need(
            GrantKind::Delete,
            Target::Unknown,
            format!("deleting a worktree with git worktree {first}"),
        ),
        "submodule" if first == "deinit" => w.need(
            GrantKind::Delete,
            Target::Unknown,
            "removing a submodule's files with git submodule deinit",
        ),
        "remote" if matches!(first, "remove" | "rm" | "prune" | "set-url") => w.need(
            GrantKind::Overwrite,
            Target::Unknown,
            format!("changing remotes with git remote {first}"),
        ),
        "notes" if matches!(first, "remove" | "prune") => w.need(
            GrantKind::Delete,
            Target::Unknown,
            "deleting notes with git notes",
        ),
        "update-ref" => w.need(
            GrantKind::Overwrite,
            Target::Unknown,
            "moving or deleting a ref with git update-ref",
        ),
        "filter-branch" | "replace" => w.need(
            GrantKind::Overwrite,
            Target::Unknown,
            format!("rewriting history with git {sub}"),
        ),
        "config" => git_config(w, &opts),
        "archive" | "bundle" => {
            for out in opts.values(&["-o", "--output"]) {
                w.write_target(&out, "git archive");
            }
            if sub == "bundle" && first == "create" {
                if let Some(out) = opts.operands.get(1) {
                    w.write_target(out, "git bundle");
                }
            }
        }
        _ => {}
    }
    w.cwd = saved;
}

/// `git config KEY VALUE` may name a command (an alias with `!`, a pager, an editor, a hook
/// path); reading and a few harmless keys need nothing.
fn git_config(w: &mut Walker<'_>, opts: &Opts) {
    if opts.has(&[
        "--get",
        "--get-all",
        "--get-regexp",
        "-l",
        "--list",
        "--show-origin",
        "--show-scope",
        "-e",
        "--edit",
        "--get-urlmatch",
        "--name-only",
    ]) || opts.operands.len() < 2
    {
        if opts.has(&["-e", "--edit"]) {
            w.need_shell("editing git's configuration, which may name commands");
        }
        return;
    }
    let key = opts
        .operands
        .first()
        .and_then(Arg::fixed)
        .unwrap_or_default()
        .to_lowercase();
    let harmless = [
        "user.",
        "color.",
        "init.defaultbranch",
        "pull.rebase",
        "push.default",
    ]
    .iter()
    .any(|p| key.starts_with(p));
    if !harmless {
        w.need_shell(format!("setting git's {key}, which may name a command"));
    }
}

// ─── Archives and copies ────────────────────────────────────────────────────

fn tar(w: &mut Walker<'_>, inv: &Invocation) {
    let mut args = inv.args.clone();
    // Old style: `tar xzf a.tgz` is `tar -x -z -f a.tgz`.
    if let Some(first) = args.first().and_then(Arg::fixed) {
        if !first.starts_with('-') && first.chars().all(|c| c.is_ascii_alphabetic()) {
            let letters: Vec<char> = first.chars().collect();
            let mut rebuilt: Vec<Arg> = Vec::new();
            let mut values = args[1..].iter();
            for c in letters {
                rebuilt.push(Arg::Fixed(format!("-{c}")));
                if matches!(
                    c,
                    'f' | 'C' | 'b' | 'T' | 'X' | 'g' | 'N' | 'H' | 'V' | 'I' | 'F' | 'L'
                ) {
                    if let Some(v) = values.next() {
                        rebuilt.push(v.clone());
                    }
                }
            }
            rebuilt.extend(values.cloned());
            args = rebuilt;
        }
    }
    let opts = Opts::parse(
        &args,
        &[
            "-f",
            "-C",
            "-b",
            "-T",
            "-X",
            "-g",
            "-N",
            "-H",
            "-V",
            "-I",
            "-F",
            "-L",
            "--file",
            "--directory",
            "--files-from",
            "--exclude-from",
            "--listed-incremental",
            "--use-compress-program",
            "--to-command",
            "--info-script",
            "--new-volume-script",
            "--rsh-command",
            "--format",
            "--label",
            "--blocking-factor",
            "--checkpoint-action",
        ],
    );
    let runs = opts.has(&[
        "-I",
        "-F",
        "--use-compress-program",
        "--to-command",
        "--info-script",
        "--new-volume-script",
        "--rsh-command",
    ]) || opts
        .values(&["--checkpoint-action"])
        .iter()
        .any(|v| v.text().contains("exec"));
    if runs {
        w.need_shell("tar running another program");
    }
    let archive = opts.values(&["-f", "--file"]).pop();
    if opts.has(&["-c", "--create"]) {
        if let Some(a) = archive.as_ref().filter(|a| a.fixed() != Some("-")) {
            w.write_target(a, "tar");
        }
    }
    if opts.has(&["-x", "--extract", "--get"])
        && !opts.has(&[
            "-k",
            "--keep-old-files",
            "--skip-old-files",
            "-O",
            "--to-stdout",
        ])
    {
        let dir = opts
            .values(&["-C", "--directory"])
            .pop()
            .and_then(|d| d.fixed().map(str::to_string))
            .unwrap_or_else(|| ".".to_string());
        w.modify(
            &Arg::Glob(format!("{dir}/*")),
            "extracting over {} with tar",
        );
    }
    if opts.has(&["--delete"]) {
        if let Some(a) = &archive {
            w.modify(a, "deleting members of the archive {}");
        }
    }
    if opts.has(&["--remove-files"]) {
        for f in &opts.operands {
            w.delete(f, "tar --remove-files");
        }
    }
}

fn rsync(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-e",
            "-f",
            "-T",
            "-B",
            "-M",
            "--rsh",
            "--rsync-path",
            "--exclude",
            "--include",
            "--exclude-from",
            "--include-from",
            "--files-from",
            "--filter",
            "--backup-dir",
            "--suffix",
            "--partial-dir",
            "--temp-dir",
            "--compare-dest",
            "--copy-dest",
            "--link-dest",
            "--log-file",
            "--password-file",
            "--chmod",
            "--chown",
        ],
    );
    if opts.has(&["-e", "--rsh", "--rsync-path"]) {
        w.need_shell("rsync running another program");
    }
    let Some((dest, sources)) = opts.operands.split_last() else {
        return;
    };
    if sources.is_empty() {
        return;
    }
    let remote = |a: &Arg| {
        let t = a.text();
        t.starts_with("rsync://") || t.split('/').next().is_some_and(|head| head.contains(':'))
    };
    if remote(dest) {
        w.need(
            GrantKind::Send,
            Target::Unknown,
            format!("copying files to {} with rsync", dest.text()),
        );
        return;
    }
    let inside = match dest.fixed() {
        Some(d) => Arg::Glob(format!("{}/*", d.trim_end_matches('/'))),
        None => Arg::Dynamic(dest.text()),
    };
    if opts
        .options
        .iter()
        .any(|(n, _)| n.starts_with("--del") || n == "--remove-source-files")
    {
        w.delete(&inside, "rsync --delete");
    }
    if !opts.has(&["-b", "--backup", "--ignore-existing"]) {
        w.write_target(dest, "rsync");
        if w.is_dir(dest.fixed().unwrap_or_default()) != Some(false) {
            w.write_target(&inside, "rsync");
        }
    }
}

fn unzip(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &["-d", "-x", "-P"]);
    if opts.has(&["-l", "-t", "-v", "-Z", "-p", "-n", "-z"]) {
        return;
    }
    let dir = opts
        .values(&["-d"])
        .pop()
        .and_then(|d| d.fixed().map(str::to_string))
        .unwrap_or_else(|| ".".to_string());
    // Without -o, unzip asks before each overwrite, and the answer is one more typed line.
    w.modify(
        &Arg::Glob(format!("{dir}/*")),
        "extracting over {} with unzip",
    );
}

fn compress(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &["-S", "--suffix", "-b", "-T", "--threads"]);
    if opts.has(&[
        "-c",
        "--stdout",
        "--to-stdout",
        "-l",
        "--list",
        "-t",
        "--test",
        "-k",
        "--keep",
        "-h",
        "--help",
        "-V",
        "--version",
    ]) && !opts.has(&["-f", "--force"])
    {
        return;
    }
    for f in &opts.operands {
        w.modify(f, &format!("replacing {{}} with its {} form", inv.name));
    }
}

fn gio(w: &mut Walker<'_>, inv: &Invocation) {
    let Some(sub) = inv.args.first().and_then(Arg::fixed) else {
        return;
    };
    match sub {
        "info" | "list" | "cat" | "tree" | "mime" | "open" | "monitor" | "version" | "help"
        | "mkdir" => {}
        "remove" | "trash" => {
            for a in Opts::parse(&inv.args[1..], &[]).operands {
                w.delete(&a, "gio");
            }
        }
        other => w.need_shell(format!("gio {other}, which the gate does not judge")),
    }
}

// ─── Permissions and processes ──────────────────────────────────────────────

fn chmod(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &[]);
    let reference = opts.options.iter().any(|(n, _)| n == "--reference");
    let recursive = opts.has(&["-R", "--recursive"]);
    // A numeric mode such as `-755`? chmod reads `-w` as a mode, which the option splitter
    // took for flags: symbolic modes starting with '-' take permissions away.
    let dash_mode = opts
        .options
        .iter()
        .any(|(n, _)| matches!(n.as_str(), "-r" | "-w" | "-x" | "-X" | "-s" | "-t"));
    let mut operands = opts.operands.clone();
    let mode = if reference || dash_mode {
        None
    } else if operands.is_empty() {
        return;
    } else {
        Some(operands.remove(0))
    };
    let only_adds = mode
        .as_ref()
        .and_then(Arg::fixed)
        .is_some_and(mode_only_adds);
    if recursive || !only_adds {
        for f in &operands {
            w.modify(f, "changing the permissions of {}");
        }
    }
}

/// Whether a chmod mode only adds permissions (`+x`, `u+rw`, `755`, `644`): the owner keeps
/// reading and writing, nothing is taken away from anyone by a symbolic mode.
fn mode_only_adds(mode: &str) -> bool {
    if mode.chars().all(|c| c.is_digit(8)) && !mode.is_empty() {
        let digits: Vec<u32> = mode.chars().filter_map(|c| c.to_digit(8)).collect();
        let owner = digits.len().checked_sub(3).and_then(|i| digits.get(i));
        return owner.is_some_and(|d| d & 0o6 == 0o6);
    }
    mode.split(',').all(|clause| {
        let ops: String = clause.trim_start_matches(['u', 'g', 'o', 'a']).to_string();
        !ops.is_empty() && ops.starts_with('+') && !ops.contains(['-', '='])
    })
}

fn chown(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &[]);
    let reference = opts.options.iter().any(|(n, _)| n == "--reference");
    let files = if reference || inv.name == "setfacl" {
        &opts.operands[..]
    } else {
        opts.operands.get(1..).unwrap_or_default()
    };
    for f in files {
        w.modify(
            f,
            &format!("changing the owner or attributes of {{}} with {}", inv.name),
        );
    }
}

fn kill(w: &mut Walker<'_>, inv: &Invocation) {
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

fn power(w: &mut Walker<'_>, inv: &Invocation) {
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

fn system(w: &mut Walker<'_>, inv: &Invocation, what: &str) {
    let args: Vec<String> = inv.args.iter().map(Arg::text).collect();
    w.need(
        GrantKind::System,
        Target::Unknown,
        format!("{what} ({} {})", inv.name, args.join(" ")).replace(" )", ")"),
    );
}

fn crontab(w: &mut Walker<'_>, inv: &Invocation) {
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

// ─── Network ────────────────────────────────────────────────────────────────

fn curl(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-o",
            "-d",
            "-F",
            "-T",
            "-X",
            "-H",
            "-A",
            "-b",
            "-c",
            "-e",
            "-E",
            "-K",
            "-m",
            "-r",
            "-u",
            "-U",
            "-w",
            "-x",
            "-y",
            "-Y",
            "-z",
            "-C",
            "-D",
            "-Q",
            "-t",
            "--output",
            "--data",
            "--data-raw",
            "--data-binary",
            "--data-urlencode",
            "--data-ascii",
            "--form",
            "--form-string",
            "--upload-file",
            "--request",
            "--header",
            "--user-agent",
            "--cookie",
            "--cookie-jar",
            "--referer",
            "--cert",
            "--config",
            "--max-time",
            "--range",
            "--user",
            "--write-out",
            "--proxy",
            "--dump-header",
            "--json",
            "--url",
            "--output-dir",
            "--trace",
            "--trace-ascii",
            "--stderr",
            "--etag-save",
            "--quote",
            "--mail-rcpt",
            "--mail-from",
            "--libcurl",
        ],
    );
    if opts.has(&["-K", "--config"]) {
        w.need_shell("curl reading its options from a file");
    }
    for out in opts.values(&[
        "-o",
        "--output",
        "-c",
        "--cookie-jar",
        "-D",
        "--dump-header",
        "--trace",
        "--trace-ascii",
        "--stderr",
        "--etag-save",
        "--libcurl",
    ]) {
        if out.fixed() != Some("-") {
            w.write_target(&out, "curl");
        }
    }
    let dir = opts.values(&["--output-dir"]).pop();
    if opts.has(&["-J", "--remote-header-name"]) {
        w.write_target(&Arg::Dynamic("(a name the server gives)".into()), "curl -J");
    } else if opts.has(&["-O", "--remote-name", "--remote-name-all"]) {
        for url in &opts.operands {
            let name = url
                .fixed()
                .map(|u| u.split(['?', '#']).next().unwrap_or(u))
                .and_then(|u| u.rsplit('/').next())
                .filter(|n| !n.is_empty());
            let target = match (name, dir.as_ref().and_then(Arg::fixed)) {
                (Some(n), Some(d)) => Arg::Fixed(format!("{d}/{n}")),
                (Some(n), None) => Arg::Fixed(n.to_string()),
                (None, _) => Arg::Dynamic(url.text()),
            };
            w.write_target(&target, "curl -O");
        }
    }
    let method = opts
        .values(&["-X", "--request"])
        .pop()
        .map(|m| m.text().to_uppercase());
    let uploads = opts.options.iter().any(|(n, _)| {
        n.starts_with("--data")
            || n.starts_with("--form")
            || matches!(
                n.as_str(),
                "-d" | "-F" | "-T" | "--upload-file" | "--json" | "-Q" | "--quote" | "--mail-rcpt"
            )
    }) || method.is_some_and(|m| !matches!(m.as_str(), "GET" | "HEAD" | "OPTIONS"));
    if uploads {
        let to: Vec<String> = opts.operands.iter().map(Arg::text).collect();
        w.need(
            GrantKind::Send,
            Target::Unknown,
            format!("sending data to {} with curl", to.join(" ")),
        );
    }
}

fn wget(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-O",
            "-o",
            "-a",
            "-P",
            "-i",
            "-e",
            "-U",
            "-t",
            "-T",
            "-w",
            "-Q",
            "-l",
            "-A",
            "-R",
            "-D",
            "-I",
            "-X",
            "--output-document",
            "--output-file",
            "--append-output",
            "--directory-prefix",
            "--input-file",
            "--execute",
            "--post-data",
            "--post-file",
            "--body-data",
            "--body-file",
            "--method",
            "--user-agent",
            "--header",
            "--user",
            "--password",
            "--load-cookies",
            "--save-cookies",
        ],
    );
    if opts.has(&["-e", "--execute"]) {
        w.need_shell("wget running a configuration command");
    }
    for out in opts.values(&[
        "-O",
        "--output-document",
        "-o",
        "--output-file",
        "--save-cookies",
    ]) {
        if out.fixed() != Some("-") {
            w.write_target(&out, "wget");
        }
    }
    if opts.has(&["-N", "--timestamping"]) {
        w.write_target(&Arg::Dynamic("(the downloaded files)".into()), "wget -N");
    }
    let method = opts
        .values(&["--method"])
        .pop()
        .map(|m| m.text().to_uppercase());
    if opts.has(&["--post-data", "--post-file", "--body-data", "--body-file"])
        || method.is_some_and(|m| !matches!(m.as_str(), "GET" | "HEAD" | "OPTIONS"))
    {
        w.need(GrantKind::Send, Target::Unknown, "sending data with wget");
    }
}

// ─── Settings of the shell and the machine ──────────────────────────────────

fn date(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &["-d", "-f", "-r", "-I", "--date", "--file", "--reference"],
    );
    if opts.has(&["-s", "--set"]) {
        system(w, inv, "setting the clock");
    }
}

fn hostname(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &[]);
    if !opts.operands.is_empty() || opts.has(&["-F", "--file", "-b", "--boot"]) {
        system(w, inv, "renaming the machine");
    }
}

fn alias(w: &mut Walker<'_>, inv: &Invocation) {
    for a in &inv.args {
        if a.text().contains('=') {
            let name = a.text().split('=').next().unwrap_or_default().to_string();
            w.need_shell(format!(
                "defining the alias {name}, which changes what a later command runs"
            ));
        }
    }
}

fn trap(w: &mut Walker<'_>, inv: &Invocation) {
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

fn declare(w: &mut Walker<'_>, inv: &Invocation) {
    for a in &inv.args {
        let text = a.text();
        if let Some((name, _)) = text.split_once('=') {
            judge_assignment(w, name.trim_end_matches('+'));
        }
    }
}

// ─── The machine's state ────────────────────────────────────────────────────

/// Tools that change the machine whatever their arguments (listing forms aside).
fn is_system_tool(name: &str) -> bool {
    const TOOLS: &[&str] = &[
        "mkfs",
        "mke2fs",
        "mkswap",
        "mkdosfs",
        "mkntfs",
        "fdisk",
        "sfdisk",
        "cfdisk",
        "gdisk",
        "sgdisk",
        "parted",
        "wipefs",
        "blkdiscard",
        "badblocks",
        "hdparm",
        "cryptsetup",
        "losetup",
        "swapon",
        "swapoff",
        "fsck",
        "e2fsck",
        "tune2fs",
        "resize2fs",
        "lvremove",
        "vgremove",
        "pvremove",
        "lvcreate",
        "lvresize",
        "useradd",
        "userdel",
        "usermod",
        "adduser",
        "deluser",
        "passwd",
        "chpasswd",
        "chsh",
        "chfn",
        "groupadd",
        "groupdel",
        "groupmod",
        "gpasswd",
        "newusers",
        "visudo",
        "vipw",
        "modprobe",
        "rmmod",
        "insmod",
        "update-grub",
        "grub-install",
        "efibootmgr",
        "sysrq",
        "rtcwake",
        "pm-suspend",
        "mount",
        "umount",
    ];
    TOOLS.contains(&name) || name.starts_with("mkfs.")
}

/// Read-only subcommands (or flags) of tools that otherwise change the machine; an empty
/// argument list counts as read-only where listed with `""`.
fn query_subcommands(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "systemctl" => &[
            "",
            "status",
            "show",
            "cat",
            "list-units",
            "list-unit-files",
            "list-sockets",
            "list-timers",
            "list-jobs",
            "list-dependencies",
            "list-machines",
            "list-automounts",
            "list-paths",
            "is-active",
            "is-enabled",
            "is-failed",
            "is-system-running",
            "get-default",
            "help",
            "show-environment",
            "--version",
        ],
        "loginctl" => &[
            "",
            "list-sessions",
            "list-users",
            "list-seats",
            "session-status",
            "show-session",
            "user-status",
            "show-user",
            "seat-status",
            "show-seat",
        ],
        "apt" | "apt-get" | "aptitude" => &[
            "list",
            "search",
            "show",
            "showsrc",
            "policy",
            "depends",
            "rdepends",
            "changelog",
            "--version",
            "help",
            "check",
            "download",
            "source",
        ],
        "apt-cache" => &[
            "", "search", "show", "showpkg", "policy", "depends", "rdepends", "stats", "dump",
            "pkgnames", "madison",
        ],
        "dpkg" => &[
            "-l",
            "-L",
            "-s",
            "-S",
            "-p",
            "-c",
            "--list",
            "--listfiles",
            "--status",
            "--search",
            "--print-avail",
            "--contents",
            "--get-selections",
            "--print-architecture",
            "--version",
            "--help",
        ],
        "snap" => &[
            "list",
            "info",
            "find",
            "search",
            "version",
            "changes",
            "connections",
            "interfaces",
            "help",
        ],
        "flatpak" => &[
            "list",
            "info",
            "search",
            "remotes",
            "history",
            "ps",
            "--version",
        ],
        "dnf" | "yum" => &[
            "list",
            "info",
            "search",
            "provides",
            "repolist",
            "history",
            "check-update",
            "--version",
            "help",
            "repoquery",
        ],
        "rpm" => &[
            "-q", "-qa", "-qi", "-ql", "-qf", "--query", "-V", "--verify",
        ],
        "pacman" => &[
            "-Q",
            "-Qi",
            "-Ql",
            "-Qs",
            "-Qo",
            "-Qe",
            "-Qdt",
            "-Ss",
            "-Si",
            "-Sl",
            "-Sg",
            "-F",
            "-Fl",
            "-Fx",
            "-V",
            "-h",
            "--version",
        ],
        "zypper" => &[
            "search",
            "se",
            "info",
            "if",
            "list-updates",
            "lu",
            "repos",
            "lr",
            "packages",
            "pa",
            "patches",
        ],
        "apk" => &["info", "search", "list", "policy", "stats"],
        "brew" => &[
            "list",
            "info",
            "search",
            "outdated",
            "config",
            "doctor",
            "deps",
            "uses",
            "--version",
        ],
        "timedatectl" | "hostnamectl" | "localectl" => &[
            "",
            "status",
            "show",
            "list-timezones",
            "list-locales",
            "list-keymaps",
        ],
        "nmcli" => &["", "monitor", "m"],
        "ufw" => &["status"],
        "iptables" | "ip6tables" | "nft" => &["-L", "--list", "-S", "--list-rules", "list"],
        "ifconfig" | "route" | "iwconfig" => &["", "-a", "-n"],
        "rfkill" => &["", "list"],
        "pip" | "pip3" | "npm" | "gem" | "cargo" => &[
            "list",
            "show",
            "freeze",
            "search",
            "--version",
            "help",
            "ls",
            "view",
            "outdated",
            "tree",
        ],
        _ => return None,
    })
}

/// A tool judged by its first word: a listed read-only subcommand passes, anything else
/// changes the machine (`system`), and for language package managers runs code (`shell`).
fn subcommand_tool(w: &mut Walker<'_>, inv: &Invocation) {
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

fn ip(w: &mut Walker<'_>, inv: &Invocation) {
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

fn sysctl(w: &mut Walker<'_>, inv: &Invocation) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sed_scripts_are_read_command_by_command() {
        let plain = sed_effects("s/a/b/g; /x/d; 1,3p; y/abc/xyz/").unwrap_or_default();
        assert_eq!(plain, SedEffects::default());
        let writes = sed_effects("s/a/b/w out.txt").unwrap_or_default();
        assert_eq!(writes.writes, vec!["out.txt".to_string()]);
        assert!(sed_effects("1e rm -rf ~").is_some_and(|e| e.executes));
        assert!(sed_effects("s/x/rm -rf ~/e").is_some_and(|e| e.executes));
        assert!(sed_effects("/re/w log").is_some_and(|e| e.writes == ["log"]));
        assert!(sed_effects("s|a|b|").is_some_and(|e| e == SedEffects::default()));
        assert!(sed_effects("k").is_none());
    }

    #[test]
    fn chmod_modes_that_only_add_are_told_apart() {
        for adds in ["+x", "u+x", "a+rw,u+x", "755", "644", "0600", "4755"] {
            assert!(mode_only_adds(adds), "{adds}");
        }
        for takes in ["000", "444", "u-w", "a=r", "go-rwx", "0", "400"] {
            assert!(!mode_only_adds(takes), "{takes}");
        }
    }

    #[test]
    fn options_split_clusters_values_and_the_end_marker() {
        let args: Vec<Arg> = ["-rf", "-t", "dir", "--suffix=.b", "--", "-x"]
            .iter()
            .map(|s| Arg::Fixed(s.to_string()))
            .collect();
        let o = Opts::parse(&args, &["-t", "--suffix"]);
        assert!(o.has(&["-r"]) && o.has(&["-f"]));
        assert_eq!(o.values(&["-t"]), vec![Arg::Fixed("dir".into())]);
        assert_eq!(o.values(&["--suffix"]), vec![Arg::Fixed(".b".into())]);
        assert_eq!(o.operands, vec![Arg::Fixed("-x".into())]);
    }
}
