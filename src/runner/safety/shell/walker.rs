//! The walker's vocabulary: a resolved word ([`Arg`]), where a command runs ([`Cwd`]) and
//! reads ([`Stdin`]), one command to judge ([`Invocation`]), and the [`Walker`] that collects
//! what a line needs. The walk itself is in `mod.rs` (the syntax tree), `words.rs` and
//! `paths.rs`; the command tables judge an [`Invocation`].

use std::cell::OnceCell;
use std::path::PathBuf;

use crate::runner::safety::grants::{GrantKind, Target};
use crate::runner::safety::host::HostFacts;
use crate::runner::safety::refusal::{shown, Need};

/// A word of a command line, resolved as far as the gate can without running anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Arg {
    /// A fixed value: quotes and escapes removed, `~` expanded.
    Fixed(String),
    /// A fixed pattern with an unquoted `*`, `?` or `[` (the value, globs kept).
    Glob(String),
    /// Known only when the line runs: a variable, a command substitution, a brace expansion.
    Dynamic(String),
    /// A path at or below one of these directories (what `find DIRS -exec … {}` passes).
    Under(Vec<PathBuf>),
}

impl Arg {
    /// The fixed value (not for globs or dynamic words).
    pub(super) fn fixed(&self) -> Option<&str> {
        match self {
            Arg::Fixed(s) => Some(s),
            _ => None,
        }
    }

    /// The word for a message: the value, or the word as typed.
    pub(super) fn text(&self) -> String {
        match self {
            Arg::Fixed(s) | Arg::Glob(s) | Arg::Dynamic(s) => s.clone(),
            Arg::Under(dirs) => dirs
                .first()
                .map(|d| format!("{}/…", shown(d)))
                .unwrap_or_default(),
        }
    }

    /// Whether it is an option (`-x`, `--long`): fixed and starting with `-`.
    pub(super) fn is_option(&self) -> bool {
        self.fixed()
            .is_some_and(|s| s.starts_with('-') && s.len() > 1)
    }
}

/// Where the working directory of a command is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cwd {
    /// The directory of a shell at a prompt (a typed line): asked of the host when needed.
    Terminal,
    /// One of these directories.
    Dirs(Vec<PathBuf>),
    /// Not known.
    Unknown,
}

/// Where a command's standard input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stdin {
    /// The terminal (an interactive program reads the user's keys).
    Terminal,
    /// A pipe from an earlier command: text the gate cannot see.
    Pipe,
    /// A here-document or here-string: its text when fixed.
    Text(Option<String>),
    /// A file.
    File,
}

/// One command to judge: its name (directory stripped), its arguments, its input.
#[derive(Debug, Clone)]
pub(super) struct Invocation {
    /// The command's name (`rm` for `/bin/rm`).
    pub name: String,
    /// The arguments after the name.
    pub args: Vec<Arg>,
    /// Where its input comes from.
    pub stdin: Stdin,
}

/// Walks a parsed command line and collects what it needs.
pub(super) struct Walker<'h> {
    pub host: &'h dyn HostFacts,
    pub needs: Vec<Need>,
    pub(super) depth: usize,
    /// The working directory of the command being judged.
    pub cwd: Cwd,
    /// Inside `ssh host …`: paths and commands are on another machine.
    pub remote: bool,
    pub(super) terminal_dirs: OnceCell<Option<Vec<PathBuf>>>,
}

impl<'h> Walker<'h> {
    pub(super) fn new(host: &'h dyn HostFacts) -> Self {
        Self {
            host,
            needs: Vec::new(),
            depth: 0,
            cwd: Cwd::Terminal,
            remote: false,
            terminal_dirs: OnceCell::new(),
        }
    }

    /// Adds a need (once).
    pub(super) fn need(&mut self, kind: GrantKind, target: Target, what: impl Into<String>) {
        let need = Need::new(kind, target, what);
        if !self.needs.contains(&need) {
            self.needs.push(need);
        }
    }

    /// Adds a `shell` need: something the gate cannot judge.
    pub(super) fn need_shell(&mut self, what: impl Into<String>) {
        self.need(GrantKind::Shell, Target::Unknown, what);
    }
}
