//! `sightline bench`: make (or take) a real-shape model, measure one turn's stages on it,
//! and optionally run llama.cpp on the same files. See `sightline::bench` and the README.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use candle_core::quantized::GgmlDType;
use sightline::bench::llama_cpp::{features_on, run_llama_bench, run_mtmd, LlamaRun, ToolSearch};
use sightline::bench::report::{
    BenchReport, LlamaCppReport, MachineReport, MemoryCheck, ModelReport, SettingsReport,
};
use sightline::bench::stages::{memory_sample, synthetic_screenshot, StageBench, StageOptions};
use sightline::bench::{
    default_cache_root, ensure_model, BenchFormat, GenerateOptions, ModelShape,
};
use sightline::model::weights::ModelSource;

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
    /// Measure this model instead of a generated one: a safetensors directory, or a text
    /// GGUF with its mmproj*.gguf beside it.
    #[arg(long)]
    pub model: Option<PathBuf>,
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
    /// Compute with every matrix in its stored type (no Q6_K → Q8_0 requantization on
    /// VNNI CPUs), as llama.cpp does.
    #[arg(long)]
    pub exact_weights: bool,
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

fn parse_quantize(s: &str) -> Result<Option<GgmlDType>> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "none" => None,
        "q4k" | "q4_k" => Some(GgmlDType::Q4K),
        "q5k" | "q5_k" => Some(GgmlDType::Q5K),
        "q6k" | "q6_k" => Some(GgmlDType::Q6K),
        "q8_0" | "q8" => Some(GgmlDType::Q8_0),
        other => bail!("--quantize {other:?}: expected q4k, q5k, q6k, q8_0 or none"),
    })
}

/// A GGUF text model and the `mmproj*.gguf` beside it, or a safetensors directory.
fn source_of(path: &Path) -> Result<ModelSource> {
    if path.is_dir() {
        return Ok(ModelSource::Safetensors {
            dir: path.to_path_buf(),
        });
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("mmproj") && n.ends_with(".gguf"))
        })
        .collect();
    candidates.sort();
    match candidates.as_slice() {
        [mmproj] => Ok(ModelSource::Gguf {
            text: path.to_path_buf(),
            mmproj: mmproj.clone(),
        }),
        [] => bail!("no mmproj*.gguf beside {}", path.display()),
        many => bail!("several mmproj*.gguf beside {}: {many:?}", path.display()),
    }
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

fn note(json: bool, msg: &str) {
    // Progress notes go to stderr either way; stdout holds only the table or the JSON.
    let _ = json;
    eprintln!("{msg}");
}

/// Run `sightline bench`; the process exit code.
pub fn bench(args: &BenchArgs) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sightline bench: {e:#}");
            2
        }
    }
}

fn run(args: &BenchArgs) -> Result<()> {
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    // candle sizes its thread pools from these on first use: set them before any tensor work.
    std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    std::env::set_var("CANDLE_NUM_THREADS", threads.to_string());

    let quantize_arg = parse_quantize(&args.quantize)?;
    let (source, mut model_report, format) = match &args.model {
        Some(path) => {
            let source = source_of(path)?;
            let format = if matches!(source, ModelSource::Gguf { .. }) {
                "gguf"
            } else {
                "safetensors"
            };
            let quantize = if format == "safetensors" {
                quantize_arg
            } else {
                None
            };
            (
                source.clone(),
                ModelReport {
                    shape: "custom".into(),
                    format: format.into(),
                    quantize: quantize.map(|q| format!("{q:?}")),
                    source: describe(&source),
                    file_bytes: files_size(&source),
                    generated: false,
                    generate_s: 0.0,
                },
                None,
            )
        }
        None => {
            let shape: ModelShape = args.shape.parse()?;
            let format: BenchFormat = args.format.parse()?;
            let root = args.cache_dir.clone().unwrap_or_else(default_cache_root);
            note(
                args.json,
                &format!("model: {shape} {format} in {}", root.display()),
            );
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
                note(
                    args.json,
                    &format!("generated in {:.1} s", made.generate_secs),
                );
            } else {
                note(args.json, "reused from the cache");
            }
            let quantize = if format.is_gguf() { None } else { quantize_arg };
            (
                made.source.clone(),
                ModelReport {
                    shape: shape.name().into(),
                    format: format.name().into(),
                    quantize: quantize.map(|q| format!("{q:?}")),
                    source: describe(&made.source),
                    file_bytes: made.file_bytes,
                    generated: made.generated,
                    generate_s: made.generate_secs,
                },
                Some(format),
            )
        }
    };
    if let ModelSource::Gguf { .. } = source {
        model_report.quantize = None;
    }

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
            quantize_arg
        } else {
            None
        },
        seed: 7,
        exact_weights: args.exact_weights,
    };

    // llama.cpp: only on a GGUF pair; the tools alternate with our stages below.
    let mut llama: Option<LlamaCppReport> = None;
    let mut tools = None;
    if args.compare_llama_cpp {
        let mut report = LlamaCppReport::default();
        if !matches!(source, ModelSource::Gguf { .. }) {
            report.skipped = Some(
                "the comparison needs a GGUF pair (--format q4_k_m or q8_0); llama.cpp cannot load a safetensors directory".into(),
            );
        } else {
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
            tools = Some(found);
        }
        llama = Some(report);
    }
    let lrun = LlamaRun {
        threads,
        repeat: args.repeat,
        timeout: Duration::from_secs(args.llama_timeout_s),
    };

    note(args.json, "loading");
    let (mut stages, load) = StageBench::load(&source, &options)?;
    let kv = stages.kv_cache_bytes();
    let memory_check = MemoryCheck::new(model_report.file_bytes, kv, load.peak_rss_load_bytes);

    let vision = if args.no_vision {
        None
    } else {
        note(args.json, "vision encode");
        Some(stages.vision(&png)?)
    };
    if let (Some(vision), Some(report), Some(tools), ModelSource::Gguf { text, mmproj }) =
        (&vision, llama.as_mut(), tools.as_ref(), &source)
    {
        if let Some(tool) = &tools.mtmd_cli {
            note(args.json, "llama.cpp: llama-mtmd-cli");
            let image_path = match &args.image {
                Some(p) => p.clone(),
                None => {
                    let p = std::env::temp_dir()
                        .join(format!("sightline-bench-{}.png", std::process::id()));
                    std::fs::write(&p, &png).with_context(|| format!("writing {}", p.display()))?;
                    p
                }
            };
            match run_mtmd(
                tool,
                text,
                mmproj,
                &image_path,
                args.max_visual_tokens,
                &lrun,
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
        }
    }

    note(args.json, "prefill");
    let prefill = stages.prefill()?;
    let text_gguf = match &source {
        ModelSource::Gguf { text, .. } => Some(text.clone()),
        _ => None,
    };
    let bench_tool = tools.as_ref().and_then(|t| t.bench.clone());
    if let (Some(report), Some(tool), Some(text)) = (llama.as_mut(), &bench_tool, &text_gguf) {
        note(args.json, "llama.cpp: llama-bench prefill");
        match run_llama_bench(tool, text, args.prompt_tokens, 0, 0, &lrun) {
            Ok(out) => {
                report.prefill_ratio = out
                    .prefill_ts(args.prompt_tokens as u64)
                    .map(|t| prefill.tokens_per_s / t);
                report.prefill = Some(out);
            }
            Err(e) => report.errors.push(format!("llama-bench prefill: {e}")),
        }
    }

    note(args.json, "decode");
    let decode = stages.decode()?;
    if let (Some(report), Some(tool), Some(text)) = (llama.as_mut(), &bench_tool, &text_gguf) {
        note(args.json, "llama.cpp: llama-bench decode");
        match run_llama_bench(tool, text, 0, args.gen_tokens, decode.context_tokens, &lrun) {
            Ok(out) => {
                report.decode_ratio = out
                    .decode_ts(args.gen_tokens as u64)
                    .map(|t| decode.tokens_per_s / t);
                report.decode = Some(out);
            }
            Err(e) => report.errors.push(format!("llama-bench decode: {e}")),
        }
    }

    note(args.json, "constrained decode");
    let (grammar, grammar_error) = match stages.grammar(20) {
        Ok(g) => (Some(g), None),
        Err(e) => (None, Some(e.to_string())),
    };

    let (turn, turn_error) = if args.no_turn {
        (None, None)
    } else {
        note(args.json, "whole turns");
        let custom_image = args.image.is_some();
        match stages.turns(|i| {
            if custom_image {
                Ok(png.clone())
            } else {
                synthetic_screenshot(1920, 1080, i as u32 + 1)
            }
        }) {
            Ok(t) => (Some(t), None),
            Err(e) => (None, Some(e.to_string())),
        }
    };
    let _ = format;

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
