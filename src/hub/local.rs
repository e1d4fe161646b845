//! Resolving a local directory or file: a GGUF pair or a safetensors checkpoint.

use std::path::{Path, PathBuf};

use super::files::{is_mmproj, read_index_shards, MMPROJ_PREFERENCE};
use super::{
    ModelFiles, ResolvedModel, CONFIG_FILE, DEFAULT_VISUAL_TOKEN_BUDGET, PREPROCESSOR_FILE,
    SAFETENSORS_INDEX, TOKENIZER_FILES,
};
use crate::error::{Error, Result};

/// Resolves a local directory or file.
pub(super) fn resolve_local(spec: &str, path: &Path) -> Result<ResolvedModel> {
    let err = |reason: String| Error::hub(spec, reason);
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
            dialect: Default::default(),
            template: Default::default(),
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
        dialect: Default::default(),
        template: Default::default(),
    })
}
