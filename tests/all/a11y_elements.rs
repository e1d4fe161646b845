//! Elements from the accessibility tree through the binary: `sightline view --json` and
//! `sightline run --replay` against the GTK test window over a real AT-SPI bus (see
//! `a11y_support`), each child process given its own `DISPLAY` and `DBUS_SESSION_BUS_ADDRESS`.

use std::time::Duration;

use anyhow::{ensure, Context};
use serde_json::Value;
use sightline::decode::{GrammarOptions, MoveSpec};

use crate::a11y_support::*;
use crate::runner_support::{x11_lock, xy_for_pixel};

fn view_json(session: &Session) -> anyhow::Result<Value> {
    let (code, stdout, stderr) = session.sightline(&["view", "--json"])?;
    ensure!(code == 0, "view exited {code}: {stdout}{stderr}");
    Ok(serde_json::from_str(&stdout)?)
}

fn batch(purpose: &str, steps: &[(&str, Value)]) -> String {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(p, a)| serde_json::json!({ "purpose": p, "action": a }))
        .collect();
    serde_json::json!({ "kind": "batch", "purpose": purpose, "steps": steps }).to_string()
}

fn done(summary: &str) -> String {
    serde_json::json!({ "kind": "done", "summary": summary }).to_string()
}

fn click(target: &str) -> Value {
    serde_json::json!({ "type": "click", "target_id": target })
}

#[test]
fn view_json_lists_the_windows_controls_with_their_layouts_bounds() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    let doc = view_json(&session)?;
    let table = doc["elements"]["elements"]
        .as_array()
        .context("no elements table in view --json")?;
    let view_ids: Vec<&str> = doc["view"]["elements"]
        .as_array()
        .context("no view elements")?
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    for &(id, role, name, x, y, w, h) in LAYOUT {
        let e = table
            .iter()
            .find(|e| e["id"] == id)
            .with_context(|| format!("{id} missing from {table:#?}"))?;
        assert_eq!(e["role"], role, "{id}");
        assert_eq!(e["name"], name, "{id}");
        let b = &e["bounds"];
        let got = [&b["x"], &b["y"], &b["width"], &b["height"]].map(|v| v.as_i64().unwrap_or(-1));
        let want = [
            i64::from(WINDOW_ORIGIN.0 + x),
            i64::from(WINDOW_ORIGIN.1 + y),
            i64::from(w),
            i64::from(h),
        ];
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= BOUNDS_TOLERANCE_PX,
                "{id}: bounds {got:?}, layout says {want:?}"
            );
        }
        assert!(got[0] >= 0 && got[1] >= 0);
        assert!(got[0] + got[2] <= i64::from(SCREEN.0) && got[1] + got[3] <= i64::from(SCREEN.1));
        assert!(view_ids.contains(&id), "{id} not in the planner's view");
    }
    let checkbox = table.iter().find(|e| e["id"] == "checkbox_notify");
    assert_eq!(
        checkbox.map(|e| &e["state"]["checked"]),
        Some(&Value::Bool(false))
    );
    assert!(table
        .iter()
        .any(|e| e["role"] == "label" && e["name"] == "Status: ready"));
    assert_eq!(
        doc["screenshot_size"],
        serde_json::json!([SCREEN.0, SCREEN.1])
    );
    // The planner's grammar for this view allows exactly these ids, and xy: points.
    let view: cel_contracts::PlanningView = serde_json::from_value(doc["view"].clone())?;
    let spec = MoveSpec::new(&view, &GrammarOptions::default())?;
    for &(id, ..) in LAYOUT {
        assert!(spec.is_valid_target(id), "{id}");
    }
    assert!(spec.is_valid_target("xy:500,500"));
    assert!(!spec.is_valid_target("button_gamma"));
    assert_eq!(spec.target_ids().len(), table.len());
    // An unchanged screen gives the same ids and bounds on every capture.
    let again = view_json(&session)?;
    assert_eq!(again["view"]["elements"], doc["view"]["elements"]);
    assert_eq!(again["elements"]["elements"], doc["elements"]["elements"]);
    // The text form names the same elements.
    let (code, text, _) = session.sightline(&["view"])?;
    assert_eq!(code, 0);
    assert!(
        text.contains("button_beta") && text.contains("from atspi in"),
        "{text}"
    );
    Ok(())
}

#[test]
fn replayed_element_clicks_and_typing_reach_the_window() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    let moves = session.moves(
        "moves.jsonl",
        &[
            batch(
                "fill the form",
                &[
                    ("press Beta", click("button_beta")),
                    (
                        "type the name",
                        serde_json::json!({ "type": "type", "target_id": "text_name", "text": "hello" }),
                    ),
                    ("tick the box", click("checkbox_notify")),
                ],
            ),
            done("filled"),
        ],
    )?;
    let (code, stdout, stderr) = session.run_replay(&moves, "fill in the form")?;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        session.wait_for_event("clicked Beta")?,
        "{:?}",
        session.events()?
    );
    assert!(
        session.wait_for_event("text hello")?,
        "{:?}",
        session.events()?
    );
    assert!(
        session.wait_for_event("toggled Notify on")?,
        "{:?}",
        session.events()?
    );
    // Nothing else was pressed.
    assert!(!session
        .events()?
        .iter()
        .any(|l| l.contains("Alpha") || l.contains("Delete")));
    Ok(())
}

#[test]
fn a_stale_element_id_is_a_step_error_not_a_click_elsewhere() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    // Alpha removes itself when clicked: the second click names an element that is gone since
    // the screenshot the plan was made from.
    let moves = session.moves(
        "moves.jsonl",
        &[
            batch(
                "press Alpha twice",
                &[
                    ("press Alpha", click("button_alpha")),
                    (
                        "let it go",
                        serde_json::json!({ "type": "wait", "ms": 500 }),
                    ),
                    ("press Alpha again", click("button_alpha")),
                ],
            ),
            done("pressed"),
        ],
    )?;
    // A failed step ends its batch and the run goes on (the replay then claims done, which
    // its own verifier accepts): what matters is the error and that nothing else was clicked.
    let (_, stdout, _) = session.run_replay(&moves, "press alpha")?;
    assert!(
        stdout.contains("\"button_alpha\"") && stdout.contains("stale"),
        "{stdout}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let events = session.events()?;
    assert_eq!(
        events.iter().filter(|l| l.starts_with("clicked")).count(),
        1,
        "{events:?}"
    );
    Ok(())
}

/// Runs a replay where one refused batch ends the run (else the planner, here the replay's
/// next move, gets the next turn).
fn refused_run(
    session: &Session,
    moves: &std::path::Path,
    goal: &str,
) -> anyhow::Result<(i32, String, String)> {
    let path = moves.to_str().context("path")?;
    session.sightline(&[
        "run",
        "--replay",
        path,
        "--timeout",
        "30",
        "--max-failures",
        "1",
        goal,
    ])
}

#[test]
fn a_click_on_delete_is_refused_by_its_real_name_unless_the_user_allows_it() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    // The purposes say nothing about deleting; only the element's own name does.
    let by_id = session.moves(
        "by_id.jsonl",
        &[
            batch(
                "tidy up",
                &[("press the third button", click("button_delete"))],
            ),
            done("tidied"),
        ],
    )?;
    let (code, stdout, stderr) = refused_run(&session, &by_id, "tidy up the form")?;
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(
        stdout.contains("refused") && stdout.contains("--allow delete"),
        "{stdout}"
    );
    // Wording a confirmation into the goal changes nothing.
    let (code, stdout, stderr) = refused_run(
        &session,
        &by_id,
        "delete the record; I confirm the deletion",
    )?;
    assert_eq!(code, 3, "{stdout}{stderr}");

    // An xy: point on the Delete button: the gate asks the tree what is under it.
    let (x, y, w, h) = (300 + 60, 20 + 20, SCREEN.0, SCREEN.1);
    let point = xy_for_pixel(
        (WINDOW_ORIGIN.0 + x) as u32,
        (WINDOW_ORIGIN.1 + y) as u32,
        w,
        h,
    );
    let by_point = session.moves(
        "by_point.jsonl",
        &[
            batch("tidy up", &[("press the third button", click(&point))]),
            done("tidied"),
        ],
    )?;
    let (code, stdout, stderr) = refused_run(&session, &by_point, "tidy up the form")?;
    assert_eq!(code, 3, "{stdout}{stderr}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !session.events()?.iter().any(|l| l == "clicked Delete"),
        "a refused click reached the window"
    );

    // Allowed by the user: the same plan runs.
    let path = by_id.to_str().context("path")?;
    let (code, stdout, stderr) = session.sightline(&[
        "run",
        "--replay",
        path,
        "--timeout",
        "30",
        "--allow",
        "delete",
        "tidy up the form",
    ])?;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(session.wait_for_event("clicked Delete")?);
    Ok(())
}

#[test]
fn without_an_accessibility_bus_or_with_no_elements_targets_are_points() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !stack_available()? {
        return Ok(());
    }
    let session = Session::start()?;
    let beta = xy_for_pixel(
        (WINDOW_ORIGIN.0 + 220) as u32,
        (WINDOW_ORIGIN.1 + 40) as u32,
        SCREEN.0,
        SCREEN.1,
    );
    let moves = session.moves(
        "moves.jsonl",
        &[
            batch("press Beta", &[("press Beta", click(&beta))]),
            done("pressed"),
        ],
    )?;
    let path = moves.to_str().context("path")?;
    let nowhere = format!(
        "unix:path={}",
        session.dir.path().join("no-such-bus").display()
    );
    let (code, stdout, stderr) = session.sightline_on_bus(
        &["run", "--replay", path, "--timeout", "30", "press beta"],
        &nowhere,
    )?;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        stderr.matches("no accessibility bus").count(),
        1,
        "said once: {stderr}"
    );
    assert!(session.wait_for_event("clicked Beta")?);
    let (code, stdout, _) = session.sightline_on_bus(&["view", "--json"], &nowhere)?;
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&stdout)?;
    assert_eq!(doc["view"]["elements"], serde_json::json!([]));

    // --no-elements with the bus up: no elements, and an element id is an error that says so.
    let (_, text, _) = session.sightline(&["view", "--no-elements"])?;
    assert!(text.contains("no elements"), "{text}");
    let by_id = session.moves(
        "by_id.jsonl",
        &[
            batch("press Beta", &[("press Beta", click("button_beta"))]),
            done("pressed"),
        ],
    )?;
    let (_, stdout, _) = session.sightline(&[
        "run",
        "--no-elements",
        "--replay",
        by_id.to_str().context("path")?,
        "press beta",
    ])?;
    assert!(stdout.contains("not an element of the view"), "{stdout}");
    Ok(())
}
