//! The Qwen3-VL text decoder: embeddings, GQA attention with q/k RMSNorm and
//! interleaved M-RoPE, SwiGLU MLP, DeepStack injection, final norm and LM head.
//!
//! Reference: `Qwen3VLTextModel` in transformers' `modeling_qwen3_vl.py`.

use candle_core::quantized::{GgmlDType, QMatMul};
use candle_core::{DType, Device, Tensor};
use candle_nn::ops::rms_norm;
use candle_nn::rotary_emb::rope;

use super::WeightSource;
use crate::error::{Error, Result};
use crate::model::kv_cache::KvCache;
use crate::model::qwen3_vl::attention::attention;
use crate::model::qwen3_vl::config::TextConfig;
use crate::model::qwen3_vl::rope::{MropePosition, TextRope};
use crate::model::weights::Linear;

/// Checkpoint prefix of the text decoder.
const PREFIX: &str = "model.language_model";

#[derive(Debug, Clone)]
struct RmsNorm {
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    fn new(ws: &WeightSource, name: &str, size: usize, eps: f64) -> Result<Self> {
        Ok(RmsNorm {
            weight: ws.float(&format!("{name}.weight"), &[size])?,
            eps: eps as f32,
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        Ok(rms_norm(&xs.contiguous()?, &self.weight, self.eps)?)
    }
}

#[derive(Debug, Clone)]
struct Mlp {
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
}

impl Mlp {
    fn new(cfg: &TextConfig, ws: &WeightSource, prefix: &str) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        Ok(Mlp {
            gate_proj: ws.linear(&format!("{prefix}.gate_proj"), i, h, false)?,
            up_proj: ws.linear(&format!("{prefix}.up_proj"), i, h, false)?,
            down_proj: ws.linear(&format!("{prefix}.down_proj"), h, i, false)?,
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let [gate, up]: [Tensor; 2] =
            Linear::forward_shared(&[&self.gate_proj, &self.up_proj], xs)?
                .try_into()
                .map_err(|_| Error::internal("fused gate/up returned a wrong count"))?;
        self.down_proj.forward(&(gate.silu()? * up)?)
    }
}

#[derive(Debug, Clone)]
struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    scale: f64,
}

/// What one forward pass shares across layers.
struct Step<'a> {
    cos: &'a Tensor,
    sin: &'a Tensor,
    /// `(n, cache_len + n)` additive causal mask; `None` for a single token.
    mask: Option<&'a Tensor>,
}

impl Attention {
    fn new(cfg: &TextConfig, ws: &WeightSource, prefix: &str) -> Result<Self> {
        let (h, hd) = (cfg.hidden_size, cfg.head_dim);
        let (nh, nkv) = (cfg.num_attention_heads, cfg.num_key_value_heads);
        Ok(Attention {
            q_proj: ws.linear(&format!("{prefix}.q_proj"), nh * hd, h, false)?,
            k_proj: ws.linear(&format!("{prefix}.k_proj"), nkv * hd, h, false)?,
            v_proj: ws.linear(&format!("{prefix}.v_proj"), nkv * hd, h, false)?,
            o_proj: ws.linear(&format!("{prefix}.o_proj"), h, nh * hd, false)?,
            q_norm: RmsNorm::new(ws, &format!("{prefix}.q_norm"), hd, cfg.rms_norm_eps)?,
            k_norm: RmsNorm::new(ws, &format!("{prefix}.k_norm"), hd, cfg.rms_norm_eps)?,
            n_heads: nh,
            n_kv_heads: nkv,
            head_dim: hd,
            scale: 1.0 / (hd as f64).sqrt(),
        })
    }

    /// `xs`: `(n, hidden)`. Appends this step's keys and values to `cache` layer `layer`.
    fn forward(
        &self,
        xs: &Tensor,
        step: &Step<'_>,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor> {
        let n = xs.dim(0)?;
        let hd = self.head_dim;
        // (n, heads, hd) -> per-head RMSNorm -> (1, heads, n, hd)
        let [q, k, v]: [Tensor; 3] =
            Linear::forward_shared(&[&self.q_proj, &self.k_proj, &self.v_proj], xs)?
                .try_into()
                .map_err(|_| Error::internal("fused q/k/v returned a wrong count"))?;
        let q = heads_first(&self.q_norm.forward(&q.reshape((n, self.n_heads, hd))?)?)?;
        let k = heads_first(&self.k_norm.forward(&k.reshape((n, self.n_kv_heads, hd))?)?)?;
        let v = heads_first(&v.reshape((n, self.n_kv_heads, hd))?)?;
        let q = rope(&q, step.cos, step.sin)?;
        let k = rope(&k, step.cos, step.sin)?;
        let (k_all, v_all) = cache.append(layer, &k, &v)?;

        // GQA without copying K/V: head h uses kv group h / rep, so the query heads of
        // one group are contiguous and fold into the row dimension of one matmul.
        let rep = self.n_heads / self.n_kv_heads;
        let q = q.reshape((self.n_kv_heads, rep, n, hd))?;
        let out = attention(
            &q,
            &k_all.squeeze(0)?,
            &v_all.squeeze(0)?,
            step.mask,
            self.scale,
        )?;
        let out = out
            .reshape((self.n_heads, n, hd))?
            .transpose(0, 1)?
            .reshape((n, self.n_heads * hd))?;
        self.o_proj.forward(&out)
    }
}

#[derive(Debug, Clone)]
struct DecoderLayer {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

impl DecoderLayer {
    fn new(cfg: &TextConfig, ws: &WeightSource, layer: usize) -> Result<Self> {
        let p = format!("{PREFIX}.layers.{layer}");
        Ok(DecoderLayer {
            input_layernorm: RmsNorm::new(
                ws,
                &format!("{p}.input_layernorm"),
                cfg.hidden_size,
                cfg.rms_norm_eps,
            )?,
            self_attn: Attention::new(cfg, ws, &format!("{p}.self_attn"))?,
            post_attention_layernorm: RmsNorm::new(
                ws,
                &format!("{p}.post_attention_layernorm"),
                cfg.hidden_size,
                cfg.rms_norm_eps,
            )?,
            mlp: Mlp::new(cfg, ws, &format!("{p}.mlp"))?,
        })
    }

    fn forward(
        &self,
        xs: &Tensor,
        step: &Step<'_>,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor> {
        let h = self
            .self_attn
            .forward(&self.input_layernorm.forward(xs)?, step, cache, layer)?;
        let xs = (xs + h)?;
        let h = self
            .mlp
            .forward(&self.post_attention_layernorm.forward(&xs)?)?;
        Ok((xs + h)?)
    }
}

/// DeepStack features for one forward pass: rows of the step to add to, and one
/// `(rows, hidden)` tensor per tapped layer.
pub(crate) struct DeepstackInput {
    /// Row indices (u32) of the image-pad tokens within the step.
    pub rows: Tensor,
    /// Features added after text layer `i`, for `i < features.len()`.
    pub features: Vec<Tensor>,
}

/// The text decoder.
#[derive(Debug, Clone)]
pub(crate) struct TextModel {
    embed_tokens: Linear,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    lm_head: Linear,
    rope: TextRope,
    dtype: DType,
    device: Device,
}

impl TextModel {
    pub(crate) fn new(cfg: &TextConfig, ws: &WeightSource) -> Result<Self> {
        let (embed, pages) = ws.matrix_with_pages(
            &format!("{PREFIX}.embed_tokens.weight"),
            (cfg.vocab_size, cfg.hidden_size),
        )?;
        let embed_tokens = Linear::rows_only(embed.clone(), ws.dtype());
        // Some exports of tied models still carry an lm_head copy; the config decides.
        // Only the head's matmuls repack the matrix, so the head holds its pages.
        let lm_head = if cfg.tie_word_embeddings {
            Linear::new(embed, None, ws.dtype()).with_pages(pages)
        } else {
            ws.linear("lm_head", cfg.vocab_size, cfg.hidden_size, false)?
        };
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| DecoderLayer::new(cfg, ws, i))
            .collect::<Result<Vec<_>>>()?;
        Ok(TextModel {
            embed_tokens,
            layers,
            norm: RmsNorm::new(
                ws,
                &format!("{PREFIX}.norm"),
                cfg.hidden_size,
                cfg.rms_norm_eps,
            )?,
            lm_head,
            rope: TextRope::new(cfg),
            dtype: ws.dtype(),
            device: ws.device().clone(),
        })
    }

    /// `(ids.len(), hidden)` token embeddings in the activation dtype.
    pub(crate) fn embed(&self, ids: &[u32]) -> Result<Tensor> {
        let ids = Tensor::new(ids, &self.device)?;
        self.embed_tokens.rows(&ids, self.dtype)
    }

    /// Run the decoder over `embeds` (`(n, hidden)`) at M-RoPE `positions`, appending to
    /// `cache` (the caller commits). Returns the final-norm hidden states `(n, hidden)`.
    pub(crate) fn forward(
        &self,
        embeds: &Tensor,
        positions: &[MropePosition],
        deepstack: Option<&DeepstackInput>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let n = embeds.dim(0)?;
        if positions.len() != n {
            return Err(Error::internal(format!(
                "{} positions for {n} embeddings",
                positions.len()
            )));
        }
        let (cos, sin) = self.rope.cos_sin(positions, self.dtype, &self.device)?;
        let offset = cache.len();
        let mask = if n > 1 {
            Some(causal_mask(n, offset, &self.device)?)
        } else {
            None
        };
        let step = Step {
            cos: &cos,
            sin: &sin,
            mask: mask.as_ref(),
        };
        let mut xs = embeds.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            xs = layer.forward(&xs, &step, cache, i)?;
            if let Some(ds) = deepstack {
                if let Some(features) = ds.features.get(i) {
                    // `_deepstack_process`: add the tapped vision features at the image
                    // positions after the first layers.
                    xs = xs.index_add(&ds.rows, &features.to_dtype(self.dtype)?, 0)?;
                }
            }
        }
        self.norm.forward(&xs)
    }

    /// Logits `(rows, vocab)` f32 for final-norm hidden states `(rows, hidden)`.
    pub(crate) fn logits(&self, hidden: &Tensor) -> Result<Tensor> {
        Ok(self.lm_head.forward(hidden)?.to_dtype(DType::F32)?)
    }

    /// LM-head rows for `ids`, `(ids.len(), hidden)` f32.
    pub(crate) fn lm_head_rows(&self, ids: &[u32]) -> Result<Tensor> {
        let ids = Tensor::new(ids, &self.device)?;
        self.lm_head.rows(&ids, DType::F32)
    }

    /// Whether the decoder layers' matrices are stored quantized (their products then run
    /// as int8 dots), judged by the first layer's MLP.
    pub(crate) fn quantized(&self) -> bool {
        self.layers.first().is_some_and(|l| {
            matches!(l.mlp.down_proj.weight(), QMatMul::QTensor(q)
                if !matches!(q.dtype(), GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16))
        })
    }

    pub(crate) fn n_layers(&self) -> usize {
        self.layers.len()
    }
}

/// `(n, offset + n)` f32: 0 where query `i` may see key `j` (`j <= offset + i`), -inf
/// elsewhere.
pub(crate) fn causal_mask(n: usize, offset: usize, device: &Device) -> Result<Tensor> {
    let total = offset + n;
    let mask: Vec<f32> = (0..n)
        .flat_map(|i| {
            (0..total).map(move |j| {
                if j > offset + i {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    Ok(Tensor::from_vec(mask, (n, total), device)?)
}

/// `(n, heads, hd)` to `(1, heads, n, hd)`, contiguous: the layout attention and the cache
/// take.
fn heads_first(x: &Tensor) -> Result<Tensor> {
    Ok(x.transpose(0, 1)?.unsqueeze(0)?.contiguous()?)
}
