//! `sightline generate`: continue a chat prompt with no grammar, print the text and the
//! prefill / decode speed, optionally dump every logits row for comparison with another
//! implementation. The loop itself is [`sightline::generate::ChatGenerator`].

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use sightline::decode::Sampling;
use sightline::generate::{
    ChatGenerator, ChatRequest, GenerateOptions, Generation, StopReason, TextStream,
    DEFAULT_MAX_TOKENS,
};
use sightline::model::weights::LoadOptions;
use sightline::{Qwen3Vl, VisionLanguageModel};

use sightline::exit_code;
use sightline::settings::ModelArgs;

use crate::cli::plan::read_screenshot;

/// Arguments of `sightline generate`.
#[derive(Debug, Clone, clap::Args)]
pub struct GenerateArgs {
    /// The user's text. The prompt is Qwen3-VL's chat template: one user turn (the image,
    /// then this text) and the assistant turn opened.
    pub prompt: String,
    #[command(flatten)]
    pub model: ModelArgs,
    /// An image (PNG or JPEG) shown before the text.
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// Most tokens generated (the stop token included); generation also stops at
    /// <|im_end|> or <|endoftext|>.
    #[arg(long, default_value_t = DEFAULT_MAX_TOKENS)]
    pub max_tokens: usize,
    /// Greedy decoding (the default): the most likely token every step, lowest id on ties.
    #[arg(long, conflicts_with_all = ["temperature", "top_p", "seed"])]
    pub greedy: bool,
    /// Sample at this temperature (> 0) instead of greedy decoding; needs --seed.
    #[arg(long, requires = "seed", value_parser = parse_temperature)]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass in (0, 1], with --temperature (default 0.95).
    #[arg(long, requires = "temperature", value_parser = parse_top_p)]
    pub top_p: Option<f32>,
    /// Seed of the sampler, with --temperature: the same seed gives the same text.
    #[arg(long, requires = "temperature")]
    pub seed: Option<u64>,
    /// Write the logits to this safetensors file: `logits` f32 (1 + n, vocab) for n
    /// generated tokens, where row 0 is the output at the prompt's last position and row i
    /// the output after the i-th generated token was fed (the last one, stop token
    /// included, is fed for its row); `tokens` i64 (prompt ids, image pads expanded, then
    /// the generated ids); `prompt_len` i64 (1,). Row i is the output at position
    /// prompt_len - 1 + i of `tokens`.
    #[arg(long)]
    pub dump_logits: Option<PathBuf>,
}

/// `--temperature`, checked by the library's rule (the one `plan` uses too).
pub fn parse_temperature(s: &str) -> Result<f32, String> {
    let t: f32 = s.parse().map_err(|e| format!("{e}"))?;
    sightline::decode::check_temperature(t)
        .map(|()| t)
        .map_err(|_| "expected a number > 0 (use --greedy for greedy decoding)".into())
}

/// `--top-p`, checked by the library's rule (the one `plan` uses too).
pub fn parse_top_p(s: &str) -> Result<f32, String> {
    let p: f32 = s.parse().map_err(|e| format!("{e}"))?;
    sightline::decode::check_top_p(p)
        .map(|()| p)
        .map_err(|_| "expected a probability in (0, 1]".into())
}

/// Top-p mass when `--top-p` is not given.
const DEFAULT_TOP_P: f32 = 0.95;

/// Runs `sightline generate`; returns the exit code.
pub fn generate(args: &GenerateArgs) -> Result<i32> {
    generate_inner(args).map(|()| exit_code::SUCCESS)
}

fn generate_inner(args: &GenerateArgs) -> Result<()> {
    let sampling = match (args.temperature, args.seed) {
        (Some(temperature), Some(seed)) => Sampling::TopP {
            temperature,
            top_p: args.top_p.unwrap_or(DEFAULT_TOP_P),
            seed,
        },
        _ => Sampling::Greedy,
    };
    // Read the image before the model loads, so a wrong path fails at once.
    let image = args.image.as_deref().map(read_screenshot).transpose()?;
    if let Some(path) = &args.dump_logits {
        crate::cli::dump_path::check_output_path(path)?;
    }
    let options = args.model.resolve_planner_options()?;
    let device = options.device.resolve()?;
    let started = Instant::now();
    let mut model = Qwen3Vl::load(&LoadOptions {
        quantize: options.quantize,
        device: device.clone(),
        dtype: options.dtype,
        ..LoadOptions::new(options.source.clone())
    })?;
    let tokenizer = options.source.tokenizer()?;
    model.check_tokenizer(&tokenizer)?;
    let mut preprocess = options.source.preprocess_config()?;
    if let Some(tokens) = options.max_visual_tokens {
        preprocess = preprocess.with_max_tokens(tokens);
    }
    let generator = ChatGenerator::new(tokenizer, preprocess, model.vocab_size())?;
    let text = &model.config().text;
    eprintln!(
        "loaded Qwen3-VL ({} layers, hidden {}, {:?} activations{}) on {device:?} in {:.2} s: {}",
        text.num_hidden_layers,
        text.hidden_size,
        model.dtype(),
        options
            .quantize
            .map(|q| format!(", quantized to {q:?} at load"))
            .unwrap_or_default(),
        started.elapsed().as_secs_f64(),
        model.source()
    );
    // Print the text as it is generated; the stop token is not text.
    let special = *generator.special();
    let mut stream = TextStream::new(generator.tokenizer());
    let mut stdout = std::io::stdout().lock();
    let mut write_error = None;
    let generation = generator.generate_streaming(
        &mut model,
        &ChatRequest {
            prompt: &args.prompt,
            image: image.as_deref(),
        },
        &GenerateOptions {
            sampling,
            max_tokens: args.max_tokens,
            keep_logits: args.dump_logits.is_some(),
        },
        &mut |token| {
            if token == special.im_end || token == special.end_of_text || write_error.is_some() {
                return;
            }
            let result = stream
                .push(token)
                .map_err(anyhow::Error::from)
                .and_then(|piece| {
                    stdout.write_all(piece.as_bytes())?;
                    Ok(stdout.flush()?)
                });
            if let Err(e) = result {
                write_error = Some(e);
            }
        },
    )?;
    if let Some(e) = write_error {
        return Err(e.context("writing the generated text"));
    }
    // What the stream held back (an unfinished character) ends the text.
    let rest = generation.text.get(stream.released()..).unwrap_or_default();
    writeln!(stdout, "{rest}")?;
    stdout.flush()?;
    if let Some(path) = &args.dump_logits {
        crate::cli::dump_path::write_replacing_regular(path, |tmp| generation.save_logits(tmp))?;
    }
    eprintln!("{}", stats_line(&generation, &generator));
    Ok(())
}

/// The stderr summary: prompt size and prefill speed, generated tokens and decode speed,
/// the image's cost, why generation stopped.
fn stats_line(g: &Generation, generator: &ChatGenerator) -> String {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let t = &g.timings;
    let mut line = format!(
        "prompt {} tokens, prefill {:.1} tok/s ({:.1} ms); generated {} tokens, decode {:.1} tok/s ({} steps, {:.1} ms)",
        g.prompt_tokens.len(),
        t.prefill_tokens_per_s(g.prompt_tokens.len()),
        ms(t.prefill),
        g.tokens.len(),
        t.decode_tokens_per_s(),
        t.decode_steps,
        ms(t.decode),
    );
    if g.image_tokens > 0 {
        line += &format!(
            "; image {} tokens, preprocess {:.1} ms, encode {:.1} ms",
            g.image_tokens,
            ms(t.preprocess),
            ms(t.image_encode)
        );
    }
    line += &match g.stop {
        StopReason::EndToken(id) => format!(
            "; stopped at {}",
            generator
                .tokenizer()
                .id_to_token(id)
                .unwrap_or_else(|| id.to_string())
        ),
        StopReason::MaxTokens => "; stopped at --max-tokens".to_string(),
    };
    line
}
