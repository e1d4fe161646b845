//! The runner on a fake screen (no X server): `expect_after: dom_changed` is checked on the
//! screen itself (a click after which the screen stays the same fails, and the history
//! says so; a click that changes the screen lands), and `--trace` writes each done claim
//! as a grader example to label.

use std::sync::{Arc, Mutex};

use anyhow::{ensure, Context, Result};
use cel_contracts::{EffectExpectation, NextMove, PlannedAction, RunLimits, Step, StepKind};
use image::{Rgba, RgbaImage};
use sightline::runner::input::{Direction, Key};
use sightline::runner::{
    ButtonAction, Capture, Desktop, InputDevice, InputPoint, NoopObserver, ReplayPlanner,
    RunOptions, Runner, ScreenGeometry, SettleOptions,
};

/// A 64×48 screen that turns dark on a click when `reacts`.
struct FakeScreen {
    reacts: bool,
    clicked: Arc<Mutex<bool>>,
}

impl Desktop for FakeScreen {
    fn capture(&mut self) -> sightline::Result<Capture> {
        let clicked = *self.clicked.lock().unwrap_or_else(|e| e.into_inner());
        let shade = if clicked && self.reacts { 20 } else { 230 };
        Ok(Capture {
            image: RgbaImage::from_pixel(64, 48, Rgba([shade, shade, shade, 255])),
            geometry: ScreenGeometry {
                origin_x: 0,
                origin_y: 0,
                image_width: 64,
                image_height: 48,
                input_units_per_pixel: 1.0,
            },
            active_app: "fake".into(),
            window_title: "Fake".into(),
        })
    }
    fn input(&mut self) -> &mut dyn InputDevice {
        self
    }
}

impl InputDevice for FakeScreen {
    fn pointer(&mut self) -> sightline::Result<InputPoint> {
        // Mid-screen: the top-left corner is the runner's abort gesture.
        Ok(InputPoint { x: 32, y: 24 })
    }
    fn move_pointer(&mut self, _to: InputPoint) -> sightline::Result<()> {
        Ok(())
    }
    fn left_button(&mut self, action: ButtonAction) -> sightline::Result<()> {
        if !matches!(action, ButtonAction::Release) {
            *self.clicked.lock().unwrap_or_else(|e| e.into_inner()) = true;
        }
        Ok(())
    }
    fn text(&mut self, _text: &str) -> sightline::Result<()> {
        Ok(())
    }
    fn key(&mut self, _key: Key, _direction: Direction) -> sightline::Result<()> {
        Ok(())
    }
    fn scroll(&mut self, _notches: i32, _horizontal: bool) -> sightline::Result<()> {
        Ok(())
    }
}

fn click_expecting_change() -> NextMove {
    NextMove::Batch {
        purpose: "Open the menu".into(),
        steps: vec![Step {
            purpose: "Click the menu button".into(),
            kind: StepKind::Deterministic,
            action: PlannedAction::Click {
                target_id: "xy:500,500".into(),
                expect_after: Some(EffectExpectation::DomChanged { timeout_ms: 300 }),
            },
        }],
    }
}

fn run(reacts: bool) -> Result<sightline::runner::RunReport> {
    run_moves(
        reacts,
        &[
            click_expecting_change(),
            NextMove::Fail {
                reason: "stop here".into(),
            },
        ],
        None,
    )
}

fn run_moves(
    reacts: bool,
    moves: &[NextMove],
    trace_dir: Option<std::path::PathBuf>,
) -> Result<sightline::runner::RunReport> {
    let moves = moves
        .iter()
        .map(serde_json::to_string)
        .collect::<std::result::Result<Vec<_>, _>>()?
        .join("\n");
    let planner = ReplayPlanner::from_jsonl(&moves, "test moves")?;
    let options = RunOptions {
        limits: RunLimits {
            max_steps: 5,
            timeout_ms: 20_000,
            max_step_retries: 1,
            ..RunLimits::default()
        },
        settle: SettleOptions {
            poll_ms: 10,
            quiet_ms: 10,
            react_ms: 50,
            max_ms: 50,
        },
        step_pause_ms: 0,
        trace_dir,
        ..RunOptions::default()
    };
    let desktop = FakeScreen {
        reacts,
        clicked: Arc::new(Mutex::new(false)),
    };
    let mut runner = Runner::new(Box::new(desktop), options);
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    Ok(rt.block_on(runner.run("Open the menu", &planner, &mut NoopObserver))?)
}

#[test]
fn a_click_whose_screen_does_not_change_fails_with_the_expectation_in_history() -> Result<()> {
    let report = run(false)?;
    ensure!(!report.history.is_empty(), "{:?}", report.outcome);
    let click = report.history.first().context("no attempt")?;
    ensure!(!click.succeeded, "{click:?}");
    let error = click.error.as_deref().unwrap_or_default();
    ensure!(error.contains("expect_after not met"), "{error}");
    // The model reads it in the next turn's history.
    let line = sightline::planner::history::render(&report.history);
    ensure!(line.contains("failed: expect_after not met"), "{line}");
    Ok(())
}

#[test]
fn a_click_that_changes_the_screen_meets_its_expectation() -> Result<()> {
    let report = run(true)?;
    let click = report.history.first().context("no attempt")?;
    ensure!(click.succeeded, "{click:?}");
    ensure!(
        click.data["expect_after"] == "the screen changed",
        "{:?}",
        click.data
    );
    Ok(())
}

#[test]
fn a_traced_done_claim_becomes_a_grader_example_to_label() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let trace = dir.path().join("trace");
    let done = NextMove::Done {
        summary: "The menu is open".into(),
        extracted_data: serde_json::Value::Null,
    };
    run_moves(true, &[done], Some(trace.clone()))?;
    let text = std::fs::read_to_string(trace.join("grader_examples.jsonl"))?;
    let lines: Vec<&str> = text.lines().collect();
    ensure!(lines.len() == 1, "{text}");
    let example: sightline::moves::GraderExample = serde_json::from_str(lines[0])?;
    ensure!(example.goal == "Open the menu" && example.summary == "The menu is open");
    ensure!(example.verified.is_none() && example.grader_verified == Some(true));
    ensure!(
        trace.join(&example.screenshot).is_file(),
        "{:?}",
        example.screenshot
    );
    Ok(())
}

fn batch(purpose: &str, action: PlannedAction) -> NextMove {
    NextMove::Batch {
        purpose: purpose.into(),
        steps: vec![Step {
            purpose: purpose.into(),
            kind: StepKind::Deterministic,
            action,
        }],
    }
}

fn click(target: &str) -> PlannedAction {
    PlannedAction::Click {
        target_id: target.into(),
        expect_after: None,
    }
}

fn done() -> NextMove {
    NextMove::Done {
        summary: "The menu is open".into(),
        extracted_data: serde_json::Value::Null,
    }
}

/// A batch that names an element no longer on screen fails; the run goes on, the next turn's
/// history shows the error, and the second batch succeeds.
#[test]
fn a_failed_first_batch_is_a_turn_and_the_run_succeeds_on_the_second() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let trace = dir.path().join("trace");
    let report = run_moves(
        true,
        &[
            batch("Click the menu button", click("button_menu")),
            batch("Click the menu at its place", click("xy:500,500")),
            done(),
        ],
        Some(trace.clone()),
    )?;
    ensure!(
        matches!(report.outcome, cel_contracts::GoalOutcome::Succeeded { .. }),
        "{:?}",
        report.outcome
    );
    ensure!(report.turns == 3, "{} turns", report.turns);
    let first = report.history.first().context("no attempt")?;
    ensure!(!first.succeeded, "{first:?}");
    // The second turn's planner was given the first batch's error.
    let turns = sightline::runner::trace::read_turns(&trace)?;
    let seen = sightline::runner::trace::history_before(&turns, 2);
    ensure!(seen.len() == 1 && !seen[0].succeeded, "{seen:?}");
    let rendered = sightline::planner::history::render(&seen);
    ensure!(
        rendered.contains("(click \"button_menu\") failed:"),
        "{rendered}"
    );
    Ok(())
}

/// Batches that only fail end the run after the failure budget, as failed, and no further
/// move is asked for.
#[test]
fn only_failing_batches_end_the_run_after_the_failure_budget() -> Result<()> {
    let moves: Vec<NextMove> = (0..5)
        .map(|i| batch(&format!("Try {i}"), click(&format!("gone_{i}"))))
        .chain([done()])
        .collect();
    let report = run_moves(true, &moves, None)?;
    ensure!(
        matches!(report.outcome, cel_contracts::GoalOutcome::Failed(_)),
        "{:?}",
        report.outcome
    );
    ensure!(
        report.end
            == sightline::runner::EndReason::BudgetExhausted {
                budget: sightline::runner::Budget::Failures
            },
        "{:?}",
        report.end
    );
    ensure!(
        report.turns == sightline::runner::DEFAULT_MAX_FAILURES,
        "{} turns",
        report.turns
    );
    Ok(())
}

/// A batch whose step the gate refuses ends there; the planner reads the refusal and takes
/// another way, and the run succeeds.
#[test]
fn a_refused_step_is_a_turn_the_planner_can_recover_from() -> Result<()> {
    let wipe = NextMove::Batch {
        purpose: "Clean up the home directory".into(),
        steps: vec![
            Step {
                purpose: "Type the command".into(),
                kind: StepKind::Deterministic,
                action: PlannedAction::Type {
                    target_id: None,
                    text: "rm -rf ~".into(),
                },
            },
            Step {
                purpose: "Run it".into(),
                kind: StepKind::Deterministic,
                action: PlannedAction::Key {
                    key: "enter".into(),
                },
            },
        ],
    };
    let report = run_moves(
        true,
        &[wipe, batch("Open the menu", click("xy:500,500")), done()],
        None,
    )?;
    ensure!(
        matches!(report.outcome, cel_contracts::GoalOutcome::Succeeded { .. }),
        "{:?}",
        report.outcome
    );
    let refused = report
        .history
        .iter()
        .find(|a| !a.succeeded)
        .context("no refused attempt")?;
    let error = refused.error.as_deref().unwrap_or_default();
    ensure!(error.starts_with("refused"), "{error}");
    Ok(())
}
