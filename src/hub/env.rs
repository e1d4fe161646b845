//! The Hugging Face environment, read the way `huggingface_hub` reads it, so a machine set up
//! for the Hub's own tools (a CI secret in `HF_TOKEN`, a cache moved with `HF_HUB_CACHE`)
//! works unchanged:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `HF_HOME` | the Hugging Face directory | `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface` |
//! | `HF_HUB_CACHE` | the model cache (`models--owner--name/…`) | `$HF_HOME/hub` |
//! | `HF_TOKEN` | the access token (gated and private repos) | the file `HF_TOKEN_PATH` |
//! | `HF_TOKEN_PATH` | the file a token is read from | `$HF_HOME/token` |
//! | `HF_ENDPOINT` | the Hub (or a mirror) | `https://huggingface.co` |
//! | `HF_HUB_OFFLINE` | never use the network | off |
//! | `HF_HUB_ETAG_TIMEOUT` | seconds to wait for a file's metadata | 10 |
//! | `HF_HUB_DOWNLOAD_TIMEOUT` | seconds a download may stall | 10 |
//!
//! The older names `HUGGINGFACE_HUB_CACHE` and `HUGGING_FACE_HUB_TOKEN` are read after the new
//! ones, as `huggingface_hub` does. An empty variable counts as unset.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::input_file::{self, InputKind};

/// The Hub's address when `HF_ENDPOINT` is unset.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// `huggingface_hub`'s default for both timeouts.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest timeout taken from the environment (a day); a larger value is a typo, not a wish.
const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// A variable's value, `None` when unset or empty (after trimming).
fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Whether an environment variable is set to a true value (`1`, `true`, `yes`, `on`).
pub(super) fn flag(name: &str) -> bool {
    var(name).is_some_and(|v| matches!(v.to_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

/// `HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`.
pub fn hf_home() -> PathBuf {
    if let Some(home) = var("HF_HOME") {
        return PathBuf::from(home);
    }
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("huggingface")
}

/// The model cache: `HF_HUB_CACHE`, else `HUGGINGFACE_HUB_CACHE`, else `$HF_HOME/hub`.
pub fn hub_cache_dir() -> PathBuf {
    var("HF_HUB_CACHE")
        .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
        .map(PathBuf::from)
        .unwrap_or_else(|| hf_home().join("hub"))
}

/// Where a token is read from when `HF_TOKEN` is unset: `HF_TOKEN_PATH`, else `$HF_HOME/token`.
pub fn token_path() -> PathBuf {
    var("HF_TOKEN_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| hf_home().join("token"))
}

/// An access token. Its `Debug` never shows it, so a logged `Hub` cannot leak it.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Token {
    secret: String,
    /// Where it came from, for error messages (`HF_TOKEN`, or the file).
    pub(super) origin: String,
}

impl Token {
    pub(super) fn new(secret: String, origin: &str) -> Self {
        Self {
            secret,
            origin: origin.to_string(),
        }
    }

    #[cfg_attr(not(feature = "download"), allow(dead_code))]
    pub(super) fn secret(&self) -> &str {
        &self.secret
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token(from {}, redacted)", self.origin)
    }
}

/// The token, with `huggingface_hub`'s precedence: `HF_TOKEN`, `HUGGING_FACE_HUB_TOKEN`, then
/// the token file. A token file that cannot be read is treated as absent (and logged): the
/// public repos still work, and a gated one then says that no token was sent.
pub(super) fn token() -> Option<Token> {
    for name in ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"] {
        if let Some(secret) = var(name) {
            return Some(Token::new(secret, name));
        }
    }
    let path = token_path();
    if path.symlink_metadata().is_err() {
        return None;
    }
    match input_file::read_string(&path, InputKind::Config) {
        Ok(text) => {
            let secret = text.trim().to_string();
            (!secret.is_empty()).then(|| Token::new(secret, &path.display().to_string()))
        }
        Err(e) => {
            tracing::warn!("ignoring the Hugging Face token file: {e}");
            None
        }
    }
}

/// A timeout in seconds from `name` (decimals allowed), else the default. A value that is not
/// a positive number of at most a day is ignored with a warning.
pub(super) fn timeout(name: &str) -> Duration {
    parse_timeout(name, var(name))
}

fn parse_timeout(name: &str, value: Option<String>) -> Duration {
    let Some(text) = value else {
        return DEFAULT_TIMEOUT;
    };
    match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 && secs <= MAX_TIMEOUT_SECS => {
            Duration::from_secs_f64(secs)
        }
        _ => {
            tracing::warn!(
                "ignoring {name}={text:?}: not a number of seconds in (0, {MAX_TIMEOUT_SECS}]; \
                 using {}s",
                DEFAULT_TIMEOUT.as_secs()
            );
            DEFAULT_TIMEOUT
        }
    }
}

/// `HF_ENDPOINT` without a trailing `/`, else the Hub.
pub(super) fn endpoint() -> Option<String> {
    var("HF_ENDPOINT").map(|e| e.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_take_seconds_and_ignore_what_is_not_a_sane_number() {
        let t = |v: &str| parse_timeout("T", Some(v.to_string()));
        assert_eq!(t("30"), Duration::from_secs(30));
        assert_eq!(t("2.5"), Duration::from_millis(2500));
        for bad in ["0", "-1", "NaN", "inf", "1e12", "ten", ""] {
            assert_eq!(t(bad), DEFAULT_TIMEOUT, "{bad}");
        }
        assert_eq!(parse_timeout("T", None), DEFAULT_TIMEOUT);
    }

    #[test]
    fn a_tokens_debug_form_never_shows_it() {
        let token = Token::new("hf_secret".into(), "HF_TOKEN");
        let shown = format!("{token:?}");
        assert!(
            !shown.contains("hf_secret") && shown.contains("HF_TOKEN"),
            "{shown}"
        );
    }
}
