//! The prompt explains exactly the move language the grammar accepts: every construct it shows
//! (each form of each action, each kind of move, with concrete values in its placeholders)
//! decodes under the turn's grammar to itself, and everything the grammar allows (actions,
//! keys, limits, step kinds, the coordinate space) is stated in the prompt.

use anyhow::{ensure, Result};
use sightline::decode::{
    decode_move, DecodeOptions, Grammar, GrammarEngine, GrammarOptions, MoveSpec,
};
use sightline::moves::{
    example, ActionKind, FieldKind, MoveLanguage, MoveLimits, COORDINATE_MAX, KEY_NAMES,
    MAX_EXPECT_MS,
};
use sightline::planner::prompt::system_prompt_for;

use crate::decode_support::{env, steered, view};

/// Grammar options whose prompts are checked: the default, ids only, tight and loose limits,
/// and a thought.
fn option_sets() -> Vec<GrammarOptions> {
    let mut all = GrammarOptions {
        actions: ActionKind::ALL.to_vec(),
        ..GrammarOptions::default()
    };
    all.limits.max_wait_ms = 7_000;
    let ids_only = GrammarOptions {
        coordinate_targets: false,
        ..GrammarOptions::default()
    };
    let tight = GrammarOptions {
        limits: MoveLimits {
            max_steps: 2,
            text_tokens: 40,
            sentence_tokens: 16,
            max_scroll: 300,
            ..MoveLimits::default()
        },
        ..GrammarOptions::default()
    };
    let thinking = GrammarOptions {
        limits: MoveLimits {
            thought_tokens: 24,
            ..MoveLimits::default()
        },
        ..GrammarOptions::default()
    };
    vec![GrammarOptions::default(), all, ids_only, tight, thinking]
}

/// A placeholder of the prompt's examples replaced by a concrete value of its kind.
fn concrete(example: &str, target: &str) -> String {
    example
        .replace(":T", &format!(":{}", serde_json::json!(target)))
        .replace(":S", ":\"hello\"")
        .replace("[K,K]", "[\"ctrl\",\"s\"]")
        .replace(":K", ":\"enter\"")
        .replace(":DX", ":0")
        .replace(":DY", ":3")
        .replace(":MS", ":500")
        .replace(":X", ":100")
        .replace(":N}", ":1000}")
}

#[test]
fn every_construct_the_prompt_shows_decodes_to_itself_under_the_grammar() -> Result<()> {
    let ids = vec!["button_ok".to_string()];
    for options in option_sets() {
        let prompt = system_prompt_for(&options);
        let spec = MoveSpec::new(&view(&ids, &["native_input", "cdp_bound"]), &options)?;
        let grammar = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
        let language = MoveLanguage {
            actions: &options.actions,
            coordinate_targets: options.coordinate_targets,
            limits: &options.limits,
        };
        let thought = if options.limits.thought_tokens > 0 {
            r#""thought":"ok","#
        } else {
            ""
        };
        let mut moves = vec![
            format!(r#"{{{thought}"kind":"done","summary":"saved","extracted_data":null}}"#),
            format!(r#"{{{thought}"kind":"fail","reason":"no way"}}"#),
            format!(r#"{{{thought}"kind":"clarify","question":"which one?"}}"#),
        ];
        for kind in &language.actions() {
            for form in language.forms(*kind) {
                let shown = example(*kind, &form);
                ensure!(
                    prompt.contains(&shown),
                    "{shown} is not in the prompt:\n{prompt}"
                );
                let targets: &[&str] = if options.coordinate_targets {
                    &["button_ok", "xy:500,500"]
                } else {
                    &["button_ok"]
                };
                for target in targets {
                    for step_kind in ["deterministic", "llm_assisted"] {
                        moves.push(format!(
                            r#"{{{thought}"kind":"batch","purpose":"p","steps":[{{"purpose":"s","kind":"{step_kind}","action":{}}}]}}"#,
                            concrete(&shown, target)
                        ));
                    }
                }
            }
        }
        for target in moves {
            let (mut model, logits) = steered(&target)?;
            let out = decode_move(&mut model, &logits, &grammar, &DecodeOptions::default())?;
            ensure!(
                out.decoded.text == target,
                "the grammar does not accept what the prompt shows:\n  shown   {target}\n  decoded {}",
                out.decoded.text
            );
        }
    }
    Ok(())
}

#[test]
fn everything_the_grammar_allows_is_stated_in_the_prompt_and_nothing_else() -> Result<()> {
    for options in option_sets() {
        let prompt = system_prompt_for(&options);
        let l = &options.limits;
        // Every action, and no other.
        let shown: Vec<&str> = prompt
            .split(r#"{"type":""#)
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect();
        // What the grammar can allow at all: the turn with every capability and a target.
        let ids = vec!["button_ok".to_string()];
        let spec = MoveSpec::new(&view(&ids, &["native_input", "cdp_bound"]), &options)?;
        let allowed: Vec<&str> = spec.allowed_actions().iter().map(|a| a.tag()).collect();
        for tag in &shown {
            ensure!(
                allowed.contains(tag),
                "the prompt shows {tag}, which the grammar does not allow"
            );
        }
        for tag in &allowed {
            ensure!(shown.contains(tag), "{tag} is not explained");
        }
        // Every key name the grammar offers.
        let key_line = prompt
            .lines()
            .find(|l| l.starts_with("K, a key name:"))
            .unwrap_or_default();
        for key in KEY_NAMES {
            ensure!(
                key_line.contains(&format!(" {key},")) || key_line.ends_with(&format!(" {key}.")),
                "key {key} is not listed: {key_line}"
            );
        }
        // Both step kinds, the coordinate space where points are targets, and every bound.
        ensure!(prompt.contains(r#""deterministic""#) && prompt.contains(r#""llm_assisted""#));
        ensure!(
            prompt.contains(&format!("xy:{COORDINATE_MAX},{COORDINATE_MAX}"))
                == options.coordinate_targets,
            "the point syntax is stated exactly when points are targets"
        );
        let uses = |k: FieldKind| {
            spec.allowed_actions()
                .iter()
                .any(|a| a.fields().iter().any(|f| f.kind == k))
        };
        let mut bounds = vec![
            format!("1 to {} steps", l.max_steps),
            format!("at most {} tokens", l.text_tokens),
            format!("at most {} tokens.", l.sentence_tokens),
            format!("from -{m} to {m}", m = l.max_scroll),
            format!("at most {MAX_EXPECT_MS};"),
            format!("at most {} entries", l.data_entries),
        ];
        if uses(FieldKind::WaitMs) {
            bounds.push(format!("milliseconds, at most {}.", l.max_wait_ms));
        }
        if l.thought_tokens > 0 {
            bounds.push(format!("at most {} tokens)", l.thought_tokens));
        }
        for bound in bounds {
            ensure!(
                prompt.contains(&bound),
                "{bound:?} is not stated:\n{prompt}"
            );
        }
        // The scroll sign convention.
        ensure!(prompt.contains("dy > 0 scrolls down"));
    }
    Ok(())
}
