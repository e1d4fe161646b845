//! Reading and writing the Hugging Face cache layout (`refs/<revision>` → commit,
//! `snapshots/<commit>/<file>` → `blobs/<etag>`), every path checked to stay under the root.

use std::path::{Path, PathBuf};

use super::Hub;
use crate::error::Result;
use crate::hub_paths::{
    check_commit, check_file_name, check_revision, ensure_under, join_relative, repo_dir,
};
use crate::input_file::{self, InputKind};

impl Hub {
    /// The cached copy of a file, if any. The repo id, revision and file name are checked
    /// ([`crate::hub_paths`]), so is the commit read back from `refs/<revision>`, and the file
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
        let root = self.cache.path();
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
        ensure_under(self.cache.path(), &ref_path)?;
        let text = input_file::read_string(&ref_path, InputKind::Config)?;
        let commit = text.trim();
        check_commit(commit)?;
        Ok(Some(commit.to_string()))
    }
}

/// Links `pointer` to `blob` with a relative symlink (`../` × `depth` + `blobs/<etag>`), as the
/// Hub cache does, or copies the blob where symlinks are not available.
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
