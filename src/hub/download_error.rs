//! Why a download from the Hub failed. It is the `source()` of the [`crate::Error::Hub`] that
//! [`super::Hub::fetch`] returns, so a program can tell a gated repo from a missing file or a
//! network fault (`err.source().and_then(|s| s.downcast_ref::<DownloadError>())`), and each
//! message is one line that says what to do.

use std::path::PathBuf;

use crate::error::BoxError;

/// A failed download or listing (see the module docs).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DownloadError {
    /// No token was sent and the Hub refused: the repo is gated, private or absent.
    #[error(
        "the Hub repo {repo} answered HTTP {status}: it is gated or private (or does not \
         exist), and no token was sent; request access at {page}, then set HF_TOKEN to a \
         read token of that account (or write it to {token_path})"
    )]
    NeedsToken {
        /// The repo.
        repo: String,
        /// 401 or 403.
        status: u16,
        /// The repo's page, where access is requested.
        page: String,
        /// The token file that would have been read.
        token_path: PathBuf,
    },
    /// A token was sent and refused (invalid, expired or revoked).
    #[error(
        "the Hub refused the token from {origin} for {repo} (HTTP 401): it is invalid or \
         expired; make a new read token in your Hugging Face settings and set HF_TOKEN to it"
    )]
    TokenRefused {
        /// The repo.
        repo: String,
        /// Where the token came from (`HF_TOKEN` or the token file).
        origin: String,
    },
    /// A token was sent and is valid, but its account has no access to the repo.
    #[error(
        "the token from {origin} has no access to the Hub repo {repo} (HTTP {status}): it is \
         gated or private; request access at {page} with that account and wait for approval \
         (a fine-grained token also needs read access to gated repos)"
    )]
    NoAccess {
        /// The repo.
        repo: String,
        /// 401 or 403.
        status: u16,
        /// Where the token came from.
        origin: String,
        /// The repo's page, where access is requested.
        page: String,
    },
    /// The file (or, for a listing, the repo or revision) does not exist.
    #[error("{what} was not found (HTTP 404); check the name with `sightline models info`")]
    NotFound {
        /// `model.gguf in the Hub repo owner/name at revision main`, or the repo.
        what: String,
    },
    /// The Hub kept answering 429 (too many requests).
    #[error(
        "the Hub is limiting the rate of requests (HTTP 429{}) and still was after {attempts} \
         tries; wait and try again, and set HF_TOKEN (signed-in users get higher limits)",
        retry_after.map(|s| format!(", retry after {s} s")).unwrap_or_default()
    )]
    RateLimited {
        /// Requests made.
        attempts: u32,
        /// The last `Retry-After`, in seconds, when one was sent.
        retry_after: Option<u64>,
    },
    /// Another status the Hub kept answering (5xx), or one that is not retried (4xx).
    #[error("the Hub answered HTTP {status}{}", tries(*attempts))]
    Status {
        /// The HTTP status.
        status: u16,
        /// Requests made.
        attempts: u32,
    },
    /// The connection failed, timed out or broke.
    #[error("network error{}: {source}", tries(*attempts))]
    Network {
        /// Requests made.
        attempts: u32,
        /// The HTTP client's error.
        #[source]
        source: BoxError,
    },
    /// The body ended before the size the Hub announced, on every try.
    #[error(
        "the download stopped at {received} of {expected} bytes{}; the part is kept and the \
         next pull resumes it",
        tries(*attempts)
    )]
    Truncated {
        /// The announced size.
        expected: u64,
        /// Bytes on disk.
        received: u64,
        /// Requests made.
        attempts: u32,
    },
    /// More bytes than announced, or a file over the model-file size limit.
    #[error("the file is larger than {limit} bytes (the size announced, or the limit for a model file); refusing it")]
    TooLarge {
        /// The announced size, or the model-file size limit.
        limit: u64,
    },
    /// The file's sha256 is not the one the Hub gives as its etag.
    #[error(
        "the downloaded file's sha256 is {actual}, not {expected} as the Hub announced; it was \
         discarded (a corrupting proxy or mirror?)"
    )]
    HashMismatch {
        /// The etag.
        expected: String,
        /// What the bytes hash to.
        actual: String,
    },
    /// A header the Hub always sends is missing (not the Hub, or a broken mirror).
    #[error("the answer has no {0} header; is HF_ENDPOINT a Hugging Face Hub?")]
    MissingHeader(&'static str),
    /// A name from the Hub's answer that cannot be used as a path.
    #[error("{0}")]
    UnsafeAnswer(#[source] Box<crate::Error>),
    /// Reading or writing the cache failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// This build cannot download (the `download` feature is off).
    #[error(
        "this build of Sightline cannot download (built without the `download` feature); put \
         the file in the cache with another tool or build with `--features download`"
    )]
    NotBuilt,
}

/// ` after 3 tries`, or nothing for one.
fn tries(attempts: u32) -> String {
    if attempts > 1 {
        format!(" after {attempts} tries")
    } else {
        String::new()
    }
}

#[cfg(feature = "download")]
impl DownloadError {
    pub(super) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// The same error, counting `attempts` requests (for the errors that are retried).
    pub(super) fn after_attempts(mut self, n: u32) -> Self {
        match &mut self {
            Self::RateLimited { attempts, .. }
            | Self::Status { attempts, .. }
            | Self::Network { attempts, .. }
            | Self::Truncated { attempts, .. } => *attempts = n,
            _ => {}
        }
        self
    }
}

impl From<crate::Error> for DownloadError {
    fn from(e: crate::Error) -> Self {
        Self::UnsafeAnswer(Box::new(e))
    }
}
