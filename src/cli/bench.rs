//! `sightline bench`: make (or take) a real-shape model, measure one turn's stages on it,
//! and optionally run llama.cpp on the same files. See `sightline::bench` and the README.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use sightline::bench::llama_cpp::ToolSearch;
use sightline::bench::run::{run_bench, BenchSettings};
use sightline::bench::{BenchFormat, ModelShape};
use sightline::exit_code;
use sightline::image::DEFAULT_MAX_TOKENS;
use sightline::model::Quantization;
use sightline::settings::ModelArgs;

/// Arguments of `sightline bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Model shape to generate: 2b, 4b or 8b (Qwen3-VL dimensions, random weights).
    #[arg(long, default_value = "2b")]
    pub shape: ModelShape,
    /// Format to generate: q4_k_m or q8_0 (GGUF pair, llama.cpp layout) or f16 (safetensors).
    #[arg(long, default_value = "q4_k_m")]
    pub format: BenchFormat,
    /// The model flags every command shares. Here `--model` measures that model (resolved
    /// like everywhere) instead of a generated one; `--quantize` defaults to q4k (safetensors
    /// only; `none` keeps f16); `--max-visual-tokens` defaults to 1,280; `--threads` also sets
    /// llama.cpp's; `--device` is where every stage runs (and llama.cpp offloads to the GPU
    /// when it is one).
    #[command(flatten)]
    pub model: ModelArgs,
    /// Where generated models are cached (default: $SIGHTLINE_CACHE/bench or ~/.cache/sightline/bench).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
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

/// The default `--quantize` of a generated f16 model.
const DEFAULT_QUANTIZE: Quantization = Quantization::Q4K;

/// Runs `sightline bench`; the process exit code. Progress notes go to stderr, stdout holds
/// only the table or the JSON.
pub fn bench(args: &BenchArgs) -> Result<i32> {
    let settings = BenchSettings {
        model: args.model.model.clone(),
        shape: args.shape,
        format: args.format,
        cache_dir: args.cache_dir.clone(),
        quantize: args.model.quantize_dtype(Some(DEFAULT_QUANTIZE)),
        dtype: args.model.dtype,
        device: args.model.device,
        threads: args.model.apply_threads(),
        prompt_tokens: args.prompt_tokens,
        gen_tokens: args.gen_tokens,
        repeat: args.repeat,
        image: args.image.clone(),
        max_visual_tokens: args.model.max_visual_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        no_vision: args.no_vision,
        no_turn: args.no_turn,
        llama_cpp: args.compare_llama_cpp.then(|| {
            (
                ToolSearch {
                    bench: args.llama_bench.clone(),
                    mtmd_cli: args.llama_mtmd_cli.clone(),
                    dir: args.llama_dir.clone(),
                },
                Duration::from_secs(args.llama_timeout_s),
            )
        }),
    };
    let report = run_bench(&settings, &|msg| eprintln!("{msg}"))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(exit_code::SUCCESS)
}
