//! Free generation: a Qwen3-VL chat prompt (text, optionally one image) continued token by
//! token with no grammar, for benchmarking and for comparing Sightline's numbers with
//! another implementation of the same model (`sightline generate`).
//!
//! The prompt is Qwen3-VL's chat template with one user turn and the assistant turn opened,
//! exactly as transformers' `apply_chat_template(..., add_generation_prompt=True)` renders a
//! user message holding an image and then the text (no system turn: Qwen3-VL's template adds
//! none), written by [`crate::chat`]: the user turn's opening, the image run of `N` pads
//! between its vision markers, the text, the turn's end and the assistant's opening.
//!
//! `N` is the image's visual-token count; without an image the vision run is absent. The
//! whole text is tokenized in one call, as transformers' processor does, so special-token
//! text inside the prompt is read as the special token there too.
//!
//! Generation samples with [`Sampler`] among the ids the tokenizer knows (the logits row is
//! wider than the vocabulary; the padding ids are never chosen) and stops after
//! `<|im_end|>` or `<|endoftext|>` or after [`GenerateOptions::max_tokens`] tokens.
//!
//! # Logits rows
//!
//! With [`GenerateOptions::keep_logits`], [`Generation::logits`] holds `1 + n` rows for `n`
//! generated tokens `g_1 … g_n`: row 0 is the logits at the prompt's last position (from
//! which `g_1` was chosen); row `i` (1 ≤ i ≤ n) is the logits after `g_i` was fed, at the
//! position of `g_i` (from which `g_{i+1}` was chosen, for i < n). The last generated token
//! (the stop token too) is fed to produce the last row; without `keep_logits` it is not fed.
//! Feeding the prompt followed by `g_1 … g_n` to any implementation in one pass gives the
//! same rows at positions `prompt_len - 1 … prompt_len + n - 1`.

use std::path::Path;
use std::time::{Duration, Instant};

use tokenizers::Tokenizer;
use toktrie::SimpleVob;

use crate::chat::{self, Role};
use crate::decode::{Sampler, Sampling};
use crate::error::{Error, Result};
use crate::image::{preprocess_bytes, PreprocessConfig};
use crate::model::{EncodedImage, VisionLanguageModel};
use crate::tokenizer::SpecialTokens;

/// Tokens generated when the caller does not say.
pub const DEFAULT_MAX_TOKENS: usize = 128;

/// How to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateOptions {
    /// Token choice; greedy by default.
    pub sampling: Sampling,
    /// Most tokens generated, the stop token included. Default [`DEFAULT_MAX_TOKENS`].
    pub max_tokens: usize,
    /// Keep every logits row (see the module docs); costs one more forward pass (the last
    /// token is fed) and `vocab × 4` bytes per row.
    pub keep_logits: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            sampling: Sampling::Greedy,
            max_tokens: DEFAULT_MAX_TOKENS,
            keep_logits: false,
        }
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model chose this end token (`<|im_end|>` or `<|endoftext|>`); it is the last of
    /// [`Generation::tokens`].
    EndToken(u32),
    /// [`GenerateOptions::max_tokens`] tokens were generated.
    MaxTokens,
}

/// Where the time of one generation went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationTimings {
    /// Image decode, resize and patchify (zero without an image).
    pub preprocess: Duration,
    /// The vision tower (zero without an image).
    pub image_encode: Duration,
    /// The prompt's forward pass, reading its last logits row back included.
    pub prefill: Duration,
    /// The decode steps' forward passes, reading their logits back included.
    pub decode: Duration,
    /// Decode steps run (one token each).
    pub decode_steps: usize,
    /// Choosing tokens from the logits.
    pub sampling: Duration,
}

impl GenerationTimings {
    /// Prompt tokens per second of prefill.
    pub fn prefill_tokens_per_s(&self, prompt_tokens: usize) -> f64 {
        per_second(prompt_tokens, self.prefill)
    }

    /// Decode steps per second (one token per step).
    pub fn decode_tokens_per_s(&self) -> f64 {
        per_second(self.decode_steps, self.decode)
    }
}

fn per_second(n: usize, d: Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        n as f64 / d.as_secs_f64()
    }
}

/// One generation's result.
#[derive(Debug, Clone)]
pub struct Generation {
    /// The prompt's token ids, image pads expanded.
    pub prompt_tokens: Vec<u32>,
    /// Visual tokens of the image (0 without one).
    pub image_tokens: usize,
    /// Generated ids in order, the stop token included when there is one.
    pub tokens: Vec<u32>,
    /// The generated text, the stop token left out (other special tokens are kept).
    pub text: String,
    /// Why it stopped.
    pub stop: StopReason,
    /// With [`GenerateOptions::keep_logits`]: `1 + tokens.len()` rows of the logits width
    /// (see the module docs); empty otherwise.
    pub logits: Vec<Vec<f32>>,
    /// Timings.
    pub timings: GenerationTimings,
}

/// A chat prompt to continue.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// The user's text.
    pub prompt: &'a str,
    /// PNG or JPEG bytes of an image shown before the text, if any.
    pub image: Option<&'a [u8]>,
}

/// Renders chat prompts and runs the generation loop for one model's tokenizer.
#[derive(Debug, Clone)]
pub struct ChatGenerator {
    tokenizer: Tokenizer,
    special: SpecialTokens,
    preprocess: PreprocessConfig,
    /// Ids the tokenizer knows, within the logits width.
    allowed: SimpleVob,
    logits_width: usize,
}

impl ChatGenerator {
    /// A generator for a model whose logits rows are `logits_width` wide. `tokenizer` must
    /// carry the Qwen3-VL special tokens; `preprocess` is applied to images.
    pub fn new(
        tokenizer: Tokenizer,
        preprocess: PreprocessConfig,
        logits_width: usize,
    ) -> Result<Self> {
        let special = SpecialTokens::from_tokenizer(&tokenizer)?;
        preprocess.validate()?;
        // Exactly the ids the tokenizer has (a vocabulary may have holes), within the row.
        let mut allowed = SimpleVob::alloc(logits_width);
        for id in tokenizer.get_vocab(true).into_values() {
            if (id as usize) < logits_width {
                allowed.allow_token(id);
            }
        }
        for id in [special.im_end, special.end_of_text] {
            if id as usize >= logits_width {
                return Err(Error::tokenizer(format!(
                    "end token id {id} is outside the model's logits row ({logits_width})"
                )));
            }
            allowed.allow_token(id);
        }
        Ok(ChatGenerator {
            tokenizer,
            special,
            preprocess,
            allowed,
            logits_width,
        })
    }

    /// The special-token ids.
    pub fn special(&self) -> &SpecialTokens {
        &self.special
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The image preprocessing.
    pub fn preprocess(&self) -> &PreprocessConfig {
        &self.preprocess
    }

    /// The chat prompt's text (see the module docs), `image_tokens` pads when given.
    pub fn prompt_text(prompt: &str, image_tokens: Option<usize>) -> String {
        let vision = image_tokens.map(chat::image_text).unwrap_or_default();
        format!(
            "{}{vision}{prompt}{}",
            chat::open(Role::User),
            chat::answer()
        )
    }

    /// The chat prompt's token ids.
    pub fn prompt_ids(&self, prompt: &str, image_tokens: Option<usize>) -> Result<Vec<u32>> {
        let text = Self::prompt_text(prompt, image_tokens);
        crate::tokenizer::encode_ids(&self.tokenizer, &text, "the prompt")
    }

    /// Render `request`, encode its image and generate. The model's KV cache is emptied
    /// first and holds the prompt and the fed tokens afterwards.
    ///
    /// Errors: [`Error::Image`] for an unreadable image, [`Error::Tokenizer`], model errors
    /// as they come.
    pub fn generate(
        &self,
        model: &mut dyn VisionLanguageModel,
        request: &ChatRequest<'_>,
        options: &GenerateOptions,
    ) -> Result<Generation> {
        self.generate_streaming(model, request, options, &mut |_| {})
    }

    /// [`generate`](Self::generate), calling `on_token` with each generated id as soon as
    /// it is chosen (the stop token too), before it is fed. [`TextStream`] turns the ids
    /// into text as they come.
    pub fn generate_streaming(
        &self,
        model: &mut dyn VisionLanguageModel,
        request: &ChatRequest<'_>,
        options: &GenerateOptions,
        on_token: &mut dyn FnMut(u32),
    ) -> Result<Generation> {
        let mut timings = GenerationTimings::default();
        let mut images = Vec::new();
        if let Some(bytes) = request.image {
            let t = Instant::now();
            let pixels = preprocess_bytes(bytes, &self.preprocess)?;
            timings.preprocess = t.elapsed();
            let t = Instant::now();
            images.push(model.encode_image(&pixels)?);
            timings.image_encode = t.elapsed();
        }
        let image_tokens = images.first().map(EncodedImage::n_tokens);
        let prompt = self.prompt_ids(request.prompt, image_tokens)?;
        let mut generation =
            self.generate_from_ids_streaming(model, &prompt, &images, options, on_token)?;
        generation.timings.preprocess = timings.preprocess;
        generation.timings.image_encode = timings.image_encode;
        Ok(generation)
    }

    /// The generation loop on already tokenized `prompt` (image pads expanded, one run per
    /// entry of `images`): empty the cache, prefill, then sample, check for a stop, feed,
    /// one token per step. See the module docs for the logits rows.
    ///
    /// Cost: one prefill pass plus one decode pass per generated token but the last (the
    /// last too with `keep_logits`); a pass over the logits row per sample.
    pub fn generate_from_ids(
        &self,
        model: &mut dyn VisionLanguageModel,
        prompt: &[u32],
        images: &[EncodedImage],
        options: &GenerateOptions,
    ) -> Result<Generation> {
        self.generate_from_ids_streaming(model, prompt, images, options, &mut |_| {})
    }

    /// [`generate_from_ids`](Self::generate_from_ids), calling `on_token` with each
    /// generated id as soon as it is chosen.
    #[inline(never)]
    pub fn generate_from_ids_streaming(
        &self,
        model: &mut dyn VisionLanguageModel,
        prompt: &[u32],
        images: &[EncodedImage],
        options: &GenerateOptions,
        on_token: &mut dyn FnMut(u32),
    ) -> Result<Generation> {
        if model.vocab_size() != self.logits_width {
            return Err(Error::invalid_input(format!(
                "the generator was built for {} logits, the model has {}",
                self.logits_width,
                model.vocab_size()
            )));
        }
        let mut timings = GenerationTimings::default();
        let mut sampler = Sampler::new(options.sampling);
        model.truncate(0)?;
        let t = Instant::now();
        let mut row = self.logits_row(&model.feed(prompt, images)?)?;
        timings.prefill = t.elapsed();
        let mut logits = Vec::new();
        let mut tokens = Vec::new();
        let mut stop = StopReason::MaxTokens;
        while tokens.len() < options.max_tokens {
            let t = Instant::now();
            let token = sampler.sample(&row, &self.allowed).ok_or_else(|| {
                // The mask allows every known id, so only a row narrower than it gets here.
                Error::invalid_input("no token can be sampled from the logits row")
            })?;
            timings.sampling += t.elapsed();
            tokens.push(token);
            on_token(token);
            let end = token == self.special.im_end || token == self.special.end_of_text;
            let last = end || tokens.len() == options.max_tokens;
            if end {
                stop = StopReason::EndToken(token);
            }
            if last && !options.keep_logits {
                break;
            }
            let t = Instant::now();
            let next = self.logits_row(&model.feed(&[token], &[])?)?;
            timings.decode += t.elapsed();
            timings.decode_steps += 1;
            if options.keep_logits {
                logits.push(std::mem::replace(&mut row, next));
            } else {
                row = next;
            }
            if last {
                break;
            }
        }
        if options.keep_logits {
            logits.push(row);
        }
        let shown = match stop {
            StopReason::EndToken(_) => &tokens[..tokens.len() - 1],
            StopReason::MaxTokens => &tokens[..],
        };
        let text = self
            .tokenizer
            .decode(shown, false)
            .map_err(|e| Error::tokenizer_caused("", e))?;
        Ok(Generation {
            prompt_tokens: prompt.to_vec(),
            image_tokens: images.iter().map(EncodedImage::n_tokens).sum(),
            tokens,
            text,
            stop,
            logits,
            timings,
        })
    }

    fn logits_row(&self, logits: &candle_core::Tensor) -> Result<Vec<f32>> {
        let row = logits
            .to_dtype(candle_core::DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        if row.len() != self.logits_width {
            return Err(Error::internal(format!(
                "the model returned {} logits, expected {}",
                row.len(),
                self.logits_width
            )));
        }
        Ok(row)
    }
}

/// Turns generated ids into text as they come: byte-level tokens can end inside a UTF-8
/// character, so text is released only once its characters are whole.
#[derive(Debug)]
pub struct TextStream<'a> {
    tokenizer: &'a Tokenizer,
    tokens: Vec<u32>,
    released: usize,
}

impl<'a> TextStream<'a> {
    /// An empty stream decoding with `tokenizer`.
    pub fn new(tokenizer: &'a Tokenizer) -> Self {
        TextStream {
            tokenizer,
            tokens: Vec::new(),
            released: 0,
        }
    }

    /// Add `token` and return the text that became complete (often empty). Cost: one
    /// decode of every token so far (fine for the hundreds of tokens of a generation).
    pub fn push(&mut self, token: u32) -> Result<String> {
        self.tokens.push(token);
        let text = self
            .tokenizer
            .decode(&self.tokens, false)
            .map_err(|e| Error::tokenizer_caused("", e))?;
        // An incomplete character decodes to U+FFFD; wait for the next token.
        if text.ends_with('\u{FFFD}') {
            return Ok(String::new());
        }
        let new = text.get(self.released..).unwrap_or_default().to_string();
        self.released = text.len();
        Ok(new)
    }

    /// Bytes of text released so far.
    pub fn released(&self) -> usize {
        self.released
    }
}

impl Generation {
    /// Write the logits rows and the token ids to a safetensors file `path`, for another
    /// implementation to replay and compare:
    ///
    /// - `logits`: f32 `(1 + n, vocab)`, the rows of the module docs (needs
    ///   [`GenerateOptions::keep_logits`]);
    /// - `tokens`: i64 `(prompt_len + n,)`, the prompt ids (image pads expanded) then the
    ///   generated ids, the stop token included;
    /// - `prompt_len`: i64 `(1,)`, how many of `tokens` are the prompt.
    ///
    /// Row `i` of `logits` is the model's output at position `prompt_len - 1 + i` of
    /// `tokens`.
    pub fn save_logits(&self, path: &Path) -> Result<()> {
        let rows = self.logits.len();
        if rows != self.tokens.len() + 1 {
            return Err(Error::invalid_input(format!(
                "{rows} logits rows kept for {} generated tokens: generate with keep_logits",
                self.tokens.len()
            )));
        }
        let width = self.logits.first().map_or(0, Vec::len);
        let flat: Vec<f32> = self.logits.iter().flatten().copied().collect();
        let ids: Vec<i64> = self
            .prompt_tokens
            .iter()
            .chain(&self.tokens)
            .map(|&t| i64::from(t))
            .collect();
        let cpu = candle_core::Device::Cpu;
        let n_ids = ids.len();
        let tensors = std::collections::HashMap::from([
            (
                "logits".to_string(),
                candle_core::Tensor::from_vec(flat, (rows, width), &cpu)?,
            ),
            (
                "tokens".to_string(),
                candle_core::Tensor::from_vec(ids, n_ids, &cpu)?,
            ),
            (
                "prompt_len".to_string(),
                candle_core::Tensor::new(&[self.prompt_tokens.len() as i64], &cpu)?,
            ),
        ]);
        candle_core::safetensors::save(&tensors, path)
            .map_err(|e| Error::io(path, std::io::Error::other(e)))
    }
}
