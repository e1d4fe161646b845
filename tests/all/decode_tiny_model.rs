//! The constrained decoder on the real model code: the tiny Qwen3-VL fixture, with a real
//! screenshot in the prompt, sampled 100 times. Every output must be a valid move on screen.

use std::path::Path;

use crate::decode_support::{env, ids, short_limits, view};
use anyhow::{ensure, Result};
use sightline::decode::{
    decode_move, DecodeOptions, Grammar, GrammarEngine, GrammarOptions, MoveSpec, Sampling,
};
use sightline::image::{preprocess_bytes, PreprocessConfig};
use sightline::model::weights::{LoadOptions, ModelSource};
use sightline::{Qwen3Vl, VisionLanguageModel};

const RUNS: u64 = 100;

#[test]
fn sampled_moves_from_the_tiny_model_are_always_valid_and_on_screen() -> Result<()> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures");
    let mut model = Qwen3Vl::load(&LoadOptions::new(ModelSource::Safetensors {
        dir: fixtures.join("tiny-b"),
    }))?;
    let png = std::fs::read(fixtures.join("screens/ui_exact.png"))?;
    let pixels = preprocess_bytes(&png, &PreprocessConfig::default().with_max_tokens(48))?;
    let image = model.encode_image(&pixels)?;
    let mut prompt = env().tokenize("<|im_start|>user\n<|vision_start|>");
    let image_pad = env().tokenize("<|image_pad|>");
    prompt.extend(std::iter::repeat_n(image_pad[0], image.n_tokens()));
    prompt.extend(env().tokenize("<|vision_end|>Click OK.<|im_end|>\n<|im_start|>assistant\n"));
    let first = model.feed(&prompt, &[image])?;

    // Short strings keep 100 runs quick; the grammar is otherwise the default one.
    let limits = short_limits();
    let views = [
        view(&ids(0, false), &[]),
        view(&ids(50, true), &["native_input", "cdp"]),
    ];
    let mut kinds = std::collections::BTreeSet::new();
    for (v, target_view) in views.iter().enumerate() {
        let options = GrammarOptions {
            limits: limits.clone(),
            ..GrammarOptions::default()
        };
        let spec = MoveSpec::new(target_view, &options)?;
        let grammar = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
        for seed in 0..RUNS / 2 {
            model.truncate(prompt.len())?;
            let decode = DecodeOptions {
                sampling: Sampling::TopP {
                    temperature: 1.0,
                    top_p: 0.98,
                    seed: seed + 1000 * v as u64,
                },
                ..DecodeOptions::default()
            };
            let out = decode_move(&mut model, &first, &grammar, &decode)?;
            spec.check(&out.next_move)
                .map_err(|e| anyhow::anyhow!("seed {seed}: {e}: {}", out.decoded.text))?;
            ensure!(
                out.decoded.stats.forward_calls < out.decoded.stats.tokens.max(1),
                "forced runs are batched: {:?}",
                out.decoded.stats
            );
            kinds.insert(out.decoded.text.split('"').nth(3).unwrap_or("").to_string());
        }
    }
    ensure!(kinds.contains("batch"), "kinds seen: {kinds:?}");
    Ok(())
}

/// On the CPU the model runs the grammar's work for the next step inside its pass (the
/// calling thread, in the pass's first large product, while the pool's other threads take
/// its rows): the tokens must be those of the CPU's own order (work before the pass), for
/// greedy and sampled decodes, on the f32 route and on a quantized one whose products cannot
/// take the work (the decoder falls back to its own order); and on the f32 route that work
/// must have been done inside the passes, with commits rehearsed at their ends, where the
/// pool has a thread besides the caller.
#[test]
fn work_inside_the_cpu_pass_decodes_the_tokens_of_the_critical_path() -> Result<()> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures");
    let spec = MoveSpec::new(
        &view(&ids(50, true), &["native_input", "cdp"]),
        &GrammarOptions {
            limits: short_limits(),
            ..GrammarOptions::default()
        },
    )?;
    let grammar = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
    let prompt = env().tokenize("<|im_start|>user\nClick OK.<|im_end|>\n<|im_start|>assistant\n");
    let pool_has_helpers = candle_core::utils::barrier_pool().n_workers() > 0;
    for quantize in [None, Some(candle_core::quantized::GgmlDType::Q8_0)] {
        let mut load = LoadOptions::new(ModelSource::Safetensors {
            dir: fixtures.join("tiny-b"),
        });
        load.quantize = quantize;
        let mut model = Qwen3Vl::load(&load)?;
        let first = model.feed(&prompt, &[])?;
        let mut prepared_inside = 0;
        let mut rehearsed = 0;
        for seed in 0..12u64 {
            let sampling = match seed % 2 {
                0 => Sampling::Greedy,
                _ => Sampling::TopP {
                    temperature: 1.0,
                    top_p: 0.95,
                    seed,
                },
            };
            let mut decoded = Vec::new();
            for beside_pass in [None, Some(false)] {
                model.truncate(prompt.len())?;
                let options = DecodeOptions {
                    sampling,
                    beside_pass,
                    ..DecodeOptions::default()
                };
                let out = decode_move(&mut model, &first, &grammar, &options)?;
                let s = &out.decoded.stats;
                if beside_pass.is_none() {
                    prepared_inside += s.ahead_copies + s.committed_beside;
                    rehearsed += s.rehearsals;
                }
                decoded.push(out.decoded.tokens);
            }
            ensure!(
                decoded[0] == decoded[1],
                "{quantize:?} seed {seed}: {decoded:?}"
            );
        }
        if quantize.is_none() {
            // The f32 route's matrix-vector products take the work.
            ensure!(
                model.works_beside_pass() == pool_has_helpers,
                "works beside its pass: {}, pool has helpers: {pool_has_helpers}",
                model.works_beside_pass()
            );
            ensure!(
                !pool_has_helpers || prepared_inside > 0,
                "no work was prepared inside a pass"
            );
            // Greedy decodes rehearse commits as the pass's last product ends (the head is
            // one of these products), and decode the same tokens all the same (above).
            ensure!(
                !pool_has_helpers || rehearsed > 0,
                "no commit was rehearsed at the end of a pass"
            );
        } else {
            // This fixture's rows are too short for the eight-row kernels, so its
            // quantized products are candle's, which take no work: the model learns it
            // from its first pass and the decoder keeps the CPU's order, with the same
            // tokens (checked above).
            eprintln!(
                "{quantize:?}: works beside its pass: {}",
                model.works_beside_pass()
            );
        }
    }
    Ok(())
}
