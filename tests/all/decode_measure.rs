//! Grammar measurements with the real Qwen vocabulary (ignored by default; run with
//! `cargo test --release --test all decode_measure:: -- --ignored --nocapture`):
//! compile time per view (0 / 50 / 500 elements), mask time p50 / p99 / max and the
//! share of forced tokens over a corpus of generated moves, for the Lark grammar
//! (token-bounded strings) and the JSON schema (`maxLength` strings), and the grammar
//! work per token against a decode step of a 2B-shape Q4_K model on this machine.
//!
//! Masks are given two ways: per emitted token (a forced token needs no mask: its
//! mask time is zero, as in the decode loop) and per computed mask (free positions
//! only).

use std::time::{Duration, Instant};

use crate::decode_support::corpus::corpus;
use crate::decode_support::{env, ids, steered, view};
use anyhow::{ensure, Result};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use sightline::decode::{
    decode_move, DecodeOptions, Grammar, GrammarEngine, GrammarOptions, MoveSpec,
};

/// Decodes of each corpus move; see the table's "min of" columns.
const REPEATS: usize = 3;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Median time of one decode step of a Qwen3-VL-2B-shape text model quantized to
/// Q4_K: the matrix-vector products that dominate a CPU decode step (28 layers of
/// q/k/v/o and gate/up/down, then the 151,936-row head), random weights. Four
/// distinct layers are cycled so the weights do not sit in cache; attention over the
/// cache and norms are left out (small at short context), so this is a lower bound
/// of a real step and the grammar ratio an upper bound.
fn q4k_2b_decode_step() -> Result<Duration> {
    const HIDDEN: usize = 2048;
    const KV: usize = 1024;
    const FFN: usize = 6144;
    const LAYERS: usize = 28;
    const VOCAB: usize = 151_936;
    let dev = Device::Cpu;
    let q4k = |rows: usize, cols: usize| -> Result<QMatMul> {
        let w = Tensor::randn(0f32, 0.02, (rows, cols), &dev)?;
        Ok(QMatMul::from_qtensor(QTensor::quantize(
            &w,
            GgmlDType::Q4K,
        )?)?)
    };
    let mut layers = Vec::new();
    for _ in 0..4 {
        let shapes = [
            (HIDDEN, HIDDEN),
            (KV, HIDDEN),
            (KV, HIDDEN),
            (HIDDEN, HIDDEN),
            (FFN, HIDDEN),
            (FFN, HIDDEN),
            (HIDDEN, FFN),
        ];
        layers.push(
            shapes
                .iter()
                .map(|&(r, c)| q4k(r, c))
                .collect::<Result<Vec<_>>>()?,
        );
    }
    let head: Vec<QMatMul> = (0..8)
        .map(|_| q4k(VOCAB / 8, HIDDEN))
        .collect::<Result<_>>()?;
    let x = Tensor::randn(0f32, 1.0, (1, HIDDEN), &dev)?;
    let step = || -> Result<()> {
        for l in 0..LAYERS {
            let w = &layers[l % layers.len()];
            for m in &w[..4] {
                m.forward(&x)?;
            }
            let g = w[4].forward(&x)?;
            let u = w[5].forward(&x)?;
            w[6].forward(&(g * u)?)?;
        }
        for h in &head {
            h.forward(&x)?;
        }
        Ok(())
    };
    step()?;
    let mut times = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        step()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

#[test]
#[ignore = "measurement: run with --release --ignored --nocapture"]
fn grammar_compile_mask_and_forced_share_over_a_corpus() -> Result<()> {
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "build: {build}; threads: {:?}",
        std::thread::available_parallelism()
    );
    let mut grammar_per_token = Vec::new();
    for engine in [GrammarEngine::Lark, GrammarEngine::JsonSchema] {
        println!("\n{engine:?}");
        println!("| view elements | compile (median of 100) | per token: mask p50 / p99 / max | per computed mask: p50 raw (min of {REPEATS}) | p99 | max | forced | grammar µs/token | masks |");
        println!("|---|---|---|---|---|---|---|---|---|");
        for n in [0usize, 50, 500] {
            let view_ids = ids(n, true);
            let v = view(&view_ids, &["cdp_bound", "native_input"]);
            let spec = MoveSpec::new(&v, &GrammarOptions::default())?;
            let mut compiles = Vec::new();
            let mut grammar = None;
            for _ in 0..100 {
                let g = Grammar::for_move(env(), &spec, engine)?;
                compiles.push(g.compile_time());
                grammar = Some(g);
            }
            compiles.sort();
            let grammar = grammar.ok_or_else(|| anyhow::anyhow!("no grammar"))?;
            let mut masks = Vec::new();
            let mut quiet_masks = Vec::new();
            let (mut tokens, mut forced) = (0, 0);
            let mut grammar_time = Duration::ZERO;
            // The moves target what the grammar offers: a view longer than the element
            // budget is clipped (`MAX_ELEMENTS`), so the corpus draws from the kept ids.
            for target in corpus(spec.target_ids(), true, 60, n as u64) {
                // llguidance's JSON engine spells DEL in its id enum as `\u007F` (serde_json
                // leaves it raw): the same string, another byte run to steer toward.
                let target = match engine {
                    GrammarEngine::JsonSchema => target.replace('\u{7f}', "\\u007F"),
                    _ => target,
                };
                // Each move decoded REPEATS times: the first run's masks are the raw
                // sample; the per-position minimum over the runs filters out the
                // preemptions of a busy machine.
                let mut per_position: Vec<Duration> = Vec::new();
                for rep in 0..REPEATS {
                    let (mut model, logits) = steered(&target)?;
                    let out =
                        decode_move(&mut model, &logits, &grammar, &DecodeOptions::default())?;
                    ensure!(
                        out.decoded.text == target,
                        "corpus move not reproduced:\n{}\n{target}",
                        out.decoded.text
                    );
                    let s = &out.decoded.stats;
                    if rep == 0 {
                        masks.extend(s.mask_times.iter().copied());
                        tokens += s.tokens;
                        forced += s.forced_tokens;
                        grammar_time += s.grammar_time();
                        per_position = s.mask_times.clone();
                    } else {
                        for (m, t) in per_position.iter_mut().zip(&s.mask_times) {
                            *m = (*m).min(*t);
                        }
                    }
                }
                quiet_masks.extend(per_position);
            }
            // Per emitted token: the forced ones cost no mask.
            let mut per_token_masks = masks.clone();
            per_token_masks.resize(tokens, Duration::ZERO);
            per_token_masks.sort();
            masks.sort();
            quiet_masks.sort();
            let per_token = grammar_time / tokens as u32;
            if engine == GrammarEngine::Lark {
                grammar_per_token.push(per_token);
            }
            println!(
                "| {n} | {:.2} ms | {:.1} / {:.1} / {:.1} µs | {:.1} ({:.1}) µs | {:.1} ({:.1}) µs | {:.1} ({:.1}) µs | {:.0}% of {tokens} | {:.1} | {} |",
                compiles[compiles.len() / 2].as_secs_f64() * 1e3,
                percentile(&per_token_masks, 0.5).as_secs_f64() * 1e6,
                percentile(&per_token_masks, 0.99).as_secs_f64() * 1e6,
                percentile(&per_token_masks, 1.0).as_secs_f64() * 1e6,
                percentile(&masks, 0.5).as_secs_f64() * 1e6,
                percentile(&quiet_masks, 0.5).as_secs_f64() * 1e6,
                percentile(&masks, 0.99).as_secs_f64() * 1e6,
                percentile(&quiet_masks, 0.99).as_secs_f64() * 1e6,
                percentile(&masks, 1.0).as_secs_f64() * 1e6,
                percentile(&quiet_masks, 1.0).as_secs_f64() * 1e6,
                100.0 * forced as f64 / tokens as f64,
                per_token.as_secs_f64() * 1e6,
                masks.len(),
            );
        }
    }
    let step = q4k_2b_decode_step()?;
    let worst = grammar_per_token.iter().max().copied().unwrap_or_default();
    println!(
        "\n2B-shape Q4_K decode step (matvecs only, median of 7): {:.1} ms; Lark grammar work per generated token (mask + commit + forced-token computation, worst view) {:.1} µs = {:.3}% of a step",
        step.as_secs_f64() * 1e3,
        worst.as_secs_f64() * 1e6,
        100.0 * worst.as_secs_f64() / step.as_secs_f64()
    );
    Ok(())
}
