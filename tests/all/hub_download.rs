//! Downloads against a stand-in Hub on loopback (`hub_support`), which answers as the real Hub
//! does: weight files by a 302 to a storage server on a second address, with `X-Repo-Commit`,
//! `X-Linked-Etag` and `X-Linked-Size`. Resume, retries, hash and size checks, locking, and
//! the one-line errors for gated repos, missing files and rate limits.

use std::error::Error as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use sightline::hub::{DownloadError, Hub, RetryPolicy};

use crate::hub_support::{seeded_bytes, sha256_hex, RepoFile, StandInHub, StorageFaults, COMMIT};

const REPO: &str = "someone/Tiny-VL-GGUF";
const WEIGHTS: &str = "Tiny-VL-Q4_K_M.gguf";
/// Big enough for many reads and a cut in the middle; small enough to be quick.
const WEIGHTS_BYTES: usize = 600 * 1024;
/// "About one file": what the storage sent, over the file's size, when a download resumes.
const ONE_FILE_TOLERANCE: f64 = 1.05;

/// Retries without waiting long: the tests script the faults, so backoff only costs time.
fn quick_retries(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        attempts,
        first_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        max_retry_after: Duration::from_secs(2),
    }
}

fn weights() -> Vec<u8> {
    seeded_bytes(WEIGHTS_BYTES, 29)
}

/// A stand-in with one GGUF repo: text weights, an mmproj and a small config (not LFS).
fn stand_in(token: Option<&str>) -> anyhow::Result<StandInHub> {
    let hub = StandInHub::start()?;
    hub.add_repo(
        REPO,
        token,
        &[
            (
                WEIGHTS,
                RepoFile {
                    bytes: weights(),
                    lfs: true,
                },
            ),
            (
                "mmproj-Tiny-VL-F16.gguf",
                RepoFile {
                    bytes: seeded_bytes(64 * 1024, 7),
                    lfs: true,
                },
            ),
            (
                "config.json",
                RepoFile {
                    bytes: b"{\"small\": true}".to_vec(),
                    lfs: false,
                },
            ),
        ],
    );
    Ok(hub)
}

fn client(server: &StandInHub, cache: &Path) -> Hub {
    Hub::from_env()
        .with_cache_dir(cache.to_path_buf())
        .with_offline(false)
        .with_endpoint(Some(server.url.clone()))
        .with_token(None)
        .with_progress(false)
        .with_retry(quick_retries(4))
}

fn blobs_dir(cache: &Path) -> std::path::PathBuf {
    cache
        .join(format!("models--{}", REPO.replace('/', "--")))
        .join("blobs")
}

/// The names in `blobs/`, sorted.
fn blob_names(cache: &Path) -> anyhow::Result<Vec<String>> {
    let dir = blobs_dir(cache);
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<anyhow::Result<_>>()?;
    names.sort();
    Ok(names)
}

/// The `DownloadError` behind a `fetch` error.
fn download_error(err: &sightline::Error) -> anyhow::Result<&DownloadError> {
    err.source()
        .and_then(|s| s.downcast_ref::<DownloadError>())
        .with_context(|| format!("no DownloadError behind {err:?}"))
}

#[test]
fn weights_follow_the_redirect_into_blob_and_snapshot_with_the_hubs_commit() -> anyhow::Result<()> {
    let server = stand_in(None)?;
    let cache = tempfile::tempdir()?;
    let hub = client(&server, cache.path());
    let path = hub.fetch("tiny", REPO, "main", WEIGHTS)?;
    assert_eq!(std::fs::read(&path)?, weights());
    let snapshot = cache
        .path()
        .join(format!("models--{}", REPO.replace('/', "--")))
        .join("snapshots")
        .join(COMMIT);
    assert_eq!(path, snapshot.join(WEIGHTS));
    assert_eq!(blob_names(cache.path())?, vec![sha256_hex(&weights())]);
    // A small file (not LFS) comes straight from the Hub; the cache answers the second time.
    let config = hub.fetch("tiny", REPO, "main", "config.json")?;
    assert_eq!(std::fs::read(&config)?, b"{\"small\": true}");
    let requests = server.seen(|s| s.paths.len());
    assert_eq!(hub.fetch("tiny", REPO, "main", WEIGHTS)?, path);
    assert_eq!(
        server.seen(|s| s.paths.len()),
        requests,
        "the cache hit asked the network"
    );
    assert!(!server.seen(|s| s.authorization_at_storage));
    Ok(())
}

#[test]
fn a_connection_cut_at_40_percent_is_resumed_fetching_about_one_file() -> anyhow::Result<()> {
    let server = stand_in(None)?;
    let cut = (WEIGHTS_BYTES as u64) * 4 / 10;
    server.storage_faults(StorageFaults {
        cut_once_after: Some(cut),
        ..StorageFaults::default()
    });
    let cache = tempfile::tempdir()?;
    let path = client(&server, cache.path()).fetch("tiny", REPO, "main", WEIGHTS)?;
    assert_eq!(std::fs::read(&path)?, weights());
    let sent = server.storage_bytes() as f64;
    assert!(
        sent <= WEIGHTS_BYTES as f64 * ONE_FILE_TOLERANCE,
        "the storage sent {sent} bytes for a {WEIGHTS_BYTES}-byte file"
    );
    // The second request asked for the rest, from where the cut left the part.
    let ranges = server.seen(|s| s.storage_ranges.clone());
    assert_eq!(ranges.len(), 2, "{ranges:?}");
    assert_eq!(ranges[0], None);
    assert_eq!(ranges[1], Some(format!("bytes={cut}-")));
    assert_eq!(blob_names(cache.path())?, vec![sha256_hex(&weights())]);
    Ok(())
}

#[test]
fn a_part_left_by_a_killed_pull_is_resumed_not_fetched_again() -> anyhow::Result<()> {
    let server = stand_in(None)?;
    let cache = tempfile::tempdir()?;
    let blobs = blobs_dir(cache.path());
    std::fs::create_dir_all(&blobs)?;
    let kept = WEIGHTS_BYTES * 4 / 10;
    let part = blobs.join(format!("{}.incomplete", sha256_hex(&weights())));
    std::fs::write(&part, &weights()[..kept])?;
    let path = client(&server, cache.path()).fetch("tiny", REPO, "main", WEIGHTS)?;
    assert_eq!(std::fs::read(&path)?, weights());
    assert_eq!(server.storage_bytes(), (WEIGHTS_BYTES - kept) as u64);
    assert!(!part.exists());
    Ok(())
}

#[test]
fn a_truncated_file_never_lands_in_the_cache() -> anyhow::Result<()> {
    let server = stand_in(None)?;
    // Every answer is a complete HTTP response of half the file: only the announced size
    // (X-Linked-Size) shows that it is short.
    server.storage_faults(StorageFaults {
        always_short: Some(WEIGHTS_BYTES as u64 / 2),
        ..StorageFaults::default()
    });
    let cache = tempfile::tempdir()?;
    let hub = client(&server, cache.path());
    let err = hub
        .fetch("tiny", REPO, "main", WEIGHTS)
        .err()
        .context("a short file was accepted")?;
    assert!(
        matches!(
            download_error(&err)?,
            DownloadError::Truncated { expected, .. } if *expected == WEIGHTS_BYTES as u64
        ),
        "{err}"
    );
    assert!(hub.cached(REPO, "main", WEIGHTS).is_none());
    let sha = sha256_hex(&weights());
    assert!(!blob_names(cache.path())?.contains(&sha));
    assert!(!err.to_string().contains('\n'), "{err}");
    Ok(())
}

#[test]
fn a_file_with_the_wrong_hash_never_lands_in_the_cache() -> anyhow::Result<()> {
    let server = stand_in(None)?;
    server.storage_faults(StorageFaults {
        wrong_bytes: Some(seeded_bytes(WEIGHTS_BYTES, 30)),
        ..StorageFaults::default()
    });
    let cache = tempfile::tempdir()?;
    let hub = client(&server, cache.path());
    let err = hub
        .fetch("tiny", REPO, "main", WEIGHTS)
        .err()
        .context("bytes with the wrong sha256 were accepted")?;
    let DownloadError::HashMismatch { expected, actual } = download_error(&err)? else {
        anyhow::bail!("expected a hash mismatch, got {err}");
    };
    assert_eq!(expected, &sha256_hex(&weights()));
    assert_eq!(actual, &sha256_hex(&seeded_bytes(WEIGHTS_BYTES, 30)));
    assert!(hub.cached(REPO, "main", WEIGHTS).is_none());
    // Neither the blob nor a part to resume: the bytes are wrong, not short.
    assert_eq!(blob_names(cache.path())?, Vec::<String>::new());
    Ok(())
}

#[test]
fn two_concurrent_pulls_of_one_model_end_with_one_blob_and_both_succeed() -> anyhow::Result<()> {
    let server = stand_in(None)?;
    server.storage_faults(StorageFaults {
        stall_once_after: Some(WEIGHTS_BYTES as u64 / 3),
        ..StorageFaults::default()
    });
    let cache = tempfile::tempdir()?;
    let first = {
        let hub = client(&server, cache.path());
        std::thread::spawn(move || hub.fetch("tiny", REPO, "main", WEIGHTS))
    };
    // The first pull holds the lock, stalled a third of the way in.
    wait_until(|| server.is_stalled())?;
    let second = {
        let hub = client(&server, cache.path());
        std::thread::spawn(move || hub.fetch("tiny", REPO, "main", WEIGHTS))
    };
    // The second has asked the Hub for the file's metadata; it now waits for the lock.
    wait_until(|| {
        server.seen(|s| s.paths.iter().filter(|p| p.contains("/resolve/")).count() >= 2)
    })?;
    server.release();
    let a = first
        .join()
        .map_err(|_| anyhow::anyhow!("first pull panicked"))??;
    let b = second
        .join()
        .map_err(|_| anyhow::anyhow!("second pull panicked"))??;
    assert_eq!(a, b);
    assert_eq!(std::fs::read(&a)?, weights());
    assert_eq!(blob_names(cache.path())?, vec![sha256_hex(&weights())]);
    // Only the first fetched the bytes.
    assert_eq!(server.seen(|s| s.storage_ranges.len()), 1);
    assert_eq!(server.storage_bytes(), WEIGHTS_BYTES as u64);
    Ok(())
}

/// Polls `done` (every 10 ms, at most 30 s: a bound on a broken test, not a timing claim).
fn wait_until(mut done: impl FnMut() -> bool) -> anyhow::Result<()> {
    for _ in 0..3000 {
        if done() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    anyhow::bail!("the stand-in Hub never reached the expected state")
}

#[test]
fn answers_of_429_and_503_are_retried_honouring_retry_after() -> anyhow::Result<()> {
    let server = stand_in(None)?;
    server.fail_hub_requests(&[(429, Some(1)), (503, None)]);
    server.storage_faults(StorageFaults {
        statuses: [(503, Some(0))].into(),
        ..StorageFaults::default()
    });
    let cache = tempfile::tempdir()?;
    let path = client(&server, cache.path()).fetch("tiny", REPO, "main", WEIGHTS)?;
    assert_eq!(std::fs::read(&path)?, weights());
    let resolves = server.seen(|s| s.paths.iter().filter(|p| p.contains("/resolve/")).count());
    // 429, 503, then the metadata; then the bytes' own resolve request, twice (storage 503).
    assert_eq!(resolves, 5);
    assert_eq!(server.seen(|s| s.storage_ranges.len()), 2);

    // A rate limit that does not end: one line naming 429, after the policy's tries.
    server.fail_hub_requests(&[(429, Some(0)); 4]);
    let cache = tempfile::tempdir()?;
    let err = client(&server, cache.path())
        .fetch("tiny", REPO, "main", WEIGHTS)
        .err()
        .context("a rate limit was ignored")?;
    assert!(
        matches!(
            download_error(&err)?,
            DownloadError::RateLimited { attempts: 4, .. }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("HTTP 429"), "{err}");
    Ok(())
}

#[test]
fn a_missing_file_is_named_in_the_error() -> anyhow::Result<()> {
    let server = stand_in(None)?;
    let cache = tempfile::tempdir()?;
    let err = client(&server, cache.path())
        .fetch("tiny", REPO, "main", "no-such.gguf")
        .err()
        .context("a missing file was found")?;
    assert!(matches!(
        download_error(&err)?,
        DownloadError::NotFound { .. }
    ));
    let text = err.to_string();
    assert!(
        text.contains("no-such.gguf") && text.contains("404"),
        "{text}"
    );
    // One request: a 404 is not retried.
    assert_eq!(server.seen(|s| s.paths.len()), 1);
    Ok(())
}

/// `sightline models pull REPO` against the stand-in, with `HF_HOME` = `home`, `HF_TOKEN` when
/// given, and no other Hugging Face setting from this process: (exit code, stderr).
fn pull(server: &StandInHub, home: &Path, token: Option<&str>) -> anyhow::Result<(i32, String)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sightline"));
    cmd.args(["models", "pull", REPO])
        .env("HF_HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("HF_ENDPOINT", &server.url)
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_HUB_CACHE")
        .env_remove("HUGGINGFACE_HUB_CACHE")
        .env_remove("HF_TOKEN_PATH")
        .env_remove("HUGGING_FACE_HUB_TOKEN")
        .env_remove("HF_TOKEN");
    if let Some(token) = token {
        cmd.env("HF_TOKEN", token);
    }
    let out = cmd.output()?;
    let code = out.status.code().context("killed by a signal")?;
    Ok((code, String::from_utf8_lossy(&out.stderr).into_owned()))
}

#[test]
fn hf_token_opens_a_gated_repo_and_its_absence_is_one_clear_line() -> anyhow::Result<()> {
    let server = stand_in(Some("hf_secret"))?;
    let home = tempfile::tempdir()?;

    let (code, stderr) = pull(&server, home.path(), None)?;
    assert_eq!(code, 2, "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let line = lines[0];
    assert!(line.starts_with("error: "), "{line}");
    assert!(line.contains(REPO) && line.contains("gated"), "{line}");
    assert!(
        line.contains("HF_TOKEN") && line.contains("request access"),
        "{line}"
    );

    // A wrong token in the file, the right one in HF_TOKEN: the variable wins.
    std::fs::write(home.path().join("token"), "hf_wrong\n")?;
    let (code, stderr) = pull(&server, home.path(), Some("hf_secret"))?;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !stderr.contains("hf_secret"),
        "the token was printed: {stderr}"
    );
    let blobs = home
        .path()
        .join("hub")
        .join(format!("models--{}", REPO.replace('/', "--")))
        .join("blobs")
        .join(sha256_hex(&weights()));
    assert!(blobs.is_file(), "{}", blobs.display());
    // The token reached the Hub only, never the storage host it redirects to.
    assert!(!server.seen(|s| s.authorization_at_storage));

    // The token file alone (HF_HOME/token) works too, once it holds the right token.
    let other_home = tempfile::tempdir()?;
    std::fs::write(other_home.path().join("token"), "hf_secret\n")?;
    let (code, stderr) = pull(&server, other_home.path(), None)?;
    assert_eq!(code, 0, "{stderr}");

    // A refused token says so, naming where it came from.
    let (code, stderr) = pull(&server, tempfile::tempdir()?.path(), Some("hf_expired"))?;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("refused the token from HF_TOKEN") && !stderr.contains("hf_expired"),
        "{stderr}"
    );
    Ok(())
}

#[test]
fn hf_hub_cache_moves_the_cache() -> anyhow::Result<()> {
    let server = stand_in(None)?;
    let home = tempfile::tempdir()?;
    let elsewhere = tempfile::tempdir()?;
    let out = Command::new(env!("CARGO_BIN_EXE_sightline"))
        .args(["models", "pull", REPO])
        .env("HF_HOME", home.path())
        .env("HF_HUB_CACHE", elsewhere.path())
        .env("XDG_CONFIG_HOME", home.path())
        .env("HF_ENDPOINT", &server.url)
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_TOKEN")
        .output()?;
    assert!(out.status.success(), "{out:?}");
    let repo_dir = format!("models--{}", REPO.replace('/', "--"));
    assert!(elsewhere.path().join(&repo_dir).is_dir());
    assert!(!home.path().join("hub").join(&repo_dir).exists());
    Ok(())
}
