//! How much of a grammar step's time on the CPU is the grammar's own work and how much
//! the forward pass before it costs it: the same decodes timed after passes that stream
//! a model's size of memory through the caches (as a decode step's weights do), after
//! passes that do not, and after passes that do not on a grammar whose lexer states an
//! earlier decode already built (what a GPU decode, which leaves the CPU's caches alone,
//! meets from its second move on).

use std::sync::Arc;
use std::time::Duration;

use super::{
    decode, DecodeOptions, Grammar, GrammarEngine, GrammarOptions, MoveSpec, TokenEnv, WarmUp,
    MAX_WALKS,
};
use crate::bench::stages::{median, percentile};
use crate::model::scripted::{LogitProfile, Script, ScriptedModel};
use crate::model::VisionLanguageModel;

/// Grammar time per sampled step and mask times, µs, of decodes of the bench's
/// 20-button move grammar against random logits (seeds `0..seeds`), each on a grammar
/// compiled and walked for it as a turn does; `decodes` per grammar, the last one timed.
fn step_times(
    env: &TokenEnv,
    model: &mut ScriptedModel,
    seeds: u64,
    decodes: usize,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let us = |d: &Duration| d.as_secs_f64() * 1e6;
    let view = crate::bench::stages::bench_view(20);
    let (mut steps, mut masks) = (Vec::new(), Vec::new());
    for seed in 0..seeds {
        let spec = MoveSpec::new(&view, &GrammarOptions::default())?;
        let grammar = Grammar::for_move(env, &spec, GrammarEngine::Lark)?;
        let profile = LogitProfile::QuotesAndEos;
        model.set_script(Script::Random { seed, profile });
        // Beside a prefill of seconds the walks run to their end.
        let walks = WarmUp::start(&grammar, MAX_WALKS)?;
        while !walks.is_done() {
            std::thread::sleep(Duration::from_millis(5));
        }
        walks.finish();
        let mut last = None;
        for _ in 0..decodes {
            model.truncate(0)?;
            let logits = model.feed(&[0; 4], &[])?;
            last = Some(decode(model, &logits, &grammar, &DecodeOptions::default())?);
        }
        let stats = last.map(|d| d.stats).unwrap_or_default();
        steps.extend(stats.step_grammar_times.iter().map(us));
        masks.extend(stats.mask_times.iter().map(us));
    }
    Ok((steps, masks))
}

/// `STEP_STREAM_MIB` sets the streaming pass's size (default 1,024 MiB; the bench's 2B
/// Q4_K_M model is 1,483 MiB of files).
#[test]
#[ignore = "timing: run with --ignored --nocapture"]
fn grammar_steps_after_a_forward_pass_timing() -> anyhow::Result<()> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tokenizer.json.gz");
    let tokenizer = crate::tokenizer::load_tokenizer(&path)?;
    let env = TokenEnv::from_tokenizer(&tokenizer, 151_936)?;
    env.bind(tokenizer)?;
    env.factory()?;
    let mib = std::env::var("STEP_STREAM_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let bytes = Arc::new(env.token_bytes());
    let script = Script::Steer {
        target: Vec::new(),
        prompt_len: 0,
    };
    let plain = ScriptedModel::new(bytes, env.eos(), script)?;
    // What a process does once (the tokenizer's and the parser factory's first calls)
    // is no condition's.
    step_times(&env, &mut plain.clone(), 1, 1)?;
    for (name, mut model, decodes) in [
        ("after streaming passes", plain.clone().streaming(mib), 1),
        ("after passes that stream nothing", plain.clone(), 1),
        ("the same, second decode on each grammar", plain, 2),
    ] {
        let (steps, masks) = step_times(&env, &mut model, 8, decodes)?;
        println!(
            "{name}: {} steps, p50 {:.0} / p90 {:.0} / p99 {:.0} µs; {} masks, p50 {:.0} / p99 {:.0} µs",
            steps.len(),
            median(&steps),
            percentile(&steps, 90.0),
            percentile(&steps, 99.0),
            masks.len(),
            median(&masks),
            percentile(&masks, 99.0),
        );
    }
    Ok(())
}
