//! The crate's one error type.
//!
//! Every variant names what a caller can act on: a file to fix or fetch, a tokenizer
//! that belongs to another model, an image to replace, a device to choose. Messages
//! name the file, key or tensor that is wrong.

use std::path::PathBuf;

/// Everything that can go wrong in Sightline, as a caller sees it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A model file is missing, truncated or corrupt, or lacks a tensor or key.
    #[error("model file {path}: {reason}")]
    ModelFile {
        /// The file (or directory) that is wrong.
        path: PathBuf,
        /// What is wrong with it, naming the tensor or key.
        reason: String,
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
        }
    }
}
