//! The model side: what the decoder and the planner see of a vision-language model.
//!
//! [`VisionLanguageModel`] is the whole surface: encode an image, feed tokens (many at
//! once for a prompt or a forced-token run), read the logits and the last hidden state,
//! and cut the KV cache back to a prefix. The model knows nothing of grammars, agents
//! or the desktop. The Qwen3-VL implementation and a scripted test double both
//! implement it.

mod device;
mod quant;
pub mod scripted;

use candle_core::{DType, Device, Tensor};

/// When [`VisionLanguageModel::feed_beside`] calls its work.
pub use crate::cpu::beside::Moment;
use crate::error::Result;
/// The vision tower's input; it lives with the preprocessing that makes it.
pub use crate::image::PreprocessedImage;
pub use device::DeviceChoice;
pub use quant::Quantization;

/// An image turned into language-model embeddings by the vision tower.
#[derive(Debug, Clone)]
pub struct EncodedImage {
    /// `(n_tokens, hidden)` embeddings that replace the image's `<|image_pad|>` tokens.
    pub embeddings: Tensor,
    /// DeepStack features, one `(n_tokens, hidden)` tensor per tapped vision layer,
    /// added to the hidden states of the first text layers.
    pub deepstack: Vec<Tensor>,
    /// The token grid `(t, h, w)` after the spatial merge: `t * h * w == n_tokens`.
    pub token_grid: [usize; 3],
}

impl EncodedImage {
    /// Number of `<|image_pad|>` tokens this image fills.
    pub fn n_tokens(&self) -> usize {
        self.token_grid.iter().product()
    }
}

/// What the decoder and the planner need from a vision-language model.
///
/// The KV cache is part of the model's state: [`feed`](Self::feed) appends to it,
/// [`truncate`](Self::truncate) cuts it back. A prefix computed once (system prompt,
/// or system + image + view) is reused by truncating back to its length.
pub trait VisionLanguageModel: Send {
    /// Width of a logits row. May be wider than the tokenizer's vocabulary (Qwen pads
    /// it); ids past the tokenizer must never be sampled.
    fn vocab_size(&self) -> usize;

    /// Size of the hidden state returned by [`last_hidden`](Self::last_hidden).
    fn hidden_size(&self) -> usize;

    /// The device the model's tensors live on.
    fn device(&self) -> &Device;

    /// The activation type (its KV cache's type too).
    fn dtype(&self) -> DType;

    /// Number of positions currently in the KV cache.
    fn cache_len(&self) -> usize;

    /// Cut the KV cache back to its first `len` positions. Cost: O(1) per layer; no
    /// reallocation. Errors if `len > cache_len()`.
    fn truncate(&mut self, len: usize) -> Result<()>;

    /// Run the vision tower on one preprocessed image. Cost: one vision forward pass.
    /// The result is fed later through [`feed`](Self::feed).
    fn encode_image(&mut self, image: &PreprocessedImage) -> Result<EncodedImage>;

    /// Append `tokens` to the cache in one forward pass and return the logits of the
    /// last position, `(vocab_size,)` f32 on [`device`](Self::device).
    ///
    /// Each run of image-pad tokens in `tokens` is filled, in order, by one entry of
    /// `images`; a count that does not match is an error and leaves the cache as it
    /// was. Used for prompt prefill (many tokens), a decode step (one token) and a
    /// forced-token run (several tokens). Errors on an empty `tokens`.
    fn feed(&mut self, tokens: &[u32], images: &[EncodedImage]) -> Result<Tensor>;

    /// [`feed`](Self::feed) `tokens` (no images) and run `beside` with [`Moment::Start`]
    /// once: while the pass computes where the model can
    /// ([`works_beside_pass`](Self::works_beside_pass)), else after it; a CPU pass that ran
    /// it inside may call it again with [`Moment::End`] as its last product ends. Returns the
    /// logits and whether `beside` ran while the pass computed. On an error `beside` may not
    /// have run. This default launches the pass, then runs `beside`: on a device the host is
    /// free while the pass runs there.
    fn feed_beside(
        &mut self,
        tokens: &[u32],
        beside: &mut dyn FnMut(Moment),
    ) -> Result<(Tensor, bool)> {
        let logits = self.feed(tokens, &[])?;
        beside(Moment::Start);
        Ok((logits, !self.device().is_cpu()))
    }

    /// Whether work given to [`feed_beside`](Self::feed_beside) runs while the pass
    /// computes (by default: on a device, not on the CPU, whose pass is synchronous).
    fn works_beside_pass(&self) -> bool {
        !self.device().is_cpu()
    }

    /// The final-norm hidden state of the last position fed, `(hidden_size,)` f32.
    fn last_hidden(&self) -> Result<Tensor>;

    /// Rows of the language-model head for `ids`, `(ids.len(), hidden_size)` f32: the
    /// zero-shot weights of the grader head.
    fn lm_head_rows(&self, ids: &[u32]) -> Result<Tensor>;

    /// The cache's first `len` positions as data, to be restored later (another process
    /// may do it: the planner keeps its system prompt's on disk). `None` where the model
    /// cannot give its cache out; then nothing is kept.
    fn kv_prefix(&self, _len: usize) -> Result<Option<KvPrefix>> {
        Ok(None)
    }

    /// Replaces the cache with `prefix`, as if its tokens had been fed. An error when the
    /// prefix does not fit the model (layers, heads, head size, type); the cache is then
    /// empty.
    fn restore_kv_prefix(&mut self, _prefix: &mut dyn KvSource) -> Result<()> {
        Err(crate::error::Error::invalid_input(
            "this model cannot restore a KV prefix",
        ))
    }
}

/// A KV cache prefix as data ([`VisionLanguageModel::kv_prefix`]).
#[derive(Debug, Clone)]
pub struct KvPrefix {
    /// `(keys, values)` of each layer, `(1, kv_heads, len, head_dim)`.
    pub layers: Vec<(Tensor, Tensor)>,
    /// After each position, where the next text token's position starts (M-RoPE moves it
    /// past an image by more than one).
    pub next_position: Vec<u32>,
}

impl KvPrefix {
    /// Positions held.
    pub fn len(&self) -> usize {
        self.next_position.len()
    }

    /// Whether no position is held.
    pub fn is_empty(&self) -> bool {
        self.next_position.is_empty()
    }
}

/// A KV prefix to restore, given layer by layer (a file's entry is read one layer at a
/// time, so a restore never holds the whole prefix twice).
pub trait KvSource {
    /// After each position, where the next text token's position starts.
    fn next_position(&self) -> &[u32];
    /// Layers held.
    fn n_layers(&self) -> usize;
    /// `(keys, values)` of layer `i`, `(1, kv_heads, len, head_dim)`.
    fn layer(&mut self, i: usize) -> Result<(Tensor, Tensor)>;
}

impl KvSource for KvPrefix {
    fn next_position(&self) -> &[u32] {
        &self.next_position
    }

    fn n_layers(&self) -> usize {
        self.layers.len()
    }

    fn layer(&mut self, i: usize) -> Result<(Tensor, Tensor)> {
        self.layers
            .get(i)
            .cloned()
            .ok_or_else(|| crate::error::Error::internal(format!("a KV prefix has no layer {i}")))
    }
}

pub mod file_checks;
pub mod kv_cache;
pub mod qwen3_vl;
pub mod weights;
