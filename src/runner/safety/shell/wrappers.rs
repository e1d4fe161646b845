//! Commands that run other commands: wrappers (`sudo`, `env`, `nice`, `timeout`, `xargs`,
//! `find -exec`, …, each with the options that take a value, so `sudo -u root rm` finds
//! `rm`), shells and the command lines they are given (`sh -c`, `su -c`, `ssh host cmd`,
//! `xterm -e`, `watch`, `eval`, a here-document into `sh`), and interpreters, whose code the
//! gate does not read (`python -c`, `perl -e`, `node -e`: `shell`).

use super::opts::Opts;
use super::walker::{Arg, Cwd, Invocation, Stdin, Walker};
use crate::runner::safety::grants::{GrantKind, Target};

type Rule = fn(&mut Walker<'_>, &Invocation);

/// Shell programs: their `-c` string, script file or standard input is a command line.
#[rustfmt::skip]
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ksh93", "ash", "yash", "fish", "tcsh", "csh",
    "rbash", "lksh", "posh", "oksh", "loksh", "nu", "elvish", "xonsh", "pwsh", "powershell",
];

/// Interpreters: their code is a program the gate does not read.
#[rustfmt::skip]
const INTERPRETERS: &[&str] = &[
    "python", "python2", "python3", "pypy", "pypy3", "perl", "ruby", "irb", "node", "nodejs",
    "deno", "bun", "php", "lua", "luajit", "Rscript", "R", "tclsh", "wish", "osascript", "julia",
    "guile", "racket", "sbcl", "ocaml", "groovy", "jshell", "ghci", "runghc", "expect",
];

/// Terminal emulators: `-e`, `-x`, `--` or `--command` names a command to run in the window.
#[rustfmt::skip]
const TERMINALS: &[&str] = &[
    "xterm", "uxterm", "rxvt", "urxvt", "st", "alacritty", "x-terminal-emulator", "konsole",
    "lxterminal", "mate-terminal", "qterminal", "sakura", "terminology", "foot", "kitty",
    "gnome-terminal", "xfce4-terminal", "terminator", "tilix", "wezterm", "eterm", "aterm",
];

/// Library calls and commands inside interpreter code that delete (a hint shown with the
/// `shell` need; the code needs `shell` in any case).
#[rustfmt::skip]
const CODE_DELETES: &[&str] = &[
    "rmtree", "os.remove", "os.unlink", "os.rmdir", "removedirs", "unlink", "fs.rm", "rmsync",
    "rimraf", "remove_dir_all", "fileutils.rm", "rm -", "file.delete", "deletefile",
];

/// The rule for a command that runs other commands.
pub(super) fn rule_for(name: &str) -> Option<Rule> {
    if SHELLS.contains(&name) {
        return Some(shell);
    }
    if is_interpreter(name) {
        return Some(interpreter);
    }
    if TERMINALS.contains(&name) {
        return Some(terminal);
    }
    let rule: Rule = match name {
        "sudo" | "doas" | "run0" | "pkexec" | "sudoedit" => sudo,
        "env" => env,
        "nice" => |w, inv| plain_wrapper(w, inv, &["-n", "--adjustment"], 0),
        "nohup" | "setsid" | "unbuffer" => |w, inv| plain_wrapper(w, inv, &[], 0),
        "stdbuf" => |w, inv| {
            plain_wrapper(
                w,
                inv,
                &["-i", "-o", "-e", "--input", "--output", "--error"],
                0,
            )
        },
        "timeout" => |w, inv| plain_wrapper(w, inv, &["-s", "-k", "--signal", "--kill-after"], 1),
        "chrt" | "taskset" => sched_wrapper,
        "ionice" => ionice,
        "time" => time,
        "command" => command,
        "builtin" | "exec" => |w, inv| plain_wrapper(w, inv, &["-a"], 0),
        "busybox" | "toybox" => |w, inv| plain_wrapper(w, inv, &[], 0),
        "flock" => flock,
        "xargs" => xargs,
        "find" => find,
        "watch" => watch,
        "systemd-run" => systemd_run,
        "ssh" => ssh,
        "su" => su,
        "script" => script,
        "eval" => eval,
        _ => return None,
    };
    Some(rule)
}

fn is_interpreter(name: &str) -> bool {
    INTERPRETERS.contains(&name)
        || ["python", "perl", "ruby", "php", "lua", "node"]
            .iter()
            .any(|p| {
                name.strip_prefix(p)
                    .is_some_and(|v| v.starts_with(['2', '3', '5', '7', '8', '.']))
            })
}

/// Runs the command in `args` (its first word and the rest).
fn run_rest(w: &mut Walker<'_>, args: &[Arg], stdin: Stdin) {
    let Some((first, rest)) = args.split_first() else {
        return;
    };
    w.invoke_word(&first.text(), first, rest.to_vec(), stdin);
}

/// A wrapper: options (`valued` take a value), then `skip` operands of its own (a duration),
/// then the command.
fn plain_wrapper(w: &mut Walker<'_>, inv: &Invocation, valued: &[&str], skip: usize) {
    let (_, rest) = Opts::leading(&inv.args, valued);
    run_rest(w, rest.get(skip..).unwrap_or_default(), inv.stdin.clone());
}

fn sudo(w: &mut Walker<'_>, inv: &Invocation) {
    if inv.name == "sudoedit" {
        for f in Opts::parse(&inv.args, &["-u", "-g", "-C", "-D", "-p", "-h"]).operands {
            w.modify(&f, "editing {} as another user");
        }
        return;
    }
    let valued: &[&str] = match inv.name.as_str() {
        "doas" => &["-u", "-C"],
        "pkexec" => &["--user"],
        "run0" => &[
            "-u",
            "-g",
            "-D",
            "--user",
            "--group",
            "--chdir",
            "--setenv",
            "--property",
            "--unit",
            "--description",
            "--slice",
            "--nice",
            "--machine",
        ],
        _ => &[
            "-C",
            "-D",
            "-g",
            "-p",
            "-R",
            "-r",
            "-T",
            "-t",
            "-U",
            "-u",
            "-h",
            "--close-from",
            "--chdir",
            "--group",
            "--host",
            "--prompt",
            "--chroot",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
            "--user",
        ],
    };
    // `sudo -h` alone is help; with a value it names a host: either way no command follows
    // from it, so taking the next word as its value is safe.
    let (opts, mut rest) = Opts::leading(&inv.args, valued);
    if opts.has(&["-e", "--edit"]) {
        for f in rest {
            w.modify(f, "editing {} as another user");
        }
        return;
    }
    // `sudo NAME=value cmd` sets variables for the command.
    while let Some((first, tail)) = rest.split_first() {
        match first.fixed().and_then(|s| s.split_once('=')) {
            Some((name, _)) if !name.is_empty() && !name.contains('/') => {
                super::variables::judge_assignment(w, name);
                rest = tail;
            }
            _ => break,
        }
    }
    if rest.is_empty() {
        return;
    }
    if opts.has(&["-s", "--shell", "-i", "--login"]) {
        // The command runs through the target user's shell as `-c "args…"`.
        let line: Vec<String> = rest.iter().map(Arg::text).collect();
        w.nested(&line.join(" "));
        return;
    }
    run_rest(w, rest, inv.stdin.clone());
}

fn env(w: &mut Walker<'_>, inv: &Invocation) {
    let (opts, mut rest) = Opts::leading(
        &inv.args,
        &[
            "-u",
            "-C",
            "-S",
            "-P",
            "--unset",
            "--chdir",
            "--split-string",
        ],
    );
    if opts.has(&["-P"]) {
        w.need_shell("env searching another PATH for the command");
    }
    if let Some(dir) = opts.values(&["-C", "--chdir"]).pop() {
        w.change_dir(Some(&dir));
        w.cwd = match &w.cwd {
            Cwd::Dirs(d) => Cwd::Dirs(d[..1.min(d.len())].to_vec()),
            other => other.clone(),
        };
    }
    while let Some((first, tail)) = rest.split_first() {
        match first.text().split_once('=') {
            Some((name, _)) if !name.is_empty() && !name.starts_with('-') => {
                super::variables::judge_assignment(w, name);
                rest = tail;
            }
            _ => break,
        }
    }
    if let Some(split) = opts.values(&["-S", "--split-string"]).pop() {
        match split.fixed() {
            Some(s) => {
                let tail: Vec<String> = rest.iter().map(Arg::text).collect();
                w.nested(&format!("{s} {}", tail.join(" ")));
            }
            None => w.need_shell("env -S with a command known only when the line runs"),
        }
        return;
    }
    run_rest(w, rest, inv.stdin.clone());
}

fn sched_wrapper(w: &mut Walker<'_>, inv: &Invocation) {
    let (opts, rest) = Opts::leading(&inv.args, &["-T", "-P", "-D"]);
    if opts.has(&["-p", "--pid"]) {
        return;
    }
    // `chrt PRIO cmd`, `taskset MASK cmd`.
    run_rest(w, rest.get(1..).unwrap_or_default(), inv.stdin.clone());
}

fn ionice(w: &mut Walker<'_>, inv: &Invocation) {
    let (opts, rest) = Opts::leading(
        &inv.args,
        &[
            "-c",
            "-n",
            "-p",
            "-P",
            "-u",
            "--class",
            "--classdata",
            "--pid",
            "--pgid",
            "--uid",
        ],
    );
    if opts.has(&["-p", "-P", "-u", "--pid", "--pgid", "--uid"]) {
        return;
    }
    run_rest(w, rest, inv.stdin.clone());
}

fn time(w: &mut Walker<'_>, inv: &Invocation) {
    let (opts, rest) = Opts::leading(&inv.args, &["-f", "-o", "--format", "--output"]);
    if !opts.has(&["-a", "--append"]) {
        for out in opts.values(&["-o", "--output"]) {
            w.write_target(&out, "time -o");
        }
    }
    run_rest(w, rest, inv.stdin.clone());
}

fn command(w: &mut Walker<'_>, inv: &Invocation) {
    let (opts, rest) = Opts::leading(&inv.args, &[]);
    // `command -v name` only looks the name up.
    if opts.has(&["-v", "-V"]) {
        return;
    }
    run_rest(w, rest, inv.stdin.clone());
}

fn flock(w: &mut Walker<'_>, inv: &Invocation) {
    let (opts, rest) = Opts::leading(
        &inv.args,
        &[
            "-w",
            "-E",
            "-c",
            "--timeout",
            "--conflict-exit-code",
            "--command",
        ],
    );
    if let Some(cmd) = opts.values(&["-c", "--command"]).pop() {
        nested_arg(w, &cmd, "flock -c");
        return;
    }
    // `flock FILE cmd …`, or `flock FILE -c cmd`.
    let rest = rest.get(1..).unwrap_or_default();
    if rest.first().and_then(Arg::fixed) == Some("-c") {
        if let Some(cmd) = rest.get(1) {
            nested_arg(w, cmd, "flock -c");
        }
        return;
    }
    run_rest(w, rest, inv.stdin.clone());
}

/// Judges an argument that is a command line.
fn nested_arg(w: &mut Walker<'_>, arg: &Arg, by: &str) {
    match arg.fixed() {
        Some(s) => w.nested(s),
        None => w.need_shell(format!(
            "{by} running a command known only when the line runs"
        )),
    }
}

fn xargs(w: &mut Walker<'_>, inv: &Invocation) {
    let (opts, rest) = Opts::leading(
        &inv.args,
        &[
            "-a",
            "-d",
            "-E",
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "--arg-file",
            "--delimiter",
            "--eof",
            "--replace",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ],
    );
    let input = Arg::Dynamic("(words read from the input)".into());
    let replace = opts
        .values(&["-I", "--replace"])
        .pop()
        .and_then(|r| r.fixed().map(str::to_string))
        .or_else(|| opts.has(&["-i"]).then(|| "{}".to_string()));
    let mut argv: Vec<Arg> = if rest.is_empty() {
        vec![Arg::Fixed("echo".into())]
    } else {
        rest.to_vec()
    };
    match &replace {
        Some(r) => {
            for a in argv.iter_mut().skip(1) {
                if a.text().contains(r.as_str()) {
                    *a = input.clone();
                }
            }
        }
        None => argv.push(input),
    }
    if argv
        .first()
        .is_some_and(|a| a.text().contains(replace.as_deref().unwrap_or("\0")))
    {
        w.need_shell("xargs running a command named by its input");
        return;
    }
    run_rest(w, &argv, Stdin::Pipe);
}

fn find(w: &mut Walker<'_>, inv: &Invocation) {
    let args = &inv.args;
    let mut i = 0;
    // Options before the start points.
    while let Some(a) = args.get(i).and_then(Arg::fixed) {
        match a {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            _ if a.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let is_expr = |a: &Arg| {
        a.fixed()
            .is_some_and(|s| s.starts_with('-') || matches!(s, "(" | ")" | "!" | ","))
    };
    let mut starts: Vec<Arg> = Vec::new();
    while let Some(a) = args.get(i) {
        if is_expr(a) {
            break;
        }
        starts.push(a.clone());
        i += 1;
    }
    if starts.is_empty() {
        starts.push(Arg::Fixed(".".into()));
    }
    // What `{}` stands for: a path at or below a start point.
    let resolved: Option<Vec<std::path::PathBuf>> = starts
        .iter()
        .map(|s| s.fixed().and_then(|s| w.resolve(s)))
        .collect::<Option<Vec<_>>>()
        .map(|v| v.into_iter().flatten().collect());
    let found = match resolved {
        Some(dirs) => Arg::Under(dirs),
        None => Arg::Dynamic("(the files find finds)".into()),
    };
    while let Some(a) = args.get(i) {
        i += 1;
        match a.fixed() {
            Some("-delete") => w.delete(&found, "find -delete"),
            Some("-exec" | "-execdir" | "-ok" | "-okdir") => {
                let mut argv: Vec<Arg> = Vec::new();
                while let Some(b) = args.get(i) {
                    i += 1;
                    if matches!(b.fixed(), Some(";" | "+")) {
                        break;
                    }
                    argv.push(if b.text().contains("{}") {
                        found.clone()
                    } else {
                        b.clone()
                    });
                }
                if argv.first().is_some_and(|a| matches!(a, Arg::Under(_))) {
                    w.need_shell("find running the files it finds as commands");
                    continue;
                }
                run_rest(w, &argv, Stdin::Terminal);
            }
            Some("-fprint" | "-fprint0" | "-fls") => {
                if let Some(f) = args.get(i) {
                    w.write_target(f, "find");
                }
                i += 1;
            }
            Some("-fprintf") => {
                if let Some(f) = args.get(i) {
                    w.write_target(f, "find");
                }
                i += 2;
            }
            _ => {}
        }
    }
}

fn watch(w: &mut Walker<'_>, inv: &Invocation) {
    let (opts, rest) = Opts::leading(&inv.args, &["-n", "-q", "--interval", "--equexit"]);
    if opts.has(&["-x", "--exec"]) {
        run_rest(w, rest, Stdin::Terminal);
        return;
    }
    // watch runs `sh -c` on its arguments joined by spaces.
    if rest.iter().all(|a| a.fixed().is_some()) {
        let line: Vec<String> = rest.iter().map(Arg::text).collect();
        w.nested(&line.join(" "));
    } else {
        w.need_shell("watch running a command known only when the line runs");
    }
}

fn systemd_run(w: &mut Walker<'_>, inv: &Invocation) {
    let (opts, rest) = Opts::leading(
        &inv.args,
        &[
            "-u",
            "-p",
            "-E",
            "-H",
            "-M",
            "--unit",
            "--property",
            "--description",
            "--slice",
            "--uid",
            "--gid",
            "--nice",
            "--working-directory",
            "--setenv",
            "--on-active",
            "--on-boot",
            "--on-startup",
            "--on-unit-active",
            "--on-unit-inactive",
            "--on-calendar",
            "--path-property",
            "--socket-property",
            "--timer-property",
            "--machine",
            "--host",
            "--service-type",
        ],
    );
    if opts.has(&["-H", "--host", "-M", "--machine"]) {
        w.need_shell("systemd-run starting a command on another machine");
        return;
    }
    run_rest(w, rest, Stdin::Terminal);
}

fn ssh(w: &mut Walker<'_>, inv: &Invocation) {
    let (opts, rest) = Opts::leading(
        &inv.args,
        &[
            "-B", "-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O",
            "-o", "-p", "-Q", "-R", "-S", "-W", "-w",
        ],
    );
    let local_command = opts.values(&["-o"]).iter().any(|o| {
        let t = o.text().to_lowercase();
        t.contains("proxycommand") || t.contains("localcommand") || t.contains("knownhostscommand")
    });
    if local_command || opts.has(&["-F"]) {
        w.need_shell("ssh running a local command from its options or a config file");
    }
    let Some((_host, command)) = rest.split_first() else {
        return;
    };
    if command.is_empty() {
        return;
    }
    // The words are joined with spaces and run by the remote user's shell, where the gate
    // cannot look at files or the PATH.
    let line: Vec<String> = command.iter().map(Arg::text).collect();
    let was_remote = w.remote;
    w.remote = true;
    w.nested(&line.join(" "));
    w.remote = was_remote;
}

fn su(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-c",
            "-s",
            "-g",
            "-G",
            "-w",
            "--command",
            "--shell",
            "--group",
            "--supp-group",
            "--whitelist-environment",
            "--session-command",
        ],
    );
    let commands = opts.values(&["-c", "--command", "--session-command"]);
    for c in &commands {
        nested_arg(w, c, "su -c");
    }
    // `su user -c cmd` after the user name: the shell's own `-c`.
    if let Some(pos) = opts.operands.iter().position(|a| a.fixed() == Some("-c")) {
        if let Some(c) = opts.operands.get(pos + 1) {
            nested_arg(w, c, "su -c");
        }
    }
}

fn script(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-c",
            "-E",
            "-I",
            "-O",
            "-B",
            "-T",
            "-m",
            "--command",
            "--echo",
            "--log-in",
        ],
    );
    for c in opts.values(&["-c", "--command"]) {
        nested_arg(w, &c, "script -c");
    }
    if !opts.has(&["-a", "--append"]) {
        let file = opts
            .operands
            .first()
            .cloned()
            .unwrap_or_else(|| Arg::Fixed("typescript".into()));
        w.write_target(&file, "script");
    }
}

fn eval(w: &mut Walker<'_>, inv: &Invocation) {
    w.need_shell("eval, which runs text as a command");
    if inv.args.iter().all(|a| a.fixed().is_some()) {
        let line: Vec<String> = inv.args.iter().map(Arg::text).collect();
        w.nested(&line.join(" "));
    }
}

fn terminal(w: &mut Walker<'_>, inv: &Invocation) {
    let args = &inv.args;
    let marker = args.iter().position(|a| {
        matches!(
            a.fixed(),
            Some("-e" | "-x" | "--" | "--command" | "--execute")
        ) || a.text().starts_with("--command=")
    });
    let command: Vec<Arg> = match marker {
        Some(i) => match args[i].fixed() {
            Some(s) if s.starts_with("--command=") => {
                vec![Arg::Fixed(s["--command=".len()..].to_string())]
            }
            _ => args[i + 1..].to_vec(),
        },
        // kitty and wezterm take the command as plain operands.
        None if matches!(inv.name.as_str(), "kitty") => Opts::leading(
            args,
            &["-c", "-o", "-T", "--title", "--config", "-d", "--directory"],
        )
        .1
        .to_vec(),
        None if inv.name == "wezterm" => {
            let after_start = args.iter().position(|a| a.fixed() == Some("start"));
            after_start
                .map(|i| args[i + 1..].to_vec())
                .unwrap_or_default()
        }
        None => Vec::new(),
    };
    match command.as_slice() {
        [] => {}
        // One word after `-e` may be a whole command line (xfce4-terminal, terminator).
        [one] => nested_arg(w, one, &format!("{} -e", inv.name)),
        many => run_rest(w, many, Stdin::Terminal),
    }
}

fn shell(w: &mut Walker<'_>, inv: &Invocation) {
    let args = &inv.args;
    let mut command: Option<Arg> = None;
    let mut wants_command = false;
    let mut reads_stdin = false;
    let mut operands: Vec<Arg> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let text = a.fixed().unwrap_or_default();
        if !operands.is_empty() || !(a.is_option() || text.starts_with('+')) {
            if wants_command && command.is_none() {
                command = Some(a.clone());
            } else {
                operands.push(a.clone());
            }
            continue;
        }
        match text {
            "--" => {
                operands.extend(args[i..].iter().cloned());
                break;
            }
            "--rcfile" | "--init-file" | "--init-command" | "-C" => {
                w.need_shell(format!("{} running a startup file or command", inv.name));
                i += 1;
            }
            "--command" => {
                command = args.get(i).cloned();
                i += 1;
            }
            "-o" | "+o" | "-O" | "+O" => i += 1,
            _ if text.starts_with("--command=") => {
                command = Some(Arg::Fixed(text["--command=".len()..].to_string()))
            }
            _ if text.starts_with("--") => {}
            _ => {
                // A short cluster: `-c`, `-lc`, `-ec`; `-s` reads the script from stdin.
                if text.contains('c') {
                    wants_command = true;
                }
                if text.contains('s') {
                    reads_stdin = true;
                }
            }
        }
    }
    if wants_command && command.is_none() {
        command = operands.first().cloned();
    }
    if let Some(c) = command {
        nested_arg(w, &c, &format!("{} -c", inv.name));
        return;
    }
    if !operands.is_empty() && !reads_stdin {
        w.need_shell(format!(
            "running the script {} with {}, which the gate cannot see",
            operands[0].text(),
            inv.name
        ));
        return;
    }
    match &inv.stdin {
        Stdin::Terminal => {}
        Stdin::Text(Some(text)) => w.nested(text),
        Stdin::Text(None) => w.need_shell(format!(
            "running a here-document that holds expansions with {}",
            inv.name
        )),
        Stdin::Pipe => w.need_shell(format!("running text piped into {}", inv.name)),
        Stdin::File => w.need_shell(format!("running a script file with {}", inv.name)),
    }
}

fn interpreter(w: &mut Walker<'_>, inv: &Invocation) {
    let only_info = !inv.args.is_empty()
        && inv
            .args
            .iter()
            .all(|a| matches!(a.fixed(), Some("--version" | "-V" | "--help" | "-h" | "-v")));
    if only_info {
        return;
    }
    let what = match (inv.args.is_empty(), &inv.stdin) {
        (_, Stdin::Pipe) => format!("running text piped into {}", inv.name),
        (true, _) => format!(
            "starting the {} interpreter, whose input the gate cannot judge",
            inv.name
        ),
        _ => format!("running {} code, which the gate cannot judge", inv.name),
    };
    w.need_shell(what);
    let code: String = inv
        .args
        .iter()
        .map(Arg::text)
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    if let Some(hint) = CODE_DELETES.iter().find(|h| code.contains(*h)) {
        w.need(
            GrantKind::Delete,
            Target::Unknown,
            format!("deleting files from {} code ({hint})", inv.name),
        );
    }
}
