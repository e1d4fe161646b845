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

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;

use crate::bench::shape::ModelShape;
use crate::error::{Error, Result};
use crate::model::qwen3_vl::names::{
    deepstack_gguf, patch_embed_slice, text_layer_gguf, vision_block_gguf, TEXT_GLOBAL_NAMES,
    VISION_GLOBAL_NAMES,
};
use crate::model::qwen3_vl::Qwen3VlConfig;

use crate::bench::planned::tensor;
pub use crate::bench::planned::{FileKind, Init, PlannedFile, PlannedTensor, WEIGHT_STD};
pub use crate::bench::safetensors_plan::config_json;
use crate::bench::safetensors_plan::safetensors_files;
pub use crate::bench::vocab::{gguf_vocab, GgufVocab, TOKENIZER_JSON_GZ};

/// llama.cpp's `general.file_type` values (`llama_ftype`).
const FTYPE_F16: u32 = 1;
const FTYPE_Q8_0: u32 = 7;
const FTYPE_Q4_K_M: u32 = 15;

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
            .ok_or_else(|| {
                Error::invalid_input(format!("unknown format {s:?} (q4_k_m, q8_0, f16)"))
            })
    }
}

impl std::fmt::Display for BenchFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
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
                    tensors: text_tensors(&config, format)?,
                    raw: Vec::new(),
                },
                PlannedFile {
                    name: format!("mmproj-{base}-Q8_0.gguf"),
                    kind: FileKind::Gguf,
                    metadata: mmproj_metadata(shape, &config)?,
                    tensors: mmproj_tensors(&config)?,
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

/// The GGUF name of a checkpoint name from the shared table, or an error naming it (a
/// name missing from the table is a bug here, not bad input).
fn named(gguf: Option<String>, what: &str) -> Result<String> {
    gguf.ok_or_else(|| Error::internal(format!("no GGUF name is known for {what}")))
}

/// The GGUF name of a tensor outside the blocks, from the shared table.
fn global(table: &[(&str, &str)], hf: &str) -> Result<String> {
    named(
        table
            .iter()
            .find(|(h, _)| *h == hf)
            .map(|(_, g)| g.to_string()),
        hf,
    )
}

/// A norm's scale: `len` f32 ones.
fn norm_scale(name: String, len: usize) -> PlannedTensor {
    tensor(name, vec![len], GgmlDType::F32, Init::Ones)
}

fn text_tensors(cfg: &Qwen3VlConfig, format: BenchFormat) -> Result<Vec<PlannedTensor>> {
    let t = &cfg.text;
    let (h, hd, ff) = (t.hidden_size, t.head_dim, t.intermediate_size);
    let q = t.num_attention_heads * hd;
    let kv = t.num_key_value_heads * hd;
    let mat = |name: String, rows: usize, cols: usize, role: TextRole| {
        tensor(
            name,
            vec![rows, cols],
            text_type(format, role, cfg, cols),
            Init::Normal,
        )
    };
    let mut out = vec![mat(
        global(
            TEXT_GLOBAL_NAMES,
            "model.language_model.embed_tokens.weight",
        )?,
        t.vocab_size,
        h,
        TextRole::TokenEmbd,
    )];
    // Per block in the converter's order (tiny-a-f16.gguf), named by checkpoint module.
    for i in 0..t.num_hidden_layers {
        let b = |hf: &str| named(text_layer_gguf(i, hf), hf);
        out.push(norm_scale(b("input_layernorm.weight")?, h));
        out.push(mat(b("mlp.down_proj.weight")?, h, ff, TextRole::FfnDown(i)));
        out.push(mat(b("mlp.gate_proj.weight")?, ff, h, TextRole::Other));
        out.push(mat(b("mlp.up_proj.weight")?, ff, h, TextRole::Other));
        out.push(norm_scale(b("post_attention_layernorm.weight")?, h));
        out.push(norm_scale(b("self_attn.k_norm.weight")?, hd));
        out.push(mat(b("self_attn.k_proj.weight")?, kv, h, TextRole::Other));
        out.push(mat(b("self_attn.o_proj.weight")?, h, q, TextRole::Other));
        out.push(norm_scale(b("self_attn.q_norm.weight")?, hd));
        out.push(mat(b("self_attn.q_proj.weight")?, q, h, TextRole::Other));
        out.push(mat(
            b("self_attn.v_proj.weight")?,
            kv,
            h,
            TextRole::AttnV(i),
        ));
    }
    out.push(norm_scale(
        global(TEXT_GLOBAL_NAMES, "model.language_model.norm.weight")?,
        h,
    ));
    if !t.tie_word_embeddings {
        out.push(mat(
            global(TEXT_GLOBAL_NAMES, "lm_head.weight")?,
            t.vocab_size,
            h,
            TextRole::Output,
        ));
    }
    Ok(out)
}

fn mmproj_tensors(cfg: &Qwen3VlConfig) -> Result<Vec<PlannedTensor>> {
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
    // GGUF module names of the tensors outside the blocks.
    let top = |hf: &str, suffix: &str| -> Result<String> {
        Ok(format!("{}.{suffix}", global(VISION_GLOBAL_NAMES, hf)?))
    };
    // A patch merger (the main one or a DeepStack one) in the converter's order: its two
    // linear layers and its norm of `norm_len`; `name(module, param)` is the GGUF name of
    // the checkpoint's `module.param` (`linear_fc1.weight`, ...).
    let merger = |name: &dyn Fn(&str, &str) -> Result<String>,
                  norm_len: usize|
     -> Result<Vec<PlannedTensor>> {
        Ok(vec![
            bias(name("linear_fc1", "bias")?, merged),
            mat(name("linear_fc1", "weight")?, merged, merged),
            bias(name("linear_fc2", "bias")?, out_h),
            mat(name("linear_fc2", "weight")?, out_h, merged),
            bias(name("norm", "bias")?, norm_len),
            norm_scale(name("norm", "weight")?, norm_len),
        ])
    };
    let mut out = Vec::new();
    for i in 0..v.depth {
        let b = |hf: &str| named(vision_block_gguf(i, hf), hf);
        out.push(bias(b("attn.proj.bias")?, d));
        out.push(mat(b("attn.proj.weight")?, d, d));
        out.push(bias(b("attn.qkv.bias")?, 3 * d));
        out.push(mat(b("attn.qkv.weight")?, 3 * d, d));
        out.push(bias(b("mlp.linear_fc1.bias")?, ff));
        out.push(mat(b("mlp.linear_fc1.weight")?, ff, d));
        out.push(bias(b("mlp.linear_fc2.bias")?, d));
        out.push(mat(b("mlp.linear_fc2.weight")?, d, ff));
        out.push(bias(b("norm1.bias")?, d));
        out.push(norm_scale(b("norm1.weight")?, d));
        out.push(bias(b("norm2.bias")?, d));
        out.push(norm_scale(b("norm2.weight")?, d));
    }
    for &layer in &v.deepstack_visual_indexes {
        let name = |module: &str, param: &str| {
            let hf = format!("{module}.{param}");
            named(deepstack_gguf(layer, &hf), &hf)
        };
        out.extend(merger(&name, merged)?);
    }
    out.extend(merger(
        &|module, param| top(&format!("merger.{module}"), param),
        d,
    )?);
    out.push(bias(top("patch_embed.proj", "bias")?, d));
    let patch = vec![d, v.in_channels, v.patch_size, v.patch_size];
    // The Conv3d kernel, one slice per frame; the converter keeps it F32 unless --outtype f16.
    for t in 0..v.temporal_patch_size {
        out.push(tensor(
            patch_embed_slice(t),
            patch.clone(),
            f32,
            Init::Normal,
        ));
    }
    out.push(tensor(
        top("pos_embed", "weight")?,
        vec![v.num_position_embeddings, d],
        f32,
        Init::Normal,
    ));
    Ok(out)
}

fn u32v(x: usize) -> Result<Value> {
    u32::try_from(x)
        .map(Value::U32)
        .map_err(|_| Error::internal(format!("{x} does not fit a GGUF u32")))
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

fn string_value(x: &str) -> Value {
    Value::String(x.to_string())
}

/// The `general.*` keys the converter writes first in both files: architecture, file kind,
/// name and size label (of `params` parameters).
fn general_metadata(
    architecture: &str,
    kind: &str,
    shape: ModelShape,
    params: usize,
) -> Vec<(String, Value)> {
    vec![
        ("general.architecture".into(), string_value(architecture)),
        ("general.type".into(), string_value(kind)),
        (
            "general.name".into(),
            string_value(&format!("sightline-bench-{}", shape.name())),
        ),
        (
            "general.size_label".into(),
            string_value(&params_label(params)),
        ),
    ]
}

fn text_metadata(
    shape: ModelShape,
    cfg: &Qwen3VlConfig,
    format: BenchFormat,
) -> Result<Vec<(String, Value)>> {
    let t = &cfg.text;
    let params: usize = text_tensors(cfg, format)?
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
    let s = string_value;
    // Keys and order of the converter (tiny-a-f16.gguf), dimensions scaled.
    let mut metadata = general_metadata("qwen3vl", "model", shape, params);
    metadata.extend([
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
    ]);
    Ok(metadata)
}

fn mmproj_metadata(shape: ModelShape, cfg: &Qwen3VlConfig) -> Result<Vec<(String, Value)>> {
    let v = &cfg.vision;
    let params: usize = mmproj_tensors(cfg)?.iter().map(|p| p.info.elements()).sum();
    let side = v.num_grid_per_side();
    let s = string_value;
    let u = |x: usize| Value::U32(x as u32);
    let half = || Value::Array(vec![Value::F32(0.5); 3]);
    let flags = (0..v.depth)
        .map(|i| Value::Bool(v.deepstack_visual_indexes.contains(&i)))
        .collect();
    // Keys and order of the converter (mmproj-tiny-a-f16.gguf), dimensions scaled.
    let mut metadata = general_metadata("clip", "mmproj", shape, params);
    metadata.extend([
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
    ]);
    Ok(metadata)
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
        let tensors = text_tensors(&cfg, BenchFormat::Q4KM)?;
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
        let b8 = text_tensors(&ModelShape::B8.config(), BenchFormat::Q4KM)?;
        let ty8 = |name: &str| {
            b8.iter()
                .find(|t| t.info.name == name)
                .map(|t| t.info.dtype)
        };
        assert_eq!(ty8("token_embd.weight"), Some(GgmlDType::Q4K), "untied");
        assert_eq!(ty8("output.weight"), Some(GgmlDType::Q6K));
        // Tiny rows (32 wide) are not whole K-blocks: llama-quantize's fallbacks.
        let tiny = text_tensors(&ModelShape::Tiny.config(), BenchFormat::Q4KM)?;
        assert_eq!(tiny[0].info.dtype, GgmlDType::Q8_0);
        assert!(tiny.iter().any(|t| t.info.dtype == GgmlDType::Q5_0));
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
