//! The one way Sightline opens a file a user (or a mirror) handed it.
//!
//! Every input file — `--view`, `--screenshot`, `--history`, `--memory`, `--replay`,
//! `--image`, the tokenizer, config JSONs, model weights, Hub cache blobs — is opened through
//! [`open`] or read through [`read_bytes`] / [`read_string`]:
//!
//! - only a **regular file** is accepted, after symlinks are followed: a FIFO, a device
//!   (`/dev/zero`), a socket or a directory is an error naming the file, and opening never
//!   blocks (a FIFO is opened non-blocking, then refused);
//! - each [`InputKind`] has a **size limit** ([`InputKind::max_bytes`]), checked on the open
//!   file's metadata before anything is read, and the read itself is capped, so a file that
//!   grows while it is read cannot exceed it either.
//!
//! The limits are documented in the README's "Security" section.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// What an input file is, which sets its size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// A planning view JSON (`--view`).
    View,
    /// A history JSON (`--history`).
    History,
    /// A shared-memory JSON (`--memory`).
    Memory,
    /// A replay JSON (`run --replay`).
    Replay,
    /// A screenshot or image (`--screenshot`, `--image`): PNG or JPEG.
    Image,
    /// A `tokenizer.json`, or its gzipped form (the limit is on the file as stored; the
    /// decompressed size has its own cap in the tokenizer loader).
    Tokenizer,
    /// A small config JSON (`config.json`, `preprocessor_config.json`, a safetensors index,
    /// a manifest, a cache `refs/` file).
    Config,
    /// A model weight file (GGUF, safetensors): memory-mapped, never read whole.
    ModelWeights,
}

impl InputKind {
    /// The largest file of this kind Sightline reads.
    pub const fn max_bytes(self) -> u64 {
        match self {
            InputKind::View => 16 * MIB,
            InputKind::History => 64 * MIB,
            InputKind::Memory => 16 * MIB,
            InputKind::Replay => 16 * MIB,
            InputKind::Image => 64 * MIB,
            InputKind::Tokenizer => 64 * MIB,
            InputKind::Config => 16 * MIB,
            InputKind::ModelWeights => 256 * GIB,
        }
    }

    /// The kind in words, for errors.
    pub const fn name(self) -> &'static str {
        match self {
            InputKind::View => "view",
            InputKind::History => "history",
            InputKind::Memory => "memory",
            InputKind::Replay => "replay",
            InputKind::Image => "image",
            InputKind::Tokenizer => "tokenizer",
            InputKind::Config => "config",
            InputKind::ModelWeights => "model file",
        }
    }
}

/// An open that failed: reads `cannot read: {cause}` and keeps the cause as its source.
#[derive(Debug, thiserror::Error)]
#[error("cannot read: {0}")]
struct CannotRead(#[source] std::io::Error);

fn refuse(path: &Path, kind: InputKind, reason: impl std::fmt::Display) -> Error {
    let source = std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("cannot read: {} file {reason}", kind.name()),
    );
    Error::io(path, source)
}

/// Opens `path` for reading if it is a regular file (after symlinks) within `kind`'s size
/// limit. Never blocks on a FIFO. Returns the file and its size in bytes.
pub fn open(path: &Path, kind: InputKind) -> Result<(File, u64)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Opening a FIFO for reading blocks until a writer appears; non-blocking returns at
        // once, and the file-type check below then refuses it.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .map_err(|e| Error::io(path, std::io::Error::new(e.kind(), CannotRead(e))))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    let file_type = meta.file_type();
    if !file_type.is_file() {
        let what = if file_type.is_dir() {
            "a directory"
        } else if is_fifo(&file_type) {
            "a FIFO (named pipe)"
        } else if is_device(&file_type) {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(refuse(
            path,
            kind,
            format!("is {what}; only regular files are read"),
        ));
    }
    if meta.len() > kind.max_bytes() {
        return Err(refuse(
            path,
            kind,
            format!(
                "is {} bytes, over the {} byte limit for this kind of file",
                meta.len(),
                kind.max_bytes()
            ),
        ));
    }
    #[cfg(unix)]
    clear_nonblocking(&file);
    Ok((file, meta.len()))
}

#[cfg(unix)]
fn clear_nonblocking(file: &File) {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a file descriptor we own; failure leaves the flag set, which for a
    // regular file changes nothing (regular files never block).
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
}

#[cfg(unix)]
fn is_fifo(t: &std::fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    t.is_fifo()
}

#[cfg(unix)]
fn is_device(t: &std::fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    t.is_block_device() || t.is_char_device()
}

#[cfg(not(unix))]
fn is_fifo(_: &std::fs::FileType) -> bool {
    false
}

#[cfg(not(unix))]
fn is_device(_: &std::fs::FileType) -> bool {
    false
}

/// Checks `path` as [`open`] does, without reading it (for files another library opens, such
/// as memory-mapped weights).
pub fn check(path: &Path, kind: InputKind) -> Result<u64> {
    open(path, kind).map(|(_, len)| len)
}

/// Reads a whole input file, capped at `kind`'s limit.
pub fn read_bytes(path: &Path, kind: InputKind) -> Result<Vec<u8>> {
    let (file, len) = open(path, kind)?;
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(kind.max_bytes() + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::io(path, e))?;
    if out.len() as u64 > kind.max_bytes() {
        return Err(refuse(
            path,
            kind,
            "grew past its size limit while being read",
        ));
    }
    Ok(out)
}

/// Reads a whole input file as UTF-8 text, capped at `kind`'s limit.
pub fn read_string(path: &Path, kind: InputKind) -> Result<String> {
    let bytes = read_bytes(path, kind)?;
    String::from_utf8(bytes).map_err(|_| refuse(path, kind, "is not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_fifos_are_refused_without_blocking() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes())
            .map_err(|_| Error::invalid_input("nul"))?;
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for p in [
            Path::new("/dev/zero"),
            Path::new("/dev/null"),
            dir.path(),
            &fifo,
        ] {
            let e = read_bytes(p, InputKind::View).err().map(|e| e.to_string());
            assert!(
                e.as_deref()
                    .is_some_and(|m| m.contains(&*p.to_string_lossy())),
                "{p:?}: {e:?}"
            );
        }
        let f = dir.path().join("ok.json");
        std::fs::write(&f, b"{}").map_err(|e| Error::io(&f, e))?;
        assert_eq!(read_string(&f, InputKind::View)?, "{}");
        Ok(())
    }

    /// A file that cannot be opened names it, reads `cannot read: ` and the system's
    /// message, and keeps the system's error as the cause below the I/O error.
    #[test]
    fn a_missing_file_keeps_the_open_error_as_source() -> Result<()> {
        use crate::error::testing::{failure, source_as};
        use std::error::Error as _;
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let missing = dir.path().join("missing.json");
        let err = failure(
            read_bytes(&missing, InputKind::View),
            "reading a missing file",
        )?;
        assert!(
            matches!(&err, Error::Io { path, .. } if path == &missing),
            "{err:?}"
        );
        let wrapper: &std::io::Error = source_as(&err)?;
        assert_eq!(wrapper.kind(), std::io::ErrorKind::NotFound);
        let cause = wrapper
            .source()
            .and_then(|c| c.downcast_ref::<std::io::Error>())
            .ok_or_else(|| Error::internal(format!("no I/O cause below {wrapper:?}")))?;
        assert_eq!(cause.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(
            err.to_string(),
            format!("{}: cannot read: {cause}", missing.display())
        );
        Ok(())
    }
}
