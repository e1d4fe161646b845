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
//! missing file is an [`Error::Hub`] that names the repo and the file to fetch. `HF_HOME` moves
//! the cache, `HF_ENDPOINT` the Hub, as for every Hugging Face tool.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use hf_hub::Cache;

use crate::hub_paths::{
    check_commit, check_file_name, check_repo_id, check_revision, clean_etag, ensure_under,
    join_relative, repo_dir,
};
use crate::input_file::{self, InputKind};
use serde::Deserialize;

use crate::error::{Error, Result};

/// Visual-token budget for models without a manifest.
pub const DEFAULT_VISUAL_TOKEN_BUDGET: u32 = 1024;

/// The variant name selecting a manifest's safetensors checkpoint.
pub const SAFETENSORS_VARIANT: &str = "safetensors";

/// The manifests shipped with Sightline, embedded so the binary needs no data directory.
const BUILTIN_MANIFESTS: &[(&str, &str)] = &[
    (
        "models/qwen3-vl-2b.toml",
        include_str!("../models/qwen3-vl-2b.toml"),
    ),
    (
        "models/qwen3-vl-4b.toml",
        include_str!("../models/qwen3-vl-4b.toml"),
    ),
    (
        "models/qwen3-vl-8b.toml",
        include_str!("../models/qwen3-vl-8b.toml"),
    ),
];

/// Files tried for a safetensors checkpoint's tokenizer, in order.
const TOKENIZER_FILES: &[&str] = &["tokenizer.json", "tokenizer.json.gz"];
const CONFIG_FILE: &str = "config.json";
const PREPROCESSOR_FILE: &str = "preprocessor_config.json";
const SAFETENSORS_INDEX: &str = "model.safetensors.index.json";
const SAFETENSORS_SINGLE: &str = "model.safetensors";
/// GGUF quants tried for a Hub GGUF repo without a manifest, in order of preference.
const GGUF_QUANT_PREFERENCE: &[&str] = &["q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16", "bf16"];
/// mmproj precisions tried, in order of preference.
const MMPROJ_PREFERENCE: &[&str] = &["q8_0", "f16", "bf16", "f32"];

// ─── Manifests ──────────────────────────────────────────────────────────────

/// One supported model, as `models/<id>.toml` describes it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelManifest {
    /// Short id used on the command line (`qwen3-vl-2b`).
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Whether this is the model used when `--model` is not given.
    #[serde(default)]
    pub default: bool,
    /// The variant used when none is named: a GGUF quant key or `safetensors`.
    pub default_variant: String,
    /// Visual tokens per screenshot.
    pub visual_token_budget: u32,
    /// The GGUF repository.
    pub gguf: GgufManifest,
    /// The safetensors repository.
    pub safetensors: SafetensorsManifest,
}

/// The GGUF part of a manifest.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GgufManifest {
    /// Hub repo id.
    pub repo: String,
    /// Key of [`GgufManifest::mmproj`] used by default.
    pub default_mmproj: String,
    /// Quant key (lower case, `q4_k_m`) → text GGUF file name.
    pub quants: std::collections::BTreeMap<String, String>,
    /// Precision key → mmproj GGUF file name.
    pub mmproj: std::collections::BTreeMap<String, String>,
}

/// The safetensors part of a manifest.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SafetensorsManifest {
    /// Hub repo id; also where GGUF variants take `tokenizer.json` from.
    pub repo: String,
}

impl ModelManifest {
    /// Parses and checks a manifest; `source` names it in errors.
    pub fn from_toml(text: &str, source: &str) -> Result<Self> {
        let m: ModelManifest = toml::from_str(text)
            .map_err(|e| Error::Config(format!("model manifest {source}: {e}")))?;
        let bad = |what: String| Error::Config(format!("model manifest {source}: {what}"));
        if m.id.is_empty() || m.id.contains([':', '/', ' ']) {
            return Err(bad(format!(
                "id {:?} must be non-empty without ':', '/' or spaces",
                m.id
            )));
        }
        if m.visual_token_budget == 0 {
            return Err(bad("visual_token_budget must be positive".into()));
        }
        if m.gguf.quants.is_empty() {
            return Err(bad("[gguf.quants] is empty".into()));
        }
        if !m.gguf.mmproj.contains_key(&m.gguf.default_mmproj) {
            return Err(bad(format!(
                "default_mmproj {:?} is not a key of [gguf.mmproj]",
                m.gguf.default_mmproj
            )));
        }
        if m.default_variant != SAFETENSORS_VARIANT
            && !m.gguf.quants.contains_key(&m.default_variant)
        {
            return Err(bad(format!(
                "default_variant {:?} is neither \"safetensors\" nor a key of [gguf.quants]",
                m.default_variant
            )));
        }
        Ok(m)
    }

    /// The variants this manifest offers: its quants, then `safetensors`.
    pub fn variants(&self) -> Vec<String> {
        let mut v: Vec<String> = self.gguf.quants.keys().cloned().collect();
        v.push(SAFETENSORS_VARIANT.into());
        v
    }

    /// The files a variant needs, each with the repo it comes from. `None` = the default
    /// variant. A safetensors variant's weight shards are known only after reading the index,
    /// so they are not listed here.
    pub fn files_for(&self, variant: Option<&str>) -> Result<Vec<RemoteFile>> {
        let variant = normalize_variant(variant.unwrap_or(&self.default_variant));
        let st = |file: &str| RemoteFile::new(&self.safetensors.repo, file);
        if variant == SAFETENSORS_VARIANT || variant == "bf16" {
            return Ok(vec![
                st(CONFIG_FILE),
                st(TOKENIZER_FILES[0]),
                st(PREPROCESSOR_FILE),
            ]);
        }
        let text = self.gguf.quants.get(&variant).ok_or_else(|| Error::Hub {
            model: format!("{}:{variant}", self.id),
            reason: format!(
                "unknown variant {variant:?}; {} offers {}",
                self.id,
                self.variants().join(", ")
            ),
        })?;
        // The key was checked in from_toml.
        let mmproj = &self.gguf.mmproj[&self.gguf.default_mmproj];
        Ok(vec![
            RemoteFile::new(&self.gguf.repo, text),
            RemoteFile::new(&self.gguf.repo, mmproj),
            st(TOKENIZER_FILES[0]),
        ])
    }
}

/// The manifests shipped with Sightline, in file order.
pub fn builtin_manifests() -> Result<Vec<ModelManifest>> {
    let manifests: Vec<ModelManifest> = BUILTIN_MANIFESTS
        .iter()
        .map(|(name, text)| ModelManifest::from_toml(text, name))
        .collect::<Result<_>>()?;
    let defaults = manifests.iter().filter(|m| m.default).count();
    if defaults != 1 {
        return Err(Error::Config(format!(
            "exactly one built-in model manifest must be marked default, found {defaults}"
        )));
    }
    Ok(manifests)
}

/// The manifest marked `default = true`.
pub fn default_manifest() -> Result<ModelManifest> {
    builtin_manifests()?
        .into_iter()
        .find(|m| m.default)
        .ok_or_else(|| Error::Config("no default model manifest".into()))
}

/// A manifest by id (case-insensitive).
pub fn find_manifest(id: &str) -> Result<Option<ModelManifest>> {
    Ok(builtin_manifests()?
        .into_iter()
        .find(|m| m.id.eq_ignore_ascii_case(id)))
}

fn normalize_variant(v: &str) -> String {
    v.trim().to_lowercase().replace('-', "_")
}

// ─── Specs ──────────────────────────────────────────────────────────────────

/// A file in a Hub repo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    /// Repo id.
    pub repo: String,
    /// Path inside the repo.
    pub file: String,
}

impl RemoteFile {
    fn new(repo: &str, file: &str) -> Self {
        Self {
            repo: repo.into(),
            file: file.into(),
        }
    }
}

/// What `--model` named, before anything is fetched.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSpec {
    /// A shipped manifest and a variant (`None` = its default).
    Manifest {
        /// The manifest.
        manifest: Box<ModelManifest>,
        /// The variant as given.
        variant: Option<String>,
    },
    /// A Hub repo without a manifest.
    HubRepo {
        /// `owner/name`.
        repo: String,
        /// Branch, tag or commit; `main` by default.
        revision: String,
        /// A GGUF quant to pick (`Q8_0`), if given.
        quant: Option<String>,
    },
    /// A local directory or file.
    Local(PathBuf),
}

/// Parses a `--model` value (see the module docs). A path that exists is always local; so is
/// anything that looks like a path (`./x`, `/x`, `~/x`, `x.gguf`) even when it does not exist,
/// which then is an error naming the path.
pub fn parse_model_spec(spec: &str) -> Result<ModelSpec> {
    let spec = spec.trim();
    let hub_err = |reason: String| Error::Hub {
        model: spec.to_string(),
        reason,
    };
    if spec.is_empty() {
        return Err(hub_err("empty model name".into()));
    }
    let path = Path::new(spec);
    let looks_like_path = spec.starts_with(['.', '/', '~'])
        || spec.ends_with(".gguf")
        || spec.ends_with(".json")
        || spec.contains('\\');
    if path.exists() {
        return Ok(ModelSpec::Local(path.to_path_buf()));
    }
    if looks_like_path {
        return Err(hub_err(format!(
            "local path {} does not exist",
            path.display()
        )));
    }
    let (name, variant) = match spec.split_once(':') {
        Some((n, v)) => (n, Some(v.to_string())),
        None => (spec, None),
    };
    if let Some(m) = find_manifest(name)? {
        if let Some(v) = &variant {
            m.files_for(Some(v))?;
        }
        return Ok(ModelSpec::Manifest {
            manifest: Box::new(m),
            variant,
        });
    }
    if let Some((owner, rest)) = name.split_once('/') {
        let (repo_name, revision) = match rest.split_once('@') {
            Some((r, rev)) => (r, rev.to_string()),
            None => (rest, "main".to_string()),
        };
        let valid = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        if !valid(owner) || !valid(repo_name) || revision.is_empty() {
            return Err(hub_err(
                "not a Hub repo id (owner/name[@revision][:quant]) and no such local path".into(),
            ));
        }
        let repo = format!("{owner}/{repo_name}");
        // A repo a manifest describes uses the manifest's file names.
        for m in builtin_manifests()? {
            let variant = if m.gguf.repo.eq_ignore_ascii_case(&repo) {
                Some(variant.clone().unwrap_or_else(|| m.default_variant.clone()))
            } else if m.safetensors.repo.eq_ignore_ascii_case(&repo) {
                Some(SAFETENSORS_VARIANT.to_string())
            } else {
                None
            };
            if let (Some(variant), "main") = (variant, revision.as_str()) {
                m.files_for(Some(&variant))?;
                return Ok(ModelSpec::Manifest {
                    manifest: Box::new(m),
                    variant: Some(variant),
                });
            }
        }
        return Ok(ModelSpec::HubRepo {
            repo,
            revision,
            quant: variant,
        });
    }
    let ids: Vec<String> = builtin_manifests()?.into_iter().map(|m| m.id).collect();
    Err(hub_err(format!(
        "unknown model; use a manifest id ({}), a Hub repo id (owner/name) or a local path",
        ids.join(", ")
    )))
}

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

    /// The cached copy of a file, if any. The repo id, revision and file name are checked
    /// ([`crate::hub_paths`]), so is the commit read back from `refs/<revision>`, and the file
    /// must resolve (symlinks followed) to a regular file under the cache root.
    pub fn cached(&self, repo: &str, revision: &str, file: &str) -> Option<PathBuf> {
        self.cached_checked(repo, revision, file).ok().flatten()
    }

    fn cached_checked(&self, repo: &str, revision: &str, file: &str) -> Result<Option<PathBuf>> {
        check_revision(revision)?;
        check_file_name(file)?;
        let root = self.cache.path();
        let dir = repo_dir(root, repo)?;
        let Some(commit) = self.cached_commit(&dir, revision)? else {
            return Ok(None);
        };
        let path = join_relative(&dir.join("snapshots").join(&commit), file);
        if path.symlink_metadata().is_err() {
            return Ok(None);
        }
        ensure_under(root, &path)?;
        input_file::check(&path, InputKind::ModelWeights)?;
        Ok(Some(path))
    }

    /// The commit `refs/<revision>` names, checked to be 40 hex digits; `None` when absent.
    fn cached_commit(&self, dir: &Path, revision: &str) -> Result<Option<String>> {
        let ref_path = join_relative(&dir.join("refs"), revision);
        if ref_path.symlink_metadata().is_err() {
            return Ok(None);
        }
        ensure_under(self.cache.path(), &ref_path)?;
        let text = input_file::read_string(&ref_path, InputKind::Config)?;
        let commit = text.trim();
        check_commit(commit)?;
        Ok(Some(commit.to_string()))
    }

    fn endpoint(&self) -> String {
        self.endpoint
            .clone()
            .unwrap_or_else(|| "https://huggingface.co".to_string())
            .trim_end_matches('/')
            .to_string()
    }

    /// A request with the user agent and, when a token is configured, its bearer header.
    fn request(&self, agent: &ureq::Agent, url: &str) -> ureq::Request {
        let mut req = agent.get(url).set(
            "User-Agent",
            concat!("sightline/", env!("CARGO_PKG_VERSION")),
        );
        if let Some(token) = self.cache.token() {
            req = req.set("Authorization", &format!("Bearer {token}"));
        }
        req
    }

    fn agent(redirects: u32) -> ureq::Agent {
        ureq::AgentBuilder::new()
            .try_proxy_from_env(true)
            .redirects(redirects)
            .timeout_connect(std::time::Duration::from_secs(30))
            .timeout_read(std::time::Duration::from_secs(120))
            .build()
    }

    /// Fetches one file: from the cache, else (unless offline) from the Hub with a progress bar.
    /// `model` names the model in errors. Every name that becomes a path is checked first
    /// (see [`crate::hub_paths`]); a mirror's bad answer is an error, and nothing is written
    /// outside the cache directory.
    pub fn fetch(&self, model: &str, repo: &str, revision: &str, file: &str) -> Result<PathBuf> {
        check_repo_id(repo)?;
        check_revision(revision)?;
        check_file_name(file)?;
        if let Some(p) = self.cached_checked(repo, revision, file)? {
            return Ok(p);
        }
        if self.offline {
            return Err(Error::Hub {
                model: model.into(),
                reason: format!(
                    "{file} from the Hub repo {repo} (revision {revision}) is not in the local \
                     cache {} and HF_HUB_OFFLINE is set; fetch it where there is network access \
                     (`sightline models pull {model}`, or `huggingface-cli download {repo} {file}`) \
                     and copy the cache here, or unset HF_HUB_OFFLINE",
                    self.cache.path().display()
                ),
            });
        }
        self.download(repo, revision, file)
            .map_err(|reason| Error::Hub {
                model: model.into(),
                reason: format!(
                    "downloading {file} from the Hub repo {repo} (revision {revision}) failed: \
                 {reason}; check the network or HF_ENDPOINT, that the repo and file exist, and \
                 for gated repos a token in {}",
                    self.cache.token_path().display()
                ),
            })
    }

    /// Downloads a file into the cache, in the Hub cache layout (`blobs/<etag>`,
    /// `snapshots/<commit>/<file>` → the blob, `refs/<revision>` = the commit), after checking
    /// the etag and commit headers. Errors are sentences for [`Hub::fetch`].
    fn download(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
    ) -> std::result::Result<PathBuf, String> {
        let url = format!(
            "{}/{repo}/resolve/{}/{file}",
            self.endpoint(),
            revision.replace('/', "%2F")
        );
        // The metadata request does not follow redirects: the Hub answers a resolve with a
        // redirect to its storage, and the commit and etag headers are on the first answer.
        let head = Self::agent(0);
        let mut response = self
            .request(&head, &url)
            .set("Range", "bytes=0-0")
            .call()
            .map_err(|e| e.to_string())?;
        for _ in 0..5 {
            match (response.status(), response.header("Location")) {
                (301..=308, Some(location)) if location.starts_with('/') => {
                    let next = format!("{}{location}", self.endpoint());
                    response = self
                        .request(&head, &next)
                        .set("Range", "bytes=0-0")
                        .call()
                        .map_err(|e| e.to_string())?;
                }
                _ => break,
            }
        }
        let header = |name: &str| response.header(name).map(str::to_string);
        let commit = header("x-repo-commit").ok_or("the answer has no x-repo-commit header")?;
        check_commit(&commit).map_err(|e| e.to_string())?;
        let etag = header("x-linked-etag")
            .or_else(|| header("etag"))
            .ok_or("the answer has no etag header")?;
        let etag = clean_etag(&etag).map_err(|e| e.to_string())?;
        let size: Option<u64> = header("Content-Range")
            .and_then(|r| r.rsplit('/').next().and_then(|n| n.trim().parse().ok()));
        drop(response);

        let root = self.cache.path();
        let within = |p: &Path| ensure_under(root, p).map_err(|e| e.to_string());
        std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
        let dir = repo_dir(root, repo).map_err(|e| e.to_string())?;
        let blobs = dir.join("blobs");
        within(&blobs)?;
        std::fs::create_dir_all(&blobs).map_err(|e| format!("{}: {e}", blobs.display()))?;
        within(&blobs)?;
        let blob = blobs.join(&etag);
        within(&blob)?;
        if !blob.is_file() {
            let tmp = blobs.join(format!("{etag}.incomplete.{}", std::process::id()));
            let result = self.download_blob(&url, &tmp, size, file);
            if let Err(e) = result {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
            std::fs::rename(&tmp, &blob).map_err(|e| format!("{}: {e}", blob.display()))?;
        }

        let snapshot = dir.join("snapshots").join(&commit);
        let pointer = join_relative(&snapshot, file);
        let pointer_dir = pointer.parent().unwrap_or(&snapshot).to_path_buf();
        within(&pointer_dir)?;
        std::fs::create_dir_all(&pointer_dir)
            .map_err(|e| format!("{}: {e}", pointer_dir.display()))?;
        within(&pointer_dir)?;
        if let Ok(meta) = pointer.symlink_metadata() {
            if meta.is_dir() {
                return Err(format!("{} is a directory in the cache", pointer.display()));
            }
            std::fs::remove_file(&pointer).map_err(|e| format!("{}: {e}", pointer.display()))?;
        }
        link_to_blob(&blob, &pointer, file.split('/').count() + 1)
            .map_err(|e| format!("{}: {e}", pointer.display()))?;
        within(&pointer)?;

        let ref_path = join_relative(&dir.join("refs"), revision);
        let ref_dir = ref_path.parent().unwrap_or(&dir).to_path_buf();
        within(&ref_dir)?;
        std::fs::create_dir_all(&ref_dir).map_err(|e| format!("{}: {e}", ref_dir.display()))?;
        within(&ref_path)?;
        if ref_path.symlink_metadata().is_ok_and(|m| !m.is_file()) {
            return Err(format!("{} is not a regular file", ref_path.display()));
        }
        std::fs::write(&ref_path, &commit).map_err(|e| format!("{}: {e}", ref_path.display()))?;
        Ok(pointer)
    }

    /// Streams the file's bytes to `tmp`, at most `size` (the length the metadata announced).
    fn download_blob(
        &self,
        url: &str,
        tmp: &Path,
        size: Option<u64>,
        file: &str,
    ) -> std::result::Result<(), String> {
        let response = self
            .request(&Self::agent(5), url)
            .call()
            .map_err(|e| e.to_string())?;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(tmp)
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        let cap = size.unwrap_or(InputKind::ModelWeights.max_bytes());
        let mut reader = response.into_reader().take(cap + 1);
        let mut progress = self.progress.then(DownloadProgress::new);
        if let Some(p) = progress.as_mut() {
            hf_hub::api::Progress::init(p, usize::try_from(cap).unwrap_or(usize::MAX), file);
        }
        let mut buf = vec![0u8; 1 << 16];
        let mut written: u64 = 0;
        loop {
            let n = reader.read(&mut buf).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n])
                .map_err(|e| format!("{}: {e}", tmp.display()))?;
            written += n as u64;
            if let Some(p) = progress.as_mut() {
                hf_hub::api::Progress::update(p, n);
            }
        }
        if let Some(p) = progress.as_mut() {
            hf_hub::api::Progress::finish(p);
        }
        match size {
            Some(s) if written != s => {
                Err(format!("the mirror announced {s} bytes and sent {written}"))
            }
            _ => Ok(()),
        }
    }

    /// The files in a repo: the Hub's listing when online, the cached snapshot's when offline.
    /// Every listed name is checked ([`check_file_name`]); an unsafe one is an error.
    fn list_repo(&self, model: &str, repo: &str, revision: &str) -> Result<Vec<String>> {
        check_repo_id(repo)?;
        check_revision(revision)?;
        let hub_err = |reason: String| Error::Hub {
            model: model.into(),
            reason,
        };
        if !self.offline {
            #[derive(Deserialize)]
            struct Sibling {
                rfilename: String,
            }
            #[derive(Deserialize)]
            struct Info {
                siblings: Vec<Sibling>,
            }
            let url = format!(
                "{}/api/models/{repo}/revision/{}",
                self.endpoint(),
                revision.replace('/', "%2F")
            );
            let response = self
                .request(&Self::agent(5), &url)
                .call()
                .map_err(|e| hub_err(format!("listing the Hub repo {repo} failed: {e}")))?;
            let mut body = Vec::new();
            response
                .into_reader()
                .take(InputKind::Config.max_bytes() + 1)
                .read_to_end(&mut body)
                .map_err(|e| hub_err(format!("listing the Hub repo {repo} failed: {e}")))?;
            if body.len() as u64 > InputKind::Config.max_bytes() {
                return Err(hub_err(format!(
                    "the listing of the Hub repo {repo} is over {} bytes",
                    InputKind::Config.max_bytes()
                )));
            }
            let info: Info = serde_json::from_slice(&body).map_err(|e| {
                hub_err(format!(
                    "the listing of the Hub repo {repo} is not valid: {e}"
                ))
            })?;
            let files: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
            for f in &files {
                check_file_name(f).map_err(|e| {
                    hub_err(format!("the listing of the Hub repo {repo} is unsafe: {e}"))
                })?;
            }
            return Ok(files);
        }
        let dir = repo_dir(self.cache.path(), repo)?;
        let commit = self.cached_commit(&dir, revision)?.ok_or_else(|| {
            hub_err(format!(
                "the Hub repo {repo} (revision {revision}) is not in the local cache {} and \
                 HF_HUB_OFFLINE is set; run `sightline models pull {model}` with network \
                 access first",
                self.cache.path().display()
            ))
        })?;
        let snapshot = dir.join("snapshots").join(commit);
        ensure_under(self.cache.path(), &snapshot)?;
        let mut files = Vec::new();
        list_files(&snapshot, &snapshot, 0, &mut files);
        files.sort();
        Ok(files)
    }

    /// Resolves a parsed spec to files on disk, fetching what is missing (unless offline).
    pub fn resolve(&self, spec_text: &str, spec: &ModelSpec) -> Result<ResolvedModel> {
        match spec {
            ModelSpec::Local(path) => resolve_local(spec_text, path),
            ModelSpec::Manifest { manifest, variant } => {
                self.resolve_manifest(spec_text, manifest, variant.as_deref())
            }
            ModelSpec::HubRepo {
                repo,
                revision,
                quant,
            } => self.resolve_repo(spec_text, repo, revision, quant.as_deref()),
        }
    }

    fn resolve_manifest(
        &self,
        spec: &str,
        m: &ModelManifest,
        variant: Option<&str>,
    ) -> Result<ResolvedModel> {
        let variant_name = normalize_variant(variant.unwrap_or(&m.default_variant));
        let files = m.files_for(Some(&variant_name))?;
        let source = format!("manifest {}:{variant_name}", m.id);
        let model_files = if variant_name == SAFETENSORS_VARIANT || variant_name == "bf16" {
            self.fetch_safetensors(spec, &m.safetensors.repo, "main")?
        } else {
            let mut paths = Vec::with_capacity(files.len());
            for f in &files {
                paths.push(self.fetch(spec, &f.repo, "main", &f.file)?);
            }
            ModelFiles::Gguf {
                model: paths[0].clone(),
                mmproj: paths[1].clone(),
                tokenizer: Some(paths[2].clone()),
            }
        };
        Ok(ResolvedModel {
            spec: spec.into(),
            source,
            files: model_files,
            visual_token_budget: m.visual_token_budget,
        })
    }

    fn fetch_safetensors(&self, spec: &str, repo: &str, revision: &str) -> Result<ModelFiles> {
        let config = self.fetch(spec, repo, revision, CONFIG_FILE)?;
        let tokenizer = Some(self.fetch(spec, repo, revision, TOKENIZER_FILES[0])?);
        // Not every fine-tune ships a preprocessor config; the image code has defaults.
        let preprocessor_config = self.fetch(spec, repo, revision, PREPROCESSOR_FILE).ok();
        let weights = match self.fetch(spec, repo, revision, SAFETENSORS_INDEX) {
            Ok(index) => {
                let shards = read_index_shards(&index)?;
                shards
                    .iter()
                    .map(|s| self.fetch(spec, repo, revision, s))
                    .collect::<Result<Vec<_>>>()?
            }
            Err(index_err) => match self.fetch(spec, repo, revision, SAFETENSORS_SINGLE) {
                Ok(single) => vec![single],
                // Report the index error when neither exists: sharded is the common layout.
                Err(_) => return Err(index_err),
            },
        };
        Ok(ModelFiles::Safetensors {
            config,
            weights,
            tokenizer,
            preprocessor_config,
        })
    }

    fn resolve_repo(
        &self,
        spec: &str,
        repo: &str,
        revision: &str,
        quant: Option<&str>,
    ) -> Result<ResolvedModel> {
        let files = self.list_repo(spec, repo, revision)?;
        let ggufs: Vec<&String> = files
            .iter()
            .filter(|f| f.to_lowercase().ends_with(".gguf"))
            .collect();
        let source = format!("hub {repo}@{revision}");
        let model_files = if !ggufs.is_empty() {
            let names: Vec<&str> = ggufs.iter().map(|s| s.as_str()).collect();
            let (text, mmproj) = pick_gguf_pair(&names, quant).map_err(|reason| Error::Hub {
                model: spec.into(),
                reason: format!("in the Hub repo {repo}: {reason}"),
            })?;
            let tokenizer = TOKENIZER_FILES
                .iter()
                .find(|t| files.iter().any(|f| f == *t))
                .map(|t| self.fetch(spec, repo, revision, t))
                .transpose()?;
            ModelFiles::Gguf {
                model: self.fetch(spec, repo, revision, &text)?,
                mmproj: self.fetch(spec, repo, revision, &mmproj)?,
                tokenizer,
            }
        } else if files.iter().any(|f| f == CONFIG_FILE) {
            self.fetch_safetensors(spec, repo, revision)?
        } else {
            return Err(Error::Hub {
                model: spec.into(),
                reason: format!(
                    "the Hub repo {repo} has neither GGUF files nor a config.json; files: {}",
                    files.join(", ")
                ),
            });
        };
        Ok(ResolvedModel {
            spec: spec.into(),
            source,
            files: model_files,
            visual_token_budget: DEFAULT_VISUAL_TOKEN_BUDGET,
        })
    }
}

/// Links `pointer` to `blob` with a relative symlink (`../` × `depth` + `blobs/<etag>`), as the
/// Hub cache does, or copies the blob where symlinks are not available.
fn link_to_blob(blob: &Path, pointer: &Path, depth: usize) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut target = PathBuf::new();
        for _ in 0..depth {
            target.push("..");
        }
        target.push("blobs");
        target.push(blob.file_name().unwrap_or_default());
        std::os::unix::fs::symlink(target, pointer)
    }
    #[cfg(not(unix))]
    {
        let _ = depth;
        std::fs::copy(blob, pointer).map(|_| ())
    }
}

/// Deepest snapshot directory level listed; the Hub's own repos are a few levels deep.
const MAX_LISTING_DEPTH: usize = 8;

/// The files under a cached snapshot, as `/`-separated relative names. Directory symlinks are
/// not followed (a loop or an escape cannot be walked) and the depth is bounded.
fn list_files(root: &Path, dir: &Path, depth: usize, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_real_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_real_dir {
            if depth < MAX_LISTING_DEPTH {
                list_files(root, &path, depth + 1, out);
            }
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The shard file names of a `model.safetensors.index.json`, in order, without duplicates.
fn read_index_shards(index: &Path) -> Result<Vec<String>> {
    #[derive(Deserialize)]
    struct Index {
        weight_map: std::collections::BTreeMap<String, String>,
    }
    let text = input_file::read_string(index, InputKind::Config)?;
    let parsed: Index = serde_json::from_str(&text)
        .map_err(|e| Error::model_file(index, format!("not a safetensors index: {e}")))?;
    let mut shards: Vec<String> = parsed.weight_map.into_values().collect();
    shards.sort();
    shards.dedup();
    if shards.is_empty() {
        return Err(Error::model_file(index, "weight_map is empty"));
    }
    if let Some(bad) = shards.iter().find(|s| check_file_name(s).is_err()) {
        return Err(Error::model_file(
            index,
            format!("shard name {bad:?} is not a safe file name inside the repo"),
        ));
    }
    Ok(shards)
}

fn is_mmproj(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name).to_lowercase();
    base.starts_with("mmproj") || base.contains("-mmproj") || base.contains(".mmproj")
}

/// Picks the text GGUF and the mmproj among file names: the named quant (matched in the file
/// name, case-insensitively), else the first of [`GGUF_QUANT_PREFERENCE`] present, else the
/// only text GGUF; the mmproj by [`MMPROJ_PREFERENCE`], else the only one.
fn pick_gguf_pair(
    names: &[&str],
    quant: Option<&str>,
) -> std::result::Result<(String, String), String> {
    let (mmprojs, texts): (Vec<&str>, Vec<&str>) =
        names.iter().copied().partition(|n| is_mmproj(n));
    let has_quant = |n: &str, q: &str| {
        n.to_lowercase()
            .contains(&q.to_lowercase().replace('-', "_"))
    };
    let text = match quant {
        Some(q) => texts
            .iter()
            .find(|n| has_quant(n, q))
            .copied()
            .ok_or_else(|| {
                format!(
                    "no text GGUF for quant {q:?}; GGUF files: {}",
                    texts.join(", ")
                )
            })?,
        None => GGUF_QUANT_PREFERENCE
            .iter()
            .find_map(|q| texts.iter().find(|n| has_quant(n, q)).copied())
            .or(if texts.len() == 1 {
                Some(texts[0])
            } else {
                None
            })
            .ok_or_else(|| {
                format!(
                    "cannot choose among the text GGUF files {}; name a quant (repo:Q4_K_M)",
                    texts.join(", ")
                )
            })?,
    };
    let mmproj = MMPROJ_PREFERENCE
        .iter()
        .find_map(|q| mmprojs.iter().find(|n| has_quant(n, q)).copied())
        .or(if mmprojs.len() == 1 {
            Some(mmprojs[0])
        } else {
            None
        })
        .ok_or_else(|| {
            if mmprojs.is_empty() {
                "no mmproj*.gguf (vision tower) next to the text GGUF".to_string()
            } else {
                format!(
                    "cannot choose among the mmproj files {}",
                    mmprojs.join(", ")
                )
            }
        })?;
    Ok((text.to_string(), mmproj.to_string()))
}

/// Resolves a local directory or file.
fn resolve_local(spec: &str, path: &Path) -> Result<ResolvedModel> {
    let err = |reason: String| Error::Hub {
        model: spec.into(),
        reason,
    };
    let (dir, chosen) = if path.is_dir() {
        (path.to_path_buf(), None)
    } else {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        (
            dir,
            path.file_name().map(|n| n.to_string_lossy().into_owned()),
        )
    };
    let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let tokenizer = TOKENIZER_FILES
        .iter()
        .map(|t| dir.join(t))
        .find(|p| p.is_file());
    let source = format!("local path {}", path.display());
    let ggufs: Vec<&str> = names
        .iter()
        .filter(|n| n.to_lowercase().ends_with(".gguf"))
        .map(String::as_str)
        .collect();
    let wants_safetensors = matches!(chosen.as_deref(), Some(n) if n == CONFIG_FILE || n.ends_with(".safetensors") || n == SAFETENSORS_INDEX);
    if !wants_safetensors && (!ggufs.is_empty() || chosen.is_some()) {
        let text = match &chosen {
            Some(name) if is_mmproj(name) => {
                return Err(err(format!(
                    "{} is a vision tower (mmproj); name the text GGUF or the directory",
                    path.display()
                )))
            }
            Some(name) if name.to_lowercase().ends_with(".gguf") => name.clone(),
            Some(name) => {
                return Err(err(format!(
                    "{name} is neither a .gguf file, config.json nor a model directory"
                )))
            }
            None => {
                let texts: Vec<&str> = ggufs.iter().copied().filter(|n| !is_mmproj(n)).collect();
                match texts.as_slice() {
                    [one] => one.to_string(),
                    [] => {
                        return Err(err(format!(
                            "{} holds an mmproj GGUF but no text GGUF",
                            dir.display()
                        )))
                    }
                    many => {
                        return Err(err(format!(
                            "{} holds several text GGUF files ({}); name one",
                            dir.display(),
                            many.join(", ")
                        )))
                    }
                }
            }
        };
        let mmprojs: Vec<&str> = ggufs.iter().copied().filter(|n| is_mmproj(n)).collect();
        let mmproj = match mmprojs.as_slice() {
            [one] => one.to_string(),
            [] => {
                return Err(err(format!(
                    "no mmproj*.gguf (vision tower) next to {text} in {}",
                    dir.display()
                )))
            }
            many => MMPROJ_PREFERENCE
                .iter()
                .find_map(|q| many.iter().find(|n| n.to_lowercase().contains(q)))
                .map(|s| s.to_string())
                .ok_or_else(|| {
                    err(format!(
                        "several mmproj files in {} ({}); keep one",
                        dir.display(),
                        many.join(", ")
                    ))
                })?,
        };
        return Ok(ResolvedModel {
            spec: spec.into(),
            source,
            files: ModelFiles::Gguf {
                model: dir.join(text),
                mmproj: dir.join(mmproj),
                tokenizer,
            },
            visual_token_budget: DEFAULT_VISUAL_TOKEN_BUDGET,
        });
    }
    let config = dir.join(CONFIG_FILE);
    if !config.is_file() {
        return Err(err(format!(
            "{} holds neither a GGUF pair nor a safetensors checkpoint (config.json)",
            dir.display()
        )));
    }
    let index = dir.join(SAFETENSORS_INDEX);
    let weights: Vec<PathBuf> = if index.is_file() {
        read_index_shards(&index)?
            .into_iter()
            .map(|s| dir.join(s))
            .collect()
    } else {
        names
            .iter()
            .filter(|n| n.ends_with(".safetensors"))
            .map(|n| dir.join(n))
            .collect()
    };
    if weights.is_empty() {
        return Err(err(format!(
            "{} has config.json but no *.safetensors weights",
            dir.display()
        )));
    }
    if let Some(missing) = weights.iter().find(|w| !w.is_file()) {
        return Err(err(format!(
            "weight shard {} is missing",
            missing.display()
        )));
    }
    let preprocessor = dir.join(PREPROCESSOR_FILE);
    Ok(ResolvedModel {
        spec: spec.into(),
        source,
        files: ModelFiles::Safetensors {
            config,
            weights,
            tokenizer,
            preprocessor_config: preprocessor.is_file().then_some(preprocessor),
        },
        visual_token_budget: DEFAULT_VISUAL_TOKEN_BUDGET,
    })
}

/// Parses and resolves a `--model` value with the environment's Hub settings.
pub fn resolve_model(spec: &str) -> Result<ResolvedModel> {
    Hub::from_env().resolve(spec, &parse_model_spec(spec)?)
}

// ─── Progress ───────────────────────────────────────────────────────────────

/// A download progress bar on stderr (hidden when stderr is not a terminal).
struct DownloadProgress {
    bar: indicatif::ProgressBar,
}

impl DownloadProgress {
    fn new() -> Self {
        Self {
            bar: indicatif::ProgressBar::new(0),
        }
    }
}

impl hf_hub::api::Progress for DownloadProgress {
    fn init(&mut self, size: usize, filename: &str) {
        self.bar.set_length(size as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
        ) {
            self.bar.set_style(style);
        }
        self.bar.set_message(filename.to_string());
    }

    fn update(&mut self, size: usize) {
        self.bar.inc(size as u64);
    }

    fn finish(&mut self) {
        self.bar.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_manifests_parse_with_one_default_2b_q4_k_m() -> Result<()> {
        let ms = builtin_manifests()?;
        assert_eq!(ms.len(), 3);
        let d = default_manifest()?;
        assert_eq!(d.id, "qwen3-vl-2b");
        assert_eq!(d.default_variant, "q4_k_m");
        Ok(())
    }

    #[test]
    fn gguf_pair_prefers_q4_k_m_and_q8_0_mmproj() {
        let names = [
            "Qwen3VL-2B-Instruct-Q8_0.gguf",
            "Qwen3VL-2B-Instruct-Q4_K_M.gguf",
            "mmproj-Qwen3VL-2B-Instruct-F16.gguf",
            "mmproj-Qwen3VL-2B-Instruct-Q8_0.gguf",
        ];
        assert_eq!(
            pick_gguf_pair(&names, None),
            Ok((
                "Qwen3VL-2B-Instruct-Q4_K_M.gguf".to_string(),
                "mmproj-Qwen3VL-2B-Instruct-Q8_0.gguf".to_string()
            ))
        );
        assert_eq!(
            pick_gguf_pair(&names, Some("Q8_0")).map(|p| p.0),
            Ok("Qwen3VL-2B-Instruct-Q8_0.gguf".to_string())
        );
        assert!(pick_gguf_pair(&names, Some("q2_k")).is_err());
        assert!(pick_gguf_pair(&["a-Q4_K_M.gguf"], None).is_err());
    }

    #[test]
    fn manifest_with_unknown_default_mmproj_is_rejected() {
        let text = r#"
id = "x"
name = "X"
default_variant = "q4_k_m"
visual_token_budget = 8
[gguf]
repo = "a/b"
default_mmproj = "f32"
[gguf.quants]
q4_k_m = "b.gguf"
[gguf.mmproj]
f16 = "mmproj-b.gguf"
[safetensors]
repo = "a/c"
"#;
        let e = ModelManifest::from_toml(text, "test.toml");
        assert!(matches!(e, Err(Error::Config(m)) if m.contains("default_mmproj")));
    }
}
