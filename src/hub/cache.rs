//! Reading and writing the Hugging Face cache layout (`refs/<revision>` → commit,
//! `snapshots/<commit>/<file>` → `blobs/<etag>`), every path checked to stay under the root.

use std::path::{Path, PathBuf};

use super::Hub;
use crate::error::Result;
use crate::hub::paths::{
    check_commit, check_file_name, check_revision, ensure_under, join_relative, repo_dir,
};
use crate::input_file::{self, InputKind};

impl Hub {
    /// The cached copy of a file, if any. The repo id, revision and file name are checked
    /// ([`crate::hub::paths`]), so is the commit read back from `refs/<revision>`, and the file
    /// must resolve (symlinks followed) to a regular file under the cache root.
    pub fn cached(&self, repo: &str, revision: &str, file: &str) -> Option<PathBuf> {
        self.cached_checked(repo, revision, file).ok().flatten()
    }

    pub(super) fn cached_checked(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
    ) -> Result<Option<PathBuf>> {
        check_revision(revision)?;
        check_file_name(file)?;
        let root = &self.cache_dir;
        let dir = repo_dir(root, repo)?;
        let Some(commit) = self.cached_commit(&dir, revision)? else {
            return Ok(None);
        };
        let path = join_relative(&dir.join("snapshots").join(&commit), file);
        if path.symlink_metadata().is_err() {
            return Ok(None);
        }
        ensure_under(root, &path)?;
        input_file::check(&path, InputKind::ModelWeights)?;
        Ok(Some(path))
    }

    /// The commit `refs/<revision>` names, checked to be 40 hex digits; `None` when absent.
    pub(super) fn cached_commit(&self, dir: &Path, revision: &str) -> Result<Option<String>> {
        let ref_path = join_relative(&dir.join("refs"), revision);
        if ref_path.symlink_metadata().is_err() {
            return Ok(None);
        }
        ensure_under(&self.cache_dir, &ref_path)?;
        let text = input_file::read_string(&ref_path, InputKind::Config)?;
        let commit = text.trim();
        check_commit(commit)?;
        Ok(Some(commit.to_string()))
    }
}

/// Links `pointer` to `blob` with a relative symlink (`../` × `depth` + `blobs/<etag>`), as the
/// Hub cache does, or copies the blob where symlinks are not available.
#[cfg(feature = "download")]
pub(super) fn link_to_blob(blob: &Path, pointer: &Path, depth: usize) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut target = PathBuf::new();
        for _ in 0..depth {
            target.push("..");
        }
        target.push("blobs");
        target.push(blob.file_name().unwrap_or_default());
        std::os::unix::fs::symlink(target, pointer)
    }
    #[cfg(not(unix))]
    {
        let _ = depth;
        std::fs::copy(blob, pointer).map(|_| ())
    }
}

/// Deepest snapshot directory level listed; the Hub's own repos are a few levels deep.
const MAX_LISTING_DEPTH: usize = 8;

/// The files under a cached snapshot, as `/`-separated relative names. Directory symlinks are
/// not followed (a loop or an escape cannot be walked) and the depth is bounded.
pub(super) fn list_files(root: &Path, dir: &Path, depth: usize, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_real_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_real_dir {
            if depth < MAX_LISTING_DEPTH {
                list_files(root, &path, depth + 1, out);
            }
        } else if is_temporary_link(&entry.file_name().to_string_lossy()) {
            continue;
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// A link being made by a download (`.<name>.<pid>.<n>.link`, renamed into place at once), or
/// one a killed download left: not a file of the snapshot.
fn is_temporary_link(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".link")
}
