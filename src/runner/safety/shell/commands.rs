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

use super::opts::has_option;
use super::walker::{Arg, Cwd, Invocation, Walker};
use super::{files, git, machine, network, text_tools, wrappers};
use crate::runner::safety::grants::{GrantKind, Target};

/// Commands that change nothing, whatever their arguments.
#[rustfmt::skip]
pub const READ_ONLY: &[&str] = &[
    ":", "true", "false", "echo", "printf", "cat", "tac", "nl", "head", "tail", "ls", "dir", "vdir",
    "tree", "pwd", "wc", "grep", "egrep", "fgrep", "rg", "diff", "cmp", "comm", "cut", "paste",
    "join", "tr", "fold", "fmt", "column", "expand", "unexpand", "rev", "od", "hexdump", "strings",
    "file", "stat", "du", "df", "free", "uptime", "cal", "whoami", "id", "groups", "who", "w",
    "users", "uname", "which", "whereis", "type", "basename", "dirname", "realpath", "readlink",
    "seq", "yes", "sleep", "test", "[", "[[", "expr", "md5sum", "sha1sum", "sha224sum", "sha256sum",
    "sha384sum", "sha512sum", "b2sum", "cksum", "sum", "base64", "base32", "printenv", "locale",
    "help", "clear", "tput", "jobs", "fg", "bg", "wait", "ps", "pgrep", "pidof", "lscpu", "lsblk",
    "lsusb", "lspci", "lsof", "nproc", "getconf", "ping", "host", "dig", "nslookup", "jq", "read",
    "shift", "unset", "umask", "ulimit", "times", "getopts", "return", "break", "continue",
    "history", "unalias", "dirs", "caller", "let", "mapfile", "readarray", "set", "shopt", "tty",
    "logname", "arch", "look", "numfmt", "tsort", "pr", "zcat", "zless", "zgrep", "bzcat", "xzcat",
    "zstdcat", "lsattr", "getfacl",
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
#[rustfmt::skip]
const SHELL_BUILTINS: &[&str] = &[
    "coproc", "disown", "suspend", "compopt", "complete", "compgen", "autoload", "zmodload",
    "bindkey", "zle", "zstyle", "setopt", "unsetopt", "emulate", "noglob", "nocorrect", "print",
    "whence", "where", "rehash", "functions", "vared", "sched", "zcompile", "zparseopts", "compdef",
    "abbr", "funced", "funcsave", "function", "begin", "end", "status", "string", "math",
    "argparse", "contains",
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
        | "gvfs-trash" => files::delete_operands,
        "truncate" => files::truncate,
        "cp" | "install" => |w, inv| files::copy(w, inv, false),
        "mv" => |w, inv| files::copy(w, inv, true),
        "ln" => files::link,
        "tee" => files::tee,
        "dd" => files::dd,
        "sed" => text_tools::sed,
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => text_tools::awk,
        "git" => git::git,
        "tar" => files::tar,
        "rsync" => files::rsync,
        "chmod" => files::chmod,
        "chown" | "chgrp" | "chattr" | "setfacl" => files::chown,
        "kill" | "pkill" | "killall" | "xkill" | "skill" => machine::kill,
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
        "shutdown" | "reboot" | "poweroff" | "halt" => machine::power,
        "init" | "telinit" => |w, inv| machine::system(w, inv, "changing the run level"),
        "crontab" => machine::crontab,
        "curl" => network::curl,
        "wget" => network::wget,
        "sort" | "shuf" | "iconv" => files::output_option,
        "uniq" | "xxd" => files::second_operand_output,
        "date" => machine::date,
        "hostname" => machine::hostname,
        "alias" => machine::alias,
        "trap" => machine::trap,
        "export" | "declare" | "typeset" | "local" | "readonly" => machine::declare,
        "source" | "." => |w, inv| {
            let file = inv.args.first().map(Arg::text).unwrap_or_default();
            w.need_shell(format!("running the commands in the file {file}"))
        },
        "fc" => |w, inv| {
            if !has_option(&inv.args, &["-l"]) {
                w.need_shell("re-running a command from the history with fc");
            }
        },
        // zsh's `r` re-runs the last command; elsewhere it is a missing command.
        "r" => |w, _| {
            let zsh = w
                .host
                .shells_at_prompt()
                .is_none_or(|shells| shells.iter().any(|s| s.name == "zsh"));
            if zsh {
                w.need_shell("re-running the last command (zsh's r)");
            }
        },
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
        "unzip" => files::unzip,
        "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz" | "unxz" | "lzma" | "unlzma" | "zstd"
        | "unzstd" | "lz4" | "compress" | "uncompress" => files::compress,
        "gio" => files::gio,
        "ip" => machine::ip,
        "sysctl" => machine::sysctl,
        n if machine::is_system_tool(n) => |w, inv| {
            // `mount`, `swapon` and `losetup` alone list what is there.
            let listing =
                inv.args.is_empty() && matches!(inv.name.as_str(), "mount" | "swapon" | "losetup");
            if !listing {
                machine::system(w, inv, "changing the system");
            }
        },
        n if machine::query_subcommands(n).is_some() => machine::subcommand_tool,
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
