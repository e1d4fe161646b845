//! The measurements of `sightline bench`, each a method of [`StageBench`] so that the
//! CLI can alternate them with llama.cpp's: load and memory, vision encode, prefill,
//! decode, a grammar-constrained decode, and whole planner turns.
//!
//! Every stage runs `repeat` times and reports the median. Prefill is preceded by one
//! untimed pass over the prompt, as `llama-bench` warms up before its runs: candle
//! repacks each quantized matrix on its first multi-row matmul (llama.cpp does the
//! same while loading), a one-time cost of the process that would otherwise land in
//! the first sample. On the CPU every candle op is
//! synchronous, so a stopped clock has seen the work finish; logits are read back to the
//! host inside the timed region, as the decoder does.

use std::path::Path;
use std::time::{Duration, Instant};

use candle_core::quantized::GgmlDType;
use cel_contracts::{
    AttemptRecord, PlannedAction, PlanningElement, PlanningElementState, PlanningScreen,
    PlanningView,
};
use serde::Serialize;
use tokenizers::Tokenizer;

use crate::bench::flops::{prefill_ops, vision_ops, PeakKind, Throughput};
use crate::cpu::peak::Peak;
use crate::decode::{
    decode_move, DecodeOptions, DecodeStats, Grammar, GrammarEngine, GrammarOptions, MoveSpec,
    TokenEnv, WarmUp, WarmUpStats, MAX_WALKS,
};
use crate::error::{Error, Result};
use crate::image::{preprocess_bytes, PreprocessConfig};
use crate::model::qwen3_vl::Qwen3Vl;
use crate::model::weights::{LoadOptions, ModelSource};
use crate::model::VisionLanguageModel;
use crate::planner::{LocalPlanner, PlannerOptions, StageTimes, Turn, TurnStats};

/// Ids below this are ordinary BPE tokens in every Qwen vocabulary (the specials follow).
const ORDINARY_TOKENS: u32 = 151_643;
/// Allowed share above file size + KV cache for peak memory after load (issue 3: 25%).
pub const MEMORY_SLACK: f64 = 0.25;

/// The median of `xs` (the mean of the middle two for an even count); 0 for none.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The nearest-rank `p`-th percentile of `xs` (`p` in 0–100); 0 for none.
pub fn percentile(xs: &[f64], p: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((v.len() as f64 * p / 100.0).ceil() as usize).saturating_sub(1);
    v.get(rank.min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Resident and peak memory of this process, from `/proc/self/status` (Linux).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct MemorySample {
    /// `VmRSS`, bytes.
    pub rss_bytes: u64,
    /// `VmHWM` (peak resident set since start or the last reset), bytes.
    pub peak_rss_bytes: u64,
    /// `RssAnon`: the resident set that is not a file's pages (heap: tensors, candle's
    /// repacked matrices, the KV cache), bytes; 0 where the kernel does not report it.
    pub rss_anon_bytes: u64,
    /// `RssFile`: resident pages of mapped files (the binary, matrices read in place
    /// from a mapped GGUF), bytes; 0 where the kernel does not report it.
    pub rss_file_bytes: u64,
}

/// Memory at the end of one stage of the bench, and the peak during it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StageMemory {
    /// The stage: `load` (the model, then its tokenizer), `vision`, `prefill`, `decode`,
    /// `grammar` or `turns`.
    pub stage: String,
    /// At the end of the stage.
    pub end: MemorySample,
    /// Whether the peak counter was reset when the stage began (else `end.peak_rss_bytes`
    /// is the peak since the process started).
    pub peak_reset: bool,
}

/// Read [`MemorySample`]; `None` where `/proc/self/status` does not exist.
pub fn memory_sample() -> Option<MemorySample> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |key: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        let kb: u64 = line[key.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    };
    Some(MemorySample {
        rss_bytes: field("VmRSS:")?,
        peak_rss_bytes: field("VmHWM:")?,
        rss_anon_bytes: field("RssAnon:").unwrap_or(0),
        rss_file_bytes: field("RssFile:").unwrap_or(0),
    })
}

/// A stage's memory recorder: [`StageMeter::start`] resets the peak counter,
/// [`StageMeter::finish`] samples the end and the peak since.
#[derive(Debug, Clone, Copy)]
pub struct StageMeter {
    peak_reset: bool,
}

impl StageMeter {
    /// Reset the peak counter; the stage begins.
    pub fn start() -> Self {
        StageMeter {
            peak_reset: reset_peak_rss(),
        }
    }

    /// The stage `stage` ended: its memory.
    pub fn finish(self, stage: &str) -> StageMemory {
        StageMemory {
            stage: stage.to_string(),
            end: memory_sample().unwrap_or_default(),
            peak_reset: self.peak_reset,
        }
    }
}

/// Reset the kernel's peak-RSS counter (`echo 5 > /proc/self/clear_refs`), so a peak
/// read later belongs to what ran after. Returns whether the kernel accepted it.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Bytes of the KV cache for `positions` positions: K and V, every layer, f32 on the CPU.
pub fn kv_cache_bytes(model: &Qwen3Vl, positions: usize) -> u64 {
    let t = &model.config().text;
    let elem = model.dtype().size_in_bytes() as u64;
    2 * t.num_hidden_layers as u64
        * t.num_key_value_heads as u64
        * t.head_dim as u64
        * positions as u64
        * elem
}

/// What the bench measures and on what.
#[derive(Debug, Clone)]
pub struct StageOptions {
    /// Prompt length of the prefill measurement.
    pub prompt_tokens: usize,
    /// Single-token decode steps measured.
    pub gen_tokens: usize,
    /// Repetitions of each stage; medians are reported.
    pub repeat: usize,
    /// Visual-token budget of the screenshot (1,280 by default).
    pub max_visual_tokens: usize,
    /// Threads of the image preprocessing (the model uses candle's pool).
    pub threads: usize,
    /// Quantize a safetensors model while loading.
    pub quantize: Option<GgmlDType>,
    /// The activation type; `None`: the device's default.
    pub dtype: Option<candle_core::DType>,
    /// Seed of the prompt tokens.
    pub seed: u64,
    /// Where the model runs; every stage's clock stops after the device has finished.
    pub device: candle_core::Device,
    /// The machine's measured peak (CPU runs), for the fraction of peak of vision and
    /// prefill.
    pub peak: Option<Peak>,
}

impl Default for StageOptions {
    fn default() -> Self {
        StageOptions {
            prompt_tokens: 512,
            gen_tokens: 64,
            repeat: 3,
            max_visual_tokens: crate::image::DEFAULT_MAX_TOKENS,
            threads: 1,
            quantize: None,
            dtype: None,
            seed: 7,
            device: candle_core::Device::Cpu,
            peak: None,
        }
    }
}

/// Load time and memory.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LoadResult {
    /// Wall time of `Qwen3Vl::load`, ms.
    pub load_ms: f64,
    /// Resident memory right after the load, bytes.
    pub rss_after_load_bytes: u64,
    /// Peak resident memory during the load, bytes.
    pub peak_rss_load_bytes: u64,
    /// Whether the peak counter was reset before the load (else it includes earlier work).
    pub peak_reset: bool,
    /// The model's activation type (`F32`, `BF16`, `F16`).
    pub activations: String,
}

/// Vision encode of the screenshot.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VisionResult {
    /// Image size in pixels.
    pub image_width: u32,
    /// Image size in pixels.
    pub image_height: u32,
    /// The budget asked for.
    pub visual_token_budget: usize,
    /// Visual tokens the image became.
    pub visual_tokens: usize,
    /// Patches through the tower (4 per visual token).
    pub patches: usize,
    /// Decode + resize + patchify, median ms.
    pub preprocess_ms: f64,
    /// Vision tower + mergers, median ms.
    pub encode_ms: f64,
    /// Every encode, ms.
    pub encode_samples_ms: Vec<f64>,
    /// The encode's operations, rate and share of the f32 peak.
    pub throughput: Throughput,
}

/// Prefill of a fresh prompt.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PrefillResult {
    /// Prompt length.
    pub tokens: usize,
    /// Median wall time, ms.
    pub ms: f64,
    /// Median tokens per second.
    pub tokens_per_s: f64,
    /// Every repetition's tokens per second.
    pub samples_tokens_per_s: Vec<f64>,
    /// The prefill's operations, rate and share of the peak of its weights' kind (int8
    /// for quantized text weights, f32 otherwise).
    pub throughput: Throughput,
}

/// Single-token decode steps after the prompt.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DecodeResult {
    /// Steps per repetition.
    pub tokens: usize,
    /// Context length before the first step.
    pub context_tokens: usize,
    /// Median time of one step (forward + logits read back + argmax), ms.
    pub step_ms: f64,
    /// Median tokens per second over a repetition.
    pub tokens_per_s: f64,
    /// Every repetition's tokens per second.
    pub samples_tokens_per_s: Vec<f64>,
}

/// A grammar-constrained decode of a move on the same model and prompt.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GrammarResult {
    /// Building the token environment (once per model), ms.
    pub token_env_ms: f64,
    /// Compiling the move grammar for the view (once per turn), ms.
    pub compile_ms: f64,
    /// Elements in the view the grammar was built from.
    pub view_elements: usize,
    /// Tokens emitted per decode.
    pub tokens: usize,
    /// Of which forced by the grammar.
    pub forced_tokens: usize,
    /// `forced_tokens / tokens`.
    pub forced_share: f64,
    /// Model forward passes per decode (forced runs are batched).
    pub forward_calls: usize,
    /// Median grammar time (masks + commits) per emitted token, µs.
    pub per_token_us: f64,
    /// Median commit time (advancing the parser, computing forced tokens) per emitted
    /// token, µs: `per_token_us` less the masks.
    pub commit_per_token_us: f64,
    /// Grammar time of a sampled token (its mask or guess check, its commit and the
    /// forced run after it): median, µs.
    pub step_p50_us: f64,
    /// The same, 99th percentile, µs.
    pub step_p99_us: f64,
    /// Of the sampled tokens of these decodes, the share whose commit computed a forced
    /// run on the critical path (`DecodeStats::step_computed_run`).
    pub run_step_share: f64,
    /// Those steps' grammar time, median, µs (0 where there were none).
    pub run_step_p50_us: f64,
    /// The other steps' grammar time, 99th percentile, µs.
    pub other_step_p99_us: f64,
    /// Sampled tokens per decode (one per forward pass after the prompt).
    pub sampled_tokens: usize,
    /// Of which the grammar took as the model chose them, with no mask computed.
    pub guessed_tokens: usize,
    /// Whether these decodes prepared each step while the pass computed
    /// (`DecodeOptions::beside_pass`'s default: on a device, and on the CPU where the
    /// model's products take the work, `VisionLanguageModel::works_beside_pass`).
    pub beside_by_default: bool,
    /// Of the decodes that prepared beside the pass (these or the `alt_` ones), the last
    /// one's sampled tokens committed by a grammar copy advanced beside the pass.
    pub committed_ahead: usize,
    /// Its copies advanced.
    pub ahead_copies: usize,
    /// Its sampled tokens of free text fed before their commit.
    pub committed_beside: usize,
    /// Of those, the ones that forced a run after all (a pass more each).
    pub late_runs: usize,
    /// Grammar time beside the pass (commits, masks, copies) per sampled token, µs (not
    /// in the step times; on the CPU inside the pass, whose time counts its cost).
    pub beside_us_per_step: f64,
    /// Median forward pass of these decodes (model time per pass), ms.
    pub pass_ms: f64,
    /// `step_p50_us` of the same decodes with `DecodeOptions::beside_pass` the other way
    /// (alternating with these, on a grammar of their own).
    pub alt_step_p50_us: f64,
    /// `step_p99_us` of those.
    pub alt_step_p99_us: f64,
    /// `pass_ms` of those.
    pub alt_pass_ms: f64,
    /// Median mask time over the masks computed, µs.
    pub mask_p50_us: f64,
    /// 99th-percentile mask time, µs.
    pub mask_p99_us: f64,
    /// `per_token_us` over the median decode step.
    pub ratio_to_decode_step: f64,
    /// Walks through the new grammar beside the first decode's prefill that reached
    /// its end.
    pub warm_up_walks: usize,
    /// Tokens those walks fed (a stopped walk's included).
    pub warm_up_tokens: usize,
    /// Time on the walks' thread.
    pub warm_up_ms: f64,
    /// The move decoded (JSON).
    pub next_move: String,
}

/// What the bench keeps of a set of grammar decodes.
#[derive(Default)]
struct GrammarRuns {
    per_token: Vec<f64>,
    commits: Vec<f64>,
    masks: Vec<f64>,
    steps: Vec<f64>,
    /// `steps` whose commit computed a forced run, and the others.
    run_steps: Vec<f64>,
    other_steps: Vec<f64>,
    passes: Vec<f64>,
    beside_us: f64,
}

impl GrammarRuns {
    fn push(&mut self, s: &DecodeStats) {
        let us = |d: &Duration| d.as_secs_f64() * 1e6;
        self.per_token
            .push(us(&s.grammar_time()) / s.tokens.max(1) as f64);
        self.commits
            .push(us(&s.commit_time) / s.tokens.max(1) as f64);
        self.masks.extend(s.mask_times.iter().map(us));
        self.steps.extend(s.step_grammar_times.iter().map(us));
        for (t, &run) in s.step_grammar_times.iter().zip(&s.step_computed_run) {
            match run {
                true => self.run_steps.push(us(t)),
                false => self.other_steps.push(us(t)),
            }
        }
        self.passes
            .push(us(&s.model_time) / 1e3 / s.forward_calls.max(1) as f64);
        self.beside_us += us(&s.beside_time);
    }

    /// Median over the decodes of their mean forward pass, ms.
    fn pass_ms(&self) -> f64 {
        median(&self.passes)
    }
}

/// Whole `decide_next` turns through [`LocalPlanner`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TurnResult {
    /// Turns run (the first one also prefills the system prompt).
    pub turns: usize,
    /// The first turn's total, ms (system prompt prefilled).
    pub first_total_ms: f64,
    /// Median total of the turns on a new screen after the first (the system prompt is
    /// cached by then), ms; the first turn's when only one ran.
    pub total_ms: f64,
    /// The breakdown of that median turn.
    pub median_turn: StageTimes,
    /// Median total of the second turns, ms: after each turn, one more on the same
    /// screenshot with one more history record, as after a step that left the screen as
    /// it was. The image is not encoded again and the system and screen runs are reused.
    pub warm_total_ms: f64,
    /// The breakdown of the median second turn.
    pub warm_turn: StageTimes,
    /// The longest context a turn ended with (reused + fed + generated tokens).
    pub context_tokens: usize,
    /// KV-cache bytes at `context_tokens`.
    pub kv_cache_bytes: u64,
    /// Memory over the turns: the peak counter is reset before the first turn, so
    /// `memory.end.peak_rss_bytes` is the peak of the turns themselves (every stage of
    /// `decide_next`: preprocessing, vision encode, prefill, constrained decode).
    pub memory: StageMemory,
    /// A done claim judged right after the last turn, on its screen: the grader's question
    /// follows the agent's own system and screen runs, so only the question is fed.
    pub verify_after_turn: StageTimes,
    /// The same claim on a screen the planner has not seen: vision and the whole prompt.
    pub verify_fresh_screen: StageTimes,
    /// The first turn of a new process on a new screen, ms: the system prompt read from
    /// disk, where the first turn computed and kept it.
    pub new_process_total_ms: f64,
    /// Its breakdown.
    pub new_process_turn: StageTimes,
}

/// One turn's stages, from [`TurnStats`].
/// The view the grammar and the turn are built from: a window of `n` buttons.
pub fn bench_view(n: usize) -> PlanningView {
    let screen = PlanningScreen {
        active_app: "Settings".into(),
        window: "Preferences".into(),
        summary: None,
        url: None,
    };
    let elements = (0..n)
        .map(|i| PlanningElement {
            id: format!("e{i}"),
            element_type: "button".into(),
            label: Some(format!("Option {i}")),
            value: None,
            state: PlanningElementState::default(),
            clickable: true,
            settable: false,
            select_options: None,
        })
        .collect();
    crate::view::view_of("Open the display settings", screen, elements)
}

/// A deterministic 1920×1080 RGB screenshot (a window with a title bar, panels and a
/// grid of buttons), PNG-encoded; `variant` changes a few pixels so that turns that
/// should not reuse the encoded image get a different one.
pub fn synthetic_screenshot(width: u32, height: u32, variant: u32) -> Result<Vec<u8>> {
    let img = image::RgbImage::from_fn(width, height, |x, y| {
        let bar = y < 40;
        let panel = x < width / 5;
        let button = !bar && !panel && (x / 160) % 2 == 0 && (y / 60) % 3 == 1;
        let base: [u8; 3] = if bar {
            [40, 44, 52]
        } else if panel {
            [230, 232, 236]
        } else if button {
            [66, 133, 244]
        } else {
            [250, 250, 250]
        };
        let noise =
            ((x.wrapping_mul(31) ^ y.wrapping_mul(17) ^ variant.wrapping_mul(101)) % 7) as u8;
        image::Rgb([
            base[0].saturating_sub(noise),
            base[1].saturating_sub(noise),
            base[2],
        ])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .map_err(|e| Error::image_caused("encoding the screenshot", e))?;
    Ok(out.into_inner())
}

/// A loaded model and the state the stages share.
pub struct StageBench {
    model: Qwen3Vl,
    tokenizer: Tokenizer,
    source: ModelSource,
    options: StageOptions,
    prompt: Vec<u32>,
    decode_step_ms: Option<f64>,
    memory: Vec<StageMemory>,
}

crate::debug_fields::debug_fields!(StageBench { model });

impl StageBench {
    /// Load the model (timed, with memory read before and after) and its tokenizer.
    pub fn load(source: &ModelSource, options: &StageOptions) -> Result<(Self, LoadResult)> {
        if options.repeat == 0 || options.prompt_tokens == 0 || options.gen_tokens == 0 {
            return Err(Error::invalid_input(
                "repeat, prompt tokens and generated tokens must be at least 1",
            ));
        }
        let meter = StageMeter::start();
        let peak_reset = meter.peak_reset;
        let t = Instant::now();
        let model = Qwen3Vl::load(&LoadOptions {
            quantize: options.quantize,
            device: options.device.clone(),
            dtype: options.dtype,
            ..LoadOptions::new(source.clone())
        })?;
        let load_ms = ms(t.elapsed());
        let mem = memory_sample().unwrap_or_default();
        let tokenizer = source.tokenizer()?;
        model.check_tokenizer(&tokenizer)?;
        // A fixed pseudo-random prompt of ordinary tokens (splitmix64).
        let mut state = options.seed;
        let prompt = (0..options.prompt_tokens)
            .map(|_| {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                ((z ^ (z >> 31)) % ORDINARY_TOKENS as u64) as u32
            })
            .collect();
        let activations = format!("{:?}", model.dtype());
        Ok((
            StageBench {
                model,
                tokenizer,
                source: source.clone(),
                options: options.clone(),
                prompt,
                decode_step_ms: None,
                memory: vec![meter.finish("load")],
            },
            LoadResult {
                load_ms,
                rss_after_load_bytes: mem.rss_bytes,
                peak_rss_load_bytes: mem.peak_rss_bytes,
                peak_reset,
                activations,
            },
        ))
    }

    /// The loaded model.
    pub fn model(&self) -> &Qwen3Vl {
        &self.model
    }

    /// The memory of every stage run so far, in order.
    pub fn memory(&self) -> &[StageMemory] {
        &self.memory
    }

    /// KV-cache bytes at the longest context the stages use (prompt + generated tokens).
    pub fn kv_cache_bytes(&self) -> u64 {
        kv_cache_bytes(
            &self.model,
            self.options.prompt_tokens + self.options.gen_tokens,
        )
    }

    /// Preprocess and encode `png` `repeat` times.
    pub fn vision(&mut self, png: &[u8]) -> Result<VisionResult> {
        let cfg = PreprocessConfig::default()
            .with_max_tokens(self.options.max_visual_tokens)
            .with_threads(self.options.threads);
        let (w, h) = image::ImageReader::new(std::io::Cursor::new(png))
            .with_guessed_format()
            .ok()
            .and_then(|r| r.into_dimensions().ok())
            .ok_or_else(|| Error::image("the bench screenshot is not a readable image"))?;
        let mut pre = Vec::new();
        let mut enc = Vec::new();
        let mut tokens = 0;
        let mut patches = 0;
        let meter = StageMeter::start();
        for _ in 0..self.options.repeat {
            let t = Instant::now();
            let pixels = preprocess_bytes(png, &cfg)?;
            pre.push(ms(t.elapsed()));
            let t = Instant::now();
            let encoded = self.model.encode_image(&pixels)?;
            self.options.device.synchronize()?;
            enc.push(ms(t.elapsed()));
            tokens = encoded.n_tokens();
            patches = pixels.grid_thw.iter().product();
        }
        self.memory.push(meter.finish("vision"));
        let encode_ms = median(&enc);
        let ops = vision_ops(&self.model.config().vision, patches);
        Ok(VisionResult {
            image_width: w,
            image_height: h,
            visual_token_budget: self.options.max_visual_tokens,
            visual_tokens: tokens,
            patches,
            preprocess_ms: median(&pre),
            encode_ms,
            encode_samples_ms: enc,
            throughput: Throughput::new(ops, encode_ms, PeakKind::F32, self.options.peak.as_ref()),
        })
    }

    /// Prefill the prompt into an empty cache, `repeat` times, after one untimed pass
    /// (see the module docs).
    pub fn prefill(&mut self) -> Result<PrefillResult> {
        self.model.truncate(0)?;
        self.model.feed(&self.prompt, &[])?;
        let mut samples = Vec::new();
        let mut times = Vec::new();
        let meter = StageMeter::start();
        for _ in 0..self.options.repeat {
            self.model.truncate(0)?;
            let t = Instant::now();
            let logits = self.model.feed(&self.prompt, &[])?;
            let _host: Vec<f32> = logits.to_vec1()?;
            let secs = t.elapsed().as_secs_f64();
            times.push(secs * 1e3);
            samples.push(self.prompt.len() as f64 / secs);
        }
        self.memory.push(meter.finish("prefill"));
        let ms = median(&times);
        let ops = prefill_ops(&self.model.config().text, self.prompt.len(), 0);
        let kind = if self.model.text_quantized() {
            PeakKind::Int8
        } else {
            PeakKind::F32
        };
        Ok(PrefillResult {
            tokens: self.prompt.len(),
            ms,
            throughput: Throughput::new(ops, ms, kind, self.options.peak.as_ref()),
            tokens_per_s: median(&samples),
            samples_tokens_per_s: samples,
        })
    }

    /// Logits of the prompt's last position with the cache holding the prompt, computing
    /// only what is missing.
    fn prompt_logits(&mut self) -> Result<candle_core::Tensor> {
        let n = self.prompt.len();
        if self.model.cache_len() < n {
            self.model.truncate(0)?;
            if n > 1 {
                self.model.feed(&self.prompt[..n - 1], &[])?;
            }
        } else {
            self.model.truncate(n - 1)?;
        }
        self.model.feed(&self.prompt[n - 1..], &[])
    }

    /// `gen_tokens` single-token greedy steps after the prompt, `repeat` times.
    pub fn decode(&mut self) -> Result<DecodeResult> {
        let mut samples = Vec::new();
        let mut steps = Vec::new();
        let meter = StageMeter::start();
        for _ in 0..self.options.repeat {
            let mut logits = self.prompt_logits()?;
            let t = Instant::now();
            for _ in 0..self.options.gen_tokens {
                let s = Instant::now();
                let next = logits.argmax(0)?.to_scalar::<u32>()?;
                logits = self.model.feed(&[next], &[])?;
                let _host: Vec<f32> = logits.to_vec1()?;
                steps.push(ms(s.elapsed()));
            }
            samples.push(self.options.gen_tokens as f64 / t.elapsed().as_secs_f64());
        }
        self.memory.push(meter.finish("decode"));
        let step_ms = median(&steps);
        self.decode_step_ms = Some(step_ms);
        Ok(DecodeResult {
            tokens: self.options.gen_tokens,
            context_tokens: self.prompt.len(),
            step_ms,
            tokens_per_s: median(&samples),
            samples_tokens_per_s: samples,
        })
    }

    /// A grammar-constrained decode of a move after the prompt, `repeat` times, with the
    /// grammar built from a view of `view_elements` buttons.
    pub fn grammar(&mut self, view_elements: usize) -> Result<GrammarResult> {
        let meter = StageMeter::start();
        let t = Instant::now();
        let env = TokenEnv::from_tokenizer(&self.tokenizer, self.model.vocab_size())?;
        // The parser factory is built in the background; its build belongs to this stage.
        env.factory()?;
        let token_env_ms = ms(t.elapsed());
        let view = bench_view(view_elements);
        let t = Instant::now();
        let spec = MoveSpec::new(&view, &GrammarOptions::default())?;
        let grammar = Grammar::for_move(&env, &spec, GrammarEngine::Lark)?;
        let compile_ms = ms(t.elapsed());
        // The decoder's default order for this device, and beside it the other one
        // (`DecodeOptions::beside_pass`): each decodes on a grammar compiled for it (its
        // own lexer states, its own warm-up beside a whole prefill), the two alternating,
        // so both are measured under the same conditions.
        let beside_by_default = self.model.works_beside_pass();
        let alt_grammar = Grammar::for_move(&env, &spec, GrammarEngine::Lark)?;
        let mut default = GrammarRuns::default();
        let mut alt = GrammarRuns::default();
        let mut last = None;
        let mut beside_stats = DecodeStats::default();
        let mut warm_up = WarmUpStats::default();
        for i in 0..self.options.repeat {
            let order = if i % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for is_default in order {
                let (runs, grammar) = match is_default {
                    true => (&mut default, &grammar),
                    false => (&mut alt, &alt_grammar),
                };
                // The first decode of each follows a whole prefill of the prompt, as a
                // turn's does, with the new grammar walked beside it (see `WarmUp`); the
                // repeats after it decode on the same grammar after one token.
                let walks = if i == 0 {
                    self.model.truncate(0)?;
                    Some(WarmUp::start(grammar, MAX_WALKS)?)
                } else {
                    None
                };
                let logits = self.prompt_logits()?;
                if let Some(walks) = walks {
                    let stats = walks.finish();
                    if is_default {
                        warm_up = stats;
                    }
                }
                let options = DecodeOptions {
                    beside_pass: (!is_default).then_some(!beside_by_default),
                    ..DecodeOptions::default()
                };
                let out = decode_move(&mut self.model, &logits, grammar, &options)?;
                runs.push(&out.decoded.stats);
                if is_default == beside_by_default {
                    beside_stats = out.decoded.stats.clone();
                }
                if is_default {
                    last = Some(out);
                }
            }
        }
        let out = last.ok_or_else(|| Error::internal("repeat is 0"))?;
        self.memory.push(meter.finish("grammar"));
        let s = &out.decoded.stats;
        let per_token_us = median(&default.per_token);
        let beside_runs = if beside_by_default { &default } else { &alt };
        let b = &beside_stats;
        let step_us = self.decode_step_ms.unwrap_or(f64::NAN) * 1e3;
        Ok(GrammarResult {
            token_env_ms,
            compile_ms,
            view_elements,
            tokens: s.tokens,
            forced_tokens: s.forced_tokens,
            forced_share: s.forced_share(),
            forward_calls: s.forward_calls,
            per_token_us,
            commit_per_token_us: median(&default.commits),
            step_p50_us: median(&default.steps),
            step_p99_us: percentile(&default.steps, 99.0),
            run_step_share: default.run_steps.len() as f64 / default.steps.len().max(1) as f64,
            run_step_p50_us: median(&default.run_steps),
            other_step_p99_us: percentile(&default.other_steps, 99.0),
            sampled_tokens: s.step_grammar_times.len(),
            guessed_tokens: s.guessed_tokens,
            beside_by_default,
            committed_ahead: b.committed_ahead,
            ahead_copies: b.ahead_copies,
            committed_beside: b.committed_beside,
            late_runs: b.late_runs,
            beside_us_per_step: beside_runs.beside_us / beside_runs.steps.len().max(1) as f64,
            pass_ms: default.pass_ms(),
            alt_step_p50_us: median(&alt.steps),
            alt_step_p99_us: percentile(&alt.steps, 99.0),
            alt_pass_ms: alt.pass_ms(),
            mask_p50_us: median(&default.masks),
            mask_p99_us: percentile(&default.masks, 99.0),
            ratio_to_decode_step: per_token_us / step_us,
            warm_up_walks: warm_up.walks,
            warm_up_tokens: warm_up.tokens,
            warm_up_ms: ms(warm_up.time),
            next_move: serde_json::to_string(&out.next_move).unwrap_or_default(),
        })
    }

    /// Hand the model to a [`LocalPlanner`] and run `repeat` pairs of whole `decide_next`
    /// turns: one on a screenshot made by `screenshot(i)` (each different, so each encodes
    /// its image; the system prompt is prefilled by the first only), then one on the same
    /// screenshot with the first turn's step in the history (see [`warm_history`]).
    pub fn turns(self, mut screenshot: impl FnMut(usize) -> Result<Vec<u8>>) -> Result<TurnResult> {
        let preprocess = self
            .source
            .preprocess_config()?
            .with_threads(self.options.threads);
        let mut options = PlannerOptions::new(self.source.clone());
        options.max_visual_tokens = Some(self.options.max_visual_tokens);
        // A store of its own, empty: the first turn is cold, and the turn "of a new process"
        // below reads the system prompt that turn kept.
        let store = tempfile::tempdir().map_err(|e| Error::io("a temporary directory", e))?;
        options.prefix_cache = Some(store.path().to_path_buf());
        let repeat = self.options.repeat;
        let kv_per_position = kv_cache_bytes(&self.model, 1);
        let mut model = self.model;
        model.truncate(0)?;
        let planner =
            LocalPlanner::from_parts(Box::new(model), self.tokenizer, preprocess, &options)?;
        let view = bench_view(20);
        let shared_memory = serde_json::Value::Null;
        let warm = warm_history();
        let turn = |png: &[u8], history: &[AttemptRecord]| {
            planner.plan(&Turn {
                goal: &view.goal,
                history,
                shared_memory: &shared_memory,
                view: &view,
                screenshot: Some(png),
            })
        };
        let (mut cold, mut second) = (Vec::new(), Vec::new());
        let meter = StageMeter::start();
        for i in 0..repeat {
            let png = screenshot(i)?;
            cold.push(turn(&png, &[])?.1);
            second.push(turn(&png, &warm)?.1);
        }
        let memory = meter.finish("turns");
        // A done claim on the last turn's screen, then on a new one: what sharing the screen
        // prefix with the grader saves.
        let last = screenshot(repeat.saturating_sub(1))?;
        let fresh = screenshot(repeat)?;
        let claim = |png: &[u8]| {
            planner.verify(
                &Turn {
                    goal: &view.goal,
                    history: &warm,
                    shared_memory: &shared_memory,
                    view: &view,
                    screenshot: Some(png),
                },
                "The window shows the goal done.",
            )
        };
        let (_, after_turn) = claim(&last)?;
        let (_, fresh_screen) = claim(&fresh)?;
        // The first turn of a new process: nothing in memory (the planner forgets its cache
        // as after a loan), the system prompt on disk, a screen not seen yet.
        planner.with_model(|_| Ok(()))?;
        let (_, new_process) = turn(&screenshot(repeat + 1)?, &[])?;
        let context_tokens = cold
            .iter()
            .chain(&second)
            .map(|s| s.prefill_reused + s.prefill_new + s.generated)
            .max()
            .unwrap_or(0);
        // The first turn also prefills the system prompt; the later ones on new screens
        // reuse it, which is the steady state a running agent is in.
        let steady = if cold.len() > 1 {
            &cold[1..]
        } else {
            &cold[..]
        };
        let (total_ms, median_turn) = median_of_turns(steady)?;
        let (warm_total_ms, warm_turn) = median_of_turns(&second)?;
        Ok(TurnResult {
            turns: cold.len(),
            first_total_ms: ms(cold[0].total),
            total_ms,
            median_turn,
            warm_total_ms,
            warm_turn,
            context_tokens,
            kv_cache_bytes: kv_per_position * context_tokens as u64,
            memory,
            verify_after_turn: after_turn.stage_times(),
            verify_fresh_screen: fresh_screen.stage_times(),
            new_process_total_ms: ms(new_process.total),
            new_process_turn: new_process.stage_times(),
        })
    }
}

/// The history of a second turn on an unchanged screen: one step that succeeded and left
/// the screen as it was (a key press), as the runner records it.
fn warm_history() -> Vec<AttemptRecord> {
    vec![AttemptRecord {
        step_purpose: "Move the selection down one option".into(),
        action: PlannedAction::Key { key: "Down".into() },
        succeeded: true,
        error: None,
        data: serde_json::Value::Null,
        next_action_hint: None,
    }]
}

/// The median turn of `turns` (the upper middle one for an even count, so that its total
/// and its stages are one turn's): its total, ms, and its stages.
fn median_of_turns(turns: &[TurnStats]) -> Result<(f64, StageTimes)> {
    let totals: Vec<f64> = turns.iter().map(|s| ms(s.total)).collect();
    let mut order: Vec<usize> = (0..turns.len()).collect();
    order.sort_by(|&a, &b| totals[a].total_cmp(&totals[b]));
    let mid = *order
        .get(order.len() / 2)
        .ok_or_else(|| Error::internal("no turns ran"))?;
    Ok((totals[mid], turns[mid].stage_times()))
}

/// Whether `path` names an existing GGUF file (by its magic).
pub fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"GGUF"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn memory_sample_reads_proc_status() {
        if let Some(m) = memory_sample() {
            assert!(m.rss_bytes > 0 && m.peak_rss_bytes >= m.rss_bytes);
        }
    }
}
