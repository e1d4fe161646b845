//! Hugging Face safetensors checkpoints: `model.safetensors`, or the shards that
//! `model.safetensors.index.json` lists, memory-mapped.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use candle_core::safetensors::MmapedSafetensors;
use safetensors::Dtype;

use super::activations::LayerStorage;

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

impl SafetensorsFiles {
    /// How the text layers' matrices (`model.language_model.layers.*`, rank 2) are stored:
    /// half if any is f16 or bf16, else f32 (safetensors holds no quantized types).
    pub(crate) fn layer_storage(&self) -> LayerStorage {
        self.st
            .tensors()
            .iter()
            .filter(|(name, view)| {
                name.starts_with("model.language_model.layers.") && view.shape().len() == 2
            })
            .map(|(_, view)| match view.dtype() {
                Dtype::F16 | Dtype::BF16 => LayerStorage::Half,
                _ => LayerStorage::F32,
            })
            .max()
            .unwrap_or(LayerStorage::F32)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, Tensor};

    /// A directory holding one `model.safetensors` with `tensors` (name, dtype, shape).
    fn checkpoint(tensors: &[(&str, DType, &[usize])]) -> anyhow::Result<tempfile::TempDir> {
        let dir = tempfile::tempdir()?;
        let map: HashMap<String, Tensor> = tensors
            .iter()
            .map(|&(name, dtype, shape)| {
                Ok((name.to_string(), Tensor::zeros(shape, dtype, &Device::Cpu)?))
            })
            .collect::<anyhow::Result<_>>()?;
        candle_core::safetensors::save(&map, dir.path().join("model.safetensors"))?;
        Ok(dir)
    }

    /// What the default activation type on CUDA follows: the text layers' matrices, not
    /// their norms (often f32 beside bf16 matrices) nor the vision tower's.
    #[test]
    fn the_text_layers_matrices_tell_half_from_f32() -> anyhow::Result<()> {
        let layer = "model.language_model.layers.0.mlp.down_proj.weight";
        let norm = "model.language_model.layers.0.input_layernorm.weight";
        let vision = "model.visual.blocks.0.mlp.linear_fc1.weight";
        for (tensors, want) in [
            (vec![(layer, DType::BF16, &[4, 4][..])], LayerStorage::Half),
            (vec![(layer, DType::F16, &[4, 4][..])], LayerStorage::Half),
            (
                vec![
                    (layer, DType::F32, &[4, 4][..]),
                    (norm, DType::BF16, &[4][..]),
                ],
                LayerStorage::F32,
            ),
            (
                vec![
                    (layer, DType::F32, &[4, 4][..]),
                    (vision, DType::BF16, &[4, 4][..]),
                ],
                LayerStorage::F32,
            ),
        ] {
            let dir = checkpoint(&tensors)?;
            let got = open_shards(dir.path())?.layer_storage();
            anyhow::ensure!(got == want, "{tensors:?}: {got:?}");
        }
        Ok(())
    }
}
