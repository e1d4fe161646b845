//! Qwen3-VL configuration in two steps: raw structs that mirror what a checkpoint stores
//! (`config.json` in the transformers 4.57 or 5.x layout, or GGUF metadata), and one
//! validated [`Qwen3VlConfig`] that the model code uses.

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
/// GGUF metadata access (it lives with the GGUF reader; re-exported for the config code).
pub use crate::model::weights::GgufMeta;

/// `<|image_pad|>` in every Qwen3-VL vocabulary; GGUF files do not store it.
pub const DEFAULT_IMAGE_TOKEN_ID: u32 = 151_655;
/// `<|vision_start|>` in every Qwen3-VL vocabulary.
pub const DEFAULT_VISION_START_TOKEN_ID: u32 = 151_652;
/// `<|vision_end|>` in every Qwen3-VL vocabulary.
pub const DEFAULT_VISION_END_TOKEN_ID: u32 = 151_653;
/// The vision tower's 2-D rotary base; transformers hard-codes it for Qwen3-VL and GGUF
/// does not store it.
pub const DEFAULT_VISION_ROPE_THETA: f64 = 10_000.0;
/// The vision tower's LayerNorm epsilon (hard-coded in the reference).
pub const VISION_LAYER_NORM_EPS: f64 = 1e-6;

/// The text decoder's resolved configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct TextConfig {
    /// Width of the embedding table and of a logits row.
    pub vocab_size: usize,
    /// Residual stream width.
    pub hidden_size: usize,
    /// SwiGLU inner width.
    pub intermediate_size: usize,
    /// Number of decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (GQA groups).
    pub num_key_value_heads: usize,
    /// Width of one attention head.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// RoPE base.
    pub rope_theta: f64,
    /// How many of the `head_dim / 2` rotary frequencies go to (t, h, w).
    pub mrope_section: [usize; 3],
    /// Interleaved (Qwen3-VL) or chunked (Qwen2-VL) M-RoPE layout.
    pub mrope_interleaved: bool,
    /// The LM head shares the embedding table.
    pub tie_word_embeddings: bool,
    /// Longest context the checkpoint was trained for (informational; nothing is
    /// preallocated from it).
    pub max_position_embeddings: usize,
}

/// The vision tower's resolved configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct VisionConfig {
    /// Number of transformer blocks.
    pub depth: usize,
    /// Width of the tower.
    pub hidden_size: usize,
    /// MLP inner width.
    pub intermediate_size: usize,
    /// Attention heads.
    pub num_heads: usize,
    /// Side of a square patch in pixels.
    pub patch_size: usize,
    /// Frames per patch (2: an image is its own second frame).
    pub temporal_patch_size: usize,
    /// Side of the square of patches merged into one language token.
    pub spatial_merge_size: usize,
    /// Width of the merger output (the text hidden size).
    pub out_hidden_size: usize,
    /// Input channels (3).
    pub in_channels: usize,
    /// Entries of the learned (square) position-embedding grid.
    pub num_position_embeddings: usize,
    /// Vision blocks whose output feeds a DeepStack merger, in order.
    pub deepstack_visual_indexes: Vec<usize>,
    /// 2-D rotary base.
    pub rope_theta: f64,
}

impl VisionConfig {
    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }

    /// Side of the learned position grid.
    pub fn num_grid_per_side(&self) -> usize {
        isqrt(self.num_position_embeddings)
    }

    /// Values per flattened patch: `in_channels * temporal_patch_size * patch_size²`.
    pub fn patch_dim(&self) -> usize {
        self.in_channels * self.temporal_patch_size * self.patch_size * self.patch_size
    }
}

/// The whole model's validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Qwen3VlConfig {
    /// The text decoder.
    pub text: TextConfig,
    /// The vision tower.
    pub vision: VisionConfig,
    /// `<|image_pad|>`.
    pub image_token_id: u32,
    /// `<|vision_start|>`.
    pub vision_start_token_id: u32,
    /// `<|vision_end|>`.
    pub vision_end_token_id: u32,
}

fn isqrt(n: usize) -> usize {
    let mut r = (n as f64).sqrt() as usize;
    while r * r > n {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= n {
        r += 1;
    }
    r
}

// ---------------------------------------------------------------- config.json

/// `rope_scaling` (4.57) or `rope_parameters` (5.x) of `text_config`.
#[derive(Debug, Clone, Deserialize, Default)]
struct RawRope {
    #[serde(default)]
    rope_theta: Option<f64>,
    #[serde(default)]
    rope_type: Option<String>,
    #[serde(default)]
    mrope_section: Option<Vec<usize>>,
    #[serde(default)]
    mrope_interleaved: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawTextConfig {
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    #[serde(default = "default_rms_eps")]
    rms_norm_eps: f64,
    #[serde(default)]
    rope_theta: Option<f64>,
    #[serde(default)]
    rope_scaling: Option<RawRope>,
    #[serde(default)]
    rope_parameters: Option<RawRope>,
    #[serde(default)]
    attention_bias: bool,
    #[serde(default)]
    hidden_act: Option<String>,
    #[serde(default)]
    tie_word_embeddings: Option<bool>,
    #[serde(default = "default_max_pos")]
    max_position_embeddings: usize,
}

fn default_rms_eps() -> f64 {
    1e-6
}
fn default_max_pos() -> usize {
    128_000
}

#[derive(Debug, Clone, Deserialize)]
struct RawVisionConfig {
    depth: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_heads: usize,
    #[serde(default = "default_patch")]
    patch_size: usize,
    #[serde(default = "default_two")]
    temporal_patch_size: usize,
    #[serde(default = "default_two")]
    spatial_merge_size: usize,
    out_hidden_size: usize,
    #[serde(default = "default_three")]
    in_channels: usize,
    num_position_embeddings: usize,
    #[serde(default)]
    deepstack_visual_indexes: Vec<usize>,
    #[serde(default)]
    hidden_act: Option<String>,
    #[serde(default)]
    rope_parameters: Option<RawRope>,
}

fn default_patch() -> usize {
    16
}
fn default_two() -> usize {
    2
}
fn default_three() -> usize {
    3
}

#[derive(Debug, Clone, Deserialize)]
struct RawConfig {
    #[serde(default)]
    model_type: Option<String>,
    text_config: RawTextConfig,
    vision_config: RawVisionConfig,
    #[serde(default)]
    tie_word_embeddings: Option<bool>,
    #[serde(default)]
    image_token_id: Option<u32>,
    #[serde(default)]
    vision_start_token_id: Option<u32>,
    #[serde(default)]
    vision_end_token_id: Option<u32>,
}

impl Qwen3VlConfig {
    /// Read and validate a Hugging Face `config.json` (transformers 4.57 layout with
    /// `text_config.rope_scaling` + `rope_theta`, or 5.x layout with `rope_parameters`).
    pub fn from_config_json(path: &Path) -> Result<Self> {
        let text = crate::input_file::read_string(path, crate::input_file::InputKind::Config)?;
        Self::from_json_str(&text).map_err(|e| match e {
            Error::Config { reason, source } => Error::ModelFile {
                path: path.to_path_buf(),
                reason,
                source,
            },
            other => other,
        })
    }

    /// Parse and validate the text of a `config.json`.
    pub fn from_json_str(json: &str) -> Result<Self> {
        let raw: RawConfig = serde_json::from_str(json)
            .map_err(|e| Error::config_caused("config.json does not parse", e))?;
        if let Some(mt) = &raw.model_type {
            if mt != "qwen3_vl" {
                return Err(Error::config(format!(
                    "model_type is {mt:?}, only \"qwen3_vl\" is supported"
                )));
            }
        }
        let t = &raw.text_config;
        // 5.x puts everything in rope_parameters; 4.57 splits rope_theta out beside
        // rope_scaling. Accept either, preferring the newer layout when both exist.
        let rope = t
            .rope_parameters
            .clone()
            .or_else(|| t.rope_scaling.clone())
            .unwrap_or_default();
        if let Some(rt) = &rope.rope_type {
            if rt != "default" && rt != "mrope" {
                return Err(Error::config(format!(
                    "text_config rope_type {rt:?} is not supported (only \"default\")"
                )));
            }
        }
        let rope_theta = rope.rope_theta.or(t.rope_theta).ok_or_else(|| {
            Error::config("text_config: no rope_theta (in rope_parameters or beside rope_scaling)")
        })?;
        let section = rope.mrope_section.clone().ok_or_else(|| {
            Error::config("text_config: no mrope_section in rope_scaling / rope_parameters")
        })?;
        let mrope_section: [usize; 3] = section.as_slice().try_into().map_err(|_| {
            Error::config(format!(
                "text_config.mrope_section has {} entries, expected 3 (t, h, w)",
                section.len()
            ))
        })?;
        if t.attention_bias {
            return Err(Error::config(
                "text_config.attention_bias = true is not supported by Qwen3-VL",
            ));
        }
        if let Some(act) = &t.hidden_act {
            if act != "silu" {
                return Err(Error::config(format!(
                    "text_config.hidden_act {act:?} is not supported (only \"silu\")"
                )));
            }
        }
        let v = &raw.vision_config;
        if let Some(act) = &v.hidden_act {
            if act != "gelu_pytorch_tanh" {
                return Err(Error::config(format!(
                    "vision_config.hidden_act {act:?} is not supported (only \"gelu_pytorch_tanh\")"
                )));
            }
        }
        let vision_theta = v
            .rope_parameters
            .as_ref()
            .and_then(|r| r.rope_theta)
            .unwrap_or(DEFAULT_VISION_ROPE_THETA);
        let cfg = Qwen3VlConfig {
            text: TextConfig {
                vocab_size: t.vocab_size,
                hidden_size: t.hidden_size,
                intermediate_size: t.intermediate_size,
                num_hidden_layers: t.num_hidden_layers,
                num_attention_heads: t.num_attention_heads,
                num_key_value_heads: t.num_key_value_heads.unwrap_or(t.num_attention_heads),
                head_dim: t.head_dim.unwrap_or(
                    t.hidden_size
                        .checked_div(t.num_attention_heads)
                        .unwrap_or(0),
                ),
                rms_norm_eps: t.rms_norm_eps,
                rope_theta,
                mrope_section,
                mrope_interleaved: rope.mrope_interleaved.unwrap_or(true),
                tie_word_embeddings: raw
                    .tie_word_embeddings
                    .or(t.tie_word_embeddings)
                    .unwrap_or(false),
                max_position_embeddings: t.max_position_embeddings,
            },
            vision: VisionConfig {
                depth: v.depth,
                hidden_size: v.hidden_size,
                intermediate_size: v.intermediate_size,
                num_heads: v.num_heads,
                patch_size: v.patch_size,
                temporal_patch_size: v.temporal_patch_size,
                spatial_merge_size: v.spatial_merge_size,
                out_hidden_size: v.out_hidden_size,
                in_channels: v.in_channels,
                num_position_embeddings: v.num_position_embeddings,
                deepstack_visual_indexes: v.deepstack_visual_indexes.clone(),
                rope_theta: vision_theta,
            },
            image_token_id: raw.image_token_id.unwrap_or(DEFAULT_IMAGE_TOKEN_ID),
            vision_start_token_id: raw
                .vision_start_token_id
                .unwrap_or(DEFAULT_VISION_START_TOKEN_ID),
            vision_end_token_id: raw
                .vision_end_token_id
                .unwrap_or(DEFAULT_VISION_END_TOKEN_ID),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Resolve the configuration from the metadata of a llama.cpp text GGUF
    /// (architecture `qwen3vl`) and its `mmproj` (architecture `clip`).
    ///
    /// `vocab_size` and `tie_word_embeddings` come from the tensors (the width of
    /// `token_embd.weight`, and whether `output.weight` exists), `temporal_patch_size`
    /// from the two `v.patch_embd.weight` slices llama.cpp writes.
    pub fn from_gguf(
        text: &GgufMeta<'_>,
        mmproj: &GgufMeta<'_>,
        facts: &GgufTensorFacts,
    ) -> Result<Self> {
        let arch = text.string("general.architecture")?;
        if arch != "qwen3vl" {
            return Err(text.error(format!(
                "general.architecture is {arch:?}, expected \"qwen3vl\""
            )));
        }
        let march = mmproj.string("general.architecture")?;
        if march != "clip" {
            return Err(mmproj.error(format!(
                "general.architecture is {march:?}, expected \"clip\" (an mmproj file)"
            )));
        }
        if let Ok(pt) = mmproj.string("clip.projector_type") {
            if pt != "qwen3vl_merger" {
                return Err(mmproj.error(format!(
                    "clip.projector_type is {pt:?}, expected \"qwen3vl_merger\""
                )));
            }
        }
        let sections = text.u32_array("qwen3vl.rope.dimension_sections")?;
        if sections.len() < 3 {
            return Err(text.error(format!(
                "qwen3vl.rope.dimension_sections has {} entries, expected at least 3",
                sections.len()
            )));
        }
        let n_heads = text.usize("qwen3vl.attention.head_count")?;
        let hidden = text.usize("qwen3vl.embedding_length")?;
        let head_dim = match text.usize("qwen3vl.attention.key_length") {
            Ok(d) => d,
            Err(_) if n_heads > 0 => hidden / n_heads,
            Err(e) => return Err(e),
        };
        let n_deepstack_text = text.usize("qwen3vl.n_deepstack_layers").unwrap_or(0);

        let patch_size = mmproj.usize("clip.vision.patch_size")?;
        let image_size = mmproj.usize("clip.vision.image_size")?;
        let depth = mmproj.usize("clip.vision.block_count")?;
        let deepstack_flags = mmproj
            .bool_array("clip.vision.is_deepstack_layers")
            .unwrap_or_default();
        let deepstack_visual_indexes: Vec<usize> = deepstack_flags
            .iter()
            .enumerate()
            .filter_map(|(i, &on)| on.then_some(i))
            .collect();
        if deepstack_visual_indexes.len() != n_deepstack_text {
            return Err(mmproj.error(format!(
                "{} DeepStack layers, but the text model {} expects {} \
                 (qwen3vl.n_deepstack_layers): the mmproj does not belong to it",
                deepstack_visual_indexes.len(),
                text.path.display(),
                n_deepstack_text
            )));
        }
        let grid_side = image_size.checked_div(patch_size).unwrap_or(0);
        let cfg = Qwen3VlConfig {
            text: TextConfig {
                vocab_size: facts.vocab_size,
                hidden_size: hidden,
                intermediate_size: text.usize("qwen3vl.feed_forward_length")?,
                num_hidden_layers: text.usize("qwen3vl.block_count")?,
                num_attention_heads: n_heads,
                num_key_value_heads: text.usize("qwen3vl.attention.head_count_kv")?,
                head_dim,
                rms_norm_eps: text.f64("qwen3vl.attention.layer_norm_rms_epsilon")?,
                rope_theta: text.f64("qwen3vl.rope.freq_base")?,
                mrope_section: [
                    sections[0] as usize,
                    sections[1] as usize,
                    sections[2] as usize,
                ],
                // llama.cpp runs qwen3vl with its interleaved M-RoPE (IMROPE).
                mrope_interleaved: true,
                tie_word_embeddings: !facts.has_output,
                max_position_embeddings: text.usize("qwen3vl.context_length").unwrap_or(128_000),
            },
            vision: VisionConfig {
                depth,
                hidden_size: mmproj.usize("clip.vision.embedding_length")?,
                intermediate_size: mmproj.usize("clip.vision.feed_forward_length")?,
                num_heads: mmproj.usize("clip.vision.attention.head_count")?,
                patch_size,
                temporal_patch_size: facts.temporal_patch_size,
                spatial_merge_size: mmproj.usize("clip.vision.spatial_merge_size").unwrap_or(2),
                out_hidden_size: mmproj.usize("clip.vision.projection_dim")?,
                in_channels: facts.in_channels,
                num_position_embeddings: grid_side * grid_side,
                deepstack_visual_indexes,
                rope_theta: DEFAULT_VISION_ROPE_THETA,
            },
            image_token_id: DEFAULT_IMAGE_TOKEN_ID,
            vision_start_token_id: DEFAULT_VISION_START_TOKEN_ID,
            vision_end_token_id: DEFAULT_VISION_END_TOKEN_ID,
        };
        if cfg.vision.out_hidden_size != cfg.text.hidden_size {
            return Err(mmproj.error(format!(
                "clip.vision.projection_dim {} differs from the embedding_length {} of {}: \
                 the mmproj does not belong to this text model",
                cfg.vision.out_hidden_size,
                cfg.text.hidden_size,
                text.path.display()
            )));
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Check the invariants the model code relies on; every failure names the field.
    pub fn validate(&self) -> Result<()> {
        let t = &self.text;
        let v = &self.vision;
        let bad = |msg: String| Err(Error::config(msg));
        // Both towers' rotary bases must be finite and above 1.
        let rope_theta_ok = |tower: &str, theta: f64| {
            if theta > 1.0 && theta.is_finite() {
                Ok(())
            } else {
                bad(format!("{tower} rope_theta {theta} is not a number > 1"))
            }
        };
        for (name, val) in [
            ("text vocab_size", t.vocab_size),
            ("text hidden_size", t.hidden_size),
            ("text intermediate_size", t.intermediate_size),
            ("text num_hidden_layers", t.num_hidden_layers),
            ("text num_attention_heads", t.num_attention_heads),
            ("text num_key_value_heads", t.num_key_value_heads),
            ("text head_dim", t.head_dim),
            ("vision depth", v.depth),
            ("vision hidden_size", v.hidden_size),
            ("vision intermediate_size", v.intermediate_size),
            ("vision num_heads", v.num_heads),
            ("vision patch_size", v.patch_size),
            ("vision temporal_patch_size", v.temporal_patch_size),
            ("vision spatial_merge_size", v.spatial_merge_size),
            ("vision out_hidden_size", v.out_hidden_size),
            ("vision in_channels", v.in_channels),
            ("vision num_position_embeddings", v.num_position_embeddings),
        ] {
            if val == 0 {
                return bad(format!("{name} is 0"));
            }
        }
        if !t.num_attention_heads.is_multiple_of(t.num_key_value_heads) {
            return bad(format!(
                "text num_attention_heads {} is not a multiple of num_key_value_heads {}",
                t.num_attention_heads, t.num_key_value_heads
            ));
        }
        if !t.head_dim.is_multiple_of(2) {
            return bad(format!("text head_dim {} is odd", t.head_dim));
        }
        let sum: usize = t.mrope_section.iter().sum();
        if sum != t.head_dim / 2 {
            return bad(format!(
                "mrope_section {:?} sums to {sum}, expected head_dim / 2 = {}",
                t.mrope_section,
                t.head_dim / 2
            ));
        }
        if !(t.rms_norm_eps > 0.0 && t.rms_norm_eps.is_finite()) {
            return bad(format!(
                "text rms_norm_eps {} is not a positive number",
                t.rms_norm_eps
            ));
        }
        rope_theta_ok("text", t.rope_theta)?;
        if !v.hidden_size.is_multiple_of(v.num_heads) {
            return bad(format!(
                "vision hidden_size {} is not a multiple of num_heads {}",
                v.hidden_size, v.num_heads
            ));
        }
        if !v.head_dim().is_multiple_of(4) {
            return bad(format!(
                "vision head_dim {} is not a multiple of 4 (2-D rotary splits it in quarters)",
                v.head_dim()
            ));
        }
        let side = v.num_grid_per_side();
        if side * side != v.num_position_embeddings {
            return bad(format!(
                "vision num_position_embeddings {} is not a square",
                v.num_position_embeddings
            ));
        }
        if v.out_hidden_size != t.hidden_size {
            return bad(format!(
                "vision out_hidden_size {} differs from the text hidden_size {}: \
                 the vision tower does not belong to this text model",
                v.out_hidden_size, t.hidden_size
            ));
        }
        if v.deepstack_visual_indexes.len() > t.num_hidden_layers {
            return bad(format!(
                "{} DeepStack taps but only {} text layers",
                v.deepstack_visual_indexes.len(),
                t.num_hidden_layers
            ));
        }
        if let Some(&i) = v.deepstack_visual_indexes.iter().find(|&&i| i >= v.depth) {
            return bad(format!(
                "DeepStack tap on vision layer {i}, but the tower has {} layers",
                v.depth
            ));
        }
        rope_theta_ok("vision", v.rope_theta)?;
        if (self.image_token_id as usize) >= t.vocab_size {
            return bad(format!(
                "image_token_id {} is outside the vocabulary ({})",
                self.image_token_id, t.vocab_size
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- GGUF metadata

/// Facts about a GGUF pair that live in its tensors rather than its metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgufTensorFacts {
    /// Rows of `token_embd.weight`.
    pub vocab_size: usize,
    /// Whether `output.weight` exists (an untied LM head).
    pub has_output: bool,
    /// Number of `v.patch_embd.weight[.N]` temporal slices.
    pub temporal_patch_size: usize,
    /// Input channels of `v.patch_embd.weight`.
    pub in_channels: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models/fixtures");

    #[test]
    fn reads_both_config_json_layouts() -> Result<()> {
        let a = Qwen3VlConfig::from_config_json(&Path::new(FIXTURES).join("tiny-a/config.json"))?;
        assert_eq!(a.text.mrope_section, [2, 3, 3]);
        assert_eq!(a.text.rope_theta, 5_000_000.0);
        assert!(a.text.tie_word_embeddings);
        assert_eq!(a.vision.deepstack_visual_indexes, vec![0, 1]);
        let b = Qwen3VlConfig::from_config_json(&Path::new(FIXTURES).join("tiny-b/config.json"))?;
        assert_eq!(b.text.mrope_section, [6, 5, 5]);
        assert_eq!(b.text.rope_theta, 1_000_000.0);
        assert!(!b.text.tie_word_embeddings);
        assert_eq!(b.text.num_key_value_heads, 1);
        Ok(())
    }

    #[test]
    fn rejects_mrope_section_that_does_not_cover_head_dim() -> Result<()> {
        let path = Path::new(FIXTURES).join("tiny-a/config.json");
        let text = std::fs::read_to_string(path).map_err(|e| Error::io("config", e))?;
        let broken = text.replace(
            "\"mrope_section\": [\n        2,",
            "\"mrope_section\": [\n        5,",
        );
        assert_ne!(broken, text, "the fixture layout changed; update the test");
        let err = Qwen3VlConfig::from_json_str(&broken)
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("mrope_section")),
            "{err:?}"
        );
        Ok(())
    }

    #[test]
    fn rejects_missing_rope_theta() {
        let json = r#"{"model_type":"qwen3_vl","text_config":{"vocab_size":8,"hidden_size":8,
            "intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":1,
            "rope_scaling":{"mrope_section":[2,1,1]}},
            "vision_config":{"depth":1,"hidden_size":8,"intermediate_size":8,"num_heads":1,
            "out_hidden_size":8,"num_position_embeddings":4}}"#;
        let err = Qwen3VlConfig::from_json_str(json)
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("rope_theta")),
            "{err:?}"
        );
    }
}
