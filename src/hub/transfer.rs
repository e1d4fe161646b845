//! One blob's bytes (feature `download`): under the blob's lock, into
//! `blobs/<etag>.incomplete`, resumed with a `Range` request from what an earlier try or an
//! earlier (even killed) pull left there, retried on connection errors, 429 and 5xx, checked
//! against the announced size and, for LFS files, the sha256 the Hub gives as the etag; only
//! then renamed to `blobs/<etag>`. A file cut short or with the wrong hash never becomes the
//! blob.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::download_error::DownloadError;
use super::lock::BlobLock;
use super::retry::{with_retries, Failure};
use super::Hub;
use crate::input_file::InputKind;

/// What to fetch for one blob.
pub(super) struct BlobRequest<'a> {
    /// The `resolve` URL (the Hub redirects it to its storage).
    pub url: &'a str,
    /// The repo, for errors.
    pub repo: &'a str,
    /// `file in the Hub repo … at revision …`, for errors and messages.
    pub what: &'a str,
    /// The file name, for the progress bar.
    pub file: &'a str,
    /// The size the Hub announced (`X-Linked-Size`, else the `Content-Range` total).
    pub size: Option<u64>,
    /// The cleaned etag; a 64-digit hex one is the file's sha256 (LFS files).
    pub etag: &'a str,
}

impl BlobRequest<'_> {
    /// The sha256 to check: the etag when it is one.
    fn sha256(&self) -> Option<String> {
        let e = self.etag;
        (e.len() == 64 && e.bytes().all(|b| b.is_ascii_hexdigit())).then(|| e.to_lowercase())
    }
}

/// Copy buffer; also the granularity of progress updates.
const CHUNK: usize = 1 << 16;

impl Hub {
    /// Makes `blobs/<etag>` (see the module docs) and returns its path. `locks` is the repo's
    /// lock directory.
    pub(super) fn fetch_blob(
        &self,
        blobs: &Path,
        locks: &Path,
        req: &BlobRequest<'_>,
    ) -> Result<PathBuf, DownloadError> {
        let blob = blobs.join(req.etag);
        if blob.is_file() {
            return Ok(blob);
        }
        let _lock = BlobLock::acquire(
            &locks.join(format!("{}.lock", req.etag)),
            req.file,
            self.progress,
        )?;
        // Another pull may have finished it while this one waited.
        if blob.is_file() {
            return Ok(blob);
        }
        let part = blobs.join(format!("{}.incomplete", req.etag));
        let bar = self.progress_bar(req);
        let result = with_retries(&self.retry, &format!("downloading {}", req.what), || {
            self.transfer(&part, req, &bar)
        });
        bar.finish_and_clear();
        if let Err(e) = result {
            if matches!(e, DownloadError::TooLarge { .. }) {
                let _ = std::fs::remove_file(&part);
            }
            return Err(e);
        }
        if let Some(expected) = req.sha256() {
            let actual = sha256_of(&part)?;
            if actual != expected {
                let _ = std::fs::remove_file(&part);
                return Err(DownloadError::HashMismatch { expected, actual });
            }
        }
        std::fs::rename(&part, &blob).map_err(|e| DownloadError::io(&blob, e))?;
        Ok(blob)
    }

    fn progress_bar(&self, req: &BlobRequest<'_>) -> indicatif::ProgressBar {
        if !self.progress {
            return indicatif::ProgressBar::hidden();
        }
        let bar = indicatif::ProgressBar::new(req.size.unwrap_or(0));
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
        ) {
            bar.set_style(style);
        }
        bar.set_message(req.file.to_string());
        bar
    }

    /// One try: asks for the bytes after what `part` holds and appends them.
    fn transfer(
        &self,
        part: &Path,
        req: &BlobRequest<'_>,
        bar: &indicatif::ProgressBar,
    ) -> Result<(), Failure> {
        let limit = req.size.unwrap_or(InputKind::ModelWeights.max_bytes());
        let mut offset = match part.metadata() {
            Ok(m) => m.len(),
            Err(_) => 0,
        };
        if offset > limit {
            truncate(part)?;
            offset = 0;
        }
        if req.size == Some(offset) && offset > 0 {
            return Ok(());
        }
        let mut request = self.get(&self.data_agent(), req.url);
        if offset > 0 {
            request = request.set("Range", &format!("bytes={offset}-"));
        }
        let start_again = |status| -> Result<(), Failure> {
            truncate(part)?;
            Err(Failure::Transient {
                error: DownloadError::Status {
                    status,
                    attempts: 1,
                },
                retry_after: None,
                progressed: false,
            })
        };
        let response = match request.call() {
            Ok(response) => response,
            // The part is longer than the file: start again.
            Err(ureq::Error::Status(416, _)) => return start_again(416),
            Err(e) => return Err(self.classify(e, req.repo, req.what)),
        };
        match response.status() {
            206 if content_range_start(response.header("Content-Range")) == Some(offset) => {}
            // A range that does not start where the part ends: start again.
            206 => return start_again(206),
            // The server ignored the range (or none was asked): the body is the whole file.
            200 => {
                if offset > 0 {
                    truncate(part)?;
                    offset = 0;
                }
            }
            status => {
                return Err(Failure::Fatal(DownloadError::Status {
                    status,
                    attempts: 1,
                }))
            }
        }
        bar.set_position(offset);
        let mut out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(part)
            .map_err(|e| DownloadError::io(part, e))?;
        let mut body = response.into_reader().take(limit - offset + 1);
        let mut buf = vec![0u8; CHUNK];
        let mut received: u64 = 0;
        loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    return Err(Failure::Transient {
                        error: DownloadError::Network {
                            attempts: 1,
                            source: Box::new(e),
                        },
                        retry_after: None,
                        progressed: received > 0,
                    })
                }
            };
            if offset + received + n as u64 > limit {
                return Err(Failure::Fatal(DownloadError::TooLarge { limit }));
            }
            out.write_all(&buf[..n])
                .map_err(|e| DownloadError::io(part, e))?;
            received += n as u64;
            bar.inc(n as u64);
        }
        out.flush().map_err(|e| DownloadError::io(part, e))?;
        match req.size {
            Some(size) if offset + received < size => Err(Failure::Transient {
                error: DownloadError::Truncated {
                    expected: size,
                    received: offset + received,
                    attempts: 1,
                },
                retry_after: None,
                progressed: received > 0,
            }),
            _ => Ok(()),
        }
    }
}

fn truncate(part: &Path) -> Result<(), DownloadError> {
    match OpenOptions::new().write(true).open(part) {
        Ok(f) => f.set_len(0).map_err(|e| DownloadError::io(part, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(DownloadError::io(part, e)),
    }
}

/// The first byte of `bytes START-END/TOTAL`.
fn content_range_start(header: Option<&str>) -> Option<u64> {
    let range = header?.trim().strip_prefix("bytes ")?;
    range.split('-').next()?.trim().parse().ok()
}

/// The sha256 of a file, in lower-case hex.
fn sha256_of(path: &Path) -> Result<String, DownloadError> {
    let mut file = File::open(path).map_err(|e| DownloadError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| DownloadError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_start_reads_the_first_byte_and_refuses_junk() {
        assert_eq!(content_range_start(Some("bytes 400-999/1000")), Some(400));
        assert_eq!(content_range_start(Some("bytes */1000")), None);
        assert_eq!(content_range_start(Some("items 1-2/3")), None);
        assert_eq!(content_range_start(None), None);
    }

    #[test]
    fn only_a_64_digit_hex_etag_is_taken_as_a_sha256() {
        let req = |etag| BlobRequest {
            url: "",
            repo: "",
            what: "",
            file: "",
            size: None,
            etag,
        };
        let sha = "a".repeat(64);
        assert_eq!(req(&sha).sha256(), Some(sha.clone()));
        // A git blob id (the etag of small files) is not checked.
        let git_id = "a".repeat(40);
        assert_eq!(req(&git_id).sha256(), None);
        let not_hex = "g".repeat(64);
        assert_eq!(req(&not_hex).sha256(), None);
    }
}
