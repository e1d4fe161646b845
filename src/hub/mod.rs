//! Model resolution: manifests (`models/*.toml`), Hugging Face Hub downloads with a progress
//! bar into hf-hub's standard cache, local paths, and offline mode.
//!
//! `--model` takes one of:
//! - a **manifest id**, optionally with a variant: `qwen3-vl-2b`, `qwen3-vl-4b:q8_0`,
//!   `qwen3-vl-8b:safetensors`;
//! - a **Hub repo id**: `Qwen/Qwen3-VL-2B-Instruct-GGUF`, `owner/name@revision`, optionally with a
//!   quant for GGUF repos (`owner/name:Q8_0`); a repo named in a manifest uses the manifest's
//!   files;
//! - a **local path**: a directory holding a GGUF pair (one text `*.gguf` and an `mmproj*.gguf`)
//!   or a safetensors checkpoint (`config.json` + weights), or a text `.gguf` file whose
//!   `mmproj*.gguf` lies next to it. A directory with both prefers the GGUF pair; name
//!   `config.json` to choose the safetensors checkpoint.
//!
//! ```no_run
//! use sightline::hub::{resolve_model, ModelFiles};
//!
//! let model = resolve_model("qwen3-vl-2b")?; // downloads on first use, cached afterwards
//! if let ModelFiles::Gguf { model: text, mmproj, .. } = &model.files {
//!     println!("{} + {}, {} visual tokens", text.display(), mmproj.display(), model.visual_token_budget);
//! }
//! # Ok::<(), sightline::Error>(())
//! ```
//!
//! Files come from the cache when present. With `HF_HUB_OFFLINE=1` nothing is fetched, and a
//! missing file is an [`Error::Hub`](crate::Error::Hub) that names the repo and the file to
//! fetch. The environment is read as the Hub's own tools read it ([`env`]: `HF_HOME`,
//! `HF_HUB_CACHE`, `HF_TOKEN`, `HF_ENDPOINT`, the timeouts). Downloads (feature `download`,
//! on by default) resume a partial file, retry connection errors, 429 and 5xx with backoff,
//! check LFS files against their sha256 and never leave a partial or wrong file where a
//! complete one is expected; a failure's source is a [`DownloadError`].
//!
//! The module's files, by concern: `manifest.rs` (the shipped `models/*.toml` and the user's),
//! `spec.rs` (parsing `--model`), `resolve.rs` (a spec to files on disk), `local.rs` (a local
//! directory or file), `files.rs` (choosing a GGUF pair, reading a safetensors index),
//! `cache.rs` (the Hugging Face cache layout), `scan.rs` (what the cache holds, and removing
//! from it), `download.rs` (a file from the Hub: metadata, then the cache entries),
//! `transfer.rs` (a blob's bytes: lock, resume, retries, hash), `http.rs` (TLS, the token,
//! sorting failures), `retry.rs`, `lock.rs`, `listing.rs` (a repo's files) and `env.rs`. The
//! names that become paths are checked in [`paths`].

mod cache;
mod download;
mod download_error;
pub mod env;
mod files;
#[cfg(feature = "download")]
mod http;
mod listing;
mod local;
#[cfg(feature = "download")]
mod lock;
mod manifest;
pub mod paths;
mod resolve;
mod retry;
mod scan;
mod spec;
#[cfg(feature = "download")]
mod transfer;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use download_error::DownloadError;
pub use retry::RetryPolicy;
pub use scan::{CachedFile, CachedRepo, Removed};

pub use manifest::{
    builtin_manifests, default_manifest, find_manifest, manifests, manifests_with,
    user_manifest_dir, user_manifests, GgufManifest, ModelManifest, RemoteFile,
    SafetensorsManifest,
};
pub use resolve::resolve_model;
pub use spec::{parse_model_spec, ModelSpec};

/// Visual-token budget for models without a manifest.
pub const DEFAULT_VISUAL_TOKEN_BUDGET: u32 = 1024;

/// The variant name selecting a manifest's safetensors checkpoint.
pub const SAFETENSORS_VARIANT: &str = "safetensors";

/// Files tried for a safetensors checkpoint's tokenizer, in order.
const TOKENIZER_FILES: &[&str] = &["tokenizer.json", "tokenizer.json.gz"];
const CONFIG_FILE: &str = "config.json";
const PREPROCESSOR_FILE: &str = "preprocessor_config.json";
const SAFETENSORS_INDEX: &str = "model.safetensors.index.json";
const SAFETENSORS_SINGLE: &str = "model.safetensors";

// ─── Resolved models ────────────────────────────────────────────────────────

/// The files of a model, on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelFiles {
    /// A llama.cpp-layout pair.
    Gguf {
        /// The text model (`qwen3vl` architecture).
        model: PathBuf,
        /// The vision tower.
        mmproj: PathBuf,
        /// `tokenizer.json` (or `.json.gz`) when one was found or fetched.
        tokenizer: Option<PathBuf>,
    },
    /// A Hugging Face checkpoint.
    Safetensors {
        /// `config.json`.
        config: PathBuf,
        /// The weight files, in shard order.
        weights: Vec<PathBuf>,
        /// `tokenizer.json` (or `.json.gz`) when present.
        tokenizer: Option<PathBuf>,
        /// `preprocessor_config.json` when present.
        preprocessor_config: Option<PathBuf>,
    },
}

/// A model ready to load.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedModel {
    /// The `--model` value as given.
    pub spec: String,
    /// Where it came from, in words (`manifest qwen3-vl-2b:q4_k_m`, `hub owner/name`, `local
    /// path …`).
    pub source: String,
    /// The files.
    pub files: ModelFiles,
    /// Visual tokens per screenshot.
    pub visual_token_budget: u32,
    /// The output language its manifest declares (`json` for a repo or a path).
    pub dialect: crate::moves::Dialect,
    /// The chat template its manifest declares (Instruct for a repo or a path).
    pub template: crate::chat::Template,
}

// ─── The Hub client ─────────────────────────────────────────────────────────

/// Fetches model files from the cache or the Hub.
#[derive(Debug, Clone)]
pub struct Hub {
    cache_dir: PathBuf,
    offline: bool,
    endpoint: Option<String>,
    progress: bool,
    token: Option<env::Token>,
    etag_timeout: Duration,
    download_timeout: Duration,
    retry: RetryPolicy,
}

impl Hub {
    /// From the environment, as the Hub's own tools read it (see [`env`]): the cache
    /// (`HF_HUB_CACHE`, `HF_HOME`), `HF_HUB_OFFLINE`, `HF_ENDPOINT`, the token (`HF_TOKEN`,
    /// then the token file) and the timeouts. Progress bars are on; retries as
    /// [`RetryPolicy::default`].
    pub fn from_env() -> Self {
        Self {
            cache_dir: env::hub_cache_dir(),
            offline: env::flag("HF_HUB_OFFLINE"),
            endpoint: env::endpoint(),
            progress: true,
            token: env::token(),
            etag_timeout: env::timeout("HF_HUB_ETAG_TIMEOUT"),
            download_timeout: env::timeout("HF_HUB_DOWNLOAD_TIMEOUT"),
            retry: RetryPolicy::default(),
        }
    }

    /// Uses `dir` as the hub cache (the directory that holds `models--owner--name`).
    pub fn with_cache_dir(mut self, dir: PathBuf) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Forbids (or allows) network access.
    pub fn with_offline(mut self, offline: bool) -> Self {
        self.offline = offline;
        self
    }

    /// Uses another Hub endpoint.
    pub fn with_endpoint(mut self, endpoint: Option<String>) -> Self {
        self.endpoint = endpoint;
        self
    }

    /// Shows (or hides) download progress bars.
    pub fn with_progress(mut self, progress: bool) -> Self {
        self.progress = progress;
        self
    }

    /// Sends `token` (or none) instead of the environment's. It is sent to the Hub only, never
    /// to the storage host the Hub redirects to, and never shown (`Debug` redacts it).
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .map(|secret| env::Token::new(secret, "the caller"));
        self
    }

    /// How long to wait for a file's metadata (`HF_HUB_ETAG_TIMEOUT`) and for each read of its
    /// bytes (`HF_HUB_DOWNLOAD_TIMEOUT`).
    pub fn with_timeouts(mut self, metadata: Duration, download: Duration) -> Self {
        self.etag_timeout = metadata;
        self.download_timeout = download;
        self
    }

    /// How requests are retried.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Whether network access is off.
    pub fn is_offline(&self) -> bool {
        self.offline
    }

    /// The cache directory.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }
}
