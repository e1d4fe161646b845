//! Where a model's files are ([`ModelSource`]) and how to load them ([`LoadOptions`]).

use std::path::{Path, PathBuf};

use candle_core::quantized::{gguf_file, GgmlDType};
use candle_core::{DType, Device};
use tokenizers::Tokenizer;

use crate::error::{Error, Result};
use crate::image::PreprocessConfig;
use crate::tokenizer::{load_tokenizer, tokenizer_from_gguf, Vocabulary};

/// The file a model's tokenizer is read from.
enum TokenizerFile {
    /// The vocabulary inside a GGUF file (its metadata, and the file's path).
    Gguf(Box<gguf_file::Content>, PathBuf),
    /// A `tokenizer.json` or `tokenizer.json.gz`.
    Json(PathBuf),
}

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
    /// What identifies these weights wherever they are stored: each weight file's name and
    /// size (a cache path differs between machines, the files do not). Used to refuse a
    /// grader head fitted on other weights.
    pub fn identity(&self) -> String {
        let file = |p: &PathBuf| {
            let name = p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            let size = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            format!("{name} ({size} bytes)")
        };
        let files: Vec<String> = self.weight_files().iter().map(file).collect();
        files.join(" + ")
    }

    /// The weight files: the GGUF pair, or a directory's `.safetensors` files in name order.
    pub fn weight_files(&self) -> Vec<PathBuf> {
        match self {
            ModelSource::Gguf { text, mmproj } => vec![text.clone(), mmproj.clone()],
            ModelSource::Safetensors { dir } => {
                let mut weights: Vec<PathBuf> = std::fs::read_dir(dir)
                    .map(|entries| {
                        entries
                            .filter_map(|e| e.ok().map(|e| e.path()))
                            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
                            .collect()
                    })
                    .unwrap_or_default();
                weights.sort();
                weights
            }
        }
    }

    /// The tokenizer that belongs to these files: `tokenizer.json` (or `.json.gz`) in a
    /// safetensors directory; the vocabulary a GGUF file carries, else a `tokenizer.json`
    /// beside the GGUF (official GGUF repos ship none, converted files carry one).
    pub fn tokenizer(&self) -> Result<Tokenizer> {
        match self.tokenizer_file()? {
            TokenizerFile::Gguf(content, path) => tokenizer_from_gguf(&content, &path),
            TokenizerFile::Json(path) => load_tokenizer(&path),
        }
    }

    /// The vocabulary of [`tokenizer`](Self::tokenizer), read from the same file without
    /// building the tokenizer.
    pub fn vocabulary(&self) -> Result<Vocabulary> {
        match self.tokenizer_file()? {
            TokenizerFile::Gguf(content, path) => Vocabulary::from_gguf(&content, &path),
            TokenizerFile::Json(path) => Vocabulary::from_tokenizer_json(&path),
        }
    }

    fn tokenizer_file(&self) -> Result<TokenizerFile> {
        let dir = match self {
            ModelSource::Safetensors { dir } => dir.clone(),
            ModelSource::Gguf { text, .. } => {
                crate::model::file_checks::check_gguf(text)?;
                let file = std::fs::File::open(text).map_err(|e| Error::io(text, e))?;
                let map = super::mapped::MappedFile::new(&file).ok();
                let content = super::gguf::read_content(text, &file, map.as_ref())?;
                if content.metadata.contains_key("tokenizer.ggml.tokens") {
                    return Ok(TokenizerFile::Gguf(Box::new(content), text.clone()));
                }
                text.parent().map(Path::to_path_buf).unwrap_or_default()
            }
        };
        ["tokenizer.json", "tokenizer.json.gz"]
            .iter()
            .map(|name| dir.join(name))
            .find(|path| path.is_file())
            .map(TokenizerFile::Json)
            .ok_or_else(|| {
                Error::tokenizer(format!(
                    "no tokenizer.json or tokenizer.json.gz in {}",
                    dir.display()
                ))
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
    /// Activation dtype; `None` picks
    /// [`default_activation_dtype`](super::default_activation_dtype) for the device and the
    /// text decoder's storage.
    pub dtype: Option<DType>,
}

impl LoadOptions {
    /// Options for `source` on the CPU, no quantization, default dtype.
    pub fn new(source: ModelSource) -> Self {
        LoadOptions {
            source,
            quantize: None,
            device: Device::Cpu,
            dtype: None,
        }
    }
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
