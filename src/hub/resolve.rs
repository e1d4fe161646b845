//! Resolving a parsed `--model` spec to files on disk: a manifest's variant, a Hub repo (its
//! listing decides GGUF or safetensors) or a local path.

use super::files::{pick_gguf_pair, read_index_shards};
use super::local::resolve_local;
use super::manifest::{normalize_variant, ModelManifest};
use super::spec::{parse_model_spec, ModelSpec};
use super::{
    Hub, ModelFiles, ResolvedModel, CONFIG_FILE, DEFAULT_VISUAL_TOKEN_BUDGET, PREPROCESSOR_FILE,
    SAFETENSORS_INDEX, SAFETENSORS_SINGLE, SAFETENSORS_VARIANT, TOKENIZER_FILES,
};
use crate::error::{Error, Result};

impl Hub {
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
            self.fetch_safetensors(spec, &m.safetensors.repo, m.safetensors.revision())?
        } else {
            let mut paths = Vec::with_capacity(files.len());
            for f in &files {
                paths.push(self.fetch(spec, &f.repo, &f.revision, &f.file)?);
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
            dialect: m.dialect,
            template: m.template,
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
            let (text, mmproj) = pick_gguf_pair(&names, quant)
                .map_err(|reason| Error::hub(spec, format!("in the Hub repo {repo}: {reason}")))?;
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
            return Err(Error::hub(
                spec,
                format!(
                    "the Hub repo {repo} has neither GGUF files nor a config.json; files: {}",
                    files.join(", ")
                ),
            ));
        };
        Ok(ResolvedModel {
            spec: spec.into(),
            source,
            files: model_files,
            visual_token_budget: DEFAULT_VISUAL_TOKEN_BUDGET,
            dialect: Default::default(),
            template: Default::default(),
        })
    }
}

/// Parses and resolves a `--model` value with the environment's Hub settings.
pub fn resolve_model(spec: &str) -> Result<ResolvedModel> {
    Hub::from_env().resolve(spec, &parse_model_spec(spec)?)
}
