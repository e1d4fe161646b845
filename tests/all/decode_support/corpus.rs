//! A seeded corpus of plausible moves for a view, as the wire JSON serde writes: what
//! the grammar measurements decode (shared by `tests/all/decode_measure.rs` and
//! `benches/grammar.rs`).

use cel_contracts::{NextMove, PlannedAction, Step, StepKind};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PHRASES: &[&str] = &[
    "Open the File menu",
    "Click the Save button to store the document",
    "Type the search query into the address bar",
    "Scroll down to reveal the rest of the results",
    "Dismiss the cookie banner",
    "Wait for the page to finish loading",
    "Select the first paragraph",
    "Press Enter to submit the form",
    "Copy the selected text",
    "Read the prices in the table",
    "Switch to the Settings tab",
    "Drag the file onto the upload area",
    "The expense report was submitted for approval",
    "The login form rejects the password",
    "Which of the two documents named Report should I delete?",
    "Find the total amount due",
];

const TEXTS: &[&str] = &[
    "quarterly report 2026",
    "hello@example.com",
    "Grüße aus München",
    "weather in Paris tomorrow",
    "42",
    "The quick brown fox jumps over the lazy dog",
];

const KEYS: &[&str] = &["enter", "tab", "escape", "backspace", "down", "page_down"];

fn pick<'a>(rng: &mut StdRng, xs: &[&'a str]) -> &'a str {
    xs[rng.random_range(0..xs.len())]
}

fn target(rng: &mut StdRng, ids: &[String]) -> String {
    if ids.is_empty() || rng.random_bool(0.3) {
        format!(
            "xy:{},{}",
            rng.random_range(0..=1000),
            rng.random_range(0..=1000)
        )
    } else {
        ids[rng.random_range(0..ids.len())].clone()
    }
}

fn action(rng: &mut StdRng, ids: &[String], cdp: bool) -> PlannedAction {
    match rng.random_range(0..if cdp { 10 } else { 8 }) {
        0 | 1 => PlannedAction::Click {
            target_id: target(rng, ids),
            expect_after: None,
        },
        2 => PlannedAction::Type {
            target_id: rng.random_bool(0.5).then(|| target(rng, ids)),
            text: pick(rng, TEXTS).into(),
        },
        3 => PlannedAction::Key {
            key: pick(rng, KEYS).into(),
        },
        4 => PlannedAction::KeyCombo {
            keys: vec!["ctrl".into(), pick(rng, &["a", "c", "v", "s"]).into()],
        },
        5 => PlannedAction::Scroll {
            dx: 0,
            dy: rng.random_range(-800..=800),
        },
        6 => PlannedAction::Wait {
            ms: rng.random_range(1..=3000),
        },
        7 => PlannedAction::Extract {
            goal: pick(rng, PHRASES).into(),
            data: pick(rng, TEXTS).into(),
        },
        8 => PlannedAction::Navigate {
            url: "https://example.com/search?q=report".into(),
            wait_until: None,
            timeout_ms: None,
            dismiss_overlays: None,
        },
        _ => PlannedAction::CdpEval {
            expression: "document.querySelector('#total').innerText".into(),
        },
    }
}

/// `n` moves for a view with `ids` (and CDP actions when `cdp`), seeded by `seed`:
/// three batches of 1–5 steps for each terminal move.
pub fn corpus(ids: &[String], cdp: bool, n: usize, seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let mv = match i % 6 {
                0..=2 => NextMove::Batch {
                    purpose: pick(&mut rng, PHRASES).into(),
                    steps: (0..rng.random_range(1..=5))
                        .map(|_| Step {
                            purpose: pick(&mut rng, PHRASES).into(),
                            kind: if rng.random_bool(0.2) {
                                StepKind::LlmAssisted
                            } else {
                                StepKind::Deterministic
                            },
                            action: action(&mut rng, ids, cdp),
                        })
                        .collect(),
                },
                3 => NextMove::Done {
                    summary: pick(&mut rng, PHRASES).into(),
                    extracted_data: serde_json::json!({"total": "$1,234.50", "items": 3}),
                },
                4 => NextMove::Fail {
                    reason: pick(&mut rng, PHRASES).into(),
                },
                _ => NextMove::Clarify {
                    question: pick(&mut rng, PHRASES).into(),
                },
            };
            // Serializing a NextMove cannot fail.
            serde_json::to_string(&mv).unwrap_or_default()
        })
        .collect()
}
