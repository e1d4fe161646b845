//! A scripted [`VisionLanguageModel`] for tests and benches: no weights, logits
//! chosen by a script.
//!
//! Its "KV cache" is the list of tokens fed. Logits depend only on that list (never
//! on how it was split into [`feed`](VisionLanguageModel::feed) calls), so a batched
//! and an unbatched decode see the same logits. Two scripts:
//!
//! - [`Script::Steer`]: steer toward a target text. The logits favour the tokens
//!   whose bytes continue the target from what has been generated so far, longer
//!   ones more (so greedy decoding writes the target when the grammar allows it).
//! - [`Script::Random`]: seeded random logits, with a [`LogitProfile`] shaping them
//!   (uniform, peaked, or biased toward closing quotes and EOS).
//!
//! It counts forward calls and tokens fed.

use std::sync::Arc;

use candle_core::{DType, Device, Tensor};

use super::{EncodedImage, PreprocessedImage, VisionLanguageModel};
use crate::error::{Error, Result};

/// The shape of random logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitProfile {
    /// Every token gets an independent value in [0, 1).
    Uniform,
    /// Uniform, plus a few random tokens per position far above the rest.
    Peaked,
    /// Uniform, plus a boost for tokens containing `"` or `}` and for EOS: short
    /// strings, early ends.
    QuotesAndEos,
}

/// What the scripted model's logits follow.
#[derive(Debug, Clone)]
pub enum Script {
    /// Steer toward `target`: generated text starts after the first `prompt_len`
    /// cached tokens.
    Steer {
        /// The text to steer toward.
        target: Vec<u8>,
        /// Cached tokens before generation starts.
        prompt_len: usize,
    },
    /// Seeded random logits.
    Random {
        /// Seed; the logits of a position depend on it, the position and the
        /// profile only.
        seed: u64,
        /// Their shape.
        profile: LogitProfile,
    },
}

/// The scripted test double. See the module docs.
#[derive(Clone)]
pub struct ScriptedModel {
    token_bytes: Arc<Vec<Vec<u8>>>,
    eos: u32,
    script: Script,
    cache: Vec<u32>,
    device: Device,
    forward_calls: usize,
    tokens_fed: usize,
    /// Tokens that get the quote/EOS boost in [`LogitProfile::QuotesAndEos`].
    boosted: Arc<Vec<u32>>,
    /// Shared noise the random logits are windows of.
    noise: Arc<Vec<f32>>,
    /// Read at the start of every pass (see [`ScriptedModel::streaming`]).
    weights: Arc<[u64]>,
}

// Not the vocabulary, the noise or the streamed weights: megabytes each.
crate::debug_fields::debug_fields!(ScriptedModel {
    eos,
    script,
    cache,
    forward_calls,
    tokens_fed
});

/// Hidden size reported by the scripted model (its hidden state is zeros).
const SCRIPTED_HIDDEN: usize = 8;

impl ScriptedModel {
    /// A scripted model whose logits row has one entry per element of `token_bytes`
    /// (the bytes of each token id, empty for ids that have none), with `eos` the
    /// end-of-sequence id.
    pub fn new(token_bytes: Arc<Vec<Vec<u8>>>, eos: u32, script: Script) -> Result<Self> {
        if (eos as usize) >= token_bytes.len() {
            return Err(Error::invalid_input(format!(
                "eos id {eos} outside a vocabulary of {}",
                token_bytes.len()
            )));
        }
        let n = token_bytes.len();
        let boosted = token_bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| b.contains(&b'"') || b.contains(&b'}'))
            .map(|(i, _)| i as u32)
            .collect();
        Ok(ScriptedModel {
            token_bytes,
            eos,
            script,
            cache: Vec::new(),
            device: Device::Cpu,
            forward_calls: 0,
            tokens_fed: 0,
            boosted: Arc::new(boosted),
            noise: Arc::new(noise_table(n + NOISE_SLACK)),
            weights: Arc::new([]),
        })
    }

    /// Read `mib` MiB, one load per cache line, at the start of every pass, as a real
    /// model's pass streams its weights through every cache: what runs between passes
    /// (the grammar) then meets the caches a real CPU decode leaves it.
    pub fn streaming(mut self, mib: usize) -> Self {
        self.weights = (0..(mib << 17) as u64).collect();
        self
    }

    /// Replace the script (the cache is kept).
    pub fn set_script(&mut self, script: Script) {
        self.script = script;
    }

    /// Number of `feed` calls so far.
    pub fn forward_calls(&self) -> usize {
        self.forward_calls
    }

    /// Number of tokens fed so far.
    pub fn tokens_fed(&self) -> usize {
        self.tokens_fed
    }

    /// The tokens in the cache.
    pub fn cached_tokens(&self) -> &[u32] {
        &self.cache
    }

    /// Logits for the next position after the current cache, `(vocab,)`.
    pub fn logits(&self) -> Result<Tensor> {
        let row = match &self.script {
            Script::Steer { target, prompt_len } => self.steer(target, *prompt_len),
            Script::Random { seed, profile } => self.random(*seed, *profile),
        };
        let n = row.len();
        Ok(Tensor::from_vec(row, n, &self.device)?)
    }

    fn steer(&self, target: &[u8], prompt_len: usize) -> Vec<f32> {
        let generated: Vec<u8> = self
            .cache
            .iter()
            .skip(prompt_len)
            .flat_map(|&t| {
                self.token_bytes
                    .get(t as usize)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        let mut row = vec![0.0f32; self.token_bytes.len()];
        match target.strip_prefix(generated.as_slice()) {
            Some([]) => row[self.eos as usize] = 1000.0,
            Some(rest) => {
                for (id, bytes) in self.token_bytes.iter().enumerate() {
                    if !bytes.is_empty() && rest.starts_with(bytes) {
                        row[id] = 1.0 + bytes.len() as f32;
                    }
                }
            }
            // Off the target (the grammar forced something else): no preference.
            None => {}
        }
        row
    }

    fn random(&self, seed: u64, profile: LogitProfile) -> Vec<f32> {
        let position = self.cache.len() as u64;
        let mut state = splitmix(seed ^ splitmix(position));
        let n = self.token_bytes.len();
        // A window of the precomputed noise table at a seeded offset: a copy, not a
        // fill, so test builds without optimizations stay fast.
        let offset = (state % NOISE_SLACK as u64) as usize;
        let mut row = self.noise[offset..offset + n].to_vec();
        match profile {
            LogitProfile::Uniform => {}
            LogitProfile::Peaked => {
                for _ in 0..8 {
                    state = splitmix(state);
                    row[(state % n as u64) as usize] += 20.0;
                }
            }
            LogitProfile::QuotesAndEos => {
                for &id in self.boosted.iter() {
                    row[id as usize] += 0.9;
                }
                row[self.eos as usize] += 2.0;
            }
        }
        row
    }
}

/// Extra noise-table entries beyond the vocabulary: the number of distinct windows.
pub(crate) const NOISE_SLACK: usize = 1 << 16;

/// Uniform noise in [0, 1), `len` values from a fixed seed.
pub(crate) fn noise_table(len: usize) -> Vec<f32> {
    let mut state = 0x5EED_u64;
    (0..len)
        .map(|_| {
            state = splitmix(state);
            (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// SplitMix64: a fast, well-mixed step for seeded test logits (and the grammar walks'
/// noise, `decode::WarmUp`).
pub(crate) fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl VisionLanguageModel for ScriptedModel {
    fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    fn hidden_size(&self) -> usize {
        SCRIPTED_HIDDEN
    }

    fn device(&self) -> &Device {
        &self.device
    }

    fn dtype(&self) -> DType {
        DType::F32
    }

    fn cache_len(&self) -> usize {
        self.cache.len()
    }

    fn truncate(&mut self, len: usize) -> Result<()> {
        if len > self.cache.len() {
            return Err(Error::invalid_input(format!(
                "cannot truncate a cache of {} positions to {len}",
                self.cache.len()
            )));
        }
        self.cache.truncate(len);
        Ok(())
    }

    fn encode_image(&mut self, _image: &PreprocessedImage) -> Result<EncodedImage> {
        Err(Error::invalid_input(
            "the scripted model has no vision tower",
        ))
    }

    fn feed(&mut self, tokens: &[u32], images: &[EncodedImage]) -> Result<Tensor> {
        if tokens.is_empty() {
            return Err(Error::invalid_input("feed needs at least one token"));
        }
        if !images.is_empty() {
            return Err(Error::invalid_input(
                "the scripted model has no vision tower",
            ));
        }
        if let Some(bad) = tokens
            .iter()
            .find(|&&t| t as usize >= self.token_bytes.len())
        {
            return Err(Error::invalid_input(format!(
                "token {bad} outside the vocabulary"
            )));
        }
        let lines = self.weights.chunks(8).map(|line| line[0]);
        std::hint::black_box(lines.fold(0, u64::wrapping_add));
        self.forward_calls += 1;
        self.tokens_fed += tokens.len();
        self.cache.extend_from_slice(tokens);
        self.logits()
    }

    fn last_hidden(&self) -> Result<Tensor> {
        Ok(Tensor::zeros(
            SCRIPTED_HIDDEN,
            candle_core::DType::F32,
            &self.device,
        )?)
    }

    fn lm_head_rows(&self, ids: &[u32]) -> Result<Tensor> {
        Ok(Tensor::zeros(
            (ids.len(), SCRIPTED_HIDDEN),
            candle_core::DType::F32,
            &self.device,
        )?)
    }
}
