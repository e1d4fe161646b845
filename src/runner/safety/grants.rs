//! Grants: the user's permission for kinds of destructive steps, given outside the goal
//! (`sightline run --allow KIND[:SCOPE]`, a task file's `allow`, a server's start-up flags).
//!
//! Seven kinds ([`GrantKind`]); `delete` and `overwrite` may be scoped to paths with a glob
//! (`--allow delete:~/tmp/**`), the others are all-or-nothing. A grant names what the user
//! allows; nothing in a goal's text adds to it.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::glob::{glob_match, literal_prefix};
use crate::error::{Error, Result};

/// A kind of destructive step, each unlocked by its own grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantKind {
    /// Deleting files or data: `rm`, `shred`, `find -delete`, `git clean`, Shift+Delete or
    /// Delete on a file list, a drag onto the Trash, a Delete/Remove/Empty Trash control.
    Delete,
    /// Replacing what an existing file holds: a `>` redirect or `cp`/`mv`/`ln -f`/`tee` onto
    /// an existing file, `sed -i`, `truncate`, `dd of=`, `git reset --hard`, `git push
    /// --force`, `chmod 000`, an Overwrite/Replace control in a "file exists" dialog.
    Overwrite,
    /// Closing a window, an application or a shell session, which may discard unsaved work:
    /// Alt+F4, Ctrl+W/Q/F4, Ctrl+D in a terminal, `exit`, `kill`, a "Don't Save" control.
    Close,
    /// Sending or publishing to someone else: a Send/Publish control, `git push`, an HTTP
    /// upload (`curl -d`, `wget --post-data`).
    Send,
    /// Spending money or entering a contract: Pay, Buy, Place order, Subscribe, Transfer.
    Pay,
    /// Changing the machine or an account in a way that is hard to undo: shutting down,
    /// package and service changes, disks, users, cron, a factory reset, revoking access,
    /// cancelling a subscription, writing under `/dev`, `/proc`, `/sys`, `/boot`, `/etc`.
    System,
    /// Running a command the gate cannot judge: a command word it cannot resolve, a command
    /// outside its lists, a script, an interpreter's code, text piped into a shell, a paste or
    /// recalled history line it never saw, an alias or function defined in the session.
    Shell,
}

impl GrantKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [GrantKind; 7] = [
        GrantKind::Delete,
        GrantKind::Overwrite,
        GrantKind::Close,
        GrantKind::Send,
        GrantKind::Pay,
        GrantKind::System,
        GrantKind::Shell,
    ];

    /// The name used in `--allow`.
    pub fn name(self) -> &'static str {
        match self {
            GrantKind::Delete => "delete",
            GrantKind::Overwrite => "overwrite",
            GrantKind::Close => "close",
            GrantKind::Send => "send",
            GrantKind::Pay => "pay",
            GrantKind::System => "system",
            GrantKind::Shell => "shell",
        }
    }

    /// Whether a grant of this kind may be scoped to paths.
    pub fn takes_paths(self) -> bool {
        matches!(self, GrantKind::Delete | GrantKind::Overwrite)
    }
}

impl fmt::Display for GrantKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GrantKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let wanted = s.trim().to_ascii_lowercase();
        GrantKind::ALL
            .into_iter()
            .find(|k| k.name() == wanted)
            .ok_or_else(|| {
                Error::invalid_input(format!(
                    "--allow {s:?}: unknown kind; the kinds are {}",
                    kind_list()
                ))
            })
    }
}

fn kind_list() -> String {
    GrantKind::ALL
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a step touches, as far as the gate can tell: the thing a grant's scope is matched
/// against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// One path (absolute, its directories resolved; the last component kept as written, so
    /// deleting a symbolic link is deleting the link).
    Path(PathBuf),
    /// Anything strictly below a directory (a glob such as `~/tmp/*.log`, or what `find DIR
    /// -delete` reaches below `DIR`).
    Inside(PathBuf),
    /// Something the gate cannot name as a path: a path behind a variable, relative to a
    /// working directory it does not know, on another machine, or not a file at all (the
    /// crontab, a window, a payment). Only a grant without a scope covers it.
    Unknown,
}

/// A `--allow` grant: a kind, and for `delete`/`overwrite` optionally the paths it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    kind: GrantKind,
    scope: Option<PathScope>,
}

/// A grant's path scope: the glob as the user wrote it, and expanded (absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PathScope {
    written: String,
    pattern: String,
}

impl Grant {
    /// A grant for every step of `kind`.
    pub fn all(kind: GrantKind) -> Self {
        Self { kind, scope: None }
    }

    /// The kind it grants.
    pub fn kind(&self) -> GrantKind {
        self.kind
    }

    /// The path glob it is limited to, as written (`~/tmp/**`), if any.
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_ref().map(|s| s.written.as_str())
    }

    /// Parses `KIND` or `KIND:GLOB` with `home` for a leading `~`. Errors name the text and
    /// what is wrong: an unknown kind, a scope on a kind that takes none, an empty scope, a
    /// glob that is neither absolute nor under `~`, a `..` component.
    pub fn parse_with_home(spec: &str, home: Option<&Path>) -> Result<Self> {
        let (kind_text, scope_text) = match spec.split_once(':') {
            Some((k, s)) => (k, Some(s)),
            None => (spec, None),
        };
        let kind: GrantKind = kind_text.parse().map_err(|_| {
            Error::invalid_input(format!(
                "--allow {spec:?}: unknown kind {kind_text:?}; the kinds are {}",
                kind_list()
            ))
        })?;
        let Some(scope) = scope_text else {
            return Ok(Self::all(kind));
        };
        if !kind.takes_paths() {
            return Err(Error::invalid_input(format!(
                "--allow {spec:?}: {kind} takes no scope; only delete and overwrite can be \
                 limited to paths (--allow {kind})"
            )));
        }
        let written = scope.trim();
        if written.is_empty() {
            return Err(Error::invalid_input(format!(
                "--allow {spec:?}: the scope after ':' is empty; write a path glob such as \
                 {kind}:~/tmp/**"
            )));
        }
        let expanded = expand_home(written, home).ok_or_else(|| {
            Error::invalid_input(format!(
                "--allow {spec:?}: the scope starts with ~ but HOME is not set"
            ))
        })?;
        if !expanded.starts_with('/') {
            return Err(Error::invalid_input(format!(
                "--allow {spec:?}: the scope must be an absolute path or start with ~/ (a \
                 relative path would depend on a terminal's working directory)"
            )));
        }
        if Path::new(&expanded)
            .components()
            .any(|c| matches!(c, Component::ParentDir))
        {
            return Err(Error::invalid_input(format!(
                "--allow {spec:?}: the scope may not contain '..'"
            )));
        }
        Ok(Self {
            kind,
            scope: Some(PathScope {
                written: written.to_string(),
                pattern: resolve_pattern(&expanded),
            }),
        })
    }

    /// Whether this grant covers a step of `kind` touching `target`.
    pub fn covers(&self, kind: GrantKind, target: &Target) -> bool {
        if kind != self.kind {
            return false;
        }
        let Some(scope) = &self.scope else {
            return true;
        };
        match target {
            Target::Path(p) => p.to_str().is_some_and(|p| glob_match(&scope.pattern, p)),
            Target::Inside(dir) => {
                // Everything strictly below `dir` is covered when the glob is `D/**` with `dir`
                // at or below `D`: no other glob can be shown to cover a whole subtree.
                let Some(base) = scope.pattern.strip_suffix("/**") else {
                    return false;
                };
                if literal_prefix(base).len() != base.len() {
                    return false;
                }
                dir.starts_with(base)
            }
            Target::Unknown => false,
        }
    }
}

impl FromStr for Grant {
    type Err = Error;

    /// Parses `KIND[:GLOB]`, reading `HOME` for a leading `~`.
    fn from_str(s: &str) -> Result<Self> {
        Grant::parse_with_home(s, home_dir().as_deref())
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.scope {
            Some(s) => write!(f, "{}:{}", self.kind, s.written),
            None => write!(f, "{}", self.kind),
        }
    }
}

/// The grants of a run: empty by default, so every destructive step is refused unless the
/// user allows it (or approves it at `--confirm`, or the library's approval callback does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    grants: Vec<Grant>,
}

impl Grants {
    /// No grants.
    pub fn none() -> Self {
        Self::default()
    }

    /// Parses `--allow` values (`delete`, `delete:~/tmp/**`, `close`, …). An unknown kind,
    /// a scope on a kind that takes none or a relative scope is an
    /// [`Error::InvalidInput`] naming the value and the kinds.
    pub fn parse<I, S>(specs: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let home = home_dir();
        let grants = specs
            .into_iter()
            .map(|s| Grant::parse_with_home(s.as_ref(), home.as_deref()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { grants })
    }

    /// Adds a grant.
    pub fn with(mut self, grant: Grant) -> Self {
        self.grants.push(grant);
        self
    }

    /// Whether no grant was given.
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// The grants, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &Grant> {
        self.grants.iter()
    }

    /// Whether some grant covers a step of `kind` touching `target`.
    pub fn allows(&self, kind: GrantKind, target: &Target) -> bool {
        self.grants.iter().any(|g| g.covers(kind, target))
    }
}

/// The user's home directory from `HOME`, if set and absolute.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// `~` and `~/…` with `home`; any other text as it is. `None` when the text needs a home and
/// there is none.
fn expand_home(text: &str, home: Option<&Path>) -> Option<String> {
    if text == "~" || text.starts_with("~/") {
        let home = home?.to_str()?;
        Some(format!("{}{}", home.trim_end_matches('/'), &text[1..]))
    } else {
        Some(text.to_string())
    }
}

/// A glob with the directories of its literal part resolved on disk (symbolic links, `/tmp`
/// → `/private/tmp` on macOS), so it compares with targets resolved the same way.
fn resolve_pattern(expanded: &str) -> String {
    let literal = literal_prefix(expanded);
    // Resolve only up to the last '/' of the literal part: the rest is a name or a glob.
    let Some(slash) = literal.rfind('/') else {
        return expanded.to_string();
    };
    let dir = if slash == 0 { "/" } else { &literal[..slash] };
    match std::fs::canonicalize(dir) {
        Ok(real) => {
            let real = real.to_string_lossy();
            format!("{}{}", real.trim_end_matches('/'), &expanded[slash..])
        }
        Err(_) => expanded.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(spec: &str) -> Result<Grant> {
        Grant::parse_with_home(spec, Some(Path::new("/home/u")))
    }

    #[test]
    fn kinds_parse_and_unknown_kinds_are_refused_with_the_list() -> Result<()> {
        for kind in GrantKind::ALL {
            assert_eq!(grant(kind.name())?.kind(), kind);
        }
        assert_eq!(grant("DELETE")?.kind(), GrantKind::Delete);
        let err = grant("nuke")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("unknown kind") && err.contains("overwrite"),
            "{err}"
        );
        Ok(())
    }

    #[test]
    fn scopes_are_for_paths_only_and_must_be_absolute() {
        for bad in ["close:~/x", "delete:", "delete:tmp/**", "delete:~/a/../b"] {
            assert!(grant(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_scoped_grant_covers_paths_its_glob_matches() -> Result<()> {
        let g = grant("delete:~/tmp/**")?;
        let p = |s: &str| Target::Path(PathBuf::from(s));
        assert!(g.covers(GrantKind::Delete, &p("/home/u/tmp/old.txt")));
        assert!(g.covers(GrantKind::Delete, &p("/home/u/tmp/a/b")));
        assert!(!g.covers(GrantKind::Delete, &p("/home/u")));
        assert!(!g.covers(GrantKind::Delete, &p("/home/u/tmpfile")));
        assert!(!g.covers(GrantKind::Overwrite, &p("/home/u/tmp/old.txt")));
        assert!(g.covers(
            GrantKind::Delete,
            &Target::Inside(PathBuf::from("/home/u/tmp/logs"))
        ));
        assert!(!g.covers(GrantKind::Delete, &Target::Inside(PathBuf::from("/home"))));
        assert!(!g.covers(GrantKind::Delete, &Target::Unknown));
        assert!(grant("delete")?.covers(GrantKind::Delete, &Target::Unknown));
        let one = grant("delete:~/tmp/*.log")?;
        assert!(one.covers(GrantKind::Delete, &p("/home/u/tmp/a.log")));
        assert!(!one.covers(GrantKind::Delete, &p("/home/u/tmp/sub/a.log")));
        assert!(!one.covers(
            GrantKind::Delete,
            &Target::Inside(PathBuf::from("/home/u/tmp"))
        ));
        Ok(())
    }
}
