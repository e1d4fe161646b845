//! The files in a Hub repo: the Hub's listing when online, the cached snapshot's when
//! offline; every listed name checked.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use super::Hub;
use crate::error::{Error, Result};
use crate::hub_paths::{check_file_name, check_repo_id, check_revision, ensure_under, repo_dir};
use crate::input_file::InputKind;

impl Hub {
    /// The files in a repo: the Hub's listing when online, the cached snapshot's when offline.
    /// Every listed name is checked ([`check_file_name`]); an unsafe one is an error.
    pub(super) fn list_repo(&self, model: &str, repo: &str, revision: &str) -> Result<Vec<String>> {
        check_repo_id(repo)?;
        check_revision(revision)?;
        let hub_err = |reason: String| Error::Hub {
            model: model.into(),
            reason,
        };
        if !self.offline {
            #[derive(Deserialize)]
            struct Sibling {
                rfilename: String,
            }
            #[derive(Deserialize)]
            struct Info {
                siblings: Vec<Sibling>,
            }
            let url = format!(
                "{}/api/models/{repo}/revision/{}",
                self.endpoint(),
                revision.replace('/', "%2F")
            );
            let response = self
                .request(&Self::agent(5), &url)
                .call()
                .map_err(|e| hub_err(format!("listing the Hub repo {repo} failed: {e}")))?;
            let mut body = Vec::new();
            response
                .into_reader()
                .take(InputKind::Config.max_bytes() + 1)
                .read_to_end(&mut body)
                .map_err(|e| hub_err(format!("listing the Hub repo {repo} failed: {e}")))?;
            if body.len() as u64 > InputKind::Config.max_bytes() {
                return Err(hub_err(format!(
                    "the listing of the Hub repo {repo} is over {} bytes",
                    InputKind::Config.max_bytes()
                )));
            }
            let info: Info = serde_json::from_slice(&body).map_err(|e| {
                hub_err(format!(
                    "the listing of the Hub repo {repo} is not valid: {e}"
                ))
            })?;
            let files: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
            for f in &files {
                check_file_name(f).map_err(|e| {
                    hub_err(format!("the listing of the Hub repo {repo} is unsafe: {e}"))
                })?;
            }
            return Ok(files);
        }
        let dir = repo_dir(self.cache.path(), repo)?;
        let commit = self.cached_commit(&dir, revision)?.ok_or_else(|| {
            hub_err(format!(
                "the Hub repo {repo} (revision {revision}) is not in the local cache {} and \
                 HF_HUB_OFFLINE is set; run `sightline models pull {model}` with network \
                 access first",
                self.cache.path().display()
            ))
        })?;
        let snapshot = dir.join("snapshots").join(commit);
        ensure_under(self.cache.path(), &snapshot)?;
        let mut files = Vec::new();
        list_files(&snapshot, &snapshot, 0, &mut files);
        files.sort();
        Ok(files)
    }
}

/// Deepest snapshot directory level listed; the Hub's own repos are a few levels deep.
const MAX_LISTING_DEPTH: usize = 8;

/// The files under a cached snapshot, as `/`-separated relative names. Directory symlinks are
/// not followed (a loop or an escape cannot be walked) and the depth is bounded.
fn list_files(root: &Path, dir: &Path, depth: usize, out: &mut Vec<String>) {
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
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}
