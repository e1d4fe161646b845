//! The Qwen3-VL vision tower: patch embedding, interpolated learned position embedding,
//! 2-D rotary attention blocks, the 2×2 patch merger and the DeepStack mergers.
//!
//! Reference: `Qwen3VLVisionModel` in transformers' `modeling_qwen3_vl.py` and the
//! interpolation helpers in `vision_utils.py`. Patches arrive in the preprocessor's
//! order: merge blocks of `merge × merge` patches, row-major over the block grid.

use candle_core::{DType, Device, Tensor};
use candle_nn::ops::layer_norm;
use candle_nn::rotary_emb::rope;

use super::WeightSource;
use crate::error::{Error, Result};
use crate::model::qwen3_vl::attention::attention;
use crate::model::qwen3_vl::config::{VisionConfig, VISION_LAYER_NORM_EPS};
use crate::model::qwen3_vl::gelu::gelu_tanh;
use crate::model::qwen3_vl::rope::vision_cos_sin;
use crate::model::weights::Linear;
use crate::model::{EncodedImage, PreprocessedImage};

/// Checkpoint prefix of the vision tower.
const PREFIX: &str = "model.visual";

/// The largest patch grid side accepted (a 16-px patch: 64k pixels), far above any
/// token budget; bounds the work an untrusted grid can ask for.
pub const MAX_GRID_SIDE: usize = 4096;

#[derive(Debug, Clone)]
struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
}

impl LayerNorm {
    fn new(ws: &WeightSource, name: &str, size: usize) -> Result<Self> {
        Ok(LayerNorm {
            weight: ws.float(&format!("{name}.weight"), &[size])?,
            bias: ws.float(&format!("{name}.bias"), &[size])?,
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        Ok(layer_norm(
            &xs.contiguous()?,
            &self.weight,
            &self.bias,
            VISION_LAYER_NORM_EPS as f32,
        )?)
    }
}

#[derive(Debug, Clone)]
struct Attention {
    qkv: Linear,
    proj: Linear,
    n_heads: usize,
    head_dim: usize,
}

impl Attention {
    /// `qkv`: the fused projection of `(t * hw, dim)` patches, `(t * hw, 3 * dim)`;
    /// attention stays within each frame of `hw` patches. Taken by value so that it is
    /// freed once split (see [`Block::forward`]).
    fn forward(&self, qkv: Tensor, cos: &Tensor, sin: &Tensor, hw: usize) -> Result<Tensor> {
        let n = qkv.dim(0)?;
        let (nh, hd) = (self.n_heads, self.head_dim);
        // Moved into the block, so the projection itself is not held under a shadowing
        // name to the end of the function.
        let qkv = {
            let fused = qkv;
            fused.reshape((n, 3, nh, hd))?.permute((1, 2, 0, 3))?
        };
        let dtype = qkv.dtype();
        let (cos, sin) = (cos.to_dtype(dtype)?, sin.to_dtype(dtype)?);
        let q = rope(&qkv.get(0)?.unsqueeze(0)?.contiguous()?, &cos, &sin)?;
        let k = rope(&qkv.get(1)?.unsqueeze(0)?.contiguous()?, &cos, &sin)?;
        let v = qkv.get(2)?.unsqueeze(0)?.contiguous()?;
        drop(qkv);
        let scale = 1.0 / (hd as f64).sqrt();
        // Frames attend only to themselves (the reference's cu_seqlens).
        let mut frames = Vec::with_capacity(n / hw);
        for f in 0..n / hw {
            let qf = q.narrow(2, f * hw, hw)?.squeeze(0)?.unsqueeze(1)?; // (heads, 1, hw, hd)
            let kf = k.narrow(2, f * hw, hw)?.squeeze(0)?;
            let vf = v.narrow(2, f * hw, hw)?.squeeze(0)?;
            frames.push(attention(&qf, &kf, &vf, None, scale)?.squeeze(1)?);
        }
        drop((q, k, v));
        let heads = if frames.len() == 1 {
            frames.remove(0)
        } else {
            Tensor::cat(&frames, 1)?
        }; // (heads, n, hd)
        drop(frames);
        let out = heads.transpose(0, 1)?.reshape((n, nh * hd))?;
        drop(heads);
        self.proj.forward(&out)
    }
}

#[derive(Debug, Clone)]
struct Block {
    norm1: LayerNorm,
    attn: Attention,
    norm2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
}

impl Block {
    fn new(cfg: &VisionConfig, ws: &WeightSource, i: usize) -> Result<Self> {
        let p = format!("{PREFIX}.blocks.{i}");
        let d = cfg.hidden_size;
        Ok(Block {
            norm1: LayerNorm::new(ws, &format!("{p}.norm1"), d)?,
            attn: Attention {
                qkv: ws.linear(&format!("{p}.attn.qkv"), 3 * d, d, true)?,
                proj: ws.linear(&format!("{p}.attn.proj"), d, d, true)?,
                n_heads: cfg.num_heads,
                head_dim: cfg.head_dim(),
            },
            norm2: LayerNorm::new(ws, &format!("{p}.norm2"), d)?,
            fc1: ws.linear(
                &format!("{p}.mlp.linear_fc1"),
                cfg.intermediate_size,
                d,
                true,
            )?,
            fc2: ws.linear(
                &format!("{p}.mlp.linear_fc2"),
                d,
                cfg.intermediate_size,
                true,
            )?,
        })
    }

    /// Each intermediate is freed once the next is made: at ~5,000 patches (a 1,280-token
    /// screenshot) they are 20–80 MB each, and the encode's memory peak is the sum of those
    /// alive at once. A temporary lives to the end of its statement, and a shadowed binding
    /// to the end of its scope, so the steps are statements of their own and the large
    /// inputs are dropped by hand.
    fn forward(&self, xs: &Tensor, cos: &Tensor, sin: &Tensor, hw: usize) -> Result<Tensor> {
        let qkv = self.attn.qkv.forward(&self.norm1.forward(xs)?)?;
        let xs = (xs + self.attn.forward(qkv, cos, sin, hw)?)?;
        let hidden = gelu_tanh(&self.fc1.forward(&self.norm2.forward(&xs)?)?)?;
        let h = self.fc2.forward(&hidden)?;
        drop(hidden);
        Ok((xs + h)?)
    }
}

/// The 2×2 merger: LayerNorm (before the shuffle for the main merger, after it for the
/// DeepStack mergers), fc1, exact GELU, fc2.
#[derive(Debug, Clone)]
struct Merger {
    norm: LayerNorm,
    fc1: Linear,
    fc2: Linear,
    postshuffle_norm: bool,
    merged_dim: usize,
}

impl Merger {
    fn new(
        cfg: &VisionConfig,
        ws: &WeightSource,
        prefix: &str,
        postshuffle_norm: bool,
    ) -> Result<Self> {
        let merged_dim = cfg.hidden_size * cfg.spatial_merge_size * cfg.spatial_merge_size;
        let norm_dim = if postshuffle_norm {
            merged_dim
        } else {
            cfg.hidden_size
        };
        Ok(Merger {
            norm: LayerNorm::new(ws, &format!("{prefix}.norm"), norm_dim)?,
            fc1: ws.linear(
                &format!("{prefix}.linear_fc1"),
                merged_dim,
                merged_dim,
                true,
            )?,
            fc2: ws.linear(
                &format!("{prefix}.linear_fc2"),
                cfg.out_hidden_size,
                merged_dim,
                true,
            )?,
            postshuffle_norm,
            merged_dim,
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let xs = if self.postshuffle_norm {
            self.norm.forward(&xs.reshape(((), self.merged_dim))?)?
        } else {
            self.norm.forward(xs)?.reshape(((), self.merged_dim))?
        };
        self.fc2.forward(&self.fc1.forward(&xs)?.gelu_erf()?)
    }
}

/// The vision tower.
#[derive(Debug, Clone)]
pub(crate) struct VisionModel {
    patch_embed: Linear,
    pos_embed: Tensor,
    blocks: Vec<Block>,
    merger: Merger,
    deepstack_mergers: Vec<Merger>,
    cfg: VisionConfig,
    dtype: DType,
    device: Device,
}

impl VisionModel {
    pub(crate) fn new(cfg: &VisionConfig, ws: &WeightSource) -> Result<Self> {
        let d = cfg.hidden_size;
        let (c, t, p) = (cfg.in_channels, cfg.temporal_patch_size, cfg.patch_size);
        // The Conv3d with stride = kernel is a matmul over flattened (C, T, P, P) patches.
        let w = ws.float(
            &format!("{PREFIX}.patch_embed.proj.weight"),
            &[d, c, t, p, p],
        )?;
        let w = w.reshape((d, cfg.patch_dim()))?;
        let b = ws.float(&format!("{PREFIX}.patch_embed.proj.bias"), &[d])?;
        let patch_embed = Linear::new(
            candle_core::quantized::QMatMul::Tensor(w),
            Some(b),
            ws.dtype(),
        );
        let pos_embed = ws.float(
            &format!("{PREFIX}.pos_embed.weight"),
            &[cfg.num_position_embeddings, d],
        )?;
        let blocks = (0..cfg.depth)
            .map(|i| Block::new(cfg, ws, i))
            .collect::<Result<Vec<_>>>()?;
        let merger = Merger::new(cfg, ws, &format!("{PREFIX}.merger"), false)?;
        let deepstack_mergers = (0..cfg.deepstack_visual_indexes.len())
            .map(|i| {
                Merger::new(
                    cfg,
                    ws,
                    &format!("{PREFIX}.deepstack_merger_list.{i}"),
                    true,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(VisionModel {
            patch_embed,
            pos_embed,
            blocks,
            merger,
            deepstack_mergers,
            cfg: cfg.clone(),
            dtype: ws.dtype(),
            device: ws.device().clone(),
        })
    }

    /// Check that `image` fits this tower; returns `(t, h, w)`.
    fn check(&self, image: &PreprocessedImage) -> Result<[usize; 3]> {
        let [t, h, w] = image.grid_thw;
        let m = self.cfg.spatial_merge_size;
        if t == 0 || h == 0 || w == 0 || h > MAX_GRID_SIDE || w > MAX_GRID_SIDE || t > MAX_GRID_SIDE
        {
            return Err(Error::invalid_input(format!(
                "image grid {:?} is empty or larger than {MAX_GRID_SIDE} patches a side",
                image.grid_thw
            )));
        }
        if h % m != 0 || w % m != 0 {
            return Err(Error::invalid_input(format!(
                "image grid {:?}: height and width must be multiples of the merge size {m}",
                image.grid_thw
            )));
        }
        let expected = [t * h * w, self.cfg.patch_dim()];
        if image.pixel_values.dims() != expected {
            return Err(Error::invalid_input(format!(
                "pixel_values has shape {:?}, expected {expected:?} for grid {:?}",
                image.pixel_values.dims(),
                image.grid_thw
            )));
        }
        Ok([t, h, w])
    }

    /// Patch coordinates `(row, col)` of one frame in merge-block order.
    fn patch_coords(&self, h: usize, w: usize) -> Vec<(u32, u32)> {
        let m = self.cfg.spatial_merge_size;
        let mut out = Vec::with_capacity(h * w);
        for br in 0..h / m {
            for bc in 0..w / m {
                for ir in 0..m {
                    for ic in 0..m {
                        out.push(((br * m + ir) as u32, (bc * m + ic) as u32));
                    }
                }
            }
        }
        out
    }

    /// The learned position table resampled bilinearly (align_corners) to an `h × w`
    /// grid, `(h * w, hidden)` in patch order (`fast_pos_embed_interpolate`).
    fn position_embeddings(&self, coords: &[(u32, u32)], h: usize, w: usize) -> Result<Tensor> {
        let side = self.cfg.num_grid_per_side();
        let taps = |index: u32, size: usize| -> [(usize, f32); 2] {
            // Same f32 arithmetic as the reference: index * (side - 1) / max(size - 1, 1).
            let src = index as f32 * (side - 1) as f32 / (size.max(2) - 1) as f32;
            let floor = src.floor();
            let mut out = [(0usize, 0f32); 2];
            for (o, slot) in out.iter_mut().enumerate() {
                let tap = (floor as usize + o).min(side - 1);
                let dist = (src - floor - o as f32).abs();
                *slot = (tap, (1.0 - dist).max(0.0));
            }
            out
        };
        let mut idx = Vec::with_capacity(coords.len() * 4);
        let mut weights = Vec::with_capacity(coords.len() * 4);
        for &(r, c) in coords {
            let (rt, ct) = (taps(r, h), taps(c, w));
            for (ri, rw) in rt {
                for (ci, cw) in ct {
                    idx.push((ri * side + ci) as u32);
                    weights.push(rw * cw);
                }
            }
        }
        let n = coords.len();
        let idx = Tensor::from_vec(idx, n * 4, &self.device)?;
        let weights =
            Tensor::from_vec(weights, (n, 4, 1), &self.device)?.to_dtype(self.pos_embed.dtype())?;
        let rows = self.pos_embed.index_select(&idx, 0)?.reshape((n, 4, ()))?;
        Ok(rows.broadcast_mul(&weights)?.sum(1)?)
    }

    /// Run the tower on one image.
    pub(crate) fn forward(&self, image: &PreprocessedImage) -> Result<EncodedImage> {
        let [t, h, w] = self.check(image)?;
        let m = self.cfg.spatial_merge_size;
        let pixels = image
            .pixel_values
            .to_device(&self.device)?
            .to_dtype(self.dtype)?;
        let xs = self.patch_embed.forward(&pixels)?;
        let frame = self.patch_coords(h, w);
        let pos = self.position_embeddings(&frame, h, w)?;
        let pos = if t > 1 { pos.repeat((t, 1))? } else { pos };
        let mut xs = (xs + pos.to_dtype(self.dtype)?)?;
        let all: Vec<(u32, u32)> = (0..t).flat_map(|_| frame.iter().copied()).collect();
        let (cos, sin) =
            vision_cos_sin(&all, self.cfg.head_dim(), self.cfg.rope_theta, &self.device)?;
        let mut deepstack = Vec::with_capacity(self.deepstack_mergers.len());
        for (i, block) in self.blocks.iter().enumerate() {
            xs = block.forward(&xs, &cos, &sin, h * w)?;
            if let Some(j) = self
                .cfg
                .deepstack_visual_indexes
                .iter()
                .position(|&d| d == i)
            {
                deepstack.push(self.deepstack_mergers[j].forward(&xs)?);
            }
        }
        let embeddings = self.merger.forward(&xs)?;
        Ok(EncodedImage {
            embeddings,
            deepstack,
            token_grid: [t, h / m, w / m],
        })
    }
}
