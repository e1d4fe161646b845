//! What a generated bench model consists of: every file, its metadata and every
//! tensor's name, shape, storage type and initial values, computed before any byte is
//! written (so a test can check a 2B model's header without writing gigabytes).
//!
//! GGUF files are laid out as llama.cpp writes them (the tensor names, metadata keys and
//! order of `convert_hf_to_gguf.py` for Qwen3-VL, as found in the converter-made fixtures
//! `models/fixtures/tiny-a/*.gguf`), with the dimension keys scaled to the shape:
//!
//! - `q8_0`: the converter's `--outtype q8_0`: 2-D weights Q8_0, norms and other 1-D
//!   tensors F32, `v.position_embd` and `v.patch_embd` F32; a matrix whose rows are not
//!   whole Q8_0 blocks falls back to F16 (the 8B tower's 4,304-wide MLP), as the
//!   converter does.
//! - `q4_k_m`: `llama-quantize … Q4_K_M` applied to the converter's F16 output, after
//!   `llama_tensor_get_type_impl` in `src/llama-quant.cpp`: Q4_K by default; `attn_v` and
//!   `ffn_down` Q6_K on the "use more bits" layers (the first and last eighth and every
//!   third in between); `output.weight`, or `token_embd.weight` when the head is tied,
//!   Q6_K; a row width that is not whole K-blocks falls back to Q5_0 (for Q4_K) or Q8_0
//!   (for Q6_K), and to F16 past that (Q8_0 where candle's Q5_0 kernel cannot take the
//!   row: an odd number of 32-value blocks, only in the tiny test shape). Differences: no importance matrix (llama-quantize
//!   uses none by default either), and the tensors are quantized by candle's
//!   `QTensor::quantize`, whose K-quant search is a port of ggml's reference quantizer,
//!   not the SIMD one, so individual bytes may differ from llama-quantize's output.
//! - the `mmproj` of both GGUF formats is the converter's Q8_0 projector (the official
//!   repos ship `mmproj-…-Q8_0.gguf` and `-F16.gguf`; llama-quantize does not touch it).
//! - `f16`: a Hugging Face directory (`config.json`, `model.safetensors` with every tensor
//!   F16, `tokenizer.json.gz`) for quantize-at-load.

use std::io::Read;

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;

use crate::bench::gguf_writer::GgufTensorInfo;
use crate::bench::shape::ModelShape;
use crate::error::{Error, Result};
use crate::model::qwen3_vl::Qwen3VlConfig;

/// The Qwen tokenizer (real vocabulary, 151,669 tokens) every generated model carries:
/// the committed fixture, gzip-compressed.
pub const TOKENIZER_JSON_GZ: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/models/fixtures/tokenizer.json.gz"
));

/// Standard deviation of the random weights: small enough that activations stay finite
/// through every layer of the largest shape (norm weights are 1).
pub const WEIGHT_STD: f32 = 0.02;

/// llama.cpp's `general.file_type` values (`llama_ftype`).
const FTYPE_F16: u32 = 1;
const FTYPE_Q8_0: u32 = 7;
const FTYPE_Q4_K_M: u32 = 15;

/// llama.cpp's token types (`llama_token_type`).
const TOKEN_NORMAL: i32 = 1;
const TOKEN_CONTROL: i32 = 3;
const TOKEN_USER_DEFINED: i32 = 4;
const TOKEN_UNUSED: i32 = 5;

/// The weight format of a generated model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BenchFormat {
    /// Text GGUF in llama.cpp's Q4_K_M mix, Q8_0 mmproj.
    Q4KM,
    /// Text GGUF Q8_0, Q8_0 mmproj.
    Q8_0,
    /// Safetensors directory, every tensor F16 (quantized at load, or not).
    F16,
}

impl BenchFormat {
    /// Every format.
    pub const ALL: [BenchFormat; 3] = [BenchFormat::Q4KM, BenchFormat::Q8_0, BenchFormat::F16];

    /// The name on the command line and in cache paths.
    pub fn name(self) -> &'static str {
        match self {
            BenchFormat::Q4KM => "q4_k_m",
            BenchFormat::Q8_0 => "q8_0",
            BenchFormat::F16 => "f16",
        }
    }

    /// Whether the model is a GGUF pair (which llama.cpp can load too).
    pub fn is_gguf(self) -> bool {
        !matches!(self, BenchFormat::F16)
    }

    /// The suffix llama.cpp's file names carry (`Q4_K_M`).
    fn file_suffix(self) -> &'static str {
        match self {
            BenchFormat::Q4KM => "Q4_K_M",
            BenchFormat::Q8_0 => "Q8_0",
            BenchFormat::F16 => "F16",
        }
    }
}

impl std::str::FromStr for BenchFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        BenchFormat::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| Error::InvalidInput(format!("unknown format {s:?} (q4_k_m, q8_0, f16)")))
    }
}

impl std::fmt::Display for BenchFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a tensor's values are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// Seeded normal values, mean 0, standard deviation [`WEIGHT_STD`].
    Normal,
    /// All ones (norm weights).
    Ones,
    /// All zeros (biases).
    Zeros,
}

/// One tensor to write.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTensor {
    /// Name, shape (row-major) and storage type.
    pub info: GgufTensorInfo,
    /// Its values.
    pub init: Init,
}

/// How a planned file is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A GGUF file.
    Gguf,
    /// A safetensors file.
    Safetensors,
    /// Bytes written as they are (config, tokenizer).
    Raw,
}

/// One file of a generated model.
#[derive(Debug, Clone)]
pub struct PlannedFile {
    /// File name inside the model directory.
    pub name: String,
    /// Its format.
    pub kind: FileKind,
    /// GGUF metadata, in file order (empty for other kinds).
    pub metadata: Vec<(String, Value)>,
    /// Its tensors, in file order.
    pub tensors: Vec<PlannedTensor>,
    /// The bytes of a [`FileKind::Raw`] file.
    pub raw: Vec<u8>,
}

/// Every file of a generated model.
#[derive(Debug, Clone)]
pub struct ModelPlan {
    /// The shape.
    pub shape: ModelShape,
    /// The format.
    pub format: BenchFormat,
    /// Its configuration.
    pub config: Qwen3VlConfig,
    /// The files, in writing order.
    pub files: Vec<PlannedFile>,
}

impl ModelPlan {
    /// Bytes of tensor data over all files (what the progress bar counts).
    pub fn tensor_bytes(&self) -> Result<u64> {
        let mut total = 0u64;
        for f in &self.files {
            for t in &f.tensors {
                total += t.info.bytes()? as u64;
            }
        }
        Ok(total)
    }

    /// The text GGUF and mmproj file names, for a GGUF format.
    pub fn gguf_names(&self) -> Option<(String, String)> {
        let gguf: Vec<&PlannedFile> = self
            .files
            .iter()
            .filter(|f| f.kind == FileKind::Gguf)
            .collect();
        match gguf.as_slice() {
            [text, mmproj] => Some((text.name.clone(), mmproj.name.clone())),
            _ => None,
        }
    }
}

/// Plan the files of a `shape` model in `format`.
pub fn plan_model(shape: ModelShape, format: BenchFormat) -> Result<ModelPlan> {
    let config = shape.config();
    let files = match format {
        BenchFormat::F16 => safetensors_files(shape, &config)?,
        BenchFormat::Q4KM | BenchFormat::Q8_0 => {
            let base = format!("Qwen3VL-{}-Bench", shape.name().to_uppercase());
            vec![
                PlannedFile {
                    name: format!("{base}-{}.gguf", format.file_suffix()),
                    kind: FileKind::Gguf,
                    metadata: text_metadata(shape, &config, format)?,
                    tensors: text_tensors(&config, format),
                    raw: Vec::new(),
                },
                PlannedFile {
                    name: format!("mmproj-{base}-Q8_0.gguf"),
                    kind: FileKind::Gguf,
                    metadata: mmproj_metadata(shape, &config),
                    tensors: mmproj_tensors(&config),
                    raw: Vec::new(),
                },
            ]
        }
    };
    Ok(ModelPlan {
        shape,
        format,
        config,
        files,
    })
}

/// llama.cpp's "use more bits" layers of the Q4_K_M mix.
pub fn use_more_bits(layer: usize, n_layers: usize) -> bool {
    layer < n_layers / 8
        || layer >= 7 * n_layers / 8
        || (layer as isize - (n_layers / 8) as isize).rem_euclid(3) == 2
}

/// llama-quantize's fallback for a row width that is not whole blocks of `dtype`.
fn fit_row(dtype: GgmlDType, cols: usize) -> GgmlDType {
    if cols.is_multiple_of(dtype.block_size()) {
        return dtype;
    }
    let fallback = match dtype {
        GgmlDType::Q4K => GgmlDType::Q5_0,
        GgmlDType::Q5K => GgmlDType::Q5_1,
        GgmlDType::Q6K => GgmlDType::Q8_0,
        other => other,
    };
    // candle's Q5_0/Q5_1 kernels take rows of an even number of 32-value blocks (they
    // assert it); llama.cpp has no such limit. Only rows of one odd block count hit this
    // (the tiny test shape's 32-wide rows, never a real shape): those get Q8_0 instead.
    let candle_ok = !matches!(fallback, GgmlDType::Q5_0 | GgmlDType::Q5_1)
        || (cols / fallback.block_size()).is_multiple_of(2);
    if cols.is_multiple_of(fallback.block_size()) && candle_ok {
        fallback
    } else if cols.is_multiple_of(GgmlDType::Q8_0.block_size()) {
        GgmlDType::Q8_0
    } else {
        GgmlDType::F16
    }
}

/// Role of a text tensor, for the Q4_K_M mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextRole {
    TokenEmbd,
    Output,
    AttnV(usize),
    FfnDown(usize),
    Other,
}

fn text_type(format: BenchFormat, role: TextRole, cfg: &Qwen3VlConfig, cols: usize) -> GgmlDType {
    let n = cfg.text.num_hidden_layers;
    match format {
        BenchFormat::Q8_0 => fit_row(GgmlDType::Q8_0, cols),
        BenchFormat::F16 => GgmlDType::F16,
        BenchFormat::Q4KM => {
            let tied = cfg.text.tie_word_embeddings;
            let wanted = match role {
                TextRole::Output => GgmlDType::Q6K,
                TextRole::TokenEmbd if tied => GgmlDType::Q6K,
                TextRole::AttnV(i) | TextRole::FfnDown(i) if use_more_bits(i, n) => GgmlDType::Q6K,
                _ => GgmlDType::Q4K,
            };
            // The output rule goes straight to Q8_0 when rows are not whole K-blocks.
            let output_rule =
                matches!(role, TextRole::Output) || (tied && matches!(role, TextRole::TokenEmbd));
            if output_rule && !cols.is_multiple_of(wanted.block_size()) {
                return fit_row(GgmlDType::Q8_0, cols);
            }
            fit_row(wanted, cols)
        }
    }
}

fn tensor(name: String, shape: Vec<usize>, dtype: GgmlDType, init: Init) -> PlannedTensor {
    PlannedTensor {
        info: GgufTensorInfo { name, shape, dtype },
        init,
    }
}

fn text_tensors(cfg: &Qwen3VlConfig, format: BenchFormat) -> Vec<PlannedTensor> {
    let t = &cfg.text;
    let (h, hd, ff) = (t.hidden_size, t.head_dim, t.intermediate_size);
    let q = t.num_attention_heads * hd;
    let kv = t.num_key_value_heads * hd;
    let f32 = GgmlDType::F32;
    let mat = |name: String, rows: usize, cols: usize, role: TextRole| {
        tensor(
            name,
            vec![rows, cols],
            text_type(format, role, cfg, cols),
            Init::Normal,
        )
    };
    let mut out = vec![mat(
        "token_embd.weight".into(),
        t.vocab_size,
        h,
        TextRole::TokenEmbd,
    )];
    // Per block in the converter's order (tiny-a-f16.gguf).
    for i in 0..t.num_hidden_layers {
        let b = |s: &str| format!("blk.{i}.{s}");
        out.push(tensor(b("attn_norm.weight"), vec![h], f32, Init::Ones));
        out.push(mat(b("ffn_down.weight"), h, ff, TextRole::FfnDown(i)));
        out.push(mat(b("ffn_gate.weight"), ff, h, TextRole::Other));
        out.push(mat(b("ffn_up.weight"), ff, h, TextRole::Other));
        out.push(tensor(b("ffn_norm.weight"), vec![h], f32, Init::Ones));
        out.push(tensor(b("attn_k_norm.weight"), vec![hd], f32, Init::Ones));
        out.push(mat(b("attn_k.weight"), kv, h, TextRole::Other));
        out.push(mat(b("attn_output.weight"), h, q, TextRole::Other));
        out.push(tensor(b("attn_q_norm.weight"), vec![hd], f32, Init::Ones));
        out.push(mat(b("attn_q.weight"), q, h, TextRole::Other));
        out.push(mat(b("attn_v.weight"), kv, h, TextRole::AttnV(i)));
    }
    out.push(tensor(
        "output_norm.weight".into(),
        vec![h],
        f32,
        Init::Ones,
    ));
    if !t.tie_word_embeddings {
        out.push(mat(
            "output.weight".into(),
            t.vocab_size,
            h,
            TextRole::Output,
        ));
    }
    out
}

fn mmproj_tensors(cfg: &Qwen3VlConfig) -> Vec<PlannedTensor> {
    let v = &cfg.vision;
    let (d, ff) = (v.hidden_size, v.intermediate_size);
    let merged = d * v.spatial_merge_size * v.spatial_merge_size;
    let out_h = v.out_hidden_size;
    let f32 = GgmlDType::F32;
    let mat = |name: String, rows: usize, cols: usize| {
        tensor(
            name,
            vec![rows, cols],
            fit_row(GgmlDType::Q8_0, cols),
            Init::Normal,
        )
    };
    let bias = |name: String, n: usize| tensor(name, vec![n], f32, Init::Zeros);
    let mut out = Vec::new();
    for i in 0..v.depth {
        let b = |s: &str| format!("v.blk.{i}.{s}");
        out.push(bias(b("attn_out.bias"), d));
        out.push(mat(b("attn_out.weight"), d, d));
        out.push(bias(b("attn_qkv.bias"), 3 * d));
        out.push(mat(b("attn_qkv.weight"), 3 * d, d));
        out.push(bias(b("ffn_up.bias"), ff));
        out.push(mat(b("ffn_up.weight"), ff, d));
        out.push(bias(b("ffn_down.bias"), d));
        out.push(mat(b("ffn_down.weight"), d, ff));
        out.push(bias(b("ln1.bias"), d));
        out.push(tensor(b("ln1.weight"), vec![d], f32, Init::Ones));
        out.push(bias(b("ln2.bias"), d));
        out.push(tensor(b("ln2.weight"), vec![d], f32, Init::Ones));
    }
    for &layer in &v.deepstack_visual_indexes {
        let b = |s: &str| format!("v.deepstack.{layer}.{s}");
        out.push(bias(b("fc1.bias"), merged));
        out.push(mat(b("fc1.weight"), merged, merged));
        out.push(bias(b("fc2.bias"), out_h));
        out.push(mat(b("fc2.weight"), out_h, merged));
        out.push(bias(b("norm.bias"), merged));
        out.push(tensor(b("norm.weight"), vec![merged], f32, Init::Ones));
    }
    out.push(bias("mm.0.bias".into(), merged));
    out.push(mat("mm.0.weight".into(), merged, merged));
    out.push(bias("mm.2.bias".into(), out_h));
    out.push(mat("mm.2.weight".into(), out_h, merged));
    out.push(bias("v.post_ln.bias".into(), d));
    out.push(tensor("v.post_ln.weight".into(), vec![d], f32, Init::Ones));
    out.push(bias("v.patch_embd.bias".into(), d));
    let patch = vec![d, v.in_channels, v.patch_size, v.patch_size];
    // The Conv3d kernel, one slice per frame; the converter keeps it F32 unless --outtype f16.
    for t in 0..v.temporal_patch_size {
        let name = if t == 0 {
            "v.patch_embd.weight".to_string()
        } else {
            format!("v.patch_embd.weight.{t}")
        };
        out.push(tensor(name, patch.clone(), f32, Init::Normal));
    }
    out.push(tensor(
        "v.position_embd.weight".into(),
        vec![v.num_position_embeddings, d],
        f32,
        Init::Normal,
    ));
    out
}

fn u32v(x: usize) -> Result<Value> {
    u32::try_from(x)
        .map(Value::U32)
        .map_err(|_| Error::InvalidInput(format!("{x} does not fit a GGUF u32")))
}

fn params_label(n: usize) -> String {
    if n >= 1_000_000_000 {
        format!("{:.1}B", n as f64 / 1e9)
    } else if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else {
        format!("{:.0}K", n as f64 / 1e3)
    }
}

fn text_metadata(
    shape: ModelShape,
    cfg: &Qwen3VlConfig,
    format: BenchFormat,
) -> Result<Vec<(String, Value)>> {
    let t = &cfg.text;
    let params: usize = text_tensors(cfg, format)
        .iter()
        .map(|p| p.info.elements())
        .sum();
    let file_type = match format {
        BenchFormat::Q4KM => FTYPE_Q4_K_M,
        BenchFormat::Q8_0 => FTYPE_Q8_0,
        BenchFormat::F16 => FTYPE_F16,
    };
    let vocab = gguf_vocab(t.vocab_size)?;
    let mut sections: Vec<Value> = t
        .mrope_section
        .iter()
        .map(|&s| Value::I32(s as i32))
        .collect();
    sections.push(Value::I32(0));
    let s = |x: &str| Value::String(x.to_string());
    // Keys and order of the converter (tiny-a-f16.gguf), dimensions scaled.
    Ok(vec![
        ("general.architecture".into(), s("qwen3vl")),
        ("general.type".into(), s("model")),
        (
            "general.name".into(),
            s(&format!("sightline-bench-{}", shape.name())),
        ),
        ("general.size_label".into(), s(&params_label(params))),
        ("qwen3vl.block_count".into(), u32v(t.num_hidden_layers)?),
        (
            "qwen3vl.context_length".into(),
            u32v(t.max_position_embeddings)?,
        ),
        ("qwen3vl.embedding_length".into(), u32v(t.hidden_size)?),
        (
            "qwen3vl.feed_forward_length".into(),
            u32v(t.intermediate_size)?,
        ),
        (
            "qwen3vl.attention.head_count".into(),
            u32v(t.num_attention_heads)?,
        ),
        (
            "qwen3vl.attention.head_count_kv".into(),
            u32v(t.num_key_value_heads)?,
        ),
        (
            "qwen3vl.rope.dimension_sections".into(),
            Value::Array(sections),
        ),
        (
            "qwen3vl.rope.freq_base".into(),
            Value::F32(t.rope_theta as f32),
        ),
        (
            "qwen3vl.attention.layer_norm_rms_epsilon".into(),
            Value::F32(t.rms_norm_eps as f32),
        ),
        ("qwen3vl.attention.key_length".into(), u32v(t.head_dim)?),
        ("qwen3vl.attention.value_length".into(), u32v(t.head_dim)?),
        ("general.file_type".into(), Value::U32(file_type)),
        (
            "qwen3vl.n_deepstack_layers".into(),
            u32v(cfg.vision.deepstack_visual_indexes.len())?,
        ),
        ("general.quantization_version".into(), Value::U32(2)),
        ("tokenizer.ggml.model".into(), s("gpt2")),
        ("tokenizer.ggml.pre".into(), s("qwen2")),
        ("tokenizer.ggml.tokens".into(), Value::Array(vocab.tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(vocab.token_types),
        ),
        ("tokenizer.ggml.merges".into(), Value::Array(vocab.merges)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(vocab.eos)),
        (
            "tokenizer.ggml.padding_token_id".into(),
            Value::U32(vocab.padding),
        ),
        ("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)),
        ("tokenizer.ggml.add_eos_token".into(), Value::Bool(false)),
    ])
}

fn mmproj_metadata(shape: ModelShape, cfg: &Qwen3VlConfig) -> Vec<(String, Value)> {
    let v = &cfg.vision;
    let params: usize = mmproj_tensors(cfg).iter().map(|p| p.info.elements()).sum();
    let side = v.num_grid_per_side();
    let s = |x: &str| Value::String(x.to_string());
    let u = |x: usize| Value::U32(x as u32);
    let half = || Value::Array(vec![Value::F32(0.5); 3]);
    let flags = (0..v.depth)
        .map(|i| Value::Bool(v.deepstack_visual_indexes.contains(&i)))
        .collect();
    // Keys and order of the converter (mmproj-tiny-a-f16.gguf), dimensions scaled.
    vec![
        ("general.architecture".into(), s("clip")),
        ("general.type".into(), s("mmproj")),
        (
            "general.name".into(),
            s(&format!("sightline-bench-{}", shape.name())),
        ),
        ("general.size_label".into(), s(&params_label(params))),
        ("general.file_type".into(), Value::U32(FTYPE_Q8_0)),
        ("clip.has_vision_encoder".into(), Value::Bool(true)),
        ("clip.vision.projection_dim".into(), u(v.out_hidden_size)),
        ("clip.vision.image_size".into(), u(side * v.patch_size)),
        ("clip.vision.patch_size".into(), u(v.patch_size)),
        ("clip.vision.embedding_length".into(), u(v.hidden_size)),
        (
            "clip.vision.feed_forward_length".into(),
            u(v.intermediate_size),
        ),
        ("clip.vision.block_count".into(), u(v.depth)),
        ("clip.vision.attention.head_count".into(), u(v.num_heads)),
        ("clip.vision.image_mean".into(), half()),
        ("clip.vision.image_std".into(), half()),
        ("clip.projector_type".into(), s("qwen3vl_merger")),
        ("clip.use_gelu".into(), Value::Bool(true)),
        (
            "clip.vision.spatial_merge_size".into(),
            u(v.spatial_merge_size),
        ),
        (
            "clip.vision.attention.layer_norm_epsilon".into(),
            Value::F32(1e-6),
        ),
        (
            "clip.vision.is_deepstack_layers".into(),
            Value::Array(flags),
        ),
        ("general.quantization_version".into(), Value::U32(2)),
    ]
}

/// The `tokenizer.ggml.*` arrays llama.cpp's converter writes for the Qwen tokenizer.
#[derive(Debug, Clone)]
pub struct GgufVocab {
    /// Token strings by id, padded to the logits width with `[PAD<id>]`.
    pub tokens: Vec<Value>,
    /// llama.cpp token types (normal, control, user-defined, unused for padding).
    pub token_types: Vec<Value>,
    /// Merges as `"left right"`.
    pub merges: Vec<Value>,
    /// `<|im_end|>`.
    pub eos: u32,
    /// `<|endoftext|>`.
    pub padding: u32,
}

/// Build the converter's vocabulary arrays from [`TOKENIZER_JSON_GZ`], padded to `width`.
pub fn gguf_vocab(width: usize) -> Result<GgufVocab> {
    let bad = |reason: String| Error::Tokenizer(format!("embedded tokenizer.json.gz: {reason}"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(TOKENIZER_JSON_GZ)
        .read_to_string(&mut text)
        .map_err(|e| bad(e.to_string()))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let model = &json["model"];
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| bad("no model.vocab".into()))?;
    let mut tokens: Vec<Option<(String, i32)>> = vec![None; width];
    let mut put = |id: u64, token: &str, kind: i32| -> Result<()> {
        let slot = tokens
            .get_mut(id as usize)
            .ok_or_else(|| bad(format!("token id {id} is past the logits width {width}")))?;
        *slot = Some((token.to_string(), kind));
        Ok(())
    };
    for (token, id) in vocab {
        let id = id.as_u64().ok_or_else(|| bad(format!("id of {token:?}")))?;
        put(id, token, TOKEN_NORMAL)?;
    }
    let (mut eos, mut padding) = (None, None);
    for added in json["added_tokens"].as_array().into_iter().flatten() {
        let (Some(id), Some(content)) = (added["id"].as_u64(), added["content"].as_str()) else {
            return Err(bad("an added token without id or content".into()));
        };
        let special = added["special"].as_bool().unwrap_or(false);
        put(
            id,
            content,
            if special {
                TOKEN_CONTROL
            } else {
                TOKEN_USER_DEFINED
            },
        )?;
        match content {
            "<|im_end|>" => eos = Some(id as u32),
            "<|endoftext|>" => padding = Some(id as u32),
            _ => {}
        }
    }
    let (tokens, token_types) = tokens
        .into_iter()
        .enumerate()
        .map(|(id, t)| {
            let (s, k) = t.unwrap_or_else(|| (format!("[PAD{id}]"), TOKEN_UNUSED));
            (Value::String(s), Value::I32(k))
        })
        .unzip();
    let merges = model["merges"]
        .as_array()
        .ok_or_else(|| bad("no model.merges".into()))?
        .iter()
        .map(|m| match m {
            serde_json::Value::String(s) => Ok(Value::String(s.clone())),
            serde_json::Value::Array(pair) => {
                let parts: Vec<&str> = pair.iter().filter_map(|p| p.as_str()).collect();
                Ok(Value::String(parts.join(" ")))
            }
            other => Err(bad(format!("merge {other}"))),
        })
        .collect::<Result<_>>()?;
    Ok(GgufVocab {
        tokens,
        token_types,
        merges,
        eos: eos.ok_or_else(|| bad("no <|im_end|>".into()))?,
        padding: padding.ok_or_else(|| bad("no <|endoftext|>".into()))?,
    })
}

/// The checkpoint tensors of the safetensors layout (transformers' names), all F16.
fn safetensors_tensors(cfg: &Qwen3VlConfig) -> Vec<PlannedTensor> {
    let t = &cfg.text;
    let v = &cfg.vision;
    let f16 = GgmlDType::F16;
    let w = |name: String, shape: Vec<usize>| tensor(name, shape, f16, Init::Normal);
    let ones = |name: String, n: usize| tensor(name, vec![n], f16, Init::Ones);
    let zeros = |name: String, n: usize| tensor(name, vec![n], f16, Init::Zeros);
    let (h, hd, ff) = (t.hidden_size, t.head_dim, t.intermediate_size);
    let (q, kv) = (t.num_attention_heads * hd, t.num_key_value_heads * hd);
    let lm = "model.language_model";
    let mut out = vec![w(
        format!("{lm}.embed_tokens.weight"),
        vec![t.vocab_size, h],
    )];
    for i in 0..t.num_hidden_layers {
        let p = format!("{lm}.layers.{i}");
        out.push(ones(format!("{p}.input_layernorm.weight"), h));
        out.push(ones(format!("{p}.post_attention_layernorm.weight"), h));
        out.push(w(format!("{p}.self_attn.q_proj.weight"), vec![q, h]));
        out.push(w(format!("{p}.self_attn.k_proj.weight"), vec![kv, h]));
        out.push(w(format!("{p}.self_attn.v_proj.weight"), vec![kv, h]));
        out.push(w(format!("{p}.self_attn.o_proj.weight"), vec![h, q]));
        out.push(ones(format!("{p}.self_attn.q_norm.weight"), hd));
        out.push(ones(format!("{p}.self_attn.k_norm.weight"), hd));
        out.push(w(format!("{p}.mlp.gate_proj.weight"), vec![ff, h]));
        out.push(w(format!("{p}.mlp.up_proj.weight"), vec![ff, h]));
        out.push(w(format!("{p}.mlp.down_proj.weight"), vec![h, ff]));
    }
    out.push(ones(format!("{lm}.norm.weight"), h));
    if !t.tie_word_embeddings {
        out.push(w("lm_head.weight".into(), vec![t.vocab_size, h]));
    }
    let vp = "model.visual";
    let (d, vff) = (v.hidden_size, v.intermediate_size);
    let merged = d * v.spatial_merge_size * v.spatial_merge_size;
    out.push(w(
        format!("{vp}.patch_embed.proj.weight"),
        vec![
            d,
            v.in_channels,
            v.temporal_patch_size,
            v.patch_size,
            v.patch_size,
        ],
    ));
    out.push(zeros(format!("{vp}.patch_embed.proj.bias"), d));
    out.push(w(
        format!("{vp}.pos_embed.weight"),
        vec![v.num_position_embeddings, d],
    ));
    let linear = |out: &mut Vec<PlannedTensor>, name: String, rows: usize, cols: usize| {
        out.push(w(format!("{name}.weight"), vec![rows, cols]));
        out.push(zeros(format!("{name}.bias"), rows));
    };
    let norm = |out: &mut Vec<PlannedTensor>, name: String, n: usize| {
        out.push(ones(format!("{name}.weight"), n));
        out.push(zeros(format!("{name}.bias"), n));
    };
    for i in 0..v.depth {
        let p = format!("{vp}.blocks.{i}");
        norm(&mut out, format!("{p}.norm1"), d);
        norm(&mut out, format!("{p}.norm2"), d);
        linear(&mut out, format!("{p}.attn.qkv"), 3 * d, d);
        linear(&mut out, format!("{p}.attn.proj"), d, d);
        linear(&mut out, format!("{p}.mlp.linear_fc1"), vff, d);
        linear(&mut out, format!("{p}.mlp.linear_fc2"), d, vff);
    }
    norm(&mut out, format!("{vp}.merger.norm"), d);
    linear(&mut out, format!("{vp}.merger.linear_fc1"), merged, merged);
    linear(
        &mut out,
        format!("{vp}.merger.linear_fc2"),
        v.out_hidden_size,
        merged,
    );
    for i in 0..v.deepstack_visual_indexes.len() {
        let p = format!("{vp}.deepstack_merger_list.{i}");
        norm(&mut out, format!("{p}.norm"), merged);
        linear(&mut out, format!("{p}.linear_fc1"), merged, merged);
        linear(
            &mut out,
            format!("{p}.linear_fc2"),
            v.out_hidden_size,
            merged,
        );
    }
    out
}

/// A transformers 5.x `config.json` for `cfg`.
pub fn config_json(cfg: &Qwen3VlConfig) -> serde_json::Value {
    let t = &cfg.text;
    let v = &cfg.vision;
    serde_json::json!({
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "model_type": "qwen3_vl",
        "image_token_id": cfg.image_token_id,
        "vision_start_token_id": cfg.vision_start_token_id,
        "vision_end_token_id": cfg.vision_end_token_id,
        "tie_word_embeddings": t.tie_word_embeddings,
        "text_config": {
            "model_type": "qwen3_vl_text",
            "vocab_size": t.vocab_size,
            "hidden_size": t.hidden_size,
            "intermediate_size": t.intermediate_size,
            "num_hidden_layers": t.num_hidden_layers,
            "num_attention_heads": t.num_attention_heads,
            "num_key_value_heads": t.num_key_value_heads,
            "head_dim": t.head_dim,
            "rms_norm_eps": t.rms_norm_eps,
            "hidden_act": "silu",
            "attention_bias": false,
            "max_position_embeddings": t.max_position_embeddings,
            "tie_word_embeddings": t.tie_word_embeddings,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": t.rope_theta,
                "mrope_section": t.mrope_section,
                "mrope_interleaved": t.mrope_interleaved,
            },
        },
        "vision_config": {
            "model_type": "qwen3_vl",
            "depth": v.depth,
            "hidden_size": v.hidden_size,
            "intermediate_size": v.intermediate_size,
            "num_heads": v.num_heads,
            "patch_size": v.patch_size,
            "temporal_patch_size": v.temporal_patch_size,
            "spatial_merge_size": v.spatial_merge_size,
            "out_hidden_size": v.out_hidden_size,
            "in_channels": v.in_channels,
            "num_position_embeddings": v.num_position_embeddings,
            "deepstack_visual_indexes": v.deepstack_visual_indexes,
            "hidden_act": "gelu_pytorch_tanh",
        },
    })
}

fn safetensors_files(shape: ModelShape, cfg: &Qwen3VlConfig) -> Result<Vec<PlannedFile>> {
    let raw = |name: &str, raw: Vec<u8>| PlannedFile {
        name: name.to_string(),
        kind: FileKind::Raw,
        metadata: Vec::new(),
        tensors: Vec::new(),
        raw,
    };
    let config = serde_json::to_vec_pretty(&config_json(cfg))
        .map_err(|e| Error::InvalidInput(format!("config.json for {shape}: {e}")))?;
    Ok(vec![
        raw("config.json", config),
        raw("tokenizer.json.gz", TOKENIZER_JSON_GZ.to_vec()),
        PlannedFile {
            name: "model.safetensors".into(),
            kind: FileKind::Safetensors,
            metadata: Vec::new(),
            tensors: safetensors_tensors(cfg),
            raw: Vec::new(),
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_more_bits_matches_llama_cpp_for_28_layers() {
        let layers: Vec<usize> = (0..28).filter(|&i| use_more_bits(i, 28)).collect();
        // n/8 = 3, 7n/8 = 24: layers 0-2, 24-27, and 3 + 3k + 2.
        assert_eq!(
            layers,
            vec![0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27]
        );
    }

    #[test]
    fn q4_k_m_mix_follows_llama_quantize() -> Result<()> {
        let cfg = ModelShape::B2.config();
        let tensors = text_tensors(&cfg, BenchFormat::Q4KM);
        let ty = |name: &str| {
            tensors
                .iter()
                .find(|t| t.info.name == name)
                .map(|t| t.info.dtype)
        };
        assert_eq!(ty("token_embd.weight"), Some(GgmlDType::Q6K), "tied head");
        assert_eq!(ty("blk.0.attn_v.weight"), Some(GgmlDType::Q6K));
        assert_eq!(ty("blk.3.attn_v.weight"), Some(GgmlDType::Q4K));
        assert_eq!(ty("blk.5.ffn_down.weight"), Some(GgmlDType::Q6K));
        assert_eq!(ty("blk.4.ffn_down.weight"), Some(GgmlDType::Q4K));
        assert_eq!(ty("blk.4.attn_q.weight"), Some(GgmlDType::Q4K));
        assert_eq!(ty("blk.4.attn_norm.weight"), Some(GgmlDType::F32));
        let b8 = text_tensors(&ModelShape::B8.config(), BenchFormat::Q4KM);
        let ty8 = |name: &str| {
            b8.iter()
                .find(|t| t.info.name == name)
                .map(|t| t.info.dtype)
        };
        assert_eq!(ty8("token_embd.weight"), Some(GgmlDType::Q4K), "untied");
        assert_eq!(ty8("output.weight"), Some(GgmlDType::Q6K));
        // Tiny rows (32 wide) are not whole K-blocks: llama-quantize's fallbacks.
        let tiny = text_tensors(&ModelShape::Tiny.config(), BenchFormat::Q4KM);
        assert_eq!(tiny[0].info.dtype, GgmlDType::Q8_0);
        assert!(tiny.iter().any(|t| t.info.dtype == GgmlDType::Q5_0));
        Ok(())
    }

    #[test]
    fn vocab_arrays_equal_the_converter_made_fixture() -> anyhow::Result<()> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/fixtures/tiny-a/tiny-a-f16.gguf"
        );
        let content =
            candle_core::quantized::gguf_file::Content::read(&mut std::fs::File::open(path)?)?;
        let ours = gguf_vocab(crate::bench::shape::QWEN3_VL_VOCAB)?;
        let strings = |v: &[Value]| -> Vec<String> {
            v.iter()
                .map(|x| x.to_string().cloned().unwrap_or_default())
                .collect()
        };
        let theirs = |k: &str| content.metadata[k].to_vec().cloned();
        assert_eq!(
            strings(&ours.tokens),
            strings(&theirs("tokenizer.ggml.tokens")?)
        );
        assert_eq!(
            strings(&ours.merges),
            strings(&theirs("tokenizer.ggml.merges")?)
        );
        let types =
            |v: &[Value]| -> Vec<i32> { v.iter().map(|x| x.to_i32().unwrap_or(-1)).collect() };
        assert_eq!(
            types(&ours.token_types),
            types(&theirs("tokenizer.ggml.token_type")?)
        );
        assert_eq!(
            Value::U32(ours.eos).to_u32()?,
            content.metadata["tokenizer.ggml.eos_token_id"].to_u32()?
        );
        Ok(())
    }

    #[test]
    fn metadata_keys_are_the_converters() -> anyhow::Result<()> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/models/fixtures/tiny-a");
        let plan = plan_model(ModelShape::Tiny, BenchFormat::Q8_0)?;
        for (file, fixture) in plan
            .files
            .iter()
            .zip(["tiny-a-f16.gguf", "mmproj-tiny-a-f16.gguf"])
        {
            let path = std::path::Path::new(dir).join(fixture);
            let content =
                candle_core::quantized::gguf_file::Content::read(&mut std::fs::File::open(path)?)?;
            let mut theirs: Vec<&String> = content.metadata.keys().collect();
            let mut ours: Vec<&String> = file.metadata.iter().map(|(k, _)| k).collect();
            theirs.sort();
            ours.sort();
            assert_eq!(ours, theirs, "{fixture}");
            let mut tn: Vec<&String> = content.tensor_infos.keys().collect();
            let mut on: Vec<&String> = file.tensors.iter().map(|t| &t.info.name).collect();
            tn.sort();
            on.sort();
            assert_eq!(on, tn, "{fixture}");
            for t in &file.tensors {
                assert_eq!(
                    t.info.shape,
                    content.tensor_infos[&t.info.name].shape.dims(),
                    "{}",
                    t.info.name
                );
            }
        }
        Ok(())
    }
}
