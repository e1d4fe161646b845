//! Fetching one file: from the cache when present, else (unless offline) from the Hub, with
//! a progress bar, into the cache layout.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::cache::link_to_blob;
use super::Hub;
use crate::error::{Error, Result};
use crate::hub_paths::{
    check_commit, check_file_name, check_repo_id, check_revision, clean_etag, ensure_under,
    join_relative, repo_dir,
};
use crate::input_file::InputKind;

impl Hub {
    pub(super) fn endpoint(&self) -> String {
        self.endpoint
            .clone()
            .unwrap_or_else(|| "https://huggingface.co".to_string())
            .trim_end_matches('/')
            .to_string()
    }

    /// A request with the user agent and, when a token is configured, its bearer header.
    pub(super) fn request(&self, agent: &ureq::Agent, url: &str) -> ureq::Request {
        let mut req = agent.get(url).set(
            "User-Agent",
            concat!("sightline/", env!("CARGO_PKG_VERSION")),
        );
        if let Some(token) = self.cache.token() {
            req = req.set("Authorization", &format!("Bearer {token}"));
        }
        req
    }

    pub(super) fn agent(redirects: u32) -> ureq::Agent {
        ureq::AgentBuilder::new()
            .try_proxy_from_env(true)
            .redirects(redirects)
            .timeout_connect(std::time::Duration::from_secs(30))
            .timeout_read(std::time::Duration::from_secs(120))
            .build()
    }

    /// Fetches one file: from the cache, else (unless offline) from the Hub with a progress bar.
    /// `model` names the model in errors. Every name that becomes a path is checked first
    /// (see [`crate::hub_paths`]); a mirror's bad answer is an error, and nothing is written
    /// outside the cache directory.
    pub fn fetch(&self, model: &str, repo: &str, revision: &str, file: &str) -> Result<PathBuf> {
        check_repo_id(repo)?;
        check_revision(revision)?;
        check_file_name(file)?;
        if let Some(p) = self.cached_checked(repo, revision, file)? {
            return Ok(p);
        }
        if self.offline {
            return Err(Error::Hub {
                model: model.into(),
                reason: format!(
                    "{file} from the Hub repo {repo} (revision {revision}) is not in the local \
                     cache {} and HF_HUB_OFFLINE is set; fetch it where there is network access \
                     (`sightline models pull {model}`, or `huggingface-cli download {repo} {file}`) \
                     and copy the cache here, or unset HF_HUB_OFFLINE",
                    self.cache.path().display()
                ),
            });
        }
        self.download(repo, revision, file)
            .map_err(|reason| Error::Hub {
                model: model.into(),
                reason: format!(
                    "downloading {file} from the Hub repo {repo} (revision {revision}) failed: \
                 {reason}; check the network or HF_ENDPOINT, that the repo and file exist, and \
                 for gated repos a token in {}",
                    self.cache.token_path().display()
                ),
            })
    }

    /// Downloads a file into the cache, in the Hub cache layout (`blobs/<etag>`,
    /// `snapshots/<commit>/<file>` → the blob, `refs/<revision>` = the commit), after checking
    /// the etag and commit headers. Errors are sentences for [`Hub::fetch`].
    fn download(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
    ) -> std::result::Result<PathBuf, String> {
        let url = format!(
            "{}/{repo}/resolve/{}/{file}",
            self.endpoint(),
            revision.replace('/', "%2F")
        );
        // The metadata request does not follow redirects: the Hub answers a resolve with a
        // redirect to its storage, and the commit and etag headers are on the first answer.
        let head = Self::agent(0);
        let mut response = self
            .request(&head, &url)
            .set("Range", "bytes=0-0")
            .call()
            .map_err(|e| e.to_string())?;
        for _ in 0..5 {
            match (response.status(), response.header("Location")) {
                (301..=308, Some(location)) if location.starts_with('/') => {
                    let next = format!("{}{location}", self.endpoint());
                    response = self
                        .request(&head, &next)
                        .set("Range", "bytes=0-0")
                        .call()
                        .map_err(|e| e.to_string())?;
                }
                _ => break,
            }
        }
        let header = |name: &str| response.header(name).map(str::to_string);
        let commit = header("x-repo-commit").ok_or("the answer has no x-repo-commit header")?;
        check_commit(&commit).map_err(|e| e.to_string())?;
        let etag = header("x-linked-etag")
            .or_else(|| header("etag"))
            .ok_or("the answer has no etag header")?;
        let etag = clean_etag(&etag).map_err(|e| e.to_string())?;
        let size: Option<u64> = header("Content-Range")
            .and_then(|r| r.rsplit('/').next().and_then(|n| n.trim().parse().ok()));
        drop(response);

        let root = self.cache.path();
        let within = |p: &Path| ensure_under(root, p).map_err(|e| e.to_string());
        std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
        let dir = repo_dir(root, repo).map_err(|e| e.to_string())?;
        let blobs = dir.join("blobs");
        within(&blobs)?;
        std::fs::create_dir_all(&blobs).map_err(|e| format!("{}: {e}", blobs.display()))?;
        within(&blobs)?;
        let blob = blobs.join(&etag);
        within(&blob)?;
        if !blob.is_file() {
            let tmp = blobs.join(format!("{etag}.incomplete.{}", std::process::id()));
            let result = self.download_blob(&url, &tmp, size, file);
            if let Err(e) = result {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
            std::fs::rename(&tmp, &blob).map_err(|e| format!("{}: {e}", blob.display()))?;
        }

        let snapshot = dir.join("snapshots").join(&commit);
        let pointer = join_relative(&snapshot, file);
        let pointer_dir = pointer.parent().unwrap_or(&snapshot).to_path_buf();
        within(&pointer_dir)?;
        std::fs::create_dir_all(&pointer_dir)
            .map_err(|e| format!("{}: {e}", pointer_dir.display()))?;
        within(&pointer_dir)?;
        if let Ok(meta) = pointer.symlink_metadata() {
            if meta.is_dir() {
                return Err(format!("{} is a directory in the cache", pointer.display()));
            }
            std::fs::remove_file(&pointer).map_err(|e| format!("{}: {e}", pointer.display()))?;
        }
        link_to_blob(&blob, &pointer, file.split('/').count() + 1)
            .map_err(|e| format!("{}: {e}", pointer.display()))?;
        within(&pointer)?;

        let ref_path = join_relative(&dir.join("refs"), revision);
        let ref_dir = ref_path.parent().unwrap_or(&dir).to_path_buf();
        within(&ref_dir)?;
        std::fs::create_dir_all(&ref_dir).map_err(|e| format!("{}: {e}", ref_dir.display()))?;
        within(&ref_path)?;
        if ref_path.symlink_metadata().is_ok_and(|m| !m.is_file()) {
            return Err(format!("{} is not a regular file", ref_path.display()));
        }
        std::fs::write(&ref_path, &commit).map_err(|e| format!("{}: {e}", ref_path.display()))?;
        Ok(pointer)
    }

    /// Streams the file's bytes to `tmp`, at most `size` (the length the metadata announced).
    fn download_blob(
        &self,
        url: &str,
        tmp: &Path,
        size: Option<u64>,
        file: &str,
    ) -> std::result::Result<(), String> {
        let response = self
            .request(&Self::agent(5), url)
            .call()
            .map_err(|e| e.to_string())?;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(tmp)
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        let cap = size.unwrap_or(InputKind::ModelWeights.max_bytes());
        let mut reader = response.into_reader().take(cap + 1);
        let mut progress = self.progress.then(DownloadProgress::new);
        if let Some(p) = progress.as_mut() {
            hf_hub::api::Progress::init(p, usize::try_from(cap).unwrap_or(usize::MAX), file);
        }
        let mut buf = vec![0u8; 1 << 16];
        let mut written: u64 = 0;
        loop {
            let n = reader.read(&mut buf).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n])
                .map_err(|e| format!("{}: {e}", tmp.display()))?;
            written += n as u64;
            if let Some(p) = progress.as_mut() {
                hf_hub::api::Progress::update(p, n);
            }
        }
        if let Some(p) = progress.as_mut() {
            hf_hub::api::Progress::finish(p);
        }
        match size {
            Some(s) if written != s => {
                Err(format!("the mirror announced {s} bytes and sent {written}"))
            }
            _ => Ok(()),
        }
    }
}

// ─── Progress ───────────────────────────────────────────────────────────────

/// A download progress bar on stderr (hidden when stderr is not a terminal).
struct DownloadProgress {
    bar: indicatif::ProgressBar,
}

impl DownloadProgress {
    fn new() -> Self {
        Self {
            bar: indicatif::ProgressBar::new(0),
        }
    }
}

impl hf_hub::api::Progress for DownloadProgress {
    fn init(&mut self, size: usize, filename: &str) {
        self.bar.set_length(size as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
        ) {
            self.bar.set_style(style);
        }
        self.bar.set_message(filename.to_string());
    }

    fn update(&mut self, size: usize) {
        self.bar.inc(size as u64);
    }

    fn finish(&mut self) {
        self.bar.finish();
    }
}
