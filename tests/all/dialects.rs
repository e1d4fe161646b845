//! Action dialects and Thinking templates: each dialect's grammar accepts the answers its
//! models are documented to write (UI-MOPD's OSWorld trajectory, UI-Venus's and MAI-UI's
//! formats) and rejects what Sightline cannot run (a point off the 0–1000 grid, an action it
//! leaves out); their translation into a `NextMove` is exact; random-logit decodes in every
//! dialect and template always translate to a move the view allows; and `sightline plan` on
//! the tiny fixture model answers in a dialect chosen by flag.

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use cel_contracts::{NextMove, PlannedAction, Step, StepKind};
use sightline::chat::Template;
use sightline::decode::{decode_answer, AnswerSpec, DecodeOptions, GrammarOptions};
use sightline::model::scripted::{LogitProfile, Script};
use sightline::moves::{Dialect, MoveLimits};
use sightline::VisionLanguageModel;

use crate::decode_support::{env, ids, scripted, short_limits, view};

/// The special tokens a dialect's answer is spelled with.
const SPECIAL_TAGS: [&str; 3] = ["<tool_call>", "</tool_call>", "</think>"];

/// `text` as tokens, its special tags as their single tokens (as a model writes them).
fn tokens_of(text: &str) -> Result<Vec<u32>> {
    let trie = env().tok_env().tok_trie();
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let next = SPECIAL_TAGS
            .iter()
            .filter_map(|tag| rest.find(tag).map(|i| (i, *tag)))
            .min();
        match next {
            Some((i, tag)) => {
                out.extend(env().tokenize(&rest[..i]));
                out.push(trie.get_special_token(tag).context(tag)?);
                rest = &rest[i + tag.len()..];
            }
            None => {
                out.extend(env().tokenize(rest));
                return Ok(out);
            }
        }
    }
}

/// The turn's answer grammar in `dialect` and `template`, a view of three elements with
/// native input, a thought of at most `thought_tokens`.
fn spec(dialect: Dialect, template: Template, thought_tokens: usize) -> Result<AnswerSpec> {
    let options = GrammarOptions {
        limits: MoveLimits {
            thought_tokens,
            ..MoveLimits::default()
        },
        ..GrammarOptions::default()
    };
    Ok(AnswerSpec::new(
        &view(&ids(3, false), &[]),
        &options,
        dialect,
        template,
    )?)
}

/// Whether the compiled grammar accepts `text` as a whole answer.
fn accepts(spec: &AnswerSpec, text: &str) -> Result<bool> {
    let grammar = spec.grammar(env())?;
    let mut matcher = grammar.matcher();
    if matcher.consume_tokens(&tokens_of(text)?).is_err() {
        return Ok(false);
    }
    Ok(matcher.is_accepting().unwrap_or(false))
}

/// Two moves are the same (`NextMove` has no `PartialEq`): equal as JSON.
fn same(a: &NextMove, b: &NextMove) -> Result<bool> {
    Ok(serde_json::to_value(a)? == serde_json::to_value(b)?)
}

fn batch(purpose: &str, actions: Vec<PlannedAction>) -> NextMove {
    NextMove::Batch {
        purpose: purpose.into(),
        steps: actions
            .into_iter()
            .map(|action| Step {
                purpose: purpose.into(),
                kind: StepKind::Deterministic,
                action,
            })
            .collect(),
    }
}

fn click(target: &str) -> PlannedAction {
    PlannedAction::Click {
        target_id: target.into(),
        expect_after: None,
    }
}

/// A `computer_use` answer with an `Action:` line.
fn tool_answer(sentence: &str, arguments: &str) -> String {
    format!(
        "Action: {sentence}\n<tool_call>\n{{\"name\": \"computer_use\", \"arguments\": \
         {arguments}}}\n</tool_call>"
    )
}

/// UI-MOPD's OSWorld trajectory (`demo/osworld/traj.jsonl`), verbatim, with the moves they
/// are.
fn documented_tool_answers() -> Vec<(String, NextMove)> {
    let files = "Click the Files application icon on the left dock (the gray folder icon) to open the file manager.";
    let documents = "Double-click the \u{201c}Documents\u{201d} folder icon in the Files window\u{2019}s main pane to open the Documents directory.";
    let print = "Press and hold the Ctrl key and press P to open the Print dialog in the active Image Viewer window.";
    let typing = "Type the text exactly: receipt.pdf";
    let finish = "Terminate the session and mark the task as successfully completed.";
    vec![
        (
            tool_answer(
                files,
                r#"{"action": "left_click", "coordinate": [18, 559]}"#,
            ),
            batch(files, vec![click("xy:18,559")]),
        ),
        (
            tool_answer(
                documents,
                r#"{"action": "double_click", "coordinate": [226, 277]}"#,
            ),
            batch(documents, vec![click("xy:226,277"), click("xy:226,277")]),
        ),
        (
            tool_answer(print, r#"{"action": "key", "keys": ["ctrl", "p"]}"#),
            batch(
                print,
                vec![PlannedAction::KeyCombo {
                    keys: vec!["ctrl".into(), "p".into()],
                }],
            ),
        ),
        (
            tool_answer(typing, r#"{"action": "type", "text": "receipt.pdf"}"#),
            batch(
                typing,
                vec![PlannedAction::Type {
                    target_id: None,
                    text: "receipt.pdf".into(),
                }],
            ),
        ),
        (
            tool_answer(finish, r#"{"action": "terminate", "status": "success"}"#),
            NextMove::Done {
                summary: finish.into(),
                extracted_data: serde_json::Value::Null,
            },
        ),
    ]
}

#[test]
fn the_computer_use_grammar_accepts_ui_mopds_answers_and_translates_them_exactly() -> Result<()> {
    let action = spec(Dialect::ComputerUseAction, Template::Instruct, 0)?;
    let bare = spec(Dialect::ComputerUse, Template::Instruct, 0)?;
    for (answer, expected) in documented_tool_answers() {
        ensure!(accepts(&action, &answer)?, "rejected: {answer}");
        ensure!(same(&action.translate(&answer)?, &expected)?, "{answer}");
        // The same call without its Action: line is Qwen3-VL's own answer.
        let call = &answer[answer.find("<tool_call>").context("call")?..];
        ensure!(accepts(&bare, call)?, "rejected: {call}");
        ensure!(
            !accepts(&bare, &answer)?,
            "the bare dialect took an Action: line"
        );
        bare.translate(call)?;
    }
    Ok(())
}

#[test]
fn the_computer_use_grammar_rejects_off_screen_points_and_actions_sightline_cannot_run(
) -> Result<()> {
    let spec = spec(Dialect::ComputerUseAction, Template::Instruct, 0)?;
    let ok = tool_answer(
        "Click.",
        r#"{"action": "left_click", "coordinate": [1000, 0]}"#,
    );
    ensure!(accepts(&spec, &ok)?, "the grid's corner rejected");
    for arguments in [
        r#"{"action": "left_click", "coordinate": [1001, 5]}"#,
        r#"{"action": "left_click", "coordinate": [5, -1]}"#,
        r#"{"action": "left_click", "coordinate": [05, 5]}"#,
        r#"{"action": "left_click", "coordinate": [5, 5, 5]}"#,
        r#"{"action": "mouse_move", "coordinate": [5, 5]}"#,
        r#"{"action": "right_click", "coordinate": [5, 5]}"#,
        r#"{"action": "key", "keys": ["hyper"]}"#,
        r#"{"action": "terminate", "status": "maybe"}"#,
        r#"{"action":"left_click","coordinate":[5,5]}"#,
    ] {
        let answer = tool_answer("Click.", arguments);
        ensure!(!accepts(&spec, &answer)?, "accepted: {answer}");
        ensure!(
            spec.translate(&answer).is_err() || arguments.contains("\"action\":\""),
            "translated: {answer}"
        );
    }
    // A point off the grid is refused by the translation too, whatever wrote it.
    let off = tool_answer(
        "Click.",
        r#"{"action": "left_click", "coordinate": [1001, 5]}"#,
    );
    ensure!(spec.translate(&off).is_err());
    Ok(())
}

#[test]
fn a_thinking_template_thinks_first_and_the_thought_is_not_the_move() -> Result<()> {
    let thinking = spec(Dialect::ComputerUseAction, Template::Thinking, 32)?;
    let (answer, expected) = documented_tool_answers()
        .into_iter()
        .next()
        .context("an example")?;
    // After `<think>\n` in the prompt: the thought, `</think>`, a blank line (Qwen3's) or one
    // newline (UI-MOPD's training targets), then the answer.
    for sep in ["\n\n", "\n"] {
        let text = format!("The dock is on the left.\n</think>{sep}{answer}");
        ensure!(accepts(&thinking, &text)?, "rejected: {text}");
    }
    ensure!(
        !accepts(&thinking, &answer)?,
        "a Thinking answer without its </think> accepted"
    );
    ensure!(same(&thinking.translate(&answer)?, &expected)?);
    // No thought wanted: the thought is closed empty.
    let closed = spec(Dialect::Json, Template::Thinking, 0)?;
    let json = r#"{"kind":"fail","reason":"no window"}"#;
    ensure!(accepts(&closed, &format!("\n</think>\n\n{json}"))?);
    ensure!(!accepts(&closed, &format!("Hmm.\n</think>\n\n{json}"))?);
    Ok(())
}

#[test]
fn grounding_answers_become_one_click_at_the_point() -> Result<()> {
    let point = spec(Dialect::GroundingPoint, Template::Instruct, 0)?;
    let goal = "test";
    ensure!(accepts(&point, "[512,64]")?);
    ensure!(same(
        &point.translate("[512,64]")?,
        &batch(goal, vec![click("xy:512,64")])
    )?);
    ensure!(accepts(&point, "[-1,-1]")?);
    ensure!(matches!(point.translate("[-1,-1]")?, NextMove::Fail { .. }));
    for bad in ["[1001,3]", "[3,-2]", "[3]", "click(3,4)"] {
        ensure!(!accepts(&point, bad)?, "accepted {bad}");
    }
    // MAI-UI-8B's answer in its ScreenSpot-Pro outputs (`SSPro.jsonl`), verbatim: its
    // reasoning, then the tagged answer.
    let tagged = spec(Dialect::GroundingAnswer, Template::Instruct, 96)?;
    let answer = "<grounding_think>\nThought: The instruction asks to open version control in \
                  Android Studio. At the bottom left of the Android Studio window, there is a tab \
                  labeled \"Version Control\" with a small icon that looks like a branch or commit \
                  symbol. Clicking this tab will open the version control panel.\n\
                  </grounding_think>\n<answer>\n{\"coordinate\":[264,866]}\n</answer>";
    ensure!(accepts(&tagged, answer)?, "rejected: {answer}");
    ensure!(same(
        &tagged.translate(answer)?,
        &batch(goal, vec![click("xy:264,866")])
    )?);
    ensure!(!accepts(
        &tagged,
        &answer.replace("[264,866]", "[264,1866]")
    )?);
    Ok(())
}

/// Random-logit decodes per dialect and template (`decode_property` does the same for the
/// JSON grammar).
const RUNS_PER_LANGUAGE: u64 = 2_000;

#[test]
fn random_logits_in_every_dialect_and_template_translate_to_moves_the_view_allows() -> Result<()> {
    let languages = [
        (Dialect::ComputerUse, Template::Instruct),
        (Dialect::ComputerUseAction, Template::Instruct),
        (Dialect::ComputerUseAction, Template::Thinking),
        (Dialect::GroundingPoint, Template::Instruct),
        (Dialect::GroundingAnswer, Template::Instruct),
        (Dialect::Json, Template::Thinking),
    ];
    let prompt = env().tokenize("<|im_start|>assistant\n");
    let mut model = scripted(Script::Random {
        seed: 0,
        profile: LogitProfile::Uniform,
    })?;
    model.feed(&prompt[..prompt.len() - 1], &[])?;
    let profiles = [
        LogitProfile::Uniform,
        LogitProfile::Peaked,
        LogitProfile::QuotesAndEos,
    ];
    for (dialect, template) in languages {
        // Short free text keeps the runs quick; the bounds are what is under test.
        let options = GrammarOptions {
            limits: MoveLimits {
                thought_tokens: 5,
                ..short_limits()
            },
            ..GrammarOptions::default()
        };
        let spec = AnswerSpec::new(&view(&ids(3, false), &[]), &options, dialect, template)?;
        let grammar = spec.grammar(env())?;
        for run in 0..RUNS_PER_LANGUAGE {
            let profile = profiles[run as usize % profiles.len()];
            model.truncate(prompt.len() - 1)?;
            model.set_script(Script::Random { seed: run, profile });
            let first = model.feed(&prompt[prompt.len() - 1..], &[])?;
            let out = decode_answer(
                &mut model,
                &first,
                &spec,
                &grammar,
                &DecodeOptions::default(),
            )
            .with_context(|| format!("{dialect} {template} run {run} {profile:?}"))?;
            if let Err(e) = spec.moves().check(&out.next_move) {
                bail!("{dialect} {template} run {run}: {e}: {}", out.decoded.text);
            }
            if template.thinks() {
                ensure!(
                    !out.answer.contains("</think>"),
                    "the thought leaked into the answer: {}",
                    out.decoded.text
                );
            }
        }
    }
    Ok(())
}

#[test]
fn plan_on_the_tiny_model_answers_in_the_dialect_a_flag_chooses() -> Result<()> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures");
    let model = fixtures.join("tiny-b");
    // Every shipped dialect, each once with a template (a thinking one where its models think).
    for (dialect, template) in [
        ("json", "qwen3-vl-thinking"),
        ("qwen-computer-use", "qwen3-vl"),
        ("qwen-computer-use-action", "qwen3-vl-thinking"),
        ("grounding-point", "qwen3-vl"),
        ("grounding-answer", "qwen3-vl"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sightline"))
            .args(["plan", "--model"])
            .arg(&model)
            .arg("--screenshot")
            .arg(fixtures.join("screens/ui_exact.png"))
            .args([
                "--device",
                "cpu",
                "--dialect",
                dialect,
                "--template",
                template,
                "--think-tokens",
                "4",
                "--temperature",
                "1.0",
                "--seed",
                "3",
                "--max-visual-tokens",
                "48",
                "--stats",
                "--show-prompt",
                "Open the Files application",
            ])
            .env("HF_HUB_OFFLINE", "1")
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        ensure!(out.status.success(), "{dialect}: {stderr}");
        let mv: NextMove = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("{dialect}: {}", String::from_utf8_lossy(&out.stdout)))?;
        match dialect {
            "grounding-point" | "grounding-answer" => ensure!(
                matches!(&mv, NextMove::Batch { steps, .. } if steps.len() == 1)
                    || matches!(mv, NextMove::Fail { .. }),
                "{mv:?}"
            ),
            "json" => ensure!(
                stderr.contains("<think>"),
                "the thinking template did not open a thought: {stderr}"
            ),
            "qwen-computer-use" => ensure!(
                stderr.contains("# Tools"),
                "the prompt is not the dialect's: {stderr}"
            ),
            _ => {
                ensure!(
                    stderr.contains("# Tools") && stderr.contains("<think>"),
                    "the prompt is not the dialect's: {stderr}"
                );
            }
        }
    }
    Ok(())
}
