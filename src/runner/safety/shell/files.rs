//! Commands that delete, copy, move, link, write, archive or change the permissions of files:
//! what each one needs, by its arguments (`rm` deletes its operands, `cp` overwrites an
//! existing destination, `tar -x` extracts over existing files, `chmod 000` takes permissions
//! away).

use super::opts::Opts;
use super::walker::{Arg, Invocation, Walker};
use crate::runner::safety::grants::{GrantKind, Target};

// ─── Deleting and writing ───────────────────────────────────────────────────

pub(super) fn delete_operands(w: &mut Walker<'_>, inv: &Invocation) {
    for arg in Opts::parse(&inv.args, &["-n", "-s", "--iterations", "--size"]).operands {
        w.delete(&arg, &inv.name);
    }
}

pub(super) fn truncate(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &["-s", "-r", "--size", "--reference"]);
    for arg in &opts.operands {
        w.write_target(arg, "truncate");
    }
}

/// `cp`, `install`, `mv`: an existing destination is overwritten (unless `-n` or a backup
/// option keeps it); `mv` onto a device takes its sources away.
pub(super) fn copy(w: &mut Walker<'_>, inv: &Invocation, moving: bool) {
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
pub(super) fn link(w: &mut Walker<'_>, inv: &Invocation) {
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

pub(super) fn tee(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(&inv.args, &[]);
    if opts.has(&["-a", "--append"]) {
        return;
    }
    for arg in &opts.operands {
        w.write_target(arg, "tee");
    }
}

pub(super) fn dd(w: &mut Walker<'_>, inv: &Invocation) {
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
pub(super) fn output_option(w: &mut Walker<'_>, inv: &Invocation) {
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
pub(super) fn second_operand_output(w: &mut Walker<'_>, inv: &Invocation) {
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

// ─── Archives and copies ────────────────────────────────────────────────────

pub(super) fn tar(w: &mut Walker<'_>, inv: &Invocation) {
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

pub(super) fn rsync(w: &mut Walker<'_>, inv: &Invocation) {
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

pub(super) fn unzip(w: &mut Walker<'_>, inv: &Invocation) {
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

pub(super) fn compress(w: &mut Walker<'_>, inv: &Invocation) {
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

pub(super) fn gio(w: &mut Walker<'_>, inv: &Invocation) {
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

pub(super) fn chmod(w: &mut Walker<'_>, inv: &Invocation) {
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
pub(super) fn mode_only_adds(mode: &str) -> bool {
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

pub(super) fn chown(w: &mut Walker<'_>, inv: &Invocation) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chmod_modes_that_only_add_are_told_apart() {
        for adds in ["+x", "u+x", "a+rw,u+x", "755", "644", "0600", "4755"] {
            assert!(mode_only_adds(adds), "{adds}");
        }
        for takes in ["000", "444", "u-w", "a=r", "go-rwx", "0", "400"] {
            assert!(!mode_only_adds(takes), "{takes}");
        }
    }
}
