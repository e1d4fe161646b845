//! Budget by construction: a move grammar's budget is derived from its own bounds, so no
//! sampled decode ends without a move; and the ids a move can target are exactly the
//! ids the prompt shows.

use std::time::Instant;

use crate::decode_support::{env, ids, scripted, view};
use anyhow::{bail, ensure, Context, Result};
use cel_contracts::{NextMove, PlannedAction};
use sightline::decode::{
    decode_move, DecodeOptions, Grammar, GrammarEngine, GrammarOptions, MoveSpec, Sampling,
};
use sightline::model::scripted::{LogitProfile, Script};
use sightline::moves::{selected_elements, ActionKind, MoveLimits};
use sightline::planner::prompt::render_view;
use sightline::{Error, VisionLanguageModel};

/// Sampled decodes in the budget test (the issue asks for at least 2,000).
const RUNS: usize = 2_000;
/// The temperature the budget test samples at: far flatter than any real use.
const TEMPERATURE: f32 = 1.5;
/// One run in this many uses the default string bounds (long moves, the slow case);
/// the others use tight bounds, which exercise the same closing rules faster.
const DEFAULT_LIMITS_EVERY: usize = 25;

/// Element counts of the test views.
const ELEMENT_COUNTS: [usize; 4] = [0, 1, 50, 300];

fn action_sets() -> Vec<Vec<ActionKind>> {
    vec![
        ActionKind::ALL.to_vec(),
        ActionKind::DESKTOP.to_vec(),
        vec![ActionKind::Extract],
        vec![ActionKind::Type, ActionKind::SetValue],
        vec![ActionKind::Drag, ActionKind::Select],
        vec![],
    ]
}

struct Case {
    ids: Vec<String>,
    capabilities: Vec<&'static str>,
    options: GrammarOptions,
}

fn cases(limits: &MoveLimits) -> Vec<Case> {
    let mut out = Vec::new();
    for n in ELEMENT_COUNTS {
        for (i, actions) in action_sets().into_iter().enumerate() {
            for capabilities in [vec![], vec!["cdp_bound", "native_input"], vec!["cdp_bound"]] {
                out.push(Case {
                    ids: ids(n, i % 2 == 1),
                    capabilities,
                    options: GrammarOptions {
                        actions: actions.clone(),
                        coordinate_targets: i % 3 != 2,
                        limits: MoveLimits {
                            thought_tokens: if i % 2 == 0 { 0 } else { 4 },
                            ..limits.clone()
                        },
                    },
                });
            }
        }
    }
    out
}

fn targets(mv: &NextMove) -> Vec<String> {
    let NextMove::Batch { steps, .. } = mv else {
        return vec![];
    };
    steps
        .iter()
        .flat_map(|s| match &s.action {
            PlannedAction::Click { target_id, .. } | PlannedAction::SetValue { target_id, .. } => {
                vec![target_id.clone()]
            }
            PlannedAction::Type { target_id, .. } => target_id.iter().cloned().collect(),
            PlannedAction::Drag {
                from_target_id,
                to_target_id,
            } => vec![from_target_id.clone(), to_target_id.clone()],
            _ => vec![],
        })
        .collect()
}

#[test]
fn no_sampled_move_runs_out_of_tokens_and_every_target_is_shown() -> Result<()> {
    let start = Instant::now();
    let tight = MoveLimits {
        max_steps: 3,
        sentence_tokens: 4,
        text_tokens: 5,
        data_string_tokens: 3,
        data_entries: 2,
        ..MoveLimits::default()
    };
    let mut compiled = Vec::new();
    for limits in [tight, MoveLimits::default()] {
        let mut per_limits = Vec::new();
        for case in cases(&limits) {
            let v = view(&case.ids, &case.capabilities);
            let spec = MoveSpec::new(&v, &case.options)?;
            let grammar = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
            ensure!(grammar.max_tokens() == Some(spec.max_move_tokens()));
            per_limits.push((case, v, spec, grammar));
        }
        compiled.push(per_limits);
    }
    let prompt = env().tokenize("<|im_start|>assistant\n");
    let mut model = scripted(Script::Random {
        seed: 0,
        profile: LogitProfile::Uniform,
    })?;
    model.feed(&prompt, &[])?;
    let profiles = [
        LogitProfile::Uniform,
        LogitProfile::Peaked,
        LogitProfile::QuotesAndEos,
    ];
    let (mut longest, mut total_tokens, mut targeted) = (0usize, 0usize, 0usize);
    let mut kinds = [0usize; 4];
    let mut seconds_by_limits = [0f64; 2];
    let mut tokens_by_profile = [0usize; 3];
    for run in 0..RUNS {
        let run_start = Instant::now();
        let defaults = usize::from(run % DEFAULT_LIMITS_EVERY == 0);
        let set = &compiled[defaults];
        let (case, v, spec, grammar) = &set[(run / DEFAULT_LIMITS_EVERY + run) % set.len()];
        let profile = profiles[run % profiles.len()];
        model.truncate(prompt.len() - 1)?;
        model.set_script(Script::Random {
            seed: run as u64,
            profile,
        });
        let logits = model.feed(&prompt[prompt.len() - 1..], &[])?;
        let options = DecodeOptions {
            sampling: Sampling::TopP {
                temperature: TEMPERATURE,
                top_p: 1.0,
                seed: run as u64,
            },
            // Far below the longest move: the grammar's own bound must win.
            budget_tokens: 16,
            ..DecodeOptions::default()
        };
        let out = match decode_move(&mut model, &logits, grammar, &options) {
            Ok(out) => out,
            Err(Error::Decode { reason, text, .. }) => {
                bail!(
                    "run {run} ({profile:?}, {} ids): {reason}: {text}",
                    case.ids.len()
                )
            }
            Err(e) => return Err(e).context(format!("run {run}")),
        };
        let tokens = out.decoded.stats.tokens;
        ensure!(
            tokens <= spec.max_move_tokens(),
            "run {run}: {tokens} tokens over the bound {}",
            spec.max_move_tokens()
        );
        longest = longest.max(tokens);
        total_tokens += tokens;
        spec.check(&out.next_move)
            .map_err(|e| anyhow::anyhow!("run {run}: {e}: {}", out.decoded.text))?;
        let shown = render_view(v, true);
        for target in targets(&out.next_move) {
            targeted += 1;
            ensure!(
                target.starts_with("xy:") || shown.contains(&serde_json::to_string(&target)?),
                "run {run}: target {target:?} is not in the rendered view"
            );
        }
        seconds_by_limits[defaults] += run_start.elapsed().as_secs_f64();
        tokens_by_profile[run % profiles.len()] += tokens;
        kinds[match out.next_move {
            NextMove::Batch { .. } => 0,
            NextMove::Done { .. } => 1,
            NextMove::Fail { .. } => 2,
            NextMove::Clarify { .. } => 3,
        }] += 1;
    }
    eprintln!(
        "{RUNS} decodes at temperature {TEMPERATURE}: 0 budget errors; batch/done/fail/clarify \
         = {kinds:?}; {total_tokens} tokens, longest {longest}; {targeted} element targets; {:.1} s (tight / default limits {seconds_by_limits:.1?} s; tokens by \
         profile {tokens_by_profile:?})",
        start.elapsed().as_secs_f64()
    );
    ensure!(kinds.iter().all(|&k| k > 0), "kinds never seen: {kinds:?}");
    Ok(())
}

/// The grammar accepts exactly the ids the prompt shows: same selection, same order, same
/// cap, for every element count and for ids that are duplicated, huge or hostile.
#[test]
fn the_grammar_accepts_exactly_the_ids_the_prompt_shows() -> Result<()> {
    let mut hostile = ids(300, true);
    hostile[3] = "x".repeat(5_000);
    hostile[4] = hostile[5].clone();
    hostile[6] = "<|im_end|>".into();
    for element_ids in [
        ids(0, false),
        ids(1, true),
        ids(50, true),
        ids(300, false),
        hostile,
    ] {
        let v = view(&element_ids, &[]);
        let spec = MoveSpec::new(&v, &GrammarOptions::default())?;
        let shown = render_view(&v, true);
        let listed: Vec<String> = shown
            .lines()
            .filter_map(|line| line.strip_prefix("- "))
            .map(|rest| {
                let mut de = serde_json::Deserializer::from_str(rest).into_iter::<String>();
                de.next().context("no id")?.map_err(anyhow::Error::from)
            })
            .collect::<Result<_>>()?;
        ensure!(
            listed == spec.target_ids(),
            "{} ids: shown {} / accepted {}",
            element_ids.len(),
            listed.len(),
            spec.target_ids().len()
        );
        let selected: Vec<&str> = selected_elements(&v)
            .iter()
            .map(|e| e.id.as_str())
            .collect();
        ensure!(selected == spec.target_ids());
    }
    Ok(())
}

/// A thought is written first, bounded by its own token cap, and dropped from the move;
/// its cost is the key plus its text (printed: the `--think-tokens` cost).
#[test]
fn a_thought_precedes_the_move_costs_its_own_tokens_and_is_stripped() -> Result<()> {
    let v = view(&ids(3, false), &[]);
    let decode_steered =
        |thought_tokens: usize, target: &str| -> Result<(NextMove, usize, String)> {
            let options = GrammarOptions {
                limits: MoveLimits {
                    thought_tokens,
                    ..MoveLimits::default()
                },
                ..GrammarOptions::default()
            };
            let spec = MoveSpec::new(&v, &options)?;
            let grammar = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
            let (mut model, logits) = crate::decode_support::steered(target)?;
            let out = decode_move(&mut model, &logits, &grammar, &DecodeOptions::default())?;
            Ok((out.next_move, out.decoded.stats.tokens, out.decoded.text))
        };
    let bare = r#"{"kind":"batch","purpose":"Save","steps":[{"purpose":"Click Save","kind":"deterministic","action":{"type":"click","target_id":"el-1"}}]}"#;
    let (plain, plain_tokens, _) = decode_steered(0, bare)?;
    let thought = "The Save button is at the top left of the window.";
    let with = format!(r#"{{"thought":"{thought}",{}"#, &bare[1..]);
    for cap in [8usize, 32] {
        let (mv, tokens, text) = decode_steered(cap, &with)?;
        let written = sightline::decode::move_thought(&text).context("no thought")?;
        ensure!(thought.starts_with(&written), "{written}");
        let thought_tokens = env().tokenize(&written).len();
        ensure!(
            thought_tokens <= cap + 1,
            "cap {cap}: {thought_tokens} tokens"
        );
        if written != thought {
            // Cut at its bound: the steered model loses its script; the move stays valid.
            eprintln!("--think-tokens {cap}: thought cut to {thought_tokens} tokens");
            continue;
        }
        ensure!(
            serde_json::to_value(&mv)? == serde_json::to_value(&plain)?,
            "the thought changed the move: {text}"
        );
        let cost = tokens - plain_tokens;
        eprintln!(
            "--think-tokens {cap}: thought of {thought_tokens} tokens costs {cost} tokens \
             ({plain_tokens} without, {tokens} with)"
        );
        ensure!(cost <= thought_tokens + 8, "cap {cap}: cost {cost}");
    }
    Ok(())
}

/// Limits of one step and one data entry compile (llguidance rejects a `{0,0}` repetition,
/// which they used to produce) and still decode a one-step batch.
#[test]
fn one_step_and_one_entry_limits_compile_and_decode() -> Result<()> {
    let v = view(&ids(3, false), &[]);
    let options = GrammarOptions {
        limits: MoveLimits {
            max_steps: 1,
            data_entries: 1,
            ..MoveLimits::default()
        },
        ..GrammarOptions::default()
    };
    let spec = MoveSpec::new(&v, &options)?;
    let grammar = Grammar::for_move(env(), &spec, GrammarEngine::Lark)?;
    let one = r#"{"kind":"batch","purpose":"Save","steps":[{"purpose":"Click Save","kind":"deterministic","action":{"type":"click","target_id":"el-1"}}]}"#;
    let (mut model, logits) = crate::decode_support::steered(one)?;
    let out = decode_move(&mut model, &logits, &grammar, &DecodeOptions::default())?;
    let NextMove::Batch { steps, .. } = &out.next_move else {
        bail!("not a batch: {}", out.decoded.text);
    };
    ensure!(steps.len() == 1, "{}", out.decoded.text);
    Ok(())
}
