//! The files in a Hub repo: the Hub's listing when online, the cached snapshot's when
//! offline; every listed name checked.

use super::cache::list_files;
use super::Hub;
use crate::error::{Error, Result};
use crate::hub::paths::{check_repo_id, check_revision, ensure_under, repo_dir};

impl Hub {
    /// The files in a repo: the Hub's listing when online, the cached snapshot's when offline
    /// or when the Hub cannot be reached and the revision is cached (then after one try, not
    /// the retries). Every listed name is checked ([`check_file_name`]); an unsafe one is an
    /// error.
    pub(super) fn list_repo(&self, model: &str, repo: &str, revision: &str) -> Result<Vec<String>> {
        check_repo_id(repo)?;
        check_revision(revision)?;
        let cached = self.cached_listing(repo, revision)?;
        if self.network_off() {
            return cached.ok_or_else(|| {
                Error::hub(
                    model,
                    format!(
                        "the Hub repo {repo} (revision {revision}) is not in the local cache {} \
                         and {}; run `sightline models pull {model}` with network access first",
                        self.cache_dir.display(),
                        self.why_offline()
                    ),
                )
            });
        }
        self.list_online(model, repo, revision, cached)
    }

    #[cfg(not(feature = "download"))]
    fn list_online(
        &self,
        _: &str,
        _: &str,
        _: &str,
        cached: Option<Vec<String>>,
    ) -> Result<Vec<String>> {
        cached.ok_or_else(|| Error::internal("listing without the download feature"))
    }

    #[cfg(feature = "download")]
    fn list_online(
        &self,
        model: &str,
        repo: &str,
        revision: &str,
        cached: Option<Vec<String>>,
    ) -> Result<Vec<String>> {
        use super::download_error::DownloadError;
        use super::retry::{with_retries, Failure, RetryPolicy};
        use crate::hub::paths::check_file_name;
        use crate::input_file::InputKind;
        use serde::Deserialize;
        use std::io::Read;

        #[derive(Deserialize)]
        struct Sibling {
            rfilename: String,
        }
        #[derive(Deserialize)]
        struct Info {
            siblings: Vec<Sibling>,
        }
        let listing_failed = format!("listing the Hub repo {repo} (revision {revision}) failed");
        let url = format!(
            "{}/api/models/{repo}/revision/{}",
            self.endpoint(),
            revision.replace('/', "%2F")
        );
        let what = format!("the Hub repo {repo} at revision {revision}");
        // With the revision cached, one try: no network means the cache, at once.
        let policy = match cached {
            Some(_) => RetryPolicy {
                attempts: 1,
                ..self.retry
            },
            None => self.retry,
        };
        let limit = InputKind::Config.max_bytes();
        let body = with_retries(&policy, &format!("listing {what}"), || {
            let response = self
                .get(&self.metadata_agent(), &url)
                .call()
                .map_err(|e| self.classify(e, repo, &what))?;
            let mut body = Vec::new();
            response
                .into_reader()
                .take(limit + 1)
                .read_to_end(&mut body)
                .map_err(|e| Failure::Transient {
                    error: DownloadError::Network {
                        attempts: 1,
                        source: Box::new(e),
                    },
                    retry_after: None,
                    progressed: false,
                })?;
            Ok(body)
        });
        let body = match (body, cached) {
            (Ok(body), _) => body,
            (Err(DownloadError::Network { .. }), Some(files)) => {
                tracing::warn!("the Hub cannot be reached; using the cached listing of {what}");
                return Ok(files);
            }
            (Err(e), _) => return Err(Error::hub_caused(model, listing_failed, e)),
        };
        if body.len() as u64 > limit {
            return Err(Error::hub(
                model,
                format!("the listing of the Hub repo {repo} is over {limit} bytes"),
            ));
        }
        let info: Info = serde_json::from_slice(&body).map_err(|e| {
            let reason = format!("the listing of the Hub repo {repo} is not valid");
            Error::hub_caused(model, reason, e)
        })?;
        let files: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
        for f in &files {
            check_file_name(f).map_err(|e| {
                let reason = format!("the listing of the Hub repo {repo} is unsafe");
                Error::hub_caused(model, reason, e)
            })?;
        }
        Ok(files)
    }

    /// The files of the cached snapshot of `revision`, or `None` when it is not cached.
    fn cached_listing(&self, repo: &str, revision: &str) -> Result<Option<Vec<String>>> {
        let dir = repo_dir(&self.cache_dir, repo)?;
        let Some(commit) = self.cached_commit(&dir, revision)? else {
            return Ok(None);
        };
        let snapshot = dir.join("snapshots").join(commit);
        if snapshot.symlink_metadata().is_err() {
            return Ok(None);
        }
        ensure_under(&self.cache_dir, &snapshot)?;
        let mut files = Vec::new();
        list_files(&snapshot, &snapshot, 0, &mut files);
        files.sort();
        Ok(Some(files))
    }
}
