//! Stock GTK 3 dialogs read as a user sees them, through the binary (`sightline view --json`
//! and `sightline run --replay` on element ids) over a real AT-SPI bus: form entries named by
//! the label on their row, a combo box's options (in its element, and as elements once it is
//! open), a checklist's rows with their checked state, a file chooser's files, path bar and
//! location entry, and a long list read only where it is in view.
//!
//! Needs what `a11y_support` lists, and zenity.

use anyhow::{ensure, Context};
use serde_json::Value;

use crate::a11y_support::*;
use crate::runner_support::{tools_available, x11_lock};

fn view_elements(session: &Session) -> anyhow::Result<Vec<Value>> {
    let (code, stdout, stderr) = session.sightline(&["view", "--json"])?;
    ensure!(code == 0, "view exited {code}: {stdout}{stderr}");
    let doc: Value = serde_json::from_str(&stdout)?;
    Ok(doc["elements"]["elements"]
        .as_array()
        .context("no elements table")?
        .clone())
}

fn element<'a>(elements: &'a [Value], id: &str) -> anyhow::Result<&'a Value> {
    elements
        .iter()
        .find(|e| e["id"] == id)
        .with_context(|| format!("{id} missing from {:#?}", ids(elements)))
}

fn ids(elements: &[Value]) -> Vec<&str> {
    elements.iter().filter_map(|e| e["id"].as_str()).collect()
}

/// Replays one batch of steps (JSON actions) and a done claim.
fn replay(session: &Session, actions: &[Value]) -> anyhow::Result<()> {
    let steps: Vec<Value> = actions
        .iter()
        .map(|a| serde_json::json!({ "purpose": "step", "action": a }))
        .collect();
    let moves = session.moves(
        "moves.jsonl",
        &[
            serde_json::json!({ "kind": "batch", "purpose": "act", "steps": steps }).to_string(),
            serde_json::json!({ "kind": "done", "summary": "done" }).to_string(),
        ],
    )?;
    let (code, out, err) = session.run_replay(&moves, "act on the dialog")?;
    ensure!(code == 0, "replay exited {code}: {out}{err}");
    Ok(())
}

fn available() -> anyhow::Result<bool> {
    Ok(stack_available()? && tools_available(&["zenity", "xdotool"])?)
}

#[test]
fn form_entries_are_named_by_the_label_on_their_row_and_combo_options_are_listed(
) -> anyhow::Result<()> {
    let _x = x11_lock();
    if !available()? {
        return Ok(());
    }
    let mut session = Session::bare()?;
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
            "--add-password",
            "PIN",
            "--add-combo",
            "Color",
            "--combo-values",
            "Red|Green|Blue",
        ],
    )?;
    session.wait_for_window("^Person$")?;
    let elements = view_elements(&session)?;
    for (id, name) in [
        ("text_first-name", "First name"),
        ("text_last-name", "Last name"),
        ("text_pin", "PIN"),
    ] {
        let e = element(&elements, id)?;
        assert_eq!(e["name"], name, "{e}");
        assert_eq!(e["name_from"], "beside", "{e}");
        assert_eq!(e["role"], "text", "{e}");
    }
    // A label that became a field's name is not listed again.
    assert!(
        !ids(&elements).contains(&"label_first-name"),
        "{:?}",
        ids(&elements)
    );
    let combo = element(&elements, "combobox_color")?;
    assert_eq!(
        combo["options"],
        serde_json::json!(["Red", "Green", "Blue"])
    );
    // Opened, its options are elements to click.
    replay(
        &session,
        &[serde_json::json!({ "type": "click", "target_id": "combobox_color" })],
    )?;
    let opened = view_elements(&session)?;
    for id in ["menuitem_red", "menuitem_green", "menuitem_blue"] {
        element(&opened, id)?;
    }
    Ok(())
}

#[test]
fn checklist_rows_are_check_boxes_named_by_their_text_with_their_state() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !available()? {
        return Ok(());
    }
    let mut session = Session::bare()?;
    session.spawn(
        "zenity",
        &[
            "--list",
            "--checklist",
            "--title",
            "Fruit",
            "--column",
            "Pick",
            "--column",
            "Fruit",
            "FALSE",
            "Apple",
            "TRUE",
            "Banana",
            "FALSE",
            "Cherry",
        ],
    )?;
    session.wait_for_window("^Fruit$")?;
    let elements = view_elements(&session)?;
    for (id, checked) in [
        ("checkbox_apple", false),
        ("checkbox_banana", true),
        ("checkbox_cherry", false),
    ] {
        let e = element(&elements, id)?;
        assert_eq!(e["state"]["checked"], checked, "{e}");
        assert_eq!(e["name_from"], "row", "{e}");
    }
    // A click toggles the row, through the cell's own action.
    replay(
        &session,
        &[serde_json::json!({ "type": "click", "target_id": "checkbox_cherry" })],
    )?;
    let after = view_elements(&session)?;
    assert_eq!(
        element(&after, "checkbox_cherry")?["state"]["checked"],
        true
    );
    Ok(())
}

#[test]
fn file_chooser_lists_visible_files_path_bar_and_location_entry() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !available()? {
        return Ok(());
    }
    let mut session = Session::bare()?;
    let docs = session.dir.path().join("docs");
    std::fs::create_dir(&docs)?;
    for f in ["agenda.txt", "budget.ods"] {
        std::fs::write(docs.join(f), "x")?;
    }
    let start = format!("{}/", docs.to_str().context("path")?);
    session.spawn(
        "zenity",
        &[
            "--file-selection",
            "--title",
            "Choose a file",
            "--filename",
            &start,
        ],
    )?;
    session.wait_for_window("^Choose a file$")?;
    let elements = view_elements(&session)?;
    for id in ["row_agenda-txt", "row_budget-ods"] {
        let e = element(&elements, id)?;
        assert_eq!(e["role"], "row", "{e}");
        assert_eq!(e["click"], "select", "{e}");
    }
    // The path bar: the folder shown is the checked button.
    let here = element(&elements, "toggle_docs")?;
    assert_eq!(here["state"]["checked"], true, "{here}");
    element(&elements, "button_ok")?;
    // Ctrl+L shows the location entry in place of the path bar.
    replay(
        &session,
        &[
            serde_json::json!({ "type": "click", "target_id": "row_agenda-txt" }),
            serde_json::json!({ "type": "key_combo", "keys": ["ctrl", "l"] }),
        ],
    )?;
    let after = view_elements(&session)?;
    let location = element(&after, "text_location")?;
    assert_eq!(location["editable"], true, "{location}");
    Ok(())
}

#[test]
fn long_list_shows_the_rows_in_view_and_counts_the_rest() -> anyhow::Result<()> {
    let _x = x11_lock();
    if !available()? {
        return Ok(());
    }
    const ROWS: usize = 300;
    let mut session = Session::bare()?;
    let mut args: Vec<String> = ["--list", "--title", "Many", "--column", "Item"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend((1..=ROWS).map(|i| format!("item{i}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    session.spawn("zenity", &args)?;
    session.wait_for_window("^Many$")?;
    let rows = |elements: &[Value]| -> Vec<String> {
        elements
            .iter()
            .filter(|e| e["role"] == "row")
            .filter_map(|e| e["name"].as_str().map(str::to_string))
            .collect()
    };
    let summary = |elements: &[Value]| -> anyhow::Result<String> {
        let table = elements
            .iter()
            .find(|e| e["role"] == "table")
            .with_context(|| format!("no table summary in {:?}", ids(elements)))?;
        Ok(table["value"].as_str().unwrap_or_default().to_string())
    };
    let top = view_elements(&session)?;
    let shown = rows(&top);
    ensure!(
        !shown.is_empty() && shown.len() < ROWS / 10,
        "rows in view: {shown:?}"
    );
    assert_eq!(shown[0], "item1");
    assert_eq!(
        summary(&top)?,
        format!("rows 1–{} of {ROWS} shown", shown.len())
    );
    // Scrolled to the end, the rows in view are the last ones (GTK 3 gives rows out of view
    // no place: the first row in view is found by asking the table what is at its top).
    replay(
        &session,
        &[
            serde_json::json!({ "type": "click", "target_id": "row_item1" }),
            serde_json::json!({ "type": "key", "key": "End" }),
        ],
    )?;
    let bottom = view_elements(&session)?;
    let shown = rows(&bottom);
    assert_eq!(
        shown.last().map(String::as_str),
        Some("item300"),
        "{shown:?}"
    );
    let first: usize = shown[0].trim_start_matches("item").parse()?;
    assert_eq!(
        summary(&bottom)?,
        format!("rows {first}–{ROWS} of {ROWS} shown")
    );
    Ok(())
}
