//! Hugging Face safetensors checkpoints: `model.safetensors`, or the shards that
//! `model.safetensors.index.json` lists, memory-mapped.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use candle_core::safetensors::MmapedSafetensors;

use crate::error::{Error, Result};

/// The memory-mapped tensors of one safetensors directory.
pub(crate) struct SafetensorsFiles {
    /// The directory.
    pub(crate) dir: PathBuf,
    /// Every shard, mapped.
    pub(crate) st: MmapedSafetensors,
    /// Which file holds each tensor, for error messages.
    pub(crate) files: HashMap<String, PathBuf>,
}

/// Maps the directory's shards (no tensor data is read). Shard names from the index must
/// stay inside the directory.
pub(crate) fn open_shards(dir: &Path) -> Result<SafetensorsFiles> {
    let index_path = dir.join("model.safetensors.index.json");
    let shard_names: Vec<PathBuf> = if index_path.exists() {
        let text = std::fs::read_to_string(&index_path).map_err(|e| Error::io(&index_path, e))?;
        let index: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::model_file_caused(&index_path, "not valid JSON", e))?;
        let map = index
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| Error::model_file(&index_path, "no weight_map object"))?;
        let mut files = BTreeSet::new();
        for (tensor, file) in map {
            let file = file.as_str().ok_or_else(|| {
                Error::model_file(
                    &index_path,
                    format!("weight_map entry {tensor} is not a file name"),
                )
            })?;
            if file.contains('/') || file.contains('\\') || file.starts_with('.') {
                return Err(Error::model_file(
                    &index_path,
                    format!("weight_map entry {tensor} names {file:?} outside the directory"),
                ));
            }
            files.insert(dir.join(file));
        }
        files.into_iter().collect()
    } else {
        let single = dir.join("model.safetensors");
        if !single.exists() {
            return Err(Error::model_file(
                dir,
                "neither model.safetensors nor model.safetensors.index.json exists",
            ));
        }
        vec![single]
    };
    let mut files = HashMap::new();
    for path in &shard_names {
        crate::model::file_checks::check_safetensors(path)?;
        // SAFETY: the file is mapped read-only; like every memory-mapped model loader we
        // rely on it not being modified while the model is loaded.
        let st = unsafe { MmapedSafetensors::new(path) }
            .map_err(|e| Error::model_file_caused(path, "not a readable safetensors file", e))?;
        for (name, _) in st.tensors() {
            files.insert(name, path.clone());
        }
    }
    // SAFETY: as above.
    let st = unsafe { MmapedSafetensors::multi(&shard_names) }
        .map_err(|e| Error::model_file_caused(dir, "safetensors", e))?;
    Ok(SafetensorsFiles {
        dir: dir.to_path_buf(),
        st,
        files,
    })
}
