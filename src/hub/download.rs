//! Fetching one file: from the cache when present, else (unless offline) from the Hub into
//! the cache layout (`blobs/<etag>`, `snapshots/<commit>/<file>` → the blob,
//! `refs/<revision>` = the commit), as `huggingface_hub` lays it out.
//!
//! The Hub's first answer to `resolve/<revision>/<file>` carries the metadata: `X-Repo-Commit`,
//! and for LFS files (weights) a redirect to its storage with `X-Linked-Etag` (the sha256) and
//! `X-Linked-Size`; for small files the `ETag` and the `Content-Range` of a one-byte range.
//! The bytes are then fetched by [`transfer`](super::transfer).

#[cfg(feature = "download")]
use std::path::Path;
use std::path::PathBuf;

use super::download_error::DownloadError;
use super::Hub;
use crate::error::{Error, Result};
use crate::hub::paths::{check_file_name, check_repo_id, check_revision};

impl Hub {
    /// The Hub's address: `HF_ENDPOINT` or the Hub.
    #[cfg(feature = "download")]
    pub(super) fn endpoint(&self) -> String {
        self.endpoint
            .clone()
            .unwrap_or_else(|| super::env::DEFAULT_ENDPOINT.to_string())
            .trim_end_matches('/')
            .to_string()
    }

    /// Fetches one file: from the cache, else (unless offline) from the Hub with a progress bar.
    /// `model` names the model in errors. Every name that becomes a path is checked first
    /// (see [`crate::hub::paths`]); a mirror's bad answer is an error, and nothing is written
    /// outside the cache directory. A failed download is an [`Error::Hub`] whose source is a
    /// [`DownloadError`] saying why (gated repo, missing file, rate limit, network…).
    pub fn fetch(&self, model: &str, repo: &str, revision: &str, file: &str) -> Result<PathBuf> {
        check_repo_id(repo)?;
        check_revision(revision)?;
        check_file_name(file)?;
        if let Some(p) = self.cached_checked(repo, revision, file)? {
            return Ok(p);
        }
        if self.network_off() {
            return Err(Error::hub(
                model,
                format!(
                    "{file} from the Hub repo {repo} (revision {revision}) is not in the local \
                     cache {} and {}; fetch it where there is network access \
                     (`sightline models pull {model}`, or `huggingface-cli download {repo} {file}`) \
                     and copy the cache here{}",
                    self.cache_dir.display(),
                    self.why_offline(),
                    if self.offline {
                        ", or unset HF_HUB_OFFLINE"
                    } else {
                        ""
                    }
                ),
            ));
        }
        self.download(repo, revision, file).map_err(|e| {
            Error::hub_caused(
                model,
                format!("downloading {file} from the Hub repo {repo} (revision {revision}) failed"),
                e,
            )
        })
    }

    /// Whether the network is off: `HF_HUB_OFFLINE`, or a build without downloads.
    pub(super) fn network_off(&self) -> bool {
        self.offline || !cfg!(feature = "download")
    }

    /// Why the network is off, for the errors that say a file is not cached.
    pub(super) fn why_offline(&self) -> &'static str {
        if self.offline {
            "HF_HUB_OFFLINE is set"
        } else {
            "this build cannot download (built without the `download` feature)"
        }
    }

    #[cfg(not(feature = "download"))]
    fn download(&self, _: &str, _: &str, _: &str) -> std::result::Result<PathBuf, DownloadError> {
        Err(DownloadError::NotBuilt)
    }

    /// Downloads a file into the cache after checking the commit and etag the Hub sends.
    #[cfg(feature = "download")]
    fn download(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
    ) -> std::result::Result<PathBuf, DownloadError> {
        use super::retry::with_retries;
        use super::transfer::BlobRequest;
        use crate::hub::paths::{check_commit, clean_etag, ensure_under, repo_dir};

        let url = format!(
            "{}/{repo}/resolve/{}/{file}",
            self.endpoint(),
            revision.replace('/', "%2F")
        );
        let what = format!("{file} in the Hub repo {repo} at revision {revision}");
        let meta = with_retries(&self.retry, &format!("asking the Hub for {what}"), || {
            self.metadata(&url, repo, &what)
        })?;
        check_commit(&meta.commit)?;
        let etag = clean_etag(&meta.etag)?;
        let limit = crate::input_file::InputKind::ModelWeights.max_bytes();
        if meta.size.is_some_and(|size| size > limit) {
            return Err(DownloadError::TooLarge { limit });
        }

        let root = &self.cache_dir;
        std::fs::create_dir_all(root).map_err(|e| DownloadError::io(root, e))?;
        let dir = repo_dir(root, repo)?;
        let blobs = dir.join("blobs");
        let locks = root
            .join(".locks")
            .join(dir.file_name().unwrap_or_default());
        for d in [&blobs, &locks] {
            ensure_under(root, d)?;
            std::fs::create_dir_all(d).map_err(|e| DownloadError::io(d, e))?;
            ensure_under(root, d)?;
        }
        let blob = self.fetch_blob(
            &blobs,
            &locks,
            &BlobRequest {
                url: &url,
                repo,
                what: &what,
                file,
                size: meta.size,
                etag: &etag,
            },
        )?;
        ensure_under(root, &blob)?;
        let pointer = self.write_pointer(&dir, &meta.commit, file, &blob)?;
        self.write_ref(&dir, revision, &meta.commit)?;
        Ok(pointer)
    }

    /// The Hub's metadata for a file: a one-byte GET of the `resolve` URL without following
    /// the redirect to storage (relative redirects, which the Hub sends for renamed repos, are
    /// followed here: they stay on the Hub).
    #[cfg(feature = "download")]
    fn metadata(
        &self,
        url: &str,
        repo: &str,
        what: &str,
    ) -> std::result::Result<Metadata, super::retry::Failure> {
        let agent = self.metadata_agent();
        let call = |url: &str| {
            self.get(&agent, url)
                .set("Range", "bytes=0-0")
                .call()
                .map_err(|e| self.classify(e, repo, what))
        };
        let mut response = call(url)?;
        for _ in 0..5 {
            match (response.status(), response.header("Location")) {
                (301..=308, Some(location)) if location.starts_with('/') => {
                    let next = format!("{}{location}", self.endpoint());
                    response = call(&next)?;
                }
                _ => break,
            }
        }
        let header = |name: &str| response.header(name).map(str::to_string);
        let commit =
            header("X-Repo-Commit").ok_or(DownloadError::MissingHeader("X-Repo-Commit"))?;
        let etag = header("X-Linked-Etag")
            .or_else(|| header("ETag"))
            .ok_or(DownloadError::MissingHeader("ETag"))?;
        let size = header("X-Linked-Size")
            .and_then(|s| s.trim().parse::<u64>().ok())
            .or_else(|| {
                header("Content-Range")
                    .and_then(|r| r.rsplit('/').next().and_then(|n| n.trim().parse().ok()))
            });
        Ok(Metadata { commit, etag, size })
    }

    /// `snapshots/<commit>/<file>` → the blob, replaced atomically (a link made beside it and
    /// renamed over it), so two pulls finishing together both leave a valid link.
    #[cfg(feature = "download")]
    fn write_pointer(
        &self,
        dir: &Path,
        commit: &str,
        file: &str,
        blob: &Path,
    ) -> std::result::Result<PathBuf, DownloadError> {
        use super::cache::link_to_blob;
        use crate::hub::paths::{ensure_under, join_relative};

        let root = &self.cache_dir;
        let snapshot = dir.join("snapshots").join(commit);
        let pointer = join_relative(&snapshot, file);
        let pointer_dir = pointer.parent().unwrap_or(&snapshot).to_path_buf();
        ensure_under(root, &pointer_dir)?;
        std::fs::create_dir_all(&pointer_dir).map_err(|e| DownloadError::io(&pointer_dir, e))?;
        ensure_under(root, &pointer_dir)?;
        if pointer.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            return Err(DownloadError::io(
                &pointer,
                std::io::Error::other("a directory is in the way in the cache"),
            ));
        }
        let name = pointer.file_name().unwrap_or_default().to_string_lossy();
        let temp = pointer_dir.join(format!(".{name}.{}.link", unique_suffix()));
        link_to_blob(blob, &temp, file.split('/').count() + 1)
            .map_err(|e| DownloadError::io(&temp, e))?;
        std::fs::rename(&temp, &pointer).map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            DownloadError::io(&pointer, e)
        })?;
        ensure_under(root, &pointer)?;
        Ok(pointer)
    }

    /// `refs/<revision>` = the commit, written beside and renamed into place.
    #[cfg(feature = "download")]
    fn write_ref(
        &self,
        dir: &Path,
        revision: &str,
        commit: &str,
    ) -> std::result::Result<(), DownloadError> {
        use crate::hub::paths::{ensure_under, join_relative};

        let root = &self.cache_dir;
        let ref_path = join_relative(&dir.join("refs"), revision);
        let ref_dir = ref_path.parent().unwrap_or(dir).to_path_buf();
        ensure_under(root, &ref_dir)?;
        std::fs::create_dir_all(&ref_dir).map_err(|e| DownloadError::io(&ref_dir, e))?;
        ensure_under(root, &ref_path)?;
        if ref_path.symlink_metadata().is_ok_and(|m| !m.is_file()) {
            return Err(DownloadError::io(
                &ref_path,
                std::io::Error::other("not a regular file"),
            ));
        }
        let temp = ref_dir.join(format!(".ref.{}", unique_suffix()));
        std::fs::write(&temp, commit).map_err(|e| DownloadError::io(&temp, e))?;
        std::fs::rename(&temp, &ref_path).map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            DownloadError::io(&ref_path, e)
        })
    }
}

/// What the Hub says about a file before its bytes.
#[cfg(feature = "download")]
struct Metadata {
    commit: String,
    etag: String,
    size: Option<u64>,
}

/// A name part no other writer (thread or process) uses at the same time.
#[cfg(feature = "download")]
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
