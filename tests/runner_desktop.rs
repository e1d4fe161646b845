//! End-to-end tests of the desktop runner on a real X server (a private Xvfb per test).
//!
//! Needs `Xvfb`, `xdpyinfo`, `xdotool`, `xev` (x11-utils), `stdbuf` and `xterm`. Without them the
//! tests say so and pass, unless `SIGHTLINE_REQUIRE_X11_TESTS=1` (as in CI), which makes them
//! fail. The accessibility test here also needs what `a11y_support` lists (a session bus,
//! at-spi2-core, GTK 3 for Python) and sets `DBUS_SESSION_BUS_ADDRESS` for the process too.
#![cfg(feature = "desktop")]

// The shared helpers of tests/all; this binary uses only some of them.
#[path = "all/a11y_support/mod.rs"]
#[allow(dead_code)]
mod a11y_support;
#[path = "all/runner_support/mod.rs"]
#[allow(dead_code)]
mod runner_support;

use std::time::Duration;

use a11y_support::{stack_available, Session, LAYOUT, WINDOW_ORIGIN};
use anyhow::{ensure, Context};
use cel_contracts::{
    DoneVerdict, GoalOutcome, NextActionHint, NextMove, PlanProducer, PlannedAction, RunLimits,
    StepResult,
};
use rand::{Rng, SeedableRng};
use runner_support::*;
use sightline::runner::trace::{self, read_turns};
use sightline::runner::{
    capture_elements, Budget, Capture, Desktop, ElementBudget, ElementClick, EndReason,
    InputDevice, InputPoint, NoopObserver, ReplayPlanner, RunOptions, RunReport, Runner,
    ScriptedPrompt, SettleOptions, XDesktop,
};

/// How far (in pixels, each axis) a mapped `xy:` click may land from the pixel it names.
const XY_TOLERANCE_PX: i32 = 2;

const TOOLS: &[&str] = &["Xvfb", "xdpyinfo", "xdotool", "xev", "stdbuf"];
const TOOLS_XTERM: &[&str] = &["Xvfb", "xdpyinfo", "xdotool", "xev", "stdbuf", "xterm"];

fn fast_options() -> RunOptions {
    RunOptions {
        limits: RunLimits {
            max_steps: 20,
            timeout_ms: 30_000,
            max_step_retries: 3,
            ..RunLimits::default()
        },
        settle: SettleOptions {
            poll_ms: 60,
            quiet_ms: 60,
            react_ms: 400,
            max_ms: 400,
        },
        step_pause_ms: 30,
        ..RunOptions::default()
    }
}

fn run_blocking(
    runner: &mut Runner,
    goal: &str,
    planner: &dyn PlanProducer,
) -> anyhow::Result<RunReport> {
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    Ok(rt.block_on(runner.run(goal, planner, &mut NoopObserver))?)
}

fn runner(options: RunOptions) -> anyhow::Result<Runner> {
    Ok(Runner::new(Box::new(XDesktop::open(None)?), options))
}

#[test]
fn typing_into_xterm_runs_the_command_and_writes_the_file() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS_XTERM)? {
        return Ok(());
    }
    let xvfb = Xvfb::start_as_process_display(1280, 800)?;
    let dir = tempfile::tempdir()?;
    let _term = start_xterm(dir.path(), 100, 100)?;
    let out_file = dir.path().join("out.txt");
    let planner = ScriptedPlanner::new(vec![
        batch(
            "write ok into out.txt from the terminal",
            vec![
                step(
                    "focus the terminal",
                    click(&xy_for_pixel(300, 250, xvfb.width, xvfb.height)),
                ),
                // `>>`: a truncating `>` onto a file is a destructive step the gate refuses.
                step("type the command", type_text("echo ok >> out.txt")),
                step("run it", key("Return")),
            ],
        ),
        done("out.txt holds ok"),
    ]);
    let report = run_blocking(
        &mut runner(fast_options())?,
        "write ok into out.txt",
        &planner,
    )?;
    ensure!(
        matches!(report.outcome, GoalOutcome::Succeeded { .. }),
        "outcome {:?}",
        report.outcome
    );
    let content = wait_for_file(&out_file, Duration::from_secs(5))
        .context("xterm never wrote out.txt: typing did not reach the program")?;
    assert_eq!(content, "ok\n");
    // The planner's second look came with a screenshot of the whole 1280x800 screen.
    let seen = planner.seen.lock().map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(seen.len(), 2);
    assert!(seen[1].screenshot_len > 0);
    assert!(seen[1].history.iter().all(|a| a.succeeded));
    assert!(seen[0]
        .view
        .capabilities
        .iter()
        .any(|c| c.id == sightline::moves::CAPABILITY_NATIVE_INPUT));
    Ok(())
}

#[test]
fn xy_clicks_land_within_two_pixels_on_1920x1080_and_1280x800() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for (w, h) in [(1920u32, 1080u32), (1280, 800)] {
        let _xvfb = Xvfb::start_as_process_display(w, h)?;
        let dir = tempfile::tempdir()?;
        let events = RootEvents::start(dir.path())?;
        let mut targets: Vec<(u32, u32)> =
            vec![(w / 2, h / 2), (w - 1, h - 1), (7, h - 3), (w - 5, 9)];
        for _ in 0..6 {
            targets.push((rng.random_range(10..w), rng.random_range(10..h)));
        }
        let steps = targets
            .iter()
            .map(|&(px, py)| {
                step(
                    &format!("click pixel {px},{py}"),
                    click(&xy_for_pixel(px, py, w, h)),
                )
            })
            .collect();
        let planner = ScriptedPlanner::new(vec![batch("click around", steps), done("clicked")]);
        let report = run_blocking(&mut runner(fast_options())?, "click the points", &planner)?;
        ensure!(
            matches!(report.outcome, GoalOutcome::Succeeded { .. }),
            "{w}x{h}: outcome {:?}",
            report.outcome
        );
        let presses = events.wait_for_presses(targets.len())?;
        assert_eq!(
            presses.len(),
            targets.len(),
            "{w}x{h}: presses seen by X: {presses:?}"
        );
        for (&(px, py), &(x, y)) in targets.iter().zip(&presses) {
            assert!(
                (x - px as i32).abs() <= XY_TOLERANCE_PX
                    && (y - py as i32).abs() <= XY_TOLERANCE_PX,
                "{w}x{h}: aimed at ({px},{py}), X saw a press at ({x},{y})"
            );
        }
        let (x, y) = pointer()?;
        let (lx, ly) = *targets.last().context("no targets")?;
        assert!(
            (x - lx as i32).abs() <= XY_TOLERANCE_PX && (y - ly as i32).abs() <= XY_TOLERANCE_PX
        );
    }
    Ok(())
}

#[test]
fn dry_run_executes_no_input_and_a_real_run_does() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let _xvfb = Xvfb::start_as_process_display(1280, 800)?;
    let dir = tempfile::tempdir()?;
    let events = RootEvents::start(dir.path())?;
    move_pointer(640, 400)?;
    let script = || {
        ScriptedPlanner::new(vec![
            batch(
                "click and type",
                vec![
                    step("click", click("xy:100,100")),
                    step("type", type_text("hello")),
                    step("enter", key("Return")),
                    step(
                        "drag",
                        PlannedAction::Drag {
                            from_target_id: "xy:200,200".into(),
                            to_target_id: "xy:300,300".into(),
                        },
                    ),
                    step("scroll down", PlannedAction::Scroll { dx: 0, dy: 2 }),
                    step(
                        "select all",
                        PlannedAction::KeyCombo {
                            keys: vec!["ctrl".into(), "a".into()],
                        },
                    ),
                ],
            ),
            done("did it"),
        ])
    };
    let mut options = fast_options();
    options.dry_run = true;
    let report = run_blocking(&mut runner(options)?, "click and type", &script())?;
    assert!(matches!(report.outcome, GoalOutcome::Succeeded { .. }));
    assert_eq!(report.history.len(), 6);
    assert!(report
        .history
        .iter()
        .all(|a| a.succeeded && a.data.get("dry_run") == Some(&serde_json::json!(true))));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(pointer()?, (640, 400), "dry run moved the pointer");
    assert_eq!(events.button_presses()?.len(), 0, "dry run clicked");
    assert_eq!(events.key_presses()?, 0, "dry run typed");

    // The same script for real: X sees the input, so the checks above can fail.
    let report = run_blocking(&mut runner(fast_options())?, "click and type", &script())?;
    assert!(matches!(report.outcome, GoalOutcome::Succeeded { .. }));
    // Click, drag, and two wheel notches (button 5 is "down" in X).
    let presses = events.wait_for_presses(4)?;
    assert_eq!(presses.len(), 4, "{}", events.text()?);
    let log = events.text()?;
    // Two notches: a press and a release line each.
    assert_eq!(log.matches("button 5,").count(), 4, "{log}");
    // "hello" (5) + Return + Ctrl + a.
    assert!(events.key_presses()? >= 8, "{log}");
    assert!(log.contains("Control_L"), "{log}");
    Ok(())
}

#[test]
fn corner_failsafe_aborts_before_the_next_step() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let _xvfb = Xvfb::start_as_process_display(1280, 800)?;
    let dir = tempfile::tempdir()?;
    let events = RootEvents::start(dir.path())?;
    // The "user" slams the pointer into the corner while the planner thinks about turn 2.
    let planner = ScriptedPlanner::new(vec![
        batch("first", vec![step("click the middle", click("xy:500,500"))]),
        batch("second", vec![step("click elsewhere", click("xy:700,700"))]),
        done("never reached"),
    ])
    .with_hook(|call| {
        if call == 1 {
            let _ = move_pointer(0, 0);
        }
    });
    let report = run_blocking(&mut runner(fast_options())?, "click twice", &planner)?;
    assert_eq!(report.end, EndReason::FailSafe);
    let GoalOutcome::Failed(r) = &report.outcome else {
        anyhow::bail!("expected Failed, got {:?}", report.outcome);
    };
    assert!(
        r.attempts.last().is_some_and(|a| a.contains("fail-safe")),
        "{r:?}"
    );
    assert_eq!(r.failing_step, "click elsewhere");
    assert_eq!(
        events.wait_for_presses(1)?.len(),
        1,
        "the second click must not happen"
    );

    // A click the runner itself places in the corner does not trip the fail-safe.
    move_pointer(640, 400)?;
    let planner = ScriptedPlanner::new(vec![
        batch(
            "corner then middle",
            vec![
                step("click the corner", click("xy:0,0")),
                step("click the middle", click("xy:500,500")),
            ],
        ),
        done("done"),
    ]);
    let report = run_blocking(&mut runner(fast_options())?, "click", &planner)?;
    assert_eq!(report.end, EndReason::Succeeded);
    Ok(())
}

#[test]
fn destructive_gate_refuses_typed_rm_rf_unless_the_user_allows_it() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS_XTERM)? {
        return Ok(());
    }
    let xvfb = Xvfb::start_as_process_display(1280, 800)?;
    let dir = tempfile::tempdir()?;
    let victim = dir.path().join("victim");
    std::fs::create_dir(&victim)?;
    std::fs::write(victim.join("data.txt"), "precious")?;
    let _term = start_xterm(dir.path(), 100, 100)?;
    let script = || {
        ScriptedPlanner::new(vec![
            batch(
                "remove the victim directory",
                vec![
                    step(
                        "focus the terminal",
                        click(&xy_for_pixel(300, 250, xvfb.width, xvfb.height)),
                    ),
                    step("type the removal", type_text("rm -rf victim")),
                    step("run it", key("Return")),
                ],
            ),
            done("removed"),
        ])
    };

    // One refused batch ends the run here (a failure budget of one): the planner would
    // otherwise get the next turn, as with any failed batch.
    let mut one_failure = fast_options();
    one_failure.max_failures = 1;
    let report = run_blocking(
        &mut runner(one_failure.clone())?,
        "clean up the victim directory",
        &script(),
    )?;
    assert_eq!(report.end, EndReason::EndedOnRefusal);
    let GoalOutcome::Refused { summary } = &report.outcome else {
        anyhow::bail!("expected Refused, got {:?}", report.outcome);
    };
    assert!(
        summary.contains("victim") && summary.contains("--allow delete"),
        "{summary}"
    );
    let last = report.history.last().context("no history")?;
    assert!(
        !last.succeeded
            && last
                .error
                .as_deref()
                .is_some_and(|e| e.starts_with("refused"))
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(victim.join("data.txt").exists(), "the refused command ran");

    // The goal's wording changes nothing.
    let report = run_blocking(
        &mut runner(one_failure.clone())?,
        "delete the victim directory with rm -rf; I confirm the deletion",
        &script(),
    )?;
    assert_eq!(report.end, EndReason::EndedOnRefusal);
    assert!(victim.join("data.txt").exists(), "the refused command ran");

    // The user's grant does.
    let mut options = fast_options();
    options.grants = sightline::runner::Grants::parse(["delete"])?;
    let report = run_blocking(&mut runner(options)?, "clean up", &script())?;
    assert_eq!(report.end, EndReason::Succeeded);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while victim.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!victim.exists(), "the allowed command did not run");
    Ok(())
}

#[test]
fn budgets_end_runs_as_failed_and_say_which() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let _xvfb = Xvfb::start_as_process_display(1280, 800)?;

    // max_steps: a planner that never stops.
    let mut options = fast_options();
    options.limits.max_steps = 3;
    let planner = ScriptedPlanner::forever(batch("idle", vec![step("wait a bit", wait(10))]));
    let report = run_blocking(&mut runner(options)?, "idle", &planner)?;
    assert_eq!(
        report.end,
        EndReason::BudgetExhausted {
            budget: Budget::MaxSteps
        }
    );
    assert_eq!(report.steps_used, 3);
    let GoalOutcome::Failed(r) = &report.outcome else {
        anyhow::bail!("expected Failed, got {:?}", report.outcome);
    };
    assert!(
        r.attempts
            .last()
            .is_some_and(|a| a.contains("max_steps (3")),
        "{r:?}"
    );

    // A planner that keeps claiming done against a grader that keeps rejecting it.
    let mut options = fast_options();
    options.limits.max_steps = 3;
    let no = DoneVerdict {
        verified: false,
        reason: "not done".into(),
        next_action_hint: None,
    };
    let planner = ScriptedPlanner::forever(done("done?")).with_verdicts(vec![no; 10]);
    let report = run_blocking(&mut runner(options)?, "idle", &planner)?;
    assert_eq!(
        report.end,
        EndReason::BudgetExhausted {
            budget: Budget::MaxSteps
        }
    );
    assert_eq!(report.turns, 4);

    // timeout_ms.
    let mut options = fast_options();
    options.limits.timeout_ms = 700;
    let planner = ScriptedPlanner::forever(batch("idle", vec![step("wait", wait(250))]));
    let t0 = std::time::Instant::now();
    let report = run_blocking(&mut runner(options)?, "idle", &planner)?;
    assert_eq!(
        report.end,
        EndReason::BudgetExhausted {
            budget: Budget::Timeout
        }
    );
    assert!(t0.elapsed() < Duration::from_secs(5));
    let GoalOutcome::Failed(r) = &report.outcome else {
        anyhow::bail!("expected Failed, got {:?}", report.outcome);
    };
    assert!(
        r.attempts
            .last()
            .is_some_and(|a| a.contains("timeout_ms (700 ms)")),
        "{r:?}"
    );

    // max_step_retries, then the failure budget: an input device whose typing always fails
    // (recoverably); each batch retries its step, then ends, and the next turn tries again.
    let planner = ScriptedPlanner::forever(batch("type", vec![step("type hi", type_text("hi"))]));
    let flaky = FlakyTyping(XDesktop::open(None)?);
    let mut options = fast_options();
    options.max_failures = 2;
    let mut r2 = Runner::new(Box::new(flaky), options);
    let report = run_blocking(&mut r2, "type hi", &planner)?;
    assert_eq!(
        report.end,
        EndReason::BudgetExhausted {
            budget: Budget::Failures
        }
    );
    assert_eq!(report.turns, 2);
    let GoalOutcome::Failed(r) = &report.outcome else {
        anyhow::bail!("expected Failed, got {:?}", report.outcome);
    };
    // The last batch's three tries, the retry budget, then the failure budget.
    assert_eq!(r.failing_step, "type hi");
    assert_eq!(r.attempts.len(), 5, "{r:?}");
    assert!(r.attempts[..3]
        .iter()
        .all(|a| a.contains("keyboard unplugged")));
    assert!(r.attempts[3].contains("max_step_retries"));
    assert!(r.attempts[4].contains("max_failures"));
    assert_eq!(report.history.len(), 6);
    Ok(())
}

/// A real desktop whose keyboard fails to type (recoverably, as a backend hiccup would).
struct FlakyTyping(XDesktop);

impl Desktop for FlakyTyping {
    fn capture(&mut self) -> sightline::Result<Capture> {
        self.0.capture()
    }
    fn input(&mut self) -> &mut dyn InputDevice {
        self
    }
}

impl InputDevice for FlakyTyping {
    fn pointer(&mut self) -> sightline::Result<InputPoint> {
        self.0.input().pointer()
    }
    fn move_pointer(&mut self, to: InputPoint) -> sightline::Result<()> {
        self.0.input().move_pointer(to)
    }
    fn left_button(&mut self, action: sightline::runner::ButtonAction) -> sightline::Result<()> {
        self.0.input().left_button(action)
    }
    fn text(&mut self, _text: &str) -> sightline::Result<()> {
        Err(sightline::Error::runner("keyboard unplugged"))
    }
    fn key(
        &mut self,
        key: sightline::runner::input::Key,
        direction: sightline::runner::input::Direction,
    ) -> sightline::Result<()> {
        self.0.input().key(key, direction)
    }
    fn scroll(&mut self, notches: i32, horizontal: bool) -> sightline::Result<()> {
        self.0.input().scroll(notches, horizontal)
    }
}

#[test]
fn planner_terminals_unexecutable_actions_rejections_and_declines() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let _xvfb = Xvfb::start_as_process_display(1280, 800)?;

    // An action the desktop cannot execute is a clear, non-recoverable step error.
    let planner = ScriptedPlanner::new(vec![batch(
        "use the browser",
        vec![step(
            "read the title",
            PlannedAction::CdpEval {
                expression: "document.title".into(),
            },
        )],
    )]);
    let mut one_failure = fast_options();
    one_failure.max_failures = 1;
    let report = run_blocking(&mut runner(one_failure)?, "read the title", &planner)?;
    assert_eq!(
        report.end,
        EndReason::BudgetExhausted {
            budget: Budget::Failures
        }
    );
    let GoalOutcome::Failed(r) = &report.outcome else {
        anyhow::bail!("expected Failed, got {:?}", report.outcome);
    };
    assert!(r.attempts[0].contains("cannot execute `cdp_eval`"), "{r:?}");
    assert_eq!(
        report.history.len(),
        1,
        "no retry of a non-recoverable error"
    );

    // A rejected done becomes an attempt with the hint, and the loop goes on.
    let planner = ScriptedPlanner::new(vec![
        done("finished early"),
        batch("fix", vec![step("wait", wait(10))]),
        done("finished"),
    ])
    .with_verdicts(vec![DoneVerdict {
        verified: false,
        reason: "the dialog is still open".into(),
        next_action_hint: Some(NextActionHint::RetryLastAction),
    }]);
    let report = run_blocking(&mut runner(fast_options())?, "finish", &planner)?;
    assert_eq!(report.end, EndReason::Succeeded);
    let seen = planner.seen.lock().map_err(|e| anyhow::anyhow!("{e}"))?;
    let rejected = &seen[1].history[0];
    assert!(!rejected.succeeded);
    assert_eq!(
        rejected.next_action_hint,
        Some(NextActionHint::RetryLastAction)
    );
    assert!(rejected
        .error
        .as_deref()
        .is_some_and(|e| e.contains("the dialog is still open")));
    drop(seen);

    // Clarify ends as Refused with the question.
    let planner = ScriptedPlanner::new(vec![NextMove::Clarify {
        question: "Which file?".into(),
    }]);
    let report = run_blocking(&mut runner(fast_options())?, "delete it", &planner)?;
    assert_eq!(report.end, EndReason::Clarified);
    assert!(
        matches!(&report.outcome, GoalOutcome::Refused { summary } if summary == "Which file?")
    );

    // --confirm asks about risky steps only: a plain click runs without a question (the
    // prompt would decline).
    let mut options = fast_options();
    options.confirm = true;
    move_pointer(640, 400)?;
    let planner = ScriptedPlanner::new(vec![
        batch("click", vec![step("click the title", click("xy:100,100"))]),
        done("clicked"),
    ]);
    let mut r = runner(options)?.with_prompt(Box::new(ScriptedPrompt::new([])));
    let report = run_blocking(&mut r, "click", &planner)?;
    assert_eq!(report.end, EndReason::Succeeded);
    move_pointer(640, 400)?;

    // A declined risky step runs nothing and ends as Declined.
    let mut options = fast_options();
    options.confirm = true;
    let planner = ScriptedPlanner::new(vec![batch(
        "tidy",
        vec![step("click Delete", click("xy:100,100"))],
    )]);
    let mut r = runner(options)?.with_prompt(Box::new(ScriptedPrompt::new([false])));
    let report = run_blocking(&mut r, "click", &planner)?;
    assert_eq!(report.end, EndReason::Declined);
    assert_eq!(pointer()?, (640, 400));

    // An approved risky step runs; the question shows the step and the grant that would
    // allow it in every run.
    let (tx, rx) = std::sync::mpsc::channel();
    let planner = ScriptedPlanner::new(vec![
        batch("tidy", vec![step("click Delete", click("xy:100,100"))]),
        done("clicked"),
    ]);
    let mut options = fast_options();
    options.confirm = true;
    let mut r = runner(options)?.with_prompt(Box::new(RecordingPrompt(tx)));
    let report = run_blocking(&mut r, "click", &planner)?;
    assert_eq!(report.end, EndReason::Succeeded);
    let question = rx.try_recv()?;
    assert!(
        question.contains("\"click Delete\"")
            && question.contains("click xy:100,100")
            && question.contains("--allow delete"),
        "{question}"
    );
    assert_eq!(pointer()?, (128, 80));
    Ok(())
}

/// Accepts every batch and reports the question.
struct RecordingPrompt(std::sync::mpsc::Sender<String>);

impl sightline::runner::ConfirmPrompt for RecordingPrompt {
    fn confirm(&mut self, question: &str) -> sightline::Result<bool> {
        let _ = self.0.send(question.to_string());
        Ok(true)
    }
}

/// Resolves `btn:` element ids to fixed points, as an accessibility backend would.
struct ButtonResolver;

impl sightline::runner::TargetResolver for ButtonResolver {
    fn resolve(
        &self,
        target_id: &str,
        view: &cel_contracts::PlanningView,
        geometry: &sightline::runner::ScreenGeometry,
    ) -> sightline::Result<InputPoint> {
        match target_id {
            "btn:ok" => Ok(InputPoint { x: 321, y: 123 }),
            other => sightline::runner::XyResolver.resolve(other, view, geometry),
        }
    }
}

#[test]
fn element_ids_need_a_resolver_and_ctrl_c_stops_between_steps() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let _xvfb = Xvfb::start_as_process_display(1280, 800)?;
    let dir = tempfile::tempdir()?;
    let events = RootEvents::start(dir.path())?;
    let ok_button = cel_contracts::PlanningElement {
        id: "btn:ok".into(),
        element_type: "button".into(),
        label: Some("OK".into()),
        value: None,
        state: Default::default(),
        clickable: true,
        settable: false,
        select_options: None,
    };
    let script = || {
        ScriptedPlanner::new(vec![
            batch("press OK", vec![step("click OK", click("btn:ok"))]),
            done("pressed"),
        ])
    };
    let mut options = fast_options();
    options.elements = vec![ok_button];
    options.max_failures = 1;

    // The default runner knows only xy: points: a clear, non-recoverable error.
    let report = run_blocking(&mut runner(options.clone())?, "press OK", &script())?;
    assert_eq!(
        report.end,
        EndReason::BudgetExhausted {
            budget: Budget::Failures
        }
    );
    let GoalOutcome::Failed(r) = &report.outcome else {
        anyhow::bail!("expected Failed, got {:?}", report.outcome);
    };
    assert!(
        r.attempts[0].contains("elements carry no screen bounds"),
        "{r:?}"
    );

    // With a resolver, the element's point is clicked, and the view carried the element.
    let planner = script();
    let mut r = runner(options)?.with_resolver(Box::new(ButtonResolver));
    let report = run_blocking(&mut r, "press OK", &planner)?;
    assert_eq!(report.end, EndReason::Succeeded);
    assert_eq!(events.wait_for_presses(1)?, vec![(321, 123)]);
    let seen = planner.seen.lock().map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(seen[0].view.elements[0].id, "btn:ok");
    drop(seen);

    // Ctrl-C (the stop flag) while a step runs: the step ends (a wait is cut short), the next
    // step never runs.
    let stop = sightline::runner::StopFlag::new();
    let stop_later = stop.clone();
    let planner = ScriptedPlanner::new(vec![batch(
        "wait then click",
        vec![
            step("wait", wait(2_000)),
            step("click", click("xy:700,700")),
        ],
    )])
    .with_hook(move |_| {
        let s = stop_later.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            s.request_stop();
        });
    });
    let mut r = runner(fast_options())?.with_stop_flag(stop);
    let t0 = std::time::Instant::now();
    let report = run_blocking(&mut r, "wait and click", &planner)?;
    assert_eq!(report.end, EndReason::Interrupted);
    assert!(
        t0.elapsed() < Duration::from_millis(1_500),
        "the wait was not cut short"
    );
    assert_eq!(report.history.len(), 1, "{:?}", report.history);
    assert_eq!(events.button_presses()?.len(), 1, "no click after Ctrl-C");
    Ok(())
}

#[test]
fn trace_directory_is_complete_and_its_replay_reproduces_the_moves() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !tools_available(TOOLS)? {
        return Ok(());
    }
    let _xvfb = Xvfb::start_as_process_display(1280, 800)?;
    let dir = tempfile::tempdir()?;
    let trace_dir = dir.path().join("run1");
    let planner = ScriptedPlanner::new(vec![
        batch(
            "look around",
            vec![step("click", click("xy:250,250")), step("wait", wait(20))],
        ),
        done("too early"),
        batch(
            "note",
            vec![step(
                "remember",
                PlannedAction::Extract {
                    goal: "title".into(),
                    data: "Xvfb".into(),
                },
            )],
        ),
        done("noted"),
    ])
    .with_verdicts(vec![DoneVerdict {
        verified: false,
        reason: "not yet".into(),
        next_action_hint: Some(NextActionHint::DifferentAction),
    }]);
    let mut options = fast_options();
    options.trace_dir = Some(trace_dir.clone());
    options.planner_label = "scripted".into();
    let report = run_blocking(&mut runner(options)?, "note the title", &planner)?;
    assert_eq!(report.end, EndReason::Succeeded);
    assert_eq!(report.shared_memory["title"], "Xvfb");

    for f in [trace::RUN_FILE, trace::TURNS_FILE, trace::OUTCOME_FILE] {
        assert!(trace_dir.join(f).is_file(), "{f} missing");
    }
    let turns = read_turns(&trace_dir)?;
    assert_eq!(turns.len(), 4);
    for (i, t) in turns.iter().enumerate() {
        assert_eq!(t.turn as usize, i + 1);
        let shot = t.screenshot.as_deref().context("turn without screenshot")?;
        let img = image::open(trace_dir.join(shot))?;
        assert_eq!((img.width(), img.height()), (1280, 800));
        assert!(t.next_move.is_some());
    }
    assert_eq!(turns[0].steps.len(), 2);
    assert!(matches!(turns[0].steps[0].result, StepResult::Ok { .. }));
    assert!(turns[1].verdict.as_ref().is_some_and(|v| !v.verified));
    let outcome: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        trace_dir.join(trace::OUTCOME_FILE),
    )?)?;
    assert_eq!(outcome["outcome"]["status"], "succeeded");
    assert_eq!(outcome["end"]["reason"], "succeeded");

    // Replaying the trace feeds the same moves (and the recorded verdicts) into the loop.
    let replay = ReplayPlanner::from_path(&trace_dir)?;
    let mut options = fast_options();
    let trace2 = dir.path().join("run2");
    options.trace_dir = Some(trace2.clone());
    let report2 = run_blocking(&mut runner(options)?, "note the title", &replay)?;
    assert_eq!(report2.end, EndReason::Succeeded);
    assert_eq!(replay.remaining(), 0);
    let moves = |dir: &std::path::Path| -> anyhow::Result<Vec<String>> {
        read_turns(dir)?
            .iter()
            .map(|t| Ok(serde_json::to_string(&t.next_move)?))
            .collect()
    };
    assert_eq!(moves(&trace_dir)?, moves(&trace2)?);
    assert_eq!(report.history.len(), report2.history.len());
    // A second run into the same directory is refused rather than overwriting it.
    let mut options = fast_options();
    options.trace_dir = Some(trace_dir);
    let replay = ReplayPlanner::from_path(&trace2)?;
    assert!(run_blocking(&mut runner(options)?, "again", &replay).is_err());
    Ok(())
}

#[test]
fn missing_display_is_a_clear_setup_error() -> anyhow::Result<()> {
    let _x = x11_lock();
    let saved = std::env::var_os("DISPLAY");
    std::env::remove_var("DISPLAY");
    std::env::remove_var("WAYLAND_DISPLAY");
    let result = XDesktop::open(None);
    if let Some(d) = saved {
        std::env::set_var("DISPLAY", d);
    }
    let err = result.err().context("opened a desktop without a display")?;
    assert!(err.to_string().contains("no display"), "{err}");

    // A display nobody serves: the input backend says so, naming the display.
    let err = sightline::runner::EnigoInput::connect(Some(":987"))
        .err()
        .context("connected to a display that does not exist")?;
    let text = err.to_string();
    assert!(
        text.contains("input backend unavailable") && text.contains(":987"),
        "{text}"
    );
    Ok(())
}

/// Restores an environment variable on drop.
struct EnvGuard(&'static str, Option<std::ffi::OsString>);

impl Drop for EnvGuard {
    fn drop(&mut self) {
        match &self.1 {
            Some(v) => std::env::set_var(self.0, v),
            None => std::env::remove_var(self.0),
        }
    }
}

/// The runner in process on the accessibility test window: with `ElementClick::Pointer` an
/// element id is clicked at the centre of its visible part, and the planner's view lists the
/// window's elements.
#[test]
fn pointer_clicks_land_on_the_visible_centre_and_the_planner_sees_the_elements(
) -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    let _env = EnvGuard(
        "DBUS_SESSION_BUS_ADDRESS",
        std::env::var_os("DBUS_SESSION_BUS_ADDRESS"),
    );
    let _display = EnvGuard("DISPLAY", std::env::var_os("DISPLAY"));
    std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &session.bus_address);
    std::env::set_var("DISPLAY", &session.display);
    let options = RunOptions {
        limits: RunLimits {
            max_steps: 10,
            timeout_ms: 30_000,
            max_step_retries: 1,
            ..RunLimits::default()
        },
        settle: SettleOptions {
            poll_ms: 60,
            quiet_ms: 60,
            react_ms: 400,
            max_ms: 400,
        },
        element_click: ElementClick::Pointer,
        ..RunOptions::default()
    };
    let planner = ScriptedPlanner::new(vec![
        batch("press Beta", vec![step("press Beta", click("button_beta"))]),
        done("pressed"),
    ]);
    let mut runner = Runner::new(Box::new(XDesktop::open(None)?), options);
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let report = rt.block_on(runner.run("press beta", &planner, &mut NoopObserver))?;
    ensure!(
        matches!(report.outcome, GoalOutcome::Succeeded { .. }),
        "{:?}",
        report.outcome
    );
    assert!(session.wait_for_event("clicked Beta")?);
    // The pointer went to the centre of Beta's visible part.
    let clicked = &report.history[0].data["clicked"];
    assert_eq!(
        clicked,
        &serde_json::json!([WINDOW_ORIGIN.0 + 160 + 60, WINDOW_ORIGIN.1 + 20 + 20]),
        "{:?}",
        report.history[0]
    );
    let seen = planner.seen.lock().map_err(|e| anyhow::anyhow!("{e}"))?;
    let ids: Vec<&str> = seen[0]
        .view
        .elements
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    for &(id, ..) in LAYOUT {
        assert!(ids.contains(&id), "{id} not shown to the planner: {ids:?}");
    }
    Ok(())
}

/// A GTK 3 entry's only accessible action is "activate", which acts like Enter: "clicking" the
/// first field of a form that way would submit it. A click on a text field by id focuses it
/// instead, and moves the pointer to it, so the next untargeted `type` lands in that field and
/// the form stays open.
#[test]
fn clicking_an_entry_by_id_focuses_it_and_typing_lands_there_without_submitting(
) -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? || !tools_available(&["zenity", "xdotool"])? {
        return Ok(());
    }
    let mut session = Session::bare()?;
    let _env = EnvGuard(
        "DBUS_SESSION_BUS_ADDRESS",
        std::env::var_os("DBUS_SESSION_BUS_ADDRESS"),
    );
    let _display = EnvGuard("DISPLAY", std::env::var_os("DISPLAY"));
    std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &session.bus_address);
    std::env::set_var("DISPLAY", &session.display);
    session.spawn(
        "zenity",
        &[
            "--forms",
            "--title",
            "Person",
            "--add-entry",
            "First name",
            "--add-entry",
            "Last name",
        ],
    )?;
    session.wait_for_window("^Person$")?;
    let planner = ScriptedPlanner::new(vec![
        batch(
            "fill the last name",
            vec![
                step("focus the last name", click("text_last-name")),
                step("type it", type_text("Hopper")),
            ],
        ),
        done("typed"),
    ]);
    let mut runner = runner(fast_options())?;
    let report = run_blocking(&mut runner, "type Hopper as the last name", &planner)?;
    ensure!(
        matches!(report.outcome, GoalOutcome::Succeeded { .. }),
        "{:?}",
        report.outcome
    );
    assert_eq!(
        report.history[0].data,
        serde_json::json!({ "focused": "text_last-name" }),
        "{:?}",
        report.history[0]
    );
    // The form is still open, the text is in the field clicked, and the pointer rests on it.
    let mut desktop = XDesktop::open(None)?;
    let capture = desktop.capture()?;
    let table = capture_elements(&mut desktop, &capture.geometry, &ElementBudget::default())
        .context("no elements")?;
    let last = table.get("text_last-name").context("the form was closed")?;
    assert_eq!(last.raw.value.as_deref(), Some("Hopper"));
    assert!(last.raw.state.focused);
    let first = table.get("text_first-name").context("no first name")?;
    assert_eq!(first.raw.value, None);
    assert_eq!(pointer()?, last.click_pixel());
    Ok(())
}
