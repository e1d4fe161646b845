//! Weight loading: one source of named tensors for every checkpoint format.
//!
//! The model code asks for weights by their Hugging Face checkpoint names
//! (`model.language_model.layers.0.self_attn.q_proj.weight`) and gets them ready for
//! candle's [`QMatMul`]; the [`WeightSource`] hides where they come from:
//!
//! - a Hugging Face safetensors directory (`model.safetensors`, or shards listed in
//!   `model.safetensors.index.json`), f32 / f16 / bf16, memory-mapped;
//! - the same, quantized while loading to Q8_0 / Q6_K / Q5_K / Q4_K
//!   ([`LoadOptions::quantize`]). A matrix whose rows are not a multiple of the
//!   quantization block (32 values for Q8_0, 256 for the K-quants) keeps its float
//!   weights: the tiny test checkpoints (hidden size 32) stay float under the K-quants;
//! - a llama.cpp GGUF pair: the text model (architecture `qwen3vl`) and its `mmproj`
//!   (architecture `clip`). GGUF names are mapped to checkpoint names here, following
//!   llama.cpp's converter (`conversion/qwen3vl.py`): no permutation of q/k is applied
//!   for this architecture, and the Conv3d patch embedding is stored as one 2-D slice per
//!   frame (`v.patch_embd.weight`, `v.patch_embd.weight.1`), stacked back here.
//!
//! Float weights are kept in the activation dtype, except f16 / bf16 matrices on the
//! CPU, which stay in their stored half precision (half the memory) and are widened per
//! matmul. Quantized weights stay quantized and go through the quantized matmul kernels
//! of the device, with one exception on x86 CPUs with VNNI: Q6_K matrices are requantized
//! to Q8_0 ([`LoadOptions::exact_weights`] says why and turns it off).

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::quantized::k_quants::{BlockQ8_0, GgmlType};
use candle_core::quantized::{ggml_file, gguf_file, GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Module, Tensor};

use tokenizers::Tokenizer;

use crate::error::{Error, Result};
use crate::image::PreprocessConfig;
use crate::model::qwen3_vl::config::{GgufMeta, GgufTensorFacts, Qwen3VlConfig};
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
                let content = gguf_file::Content::read(&mut file).map_err(|e| {
                    Error::model_file(text, format!("not a readable GGUF file: {e}"))
                })?;
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
                Err(Error::Tokenizer(format!(
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
    /// (`false`), on a CPU with AVX512-VNNI or AVX-VNNI, GGUF matrices stored as Q6_K
    /// are requantized to Q8_0 while loading: candle's Q6_K matrix-vector kernel reads
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

/// Whether candle's x86 CPU kernels have their repacked VNNI Q8_0 path here (the
/// condition under which Q6_K is requantized, see [`LoadOptions::exact_weights`]).
fn cpu_has_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        (is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"))
            || (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("avxvnni"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The quantization types quantize-at-load accepts.
pub const QUANTIZE_AT_LOAD_TYPES: [GgmlDType; 4] = [
    GgmlDType::Q8_0,
    GgmlDType::Q6K,
    GgmlDType::Q5K,
    GgmlDType::Q4K,
];

/// A tensor as stored in a checkpoint.
enum Stored {
    Float(Tensor),
    Quant(QTensor),
}

struct GgufFile {
    path: PathBuf,
    file: std::fs::File,
    content: gguf_file::Content,
}

impl GgufFile {
    fn open(path: &Path) -> Result<Self> {
        crate::model::file_checks::check_gguf(path)?;
        let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| Error::model_file(path, format!("not a readable GGUF file: {e}")))?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            file,
            content,
        })
    }

    fn meta(&self) -> GgufMeta<'_> {
        GgufMeta {
            path: &self.path,
            metadata: &self.content.metadata,
        }
    }

    fn shape(&self, name: &str) -> Option<&[usize]> {
        self.content.tensor_infos.get(name).map(|t| t.shape.dims())
    }

    fn read(&self, name: &str, device: &Device) -> Result<QTensor> {
        if !self.content.tensor_infos.contains_key(name) {
            return Err(Error::model_file(
                &self.path,
                format!("tensor {name} is missing"),
            ));
        }
        // `&File` is Read + Seek, so reads need no lock and no mutable borrow.
        let mut reader = &self.file;
        self.content
            .tensor(&mut reader, name, device)
            .map_err(|e| Error::model_file(&self.path, format!("tensor {name}: {e}")))
    }

    /// The stored type of `name`, if the file holds it.
    fn dtype(&self, name: &str) -> Option<GgmlDType> {
        self.content.tensor_infos.get(name).map(|t| t.ggml_dtype)
    }

    /// The Q6_K matrix `name` of `rows × cols`, requantized to Q8_0 on the CPU. Read
    /// 4 MiB of rows at a time (the Q6_K copy is never whole in memory), each read
    /// converted by all of candle's threads (the 2B Q4_K_M file's Q6_K matrices add 1–2 s
    /// to a 3 s load on 2 threads).
    fn read_q6k_as_q8_0(&self, name: &str, rows: usize, cols: usize) -> Result<QTensor> {
        /// Rows one thread converts at a time.
        const TASK_ROWS: usize = 64;
        let err = |e: &dyn std::fmt::Display| {
            Error::model_file(&self.path, format!("tensor {name}: {e}"))
        };
        let info = &self.content.tensor_infos[name];
        let row_bytes = cols / GgmlDType::Q6K.block_size() * GgmlDType::Q6K.type_size();
        let q8_per_row = cols / GgmlDType::Q8_0.block_size();
        let chunk_rows = ((4 << 20) / row_bytes).max(TASK_ROWS) / TASK_ROWS * TASK_ROWS;
        let mut blocks = vec![BlockQ8_0::zeros(); rows * q8_per_row];
        let mut raw = vec![0u8; chunk_rows * row_bytes];
        let mut reader = &self.file;
        reader
            .seek(SeekFrom::Start(
                self.content.tensor_data_offset + info.offset,
            ))
            .map_err(|e| err(&e))?;
        let failure = std::sync::Mutex::new(None);
        for out in blocks.chunks_mut(chunk_rows * q8_per_row) {
            let n = out.len() / q8_per_row;
            let raw = &mut raw[..n * row_bytes];
            reader.read_exact(raw).map_err(|e| err(&e))?;
            let tasks: Vec<_> = out
                .chunks_mut(TASK_ROWS * q8_per_row)
                .zip(raw.chunks(TASK_ROWS * row_bytes))
                .map(std::sync::Mutex::new)
                .collect();
            candle_core::utils::barrier_pool().execute_chunked(tasks.len(), |range| {
                for task in &tasks[range] {
                    let Ok(mut task) = task.lock() else { continue };
                    let (out, raw) = &mut *task;
                    let converted = ggml_file::qtensor_from_ggml(
                        GgmlDType::Q6K,
                        raw,
                        vec![raw.len() / row_bytes, cols],
                        &Device::Cpu,
                    )
                    .and_then(|q| q.dequantize(&Device::Cpu)?.flatten_all()?.to_vec1::<f32>());
                    match converted {
                        Ok(values) => BlockQ8_0::from_float(&values, out),
                        Err(e) => {
                            if let Ok(mut f) = failure.lock() {
                                f.get_or_insert(e);
                            }
                        }
                    }
                }
            });
            if let Some(e) = failure.lock().ok().and_then(|mut f| f.take()) {
                return Err(err(&e));
            }
        }
        Ok(QTensor::new(QStorage::Cpu(Box::new(blocks)), (rows, cols))?)
    }
}

enum Backend {
    Safetensors {
        dir: PathBuf,
        st: MmapedSafetensors,
        /// Which file holds each tensor, for error messages.
        files: HashMap<String, PathBuf>,
    },
    Gguf {
        text: GgufFile,
        mmproj: GgufFile,
    },
}

/// Named weights from a safetensors directory or a GGUF pair, ready for [`QMatMul`].
pub struct WeightSource {
    backend: Backend,
    config: Qwen3VlConfig,
    device: Device,
    dtype: DType,
    quantize: Option<GgmlDType>,
    /// See [`LoadOptions::exact_weights`].
    q6k_as_q8_0: bool,
}

impl std::fmt::Debug for WeightSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightSource")
            .field("source", &self.describe())
            .field("device", &self.device)
            .field("dtype", &self.dtype)
            .field("quantize", &self.quantize)
            .finish()
    }
}

impl WeightSource {
    /// Open the files named by `opts`, read and validate the configuration. Tensors are
    /// read later, one by one, as the model asks for them.
    pub fn open(opts: &LoadOptions) -> Result<Self> {
        if let Some(q) = opts.quantize {
            if !QUANTIZE_AT_LOAD_TYPES.contains(&q) {
                return Err(Error::Config(format!(
                    "quantize-at-load to {q:?} is not supported (use Q8_0, Q6K, Q5K or Q4K)"
                )));
            }
        }
        let dtype = opts
            .dtype
            .unwrap_or_else(|| default_activation_dtype(&opts.device));
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(Error::Config(format!(
                "activation dtype {dtype:?} is not a float type"
            )));
        }
        let (backend, config) = match &opts.source {
            ModelSource::Safetensors { dir } => open_safetensors(dir)?,
            ModelSource::Gguf { text, mmproj } => open_gguf(text, mmproj)?,
        };
        Ok(WeightSource {
            backend,
            config,
            device: opts.device.clone(),
            dtype,
            quantize: opts.quantize,
            q6k_as_q8_0: !opts.exact_weights && opts.device.is_cpu() && cpu_has_vnni(),
        })
    }

    /// The validated configuration.
    pub fn config(&self) -> &Qwen3VlConfig {
        &self.config
    }

    /// The device tensors are loaded onto.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The activation dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// A one-line description of the files, for logs and errors.
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Safetensors { dir, .. } => format!("safetensors {}", dir.display()),
            Backend::Gguf { text, mmproj } => {
                format!("gguf {} + {}", text.path.display(), mmproj.path.display())
            }
        }
    }

    /// Names and storage types of every tensor, sorted by name (for `models info`).
    pub fn tensor_summary(&self) -> Vec<(String, String, Vec<usize>)> {
        let mut out = Vec::new();
        match &self.backend {
            Backend::Safetensors { st, .. } => {
                for (name, view) in st.tensors() {
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
            Backend::Safetensors { .. } => {
                "qwen3_vl (Qwen3VLForConditionalGeneration, safetensors)"
            }
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
            Backend::Safetensors { st, .. } => st
                .tensors()
                .iter()
                .map(|(_, view)| view.data().len() as u64)
                .sum(),
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
            Backend::Safetensors { dir, files, .. } => {
                files.get(name).cloned().unwrap_or_else(|| dir.clone())
            }
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
            Backend::Safetensors { files, .. } => std::iter::once(name.to_string())
                .chain(legacy_names(name))
                .any(|n| files.contains_key(&n)),
            Backend::Gguf { text, mmproj } => match gguf_name(name, &self.config) {
                Some((GgufPart::Text, n)) => text.shape(&n).is_some(),
                Some((GgufPart::Mmproj, n)) => mmproj.shape(&n).is_some(),
                None => false,
            },
        }
    }

    fn load_stored(&self, name: &str) -> Result<Stored> {
        match &self.backend {
            Backend::Safetensors { dir, st, files } => {
                let Some((stored_name, path)) = std::iter::once(name.to_string())
                    .chain(legacy_names(name))
                    .find_map(|n| files.get(&n).map(|p| (n, p)))
                else {
                    return Err(Error::model_file(dir, format!("tensor {name} is missing")));
                };
                // Read onto the CPU: the float conversion and quantize-at-load happen
                // there, and only the final weight moves to the device.
                let t = st
                    .load(&stored_name, &Device::Cpu)
                    .map_err(|e| Error::model_file(path, format!("tensor {name}: {e}")))?;
                Ok(Stored::Float(t))
            }
            Backend::Gguf { text, mmproj } => {
                if name == "model.visual.patch_embed.proj.weight" {
                    return self.gguf_patch_embed(mmproj).map(Stored::Float);
                }
                let (part, gname) = gguf_name(name, &self.config).ok_or_else(|| {
                    Error::model_file(
                        &text.path,
                        format!("no GGUF name is known for checkpoint tensor {name}"),
                    )
                })?;
                let file = match part {
                    GgufPart::Text => text,
                    GgufPart::Mmproj => mmproj,
                };
                Ok(Stored::Quant(file.read(&gname, &self.device)?))
            }
        }
    }

    /// llama.cpp splits the `(hidden, C, T, P, P)` Conv3d weight into T slices of
    /// `(hidden, C, P, P)`; stack them back along the temporal axis.
    fn gguf_patch_embed(&self, mmproj: &GgufFile) -> Result<Tensor> {
        let frames = (0..self.config.vision.temporal_patch_size)
            .map(|t| {
                let name = if t == 0 {
                    "v.patch_embd.weight".to_string()
                } else {
                    format!("v.patch_embd.weight.{t}")
                };
                let q = mmproj.read(&name, &self.device)?;
                q.dequantize(&self.device)
                    .map_err(|e| Error::model_file(&mmproj.path, format!("tensor {name}: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Tensor::stack(&frames, 2)?)
    }

    fn check_shape(&self, name: &str, found: &[usize], expected: &[usize]) -> Result<()> {
        if found != expected {
            return Err(Error::Tensor {
                name: name.to_string(),
                reason: format!(
                    "expected shape {expected:?}, found {found:?} in {}",
                    self.path_for(name).display()
                ),
            });
        }
        Ok(())
    }

    /// A float tensor (norm weight, bias, position table) of `shape`, in the activation
    /// dtype. Quantized storage is dequantized.
    pub fn float(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let t = match self.load_stored(name)? {
            Stored::Float(t) => t,
            Stored::Quant(q) => q.dequantize(&self.device).map_err(|e| {
                Error::model_file(self.path_for(name), format!("tensor {name}: {e}"))
            })?,
        };
        self.check_shape(name, t.dims(), shape)?;
        Ok(t.to_dtype(self.dtype)?.to_device(&self.device)?)
    }

    /// A matrix of `shape = (rows, cols)` as a [`QMatMul`]: quantized storage stays
    /// quantized, float storage is quantized when [`LoadOptions::quantize`] asks and
    /// `cols` is a multiple of the block size, and otherwise kept in the activation dtype.
    pub fn matrix(&self, name: &str, shape: (usize, usize)) -> Result<QMatMul> {
        let expected = [shape.0, shape.1];
        if let Some((file, gname)) = self.q6k_to_requantize(name) {
            self.check_shape(name, file.shape(&gname).unwrap_or_default(), &expected)?;
            let q = file.read_q6k_as_q8_0(&gname, shape.0, shape.1)?;
            return Ok(QMatMul::QTensor(Arc::new(q)));
        }
        match self.load_stored(name)? {
            Stored::Float(t) => {
                self.check_shape(name, t.dims(), &expected)?;
                self.matrix_from_float(name, t)
            }
            Stored::Quant(q) => {
                self.check_shape(name, q.shape().dims(), &expected)?;
                match q.dtype() {
                    GgmlDType::F32 => self.matrix_from_float(name, q.dequantize(&self.device)?),
                    // Exact: every f16 and bf16 value is an f32.
                    GgmlDType::F16 => self
                        .matrix_from_float(name, q.dequantize(&self.device)?.to_dtype(DType::F16)?),
                    GgmlDType::BF16 => self.matrix_from_float(
                        name,
                        q.dequantize(&self.device)?.to_dtype(DType::BF16)?,
                    ),
                    _ => Ok(QMatMul::QTensor(Arc::new(q))),
                }
            }
        }
    }

    /// The GGUF file and name of `name` when it is a Q6_K matrix this source requantizes.
    fn q6k_to_requantize(&self, name: &str) -> Option<(&GgufFile, String)> {
        let Backend::Gguf { text, mmproj } = &self.backend else {
            return None;
        };
        if !self.q6k_as_q8_0 {
            return None;
        }
        let (part, gname) = gguf_name(name, &self.config)?;
        let file = match part {
            GgufPart::Text => text,
            GgufPart::Mmproj => mmproj,
        };
        (file.dtype(&gname) == Some(GgmlDType::Q6K)).then_some((file, gname))
    }

    fn matrix_from_float(&self, name: &str, t: Tensor) -> Result<QMatMul> {
        if let Some(q) = self.quantize {
            let cols = t.dim(1)?;
            if cols.is_multiple_of(q.block_size()) {
                let f32 = t.to_device(&Device::Cpu)?.to_dtype(DType::F32)?;
                let qt =
                    QTensor::quantize_onto(&f32, q, &self.device).map_err(|e| Error::Tensor {
                        name: name.to_string(),
                        reason: format!("quantizing to {q:?}: {e}"),
                    })?;
                return Ok(QMatMul::QTensor(Arc::new(qt)));
            }
        }
        // On the CPU, half-precision matrices stay half (widened per matmul by
        // `Linear::forward`): half the memory, the same numbers. Elsewhere the kernels
        // want the activation dtype.
        let keep = match t.dtype() {
            DType::F16 | DType::BF16 if self.device.is_cpu() => t.dtype(),
            _ => self.dtype,
        };
        Ok(QMatMul::Tensor(t.to_dtype(keep)?.to_device(&self.device)?))
    }

    /// A linear layer `name.weight` of `(out_dim, in_dim)`, with `name.bias` when `bias`.
    pub fn linear(&self, name: &str, out_dim: usize, in_dim: usize, bias: bool) -> Result<Linear> {
        let weight = self.matrix(&format!("{name}.weight"), (out_dim, in_dim))?;
        let bias = if bias {
            Some(self.float(&format!("{name}.bias"), &[out_dim])?)
        } else {
            None
        };
        Ok(Linear {
            weight,
            bias,
            dtype: self.dtype,
        })
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

/// A linear layer through [`QMatMul`]: `xs @ weightᵀ + bias`.
#[derive(Debug, Clone)]
pub struct Linear {
    weight: QMatMul,
    bias: Option<Tensor>,
    dtype: DType,
}

impl Linear {
    /// Wrap an already loaded matrix.
    pub fn new(weight: QMatMul, bias: Option<Tensor>, dtype: DType) -> Self {
        Linear {
            weight,
            bias,
            dtype,
        }
    }

    /// The matrix.
    pub fn weight(&self) -> &QMatMul {
        &self.weight
    }

    /// Apply to `xs` of shape `(.., in_dim)`; the result is in the activation dtype.
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let ys = match &self.weight {
            // The quantized kernels take f32 input and need it contiguous.
            QMatMul::QTensor(_) => {
                let xs = xs.to_dtype(DType::F32)?.contiguous()?;
                self.weight.forward(&xs)?.to_dtype(self.dtype)?
            }
            // Half-precision weights kept as stored on the CPU: widened for this call.
            QMatMul::Tensor(w) if w.dtype() != xs.dtype() => {
                QMatMul::Tensor(w.to_dtype(xs.dtype())?).forward(xs)?
            }
            _ => self.weight.forward(xs)?,
        };
        match &self.bias {
            Some(b) => Ok(ys.broadcast_add(b)?),
            None => Ok(ys),
        }
    }

    /// Apply several layers to the same `xs`. For one row and quantized weights this is
    /// candle's fused gemv (one quantization of `xs`, one parallel region: the decode
    /// step's q/k/v and gate/up projections); otherwise each layer runs on its own.
    pub fn forward_shared(layers: &[&Linear], xs: &Tensor) -> Result<Vec<Tensor>> {
        let rows = xs.dims().iter().rev().skip(1).product::<usize>();
        let qtensors: Option<Vec<&QTensor>> = layers
            .iter()
            .map(|l| match &l.weight {
                QMatMul::QTensor(q) => Some(q.as_ref()),
                _ => None,
            })
            .collect();
        if let (1, Some(qs)) = (rows, qtensors) {
            let lhs = xs.to_dtype(DType::F32)?.contiguous()?;
            if let Some(outs) = QTensor::gemv_fused_shared_lhs(&qs, &lhs)? {
                return layers
                    .iter()
                    .zip(outs)
                    .map(|(l, y)| {
                        let y = y.to_device(lhs.device())?.to_dtype(l.dtype)?;
                        Ok(match &l.bias {
                            Some(b) => y.broadcast_add(b)?,
                            None => y,
                        })
                    })
                    .collect();
            }
        }
        layers.iter().map(|l| l.forward(xs)).collect()
    }

    /// Rows `ids` of the matrix, dequantized, `(ids.len(), in_dim)` in `dtype`.
    pub fn rows(&self, ids: &Tensor, dtype: DType) -> Result<Tensor> {
        Ok(self.weight.embedding(ids)?.to_dtype(dtype)?)
    }
}

/// Other names a checkpoint tensor may carry: exports made before transformers moved
/// the decoder under `model.language_model` and the tower under `model.visual` (as
/// Qwen2-VL-era fine-tuning scripts still write them).
fn legacy_names(name: &str) -> Vec<String> {
    if let Some(rest) = name.strip_prefix("model.language_model.") {
        vec![
            format!("model.{rest}"),
            format!("language_model.model.{rest}"),
        ]
    } else if let Some(rest) = name.strip_prefix("model.visual.") {
        vec![format!("visual.{rest}")]
    } else if name == "lm_head.weight" {
        vec!["language_model.lm_head.weight".to_string()]
    } else {
        Vec::new()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GgufPart {
    Text,
    Mmproj,
}

/// The GGUF name of a checkpoint tensor, after llama.cpp's converter
/// (`gguf-py/gguf/constants.py` TENSOR_NAMES and `conversion/qwen3vl.py`).
fn gguf_name(name: &str, cfg: &Qwen3VlConfig) -> Option<(GgufPart, String)> {
    if let Some(rest) = name.strip_prefix("model.language_model.") {
        if rest == "embed_tokens.weight" {
            return Some((GgufPart::Text, "token_embd.weight".into()));
        }
        if let Some(suffix) = rest.strip_prefix("norm.") {
            return Some((GgufPart::Text, format!("output_norm.{suffix}")));
        }
        let rest = rest.strip_prefix("layers.")?;
        let (layer, tail) = rest.split_once('.')?;
        let layer: usize = layer.parse().ok()?;
        let (module, suffix) = tail.rsplit_once('.')?;
        let g = match module {
            "input_layernorm" => "attn_norm",
            "post_attention_layernorm" => "ffn_norm",
            "self_attn.q_proj" => "attn_q",
            "self_attn.k_proj" => "attn_k",
            "self_attn.v_proj" => "attn_v",
            "self_attn.o_proj" => "attn_output",
            "self_attn.q_norm" => "attn_q_norm",
            "self_attn.k_norm" => "attn_k_norm",
            "mlp.gate_proj" => "ffn_gate",
            "mlp.up_proj" => "ffn_up",
            "mlp.down_proj" => "ffn_down",
            _ => return None,
        };
        return Some((GgufPart::Text, format!("blk.{layer}.{g}.{suffix}")));
    }
    if name == "lm_head.weight" {
        return Some((GgufPart::Text, "output.weight".into()));
    }
    let rest = name.strip_prefix("model.visual.")?;
    let (module, suffix) = rest.rsplit_once('.')?;
    let g = match module {
        "pos_embed" => "v.position_embd".to_string(),
        "patch_embed.proj" => "v.patch_embd".to_string(),
        "merger.norm" => "v.post_ln".to_string(),
        "merger.linear_fc1" => "mm.0".to_string(),
        "merger.linear_fc2" => "mm.2".to_string(),
        _ => {
            if let Some(b) = module.strip_prefix("blocks.") {
                let (layer, tail) = b.split_once('.')?;
                let layer: usize = layer.parse().ok()?;
                let g = match tail {
                    "norm1" => "ln1",
                    "norm2" => "ln2",
                    "attn.qkv" => "attn_qkv",
                    "attn.proj" => "attn_out",
                    "mlp.linear_fc1" => "ffn_up",
                    "mlp.linear_fc2" => "ffn_down",
                    _ => return None,
                };
                format!("v.blk.{layer}.{g}")
            } else if let Some(d) = module.strip_prefix("deepstack_merger_list.") {
                let (i, tail) = d.split_once('.')?;
                let i: usize = i.parse().ok()?;
                // llama.cpp numbers DeepStack mergers by the vision layer they tap.
                let layer = *cfg.vision.deepstack_visual_indexes.get(i)?;
                let g = match tail {
                    "norm" => "norm",
                    "linear_fc1" => "fc1",
                    "linear_fc2" => "fc2",
                    _ => return None,
                };
                format!("v.deepstack.{layer}.{g}")
            } else {
                return None;
            }
        }
    };
    Some((GgufPart::Mmproj, format!("{g}.{suffix}")))
}

fn open_safetensors(dir: &Path) -> Result<(Backend, Qwen3VlConfig)> {
    let config = Qwen3VlConfig::from_config_json(&dir.join("config.json"))?;
    let index_path = dir.join("model.safetensors.index.json");
    let shard_names: Vec<PathBuf> = if index_path.exists() {
        let text = std::fs::read_to_string(&index_path).map_err(|e| Error::io(&index_path, e))?;
        let index: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::model_file(&index_path, format!("not valid JSON: {e}")))?;
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
        let st = unsafe { MmapedSafetensors::new(path) }.map_err(|e| {
            Error::model_file(path, format!("not a readable safetensors file: {e}"))
        })?;
        for (name, _) in st.tensors() {
            files.insert(name, path.clone());
        }
    }
    // SAFETY: as above.
    let st = unsafe { MmapedSafetensors::multi(&shard_names) }
        .map_err(|e| Error::model_file(dir, format!("safetensors: {e}")))?;
    Ok((
        Backend::Safetensors {
            dir: dir.to_path_buf(),
            st,
            files,
        },
        config,
    ))
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

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::{ensure, Context};

    /// A GGUF file holding one random Q6_K matrix, and that matrix.
    fn q6k_file(dir: &Path, rows: usize, cols: usize) -> anyhow::Result<(PathBuf, QTensor)> {
        let w = Tensor::randn(0f32, 0.02, (rows, cols), &Device::Cpu)?;
        let q = QTensor::quantize(&w, GgmlDType::Q6K)?;
        let path = dir.join("q6k.gguf");
        let mut f = std::fs::File::create(&path)?;
        gguf_file::write(&mut f, &[], &[("m", &q)])?;
        Ok((path, q))
    }

    fn values(q: &QTensor) -> anyhow::Result<Vec<f32>> {
        Ok(q.dequantize(&Device::Cpu)?
            .flatten_all()?
            .to_vec1::<f32>()?)
    }

    #[test]
    fn q6k_is_requantized_to_the_q8_0_of_its_values() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        // 10,050 rows of 420 bytes: two 4 MiB reads (9,984 rows, then 66), each ending
        // in a partial 64-row task.
        let (rows, cols) = (10_050, 512);
        let (path, q6k) = q6k_file(dir.path(), rows, cols)?;
        let q8 = GgufFile::open(&path)?.read_q6k_as_q8_0("m", rows, cols)?;
        ensure!(q8.dtype() == GgmlDType::Q8_0);
        ensure!(q8.shape().dims() == [rows, cols]);

        // Bit for bit what quantizing the whole dequantized matrix at once gives.
        let whole = QTensor::quantize(&q6k.dequantize(&Device::Cpu)?, GgmlDType::Q8_0)?;
        ensure!(q8.data()? == whole.data()?);

        // Within Q8_0's rounding of each 32-value block: half a step of max|x| / 127,
        // plus up to 127 times the f16 rounding (2^-11 relative) of the step itself.
        let bound = 0.5 + 127.0 / 2048.0;
        let (v, r) = (values(&q6k)?, values(&q8)?);
        for (vb, rb) in v.chunks(32).zip(r.chunks(32)) {
            let step = vb.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0;
            for (a, b) in vb.iter().zip(rb) {
                ensure!((a - b).abs() <= bound * step, "{a} vs {b}, step {step}");
            }
        }

        // And a matrix-vector product through each agrees to cosine 0.9999.
        let x = Tensor::randn(0f32, 1.0, (1, cols), &Device::Cpu)?;
        let y6 = QMatMul::from_qtensor(q6k)?.forward(&x)?;
        let y8 = QMatMul::from_qtensor(q8)?.forward(&x)?;
        let sum = |t: Tensor| -> anyhow::Result<f32> { Ok(t.sum_all()?.to_scalar::<f32>()?) };
        let cosine = sum((&y6 * &y8)?)? / (sum(y6.sqr()?)?.sqrt() * sum(y8.sqr()?)?.sqrt());
        ensure!(cosine >= 0.9999, "cosine {cosine}");
        Ok(())
    }

    #[test]
    fn a_truncated_q6k_matrix_is_an_error_naming_it() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (rows, cols) = (64, 256);
        let (path, _) = q6k_file(dir.path(), rows, cols)?;
        let len = std::fs::metadata(&path)?.len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)?
            .set_len(len - 100)?;
        // The header check at open already sees the tensor run past the end of the file.
        let result = GgufFile::open(&path).and_then(|f| f.read_q6k_as_q8_0("m", rows, cols));
        let err = result
            .err()
            .context("a truncated tensor was read")?
            .to_string();
        ensure!(
            err.contains("tensor m") && err.contains("q6k.gguf"),
            "{err}"
        );
        Ok(())
    }
}
