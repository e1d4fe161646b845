//! Parsing a `--model` value into a [`ModelSpec`]: a manifest id, a Hub repo id or a local
//! path (the rules are in the [`crate::hub`] docs).

use std::path::{Path, PathBuf};

use super::manifest::{find_manifest, manifests, ModelManifest};
use super::SAFETENSORS_VARIANT;
use crate::error::{Error, Result};

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
    let hub_err = |reason: String| Error::hub(spec, reason);
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
        for m in manifests()? {
            let in_gguf = m
                .gguf
                .as_ref()
                .is_some_and(|g| g.repo.eq_ignore_ascii_case(&repo));
            let variant = if in_gguf {
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
    let ids: Vec<String> = manifests()?.into_iter().map(|m| m.id).collect();
    Err(hub_err(format!(
        "unknown model; use a manifest id ({}), a Hub repo id (owner/name) or a local path",
        ids.join(", ")
    )))
}
