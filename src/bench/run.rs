//! One `sightline bench` run: the model to measure (generated or resolved), every stage on
//! the chosen device, and llama.cpp's tools on the same files when comparing, alternating with
//! ours stage by stage so both see the same machine state.

use std::path::{Path, PathBuf};
use std::time::Duration;

use candle_core::quantized::GgmlDType;

use super::llama_cpp::{features_on, run_llama_bench, run_mtmd, LlamaRun, LlamaTools, ToolSearch};
use super::report::{
    BenchReport, LlamaCppReport, MachineReport, MemoryCheck, ModelReport, SettingsReport,
    TurnMemoryCheck,
};
use super::stages::{
    memory_sample, synthetic_screenshot, DecodeResult, GrammarResult, PrefillResult, StageBench,
    StageMemory, StageOptions, TurnResult, VisionResult,
};
use super::{default_cache_root, ensure_model, BenchFormat, GenerateOptions, ModelShape};
use crate::cpu;
use crate::error::{Error, Result};
use crate::input_file::{self, InputKind};
use crate::model::weights::ModelSource;
use crate::model::DeviceChoice;

/// Everything one bench run is made of, resolved from the command line.
#[derive(Debug, Clone)]
pub struct BenchSettings {
    /// Measure this model (a `--model` spec) instead of a generated one.
    pub model: Option<String>,
    /// Shape of the generated model.
    pub shape: ModelShape,
    /// Format of the generated model.
    pub format: BenchFormat,
    /// Where generated models are cached.
    pub cache_dir: Option<PathBuf>,
    /// Quantize a safetensors model while loading.
    pub quantize: Option<GgmlDType>,
    /// The activation type; `None`: the device's default.
    pub dtype: Option<candle_core::DType>,
    /// Where the model runs.
    pub device: DeviceChoice,
    /// Threads of the model, the preprocessing and llama.cpp.
    pub threads: usize,
    /// Prefill prompt length.
    pub prompt_tokens: usize,
    /// Single-token decode steps.
    pub gen_tokens: usize,
    /// Repetitions of each measurement.
    pub repeat: usize,
    /// The screenshot; default: a generated 1920×1080 one.
    pub image: Option<PathBuf>,
    /// Visual-token budget of the screenshot.
    pub max_visual_tokens: usize,
    /// Skip the vision-encode measurement.
    pub no_vision: bool,
    /// Skip the whole-turn measurement.
    pub no_turn: bool,
    /// Run llama.cpp's tools on the same files: where to find them, and how long one run may
    /// take.
    pub llama_cpp: Option<(ToolSearch, Duration)>,
}

/// Runs the bench; `note` gets one progress line per stage (the CLI prints them on stderr).
pub fn run_bench(settings: &BenchSettings, note: &dyn Fn(&str)) -> Result<BenchReport> {
    let (source, model_report) = bench_model(settings, note)?;
    let png = match &settings.image {
        Some(p) => input_file::read_bytes(p, InputKind::Image)?,
        None => synthetic_screenshot(1920, 1080, 0)?,
    };
    let device = settings.device.resolve()?;
    let mut options = StageOptions {
        prompt_tokens: settings.prompt_tokens,
        gen_tokens: settings.gen_tokens,
        repeat: settings.repeat,
        max_visual_tokens: settings.max_visual_tokens,
        threads: settings.threads,
        quantize: if matches!(source, ModelSource::Safetensors { .. }) {
            settings.quantize
        } else {
            None
        },
        dtype: settings.dtype,
        seed: 7,
        device: device.clone(),
        peak: None,
    };
    let (mut llama, tools) = find_llama_cpp(settings, &source)?;
    if device.is_cpu() {
        note("measuring the machine's peak");
        options.peak = Some(cpu::peak::measure(cpu::path(), settings.threads));
    }
    let lrun = LlamaRun {
        threads: settings.threads,
        repeat: settings.repeat,
        timeout: settings
            .llama_cpp
            .as_ref()
            .map_or(Duration::from_secs(1800), |(_, t)| *t),
        gpu: !device.is_cpu(),
    };

    note(&format!("loading on {device:?}"));
    let (mut stages, load) = StageBench::load(&source, &options)?;
    let kv = stages.kv_cache_bytes();
    let memory_check = MemoryCheck::new(model_report.file_bytes, kv, load.peak_rss_load_bytes);

    let mut vision = if settings.no_vision {
        None
    } else {
        note("vision encode");
        let vision = stages.vision(&png)?;
        if let (Some(report), Some(tools)) = (llama.as_mut(), tools.as_ref()) {
            compare_vision(settings, &source, &png, &vision, tools, &lrun, report, note)?;
        }
        Some(vision)
    };
    let bench_tool = tools.as_ref().and_then(|t| t.bench.clone());
    let text_gguf = match &source {
        ModelSource::Gguf { text, .. } => Some(text.clone()),
        ModelSource::Safetensors { .. } => None,
    };
    let llama_bench = match (llama.as_mut(), &bench_tool, &text_gguf) {
        (Some(report), Some(tool), Some(text)) => Some((report, tool, text)),
        _ => None,
    };
    let (mut prefill, decode) =
        prefill_and_decode(settings, &mut stages, llama_bench, &lrun, note)?;
    let mut memory_stages = stages.memory().to_vec();
    let (grammar, grammar_error, turn, turn_error) =
        grammar_and_turns(settings, stages, &png, &mut memory_stages, note);
    let turn_memory_check = turn
        .as_ref()
        .map(|t| TurnMemoryCheck::new(model_report.file_bytes, t));
    // The peak once more at the end, the better measure counting (see `Peak::best_of`).
    if let Some(first) = options.peak.take() {
        note("measuring the machine's peak again");
        let peak = first.best_of(cpu::peak::measure(cpu::path(), settings.threads));
        if let Some(v) = vision.as_mut() {
            v.throughput.held_against(Some(&peak));
        }
        prefill.throughput.held_against(Some(&peak));
        options.peak = Some(peak);
    }
    Ok(BenchReport {
        sightline_version: env!("CARGO_PKG_VERSION").to_string(),
        model: model_report,
        machine: MachineReport::current(settings.threads, &device),
        settings: SettingsReport {
            prompt_tokens: settings.prompt_tokens,
            gen_tokens: settings.gen_tokens,
            repeat: settings.repeat,
            visual_token_budget: settings.max_visual_tokens,
        },
        load,
        peak: options.peak.clone(),
        memory_check,
        vision,
        prefill: Some(prefill),
        decode: Some(decode),
        grammar,
        grammar_error,
        turn,
        turn_error,
        memory_stages,
        turn_memory_check,
        peak_rss_bytes: memory_sample().map(|m| m.peak_rss_bytes).unwrap_or(0),
        llama_cpp: llama,
    })
}

fn files_size(source: &ModelSource) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    match source {
        ModelSource::Gguf { text, mmproj } => size(text) + size(mmproj),
        ModelSource::Safetensors { dir } => std::fs::read_dir(dir)
            .map(|it| {
                it.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".safetensors"))
                    .map(|e| size(&e.path()))
                    .sum()
            })
            .unwrap_or(0),
    }
}

fn describe(source: &ModelSource) -> String {
    match source {
        ModelSource::Gguf { text, mmproj } => format!("{} + {}", text.display(), mmproj.display()),
        ModelSource::Safetensors { dir } => dir.display().to_string(),
    }
}

/// The model to measure: `--model` resolved through the hub, or a generated (or cached)
/// random model of the settings' shape and format. `quantize` applies to safetensors only.
fn bench_model(
    settings: &BenchSettings,
    note: &dyn Fn(&str),
) -> Result<(ModelSource, ModelReport)> {
    let quantize_label = |gguf: bool| {
        if gguf {
            None
        } else {
            settings.quantize.map(|q| format!("{q:?}"))
        }
    };
    if let Some(spec) = &settings.model {
        let source = ModelSource::try_from(&crate::hub::resolve_model(spec)?)?;
        let gguf = matches!(source, ModelSource::Gguf { .. });
        let report = ModelReport {
            shape: "custom".into(),
            format: if gguf { "gguf" } else { "safetensors" }.into(),
            quantize: quantize_label(gguf),
            source: describe(&source),
            file_bytes: files_size(&source),
            generated: false,
            generate_s: 0.0,
        };
        return Ok((source, report));
    }
    let (shape, format) = (settings.shape, settings.format);
    let root = settings
        .cache_dir
        .clone()
        .unwrap_or_else(default_cache_root);
    note(&format!("model: {shape} {format} in {}", root.display()));
    let made = ensure_model(
        shape,
        format,
        &root,
        &GenerateOptions {
            threads: settings.threads,
            progress: true,
        },
    )?;
    if made.generated {
        note(&format!("generated in {:.1} s", made.generate_secs));
    } else {
        note("reused from the cache");
    }
    let report = ModelReport {
        shape: shape.name().into(),
        format: format.name().into(),
        quantize: quantize_label(format.is_gguf()),
        source: describe(&made.source),
        file_bytes: made.file_bytes,
        generated: made.generated,
        generate_s: made.generate_secs,
    };
    Ok((made.source, report))
}

/// When comparing: the report to fill and the tools found (a GGUF pair only).
fn find_llama_cpp(
    settings: &BenchSettings,
    source: &ModelSource,
) -> Result<(Option<LlamaCppReport>, Option<LlamaTools>)> {
    let Some((search, _)) = &settings.llama_cpp else {
        return Ok((None, None));
    };
    let mut report = LlamaCppReport::default();
    if !matches!(source, ModelSource::Gguf { .. }) {
        report.skipped = Some(
            "the comparison needs a GGUF pair (--format q4_k_m or q8_0); llama.cpp cannot load a safetensors directory".into(),
        );
        return Ok((Some(report), None));
    }
    let found = search.resolve()?;
    if found.bench.is_none() && found.mtmd_cli.is_none() {
        report.skipped = Some("neither llama-bench nor llama-mtmd-cli was found (PATH, --llama-dir, --llama-bench, --llama-mtmd-cli)".into());
    }
    report.llama_bench = found.bench.as_ref().map(|p| p.display().to_string());
    report.llama_mtmd_cli = found.mtmd_cli.as_ref().map(|p| p.display().to_string());
    Ok((Some(report), Some(found)))
}

/// llama-mtmd-cli on the same files and screenshot, right after our vision encode.
#[allow(clippy::too_many_arguments)]
fn compare_vision(
    settings: &BenchSettings,
    source: &ModelSource,
    png: &[u8],
    vision: &VisionResult,
    tools: &LlamaTools,
    lrun: &LlamaRun,
    report: &mut LlamaCppReport,
    note: &dyn Fn(&str),
) -> Result<()> {
    let (ModelSource::Gguf { text, mmproj }, Some(tool)) = (source, &tools.mtmd_cli) else {
        return Ok(());
    };
    note("llama.cpp: llama-mtmd-cli");
    // llama-mtmd-cli reads a file: the user's screenshot, or the generated one written to a
    // temporary file that is removed however this ends.
    let written;
    let image_path = match &settings.image {
        Some(p) => p.as_path(),
        None => {
            let file = tempfile::Builder::new()
                .prefix("sightline-bench-")
                .suffix(".png")
                .tempfile()
                .map_err(|e| Error::io(std::env::temp_dir(), e))?;
            std::fs::write(file.path(), png).map_err(|e| Error::io(file.path(), e))?;
            written = file;
            written.path()
        }
    };
    match run_mtmd(
        tool,
        text,
        mmproj,
        image_path,
        settings.max_visual_tokens,
        lrun,
    ) {
        Ok(t) => {
            report.vision_speed_ratio = Some(t.encode_ms / vision.encode_ms);
            if let Some(info) = &t.system_info {
                report.cpu_features = features_on(info);
            }
            report.vision = Some(t);
        }
        Err(e) => report.errors.push(format!("llama-mtmd-cli: {e}")),
    }
    Ok(())
}

/// Our prefill and decode, each followed by llama-bench's on the same text GGUF when
/// comparing.
fn prefill_and_decode(
    settings: &BenchSettings,
    stages: &mut StageBench,
    mut llama: Option<(&mut LlamaCppReport, &PathBuf, &PathBuf)>,
    lrun: &LlamaRun,
    note: &dyn Fn(&str),
) -> Result<(PrefillResult, DecodeResult)> {
    note("prefill");
    let prefill = stages.prefill()?;
    if let Some((report, tool, text)) = llama.as_mut() {
        note("llama.cpp: llama-bench prefill");
        match run_llama_bench(tool, text, settings.prompt_tokens, 0, 0, lrun) {
            Ok(out) => {
                report.prefill_ratio = out
                    .prefill_ts(settings.prompt_tokens as u64)
                    .map(|t| prefill.tokens_per_s / t);
                report.prefill = Some(out);
            }
            Err(e) => report.errors.push(format!("llama-bench prefill: {e}")),
        }
    }
    note("decode");
    let decode = stages.decode()?;
    if let Some((report, tool, text)) = llama.as_mut() {
        note("llama.cpp: llama-bench decode");
        match run_llama_bench(
            tool,
            text,
            0,
            settings.gen_tokens,
            decode.context_tokens,
            lrun,
        ) {
            Ok(out) => {
                report.decode_ratio = out
                    .decode_ts(settings.gen_tokens as u64)
                    .map(|t| decode.tokens_per_s / t);
                report.decode = Some(out);
            }
            Err(e) => report.errors.push(format!("llama-bench decode: {e}")),
        }
    }
    Ok((prefill, decode))
}

/// What the constrained-decode and whole-turn stages give: each result, or why it failed.
type LastStages = (
    Option<GrammarResult>,
    Option<String>,
    Option<TurnResult>,
    Option<String>,
);

/// The constrained decode and the whole turns; a failure of either is reported in the
/// result rather than ending the benchmark. `memory` gets their memory.
fn grammar_and_turns(
    settings: &BenchSettings,
    mut stages: StageBench,
    png: &[u8],
    memory: &mut Vec<StageMemory>,
    note: &dyn Fn(&str),
) -> LastStages {
    note("constrained decode");
    let (grammar, grammar_error) = match stages.grammar(20) {
        Ok(g) => (Some(g), None),
        Err(e) => (None, Some(e.to_string())),
    };
    memory.extend(stages.memory().iter().skip(memory.len()).cloned());
    if settings.no_turn {
        return (grammar, grammar_error, None, None);
    }
    note("whole turns");
    let custom_image = settings.image.is_some();
    let (turn, turn_error) = match stages.turns(|i| {
        if custom_image {
            Ok(png.to_vec())
        } else {
            synthetic_screenshot(1920, 1080, i as u32 + 1)
        }
    }) {
        Ok(t) => (Some(t), None),
        Err(e) => (None, Some(e.to_string())),
    };
    if let Some(t) = &turn {
        memory.push(t.memory.clone());
    }
    (grammar, grammar_error, turn, turn_error)
}
