//! The crate's one error type.
//!
//! Every variant names what a caller can act on: a file to fix or fetch, a tokenizer
//! that belongs to another model, an image to replace, a device to choose. Messages
//! name the file, key or tensor that is wrong.
//!
//! Errors keep their cause: a variant built from an underlying error (I/O, candle,
//! safetensors, serde_json, a tool that would not start, …) returns it from
//! [`std::error::Error::source`], so a caller can match on the variant and still walk the
//! chain. The message (`Display`) is the same as when the cause was flattened into it, so a
//! program that prints only the top message loses nothing; one that prints the chain should
//! skip a cause the message already ends with (the `sightline` binary does).
//! [`Error::InvalidInput`] is for a caller's input only; a broken invariant (a bug) is
//! [`Error::Internal`].

use std::fmt;
use std::path::PathBuf;

/// An underlying error kept as a cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Writes `: cause` after a message when there is a cause (the message then reads as it did
/// when the cause was formatted into it).
struct CauseSuffix<'a>(&'a Option<BoxError>);

impl fmt::Display for CauseSuffix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(cause) => write!(f, ": {cause}"),
            None => Ok(()),
        }
    }
}

/// Everything that can go wrong in Sightline, as a caller sees it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A model file is missing, truncated or corrupt, or lacks a tensor or key.
    #[error("model file {}: {reason}{}", path.display(), CauseSuffix(source))]
    ModelFile {
        /// The file (or directory) that is wrong.
        path: PathBuf,
        /// What is wrong with it, naming the tensor or key.
        reason: String,
        /// The reader's error, when one was behind it.
        #[source]
        source: Option<BoxError>,
    },
    /// The model's configuration is inconsistent or unsupported.
    #[error("model config: {0}")]
    Config(String),
    /// A tensor has the wrong shape or dtype for the configuration.
    #[error("tensor {name}: {reason}")]
    Tensor {
        /// The tensor's name as stored in the checkpoint.
        name: String,
        /// Expected against found.
        reason: String,
    },
    /// The tokenizer cannot be read, or does not belong to this model.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A screenshot or image cannot be decoded or is out of bounds.
    #[error("image: {0}")]
    Image(String),
    /// The planning view or another caller input is malformed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The per-turn grammar could not be built or compiled.
    #[error("grammar: {0}")]
    Grammar(String),
    /// Decoding produced text that is not a valid move. This is a bug: the grammar
    /// should have made it impossible. The text is attached.
    #[error("decoded text is not a valid move ({reason}): {text}")]
    Decode {
        /// Why it did not parse.
        reason: String,
        /// The full decoded text.
        text: String,
    },
    /// The requested device cannot be used on this machine or build.
    #[error("device {device}: {reason}")]
    Device {
        /// The device as the caller named it.
        device: String,
        /// Why it is unavailable.
        reason: String,
    },
    /// A model could not be resolved or fetched from the Hub or the local cache.
    #[error("model {model}: {reason}")]
    Hub {
        /// The model id, repo or path as given.
        model: String,
        /// What is missing and how to get it.
        reason: String,
    },
    /// A desktop action (capture or input) failed.
    #[error("runner: {0}")]
    Runner(String),
    /// An I/O error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file being read or written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An error from candle's tensor code.
    #[error("tensor computation: {0}")]
    Candle(#[from] candle_core::Error),
    /// An external tool (such as llama.cpp's `llama-bench`) could not be started.
    #[error("starting {tool}: {source}")]
    Process {
        /// The program, as it was named or found.
        tool: String,
        /// Why it did not start.
        #[source]
        source: std::io::Error,
    },
    /// A broken invariant: a bug in Sightline, not a problem with the caller's input or files.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Shorthand for results carrying [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`Error::ModelFile`] for `path`.
    pub fn model_file(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::ModelFile {
            path: path.into(),
            reason: reason.into(),
            source: None,
        }
    }

    /// An [`Error::ModelFile`] for `path` caused by `source` (its message is appended to
    /// `reason` in the display, and it is the error's [`source`](std::error::Error::source)).
    pub fn model_file_caused(
        path: impl Into<PathBuf>,
        reason: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::ModelFile {
            path: path.into(),
            reason: reason.into(),
            source: Some(source.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_caused_model_file_error_reads_as_before_and_keeps_its_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "early end");
        let e = Error::model_file_caused("m.gguf", "tensor t", io);
        assert_eq!(e.to_string(), "model file m.gguf: tensor t: early end");
        let cause = e.source().map(|c| c.to_string());
        assert_eq!(cause.as_deref(), Some("early end"));
        let plain = Error::model_file("m.gguf", "tensor t is missing");
        assert_eq!(plain.to_string(), "model file m.gguf: tensor t is missing");
        assert!(plain.source().is_none());
    }
}
