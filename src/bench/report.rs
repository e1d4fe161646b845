//! The result of `sightline bench`: one [`BenchReport`], printed as a table for people or
//! as one JSON object (`--json`) whose field names are stable:
//!
//! | field | what |
//! |---|---|
//! | `sightline_version` | the crate version |
//! | `model` | shape, format, files, size, whether this run generated it |
//! | `machine` | the device and whether it is a GPU, threads, candle's thread count, CPU features (compile time and run time), the hand-written kernels' path, build warnings |
//! | `settings` | prompt tokens, generated tokens, repetitions, visual-token budget |
//! | `load` | load time, RSS after load, peak RSS during load, the activation type |
//! | `peak` | the machine's arithmetic peak, measured on the bench's threads: f32 multiply-adds on the kernel path, int8 dots on candle's quantized tier (`null` on a GPU) |
//! | `memory_check` | peak after load against file size + KV cache + 25% (issue 3) |
//! | `vision` | image size, visual tokens, preprocess and encode medians, `throughput` (operations, rate, fraction of the f32 peak) |
//! | `prefill` / `decode` | tokens, medians, tokens/s, every sample; prefill's `throughput` against the peak of its weights' kind |
//! | `grammar` | constrained decode: per-token grammar time and its commit part, grammar time per sampled token p50/p99, the share of those whose commit computed a forced run (their p50, the others' p99), tokens guessed without a mask, the grammar's work beside the forward pass (its time per token, grammar copies advanced and taken, commits made beside the pass and the late runs among them), the same decodes with all grammar work on the critical path (p50/p99), and the forward pass in each, mask p50/p99, ratio to a decode step, forced share (or `grammar_error`) |
//! | `turn` | whole `decide_next` turns: the first (cold) total, the median on new screens after it (system prompt cached) and the median second turn on an unchanged screen (`warm_*`), each with its stages and tokens reused, the context length, KV cache and memory; a done claim verified on the last turn's screen (shared prefix) and on a new one (generated screenshots only: `--image` repeats the same screen); the first turn of a new process on a new screen (`new_process_*`: the system prompt read from the disk store the first turn wrote) |
//! | `memory_stages` | per stage (load, vision, prefill, decode, grammar, turns): RSS at its end (anonymous and file-backed) and its peak |
//! | `turn_memory_check` | peak RSS of the whole turns against file size + the turns' KV cache + 25% (issue 3's bound); `null` with `--no-turn` |
//! | `peak_rss_bytes` | peak RSS of the whole run after generation |
//! | `llama_cpp` | `null`, or llama.cpp's figures, ratios and features |
//!
//! Times are milliseconds (`_ms`) or microseconds (`_us`), rates tokens per second
//! (`_per_s`), sizes bytes (`_bytes`).

use std::fmt::Write as _;

use serde::Serialize;

use crate::bench::llama_cpp::{LlamaBenchOutput, MtmdTimings};
use crate::bench::stages::{
    DecodeResult, GrammarResult, LoadResult, PrefillResult, StageMemory, TurnResult, VisionResult,
    MEMORY_SLACK,
};
use crate::cpu;
use crate::cpu::peak::Peak;
use crate::planner::StageTimes;

/// Which model was measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelReport {
    /// `2b`, `4b`, `8b`, `tiny`, or `custom` for `--model`.
    pub shape: String,
    /// `q4_k_m`, `q8_0`, `f16`, or what `--model` holds.
    pub format: String,
    /// Quantize-at-load type, when used.
    pub quantize: Option<String>,
    /// The files, in words.
    pub source: String,
    /// Size of the model's files.
    pub file_bytes: u64,
    /// Whether this run generated the model.
    pub generated: bool,
    /// Seconds spent generating it.
    pub generate_s: f64,
}

/// The machine and build.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MachineReport {
    /// The device the model ran on (`Cpu`, `Cuda(…)`, `Metal(…)`).
    pub device: String,
    /// Whether that device is a GPU: the CPU's kernel path then only preprocesses.
    pub gpu: bool,
    /// `--threads`.
    pub threads: usize,
    /// The thread count candle runs with.
    pub candle_threads: usize,
    /// Target features this binary was compiled with (candle's non-quantized kernels
    /// depend on them).
    pub compile_features: Vec<String>,
    /// Features the CPU reports at run time (candle's quantized kernels pick on them).
    pub runtime_features: Vec<String>,
    /// Whether the build enabled AVX2 at compile time (a `target-cpu=native` build on an
    /// AVX2 machine does; a default x86-64 build does not).
    pub native_build: bool,
    /// The path Sightline's hand-written CPU kernels ran (attention, exp, GELU), chosen
    /// at run time: `AVX-512`, `AVX2+FMA`, `NEON` or `portable`.
    pub kernel_path: String,
    /// `SIGHTLINE_CPU_FEATURES`, when set.
    pub kernel_path_forced: Option<String>,
    /// The level candle's repacked quantized matmuls run at (its own run-time choice).
    pub candle_quantized_kernels: String,
    /// The eight-row kernels Q4_K and Q6_K matmuls (and Q8_0 ones on many rows) run on
    /// instead of candle's, when this CPU has them (`AVX2` or `AVX-512 VNNI`).
    pub q4k_q6k_kernels: Option<String>,
    /// Rows from which products with the other quantized types leave candle's kernels
    /// (where the quantized tier is AVX2): Q8_0 for the eight-row kernel laid out per
    /// call, the rest widened to f32.
    pub other_types_widened_from_rows: Option<usize>,
    /// Warnings about the build against this CPU: a forced path the CPU lacks, features
    /// the CPU has that nothing in this build uses.
    pub build_warnings: Vec<String>,
}

impl MachineReport {
    /// Describe this process.
    pub fn current(threads: usize, device: &candle_core::Device) -> Self {
        let mut compile = Vec::new();
        for (on, name) in [
            (cfg!(target_feature = "sse4.2"), "sse4.2"),
            (cfg!(target_feature = "avx"), "avx"),
            (cfg!(target_feature = "avx2"), "avx2"),
            (cfg!(target_feature = "fma"), "fma"),
            (cfg!(target_feature = "f16c"), "f16c"),
            (cfg!(target_feature = "avx512f"), "avx512f"),
            (cfg!(target_feature = "avx512vnni"), "avx512vnni"),
            (cfg!(target_feature = "neon"), "neon"),
        ] {
            if on {
                compile.push(name.to_string());
            }
        }
        #[allow(unused_mut)]
        let mut runtime: Vec<String> = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            for (on, name) in [
                (std::arch::is_x86_feature_detected!("avx"), "avx"),
                (std::arch::is_x86_feature_detected!("avx2"), "avx2"),
                (std::arch::is_x86_feature_detected!("fma"), "fma"),
                (std::arch::is_x86_feature_detected!("f16c"), "f16c"),
                (std::arch::is_x86_feature_detected!("avx512f"), "avx512f"),
                (
                    std::arch::is_x86_feature_detected!("avx512vnni"),
                    "avx512vnni",
                ),
                (
                    std::arch::is_x86_feature_detected!("avx512bf16"),
                    "avx512bf16",
                ),
            ] {
                if on {
                    runtime.push(name.to_string());
                }
            }
        }
        let selection = cpu::selected();
        let mut build_warnings: Vec<String> = selection.warning.iter().cloned().collect();
        let unused = cpu::undispatched_features();
        if !unused.is_empty() {
            build_warnings.push(format!(
                "this CPU has [{}], which this build neither enables at compile time nor \
                 dispatches to at run time (they would speed up f16/bf16 element-wise ops \
                 only); RUSTFLAGS='-C target-cpu=native' enables them",
                unused.join(" ")
            ));
        }
        MachineReport {
            device: format!("{device:?}"),
            gpu: !device.is_cpu(),
            threads,
            candle_threads: candle_core::utils::get_num_threads(),
            compile_features: compile,
            runtime_features: runtime,
            native_build: cfg!(target_feature = "avx2")
                || cfg!(target_feature = "neon") && candle_core::utils::with_neon(),
            kernel_path: selection.path.label().to_string(),
            kernel_path_forced: selection.requested.clone(),
            candle_quantized_kernels: cpu::candle_quantized_level().to_string(),
            q4k_q6k_kernels: crate::model::weights::eight_row_kernels().map(str::to_string),
            other_types_widened_from_rows: crate::model::weights::other_types_widened_from_rows(),
            build_warnings,
        }
    }
}

/// The settings measured with.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SettingsReport {
    /// Prefill prompt length.
    pub prompt_tokens: usize,
    /// Decode steps.
    pub gen_tokens: usize,
    /// Repetitions per stage.
    pub repeat: usize,
    /// Visual-token budget of the screenshot.
    pub visual_token_budget: usize,
}

/// Peak memory after load against issue 3's bound.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MemoryCheck {
    /// Model files.
    pub file_bytes: u64,
    /// KV cache at prompt + generated tokens.
    pub kv_cache_bytes: u64,
    /// `(file + kv) * 1.25`.
    pub bound_bytes: u64,
    /// Peak RSS during load.
    pub peak_rss_load_bytes: u64,
    /// `peak <= bound`.
    pub within_bound: bool,
}

impl MemoryCheck {
    /// Compare `peak` with `(file + kv) * (1 + MEMORY_SLACK)`.
    pub fn new(file_bytes: u64, kv_cache_bytes: u64, peak: u64) -> Self {
        let bound = ((file_bytes + kv_cache_bytes) as f64 * (1.0 + MEMORY_SLACK)) as u64;
        MemoryCheck {
            file_bytes,
            kv_cache_bytes,
            bound_bytes: bound,
            peak_rss_load_bytes: peak,
            within_bound: peak <= bound,
        }
    }
}

/// The peak RSS of whole `decide_next` turns against issue 3's bound, with the KV cache
/// at the longest context a turn reached.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TurnMemoryCheck {
    /// Model files.
    pub file_bytes: u64,
    /// The longest context of a turn.
    pub context_tokens: usize,
    /// KV cache at `context_tokens`.
    pub kv_cache_bytes: u64,
    /// `(file + kv) * 1.25`.
    pub bound_bytes: u64,
    /// Peak RSS during the turns.
    pub peak_rss_bytes: u64,
    /// Whether the peak counter was reset before the turns (else the peak includes
    /// everything before them).
    pub peak_reset: bool,
    /// `peak <= bound`.
    pub within_bound: bool,
}

impl TurnMemoryCheck {
    /// The check of `turn`'s memory for a model of `file_bytes`.
    pub fn new(file_bytes: u64, turn: &TurnResult) -> Self {
        let bound = ((file_bytes + turn.kv_cache_bytes) as f64 * (1.0 + MEMORY_SLACK)) as u64;
        let peak = turn.memory.end.peak_rss_bytes;
        TurnMemoryCheck {
            file_bytes,
            context_tokens: turn.context_tokens,
            kv_cache_bytes: turn.kv_cache_bytes,
            bound_bytes: bound,
            peak_rss_bytes: peak,
            peak_reset: turn.memory.peak_reset,
            within_bound: peak <= bound,
        }
    }
}

/// llama.cpp's figures on the same files, and ours over theirs.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct LlamaCppReport {
    /// Why nothing was compared, when nothing was.
    pub skipped: Option<String>,
    /// The `llama-bench` used.
    pub llama_bench: Option<String>,
    /// The `llama-mtmd-cli` used.
    pub llama_mtmd_cli: Option<String>,
    /// `llama-bench` prefill run.
    pub prefill: Option<LlamaBenchOutput>,
    /// `llama-bench` decode run.
    pub decode: Option<LlamaBenchOutput>,
    /// `llama-mtmd-cli` image timings.
    pub vision: Option<MtmdTimings>,
    /// Ours / llama.cpp prefill tokens/s (> 1: we are faster).
    pub prefill_ratio: Option<f64>,
    /// Ours / llama.cpp decode tokens/s (> 1: we are faster).
    pub decode_ratio: Option<f64>,
    /// llama.cpp encode time / ours (> 1: we are faster).
    pub vision_speed_ratio: Option<f64>,
    /// CPU features llama.cpp's build reports on (from `system_info`), when logged.
    pub cpu_features: Vec<String>,
    /// Errors of individual tool runs.
    pub errors: Vec<String>,
}

/// Everything `sightline bench` measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BenchReport {
    /// Crate version.
    pub sightline_version: String,
    /// The model.
    pub model: ModelReport,
    /// The machine.
    pub machine: MachineReport,
    /// The settings.
    pub settings: SettingsReport,
    /// Load time and memory.
    pub load: LoadResult,
    /// The machine's measured arithmetic peak (CPU runs only).
    pub peak: Option<Peak>,
    /// Peak memory against file + KV + 25%.
    pub memory_check: MemoryCheck,
    /// Vision encode.
    pub vision: Option<VisionResult>,
    /// Prefill.
    pub prefill: Option<PrefillResult>,
    /// Decode.
    pub decode: Option<DecodeResult>,
    /// Constrained decode.
    pub grammar: Option<GrammarResult>,
    /// Why the constrained decode failed, if it did.
    pub grammar_error: Option<String>,
    /// Whole turns.
    pub turn: Option<TurnResult>,
    /// Why the turns failed, if they did.
    pub turn_error: Option<String>,
    /// Memory at the end of each stage and its peak.
    pub memory_stages: Vec<StageMemory>,
    /// Peak RSS of the whole turns against the bound (`None` without turns).
    pub turn_memory_check: Option<TurnMemoryCheck>,
    /// Peak RSS over the whole run (after generation).
    pub peak_rss_bytes: u64,
    /// llama.cpp comparison, when asked for.
    pub llama_cpp: Option<LlamaCppReport>,
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1024.0 * 1024.0))
}

/// One row of the table: the stage, our figure, llama.cpp's, their ratio.
fn row(s: &mut String, name: &str, ours: String, theirs: String, r: String) {
    let _ = writeln!(s, "{name:<28} {ours:>14} {theirs:>14} {r:>9}");
}

/// A turn's stages, one row each, and its token counts.
fn stage_rows(s: &mut String, b: &StageTimes) {
    for (name, v) in [
        ("  preprocess", b.ms.preprocess_ms),
        ("  vision", b.ms.vision_ms),
        ("  prefill", b.ms.prefill_ms),
        ("  decode", b.ms.decode_ms),
        ("  grammar", b.ms.grammar_ms),
    ] {
        row(s, name, format!("{v:.0} ms"), String::new(), String::new());
    }
    let _ = writeln!(
        s,
        "  ({} prompt tokens fed, {}, {} generated, {} forced, {} forward passes{})",
        b.prefill_new,
        b.reused_words(),
        b.generated,
        b.forced,
        b.forward_passes,
        if b.image_encoded {
            ""
        } else {
            "; image not encoded again"
        }
    );
}

/// The measured peak in one line.
fn describe_peak(p: &Peak) -> String {
    let int8 = match (&p.int8_path, p.int8_gops) {
        (Some(path), Some(g)) => format!(", int8 {g:.0} GOP/s ({path} dots)"),
        _ => String::new(),
    };
    format!(
        "peak, measured on {} thread(s): f32 {:.0} GFLOP/s ({} multiply-adds){int8}",
        p.threads, p.f32_gflops, p.f32_path
    )
}

fn ratio(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.2}×")).unwrap_or_else(|| "–".into())
}

impl BenchReport {
    /// The whole run's bound: files + the KV cache at the run's longest context + 25%
    /// (the turns' bound when they ran: their context is the longest).
    pub fn run_bound_bytes(&self) -> u64 {
        let turns = self.turn_memory_check.as_ref().map_or(0, |t| t.bound_bytes);
        self.memory_check.bound_bytes.max(turns)
    }

    /// Whether the peak RSS of the whole run (every stage measured, whole turns included
    /// unless `--no-turn`) stays within [`Self::run_bound_bytes`].
    pub fn run_within_bound(&self) -> bool {
        self.peak_rss_bytes <= self.run_bound_bytes()
    }

    /// The whole turns, first in the table: what a user waits for.
    fn turn_rows(&self, s: &mut String, t: &TurnResult) {
        let _ = writeln!(s, "{:<28} {:>14}", "whole turn (decide_next)", "sightline");
        row(
            s,
            "first turn (cold)",
            format!("{:.0} ms", t.first_total_ms),
            String::new(),
            String::new(),
        );
        for (name, total, b) in [
            (
                if t.turns > 1 {
                    format!("new screen (median of {})", t.turns - 1)
                } else {
                    "the first turn's stages".to_string()
                },
                t.total_ms,
                &t.median_turn,
            ),
            (
                "same screen, next step".to_string(),
                t.warm_total_ms,
                &t.warm_turn,
            ),
            (
                "new process, new screen".to_string(),
                t.new_process_total_ms,
                &t.new_process_turn,
            ),
        ] {
            row(
                s,
                &name,
                format!("{total:.0} ms"),
                String::new(),
                String::new(),
            );
            stage_rows(s, b);
        }
        for (name, v) in [
            ("verify (turn's screen)", &t.verify_after_turn),
            ("verify (new screen)", &t.verify_fresh_screen),
        ] {
            row(
                s,
                name,
                format!("{:.0} ms", v.ms.total_ms),
                String::new(),
                String::new(),
            );
            let _ = writeln!(
                s,
                "  ({} prompt tokens fed, {} reused; vision {:.0} ms, prefill {:.0} ms)",
                v.prefill_new, v.prefill_reused, v.ms.vision_ms, v.ms.prefill_ms
            );
        }
    }

    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let m = &self.model;
        let _ = writeln!(
            s,
            "sightline bench {} — {} {} ({})",
            self.sightline_version,
            m.shape,
            m.format,
            mib(m.file_bytes)
        );
        let _ = writeln!(s, "  model: {}", m.source);
        if let Some(q) = &m.quantize {
            let _ = writeln!(s, "  quantized at load: {q}");
        }
        let mc = &self.machine;
        let _ = writeln!(
            s,
            "  device {}, {} activations, threads {} (candle {}), compiled with [{}], CPU has [{}]",
            mc.device,
            self.load.activations,
            mc.threads,
            mc.candle_threads,
            mc.compile_features.join(" "),
            mc.runtime_features.join(" ")
        );
        if mc.gpu {
            let _ = writeln!(
                s,
                "  the model ran on the GPU's kernels (candle's and Sightline's); the CPU ({} path) preprocessed",
                mc.kernel_path
            );
        } else {
            let _ = writeln!(
                s,
                "  kernel path: {} (chosen at run time{}); quantized matmuls: {}",
                mc.kernel_path,
                match &mc.kernel_path_forced {
                    Some(v) => format!(", {}={v}", cpu::CPU_FEATURES_ENV),
                    None => String::new(),
                },
                match &mc.q4k_q6k_kernels {
                    Some(k) => format!(
                        "Q4_K/Q6_K on Sightline's eight-row {k} kernels, other types candle's {}{}",
                        mc.candle_quantized_kernels,
                        match mc.other_types_widened_from_rows {
                            Some(rows) => format!(
                                " (from {rows} rows: Q8_0 on the eight-row kernel, the rest widened to f32)"
                            ),
                            None => " (Q8_0 on many rows on the eight-row kernel)".to_string(),
                        }
                    ),
                    None => format!("candle's {}", mc.candle_quantized_kernels),
                }
            );
            for w in &mc.build_warnings {
                let _ = writeln!(s, "  warning: {w}");
            }
        }
        let st = &self.settings;
        let _ = writeln!(
            s,
            "  prompt {} tokens, {} decode steps, median of {}",
            st.prompt_tokens, st.gen_tokens, st.repeat
        );
        if let Some(p) = &self.peak {
            let _ = writeln!(s, "  {}", describe_peak(p));
        }
        s.push('\n');
        if let Some(t) = &self.turn {
            self.turn_rows(&mut s, t);
        }
        if let Some(e) = &self.turn_error {
            let _ = writeln!(s, "turn: failed: {e}");
        }
        let _ = writeln!(
            s,
            "\n{:<28} {:>14} {:>14} {:>9}",
            "stage", "sightline", "llama.cpp", "ratio"
        );
        let l = &self.load;
        row(
            &mut s,
            "load",
            format!("{:.0} ms", l.load_ms),
            String::new(),
            String::new(),
        );
        row(
            &mut s,
            "RSS after load",
            mib(l.rss_after_load_bytes),
            String::new(),
            String::new(),
        );
        row(
            &mut s,
            "peak RSS during load",
            mib(l.peak_rss_load_bytes),
            String::new(),
            String::new(),
        );
        let lc = self.llama_cpp.as_ref();
        if let Some(v) = &self.vision {
            row(
                &mut s,
                "image preprocess",
                format!("{:.0} ms", v.preprocess_ms),
                String::new(),
                String::new(),
            );
            row(
                &mut s,
                &format!("vision encode ({} tok)", v.visual_tokens),
                format!("{:.0} ms", v.encode_ms),
                lc.and_then(|c| c.vision.as_ref())
                    .map(|t| format!("{:.0} ms", t.encode_ms))
                    .unwrap_or_default(),
                ratio(lc.and_then(|c| c.vision_speed_ratio)),
            );
            let _ = writeln!(
                s,
                "  ({:.0} GOP: {})",
                v.throughput.gop,
                v.throughput.describe()
            );
        }
        if let Some(p) = &self.prefill {
            row(
                &mut s,
                &format!("prefill {} tok", p.tokens),
                format!("{:.1} tok/s", p.tokens_per_s),
                lc.and_then(|c| c.prefill.as_ref())
                    .and_then(|o| o.prefill_ts(p.tokens as u64))
                    .map(|t| format!("{t:.1} tok/s"))
                    .unwrap_or_default(),
                ratio(lc.and_then(|c| c.prefill_ratio)),
            );
            let _ = writeln!(
                s,
                "  ({:.1} GOP: {})",
                p.throughput.gop,
                p.throughput.describe()
            );
        }
        if let Some(d) = &self.decode {
            row(
                &mut s,
                &format!("decode {} tok @ {}", d.tokens, d.context_tokens),
                format!("{:.2} tok/s", d.tokens_per_s),
                lc.and_then(|c| c.decode.as_ref())
                    .and_then(|o| o.decode_ts(d.tokens as u64))
                    .map(|t| format!("{t:.2} tok/s"))
                    .unwrap_or_default(),
                ratio(lc.and_then(|c| c.decode_ratio)),
            );
            row(
                &mut s,
                "decode step",
                format!("{:.1} ms", d.step_ms),
                String::new(),
                String::new(),
            );
        }
        if let Some(g) = &self.grammar {
            for (name, value) in [
                ("grammar per token", format!("{:.1} µs", g.per_token_us)),
                (
                    "  of which commits",
                    format!("{:.1} µs", g.commit_per_token_us),
                ),
                (
                    "  per sampled token p50 / p99",
                    format!("{:.0} / {:.0} µs", g.step_p50_us, g.step_p99_us),
                ),
                (
                    "  commits computing a run",
                    format!(
                        "{:.1}% of them, p50 {:.0} µs; the others p99 {:.0} µs",
                        100.0 * g.run_step_share,
                        g.run_step_p50_us,
                        g.other_step_p99_us
                    ),
                ),
                (
                    "  guessed (no mask)",
                    format!("{}/{}", g.guessed_tokens, g.sampled_tokens),
                ),
                (
                    if g.beside_by_default {
                        "  not beside: p50 / p99"
                    } else {
                        "  beside, after pass"
                    },
                    format!(
                        "{:.0} / {:.0} µs (+{:.0} µs/token beside it; {} copies, {} taken, {} commits fed first, {} late)",
                        g.alt_step_p50_us,
                        g.alt_step_p99_us,
                        g.beside_us_per_step,
                        g.ahead_copies,
                        g.committed_ahead,
                        g.committed_beside,
                        g.late_runs
                    ),
                ),
                (
                    "  pass (these / those)",
                    format!("{:.2} / {:.2} ms", g.pass_ms, g.alt_pass_ms),
                ),
                (
                    "  mask p50 / p99",
                    format!("{:.0} / {:.0} µs", g.mask_p50_us, g.mask_p99_us),
                ),
                (
                    "grammar / decode step",
                    format!("{:.3}%", g.ratio_to_decode_step * 100.0),
                ),
                (
                    "forced tokens",
                    format!(
                        "{}/{} ({:.0}%)",
                        g.forced_tokens,
                        g.tokens,
                        g.forced_share * 100.0
                    ),
                ),
                ("grammar compile", format!("{:.1} ms", g.compile_ms)),
                (
                    "  warm-up beside the prefill",
                    format!(
                        "{} walks, {} tok, {:.0} ms",
                        g.warm_up_walks, g.warm_up_tokens, g.warm_up_ms
                    ),
                ),
            ] {
                row(&mut s, name, value, String::new(), String::new());
            }
        }
        if let Some(e) = &self.grammar_error {
            let _ = writeln!(s, "grammar: failed: {e}");
        }
        let mcheck = &self.memory_check;
        let _ = writeln!(
            s,
            "\nmemory: peak during load {} vs files {} + KV cache {} + {:.0}% = {}: {}",
            mib(mcheck.peak_rss_load_bytes),
            mib(mcheck.file_bytes),
            mib(mcheck.kv_cache_bytes),
            MEMORY_SLACK * 100.0,
            mib(mcheck.bound_bytes),
            if mcheck.within_bound {
                "within"
            } else {
                "OVER"
            }
        );
        if !self.load.peak_reset {
            let _ = writeln!(
                s,
                "  (the peak counter could not be reset: it includes model generation)"
            );
        }
        let _ = writeln!(
            s,
            "peak RSS of the whole run (load, vision, prefill, decode{}): {} vs files + KV cache at its longest context + {:.0}% = {}: {}",
            if self.turn.is_some() { ", turns" } else { "" },
            mib(self.peak_rss_bytes),
            MEMORY_SLACK * 100.0,
            mib(self.run_bound_bytes()),
            if self.run_within_bound() {
                "within"
            } else {
                "OVER"
            }
        );
        if !self.memory_stages.is_empty() {
            let _ = writeln!(
                s,
                "memory by stage (RSS at its end = anonymous + file-backed; peak during it):"
            );
            for m in &self.memory_stages {
                let _ = writeln!(
                    s,
                    "  {:<8} {:>9} = {:>9} + {:>9}   peak {:>9}{}",
                    m.stage,
                    mib(m.end.rss_bytes),
                    mib(m.end.rss_anon_bytes),
                    mib(m.end.rss_file_bytes),
                    mib(m.end.peak_rss_bytes),
                    if m.peak_reset { "" } else { " (since start)" }
                );
            }
        }
        if let Some(t) = &self.turn_memory_check {
            let _ = writeln!(
                s,
                "peak RSS of a whole decide_next turn: {} vs files {} + KV cache {} ({} tokens) + {:.0}% = {}: {}{}",
                mib(t.peak_rss_bytes),
                mib(t.file_bytes),
                mib(t.kv_cache_bytes),
                t.context_tokens,
                MEMORY_SLACK * 100.0,
                mib(t.bound_bytes),
                if t.within_bound { "within" } else { "OVER" },
                if t.peak_reset {
                    ""
                } else {
                    " (the peak counter could not be reset: it includes the stages before)"
                }
            );
        }
        if let Some(c) = lc {
            if let Some(why) = &c.skipped {
                let _ = writeln!(s, "llama.cpp: not compared: {why}");
            } else {
                let _ = writeln!(
                    s,
                    "llama.cpp: {} / {}",
                    c.llama_bench.as_deref().unwrap_or("no llama-bench"),
                    c.llama_mtmd_cli.as_deref().unwrap_or("no llama-mtmd-cli")
                );
                if let Some(p) = c.prefill.as_ref().or(c.decode.as_ref()) {
                    let _ = writeln!(
                        s,
                        "  llama.cpp CPU: {} (backends {}, build {})",
                        p.cpu_info, p.backends, p.build_commit
                    );
                }
                if !c.cpu_features.is_empty() {
                    let _ = writeln!(s, "  llama.cpp CPU features: {}", c.cpu_features.join(" "));
                }
                let _ = writeln!(s, "  ratios: ours/llama.cpp tokens/s for prefill and decode; llama.cpp/ours time for vision (> 1: sightline faster)");
                for e in &c.errors {
                    let _ = writeln!(s, "  error: {e}");
                }
            }
        }
        s
    }
}
