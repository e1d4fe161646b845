//! Model manifests: the ones Sightline ships (`models/*.toml`, embedded in the binary) and the
//! user's (`*.toml` in [`user_manifest_dir`]), and the files each variant needs. A user
//! manifest with a shipped one's id replaces it (to pin a revision, say); one marked
//! `default = true` becomes the model `--model` means when it is not given.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{CONFIG_FILE, PREPROCESSOR_FILE, SAFETENSORS_VARIANT, TOKENIZER_FILES};
use crate::chat::Template;
use crate::error::{Error, Result};
use crate::hub::paths::{check_repo_id, check_revision};
use crate::input_file::{self, InputKind};
use crate::moves::Dialect;

/// The revision used when a manifest pins none.
const DEFAULT_REVISION: &str = "main";

/// Most user manifests read from the directory; more is a mistake (or a hostile directory).
const MAX_USER_MANIFESTS: usize = 256;

/// The manifests shipped with Sightline, embedded so the binary needs no data directory.
const BUILTIN_MANIFESTS: &[(&str, &str)] = &[
    (
        "models/qwen3-vl-2b.toml",
        include_str!("../../models/qwen3-vl-2b.toml"),
    ),
    (
        "models/qwen3-vl-4b.toml",
        include_str!("../../models/qwen3-vl-4b.toml"),
    ),
    (
        "models/qwen3-vl-8b.toml",
        include_str!("../../models/qwen3-vl-8b.toml"),
    ),
    (
        "models/qwen3-vl-2b-thinking.toml",
        include_str!("../../models/qwen3-vl-2b-thinking.toml"),
    ),
    (
        "models/qwen3-vl-4b-thinking.toml",
        include_str!("../../models/qwen3-vl-4b-thinking.toml"),
    ),
    (
        "models/qwen3-vl-8b-thinking.toml",
        include_str!("../../models/qwen3-vl-8b-thinking.toml"),
    ),
    (
        "models/gui-owl-1.5-2b.toml",
        include_str!("../../models/gui-owl-1.5-2b.toml"),
    ),
    (
        "models/gui-owl-1.5-4b.toml",
        include_str!("../../models/gui-owl-1.5-4b.toml"),
    ),
    (
        "models/gui-owl-1.5-8b.toml",
        include_str!("../../models/gui-owl-1.5-8b.toml"),
    ),
    (
        "models/gui-owl-1.5-8b-think.toml",
        include_str!("../../models/gui-owl-1.5-8b-think.toml"),
    ),
    (
        "models/ui-mopd-8b.toml",
        include_str!("../../models/ui-mopd-8b.toml"),
    ),
    (
        "models/mai-ui-2b.toml",
        include_str!("../../models/mai-ui-2b.toml"),
    ),
    (
        "models/mai-ui-8b.toml",
        include_str!("../../models/mai-ui-8b.toml"),
    ),
    (
        "models/ui-venus-1.5-2b.toml",
        include_str!("../../models/ui-venus-1.5-2b.toml"),
    ),
    (
        "models/ui-venus-1.5-8b.toml",
        include_str!("../../models/ui-venus-1.5-8b.toml"),
    ),
];

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
    /// The output language the model was trained to answer in (`json`, Sightline's own, when
    /// absent; see [`Dialect`]).
    #[serde(default)]
    pub dialect: Dialect,
    /// Its chat template: `qwen3-vl` (Instruct, the default) or `qwen3-vl-thinking`.
    #[serde(default)]
    pub template: Template,
    /// The GGUF repository; absent for a model published only as safetensors (GUI-Owl-1.5's
    /// Think variant, say).
    #[serde(default)]
    pub gguf: Option<GgufManifest>,
    /// The safetensors repository.
    pub safetensors: SafetensorsManifest,
    /// Where the manifest came from (`built-in models/x.toml` or the user's file); not a key.
    #[serde(skip)]
    pub origin: String,
}

/// The GGUF part of a manifest.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GgufManifest {
    /// Hub repo id.
    pub repo: String,
    /// The branch, tag or commit to fetch (`main` when absent). A commit pins the files.
    #[serde(default)]
    pub revision: Option<String>,
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
    /// The branch, tag or commit to fetch (`main` when absent).
    #[serde(default)]
    pub revision: Option<String>,
}

impl GgufManifest {
    /// The revision to fetch: the pinned one, else `main`.
    pub fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or(DEFAULT_REVISION)
    }
}

impl SafetensorsManifest {
    /// The revision to fetch: the pinned one, else `main`.
    pub fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or(DEFAULT_REVISION)
    }
}

impl ModelManifest {
    /// Parses and checks a manifest; `source` names it in errors.
    pub fn from_toml(text: &str, source: &str) -> Result<Self> {
        let mut m: ModelManifest = toml::from_str(text)
            .map_err(|e| Error::config_caused(format!("model manifest {source}"), e))?;
        m.origin = source.to_string();
        let bad = |what: String| Error::config(format!("model manifest {source}: {what}"));
        if m.id.is_empty() || m.id.contains([':', '/', ' ']) {
            return Err(bad(format!(
                "id {:?} must be non-empty without ':', '/' or spaces",
                m.id
            )));
        }
        let mut repos = vec![(&m.safetensors.repo, m.safetensors.revision())];
        if let Some(gguf) = &m.gguf {
            repos.push((&gguf.repo, gguf.revision()));
        }
        for (repo, revision) in repos {
            check_repo_id(repo)
                .map_err(|e| Error::config_caused(format!("model manifest {source}"), e))?;
            check_revision(revision)
                .map_err(|e| Error::config_caused(format!("model manifest {source}"), e))?;
        }
        if m.visual_token_budget == 0 {
            return Err(bad("visual_token_budget must be positive".into()));
        }
        if let Some(gguf) = &m.gguf {
            if gguf.quants.is_empty() {
                return Err(bad("[gguf.quants] is empty".into()));
            }
            if !gguf.mmproj.contains_key(&gguf.default_mmproj) {
                return Err(bad(format!(
                    "default_mmproj {:?} is not a key of [gguf.mmproj]",
                    gguf.default_mmproj
                )));
            }
        }
        let quant_default = m
            .gguf
            .as_ref()
            .is_some_and(|g| g.quants.contains_key(&m.default_variant));
        if m.default_variant != SAFETENSORS_VARIANT && !quant_default {
            return Err(bad(format!(
                "default_variant {:?} is neither \"safetensors\" nor a key of [gguf.quants]",
                m.default_variant
            )));
        }
        Ok(m)
    }

    /// The variants this manifest offers: its quants, then `safetensors`.
    pub fn variants(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .gguf
            .iter()
            .flat_map(|g| g.quants.keys().cloned())
            .collect();
        v.push(SAFETENSORS_VARIANT.into());
        v
    }

    /// The files a variant needs, each with the repo it comes from. `None` = the default
    /// variant. A safetensors variant's weight shards are known only after reading the index,
    /// so they are not listed here.
    pub fn files_for(&self, variant: Option<&str>) -> Result<Vec<RemoteFile>> {
        let variant = normalize_variant(variant.unwrap_or(&self.default_variant));
        let st =
            |file: &str| RemoteFile::new(&self.safetensors.repo, self.safetensors.revision(), file);
        if variant == SAFETENSORS_VARIANT || variant == "bf16" {
            return Ok(vec![
                st(CONFIG_FILE),
                st(TOKENIZER_FILES[0]),
                st(PREPROCESSOR_FILE),
            ]);
        }
        let unknown = || {
            Error::hub(
                format!("{}:{variant}", self.id),
                format!(
                    "unknown variant {variant:?}; {} offers {}",
                    self.id,
                    self.variants().join(", ")
                ),
            )
        };
        let gguf = self.gguf.as_ref().ok_or_else(unknown)?;
        let text = gguf.quants.get(&variant).ok_or_else(unknown)?;
        // The key was checked in from_toml.
        let mmproj = &gguf.mmproj[&gguf.default_mmproj];
        Ok(vec![
            RemoteFile::new(&gguf.repo, gguf.revision(), text),
            RemoteFile::new(&gguf.repo, gguf.revision(), mmproj),
            st(TOKENIZER_FILES[0]),
        ])
    }
}

/// The manifests shipped with Sightline, in file order.
pub fn builtin_manifests() -> Result<Vec<ModelManifest>> {
    let manifests: Vec<ModelManifest> = BUILTIN_MANIFESTS
        .iter()
        .map(|(name, text)| ModelManifest::from_toml(text, &format!("built-in {name}")))
        .collect::<Result<_>>()?;
    let defaults = manifests.iter().filter(|m| m.default).count();
    if defaults != 1 {
        return Err(Error::config(format!(
            "exactly one built-in model manifest must be marked default, found {defaults}"
        )));
    }
    Ok(manifests)
}

/// Where user manifests are read from: `$XDG_CONFIG_HOME/sightline/models`, else
/// `~/.config/sightline/models` (on every platform). `None` without either variable.
pub fn user_manifest_dir() -> Option<PathBuf> {
    let nonempty = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    nonempty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| nonempty("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|config| config.join("sightline").join("models"))
}

/// The user's manifests in `dir` (`*.toml`, in name order); none when the directory does not
/// exist. A file that does not parse, two with one id, or more than one marked default is an
/// error naming the files.
pub fn user_manifests(dir: &Path) -> Result<Vec<ModelManifest>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    if paths.len() > MAX_USER_MANIFESTS {
        return Err(Error::config(format!(
            "{} holds {} manifests; at most {MAX_USER_MANIFESTS} are read",
            dir.display(),
            paths.len()
        )));
    }
    let mut manifests: Vec<ModelManifest> = Vec::with_capacity(paths.len());
    for path in paths {
        let text = input_file::read_string(&path, InputKind::Config)?;
        let m = ModelManifest::from_toml(&text, &path.display().to_string())?;
        if let Some(other) = manifests.iter().find(|o| o.id.eq_ignore_ascii_case(&m.id)) {
            return Err(Error::config(format!(
                "model manifests {} and {} both have the id {:?}",
                other.origin, m.origin, m.id
            )));
        }
        manifests.push(m);
    }
    let defaults: Vec<&str> = manifests
        .iter()
        .filter(|m| m.default)
        .map(|m| m.origin.as_str())
        .collect();
    if defaults.len() > 1 {
        return Err(Error::config(format!(
            "more than one user model manifest is marked default: {}",
            defaults.join(", ")
        )));
    }
    Ok(manifests)
}

/// The shipped manifests with the user's from `user_dir` merged in: a user manifest replaces a
/// shipped one of the same id, and one marked default takes over the default.
pub fn manifests_with(user_dir: Option<&Path>) -> Result<Vec<ModelManifest>> {
    let mut all = builtin_manifests()?;
    let Some(dir) = user_dir else {
        return Ok(all);
    };
    let user = user_manifests(dir)?;
    let builtin_default = all.iter().find(|m| m.default).map(|m| m.id.clone());
    let user_default = user.iter().find(|m| m.default).map(|m| m.id.clone());
    for m in user {
        match all.iter_mut().find(|o| o.id.eq_ignore_ascii_case(&m.id)) {
            Some(slot) => *slot = m,
            None => all.push(m),
        }
    }
    let default_id = user_default.or(builtin_default);
    for m in &mut all {
        m.default = default_id
            .as_deref()
            .is_some_and(|id| id.eq_ignore_ascii_case(&m.id));
    }
    Ok(all)
}

/// The shipped manifests and the user's ([`user_manifest_dir`]).
pub fn manifests() -> Result<Vec<ModelManifest>> {
    manifests_with(user_manifest_dir().as_deref())
}

/// The manifest marked `default = true`.
pub fn default_manifest() -> Result<ModelManifest> {
    manifests()?
        .into_iter()
        .find(|m| m.default)
        .ok_or_else(|| Error::config("no default model manifest"))
}

/// A manifest by id (case-insensitive), the user's before the shipped ones.
pub fn find_manifest(id: &str) -> Result<Option<ModelManifest>> {
    Ok(manifests()?
        .into_iter()
        .find(|m| m.id.eq_ignore_ascii_case(id)))
}

pub(super) fn normalize_variant(v: &str) -> String {
    v.trim().to_lowercase().replace('-', "_")
}

/// A file in a Hub repo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    /// Repo id.
    pub repo: String,
    /// Branch, tag or commit.
    pub revision: String,
    /// Path inside the repo.
    pub file: String,
}

impl RemoteFile {
    fn new(repo: &str, revision: &str, file: &str) -> Self {
        Self {
            repo: repo.into(),
            revision: revision.into(),
            file: file.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::testing::{failure, source_as};

    /// A manifest that is not TOML is an [`Error::Config`] naming it, with the TOML parser's
    /// error as its source and its message after the name.
    #[test]
    fn a_manifest_that_is_not_toml_keeps_the_parsers_error() -> Result<()> {
        let err = failure(
            ModelManifest::from_toml("id = [", "broken.toml"),
            "parsing a broken manifest",
        )?;
        let source: &toml::de::Error = source_as(&err)?;
        assert_eq!(
            err.to_string(),
            format!("model config: model manifest broken.toml: {source}")
        );
        Ok(())
    }

    #[test]
    fn builtin_manifests_parse_with_one_default_2b_q4_k_m() -> Result<()> {
        let ms = builtin_manifests()?;
        assert_eq!(ms.len(), BUILTIN_MANIFESTS.len());
        // Each file's id is its name: `models/<id>.toml`.
        for (m, (file, _)) in ms.iter().zip(BUILTIN_MANIFESTS) {
            assert_eq!(*file, format!("models/{}.toml", m.id));
        }
        let d = default_manifest()?;
        assert_eq!(d.id, "qwen3-vl-2b");
        assert_eq!(d.default_variant, "q4_k_m");
        Ok(())
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
        assert!(
            matches!(e, Err(Error::Config { reason, .. }) if reason.contains("default_mmproj"))
        );
    }
}
