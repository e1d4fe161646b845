//! The model shapes `sightline bench` can make: Qwen3-VL 2B, 4B and 8B, and a tiny one
//! for tests. One table, checked against the published `config.json` files of
//! `Qwen/Qwen3-VL-{2B,4B,8B}-Instruct` (and transformers' `Qwen3VLVisionConfig`
//! defaults, which are the 8B tower).

use crate::error::{Error, Result};
use crate::model::qwen3_vl::config::{
    DEFAULT_IMAGE_TOKEN_ID, DEFAULT_VISION_END_TOKEN_ID, DEFAULT_VISION_ROPE_THETA,
    DEFAULT_VISION_START_TOKEN_ID,
};
use crate::model::qwen3_vl::{Qwen3VlConfig, TextConfig, VisionConfig};

/// Width of a Qwen3-VL logits row (the tokenizer's 151,669 tokens padded).
pub const QWEN3_VL_VOCAB: usize = 151_936;
/// The context length every Qwen3-VL checkpoint declares.
pub const QWEN3_VL_CONTEXT: usize = 262_144;
/// The text rotary base every Qwen3-VL checkpoint declares (and the tiny-a fixture).
const QWEN3_VL_ROPE_THETA: f64 = 5_000_000.0;

/// A model shape `sightline bench` can generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelShape {
    /// The dimensions of the `tiny-a` test fixture with the real vocabulary width:
    /// seconds to make and load, for tests.
    Tiny,
    /// Qwen3-VL-2B-Instruct.
    B2,
    /// Qwen3-VL-4B-Instruct.
    B4,
    /// Qwen3-VL-8B-Instruct.
    B8,
}

impl ModelShape {
    /// Every shape, smallest first.
    pub const ALL: [ModelShape; 4] = [
        ModelShape::Tiny,
        ModelShape::B2,
        ModelShape::B4,
        ModelShape::B8,
    ];

    /// The name on the command line and in cache paths (`tiny`, `2b`, `4b`, `8b`).
    pub fn name(self) -> &'static str {
        match self {
            ModelShape::Tiny => "tiny",
            ModelShape::B2 => "2b",
            ModelShape::B4 => "4b",
            ModelShape::B8 => "8b",
        }
    }

    /// The resolved configuration of this shape (validated).
    pub fn config(self) -> Qwen3VlConfig {
        // (layers, hidden, heads, kv heads, head_dim, ff, tied, mrope, tower)
        let row = SHAPES[self as usize];
        let cfg = Qwen3VlConfig {
            text: TextConfig {
                vocab_size: QWEN3_VL_VOCAB,
                hidden_size: row.hidden,
                intermediate_size: row.ff,
                num_hidden_layers: row.layers,
                num_attention_heads: row.heads,
                num_key_value_heads: row.kv_heads,
                head_dim: row.head_dim,
                rms_norm_eps: 1e-6,
                rope_theta: QWEN3_VL_ROPE_THETA,
                mrope_section: row.mrope_section,
                mrope_interleaved: true,
                tie_word_embeddings: row.tied,
                max_position_embeddings: QWEN3_VL_CONTEXT,
            },
            vision: VisionConfig {
                depth: row.tower.depth,
                hidden_size: row.tower.hidden,
                intermediate_size: row.tower.ff,
                num_heads: row.tower.heads,
                patch_size: 16,
                temporal_patch_size: 2,
                spatial_merge_size: 2,
                out_hidden_size: row.hidden,
                in_channels: 3,
                num_position_embeddings: row.tower.positions,
                deepstack_visual_indexes: row.tower.deepstack.to_vec(),
                rope_theta: DEFAULT_VISION_ROPE_THETA,
            },
            image_token_id: DEFAULT_IMAGE_TOKEN_ID,
            vision_start_token_id: DEFAULT_VISION_START_TOKEN_ID,
            vision_end_token_id: DEFAULT_VISION_END_TOKEN_ID,
        };
        debug_assert!(
            cfg.validate().is_ok(),
            "shape table row {self:?} is invalid"
        );
        cfg
    }
}

impl std::str::FromStr for ModelShape {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        ModelShape::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| Error::invalid_input(format!("unknown model shape {s:?} (2b, 4b, 8b)")))
    }
}

impl std::fmt::Display for ModelShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One row of [`SHAPES`].
#[derive(Debug, Clone, Copy)]
struct ShapeRow {
    layers: usize,
    hidden: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    ff: usize,
    tied: bool,
    mrope_section: [usize; 3],
    tower: TowerRow,
}

/// The vision tower of a [`ShapeRow`].
#[derive(Debug, Clone, Copy)]
struct TowerRow {
    depth: usize,
    hidden: usize,
    ff: usize,
    heads: usize,
    positions: usize,
    deepstack: &'static [usize],
}

/// The vision tower Qwen3-VL 2B and 4B share.
const SMALL_TOWER: TowerRow = TowerRow {
    depth: 24,
    hidden: 1024,
    ff: 4096,
    heads: 16,
    positions: 2304,
    deepstack: &[5, 11, 17],
};

/// The vision tower of Qwen3-VL 8B (transformers' `Qwen3VLVisionConfig` defaults).
const LARGE_TOWER: TowerRow = TowerRow {
    depth: 27,
    hidden: 1152,
    ff: 4304,
    heads: 16,
    positions: 2304,
    deepstack: &[8, 16, 24],
};

/// The shape table, indexed by [`ModelShape`] discriminant.
const SHAPES: [ShapeRow; 4] = [
    // Tiny: the tiny-a fixture's dimensions (models/scripts/make_tiny_models.py).
    ShapeRow {
        layers: 3,
        hidden: 32,
        heads: 4,
        kv_heads: 2,
        head_dim: 16,
        ff: 64,
        tied: true,
        mrope_section: [2, 3, 3],
        tower: TowerRow {
            depth: 3,
            hidden: 32,
            ff: 64,
            heads: 2,
            positions: 64,
            deepstack: &[0, 1],
        },
    },
    // Qwen3-VL-2B-Instruct.
    ShapeRow {
        layers: 28,
        hidden: 2048,
        heads: 16,
        kv_heads: 8,
        head_dim: 128,
        ff: 6144,
        tied: true,
        mrope_section: [24, 20, 20],
        tower: SMALL_TOWER,
    },
    // Qwen3-VL-4B-Instruct.
    ShapeRow {
        layers: 36,
        hidden: 2560,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        ff: 9728,
        tied: true,
        mrope_section: [24, 20, 20],
        tower: SMALL_TOWER,
    },
    // Qwen3-VL-8B-Instruct.
    ShapeRow {
        layers: 36,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        ff: 12288,
        tied: false,
        mrope_section: [24, 20, 20],
        tower: LARGE_TOWER,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_in_the_table_validates() -> Result<()> {
        for shape in ModelShape::ALL {
            shape.config().validate()?;
            assert_eq!(shape.name().parse::<ModelShape>()?, shape);
        }
        Ok(())
    }

    #[test]
    fn two_b_row_matches_the_published_config() {
        let c = ModelShape::B2.config();
        assert_eq!(
            (
                c.text.num_hidden_layers,
                c.text.hidden_size,
                c.text.intermediate_size
            ),
            (28, 2048, 6144)
        );
        assert_eq!(
            (c.text.num_attention_heads, c.text.num_key_value_heads),
            (16, 8)
        );
        assert_eq!((c.vision.depth, c.vision.hidden_size), (24, 1024));
        assert_eq!(c.vision.deepstack_visual_indexes, vec![5, 11, 17]);
        assert!(c.text.tie_word_embeddings);
        assert!(!ModelShape::B8.config().text.tie_word_embeddings);
    }
}
