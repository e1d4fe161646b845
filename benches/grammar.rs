//! Grammar stage: compiling the per-turn move grammar for views of 0 / 50 / 500
//! elements, and the grammar's work per token replaying generated moves, with the real
//! 151k-token Qwen vocabulary: every token masked then committed, and the decoder's
//! greedy order (the token checked first, masked only when refused). Prints each
//! mode's per-token p50 and p99 after the criterion groups.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use sightline::decode::{
    decode, DecodeOptions, Grammar, GrammarEngine, GrammarOptions, MoveSpec, TokenEnv,
};
use sightline::model::scripted::{Script, ScriptedModel};
use sightline::VisionLanguageModel;

#[path = "../tests/all/decode_support/corpus.rs"]
mod corpus;

/// Qwen's logits width.
const QWEN_LOGITS: usize = 151_936;

fn view(n: usize) -> cel_contracts::PlanningView {
    let elements: Vec<serde_json::Value> = (0..n)
        .map(|i| serde_json::json!({"id": format!("el-{i}"), "element_type": "button", "state": {"focused": false, "selected": false, "enabled": true, "checked": false, "expanded": false}}))
        .collect();
    let v = serde_json::json!({
        "goal": "bench", "budget": {"max_tokens": 8000, "max_elements": 80, "max_memories": 8, "max_adapter_facts": 12},
        "screen": {"active_app": "App"}, "elements": elements,
        "capabilities": [{"id": "cdp_bound"}, {"id": "native_input"}],
        "omitted_counts": {"elements": 0, "memories": 0, "knowledge": 0, "adapter_facts": 0, "recent_events": 0},
    });
    // The literal above matches cel-contracts' PlanningView.
    serde_json::from_value(v).expect("bench view")
}

/// Criterion entry point of the grammar stage.
pub fn bench(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tokenizer.json.gz");
    let tokenizer = sightline::tokenizer::load_tokenizer(&path).expect("tokenizer fixture");
    let env = TokenEnv::from_tokenizer(&tokenizer, QWEN_LOGITS).expect("token environment");
    let token_bytes = Arc::new(env.token_bytes());

    let mut group = c.benchmark_group("grammar_compile");
    for n in [0usize, 50, 500] {
        let spec = MoveSpec::new(&view(n), &GrammarOptions::default()).expect("spec");
        group.bench_with_input(BenchmarkId::from_parameter(n), &spec, |b, spec| {
            b.iter(|| Grammar::for_move(&env, spec, GrammarEngine::Lark).expect("compile"))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("grammar_per_token");
    let mut percentiles = Vec::new();
    for n in [0usize, 50, 500] {
        let v = view(n);
        let ids: Vec<String> = v.elements.iter().map(|e| e.id.clone()).collect();
        let spec = MoveSpec::new(&v, &GrammarOptions::default()).expect("spec");
        let grammar = Grammar::for_move(&env, &spec, GrammarEngine::Lark).expect("compile");
        // Token sequences of generated moves, decoded once by steering.
        let moves: Vec<Vec<u32>> = corpus::corpus(&ids, true, 24, n as u64)
            .into_iter()
            .map(|target| {
                let script = Script::Steer {
                    target: target.into_bytes(),
                    prompt_len: 1,
                };
                let mut model =
                    ScriptedModel::new(token_bytes.clone(), env.eos(), script).expect("model");
                let logits = model.feed(&[0], &[]).expect("feed");
                decode(&mut model, &logits, &grammar, &DecodeOptions::default())
                    .expect("decode")
                    .tokens
            })
            .collect();
        let total: usize = moves.iter().map(Vec::len).sum();
        group.throughput(Throughput::Elements(total as u64));
        // Every token masked, then committed; and the decoder's greedy order for a
        // model that wants these moves: the token checked first, masked only if refused.
        for mode in [Mode::Masks, Mode::GuessFirst] {
            let id = BenchmarkId::new(mode.name(), n);
            group.bench_function(id, |b| b.iter(|| replay(&grammar, &moves, mode, None)));
            let mut times = Vec::with_capacity(total);
            replay(&grammar, &moves, mode, Some(&mut times));
            times.sort();
            let at = |p: usize| times[(times.len() * p / 100).min(times.len() - 1)];
            percentiles.push(format!(
                "{:>12} {n:>3} elements: p50 {:>5.1} µs, p99 {:>5.1} µs per token",
                mode.name(),
                at(50).as_secs_f64() * 1e6,
                at(99).as_secs_f64() * 1e6,
            ));
        }
    }
    group.finish();
    // Criterion reports means; the bound is on the 99th percentile.
    for line in percentiles {
        println!("grammar per token, {line}");
    }
}

/// How a replay chooses its tokens' grammar work.
#[derive(Clone, Copy)]
enum Mode {
    Masks,
    GuessFirst,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Masks => "masks",
            Mode::GuessFirst => "guess_first",
        }
    }
}

/// Replay `moves` through fresh matchers of `grammar`, timing each token into `times`.
fn replay(
    grammar: &Grammar,
    moves: &[Vec<u32>],
    mode: Mode,
    mut times: Option<&mut Vec<Duration>>,
) {
    for tokens in moves {
        let mut m = grammar.matcher();
        for &t in tokens {
            let start = Instant::now();
            let taken =
                matches!(mode, Mode::GuessFirst) && m.validate_tokens(&[t]).is_ok_and(|n| n == 1);
            if !taken {
                m.compute_mask().expect("mask");
            }
            m.consume_token(t).expect("commit");
            if let Some(times) = times.as_deref_mut() {
                times.push(start.elapsed());
            }
        }
    }
}
