//! Grammar stage: compiling the per-turn move grammar for views of 0 / 50 / 500
//! elements, and the grammar's work per token (mask + commit) replaying generated
//! moves, with the real 151k-token Qwen vocabulary.

use std::path::Path;
use std::sync::Arc;

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

    let mut group = c.benchmark_group("grammar_mask_commit_per_token");
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
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                for tokens in &moves {
                    let mut m = grammar.matcher();
                    for &t in tokens {
                        m.compute_mask().expect("mask");
                        m.consume_token(t).expect("commit");
                    }
                }
            })
        });
    }
    group.finish();
}
