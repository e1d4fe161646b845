//! Paths of a command line: resolved against the home directory and the working directories
//! of the shells at a prompt, their directories resolved on disk; what deleting, replacing
//! and writing them needs.

use std::path::{Component, Path, PathBuf};

use super::walker::{Arg, Cwd, Walker};
use crate::runner::safety::glob::has_glob;
use crate::runner::safety::grants::{GrantKind, Target};
use crate::runner::safety::host::{FileKind, HostFacts};
use crate::runner::safety::refusal::shown;

impl Walker<'_> {
    pub(super) fn home(&self) -> Option<PathBuf> {
        if self.remote {
            None
        } else {
            self.host.home()
        }
    }

    /// The directories a relative path is resolved in, or `None` when unknown.
    fn dirs(&self) -> Option<Vec<PathBuf>> {
        if self.remote {
            return None;
        }
        match &self.cwd {
            Cwd::Dirs(d) => Some(d.clone()),
            Cwd::Unknown => None,
            Cwd::Terminal => self
                .terminal_dirs
                .get_or_init(|| {
                    self.host
                        .shells_at_prompt()
                        .map(|shells| shells.into_iter().map(|s| s.cwd).collect())
                })
                .clone(),
        }
    }

    /// Every absolute path a fixed path may be (one per candidate working directory for a
    /// relative one), its directories resolved; `None` when it cannot be told.
    pub(super) fn resolve(&self, path: &str) -> Option<Vec<PathBuf>> {
        if self.remote || path.is_empty() {
            return None;
        }
        let p = Path::new(path);
        let absolute: Vec<PathBuf> = if p.is_absolute() {
            vec![p.to_path_buf()]
        } else {
            self.dirs()?.into_iter().map(|d| d.join(p)).collect()
        };
        absolute
            .iter()
            .map(|a| resolve_dirs(self.host, a))
            .collect::<Option<Vec<_>>>()
    }

    /// The targets a path argument names (a glob names what is inside its fixed directory).
    pub(super) fn targets(&self, arg: &Arg) -> Vec<Target> {
        match arg {
            Arg::Fixed(s) => match self.resolve(s) {
                Some(paths) => paths.into_iter().map(Target::Path).collect(),
                None => vec![Target::Unknown],
            },
            Arg::Glob(s) => {
                let dir = match s.rfind('/') {
                    Some(0) => "/",
                    Some(i) if !has_glob(&s[..i]) => &s[..i],
                    Some(_) => return vec![Target::Unknown],
                    None => ".",
                };
                match self.resolve(dir) {
                    Some(dirs) => dirs.into_iter().map(Target::Inside).collect(),
                    None => vec![Target::Unknown],
                }
            }
            Arg::Dynamic(_) => vec![Target::Unknown],
            Arg::Under(dirs) => dirs
                .iter()
                .flat_map(|d| [Target::Path(d.clone()), Target::Inside(d.clone())])
                .collect(),
        }
    }

    /// The phrase for a target: `template` with `{}` replaced by the path, "the files in DIR",
    /// or the word as typed.
    fn phrase(template: &str, target: &Target, arg: &Arg) -> String {
        let name = match target {
            Target::Path(p) => shown(p),
            Target::Inside(d) => format!("the files in {}", shown(d)),
            Target::Unknown => arg.text(),
        };
        template.replacen("{}", &name, 1)
    }

    /// Adds `kind` for each target of `arg` (and `system` for a system path).
    fn need_targets(&mut self, kind: GrantKind, arg: &Arg, template: &str) {
        for target in self.targets(arg) {
            let what = Self::phrase(template, &target, arg);
            if let Target::Path(p) | Target::Inside(p) = &target {
                if is_system_path(p) {
                    self.need(GrantKind::System, target.clone(), what.clone());
                }
            }
            self.need(kind, target, what);
        }
    }

    /// A command deletes what `arg` names.
    pub(super) fn delete(&mut self, arg: &Arg, cmd: &str) {
        self.need_targets(GrantKind::Delete, arg, &format!("deleting {{}} with {cmd}"));
    }

    /// A command replaces the contents (or the mode, owner or link) of what `arg` names,
    /// whether or not it exists; `template` says how, with `{}` for the path ("changing the
    /// permissions of {}").
    pub(super) fn modify(&mut self, arg: &Arg, template: &str) {
        self.need_targets(GrantKind::Overwrite, arg, template);
    }

    /// A command writes the file `arg` names, creating or truncating it: creating needs
    /// nothing; an existing file (or one the gate cannot check) needs `overwrite`; a device
    /// or a system path needs `system`. A glob means the files it matches.
    pub(super) fn write_target(&mut self, arg: &Arg, by: &str) {
        if let Some(s) = arg.fixed() {
            if HARMLESS_DEVICES.contains(&s) || is_fd_path(s) {
                return;
            }
        }
        let paths = match arg {
            Arg::Fixed(s) => self.resolve(s),
            Arg::Glob(_) | Arg::Under(_) => {
                self.modify(arg, &format!("overwriting {{}} ({by})"));
                return;
            }
            Arg::Dynamic(_) => None,
        };
        let Some(paths) = paths else {
            let what = match arg {
                Arg::Fixed(s) => format!(
                    "writing {s} ({by}) in a directory the gate cannot see, where a file \
                     of that name may exist"
                ),
                other => format!(
                    "writing to {} ({by}), a file named only when the line runs",
                    other.text()
                ),
            };
            self.need(GrantKind::Overwrite, Target::Unknown, what);
            return;
        };
        for path in paths {
            if is_system_path(&path) {
                self.need(
                    GrantKind::System,
                    Target::Path(path.clone()),
                    format!("writing to {} ({by})", shown(&path)),
                );
                continue;
            }
            match self.host.file_kind(&path) {
                FileKind::Missing | FileKind::Dir => {}
                FileKind::File | FileKind::Special | FileKind::Unknown => self.need(
                    GrantKind::Overwrite,
                    Target::Path(path.clone()),
                    format!("overwriting {} ({by})", shown(&path)),
                ),
            }
        }
    }

    /// Appending keeps what a file holds; only a system path needs a grant.
    pub(super) fn append_target(&mut self, arg: &Arg) {
        if let Some(s) = arg.fixed() {
            if let Some(paths) = self.resolve(s) {
                for p in paths.into_iter().filter(|p| is_system_path(p)) {
                    self.need(
                        GrantKind::System,
                        Target::Path(p.clone()),
                        format!("appending to {}", shown(&p)),
                    );
                }
            }
        }
    }

    /// Whether a fixed path exists as a directory in every candidate working directory
    /// (`Some(false)` when it exists in none, `None` when it cannot be told or differs).
    pub(super) fn is_dir(&self, path: &str) -> Option<bool> {
        let paths = self.resolve(path)?;
        let kinds: Vec<FileKind> = paths.iter().map(|p| self.host.file_kind(p)).collect();
        if kinds.iter().all(|k| *k == FileKind::Dir) {
            Some(true)
        } else if kinds
            .iter()
            .all(|k| *k != FileKind::Dir && *k != FileKind::Unknown)
        {
            Some(false)
        } else {
            None
        }
    }

    /// `cd DIR`: later relative paths may be in `DIR` or where they were (the `cd` may fail).
    pub(super) fn change_dir(&mut self, arg: Option<&Arg>) {
        let target = match arg {
            None => self.home().map(|h| vec![h]),
            Some(a) => a.fixed().and_then(|s| self.resolve(s)),
        };
        self.cwd = match (target, self.dirs()) {
            (Some(mut new), Some(old)) => {
                new.extend(old);
                new.dedup();
                Cwd::Dirs(new)
            }
            _ => Cwd::Unknown,
        };
    }
}

/// Files a redirect may write without touching data.
#[rustfmt::skip]
const HARMLESS_DEVICES: &[&str] = &[
    "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero", "/dev/full",
];

/// `/dev/fd/N`, `/proc/self/fd/N`: an open descriptor, not a file.
fn is_fd_path(s: &str) -> bool {
    ["/dev/fd/", "/proc/self/fd/"]
        .iter()
        .any(|p| s.strip_prefix(p).is_some_and(|n| n.parse::<u32>().is_ok()))
}

/// Directories where writing or deleting changes the machine itself.
const SYSTEM_DIRS: &[&str] = &["/dev", "/proc", "/sys", "/boot", "/etc"];

/// Whether a path is a system directory or below one.
pub(super) fn is_system_path(path: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|d| path.starts_with(d)) || path == Path::new("/")
}

/// A path with the directories above its last component resolved (symbolic links, `.` and
/// `..`) through the longest part that exists; `None` when a `..` follows a part that does
/// not (it cannot be resolved without the file system).
fn resolve_dirs(host: &dyn HostFacts, path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<Component<'_>> = path.components().collect();
    // The last component is kept as written (deleting a link deletes the link), unless it is
    // `.` or `..`, which name a directory to resolve.
    let last = match parts.last() {
        Some(Component::Normal(n)) => {
            let n = n.to_os_string();
            parts.pop();
            Some(n)
        }
        _ => None,
    };
    let mut base = PathBuf::new();
    let mut rest: Vec<Component<'_>> = Vec::new();
    // The longest prefix that exists, resolved by the host.
    for k in (0..=parts.len()).rev() {
        let prefix: PathBuf = parts[..k].iter().collect();
        if prefix.as_os_str().is_empty() {
            continue;
        }
        if let Some(real) = host.canonical(&prefix) {
            base = real;
            rest = parts[k..].to_vec();
            break;
        }
        if k == 1 {
            base = prefix;
            rest = parts[1..].to_vec();
        }
    }
    for c in rest {
        match c {
            Component::Normal(n) => base.push(n),
            Component::CurDir => {}
            // Below a directory that does not exist, `..` cannot be resolved reliably.
            Component::ParentDir => return None,
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    if let Some(n) = last {
        base.push(n);
    }
    Some(base)
}
