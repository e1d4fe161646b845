//! One download of a blob at a time: an exclusive lock on
//! `<cache>/.locks/models--owner--name/<etag>.lock`, where `huggingface_hub` keeps its own
//! (both take `flock` locks on Unix), so two pulls of one model — two Sightline processes, or
//! Sightline and the Hub's own tools — do not write the same partial file. The second waits,
//! then finds the blob the first made.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use super::download_error::DownloadError;

/// An exclusive lock, held until dropped (closing the file releases it, also when the
/// process dies, so a killed pull never leaves a lock behind).
#[derive(Debug)]
pub(super) struct BlobLock {
    _file: File,
}

impl BlobLock {
    /// Takes the lock at `path` (creating the file), waiting for another holder; with
    /// `announce`, a line on stderr naming `what` says why it waits.
    pub(super) fn acquire(path: &Path, what: &str, announce: bool) -> Result<Self, DownloadError> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| DownloadError::io(path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                if announce {
                    eprintln!(
                        "waiting for another download of {what} to finish (lock {})",
                        path.display()
                    );
                }
                tracing::info!("waiting for the lock {}", path.display());
                file.lock().map_err(|e| DownloadError::io(path, e))?;
            }
            Err(TryLockError::Error(e)) => return Err(DownloadError::io(path, e)),
        }
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_until_the_first_drops_the_lock() -> crate::Result<()> {
        let dir = tempfile::tempdir().map_err(|e| crate::Error::io("tempdir", e))?;
        let path = dir.path().join("x.lock");
        let first = BlobLock::acquire(&path, "x", false)
            .map_err(|e| crate::Error::hub("x", e.to_string()))?;
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let got = BlobLock::acquire(&path, "x", false).is_ok();
                let _ = tx.send(got);
            })
        };
        // The waiter cannot get the lock while `first` holds it: no answer yet. (A
        // `recv_timeout` that expires proves nothing about time, only that it is still blocked.)
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(200))
            .is_err());
        drop(first);
        assert!(rx
            .recv()
            .map_err(|e| crate::Error::internal_caused("the waiter's answer", e))?);
        waiter
            .join()
            .map_err(|_| crate::Error::internal("waiter panicked"))?;
        Ok(())
    }
}
