//! Rotary position embeddings: the text decoder's interleaved M-RoPE and the vision
//! tower's 2-D rotary embedding.
//!
//! Both produce `cos`/`sin` tables of shape `(seq, head_dim / 2)` for candle's
//! [`rope`](candle_nn::rotary_emb::rope) (the rotate-half layout), because in both
//! references the second half of the angle vector repeats the first.

use candle_core::{DType, Device, Tensor};

use crate::error::Result;
use crate::model::qwen3_vl::config::TextConfig;

/// One token's M-RoPE position: temporal, height, width.
pub type MropePosition = [u32; 3];

/// The text decoder's multimodal rotary embedding.
///
/// Frequency `j` of the `head_dim / 2` rotates with the t, h or w coordinate of the
/// token. Interleaved layout (Qwen3-VL, `Qwen3VLTextRotaryEmbedding.
/// recomposition_frequencies`): `j % 3 == 1 && j < 3 * section[1]` → h,
/// `j % 3 == 2 && j < 3 * section[2]` → w, otherwise t. Chunked layout (Qwen2-VL): the
/// first `section[0]` frequencies → t, the next `section[1]` → h, the rest → w.
#[derive(Debug, Clone)]
pub struct TextRope {
    inv_freq: Vec<f32>,
    axis: Vec<usize>,
}

impl TextRope {
    /// Tables for `cfg`.
    pub fn new(cfg: &TextConfig) -> Self {
        let half = cfg.head_dim / 2;
        let inv_freq = (0..half)
            .map(|j| (1.0 / cfg.rope_theta.powf((2 * j) as f64 / cfg.head_dim as f64)) as f32)
            .collect();
        let [t, h, w] = cfg.mrope_section;
        let axis = (0..half)
            .map(|j| {
                if cfg.mrope_interleaved {
                    if j % 3 == 1 && j < 3 * h {
                        1
                    } else if j % 3 == 2 && j < 3 * w {
                        2
                    } else {
                        0
                    }
                } else if j < t {
                    0
                } else if j < t + h {
                    1
                } else {
                    2
                }
            })
            .collect();
        TextRope { inv_freq, axis }
    }

    /// `(cos, sin)`, each `(positions.len(), head_dim / 2)` in `dtype` on `device`.
    ///
    /// Angles are computed in f32 like the reference (`position.float() * inv_freq`).
    pub fn cos_sin(
        &self,
        positions: &[MropePosition],
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let half = self.inv_freq.len();
        let mut cos = Vec::with_capacity(positions.len() * half);
        let mut sin = Vec::with_capacity(positions.len() * half);
        for pos in positions {
            for (f, &a) in self.inv_freq.iter().zip(&self.axis) {
                let angle = pos[a] as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        let shape = (positions.len(), half);
        let cos = Tensor::from_vec(cos, shape, device)?.to_dtype(dtype)?;
        let sin = Tensor::from_vec(sin, shape, device)?.to_dtype(dtype)?;
        Ok((cos, sin))
    }
}

/// `(cos, sin)` of the vision tower's 2-D rotary embedding for patches at `(row, col)`,
/// each `(n, head_dim / 2)` f32: the first quarter of the head rotates with the row, the
/// second with the column (`Qwen3VLVisionRotaryEmbedding`).
pub fn vision_cos_sin(
    rows_cols: &[(u32, u32)],
    head_dim: usize,
    theta: f64,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let spatial = head_dim / 2;
    let quarter = head_dim / 4;
    let inv_freq: Vec<f32> = (0..quarter)
        .map(|j| (1.0 / theta.powf((2 * j) as f64 / spatial as f64)) as f32)
        .collect();
    let mut cos = Vec::with_capacity(rows_cols.len() * spatial);
    let mut sin = Vec::with_capacity(rows_cols.len() * spatial);
    for &(r, c) in rows_cols {
        for coord in [r, c] {
            for f in &inv_freq {
                let angle = coord as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
    }
    let shape = (rows_cols.len(), spatial);
    Ok((
        Tensor::from_vec(cos, shape, device)?,
        Tensor::from_vec(sin, shape, device)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(section: [usize; 3], head_dim: usize) -> TextConfig {
        TextConfig {
            vocab_size: 8,
            hidden_size: 8,
            intermediate_size: 8,
            num_hidden_layers: 1,
            num_attention_heads: 1,
            num_key_value_heads: 1,
            head_dim,
            rms_norm_eps: 1e-6,
            rope_theta: 10_000.0,
            mrope_section: section,
            mrope_interleaved: true,
            tie_word_embeddings: true,
            max_position_embeddings: 16,
        }
    }

    #[test]
    fn interleaved_layout_matches_reference_slicing() {
        // Qwen3-VL's real section [24, 20, 20] over 64 frequencies: THW THW ... then T.
        let rope = TextRope::new(&cfg([24, 20, 20], 128));
        assert_eq!(&rope.axis[..6], &[0, 1, 2, 0, 1, 2]);
        assert_eq!(rope.axis.iter().filter(|&&a| a == 1).count(), 20);
        assert_eq!(rope.axis.iter().filter(|&&a| a == 2).count(), 20);
        assert_eq!(&rope.axis[60..], &[0, 0, 0, 0]);
        // tiny-a's [2, 3, 3] over 8: the slice for w stops at the end of the row.
        let rope = TextRope::new(&cfg([2, 3, 3], 16));
        assert_eq!(rope.axis, vec![0, 1, 2, 0, 1, 2, 0, 1]);
    }
}
