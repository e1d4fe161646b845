//! One test per grammar rule, the token environment, sampling, budgets and
//! forced-token batching. Most tests steer the scripted model toward a target text:
//! a valid target must come out exactly; an invalid one must come out as some other,
//! valid move.

use std::time::Instant;

use crate::decode_support::{env, ids, odd_ids, scripted, steered, view, QWEN_LOGITS};
use anyhow::{ensure, Result};
use cel_contracts::{NextMove, PlannedAction};
use sightline::decode::{
    decode, decode_move, parse_sentence, DecodeOptions, DecodedMove, Grammar, GrammarEngine,
    GrammarOptions, MoveSpec, Sampling, TokenEnv, WarmUp,
};
use sightline::model::scripted::{LogitProfile, Script};
use sightline::moves::{ActionKind, MoveLimits};
use sightline::tokenizer::{load_tokenizer, Vocabulary};
use sightline::{Error, VisionLanguageModel};

/// Decode toward `target` on a view with these ids and capabilities.
fn decode_toward(
    view_ids: &[String],
    caps: &[&str],
    options: &GrammarOptions,
    target: &str,
) -> Result<DecodedMove> {
    let spec = MoveSpec::new(&view(view_ids, caps), options)?;
    let grammar = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
    let (mut model, logits) = steered(target)?;
    let out = decode_move(&mut model, &logits, &grammar, &DecodeOptions::default())?;
    spec.check(&out.next_move).map_err(anyhow::Error::msg)?;
    Ok(out)
}

fn actions(mv: &NextMove) -> Vec<&PlannedAction> {
    match mv {
        NextMove::Batch { steps, .. } => steps.iter().map(|s| &s.action).collect(),
        _ => vec![],
    }
}

#[test]
fn token_env_has_the_logits_width_and_never_allows_padding_or_special_tokens() -> Result<()> {
    let tokenizer = load_tokenizer(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tokenizer.json.gz"),
    )?;
    let start = Instant::now();
    let fresh = TokenEnv::from_tokenizer(&tokenizer, QWEN_LOGITS)?;
    eprintln!(
        "token environment built in {:?} (debug build of this crate)",
        start.elapsed()
    );
    ensure!(fresh.n_vocab() == QWEN_LOGITS && fresh.tokenizer_vocab() == 151_669);
    ensure!(Some(fresh.eos()) == tokenizer.token_to_id("<|im_end|>"));
    // Byte-level decoding inverts the tokenizer, unicode included.
    let text = "Größe: 42 € — 按钮 \"ok\"\n";
    ensure!(fresh.decode_bytes(&fresh.tokenize(text)) == text.as_bytes());
    // A logits width narrower than the tokenizer is a mismatch, not a panic.
    ensure!(matches!(
        TokenEnv::from_tokenizer(&tokenizer, 1000),
        Err(Error::Tokenizer { .. })
    ));
    // An environment built from another vocabulary refuses the tokenizer: one token
    // fewer, or two tokens that trade places.
    let mut fewer = Vocabulary::of(&tokenizer);
    fewer.tokens.retain(|(_, id)| *id != 1000);
    let env_fewer = TokenEnv::from_vocabulary(&fewer, QWEN_LOGITS)?;
    ensure!(matches!(
        env_fewer.bind(tokenizer.clone()),
        Err(Error::Tokenizer { .. })
    ));
    let mut swapped = Vocabulary::of(&tokenizer);
    for (_, id) in swapped.tokens.iter_mut() {
        *id = match *id {
            0 => 61,
            61 => 0,
            other => other,
        };
    }
    let env_swapped = TokenEnv::from_vocabulary(&swapped, QWEN_LOGITS)?;
    let err = env_swapped
        .bind(tokenizer.clone())
        .err()
        .ok_or_else(|| anyhow::anyhow!("a tokenizer with two tokens swapped was bound"))?;
    ensure!(err.to_string().contains("token 0 differs"), "{err}");

    // At the start of a string (almost every token allowed) and at the end of a move
    // (only EOS): padding ids and special tokens other than EOS are never allowed.
    let spec = MoveSpec::new(&view(&ids(3, false), &[]), &GrammarOptions::default())?;
    let grammar = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
    let mut matcher = grammar.matcher();
    for t in env().tokenize(r#"{"kind":"fail","reason":"x"#) {
        matcher.consume_token(t)?;
    }
    let mask = matcher.compute_mask()?;
    ensure!(
        mask.num_set() > 100_000,
        "inside a string most tokens are allowed"
    );
    for id in 151_643..QWEN_LOGITS as u32 {
        ensure!(!mask.is_allowed(id), "token {id} allowed inside a string");
    }
    Ok(())
}

#[test]
fn steered_moves_of_every_shape_decode_exactly() -> Result<()> {
    let targets = [
        r#"{"kind":"batch","purpose":"Open the file menu","steps":[{"purpose":"click File","kind":"deterministic","action":{"type":"click","target_id":"el-1"}},{"purpose":"wait","kind":"deterministic","action":{"type":"wait","ms":500}},{"purpose":"type","kind":"llm_assisted","action":{"type":"type","target_id":"xy:120,980","text":"He said \"hi\"\\n"}}]}"#,
        r#"{"kind":"batch","purpose":"keys","steps":[{"purpose":"copy","kind":"deterministic","action":{"type":"key_combo","keys":["ctrl","c"]}},{"purpose":"enter","kind":"deterministic","action":{"type":"key","key":"enter"}},{"purpose":"scroll","kind":"deterministic","action":{"type":"scroll","dx":0,"dy":-300}},{"purpose":"drag","kind":"deterministic","action":{"type":"drag","from_target_id":"el-0","to_target_id":"xy:0,1000"}},{"purpose":"select","kind":"deterministic","action":{"type":"select","from_x":1,"from_y":2,"to_x":999,"to_y":1000}}]}"#,
        r#"{"kind":"batch","purpose":"read","steps":[{"purpose":"read prices","kind":"deterministic","action":{"type":"extract","goal":"prices","data":"$3, $4"}},{"purpose":"type","kind":"deterministic","action":{"type":"type","text":"Grüße 按钮"}}]}"#,
        r#"{"kind":"done","summary":"Saved the file","extracted_data":{"price":12.5,"currency":"EUR","ok":true,"n":null}}"#,
        r#"{"kind":"done","summary":"Nothing to extract","extracted_data":null}"#,
        r#"{"kind":"done","summary":"List","extracted_data":["a",1,false]}"#,
        r#"{"kind":"fail","reason":"The dialog does not respond"}"#,
        r#"{"kind":"clarify","question":"Which file should I delete?"}"#,
    ];
    for target in targets {
        for engine in [GrammarEngine::Lark, GrammarEngine::JsonSchema] {
            let spec = MoveSpec::new(&view(&ids(3, false), &[]), &GrammarOptions::default())?;
            let grammar = Grammar::for_move(env(), &spec, engine)?;
            let (mut model, logits) = steered(target)?;
            let out = decode_move(&mut model, &logits, &grammar, &DecodeOptions::default())?;
            ensure!(
                out.decoded.text == target,
                "{engine:?}:\n{}\n{target}",
                out.decoded.text
            );
        }
    }
    Ok(())
}

#[test]
fn grammar_rejects_cdp_actions_without_a_cdp_capability() -> Result<()> {
    let target = r#"{"kind":"batch","purpose":"go","steps":[{"purpose":"eval","kind":"deterministic","action":{"type":"cdp_eval","expression":"document.title"}},{"purpose":"nav","kind":"deterministic","action":{"type":"navigate","url":"https://example.com"}}]}"#;
    let with = decode_toward(
        &ids(3, false),
        &["cdp_bound", "native_input"],
        &GrammarOptions::default(),
        target,
    )?;
    ensure!(with.decoded.text == target);
    for caps in [vec![], vec!["native_input"]] {
        let spec = MoveSpec::new(&view(&ids(3, false), &caps), &GrammarOptions::default())?;
        ensure!(!spec.allowed_actions().iter().any(|a| a.needs_cdp()));
        let without = decode_toward(&ids(3, false), &caps, &GrammarOptions::default(), target)?;
        for a in actions(&without.next_move) {
            ensure!(
                !matches!(
                    a,
                    PlannedAction::CdpEval { .. } | PlannedAction::Navigate { .. }
                ),
                "{a:?}"
            );
        }
    }
    Ok(())
}

#[test]
fn grammar_rejects_native_input_when_capabilities_lack_it() -> Result<()> {
    let target = r#"{"kind":"batch","purpose":"click","steps":[{"purpose":"click","kind":"deterministic","action":{"type":"click","target_id":"el-1"}}]}"#;
    let out = decode_toward(
        &ids(3, false),
        &["cdp_bound"],
        &GrammarOptions::default(),
        target,
    )?;
    for a in actions(&out.next_move) {
        let kind = ActionKind::of(a).ok_or_else(|| anyhow::anyhow!("unknown action"))?;
        ensure!(!kind.needs_native_input(), "{a:?}");
    }
    // No capabilities listed at all: a desktop with native input.
    let desktop = decode_toward(&ids(3, false), &[], &GrammarOptions::default(), target)?;
    ensure!(desktop.decoded.text == target);
    Ok(())
}

#[test]
fn caller_configured_action_set_limits_the_grammar() -> Result<()> {
    let options = GrammarOptions {
        actions: vec![ActionKind::Click, ActionKind::SetValue],
        ..GrammarOptions::default()
    };
    let target = r#"{"kind":"batch","purpose":"set","steps":[{"purpose":"set","kind":"deterministic","action":{"type":"set_value","target_id":"el-2","value":"42"}}]}"#;
    ensure!(
        decode_toward(&ids(3, false), &[], &options, target)?
            .decoded
            .text
            == target
    );
    let wait = r#"{"kind":"batch","purpose":"wait","steps":[{"purpose":"wait","kind":"deterministic","action":{"type":"wait","ms":5}}]}"#;
    let out = decode_toward(&ids(3, false), &[], &options, wait)?;
    for a in actions(&out.next_move) {
        ensure!(
            matches!(
                a,
                PlannedAction::Click { .. } | PlannedAction::SetValue { .. }
            ),
            "{a:?}"
        );
    }
    Ok(())
}

#[test]
fn grammar_rejects_target_ids_not_in_view() -> Result<()> {
    let target = r#"{"kind":"batch","purpose":"click","steps":[{"purpose":"click","kind":"deterministic","action":{"type":"click","target_id":"el-99"}}]}"#;
    let out = decode_toward(&ids(3, false), &[], &GrammarOptions::default(), target)?;
    for a in actions(&out.next_move) {
        for t in a.target_ids() {
            ensure!(
                ["el-0", "el-1", "el-2"].contains(&t) || t.starts_with("xy:"),
                "{t:?}"
            );
        }
    }
    // Coordinates out of range or off: not targets.
    for bad in ["xy:1001,5", "xy:05,5"] {
        let t = target.replace("el-99", bad);
        let out = decode_toward(&ids(3, false), &[], &GrammarOptions::default(), &t)?;
        ensure!(out.decoded.text != t, "{bad} accepted");
    }
    let ids_only = GrammarOptions {
        coordinate_targets: false,
        ..GrammarOptions::default()
    };
    let xy = target.replace("el-99", "xy:5,5");
    ensure!(
        decode_toward(&ids(3, false), &[], &GrammarOptions::default(), &xy)?
            .decoded
            .text
            == xy
    );
    ensure!(
        decode_toward(&ids(3, false), &[], &ids_only, &xy)?
            .decoded
            .text
            != xy
    );
    // No elements and no coordinates: nothing to click, drag or select.
    let spec = MoveSpec::new(&view(&[], &[]), &ids_only)?;
    for a in [
        ActionKind::Click,
        ActionKind::Drag,
        ActionKind::SetValue,
        ActionKind::Select,
    ] {
        ensure!(!spec.allowed_actions().contains(&a), "{a:?} allowed");
    }
    Ok(())
}

#[test]
fn odd_element_ids_are_escaped_and_round_trip() -> Result<()> {
    let mut view_ids = odd_ids();
    view_ids.extend(ids(488, false).into_iter().skip(12));
    for id in odd_ids() {
        let target = serde_json::to_string(&serde_json::json!({
            "kind": "batch", "purpose": "click",
            "steps": [{"purpose": "click", "kind": "deterministic", "action": {"type": "click", "target_id": id}}]
        }))?;
        let out = decode_toward(&view_ids, &[], &GrammarOptions::default(), &target)?;
        ensure!(out.decoded.text == target, "{id:?}: {}", out.decoded.text);
        let got = actions(&out.next_move)[0].target_ids();
        ensure!(got == [id.as_str()], "{got:?}");
    }
    Ok(())
}

#[test]
fn batches_hold_one_to_five_steps() -> Result<()> {
    let step = r#"{"purpose":"w","kind":"deterministic","action":{"type":"wait","ms":1}}"#;
    let six = format!(
        r#"{{"kind":"batch","purpose":"many","steps":[{}]}}"#,
        [step; 6].join(",")
    );
    let out = decode_toward(&ids(1, false), &[], &GrammarOptions::default(), &six)?;
    match &out.next_move {
        NextMove::Batch { steps, .. } => ensure!(steps.len() == 5, "{}", steps.len()),
        other => anyhow::bail!("expected a batch, got {other:?}"),
    }
    let none = r#"{"kind":"batch","purpose":"none","steps":[]}"#;
    let out = decode_toward(&ids(1, false), &[], &GrammarOptions::default(), none)?;
    ensure!(out.decoded.text != none);
    Ok(())
}

#[test]
fn strings_close_at_their_token_bound_and_numbers_stay_in_range() -> Result<()> {
    let limits = MoveLimits::default();
    let long = "word ".repeat(300);
    let target = format!(r#"{{"kind":"fail","reason":"{long}"}}"#);
    let out = decode_toward(&ids(1, false), &[], &GrammarOptions::default(), &target)?;
    let NextMove::Fail { reason } = &out.next_move else {
        anyhow::bail!("expected fail: {}", out.decoded.text);
    };
    let n = env().tokenize(reason).len();
    // The bound, plus the token that closes the string.
    ensure!(
        n <= limits.sentence_tokens + 1 && n >= limits.sentence_tokens - 2,
        "{n} tokens"
    );

    for (too_big, field) in [
        (
            format!(r#"{{"type":"wait","ms":{}}}"#, limits.max_wait_ms + 1),
            "wait",
        ),
        (
            format!(
                r#"{{"type":"scroll","dx":0,"dy":-{}}}"#,
                limits.max_scroll + 1
            ),
            "scroll",
        ),
        (
            r#"{"type":"select","from_x":1001,"from_y":0,"to_x":0,"to_y":0}"#.to_string(),
            "select",
        ),
        (r#"{"type":"key","key":"hyper"}"#.to_string(), "key"),
        (
            r#"{"type":"key_combo","keys":["ctrl"]}"#.to_string(),
            "key_combo",
        ),
    ] {
        let target = format!(
            r#"{{"kind":"batch","purpose":"p","steps":[{{"purpose":"p","kind":"deterministic","action":{too_big}}}]}}"#
        );
        let out = decode_toward(&ids(1, false), &[], &GrammarOptions::default(), &target)?;
        ensure!(
            out.decoded.text != target,
            "{field}: out-of-range value accepted"
        );
    }
    Ok(())
}

#[test]
fn terminal_moves_need_non_empty_text_and_compact_json() -> Result<()> {
    for target in [
        r#"{"kind":"fail","reason":""}"#,
        r#"{"kind":"clarify","question":""}"#,
        r#"{"kind":"done","summary":""}"#,
        r#"{"kind": "fail", "reason": "spaces"}"#,
        r#"{"kind":"fail","reason":"x","extra":1}"#,
        r#"{"kind":"batch","purpose":"p","steps":[{"purpose":"no kind","action":{"type":"wait","ms":1}}]}"#,
    ] {
        let out = decode_toward(&ids(1, false), &[], &GrammarOptions::default(), target)?;
        ensure!(out.decoded.text != target, "accepted {target}");
        ensure!(!out.decoded.text.contains(": "), "{}", out.decoded.text);
    }
    Ok(())
}

#[test]
fn forced_runs_are_fed_in_one_pass_with_the_same_output_as_unbatched() -> Result<()> {
    let spec = MoveSpec::new(
        &view(&ids(50, true), &["cdp_bound", "native_input"]),
        &GrammarOptions::default(),
    )?;
    let grammar = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
    let prompt = env().tokenize("<|im_start|>assistant\n");
    let target = r#"{"kind":"batch","purpose":"Open the file menu","steps":[{"purpose":"click File","kind":"deterministic","action":{"type":"click","target_id":"el-20"}},{"purpose":"wait for it","kind":"deterministic","action":{"type":"wait","ms":500}}]}"#;
    let scripts = [
        Script::Steer {
            target: target.as_bytes().to_vec(),
            prompt_len: prompt.len(),
        },
        Script::Random {
            seed: 3,
            profile: LogitProfile::QuotesAndEos,
        },
        Script::Random {
            seed: 4,
            profile: LogitProfile::Peaked,
        },
    ];
    for script in scripts {
        let mut outputs = Vec::new();
        for batch_forced in [true, false] {
            let mut model = scripted(script.clone())?;
            let logits = model.feed(&prompt, &[])?;
            let options = DecodeOptions {
                batch_forced,
                ..DecodeOptions::default()
            };
            let out = decode(&mut model, &logits, &grammar, &options)?;
            ensure!(model.forward_calls() - 1 == out.stats.forward_calls);
            // The cache holds the prompt and every emitted token fed to it.
            ensure!(model.cached_tokens()[..prompt.len()] == prompt[..]);
            ensure!(
                model.cached_tokens()[prompt.len()..]
                    == out.tokens[..model.cache_len() - prompt.len()]
            );
            outputs.push(out);
        }
        let (batched, unbatched) = (&outputs[0], &outputs[1]);
        ensure!(
            batched.tokens == unbatched.tokens,
            "{}\n{}",
            batched.text,
            unbatched.text
        );
        ensure!(batched.stats.forced_tokens > 0);
        ensure!(
            batched.stats.forward_calls < batched.stats.tokens
                && batched.stats.forward_calls < unbatched.stats.forward_calls,
            "{:?} vs {:?}",
            batched.stats.forward_calls,
            unbatched.stats.forward_calls
        );
        eprintln!(
            "{} tokens, {} forced ({:.0}%), {} passes batched vs {} unbatched",
            batched.stats.tokens,
            batched.stats.forced_tokens,
            100.0 * batched.stats.forced_share(),
            batched.stats.forward_calls,
            unbatched.stats.forward_calls
        );
    }
    Ok(())
}

#[test]
fn top_p_sampling_is_reproducible_by_seed_and_greedy_is_deterministic() -> Result<()> {
    let limits = MoveLimits {
        sentence_tokens: 6,
        text_tokens: 6,
        ..MoveLimits::default()
    };
    let spec = MoveSpec::new(
        &view(&ids(5, false), &[]),
        &GrammarOptions {
            limits,
            ..GrammarOptions::default()
        },
    )?;
    let grammar = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
    let run = |sampling: Sampling| -> Result<String> {
        let mut model = scripted(Script::Random {
            seed: 11,
            profile: LogitProfile::Peaked,
        })?;
        let logits = model.feed(&env().tokenize("hi"), &[])?;
        let options = DecodeOptions {
            sampling,
            ..DecodeOptions::default()
        };
        Ok(decode_move(&mut model, &logits, &grammar, &options)?
            .decoded
            .text)
    };
    let top_p = |seed| Sampling::TopP {
        temperature: 1.0,
        top_p: 0.95,
        seed,
    };
    ensure!(run(Sampling::Greedy)? == run(Sampling::Greedy)?);
    ensure!(run(top_p(1))? == run(top_p(1))?);
    let distinct: std::collections::HashSet<String> =
        (0..6).map(|s| run(top_p(s))).collect::<Result<_>>()?;
    ensure!(distinct.len() > 1, "seeds made no difference");
    Ok(())
}

#[test]
fn budget_exhaustion_is_a_decode_error_with_the_text() -> Result<()> {
    // Move grammars set their own budget (their longest move); a grammar without a
    // derived bound decodes under `budget_tokens`.
    let spec = MoveSpec::new(&view(&ids(1, false), &[]), &GrammarOptions::default())?;
    let grammar = Grammar::from_lark(env(), &spec.lark())?;
    ensure!(grammar.max_tokens().is_none());
    let (mut model, logits) =
        steered(r#"{"kind":"fail","reason":"a long enough reason to run out"}"#)?;
    let options = DecodeOptions {
        budget_tokens: 8,
        ..DecodeOptions::default()
    };
    match decode(&mut model, &logits, &grammar, &options) {
        Err(Error::Decode { reason, text, .. }) => {
            ensure!(
                reason.contains("budget") && text.starts_with(r#"{"kind":"fail""#),
                "{reason}: {text}"
            );
        }
        other => anyhow::bail!("expected a budget error, got {other:?}"),
    }
    // Logits of the wrong width are refused.
    let narrow =
        candle_core::Tensor::zeros(10, candle_core::DType::F32, &candle_core::Device::Cpu)?;
    ensure!(matches!(
        decode(&mut model, &narrow, &grammar, &options),
        Err(Error::InvalidInput { .. })
    ));
    Ok(())
}

#[test]
fn sentence_grammar_decodes_bounded_free_text() -> Result<()> {
    let grammar = Grammar::sentence(env(), 32)?;
    let (mut model, logits) = steered(r#""The Send button is still visible""#)?;
    let out = decode(&mut model, &logits, &grammar, &DecodeOptions::default())?;
    ensure!(
        parse_sentence(&out.text)? == "The Send button is still visible",
        "{}",
        out.text
    );
    let long = format!("\"{}\"", "très long ".repeat(100));
    let (mut model, logits) = steered(&long)?;
    let out = decode(&mut model, &logits, &grammar, &DecodeOptions::default())?;
    let text = parse_sentence(&out.text)?;
    ensure!(env().tokenize(&text).len() <= 34, "{text}");
    Ok(())
}

#[test]
fn a_grammar_walked_before_its_decode_decodes_the_same_moves() -> Result<()> {
    let ids = ids(40, false);
    let click = format!(
        r#"{{"kind":"batch","purpose":"open it","steps":[{{"purpose":"click","kind":"deterministic","action":{{"type":"click","target_id":"{}","expect_after":{{"kind":"dom_changed","timeout_ms":500}}}}}}]}}"#,
        ids[7]
    );
    let targets = [
        click.as_str(),
        r#"{"kind":"done","summary":"The settings are open","extracted_data":null}"#,
    ];
    let spec = MoveSpec::new(&view(&ids, &[]), &GrammarOptions::default())?;
    let cold = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
    let warm = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;

    // Three walks, run to their end (nothing stops them here, as a prefill would).
    let walks = WarmUp::start(&warm, 3)?;
    let deadline = Instant::now() + std::time::Duration::from_secs(120);
    while !walks.is_done() && Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let stats = walks.finish();
    ensure!(stats.walks == 3 && stats.tokens > 3, "{stats:?}");

    // The same moves as on the grammar no walk touched, token for token: the walks
    // change the time a decode takes, never its output.
    for target in targets {
        let decoded = |grammar: &Grammar| -> Result<DecodedMove> {
            let (mut model, logits) = steered(target)?;
            Ok(decode_move(
                &mut model,
                &logits,
                grammar,
                &DecodeOptions::default(),
            )?)
        };
        let (c, w) = (decoded(&cold)?, decoded(&warm)?);
        ensure!(c.decoded.tokens == w.decoded.tokens);
        ensure!(w.decoded.text == target, "{}", w.decoded.text);
    }

    // Stopped at once, walks that would never end return after the step they are in;
    // so does a warm-up that is dropped.
    let endless = WarmUp::start(
        &Grammar::for_move(env(), &spec, GrammarEngine::Lark)?,
        usize::MAX,
    )?;
    ensure!(endless.finish().walks < 1_000);
    drop(WarmUp::start(&warm, usize::MAX)?);
    Ok(())
}
