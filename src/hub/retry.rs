//! Retries with exponential backoff for Hub requests: connection errors, a body cut short,
//! HTTP 429 and 5xx are tried again; `Retry-After` is honoured up to a bound.

use std::time::Duration;

#[cfg(feature = "download")]
use super::download_error::DownloadError;

/// How Hub requests are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in a row that may fail without a byte of progress before the error is returned
    /// (at least 1). A try that resumed a download and received bytes starts the count anew.
    pub attempts: u32,
    /// Wait before the first retry; it doubles with each failure in a row.
    pub first_delay: Duration,
    /// The longest wait between tries that the backoff reaches.
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured; a longer one ends the retries at once with an
    /// error that says how long the Hub asked to wait.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    /// 5 tries; waits of 1, 2, 4 and 8 s; `Retry-After` up to a minute.
    fn default() -> Self {
        Self {
            attempts: 5,
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

#[cfg(feature = "download")]
impl RetryPolicy {
    /// The wait after the `failures`-th failure in a row (1-based).
    fn backoff(&self, failures: u32) -> Duration {
        let factor = 1u32 << failures.saturating_sub(1).min(16);
        self.first_delay.saturating_mul(factor).min(self.max_delay)
    }
}

#[cfg(feature = "download")]
/// Longest run of tries whose every one made progress: a server that sends a few bytes and
/// cuts every connection still ends.
const MAX_TRIES_WITH_PROGRESS: u32 = 1000;

/// One try's failure.
#[cfg(feature = "download")]
pub(super) enum Failure {
    /// Try again (after `retry_after` when the server said so). `progressed`: bytes were
    /// received before it failed.
    Transient {
        error: DownloadError,
        retry_after: Option<Duration>,
        progressed: bool,
    },
    /// Trying again cannot help (401, 404, a bad hash, a disk error…).
    Fatal(DownloadError),
}

#[cfg(feature = "download")]
impl From<DownloadError> for Failure {
    fn from(e: DownloadError) -> Self {
        Failure::Fatal(e)
    }
}

#[cfg(feature = "download")]
/// Runs `attempt` until it succeeds, fails for good, or fails `policy.attempts` times in a row
/// without progress. The error returned counts the tries made.
pub(super) fn with_retries<T>(
    policy: &RetryPolicy,
    what: &str,
    mut attempt: impl FnMut() -> Result<T, Failure>,
) -> Result<T, DownloadError> {
    let mut failures = 0u32;
    let mut tries = 0u32;
    loop {
        tries += 1;
        match attempt() {
            Ok(value) => return Ok(value),
            Err(Failure::Fatal(e)) => return Err(e.after_attempts(tries)),
            Err(Failure::Transient {
                error,
                retry_after,
                progressed,
            }) => {
                failures = if progressed { 0 } else { failures + 1 };
                if failures >= policy.attempts.max(1) || tries >= MAX_TRIES_WITH_PROGRESS {
                    return Err(error.after_attempts(tries));
                }
                if retry_after.is_some_and(|after| after > policy.max_retry_after) {
                    return Err(error.after_attempts(tries));
                }
                let wait = match (retry_after, progressed) {
                    (Some(after), _) => after,
                    // A connection cut mid-body resumes at once: the bytes so far are kept.
                    (None, true) => Duration::ZERO,
                    (None, false) => policy.backoff(failures),
                };
                tracing::info!(
                    "{what}: {error}; trying again in {:.1}s (try {} of {})",
                    wait.as_secs_f64(),
                    failures + 1,
                    policy.attempts
                );
                std::thread::sleep(wait);
            }
        }
    }
}

#[cfg(all(test, feature = "download"))]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_first_delay_up_to_the_cap() {
        let p = RetryPolicy::default();
        let waits: Vec<u64> = (1..=7).map(|n| p.backoff(n).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(p.backoff(u32::MAX), p.max_delay);
    }

    fn transient(progressed: bool) -> Failure {
        Failure::Transient {
            error: DownloadError::Status {
                status: 503,
                attempts: 1,
            },
            retry_after: Some(Duration::ZERO),
            progressed,
        }
    }

    #[test]
    fn failures_without_progress_end_after_the_policys_attempts_and_are_counted() {
        let policy = RetryPolicy {
            attempts: 3,
            ..RetryPolicy::default()
        };
        let mut calls = 0;
        let result: Result<(), _> = with_retries(&policy, "test", || {
            calls += 1;
            Err(transient(false))
        });
        assert_eq!(calls, 3);
        assert!(matches!(
            result,
            Err(DownloadError::Status {
                status: 503,
                attempts: 3
            })
        ));
    }

    #[test]
    fn progress_restarts_the_count_and_a_fatal_error_stops_at_once() {
        let policy = RetryPolicy {
            attempts: 2,
            ..RetryPolicy::default()
        };
        let mut calls = 0;
        let result = with_retries(&policy, "test", || {
            calls += 1;
            match calls {
                1..=4 => Err(transient(true)),
                5 => Err(transient(false)),
                _ => Ok(calls),
            }
        });
        assert!(matches!(result, Ok(6)));
        let mut calls = 0;
        let result: Result<(), _> = with_retries(&policy, "test", || {
            calls += 1;
            Err(Failure::Fatal(DownloadError::NotBuilt))
        });
        assert_eq!(calls, 1);
        assert!(matches!(result, Err(DownloadError::NotBuilt)));
    }

    #[test]
    fn a_retry_after_beyond_the_bound_ends_the_retries() {
        let policy = RetryPolicy::default();
        let mut calls = 0;
        let result: Result<(), _> = with_retries(&policy, "test", || {
            calls += 1;
            Err(Failure::Transient {
                error: DownloadError::RateLimited {
                    attempts: 1,
                    retry_after: Some(3600),
                },
                retry_after: Some(Duration::from_secs(3600)),
                progressed: false,
            })
        });
        assert_eq!(calls, 1);
        assert!(matches!(
            result,
            Err(DownloadError::RateLimited {
                retry_after: Some(3600),
                ..
            })
        ));
    }
}
