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
//! missing file is an [`Error::Hub`](crate::Error::Hub) that names the repo and the file to fetch. `HF_HOME` moves
//! the cache, `HF_ENDPOINT` the Hub, as for every Hugging Face tool.
//!
//! The module's files, by concern: `manifest.rs` (the shipped `models/*.toml`), `spec.rs`
//! (parsing `--model`), `resolve.rs` (a spec to files on disk), `local.rs` (a local directory
//! or file), `files.rs` (choosing a GGUF pair, reading a safetensors index), `cache.rs` (the
//! Hugging Face cache layout), `download.rs` (fetching from the Hub) and `listing.rs` (a
//! repo's files). The names that become paths are checked in [`crate::hub_paths`].

mod cache;
mod download;
mod files;
mod listing;
mod local;
mod manifest;
mod resolve;
mod spec;

use std::path::{Path, PathBuf};

use hf_hub::Cache;

pub use manifest::{
    builtin_manifests, default_manifest, find_manifest, GgufManifest, ModelManifest, RemoteFile,
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
}

// ─── The Hub client ─────────────────────────────────────────────────────────

/// Whether an environment variable is set to a true value (`1`, `true`, `yes`, `on`).
fn env_flag(name: &str) -> bool {
    std::env::var(name)
        .map(|v| {
            matches!(
                v.trim().to_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
        .unwrap_or(false)
}

/// Fetches model files from the cache or the Hub.
#[derive(Debug, Clone)]
pub struct Hub {
    cache: Cache,
    offline: bool,
    endpoint: Option<String>,
    progress: bool,
}

impl Hub {
    /// From the environment: `HF_HOME` (cache), `HF_HUB_OFFLINE` (no network), `HF_ENDPOINT`.
    /// Progress bars are on.
    pub fn from_env() -> Self {
        Self {
            cache: Cache::from_env(),
            offline: env_flag("HF_HUB_OFFLINE"),
            endpoint: std::env::var("HF_ENDPOINT").ok().filter(|s| !s.is_empty()),
            progress: true,
        }
    }

    /// Uses `dir` as the hub cache (the directory that holds `models--owner--name`).
    pub fn with_cache_dir(mut self, dir: PathBuf) -> Self {
        self.cache = Cache::new(dir);
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

    /// Whether network access is off.
    pub fn is_offline(&self) -> bool {
        self.offline
    }

    /// The cache directory.
    pub fn cache_dir(&self) -> &Path {
        self.cache.path()
    }
}
