//! Where a model's files are ([`ModelSource`]) and how to load them ([`LoadOptions`]).

use std::path::{Path, PathBuf};

use candle_core::quantized::{gguf_file, GgmlDType};
use candle_core::{DType, Device};
use tokenizers::Tokenizer;

use crate::error::{Error, Result};
use crate::image::PreprocessConfig;
use crate::tokenizer::{load_tokenizer, tokenizer_from_gguf};

/// Where a model's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A Hugging Face directory: `config.json` plus `model.safetensors` or shards with
    /// `model.safetensors.index.json`.
    Safetensors {
        /// The directory.
        dir: PathBuf,
    },
    /// A llama.cpp GGUF pair.
    Gguf {
        /// The text model (architecture `qwen3vl`).
        text: PathBuf,
        /// The vision projector (architecture `clip`).
        mmproj: PathBuf,
    },
}

impl ModelSource {
    /// The tokenizer that belongs to these files: `tokenizer.json` (or `.json.gz`) in a
    /// safetensors directory; the vocabulary a GGUF file carries, else a `tokenizer.json`
    /// beside the GGUF (official GGUF repos ship none, converted files carry one).
    pub fn tokenizer(&self) -> Result<Tokenizer> {
        let dir = match self {
            ModelSource::Safetensors { dir } => dir.clone(),
            ModelSource::Gguf { text, .. } => {
                crate::model::file_checks::check_gguf(text)?;
                let mut file = std::fs::File::open(text).map_err(|e| Error::io(text, e))?;
                let content = gguf_file::Content::read(&mut file)
                    .map_err(|e| Error::model_file_caused(text, "not a readable GGUF file", e))?;
                if content.metadata.contains_key("tokenizer.ggml.tokens") {
                    return tokenizer_from_gguf(&content, text);
                }
                text.parent().map(Path::to_path_buf).unwrap_or_default()
            }
        };
        ["tokenizer.json", "tokenizer.json.gz"]
            .iter()
            .map(|name| dir.join(name))
            .find(|path| path.is_file())
            .map(|path| load_tokenizer(&path))
            .unwrap_or_else(|| {
                Err(Error::tokenizer(format!(
                    "no tokenizer.json or tokenizer.json.gz in {}",
                    dir.display()
                )))
            })
    }

    /// The image preprocessing these files ask for: a safetensors directory's
    /// `preprocessor_config.json` when present, else Sightline's defaults (GGUF files carry
    /// none).
    pub fn preprocess_config(&self) -> Result<PreprocessConfig> {
        match self {
            ModelSource::Safetensors { dir } => PreprocessConfig::for_model_dir(dir),
            ModelSource::Gguf { .. } => Ok(PreprocessConfig::default()),
        }
    }
}

/// How to load a model.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// The files.
    pub source: ModelSource,
    /// Quantize float matrices to this type while loading (Q8_0, Q6K, Q5K or Q4K);
    /// `None` keeps them as stored.
    pub quantize: Option<GgmlDType>,
    /// Where tensors live.
    pub device: Device,
    /// Activation dtype; `None` picks [`default_activation_dtype`] for the device.
    pub dtype: Option<DType>,
    /// Keep every quantized matrix in the type the files store it in. By default
    /// (`false`), on a CPU with AVX-VNNI but not AVX-512 VNNI (where the eight-row
    /// kernels of `rows8/` do not run Q6_K, candle's kernels do), GGUF matrices stored as
    /// Q6_K are requantized to Q8_0 while loading: candle's Q6_K matrix-vector kernel reads
    /// weights at about a third of the speed of its repacked Q8_0 one, and llama.cpp's
    /// Q4_K_M / Q5_K_M files store the 151,936-row output head (and some FFN-down and
    /// attention-value matrices) as Q6_K, which made it the largest cost of a decode
    /// step. Costs 30% more memory for those matrices and adds Q8_0's rounding (about
    /// 1/254 of each 32-value block's largest weight) to the Q6_K values.
    pub exact_weights: bool,
}

impl LoadOptions {
    /// Options for `source` on the CPU, no quantization, default dtype.
    pub fn new(source: ModelSource) -> Self {
        LoadOptions {
            source,
            quantize: None,
            device: Device::Cpu,
            dtype: None,
            exact_weights: false,
        }
    }
}

/// The activation dtype used when the caller does not choose one: f32 on the CPU
/// (candle's quantized CPU kernels take f32 input), bf16 on CUDA, f32 on Metal (whose
/// bf16 support depends on the chip).
pub fn default_activation_dtype(device: &Device) -> DType {
    if device.is_cuda() {
        DType::BF16
    } else {
        DType::F32
    }
}

/// Whether Q6_K matrices are requantized to Q8_0 here (see
/// [`LoadOptions::exact_weights`]): candle's x86 kernels have their repacked VNNI Q8_0
/// path and `rows8/` has no Q6_K kernel for this CPU. Follows candle's own tier, so a run
/// forced to AVX2 (`SIGHTLINE_CPU_FEATURES=avx2`) keeps Q6_K as an AVX2-only CPU does.
pub(crate) fn q6k_runs_faster_as_q8_0() -> bool {
    crate::model::qwen3_vl::cpu::candle_quantized_tier().has_vnni()
        && super::rows8::kernel().is_none()
}

/// The quantization types quantize-at-load accepts.
pub const QUANTIZE_AT_LOAD_TYPES: [GgmlDType; 4] = [
    GgmlDType::Q8_0,
    GgmlDType::Q6K,
    GgmlDType::Q5K,
    GgmlDType::Q4K,
];

/// The files the hub resolved (`--model` as a manifest id, a Hub repo or a local path), as
/// the loader reads them: the one road from a model spec to a [`ModelSource`].
impl TryFrom<&crate::hub::ResolvedModel> for ModelSource {
    type Error = Error;

    fn try_from(resolved: &crate::hub::ResolvedModel) -> Result<Self> {
        use crate::hub::ModelFiles;
        Ok(match &resolved.files {
            ModelFiles::Gguf { model, mmproj, .. } => ModelSource::Gguf {
                text: model.clone(),
                mmproj: mmproj.clone(),
            },
            ModelFiles::Safetensors { config, .. } => ModelSource::Safetensors {
                dir: config
                    .parent()
                    .ok_or_else(|| {
                        Error::model_file(config, "config.json has no parent directory")
                    })?
                    .to_path_buf(),
            },
        })
    }
}
