//! `sightline bench`: make (or take) a real-shape model, measure one turn's stages on it,
//! and optionally run llama.cpp on the same files. See `sightline::bench` and the README.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use candle_core::quantized::GgmlDType;
use sightline::bench::llama_cpp::{
    features_on, run_llama_bench, run_mtmd, LlamaRun, LlamaTools, ToolSearch,
};
use sightline::bench::report::{
    BenchReport, LlamaCppReport, MachineReport, MemoryCheck, ModelReport, SettingsReport,
    TurnMemoryCheck,
};
use sightline::bench::stages::{
    memory_sample, synthetic_screenshot, DecodeResult, GrammarResult, PrefillResult, StageBench,
    StageMemory, StageOptions, TurnResult, VisionResult,
};
use sightline::bench::{
    default_cache_root, ensure_model, BenchFormat, GenerateOptions, ModelShape,
};
use sightline::model::weights::ModelSource;
use sightline::model::Quantization;

use crate::cli::resolve::{parse_quantize, resolve_model};

/// Arguments of `sightline bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Model shape to generate: 2b, 4b or 8b (Qwen3-VL dimensions, random weights).
    #[arg(long, default_value = "2b")]
    pub shape: String,
    /// Format to generate: q4_k_m or q8_0 (GGUF pair, llama.cpp layout) or f16 (safetensors).
    #[arg(long, default_value = "q4_k_m")]
    pub format: String,
    /// Quantize an f16 safetensors model while loading: q4k, q5k, q6k, q8_0 or none.
    #[arg(long, default_value = "q4k")]
    pub quantize: String,
    /// Measure this model instead of a generated one, resolved like every command's
    /// `--model`: a local path (a safetensors directory, a text GGUF with its mmproj*.gguf
    /// beside it, or a directory holding a GGUF pair), a manifest id or a Hub repo id.
    #[arg(long)]
    pub model: Option<String>,
    /// Where generated models are cached (default: $SIGHTLINE_CACHE/bench or ~/.cache/sightline/bench).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Threads for the model, preprocessing and llama.cpp (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Prefill prompt length.
    #[arg(long, default_value_t = 512)]
    pub prompt_tokens: usize,
    /// Single-token decode steps.
    #[arg(long, default_value_t = 64)]
    pub gen_tokens: usize,
    /// Repetitions of each measurement; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// The screenshot (PNG); default: a generated 1920×1080 one.
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// Visual-token budget of the screenshot.
    #[arg(long, default_value_t = 1280)]
    pub max_visual_tokens: usize,
    /// Skip the vision-encode measurement (ours and llama-mtmd-cli's): on a few CPU
    /// cores one 1,280-token encode takes minutes.
    #[arg(long)]
    pub no_vision: bool,
    /// Skip the whole-turn measurement.
    #[arg(long)]
    pub no_turn: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Run llama.cpp's llama-bench and llama-mtmd-cli on the same files and print ratios.
    #[arg(long)]
    pub compare_llama_cpp: bool,
    /// The llama-bench binary (default: --llama-dir, then PATH).
    #[arg(long)]
    pub llama_bench: Option<PathBuf>,
    /// The llama-mtmd-cli binary (default: --llama-dir, then PATH).
    #[arg(long)]
    pub llama_mtmd_cli: Option<PathBuf>,
    /// A directory holding the llama.cpp tools (or their bin/ or build/bin/).
    #[arg(long)]
    pub llama_dir: Option<PathBuf>,
    /// Longest a single llama.cpp run may take, seconds.
    #[arg(long, default_value_t = 1800)]
    pub llama_timeout_s: u64,
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

/// A progress note, on stderr: stdout holds only the table or the JSON.
fn note(msg: &str) {
    eprintln!("{msg}");
}

/// Run `sightline bench`; the process exit code.
pub fn bench(args: &BenchArgs) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sightline bench: {}", crate::cli::error_line(&e));
            2
        }
    }
}

fn run(args: &BenchArgs) -> Result<()> {
    let threads = set_threads(args.threads);
    let quantize = parse_quantize(&args.quantize)?.map(Quantization::dtype);
    let (source, model_report) = bench_model(args, threads, quantize)?;
    let png = match &args.image {
        Some(p) => std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
        None => synthetic_screenshot(1920, 1080, 0)?,
    };
    let options = StageOptions {
        prompt_tokens: args.prompt_tokens,
        gen_tokens: args.gen_tokens,
        repeat: args.repeat,
        max_visual_tokens: args.max_visual_tokens,
        threads,
        quantize: if matches!(source, ModelSource::Safetensors { .. }) {
            quantize
        } else {
            None
        },
        seed: 7,
    };
    let (mut llama, tools) = find_llama_cpp(args, &source)?;
    let lrun = LlamaRun {
        threads,
        repeat: args.repeat,
        timeout: Duration::from_secs(args.llama_timeout_s),
    };

    note("loading");
    let (mut stages, load) = StageBench::load(&source, &options)?;
    let kv = stages.kv_cache_bytes();
    let memory_check = MemoryCheck::new(model_report.file_bytes, kv, load.peak_rss_load_bytes);

    // Ours and llama.cpp's alternate, stage by stage.
    let vision = if args.no_vision {
        None
    } else {
        note("vision encode");
        let vision = stages.vision(&png)?;
        if let (Some(report), Some(tools)) = (llama.as_mut(), tools.as_ref()) {
            compare_vision(args, &source, &png, &vision, tools, &lrun, report)?;
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
    let (prefill, decode) = prefill_and_decode(args, &mut stages, llama_bench, &lrun)?;
    let mut memory_stages = stages.memory().to_vec();
    let (grammar, grammar_error, turn, turn_error) =
        grammar_and_turns(args, stages, &png, &mut memory_stages);
    let turn_memory_check = turn
        .as_ref()
        .map(|t| TurnMemoryCheck::new(model_report.file_bytes, t));

    let report = BenchReport {
        sightline_version: env!("CARGO_PKG_VERSION").to_string(),
        model: model_report,
        machine: MachineReport::current(threads),
        settings: SettingsReport {
            prompt_tokens: args.prompt_tokens,
            gen_tokens: args.gen_tokens,
            repeat: args.repeat,
            visual_token_budget: args.max_visual_tokens,
        },
        load,
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
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}

/// The thread count (default: all cores), set for candle's pools before any tensor work:
/// they size themselves from these variables on first use.
fn set_threads(threads: Option<usize>) -> usize {
    let threads = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    std::env::set_var("CANDLE_NUM_THREADS", threads.to_string());
    threads
}

/// The model to measure: `--model` resolved through the hub, or a generated (or cached)
/// random model of `--shape` and `--format`. `quantize` applies to safetensors only.
fn bench_model(
    args: &BenchArgs,
    threads: usize,
    quantize: Option<GgmlDType>,
) -> Result<(ModelSource, ModelReport)> {
    if let Some(spec) = &args.model {
        let source = ModelSource::try_from(&resolve_model(Some(spec))?)?;
        let gguf = matches!(source, ModelSource::Gguf { .. });
        let report = ModelReport {
            shape: "custom".into(),
            format: if gguf { "gguf" } else { "safetensors" }.into(),
            quantize: if gguf {
                None
            } else {
                quantize.map(|q| format!("{q:?}"))
            },
            source: describe(&source),
            file_bytes: files_size(&source),
            generated: false,
            generate_s: 0.0,
        };
        return Ok((source, report));
    }
    let shape: ModelShape = args.shape.parse()?;
    let format: BenchFormat = args.format.parse()?;
    let root = args.cache_dir.clone().unwrap_or_else(default_cache_root);
    note(&format!("model: {shape} {format} in {}", root.display()));
    let made = ensure_model(
        shape,
        format,
        &root,
        &GenerateOptions {
            threads,
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
        quantize: if format.is_gguf() {
            None
        } else {
            quantize.map(|q| format!("{q:?}"))
        },
        source: describe(&made.source),
        file_bytes: made.file_bytes,
        generated: made.generated,
        generate_s: made.generate_secs,
    };
    Ok((made.source, report))
}

/// With `--compare-llama-cpp`: the report to fill and the tools found (a GGUF pair only).
fn find_llama_cpp(
    args: &BenchArgs,
    source: &ModelSource,
) -> Result<(Option<LlamaCppReport>, Option<LlamaTools>)> {
    if !args.compare_llama_cpp {
        return Ok((None, None));
    }
    let mut report = LlamaCppReport::default();
    if !matches!(source, ModelSource::Gguf { .. }) {
        report.skipped = Some(
            "the comparison needs a GGUF pair (--format q4_k_m or q8_0); llama.cpp cannot load a safetensors directory".into(),
        );
        return Ok((Some(report), None));
    }
    let found = ToolSearch {
        bench: args.llama_bench.clone(),
        mtmd_cli: args.llama_mtmd_cli.clone(),
        dir: args.llama_dir.clone(),
    }
    .resolve()?;
    if found.bench.is_none() && found.mtmd_cli.is_none() {
        report.skipped = Some("neither llama-bench nor llama-mtmd-cli was found (PATH, --llama-dir, --llama-bench, --llama-mtmd-cli)".into());
    }
    report.llama_bench = found.bench.as_ref().map(|p| p.display().to_string());
    report.llama_mtmd_cli = found.mtmd_cli.as_ref().map(|p| p.display().to_string());
    Ok((Some(report), Some(found)))
}

/// llama-mtmd-cli on the same files and screenshot, right after our vision encode.
fn compare_vision(
    args: &BenchArgs,
    source: &ModelSource,
    png: &[u8],
    vision: &VisionResult,
    tools: &LlamaTools,
    lrun: &LlamaRun,
    report: &mut LlamaCppReport,
) -> Result<()> {
    let (ModelSource::Gguf { text, mmproj }, Some(tool)) = (source, &tools.mtmd_cli) else {
        return Ok(());
    };
    note("llama.cpp: llama-mtmd-cli");
    let image_path = match &args.image {
        Some(p) => p.clone(),
        None => {
            let p =
                std::env::temp_dir().join(format!("sightline-bench-{}.png", std::process::id()));
            std::fs::write(&p, png).with_context(|| format!("writing {}", p.display()))?;
            p
        }
    };
    match run_mtmd(
        tool,
        text,
        mmproj,
        &image_path,
        args.max_visual_tokens,
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
    if args.image.is_none() {
        let _ = std::fs::remove_file(&image_path);
    }
    Ok(())
}

/// Our prefill and decode, each followed by llama-bench's on the same text GGUF when
/// comparing.
fn prefill_and_decode(
    args: &BenchArgs,
    stages: &mut StageBench,
    mut llama: Option<(&mut LlamaCppReport, &PathBuf, &PathBuf)>,
    lrun: &LlamaRun,
) -> Result<(PrefillResult, DecodeResult)> {
    note("prefill");
    let prefill = stages.prefill()?;
    if let Some((report, tool, text)) = llama.as_mut() {
        note("llama.cpp: llama-bench prefill");
        match run_llama_bench(tool, text, args.prompt_tokens, 0, 0, lrun) {
            Ok(out) => {
                report.prefill_ratio = out
                    .prefill_ts(args.prompt_tokens as u64)
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
        match run_llama_bench(tool, text, 0, args.gen_tokens, decode.context_tokens, lrun) {
            Ok(out) => {
                report.decode_ratio = out
                    .decode_ts(args.gen_tokens as u64)
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
/// result rather than ending the benchmark.
/// `memory` gets the constrained decode's and the turns' memory.
fn grammar_and_turns(
    args: &BenchArgs,
    mut stages: StageBench,
    png: &[u8],
    memory: &mut Vec<StageMemory>,
) -> LastStages {
    note("constrained decode");
    let (grammar, grammar_error) = match stages.grammar(20) {
        Ok(g) => (Some(g), None),
        Err(e) => (None, Some(e.to_string())),
    };
    memory.extend(stages.memory().iter().skip(memory.len()).cloned());
    if args.no_turn {
        return (grammar, grammar_error, None, None);
    }
    note("whole turns");
    let custom_image = args.image.is_some();
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
