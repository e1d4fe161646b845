//! Property test: with seeded random logits, every decoded move parses, targets only
//! what is on screen, has 1–5 steps and uses no action the runtime cannot execute.

use std::collections::HashSet;

use crate::decode_support::{env, ids, scripted, short_limits, view};
use anyhow::{bail, ensure, Context, Result};
use cel_contracts::{NextMove, PlannedAction};
use sightline::decode::{
    decode_move, DecodeOptions, Grammar, GrammarEngine, GrammarOptions, MoveSpec, Sampling,
};
use sightline::model::scripted::{LogitProfile, Script};
use sightline::moves::{parse_point, ActionKind, MoveLimits};
use sightline::VisionLanguageModel;

/// Runs in the property test.
const RUNS: usize = 2_000;

/// One view configuration of the property test.
struct Case {
    ids: Vec<String>,
    capabilities: Vec<&'static str>,
    coordinate_targets: bool,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for n in [0usize, 1, 50, 500] {
        for odd in [false, true] {
            for capabilities in [
                vec![],
                vec!["cdp_bound", "native_input"],
                vec!["cdp_bound"],
                vec!["native_input"],
            ] {
                for coordinate_targets in [true, false] {
                    if odd && n == 0 {
                        continue;
                    }
                    out.push(Case {
                        ids: ids(n, odd),
                        capabilities: capabilities.clone(),
                        coordinate_targets,
                    });
                }
            }
        }
    }
    out
}

/// Check a move against the view directly (not through `MoveSpec::check`).
fn check_move(mv: &NextMove, case: &Case, limits: &MoveLimits) -> Result<()> {
    let on_screen: HashSet<&str> = case.ids.iter().map(String::as_str).collect();
    let caps = &case.capabilities;
    let native = caps.is_empty() || caps.contains(&"native_input");
    let cdp = caps.iter().any(|c| c.starts_with("cdp"));
    let target_ok =
        |id: &str| on_screen.contains(id) || (case.coordinate_targets && parse_point(id).is_some());
    match mv {
        NextMove::Batch { purpose, steps } => {
            ensure!(!purpose.is_empty(), "empty purpose");
            ensure!(
                (1..=limits.max_steps).contains(&steps.len()),
                "{} steps",
                steps.len()
            );
            for step in steps {
                let kind = ActionKind::of(&step.action).context("action outside the grammar")?;
                ensure!(
                    native || !kind.needs_native_input(),
                    "{kind:?} without native input"
                );
                ensure!(cdp || !kind.needs_cdp(), "{kind:?} without CDP");
                let targets: Vec<&str> = match &step.action {
                    PlannedAction::Click { target_id, .. } => vec![target_id],
                    PlannedAction::Type { target_id, .. } => {
                        target_id.iter().map(String::as_str).collect()
                    }
                    PlannedAction::SetValue { target_id, .. } => vec![target_id],
                    PlannedAction::Drag {
                        from_target_id,
                        to_target_id,
                    } => vec![from_target_id, to_target_id],
                    PlannedAction::Select { .. } => {
                        ensure!(case.coordinate_targets, "select without coordinates");
                        vec![]
                    }
                    PlannedAction::Wait { ms } => {
                        ensure!(*ms <= limits.max_wait_ms, "wait {ms}");
                        vec![]
                    }
                    PlannedAction::Scroll { dx, dy } => {
                        ensure!(
                            dx.unsigned_abs() <= limits.max_scroll
                                && dy.unsigned_abs() <= limits.max_scroll
                        );
                        vec![]
                    }
                    _ => vec![],
                };
                for t in targets {
                    ensure!(target_ok(t), "target {t:?} not on screen");
                }
            }
        }
        NextMove::Done { summary, .. } => ensure!(!summary.is_empty()),
        NextMove::Fail { reason } => ensure!(!reason.is_empty()),
        NextMove::Clarify { question } => ensure!(!question.is_empty()),
    }
    Ok(())
}

/// No whitespace outside strings: the grammar is compact JSON.
fn is_compact(text: &str) -> bool {
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c.is_whitespace() {
            return false;
        }
    }
    true
}

#[test]
fn random_logits_always_decode_to_valid_moves_on_screen() -> Result<()> {
    let cases = cases();
    // Tight string bounds keep random-logit runs short; `decode_rules` pins the
    // default bounds. Everything else is the default grammar.
    let limits = short_limits();
    let prompt = env().tokenize("<|im_start|>assistant\n");
    let mut compiled = Vec::with_capacity(cases.len());
    for case in &cases {
        let options = GrammarOptions {
            coordinate_targets: case.coordinate_targets,
            limits: limits.clone(),
            ..GrammarOptions::default()
        };
        let spec = MoveSpec::new(&view(&case.ids, &case.capabilities), &options)?;
        // Compiled once per view and reused by every run on it.
        compiled.push((
            spec.clone(),
            Grammar::for_move(env(), &spec, GrammarEngine::Lark)?,
        ));
    }
    let mut model = scripted(Script::Random {
        seed: 0,
        profile: LogitProfile::Uniform,
    })?;
    let first = model.feed(&prompt, &[])?;
    let _ = first;
    let profiles = [
        LogitProfile::Uniform,
        LogitProfile::Peaked,
        LogitProfile::QuotesAndEos,
    ];
    let mut kinds = [0usize; 4];
    let mut total_tokens = 0;
    for run in 0..RUNS {
        let case_idx = run % cases.len();
        let case = &cases[case_idx];
        let (spec, grammar) = &compiled[case_idx];
        let profile = profiles[(run / cases.len()) % profiles.len()];
        model.truncate(prompt.len() - 1)?;
        model.set_script(Script::Random {
            seed: run as u64,
            profile,
        });
        let first_logits = model.feed(&prompt[prompt.len() - 1..], &[])?;
        let out = decode_move(
            &mut model,
            &first_logits,
            grammar,
            &DecodeOptions::default(),
        )
        .with_context(|| format!("run {run} case {case_idx} {profile:?}"))?;
        let text = &out.decoded.text;
        total_tokens += out.decoded.stats.tokens;
        if let Err(e) = check_move(&out.next_move, case, &limits)
            .and_then(|()| spec.check(&out.next_move).map_err(anyhow::Error::msg))
        {
            bail!("run {run} case {case_idx} {profile:?}: {e}: {text}");
        }
        ensure!(is_compact(text), "run {run}: not compact: {text}");
        kinds[match out.next_move {
            NextMove::Batch { .. } => 0,
            NextMove::Done { .. } => 1,
            NextMove::Fail { .. } => 2,
            NextMove::Clarify { .. } => 3,
        }] += 1;
    }
    eprintln!(
        "{RUNS} runs over {} views: batch/done/fail/clarify = {kinds:?}, {total_tokens} tokens",
        cases.len()
    );
    // Random logits must reach every terminal shape, or the test proves little.
    ensure!(
        kinds.iter().all(|&k| k > 0),
        "some move kinds never appeared: {kinds:?}"
    );
    Ok(())
}

/// On a device the grammar prepares each step while the pass is in flight
/// (`beside_pass`): free-text tokens are fed before their commit, the mask is computed and
/// copies of the grammar are advanced by the few tokens it leaves. Forced on the CPU, that
/// order must decode exactly the tokens of the CPU's own, greedy and sampled, for both
/// grammar engines, with one pass more only for each late run; and each of those ways must
/// have been taken, or the comparison proves little.
#[test]
fn preparing_beside_the_pass_decodes_the_tokens_the_critical_path_would() -> Result<()> {
    let ids = ids(50, true);
    let options = GrammarOptions {
        limits: short_limits(),
        ..GrammarOptions::default()
    };
    let spec = MoveSpec::new(&view(&ids, &["cdp_bound", "native_input"]), &options)?;
    let prompt = env().tokenize("<|im_start|>assistant\n");
    let steered = crate::decode_support::corpus::corpus(&ids, true, 6, 11);
    let (mut taken, mut copies, mut beside, mut forced_after_taken) = (0, 0, 0, 0);
    for engine in [GrammarEngine::Lark, GrammarEngine::JsonSchema] {
        let grammar = Grammar::for_move(env(), &spec, engine)?;
        let scripts = (0..24u64)
            .map(|seed| Script::Random {
                seed,
                profile: [
                    LogitProfile::Uniform,
                    LogitProfile::Peaked,
                    LogitProfile::QuotesAndEos,
                ][seed as usize % 3],
            })
            .chain(steered.iter().map(|target| Script::Steer {
                target: target.clone().into_bytes(),
                prompt_len: prompt.len(),
            }));
        for (i, script) in scripts.enumerate() {
            let sampling = match i % 4 {
                3 => Sampling::TopP {
                    temperature: 0.8,
                    top_p: 0.9,
                    seed: i as u64,
                },
                _ => Sampling::Greedy,
            };
            let mut decoded = Vec::new();
            for beside_pass in [Some(true), None] {
                let mut model = scripted(script.clone())?;
                let first = model.feed(&prompt, &[])?;
                let options = DecodeOptions {
                    beside_pass,
                    sampling,
                    ..DecodeOptions::default()
                };
                let out = sightline::decode::decode(&mut model, &first, &grammar, &options)
                    .with_context(|| {
                        format!("{engine:?} script {i} beside_pass {beside_pass:?}")
                    })?;
                let s = &out.stats;
                if beside_pass.is_some() {
                    taken += s.committed_ahead;
                    copies += s.ahead_copies;
                    beside += s.committed_beside;
                    forced_after_taken += usize::from(s.committed_ahead > 0 && s.forced_tokens > 0);
                } else {
                    ensure!(
                        s.ahead_copies + s.committed_ahead + s.committed_beside + s.late_runs == 0,
                        "work beside the pass in the CPU's own order: {s:?}"
                    );
                }
                // The cache holds the prompt and every token fed.
                ensure!(
                    model.cached_tokens()[prompt.len()..]
                        == out.tokens[..model.cache_len() - prompt.len()]
                );
                decoded.push((out.tokens, s.forward_calls - s.late_runs));
            }
            ensure!(
                decoded[0] == decoded[1],
                "{engine:?} script {i}: preparing beside the pass decoded another output or fed it otherwise:\n{}\nagainst\n{}",
                String::from_utf8_lossy(&env().decode_bytes(&decoded[0].0)),
                String::from_utf8_lossy(&env().decode_bytes(&decoded[1].0))
            );
        }
    }
    eprintln!("copies made: {copies}, taken: {taken}, decodes with forced runs and a copy taken: {forced_after_taken}, commits beside the pass: {beside}");
    ensure!(
        taken > 0 && copies > taken && forced_after_taken > 0 && beside > 0,
        "copies {copies}, taken {taken}, with forced runs {forced_after_taken}, beside {beside}"
    );
    Ok(())
}

/// A token of free text fed before its commit can still force a run where the grammar
/// bounds the text itself (a regex of at most 12 letters, then `!`): the run is fed in a
/// pass of its own, a late run, and the tokens are those of the CPU's own order.
#[test]
fn a_late_run_after_a_commit_beside_the_pass_is_fed_and_changes_nothing() -> Result<()> {
    let grammar = Grammar::from_lark(env(), "start: WORDS \"!\"\nWORDS: /[a-z ]{1,12}/\n")?;
    let prompt = env().tokenize("<|im_start|>assistant\n");
    let mut late = 0;
    for seed in 0..12u64 {
        let script = Script::Random {
            seed,
            profile: LogitProfile::Peaked,
        };
        let mut decoded = Vec::new();
        for beside_pass in [Some(true), None] {
            let mut model = scripted(script.clone())?;
            let first = model.feed(&prompt, &[])?;
            let options = DecodeOptions {
                beside_pass,
                ..DecodeOptions::default()
            };
            let out = sightline::decode::decode(&mut model, &first, &grammar, &options)?;
            ensure!(out.text.ends_with('!'), "{:?}", out.text);
            ensure!(
                model.cached_tokens()[prompt.len()..]
                    == out.tokens[..model.cache_len() - prompt.len()]
            );
            late += out.stats.late_runs;
            decoded.push((out.tokens, out.stats.forward_calls - out.stats.late_runs));
        }
        ensure!(decoded[0] == decoded[1], "seed {seed}: {decoded:?}");
    }
    ensure!(late > 0, "no decode ran a late run");
    Ok(())
}

/// Greedy decoding tries the model's own choices before a mask (`guess_first`: its first
/// choice, then the next ones where the grammar refuses it); the tokens must be exactly
/// those of a decode that computes every mask, on random logits
/// (whose choices the grammar often refuses) and on a model steered toward valid moves
/// (whose choices it takes), for both grammar engines. Both outcomes of a guess must
/// occur, or the comparison proves little.
#[test]
fn guessing_first_decodes_the_tokens_every_mask_would() -> Result<()> {
    let limits = short_limits();
    let ids = ids(50, true);
    let options = GrammarOptions {
        limits,
        ..GrammarOptions::default()
    };
    let spec = MoveSpec::new(&view(&ids, &["cdp_bound", "native_input"]), &options)?;
    let prompt = env().tokenize("<|im_start|>assistant\n");
    let steered = crate::decode_support::corpus::corpus(&ids, true, 12, 7);
    let (mut guessed, mut refused, mut later) = (0usize, 0usize, 0usize);
    for engine in [GrammarEngine::Lark, GrammarEngine::JsonSchema] {
        let grammar = Grammar::for_move(env(), &spec, engine)?;
        let scripts = (0..60u64)
            .map(|seed| Script::Random {
                seed,
                profile: [
                    LogitProfile::Uniform,
                    LogitProfile::Peaked,
                    LogitProfile::QuotesAndEos,
                ][seed as usize % 3],
            })
            .chain(steered.iter().map(|target| Script::Steer {
                target: target.clone().into_bytes(),
                prompt_len: prompt.len(),
            }));
        for (i, script) in scripts.enumerate() {
            let mut decoded = Vec::new();
            for guess_first in [true, false] {
                let mut model = scripted(script.clone())?;
                let first = model.feed(&prompt, &[])?;
                let options = DecodeOptions {
                    guess_first,
                    ..DecodeOptions::default()
                };
                let out = sightline::decode::decode(&mut model, &first, &grammar, &options)
                    .with_context(|| format!("{engine:?} script {i} guess_first {guess_first}"))?;
                if guess_first {
                    let stats = &out.stats;
                    guessed += stats.guessed_tokens;
                    later += stats.guessed_after_refusals;
                    refused += stats.step_grammar_times.len() - stats.guessed_tokens;
                } else {
                    ensure!(
                        out.stats.guessed_tokens == 0,
                        "guessed with guess_first off"
                    );
                }
                decoded.push(out.tokens);
            }
            ensure!(
                decoded[0] == decoded[1],
                "{engine:?} script {i}: guessing first decoded another output:\n{}\nagainst\n{}",
                String::from_utf8_lossy(&env().decode_bytes(&decoded[0])),
                String::from_utf8_lossy(&env().decode_bytes(&decoded[1]))
            );
        }
    }
    eprintln!(
        "guesses taken: {guessed} ({later} after refused ones), tokens chosen under a mask: {refused}"
    );
    ensure!(
        guessed > 0 && refused > 0 && later > 0,
        "guessed {guessed} ({later} after refused ones), masked {refused}"
    );
    Ok(())
}
