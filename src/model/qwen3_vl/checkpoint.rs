//! Qwen3-VL's view of a checkpoint: the [`WeightSource`] the model code asks for tensors by
//! checkpoint name, with the configuration the files describe. The formats are read by
//! `crate::model::weights`; the name mapping is [`names`](super::names).
//!
//! GGUF names follow llama.cpp's converter (`conversion/qwen3vl.py`): no permutation of q/k
//! is applied for this architecture, and the Conv3d patch embedding is stored as one 2-D
//! slice per frame (`v.patch_embd.weight`, `v.patch_embd.weight.1`), stacked back here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul};
use candle_core::{DType, Device, Tensor};

use super::config::{GgufTensorFacts, Qwen3VlConfig};
use super::names::{gguf_name, legacy_names, patch_embed_slice};
use crate::error::{Error, Result};
use crate::model::weights::{
    open_shards, GgufFile, GgufPart, LayerStorage, Linear, LoadOptions, MappedPages, ModelSource,
    SafetensorsFiles, Stored, TensorConverter,
};

enum Backend {
    Safetensors(SafetensorsFiles),
    Gguf { text: GgufFile, mmproj: GgufFile },
}

/// Named weights from a safetensors directory or a GGUF pair, ready for [`QMatMul`].
pub struct WeightSource {
    backend: Backend,
    config: Qwen3VlConfig,
    conv: TensorConverter,
}

impl std::fmt::Debug for WeightSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightSource")
            .field("source", &self.describe())
            .field("device", &self.conv.device)
            .field("dtype", &self.conv.dtype)
            .field("quantize", &self.conv.quantize)
            .finish()
    }
}

impl WeightSource {
    /// Open the files named by `opts`, read and validate the configuration. Tensors are
    /// read later, one by one, as the model asks for them.
    pub fn open(opts: &LoadOptions) -> Result<Self> {
        let (backend, config) = match &opts.source {
            ModelSource::Safetensors { dir } => open_safetensors(dir)?,
            ModelSource::Gguf { text, mmproj } => open_gguf(text, mmproj)?,
        };
        let layers = match &backend {
            _ if opts.quantize.is_some() => LayerStorage::Quantized,
            Backend::Gguf { text, .. } => text.layer_storage(),
            Backend::Safetensors(files) => files.layer_storage(),
        };
        let conv = TensorConverter::new(opts, layers)?;
        Ok(WeightSource {
            backend,
            config,
            conv,
        })
    }

    /// The validated configuration.
    pub fn config(&self) -> &Qwen3VlConfig {
        &self.config
    }

    /// The device tensors are loaded onto.
    pub fn device(&self) -> &Device {
        &self.conv.device
    }

    /// The activation dtype.
    pub fn dtype(&self) -> DType {
        self.conv.dtype
    }

    /// A one-line description of the files, for logs and errors.
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Safetensors(s) => format!("safetensors {}", s.dir.display()),
            Backend::Gguf { text, mmproj } => {
                format!("gguf {} + {}", text.path.display(), mmproj.path.display())
            }
        }
    }

    /// Names and storage types of every tensor, sorted by name (for `models info`).
    pub fn tensor_summary(&self) -> Vec<(String, String, Vec<usize>)> {
        let mut out = Vec::new();
        match &self.backend {
            Backend::Safetensors(s) => {
                for (name, view) in s.st.tensors() {
                    out.push((name, format!("{:?}", view.dtype()), view.shape().to_vec()));
                }
            }
            Backend::Gguf { text, mmproj } => {
                for f in [text, mmproj] {
                    for (name, info) in &f.content.tensor_infos {
                        out.push((
                            name.clone(),
                            format!("{:?}", info.ggml_dtype),
                            info.shape.dims().to_vec(),
                        ));
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// What `sightline models info` prints: the files, the resolved configuration, the
    /// tensor count and how many tensors each storage type holds. Reads no tensor data.
    pub fn info(&self) -> ModelInfo {
        let tensors = self.tensor_summary();
        let mut storage_types = std::collections::BTreeMap::new();
        for (_, dtype, _) in &tensors {
            *storage_types.entry(dtype.clone()).or_insert(0) += 1;
        }
        // `model_type` / `general.architecture` as the files spell them (both are checked
        // when the files are opened).
        let architecture = match &self.backend {
            Backend::Safetensors(_) => "qwen3_vl (Qwen3VLForConditionalGeneration, safetensors)",
            Backend::Gguf { .. } => "qwen3vl + clip mmproj (GGUF)",
        };
        ModelInfo {
            source: self.describe(),
            architecture: architecture.to_string(),
            config: self.config.clone(),
            tensor_count: tensors.len(),
            storage_types,
            total_bytes: self.stored_bytes(),
        }
    }

    /// Bytes the tensors occupy in the files (data only, headers and metadata excluded),
    /// from the headers: no tensor data is read.
    pub fn stored_bytes(&self) -> u64 {
        match &self.backend {
            Backend::Safetensors(s) => {
                s.st.tensors()
                    .iter()
                    .map(|(_, view)| view.data().len() as u64)
                    .sum()
            }
            Backend::Gguf { text, mmproj } => [text, mmproj]
                .iter()
                .flat_map(|f| f.content.tensor_infos.values())
                .map(|info| {
                    let blocks = info.shape.elem_count() / info.ggml_dtype.block_size();
                    (blocks * info.ggml_dtype.type_size()) as u64
                })
                .sum(),
        }
    }

    fn path_for(&self, name: &str) -> PathBuf {
        match &self.backend {
            Backend::Safetensors(s) => s.files.get(name).cloned().unwrap_or_else(|| s.dir.clone()),
            Backend::Gguf { text, mmproj } => {
                if name.starts_with("model.visual.") {
                    mmproj.path.clone()
                } else {
                    text.path.clone()
                }
            }
        }
    }

    /// Whether the checkpoint holds `name` (a checkpoint name).
    pub fn contains(&self, name: &str) -> bool {
        match &self.backend {
            Backend::Safetensors(s) => std::iter::once(name.to_string())
                .chain(legacy_names(name))
                .any(|n| s.files.contains_key(&n)),
            Backend::Gguf { text, mmproj } => match self.gguf_name(name) {
                Some((GgufPart::Text, n)) => text.shape(&n).is_some(),
                Some((GgufPart::Mmproj, n)) => mmproj.shape(&n).is_some(),
                None => false,
            },
        }
    }

    fn load_stored(&self, name: &str) -> Result<Stored> {
        match &self.backend {
            Backend::Safetensors(s) => {
                let Some((stored_name, path)) = std::iter::once(name.to_string())
                    .chain(legacy_names(name))
                    .find_map(|n| s.files.get(&n).map(|p| (n, p)))
                else {
                    return Err(Error::model_file(
                        &s.dir,
                        format!("tensor {name} is missing"),
                    ));
                };
                // Read onto the CPU: the float conversion and quantize-at-load happen
                // there, and only the final weight moves to the device.
                let t =
                    s.st.load(&stored_name, &Device::Cpu)
                        .map_err(|e| Error::model_file_caused(path, format!("tensor {name}"), e))?;
                Ok(Stored::Float(t))
            }
            Backend::Gguf { text, mmproj } => {
                if name == "model.visual.patch_embed.proj.weight" {
                    return self.gguf_patch_embed(mmproj).map(Stored::Float);
                }
                let (part, gname) = self.gguf_name(name).ok_or_else(|| {
                    Error::model_file(
                        &text.path,
                        format!("no GGUF name is known for checkpoint tensor {name}"),
                    )
                })?;
                let file = match part {
                    GgufPart::Text => text,
                    GgufPart::Mmproj => mmproj,
                };
                Ok(Stored::Quant(file.read(&gname, &self.conv.device)?))
            }
        }
    }

    /// llama.cpp splits the `(hidden, C, T, P, P)` Conv3d weight into T slices of
    /// `(hidden, C, P, P)`; stack them back along the temporal axis.
    fn gguf_patch_embed(&self, mmproj: &GgufFile) -> Result<Tensor> {
        let device = &self.conv.device;
        let frames = (0..self.config.vision.temporal_patch_size)
            .map(|t| {
                let name = patch_embed_slice(t);
                let q = mmproj.read(&name, device)?;
                q.dequantize(device).map_err(|e| {
                    Error::model_file_caused(&mmproj.path, format!("tensor {name}"), e)
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Tensor::stack(&frames, 2)?)
    }

    fn check_shape(&self, name: &str, found: &[usize], expected: &[usize]) -> Result<()> {
        if found != expected {
            return Err(Error::tensor(
                name,
                format!(
                    "expected shape {expected:?}, found {found:?} in {}",
                    self.path_for(name).display()
                ),
            ));
        }
        Ok(())
    }

    /// A float tensor (norm weight, bias, position table) of `shape`, in the activation
    /// dtype. Quantized storage is dequantized.
    pub fn float(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let t = self
            .conv
            .float(name, self.load_stored(name)?, &self.path_for(name))?;
        self.check_shape(name, t.dims(), shape)?;
        Ok(t.to_dtype(self.conv.dtype)?.to_device(&self.conv.device)?)
    }

    /// A matrix of `shape = (rows, cols)` as a [`QMatMul`]: quantized storage stays
    /// quantized, float storage is quantized when [`LoadOptions::quantize`] asks and
    /// `cols` is a multiple of the block size, and otherwise kept in the activation dtype.
    pub fn matrix(&self, name: &str, shape: (usize, usize)) -> Result<QMatMul> {
        Ok(self.matrix_with_pages(name, shape)?.0)
    }

    /// [`WeightSource::matrix`], with the file pages the matrix is read from in place (a
    /// quantized GGUF matrix on the CPU): give them to its [`Linear`], which drops them
    /// once candle has repacked the matrix.
    pub fn matrix_with_pages(
        &self,
        name: &str,
        shape: (usize, usize),
    ) -> Result<(QMatMul, Option<MappedPages>)> {
        let expected = [shape.0, shape.1];
        let stored = self.load_stored(name)?;
        let found = match &stored {
            Stored::Float(t) => t.dims().to_vec(),
            Stored::Quant(q) => q.shape().dims().to_vec(),
        };
        self.check_shape(name, &found, &expected)?;
        let pages = match &self.backend {
            Backend::Gguf { text, mmproj } if self.conv.device.is_cpu() => {
                self.gguf_name(name).and_then(|(part, gname)| match part {
                    GgufPart::Text => text.pages(&gname),
                    GgufPart::Mmproj => mmproj.pages(&gname),
                })
            }
            _ => None,
        };
        // A half-precision GGUF matrix read in place stays there (the CPU keeps half
        // precision as stored anyway; `Linear` widens it per matmul and drops its pages).
        let keep_in_place = pages.is_some() && self.conv.quantize.is_none();
        let stored = match stored {
            Stored::Quant(q)
                if keep_in_place && matches!(q.dtype(), GgmlDType::F16 | GgmlDType::BF16) =>
            {
                return Ok((QMatMul::QTensor(Arc::new(q)), pages));
            }
            other => other,
        };
        let weight = self.conv.matrix(name, stored)?;
        let pages = pages.filter(|_| matches!(weight, QMatMul::QTensor(_)));
        Ok((weight, pages))
    }

    /// The GGUF file and name of checkpoint tensor `name`.
    fn gguf_name(&self, name: &str) -> Option<(GgufPart, String)> {
        gguf_name(name, &self.config.vision.deepstack_visual_indexes)
    }

    /// A linear layer `name.weight` of `(out_dim, in_dim)`, with `name.bias` when `bias`.
    pub fn linear(&self, name: &str, out_dim: usize, in_dim: usize, bias: bool) -> Result<Linear> {
        let (weight, pages) =
            self.matrix_with_pages(&format!("{name}.weight"), (out_dim, in_dim))?;
        let bias = if bias {
            Some(self.float(&format!("{name}.bias"), &[out_dim])?)
        } else {
            None
        };
        Ok(Linear::new(weight, bias, self.conv.dtype).with_pages(pages))
    }

    /// Drop this process's pages of the mapped model files. Call once the model is built:
    /// what was copied out of them is not read again, and a matrix read in place faults
    /// its pages back in when a kernel reads it.
    pub fn release_pages(&self) {
        if let Backend::Gguf { text, mmproj } = &self.backend {
            text.release_pages();
            mmproj.release_pages();
        }
    }
}

/// A summary of a checkpoint, from [`WeightSource::info`].
#[derive(Debug, Clone)]
pub struct ModelInfo {
    /// The files.
    pub source: String,
    /// The architecture as the files name it.
    pub architecture: String,
    /// The resolved configuration (dimensions).
    pub config: Qwen3VlConfig,
    /// Number of stored tensors (both files for GGUF).
    pub tensor_count: usize,
    /// Tensors per storage type (`F16`, `BF16`, `Q8_0`, `Q4K`, ...).
    pub storage_types: std::collections::BTreeMap<String, usize>,
    /// Bytes of tensor data in the files ([`WeightSource::stored_bytes`]).
    pub total_bytes: u64,
}

fn open_safetensors(dir: &Path) -> Result<(Backend, Qwen3VlConfig)> {
    let config = Qwen3VlConfig::from_config_json(&dir.join("config.json"))?;
    Ok((Backend::Safetensors(open_shards(dir)?), config))
}

fn open_gguf(text_path: &Path, mmproj_path: &Path) -> Result<(Backend, Qwen3VlConfig)> {
    let text = GgufFile::open(text_path)?;
    let mmproj = GgufFile::open(mmproj_path)?;
    // Check the roles first: a swapped or foreign file is named as such, not by the
    // first tensor it lacks.
    for (file, expected) in [(&text, "qwen3vl"), (&mmproj, "clip")] {
        let arch = file.meta().string("general.architecture")?.to_string();
        if arch != expected {
            return Err(Error::model_file(
                &file.path,
                format!("general.architecture is {arch:?}, expected {expected:?}"),
            ));
        }
    }
    let embd = text
        .shape("token_embd.weight")
        .ok_or_else(|| Error::model_file(text_path, "tensor token_embd.weight is missing"))?;
    let patch = mmproj
        .shape("v.patch_embd.weight")
        .ok_or_else(|| Error::model_file(mmproj_path, "tensor v.patch_embd.weight is missing"))?;
    let (&[vocab_size, _], &[_, in_channels, _, _]) = (embd, patch) else {
        return Err(Error::model_file(
            text_path,
            format!("token_embd.weight {embd:?} or v.patch_embd.weight {patch:?} has an unexpected rank"),
        ));
    };
    let mut temporal_patch_size = 1;
    while mmproj
        .shape(&format!("v.patch_embd.weight.{temporal_patch_size}"))
        .is_some()
    {
        temporal_patch_size += 1;
    }
    let facts = GgufTensorFacts {
        vocab_size,
        has_output: text.shape("output.weight").is_some(),
        temporal_patch_size,
        in_channels,
    };
    let config = Qwen3VlConfig::from_gguf(&text.meta(), &mmproj.meta(), &facts)?;
    Ok((Backend::Gguf { text, mmproj }, config))
}
