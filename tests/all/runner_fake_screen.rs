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
            min_ms: 10,
            max_ms: 50,
            poll_ms: 10,
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
