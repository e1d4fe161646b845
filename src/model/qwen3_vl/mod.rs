//! Qwen3-VL in candle: vision tower, DeepStack, text decoder with interleaved M-RoPE.
//!
//! Our own implementation (see ARCHITECTURE.md, decision 1); the reference for every number
//! is Hugging Face transformers' `modeling_qwen3_vl.py`, checked by the golden tests in
//! `tests/all/model_golden.rs`.
//!
//! # Example
//!
//! ```no_run
//! use sightline::{LoadOptions, ModelSource, Qwen3Vl, VisionLanguageModel};
//! use candle_core::quantized::GgmlDType;
//!
//! # fn main() -> sightline::Result<()> {
//! let mut opts = LoadOptions::new(ModelSource::Safetensors { dir: "Qwen3-VL-2B-Instruct".into() });
//! opts.quantize = Some(GgmlDType::Q8_0);
//! let mut model = Qwen3Vl::load(&opts)?;
//! let prefix = [151644, 872, 198]; // the user turn's opening
//! model.feed(&prefix, &[])?; // computed once
//! let logits = model.feed(&[9707, 151645], &[])?; // (vocab,) for the last token
//! model.truncate(prefix.len())?; // back to the cached prefix for the next turn
//! # let _ = logits;
//! # Ok(())
//! # }
//! ```
//!
//! # Design
//!
//! - **One code path for every checkpoint.** [`Qwen3Vl::load`] opens a
//!   [`WeightSource`] (safetensors directory, the
//!   same quantized at load, or a llama.cpp GGUF pair); the blocks ask it for weights by
//!   checkpoint name and every matrix becomes a candle `QMatMul`.
//! - **State lives in the model.** The KV cache and the M-RoPE position bookkeeping are
//!   part of [`Qwen3Vl`]: [`feed`](VisionLanguageModel::feed) appends,
//!   [`truncate`](VisionLanguageModel::truncate) cuts back to a prefix, and the next
//!   token gets the position the reference's `get_rope_index` would give it (text after
//!   an image continues from the image's largest coordinate + 1).
//! - **Positions** ([`mrope_positions`]): text tokens get `(p, p, p)`; an image of
//!   `t × h × w` merged tokens starting at `p` gets `(p + ti, p + hi, p + wi)` and the
//!   text after it starts at `p + max(h, w)`.
//! - **DeepStack**: the vision tower returns one feature tensor per tapped layer; the
//!   decoder adds feature `i` to the image-token rows after text layer `i`.
//!
//! # Performance notes
//!
//! - A step computes logits for its last position only
//!   ([`Qwen3Vl::forward_all_logits`] is the exception, for tests and logit dumps).
//! - The KV cache starts at 256 positions, doubles when full and is written in place
//!   (`slice_set`); attention reads a view of it, so a decode step does not copy the
//!   cache.
//! - GQA folds the query heads of a KV group into the rows of one matmul instead of
//!   repeating K and V; the causal mask exists only for multi-token steps.
//! - Attention runs in query chunks whose f32 scores stay under 64 MiB, so a long
//!   prefill or a 5,000-patch screenshot does not allocate gigabytes of scores.
//! - In a decode step the q/k/v and gate/up projections of quantized weights go through
//!   candle's fused gemv (`QTensor::gemv_fused_shared_lhs`: one activation quantization,
//!   one parallel region) where the CPU has the kernel (AVX512-VNNI, NEON), and through
//!   separate quantized matmuls elsewhere.
//! - Quantized weights take f32 input (the CPU kernels require it); with bf16/f16
//!   activations the cast happens at each quantized matmul. Softmax runs in f32.
//!
//! Per-token allocations left: the rotary table of the step (`head_dim / 2` values per
//! token), the activations of each layer, and the logits row.

mod attention;
mod attention_inputs;
mod checkpoint;
pub mod config;
mod flash_cpu;
mod gelu;
pub mod names;
pub mod rope;
mod text;
mod vision;

use candle_core::{DType, Device, Tensor};
use tokenizers::Tokenizer;

use crate::error::{Error, Result};
use crate::model::kv_cache::KvCache;
use crate::model::weights::LoadOptions;
use crate::model::{
    EncodedImage, KvPrefix, KvSource, Moment, PreprocessedImage, VisionLanguageModel,
};
use crate::tokenizer::SpecialTokens;

pub use checkpoint::{ModelInfo, WeightSource};
pub use config::{Qwen3VlConfig, TextConfig, VisionConfig};
pub use rope::MropePosition;

use text::{DeepstackInput, TextModel};
use vision::VisionModel;

/// Tokens from which a feed is a prefill whose activations come from the heap
/// ([`crate::cpu::LargeBlocksFromHeap`]): at 256 tokens the 2B model's MLP activations are
/// 6 MB, 13 MB at a whole chunk ([`PREFILL_CHUNK_TOKENS`]); the scope's end hands the
/// freed pages back.
const PREFILL_HEAP_FROM_TOKENS: usize = 256;

/// Most tokens of a feed that go through the decoder at once (llama.cpp's default
/// micro-batch). A layer's activations grow with the tokens in flight: the 2B model's
/// MLP alone holds three `(n, 6,144)` f32 tensors, 65 MB each at a turn's 2,666 tokens,
/// so a whole turn went through the layers with about 300 MB of activations on top of
/// its KV cache. In chunks of 512 that is a fifth; the matrices are read once per chunk
/// (five times for such a turn), which measured level with one pass (ARCHITECTURE.md,
/// decision 30).
pub const PREFILL_CHUNK_TOKENS: usize = 512;

/// A loaded Qwen3-VL model with its KV cache.
pub struct Qwen3Vl {
    cfg: Qwen3VlConfig,
    text: TextModel,
    vision: VisionModel,
    cache: KvCache,
    /// `next_position[i]`: one past the largest M-RoPE coordinate of tokens `0..=i`,
    /// i.e. the position the next text token takes after a truncate to `i + 1`.
    next_position: Vec<u32>,
    last_hidden: Option<Tensor>,
    /// Most tokens through the decoder at once ([`PREFILL_CHUNK_TOKENS`]).
    prefill_chunk: usize,
    device: Device,
    dtype: DType,
    source: String,
    /// On the CPU, whether the passes' products took the work offered to them
    /// (`cpu::beside`); `None` until a pass was offered some.
    takes_work_beside: Option<bool>,
}

impl std::fmt::Debug for Qwen3Vl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qwen3Vl")
            .field("source", &self.source)
            .field("dtype", &self.dtype)
            .field("cache_len", &self.cache.len())
            .finish()
    }
}

/// How an M-RoPE position list was split: where the image tokens are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MropeLayout {
    /// One `(t, h, w)` position per token.
    pub positions: Vec<MropePosition>,
    /// One past the largest coordinate after each token.
    pub next_position: Vec<u32>,
    /// `(start, len)` of each image run within the tokens, in order.
    pub image_runs: Vec<(usize, usize)>,
}

/// M-RoPE positions of `tokens` starting at text position `start`, as the reference's
/// `get_rope_index` computes them. Each maximal run of `image_token_id` is one image,
/// matched in order with `token_grids` (the merged `(t, h, w)` grids); a run whose
/// length differs from its grid's token count, or a count of runs that differs from
/// the number of grids, is an error.
pub fn mrope_positions(
    tokens: &[u32],
    token_grids: &[[usize; 3]],
    image_token_id: u32,
    start: u32,
) -> Result<MropeLayout> {
    let mut positions = Vec::with_capacity(tokens.len());
    let mut next_position = Vec::with_capacity(tokens.len());
    let mut image_runs = Vec::new();
    let mut grids = token_grids.iter();
    let mut current = start as u64;
    let mut running_next = start as u64;
    let mut i = 0;
    let to_u32 = |x: u64| {
        u32::try_from(x).map_err(|_| Error::invalid_input(format!("M-RoPE position {x} overflows")))
    };
    while i < tokens.len() {
        if tokens[i] != image_token_id {
            positions.push([to_u32(current)?; 3]);
            current += 1;
            running_next = running_next.max(current);
            next_position.push(to_u32(running_next)?);
            i += 1;
            continue;
        }
        let run = tokens[i..]
            .iter()
            .take_while(|&&t| t == image_token_id)
            .count();
        let grid = grids.next().ok_or_else(|| {
            Error::invalid_input(format!(
                "image-pad run {} at token {i} has no image ({} images given)",
                image_runs.len() + 1,
                token_grids.len()
            ))
        })?;
        let [gt, gh, gw] = *grid;
        if grid_tokens(grid) != Some(run) {
            return Err(Error::invalid_input(format!(
                "image-pad run at token {i} has {run} tokens, its image grid is {gt}×{gh}×{gw}"
            )));
        }
        for ti in 0..gt as u64 {
            for hi in 0..gh as u64 {
                for wi in 0..gw as u64 {
                    positions.push([
                        to_u32(current + ti)?,
                        to_u32(current + hi)?,
                        to_u32(current + wi)?,
                    ]);
                    running_next = running_next.max(current + ti.max(hi).max(wi) + 1);
                    next_position.push(to_u32(running_next)?);
                }
            }
        }
        image_runs.push((i, run));
        current += gh.max(gw) as u64;
        running_next = running_next.max(current);
        i += run;
    }
    if image_runs.len() != token_grids.len() {
        return Err(Error::invalid_input(format!(
            "{} images given but the tokens hold {} image-pad runs",
            token_grids.len(),
            image_runs.len()
        )));
    }
    Ok(MropeLayout {
        positions,
        next_position,
        image_runs,
    })
}

/// Tokens of a merged `(t, h, w)` grid, `None` on overflow (grids can come from callers).
fn grid_tokens(grid: &[usize; 3]) -> Option<usize> {
    grid[0].checked_mul(grid[1])?.checked_mul(grid[2])
}

impl Qwen3Vl {
    /// Load a model as `opts` says (safetensors directory, optionally quantized at
    /// load, or a GGUF pair). Errors name the file, key or tensor that is wrong.
    pub fn load(opts: &LoadOptions) -> Result<Self> {
        let started = std::time::Instant::now();
        let ws = WeightSource::open(opts)?;
        let model = Self::from_weights(&ws)?;
        ws.release_pages();
        tracing::info!(
            source = %ws.describe(),
            quantize = ?opts.quantize,
            dtype = ?ws.dtype(),
            load_ms = started.elapsed().as_millis() as u64,
            "loaded Qwen3-VL"
        );
        Ok(model)
    }

    /// Build the model from an opened weight source.
    pub fn from_weights(ws: &WeightSource) -> Result<Self> {
        let cfg = ws.config().clone();
        let text = TextModel::new(&cfg.text, ws)?;
        let vision = VisionModel::new(&cfg.vision, ws)?;
        Ok(Qwen3Vl {
            cache: KvCache::new(text.n_layers()),
            cfg,
            text,
            vision,
            next_position: Vec::new(),
            last_hidden: None,
            prefill_chunk: PREFILL_CHUNK_TOKENS,
            device: ws.device().clone(),
            dtype: ws.dtype(),
            source: ws.describe(),
            takes_work_beside: None,
        })
    }

    /// Feed at most `tokens` tokens (at least 1) through the decoder at once: less memory
    /// for a long prompt's activations, a little more time for reading the matrices once
    /// per chunk. The default is [`PREFILL_CHUNK_TOKENS`]; the logits do not depend on it
    /// beyond the order of sums.
    pub fn set_prefill_chunk(&mut self, tokens: usize) {
        self.prefill_chunk = tokens.max(1);
    }

    /// The validated configuration.
    pub fn config(&self) -> &Qwen3VlConfig {
        &self.cfg
    }

    /// Whether the text decoder's matrices are stored quantized (Q8_0, K-quants, …), so
    /// that its products run as int8 dot products rather than float multiply-adds.
    pub fn text_quantized(&self) -> bool {
        self.text.quantized()
    }

    /// The files the model was loaded from, in one line.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Capacity of the KV cache in positions (grows on demand).
    pub fn cache_capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// Empty the KV cache and free its buffers (a [`truncate`](VisionLanguageModel::truncate)
    /// to 0 keeps them for reuse).
    pub fn free_cache(&mut self) {
        self.cache.clear();
        self.next_position.clear();
        self.last_hidden = None;
    }

    /// The M-RoPE position the next text token fed would get.
    pub fn next_text_position(&self) -> u32 {
        self.next_position.last().copied().unwrap_or(0)
    }

    /// Check that `tokenizer` belongs to this model: its special-token ids match the
    /// config and its vocabulary fits in the logits row.
    pub fn check_tokenizer(&self, tokenizer: &Tokenizer) -> Result<()> {
        check_tokenizer(&self.cfg, tokenizer)
    }

    /// Like [`feed`](VisionLanguageModel::feed) but returns the logits of every position
    /// fed, `(tokens.len(), vocab_size)` f32. For golden tests and `--dump-logits`.
    pub fn forward_all_logits(
        &mut self,
        tokens: &[u32],
        images: &[EncodedImage],
    ) -> Result<Tensor> {
        let hidden = self.forward_hidden(tokens, images)?;
        self.text.logits(&hidden)
    }

    /// Run `tokens` through the decoder, commit them to the cache and return the
    /// final-norm hidden states `(n, hidden)`. On error the cache is unchanged.
    fn forward_hidden(&mut self, tokens: &[u32], images: &[EncodedImage]) -> Result<Tensor> {
        if tokens.is_empty() {
            return Err(Error::invalid_input("feed: no tokens"));
        }
        let vocab = self.cfg.text.vocab_size;
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::invalid_input(format!(
                "token id {bad} is outside the vocabulary ({vocab})"
            )));
        }
        let hidden_size = self.cfg.text.hidden_size;
        let n_deepstack = self.cfg.vision.deepstack_visual_indexes.len();
        for (i, img) in images.iter().enumerate() {
            let n = grid_tokens(&img.token_grid).ok_or_else(|| {
                Error::invalid_input(format!(
                    "image {i}: token grid {:?} overflows",
                    img.token_grid
                ))
            })?;
            if img.embeddings.dims() != [n, hidden_size] {
                return Err(Error::invalid_input(format!(
                    "image {i}: embeddings {:?}, expected [{n}, {hidden_size}]",
                    img.embeddings.dims()
                )));
            }
            if img.deepstack.len() != n_deepstack
                || img.deepstack.iter().any(|d| d.dims() != [n, hidden_size])
            {
                return Err(Error::invalid_input(format!(
                    "image {i}: {} DeepStack features, expected {n_deepstack} of [{n}, {hidden_size}]",
                    img.deepstack.len()
                )));
            }
        }
        let grids: Vec<[usize; 3]> = images.iter().map(|img| img.token_grid).collect();
        let layout = mrope_positions(
            tokens,
            &grids,
            self.cfg.image_token_id,
            self.next_text_position(),
        )?;

        // Embeddings: text runs from the table, image runs from the vision tower.
        let mut pieces = Vec::with_capacity(2 * layout.image_runs.len() + 1);
        let mut at = 0;
        for (img, &(start, len)) in images.iter().zip(&layout.image_runs) {
            if start > at {
                pieces.push(self.text.embed(&tokens[at..start])?);
            }
            pieces.push(
                img.embeddings
                    .to_device(&self.device)?
                    .to_dtype(self.dtype)?,
            );
            at = start + len;
        }
        if at < tokens.len() {
            pieces.push(self.text.embed(&tokens[at..])?);
        }
        let embeds = if pieces.len() == 1 {
            pieces.remove(0)
        } else {
            Tensor::cat(&pieces, 0)?
        };

        // The image-pad rows the DeepStack features are added to, ascending.
        let rows: Vec<u32> = layout
            .image_runs
            .iter()
            .flat_map(|&(s, l)| (s as u32)..(s + l) as u32)
            .collect();
        let features = if images.is_empty() || n_deepstack == 0 {
            Vec::new()
        } else {
            (0..n_deepstack)
                .map(|layer| {
                    let per_image: Vec<Tensor> = images
                        .iter()
                        .map(|img| img.deepstack[layer].to_device(&self.device))
                        .collect::<candle_core::Result<_>>()?;
                    Ok(Tensor::cat(&per_image, 0)?)
                })
                .collect::<Result<Vec<_>>>()?
        };

        // A long run goes through the decoder in chunks, each appending to the cache the
        // next reads: a layer's activations are then a chunk's, not the whole run's.
        let start_len = self.cache.len();
        self.cache.expect(start_len + tokens.len());
        let chunk = self.prefill_chunk;
        let mut outs = Vec::with_capacity(tokens.len().div_ceil(chunk));
        let fed = (0..tokens.len())
            .step_by(chunk)
            .try_for_each(|at| -> Result<()> {
                let end = (at + chunk).min(tokens.len());
                outs.push(self.forward_chunk(
                    &embeds,
                    &layout.positions,
                    &rows,
                    &features,
                    at..end,
                )?);
                self.cache.commit(end - at);
                Ok(())
            })
            .and_then(|()| Ok(Tensor::cat(&outs, 0)?));
        self.cache.expect(0);
        let hidden = match fed {
            Ok(hidden) => hidden,
            Err(e) => {
                // On error the cache is as it was before the call.
                self.cache.truncate(start_len)?;
                return Err(e);
            }
        };
        self.next_position.extend_from_slice(&layout.next_position);
        let last = hidden.get(tokens.len() - 1)?;
        self.last_hidden = Some(last.to_dtype(DType::F32)?);
        Ok(hidden)
    }

    /// Tokens `range` of a feed through the decoder, appended to the cache after what it
    /// holds (the caller commits): `embeds` and `positions` are the whole feed's, `rows`
    /// its image-pad rows (ascending) and `features` their DeepStack features.
    fn forward_chunk(
        &mut self,
        embeds: &Tensor,
        positions: &[MropePosition],
        rows: &[u32],
        features: &[Tensor],
        range: std::ops::Range<usize>,
    ) -> Result<Tensor> {
        let at = range.start;
        // One chunk of the whole feed: candle's narrow is then a clone, and so is its cat.
        let embeds = embeds.narrow(0, at, range.len())?;
        let first = rows.partition_point(|&r| (r as usize) < at);
        let last = rows.partition_point(|&r| (r as usize) < range.end);
        let deepstack = if features.is_empty() || first == last {
            None
        } else {
            let local: Vec<u32> = rows[first..last].iter().map(|&r| r - at as u32).collect();
            Some(DeepstackInput {
                rows: Tensor::new(local.as_slice(), &self.device)?,
                features: features
                    .iter()
                    .map(|f| f.narrow(0, first, last - first))
                    .collect::<candle_core::Result<_>>()?,
            })
        };
        self.text.forward(
            &embeds,
            &positions[range],
            deepstack.as_ref(),
            &mut self.cache,
        )
    }
}

/// Check that `tokenizer`'s special tokens carry the ids `cfg` expects and that its
/// vocabulary fits in the logits row; a mismatch is an [`Error::Tokenizer`].
pub fn check_tokenizer(cfg: &Qwen3VlConfig, tokenizer: &Tokenizer) -> Result<()> {
    let special = SpecialTokens::from_tokenizer(tokenizer)?;
    for (name, found, expected) in [
        ("<|image_pad|>", special.image_pad, cfg.image_token_id),
        (
            "<|vision_start|>",
            special.vision_start,
            cfg.vision_start_token_id,
        ),
        (
            "<|vision_end|>",
            special.vision_end,
            cfg.vision_end_token_id,
        ),
    ] {
        if found != expected {
            return Err(Error::tokenizer(format!(
                "{name} is id {found} in the tokenizer but {expected} in the model config: \
                 the tokenizer belongs to another model"
            )));
        }
    }
    let size = tokenizer.get_vocab_size(true);
    if size > cfg.text.vocab_size {
        return Err(Error::tokenizer(format!(
            "the tokenizer has {size} tokens but the model's logits row has only {}",
            cfg.text.vocab_size
        )));
    }
    Ok(())
}

impl VisionLanguageModel for Qwen3Vl {
    fn vocab_size(&self) -> usize {
        self.cfg.text.vocab_size
    }

    fn hidden_size(&self) -> usize {
        self.cfg.text.hidden_size
    }

    fn device(&self) -> &Device {
        &self.device
    }

    fn dtype(&self) -> DType {
        self.dtype
    }

    fn cache_len(&self) -> usize {
        self.cache.len()
    }

    fn truncate(&mut self, len: usize) -> Result<()> {
        self.cache.truncate(len)?;
        self.next_position.truncate(len);
        if len == 0 {
            self.last_hidden = None;
        }
        Ok(())
    }

    fn encode_image(&mut self, image: &PreprocessedImage) -> Result<EncodedImage> {
        let _heap = crate::cpu::LargeBlocksFromHeap::new();
        self.vision.forward(image)
    }

    fn feed(&mut self, tokens: &[u32], images: &[EncodedImage]) -> Result<Tensor> {
        // A prefill's activations are large enough to be mapped afresh per layer; a
        // decode step's are not.
        let _heap =
            (tokens.len() >= PREFILL_HEAP_FROM_TOKENS).then(crate::cpu::LargeBlocksFromHeap::new);
        let hidden = self.forward_hidden(tokens, images)?;
        let last = hidden.narrow(0, tokens.len() - 1, 1)?;
        // The head is the pass's last product: work offered to the pass ends there
        // (`cpu::beside::Moment::End`).
        let logits = crate::cpu::beside::last_product(|| self.text.logits(&last))?;
        Ok(logits.squeeze(0)?)
    }

    fn feed_beside(
        &mut self,
        tokens: &[u32],
        beside: &mut dyn FnMut(Moment),
    ) -> Result<(Tensor, bool)> {
        if !self.device.is_cpu() {
            let logits = self.feed(tokens, &[])?;
            beside(Moment::Start);
            return Ok((logits, true));
        }
        // The calling thread runs `beside` inside the pass's first large product, the
        // pool's other threads taking its rows (see `cpu::beside`).
        let (logits, ran) = crate::cpu::beside::during(beside, || self.feed(tokens, &[]));
        let logits = logits?;
        // A single token's pass is a matrix-vector product on every route that can take
        // the work; a longer forced run may go to one that cannot (the f32 route's
        // matrix-vector kernel takes a few rows at most) without saying anything of the
        // next step's.
        if ran || tokens.len() == 1 {
            self.takes_work_beside = Some(ran);
        }
        if !ran {
            beside(Moment::Start);
        }
        Ok((logits, ran))
    }

    fn works_beside_pass(&self) -> bool {
        !self.device.is_cpu()
            || (candle_core::utils::barrier_pool().n_workers() > 0
                && self.takes_work_beside != Some(false))
    }

    fn last_hidden(&self) -> Result<Tensor> {
        self.last_hidden
            .clone()
            .ok_or_else(|| Error::invalid_input("last_hidden: nothing has been fed yet"))
    }

    fn lm_head_rows(&self, ids: &[u32]) -> Result<Tensor> {
        let vocab = self.cfg.text.vocab_size;
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::invalid_input(format!(
                "lm_head_rows: id {bad} is outside the vocabulary ({vocab})"
            )));
        }
        self.text.lm_head_rows(ids)
    }

    fn kv_prefix(&self, len: usize) -> Result<Option<KvPrefix>> {
        Ok(Some(KvPrefix {
            layers: self.cache.prefix(len)?,
            next_position: self.next_position[..len].to_vec(),
        }))
    }

    fn restore_kv_prefix(&mut self, prefix: &mut dyn KvSource) -> Result<()> {
        self.free_cache();
        // One past the largest position after each token: at least 1, never falling, and
        // never past a token count (an image's run advances it by less than its length).
        let np = prefix.next_position().to_vec();
        let sane = np
            .iter()
            .enumerate()
            .all(|(i, &p)| p >= 1 && p as usize <= i + 1 && (i == 0 || np[i - 1] <= p));
        if !sane || np.is_empty() {
            return Err(Error::invalid_input(
                "a KV prefix whose positions no prompt can have",
            ));
        }
        let t = &self.cfg.text;
        let want = (1, t.num_key_value_heads, np.len(), t.head_dim);
        let (dtype, device) = (self.dtype, self.device.clone());
        let restored = self.cache.restore(prefix.n_layers(), |i| {
            let (k, v) = prefix.layer(i)?;
            for x in [&k, &v] {
                if x.dims4()? != want || x.dtype() != dtype {
                    return Err(Error::invalid_input(format!(
                        "a KV prefix of {:?} {:?} for a model whose cache is {want:?} {dtype:?}",
                        x.dims(),
                        x.dtype()
                    )));
                }
            }
            Ok((k.to_device(&device)?, v.to_device(&device)?))
        });
        if let Err(e) = restored {
            self.free_cache();
            return Err(e);
        }
        self.next_position = np;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_continue_after_each_image_from_its_largest_side() -> Result<()> {
        const PAD: u32 = 7;
        let tokens = [1, PAD, PAD, PAD, PAD, 2, PAD, PAD, PAD, PAD, PAD, PAD, 3];
        let layout = mrope_positions(&tokens, &[[1, 2, 2], [1, 2, 3]], PAD, 10)?;
        assert_eq!(layout.positions[0], [10, 10, 10]);
        assert_eq!(
            &layout.positions[1..5],
            &[[11, 11, 11], [11, 11, 12], [11, 12, 11], [11, 12, 12]]
        );
        assert_eq!(layout.positions[5], [13, 13, 13]);
        assert_eq!(layout.positions[6], [14, 14, 14]);
        assert_eq!(layout.positions[11], [14, 15, 16]);
        assert_eq!(layout.positions[12], [17, 17, 17]);
        assert_eq!(layout.next_position.last(), Some(&18));
        assert_eq!(layout.image_runs, vec![(1, 4), (6, 6)]);
        assert!(mrope_positions(&tokens, &[[1, 2, 2]], PAD, 0).is_err());
        assert!(mrope_positions(&tokens, &[[1, 2, 2], [1, 2, 2]], PAD, 0).is_err());
        Ok(())
    }
}
