//! `git`, by subcommand: the read-only and local ones pass; `reset --hard`, `clean`, `rm`,
//! `checkout -- paths`, `restore`, `push --force` and the history-rewriting ones need
//! `delete` or `overwrite`; `push` needs `send`; an unknown subcommand (an alias) needs
//! `shell`.

use super::opts::Opts;
use super::walker::{Arg, Invocation, Walker};
use crate::runner::safety::grants::{GrantKind, Target};

// ─── git ────────────────────────────────────────────────────────────────────

/// git subcommands that change nothing but the index, refs of the local repository, or
/// create things; their destructive forms are checked by flags below.
#[rustfmt::skip]
const GIT_PLAIN: &[&str] = &[
    "status", "log", "show", "diff", "blame", "annotate", "shortlog", "describe", "rev-parse",
    "rev-list", "ls-files", "ls-tree", "ls-remote", "cat-file", "grep", "help", "version",
    "whatchanged", "show-branch", "count-objects", "fsck", "check-ignore", "name-rev", "merge-base",
    "for-each-ref", "fetch", "init", "clone", "add", "commit", "mv", "merge", "rebase", "pull",
    "cherry-pick", "revert", "am", "apply", "format-patch", "request-pull", "bisect", "show-ref",
    "verify-commit", "verify-tag", "range-diff", "difftool", "citool", "gui", "gitk", "instaweb",
    "var", "check-attr", "check-ref-format", "stage", "notes", "switch", "checkout", "restore",
    "reset", "clean", "rm", "push", "branch", "tag", "stash", "remote", "config", "gc", "prune",
    "reflog", "worktree", "submodule", "update-ref", "filter-branch", "archive", "bundle",
    "send-email", "replace", "sparse-checkout",
];

pub(super) fn git(w: &mut Walker<'_>, inv: &Invocation) {
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
        "restore" if !flag(&["-S", "--staged"]) || flag(&["-W", "--worktree"]) => {
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
pub(super) fn git_config(w: &mut Walker<'_>, opts: &Opts) {
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
