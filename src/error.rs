//! The crate's one error type.
//!
//! Every variant names what a caller can act on: a file to fix or fetch, a tokenizer
//! that belongs to another model, an image to replace, a device to choose. Messages
//! name the file, key or tensor that is wrong.
//!
//! Errors keep their cause: a variant built from an underlying error (I/O, candle,
//! safetensors, serde_json, a tool that would not start, …) returns it from
//! [`std::error::Error::source`], so a caller can match on the variant and still walk the
//! chain. The message (`Display`) is the same as when the cause was flattened into it
//! (`reason: cause`, or the cause alone when the reason is empty), so a program that prints
//! only the top message loses nothing; one that prints the chain should skip a cause the
//! message already ends with (the `sightline` binary does). Each such variant has two
//! constructors, `Error::image(reason)` and `Error::image_caused(reason, cause)`, and the
//! same for the others.
//! [`Error::InvalidInput`] is for a caller's input only; a broken invariant (a bug) is
//! [`Error::Internal`].

use std::fmt;
use std::path::PathBuf;

/// An underlying error kept as a cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A reason followed by its cause, `reason: cause` (or the cause alone when the reason is
/// empty), so a message reads as it did when the cause was formatted into it.
struct ReasonAndCause<'a>(&'a str, &'a Option<BoxError>);

impl fmt::Display for ReasonAndCause<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self(reason, cause) = self;
        match cause {
            Some(cause) if reason.is_empty() => write!(f, "{cause}"),
            Some(cause) => write!(f, "{reason}: {cause}"),
            None => f.write_str(reason),
        }
    }
}

/// Everything that can go wrong in Sightline, as a caller sees it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A model file is missing, truncated or corrupt, or lacks a tensor or key.
    #[error("model file {}: {}", path.display(), ReasonAndCause(reason, source))]
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
    #[error("model config: {}", ReasonAndCause(reason, source))]
    Config {
        /// What is inconsistent, naming the key.
        reason: String,
        /// The parser's error, when one was behind it.
        #[source]
        source: Option<BoxError>,
    },
    /// A tensor has the wrong shape or dtype for the configuration, or cannot be
    /// converted to the type asked for.
    #[error("tensor {name}: {}", ReasonAndCause(reason, source))]
    Tensor {
        /// The tensor's name as stored in the checkpoint.
        name: String,
        /// Expected against found.
        reason: String,
        /// The tensor library's error, when one was behind it.
        #[source]
        source: Option<BoxError>,
    },
    /// The tokenizer cannot be read, or does not belong to this model.
    #[error("tokenizer: {}", ReasonAndCause(reason, source))]
    Tokenizer {
        /// What is wrong, naming the file or token.
        reason: String,
        /// The tokenizer library's (or reader's) error, when one was behind it.
        #[source]
        source: Option<BoxError>,
    },
    /// A screenshot or image cannot be decoded or is out of bounds.
    #[error("image: {}", ReasonAndCause(reason, source))]
    Image {
        /// What is wrong with it.
        reason: String,
        /// The image decoder's (or encoder's) error, when one was behind it.
        #[source]
        source: Option<BoxError>,
    },
    /// The planning view or another caller input is malformed.
    #[error("invalid input: {}", ReasonAndCause(reason, source))]
    InvalidInput {
        /// What is wrong, naming the file, line or argument.
        reason: String,
        /// The parser's error on the caller's text, when one was behind it.
        #[source]
        source: Option<BoxError>,
    },
    /// The per-turn grammar could not be built or compiled.
    #[error("grammar: {}", ReasonAndCause(reason, source))]
    Grammar {
        /// What llguidance refused.
        reason: String,
        /// llguidance's error, when one was behind it.
        #[source]
        source: Option<BoxError>,
    },
    /// Decoding produced text that is not a valid move. This is a bug: the grammar
    /// should have made it impossible. The text is attached.
    #[error(
        "decoded text is not a valid move ({}): {text}",
        ReasonAndCause(reason, source)
    )]
    Decode {
        /// Why it did not parse.
        reason: String,
        /// The full decoded text.
        text: String,
        /// The grammar engine's, parser's or UTF-8 decoder's error, when one was behind it.
        #[source]
        source: Option<BoxError>,
    },
    /// The requested device cannot be used on this machine or build.
    #[error("device {device}: {}", ReasonAndCause(reason, source))]
    Device {
        /// The device as the caller named it.
        device: String,
        /// Why it is unavailable.
        reason: String,
        /// The backend's error, when one was behind it.
        #[source]
        source: Option<BoxError>,
    },
    /// A model could not be resolved or fetched from the Hub or the local cache.
    #[error("model {model}: {}", ReasonAndCause(reason, source))]
    Hub {
        /// The model id, repo or path as given.
        model: String,
        /// What is missing and how to get it.
        reason: String,
        /// The download's, parser's or file system's error, when one was behind it.
        #[source]
        source: Option<BoxError>,
    },
    /// A desktop action (capture or input), a trace or an evaluation session failed.
    #[error("runner: {}", ReasonAndCause(reason, source))]
    Runner {
        /// What failed.
        reason: String,
        /// The underlying error (I/O, X11, the accessibility bus, a child process, …), when
        /// one was behind it.
        #[source]
        source: Option<BoxError>,
    },
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
    #[error("internal error: {}", ReasonAndCause(reason, source))]
    Internal {
        /// What should not have happened.
        reason: String,
        /// The error behind it, when there was one.
        #[source]
        source: Option<BoxError>,
    },
}

/// Shorthand for results carrying [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The two constructors of each `{ reason, source }` variant: `$plain(reason)` with no
/// underlying error, `$caused(reason, source)` keeping `source` as the cause (shown after
/// `reason`). A variant with more fields (`Hub { model: String }`) takes them first, in
/// the order given, each as `impl Into<its type>`.
macro_rules! reason_constructors {
    ($($variant:ident $({ $($field:ident: $ty:ty),* })?: $plain:ident, $caused:ident;)*) => {$(
        #[doc = concat!("An [`Error::", stringify!($variant), "`] with no underlying error.")]
        pub fn $plain($($($field: impl Into<$ty>,)*)? reason: impl Into<String>) -> Self {
            Error::$variant {
                $($($field: $field.into(),)*)?
                reason: reason.into(),
                source: None,
            }
        }

        #[doc = concat!(
            "An [`Error::", stringify!($variant),
            "`] caused by `source` (shown after `reason`, kept as the cause)."
        )]
        pub fn $caused(
            $($($field: impl Into<$ty>,)*)?
            reason: impl Into<String>,
            source: impl Into<BoxError>,
        ) -> Self {
            Self::$plain($($($field,)*)? reason).with_source(source.into())
        }
    )*};
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`Error::Process`]: `tool` could not be started.
    pub fn process(tool: impl Into<String>, source: std::io::Error) -> Self {
        Error::Process {
            tool: tool.into(),
            source,
        }
    }

    /// This error with `cause` kept as its source: for the variants the constructor macro
    /// builds, all of which have one (the others have their cause in their own field).
    fn with_source(mut self, cause: BoxError) -> Self {
        match &mut self {
            Error::ModelFile { source, .. }
            | Error::Config { source, .. }
            | Error::Tensor { source, .. }
            | Error::Tokenizer { source, .. }
            | Error::Image { source, .. }
            | Error::InvalidInput { source, .. }
            | Error::Grammar { source, .. }
            | Error::Decode { source, .. }
            | Error::Device { source, .. }
            | Error::Hub { source, .. }
            | Error::Runner { source, .. }
            | Error::Internal { source, .. } => *source = Some(cause),
            Error::Io { .. } | Error::Candle(_) | Error::Process { .. } => {}
        }
        self
    }

    reason_constructors! {
        ModelFile { path: PathBuf }: model_file, model_file_caused;
        Config: config, config_caused;
        Tensor { name: String }: tensor, tensor_caused;
        Tokenizer: tokenizer, tokenizer_caused;
        Image: image, image_caused;
        InvalidInput: invalid_input, invalid_input_caused;
        Grammar: grammar, grammar_caused;
        Decode { text: String }: decode, decode_caused;
        Device { device: String }: device, device_caused;
        Hub { model: String }: hub, hub_caused;
        Runner: runner, runner_caused;
        Internal: internal, internal_caused;
    }
}

/// For tests that pin an error and the cause it keeps.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Error, Result};

    /// The error `result` holds, or an internal error saying that `what` succeeded.
    pub(crate) fn failure<T>(result: Result<T>, what: &str) -> Result<Error> {
        match result {
            Ok(_) => Err(Error::internal(format!("{what} succeeded"))),
            Err(err) => Ok(err),
        }
    }

    /// `err`'s source as an `S`, or an internal error saying what it was instead.
    pub(crate) fn source_as<S: std::error::Error + 'static>(err: &Error) -> Result<&S> {
        std::error::Error::source(err)
            .and_then(|source| source.downcast_ref::<S>())
            .ok_or_else(|| {
                let wanted = std::any::type_name::<S>();
                Error::internal(format!("the source of {err:?} is not a {wanted}"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    const CAUSE: &str = "early end";

    fn cause() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::UnexpectedEof, CAUSE)
    }

    /// Every variant built with a cause reads exactly as the message with the cause formatted
    /// into it did, and returns the cause itself from `source()`.
    #[test]
    fn caused_errors_read_as_before_and_return_their_cause() -> Result<()> {
        let cases = [
            (
                Error::model_file_caused("m.gguf", "tensor t", cause()),
                "model file m.gguf: tensor t: early end",
            ),
            (
                Error::tokenizer_caused("t.json", cause()),
                "tokenizer: t.json: early end",
            ),
            (
                Error::image_caused("image data is truncated or unreadable", cause()),
                "image: image data is truncated or unreadable: early end",
            ),
            (
                Error::grammar_caused("building the parser factory", cause()),
                "grammar: building the parser factory: early end",
            ),
            (
                Error::device_caused("cuda:1", "", cause()),
                "device cuda:1: early end",
            ),
            (
                Error::config_caused("config.json does not parse", cause()),
                "model config: config.json does not parse: early end",
            ),
            (
                Error::runner_caused("cannot start Xvfb", cause()),
                "runner: cannot start Xvfb: early end",
            ),
            (
                Error::invalid_input_caused("h.json line 2: not JSON", cause()),
                "invalid input: h.json line 2: not JSON: early end",
            ),
            (
                Error::hub_caused("qwen3-vl-2b", "listing the Hub repo r failed", cause()),
                "model qwen3-vl-2b: listing the Hub repo r failed: early end",
            ),
            (
                Error::tensor_caused("blk.0.attn_q.weight", "quantizing to Q4K", cause()),
                "tensor blk.0.attn_q.weight: quantizing to Q4K: early end",
            ),
            (
                Error::decode_caused("{\"a", "", cause()),
                "decoded text is not a valid move (early end): {\"a",
            ),
            (
                Error::internal_caused("writing a GGUF header", cause()),
                "internal error: writing a GGUF header: early end",
            ),
        ];
        for (err, shown) in cases {
            assert_eq!(err.to_string(), shown);
            let source = err
                .source()
                .ok_or_else(|| Error::internal(format!("{err:?} has no source")))?;
            assert_eq!(source.to_string(), CAUSE);
            assert!(source.downcast_ref::<std::io::Error>().is_some(), "{err:?}");
        }
        Ok(())
    }

    /// Built without a cause, a variant reads as its reason and has no source.
    #[test]
    fn errors_without_a_cause_have_no_source() {
        let cases = [
            (
                Error::model_file("m.gguf", "tensor t is missing"),
                "model file m.gguf: tensor t is missing",
            ),
            (
                Error::tokenizer("no <|im_end|> token"),
                "tokenizer: no <|im_end|> token",
            ),
            (Error::image("empty image"), "image: empty image"),
            (Error::grammar("bad rule"), "grammar: bad rule"),
            (
                Error::device("tpu", "expected auto, cpu, cuda, cuda:N or metal"),
                "device tpu: expected auto, cpu, cuda, cuda:N or metal",
            ),
            (
                Error::config("no rope_theta"),
                "model config: no rope_theta",
            ),
            (
                Error::runner("no monitor found"),
                "runner: no monitor found",
            ),
            (
                Error::invalid_input("the goal is empty"),
                "invalid input: the goal is empty",
            ),
            (
                Error::hub("x", "empty model name"),
                "model x: empty model name",
            ),
            (
                Error::tensor("w", "expected (8, 4), found (4, 8)"),
                "tensor w: expected (8, 4), found (4, 8)",
            ),
            (
                Error::decode("{}", "no \"kind\""),
                "decoded text is not a valid move (no \"kind\"): {}",
            ),
            (
                Error::internal("a broken invariant"),
                "internal error: a broken invariant",
            ),
        ];
        for (err, shown) in cases {
            assert_eq!(err.to_string(), shown);
            assert!(err.source().is_none(), "{err:?}");
        }
    }

    /// A tool that would not start keeps the I/O error as its source.
    #[test]
    fn a_process_error_keeps_the_spawn_error() {
        let err = Error::process("llama-bench", cause());
        assert_eq!(err.to_string(), "starting llama-bench: early end");
        assert!(err.source().is_some_and(|s| s.to_string() == CAUSE));
    }
}
