//! What the cache holds (`sightline models list --cached`) and removing from it
//! (`sightline models rm`). Only the cache's own layout is walked: `models--owner--name`
//! directories (not symlinks), their `refs/`, `snapshots/` and `blobs/`; every path removed is
//! checked to stay under the cache root first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::cache::list_files;
use super::Hub;
use crate::error::{Error, Result};
use crate::hub::paths::{check_commit, check_repo_id, ensure_under, join_relative, repo_dir};
use crate::input_file::{self, InputKind};

/// A model repo in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedRepo {
    /// `owner/name`.
    pub repo: String,
    /// Its directory, `<cache>/models--owner--name`.
    pub path: PathBuf,
    /// Revision (`main`, a tag, `refs/pr/1`) → the commit it was at when fetched.
    pub refs: BTreeMap<String, String>,
    /// The files of every cached snapshot.
    pub files: Vec<CachedFile>,
    /// Bytes of its complete blobs (each counted once, however many snapshots name it).
    pub bytes: u64,
    /// Bytes of partial downloads (`blobs/*.incomplete`) the next pull resumes.
    pub partial_bytes: u64,
}

/// A file of a cached snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedFile {
    /// The commit of the snapshot.
    pub commit: String,
    /// The name inside the repo.
    pub name: String,
    /// Its size (0 when the link is broken).
    pub bytes: u64,
}

/// What a removal removed (or, for a dry run, would remove).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    /// The repos whose whole directory went.
    pub repos: Vec<String>,
    /// Snapshot entries removed (`repo/name`), when single files were removed.
    pub files: Vec<String>,
    /// Bytes freed: blobs no longer named by any snapshot, and partial downloads.
    pub bytes: u64,
}

/// Deepest `refs/` level read (`refs/pr/1` is two).
const MAX_REF_DEPTH: usize = 4;

impl Hub {
    /// Every model repo in the cache, sorted by repo id. An unreadable or odd entry is
    /// skipped (the cache may be shared with other tools); a cache that does not exist is
    /// empty.
    pub fn scan_cache(&self) -> Result<Vec<CachedRepo>> {
        let root = &self.cache_dir;
        let entries = match std::fs::read_dir(root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(root, e)),
        };
        let mut repos = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(repo) = repo_of_dir_name(&name) else {
                continue;
            };
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            repos.push(self.scan_repo(&repo, &entry.path())?);
        }
        repos.sort_by(|a, b| a.repo.cmp(&b.repo));
        Ok(repos)
    }

    fn scan_repo(&self, repo: &str, dir: &Path) -> Result<CachedRepo> {
        let mut refs = BTreeMap::new();
        read_refs(&dir.join("refs"), "", 0, &mut refs);
        let mut files = Vec::new();
        if let Ok(snapshots) = std::fs::read_dir(dir.join("snapshots")) {
            for snap in snapshots.flatten() {
                let commit = snap.file_name().to_string_lossy().into_owned();
                if check_commit(&commit).is_err() || !snap.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let mut names = Vec::new();
                list_files(&snap.path(), &snap.path(), 0, &mut names);
                names.sort();
                for name in names {
                    let path = join_relative(&snap.path(), &name);
                    let bytes = match ensure_under(&self.cache_dir, &path) {
                        Ok(()) => std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
                        Err(_) => 0,
                    };
                    files.push(CachedFile {
                        commit: commit.clone(),
                        name,
                        bytes,
                    });
                }
            }
        }
        let (mut bytes, mut partial_bytes) = (0, 0);
        for (name, size) in blob_sizes(&dir.join("blobs")) {
            if name.ends_with(".incomplete") {
                partial_bytes += size;
            } else {
                bytes += size;
            }
        }
        // Files copied into snapshots (where symlinks are not available) have no blob.
        bytes += files
            .iter()
            .filter(|f| {
                let p = join_relative(&dir.join("snapshots").join(&f.commit), &f.name);
                p.symlink_metadata().is_ok_and(|m| m.is_file())
            })
            .map(|f| f.bytes)
            .sum::<u64>();
        Ok(CachedRepo {
            repo: repo.to_string(),
            path: dir.to_path_buf(),
            refs,
            files,
            bytes,
            partial_bytes,
        })
    }

    /// Removes a repo's whole directory (and its download locks); `None` when it is not
    /// cached. With `dry_run`, only says what would go.
    pub fn remove_repo(&self, repo: &str, dry_run: bool) -> Result<Option<Removed>> {
        check_repo_id(repo)?;
        let dir = repo_dir(&self.cache_dir, repo)?;
        match dir.symlink_metadata() {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::hub(
                    repo,
                    format!(
                        "{} is not a directory; refusing to remove it",
                        dir.display()
                    ),
                ))
            }
            Err(_) => return Ok(None),
        }
        ensure_under(&self.cache_dir, &dir)?;
        let scanned = self.scan_repo(repo, &dir)?;
        if !dry_run {
            std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            let locks = self
                .cache_dir
                .join(".locks")
                .join(dir.file_name().unwrap_or_default());
            if locks.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                ensure_under(&self.cache_dir, &locks)?;
                std::fs::remove_dir_all(&locks).map_err(|e| Error::io(&locks, e))?;
            }
        }
        Ok(Some(Removed {
            repos: vec![repo.to_string()],
            files: Vec::new(),
            bytes: scanned.bytes + scanned.partial_bytes,
        }))
    }

    /// Removes the named files from every cached snapshot of `repo`, and the blobs that only
    /// they named. Other files and blobs stay. With `dry_run`, only says what would go.
    pub fn remove_files(&self, repo: &str, names: &[&str], dry_run: bool) -> Result<Removed> {
        check_repo_id(repo)?;
        let dir = repo_dir(&self.cache_dir, repo)?;
        let mut removed = Removed::default();
        if dir.symlink_metadata().is_err() {
            return Ok(removed);
        }
        ensure_under(&self.cache_dir, &dir)?;
        let scanned = self.scan_repo(repo, &dir)?;
        let snapshots = dir.join("snapshots");
        let blob_of = |f: &CachedFile| {
            let p = join_relative(&snapshots.join(&f.commit), &f.name);
            std::fs::read_link(&p)
                .ok()
                .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
        };
        let (going, staying): (Vec<&CachedFile>, Vec<&CachedFile>) = scanned
            .files
            .iter()
            .partition(|f| names.contains(&f.name.as_str()));
        let kept: BTreeSet<String> = staying.iter().filter_map(|f| blob_of(f)).collect();
        let mut blobs = BTreeSet::new();
        for f in &going {
            let pointer = join_relative(&snapshots.join(&f.commit), &f.name);
            ensure_under(&self.cache_dir, pointer.parent().unwrap_or(&snapshots))?;
            match blob_of(f) {
                Some(blob) if !kept.contains(&blob) => {
                    if blobs.insert(blob) {
                        removed.bytes += f.bytes;
                    }
                }
                Some(_) => {}
                // A copied file (no symlinks here) is its own storage.
                None => removed.bytes += f.bytes,
            }
            if !dry_run {
                std::fs::remove_file(&pointer).map_err(|e| Error::io(&pointer, e))?;
            }
            removed.files.push(format!("{repo}/{}", f.name));
        }
        if !dry_run {
            for blob in &blobs {
                let path = dir.join("blobs").join(blob);
                if path.symlink_metadata().is_ok_and(|m| m.is_file()) {
                    ensure_under(&self.cache_dir, &path)?;
                    std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                }
            }
        }
        Ok(removed)
    }
}

/// `models--owner--name` → `owner/name` (checked), else `None`.
fn repo_of_dir_name(name: &str) -> Option<String> {
    let rest = name.strip_prefix("models--")?;
    let (owner, repo) = rest.split_once("--")?;
    let id = format!("{owner}/{repo}");
    check_repo_id(&id).ok().map(|()| id)
}

/// The refs under `dir`, as `prefix/name` → commit; unreadable or malformed ones skipped.
fn read_refs(dir: &Path, prefix: &str, depth: usize, out: &mut BTreeMap<String, String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let full = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth < MAX_REF_DEPTH {
            read_refs(&entry.path(), &full, depth + 1, out);
        } else if kind.is_file() && !name.starts_with('.') {
            if let Ok(text) = input_file::read_string(&entry.path(), InputKind::Config) {
                let commit = text.trim();
                if check_commit(commit).is_ok() {
                    out.insert(full, commit.to_string());
                }
            }
        }
    }
}

/// `(name, bytes)` of the regular files in `blobs/`.
fn blob_sizes(blobs: &Path) -> Vec<(String, u64)> {
    let Ok(entries) = std::fs::read_dir(blobs) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let meta = e.path().symlink_metadata().ok()?;
            meta.is_file()
                .then(|| (e.file_name().to_string_lossy().into_owned(), meta.len()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_repo_directories_are_repos() {
        assert_eq!(
            repo_of_dir_name("models--Qwen--Qwen3-VL-2B-Instruct-GGUF").as_deref(),
            Some("Qwen/Qwen3-VL-2B-Instruct-GGUF")
        );
        for bad in [
            "datasets--a--b",
            "models--a",
            "models--..--b",
            "models--a--b c",
            ".locks",
        ] {
            assert_eq!(repo_of_dir_name(bad), None, "{bad}");
        }
    }
}
