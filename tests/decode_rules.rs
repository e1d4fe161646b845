//! One test per grammar rule, the token environment, and forced-token batching.

mod decode_support;

use anyhow::{ensure, Result};
use cel_contracts::{NextMove, PlannedAction};
use decode_support::{env, ids, steered, view};
use sightline::decode::{
    decode_move, DecodeOptions, Grammar, GrammarEngine, GrammarOptions, MoveSpec,
};

fn grammar(
    view_ids: &[String],
    caps: &[&str],
    options: &GrammarOptions,
    engine: GrammarEngine,
) -> Result<(MoveSpec, Grammar)> {
    let spec = MoveSpec::new(&view(view_ids, caps), options)?;
    let grammar = Grammar::for_move(env(), &spec, engine)?;
    Ok((spec, grammar))
}

#[test]
fn steered_batch_decodes_to_the_target_move() -> Result<()> {
    let target = r#"{"kind":"batch","purpose":"Open the file menu","steps":[{"purpose":"click File","action":{"type":"click","target_id":"el-1"}},{"purpose":"wait","kind":"deterministic","action":{"type":"wait","ms":500}}]}"#;
    for engine in [GrammarEngine::Lark, GrammarEngine::JsonSchema] {
        let (_, g) = grammar(&ids(3, false), &[], &GrammarOptions::default(), engine)?;
        let (mut model, logits) = steered(target)?;
        let out = decode_move(&mut model, &logits, &g, &DecodeOptions::default())?;
        eprintln!(
            "{engine:?}: {:?} compile {:?}",
            out.decoded.stats,
            g.compile_time()
        );
        ensure!(
            out.decoded.text == target,
            "{engine:?}: {}",
            out.decoded.text
        );
        ensure!(matches!(out.next_move, NextMove::Batch { ref steps, .. } if steps.len() == 2));
        let _ = PlannedAction::Wait { ms: 1 };
    }
    Ok(())
}
