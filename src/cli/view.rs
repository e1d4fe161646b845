//! `sightline view [--json]`: the current screen's planning view as the planner would see it,
//! elements with ids, roles, names and bounds, and what the capture cost (elements kept,
//! accessibility nodes walked, milliseconds).
//!
//! It captures the monitor and reads the accessibility tree exactly as one turn of `sightline
//! run` does (the same [`desktop_view`]), so an id printed here is an id a run's planner can
//! name, and resolves in a later run while the screen is unchanged.

use std::io::Write;

use cel_contracts::RunProgress;
use serde_json::json;
use sightline::runner::desktop_view;
use sightline::runner::{capture_elements, Desktop, ElementBudget, XDesktop};

/// Arguments of `sightline view`.
#[derive(Debug, Clone, clap::Args)]
pub struct ViewArgs {
    /// Print JSON: `{"view": PlanningView, "elements": table with bounds, "screenshot_size"}`.
    #[arg(long)]
    pub json: bool,
    /// Monitor index to capture (default: the primary monitor).
    #[arg(long)]
    pub monitor: Option<usize>,
    /// The goal to put in the view (the planner sees one; empty by default).
    #[arg(long, default_value = "")]
    pub goal: String,
    /// Read no accessibility tree: the view a run with `--no-elements` gives.
    #[arg(long)]
    pub no_elements: bool,
}

/// Runs `sightline view` on stdout and returns the exit code; an error when the screen
/// cannot be read.
pub fn view(args: &ViewArgs) -> anyhow::Result<i32> {
    let mut stdout = std::io::stdout();
    print_view(args, &mut stdout).map(|()| sightline::exit_code::SUCCESS)
}

fn print_view(args: &ViewArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut desktop = XDesktop::open(args.monitor)?;
    if args.no_elements {
        desktop = desktop.without_elements();
    }
    let capture = desktop.capture()?;
    let table = if args.no_elements {
        None
    } else {
        capture_elements(&mut desktop, &capture.geometry, &ElementBudget::default())
    };
    let elements = table
        .as_ref()
        .map(|t| t.planning_elements())
        .unwrap_or_default();
    let view = desktop_view(
        &args.goal,
        &capture,
        elements,
        table.as_ref(),
        RunProgress::default(),
    );
    let (w, h) = (capture.image.width(), capture.image.height());
    if args.json {
        let doc = json!({
            "view": view,
            "elements": table,
            "screenshot_size": [w, h],
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    let monitor = desktop.monitor();
    writeln!(
        out,
        "monitor {} ({}), screenshot {w}x{h}; focused: {} {:?}",
        monitor.index, monitor.name, view.screen.active_app, view.screen.window
    )?;
    let Some(table) = table else {
        writeln!(
            out,
            "no elements: the planner sees the screenshot and xy: points only"
        )?;
        return Ok(());
    };
    writeln!(
        out,
        "{} element(s) from {} in {} ms ({} nodes walked{}{})",
        table.elements.len(),
        table.source,
        table.capture_ms,
        table.nodes_walked,
        if table.dropped > 0 {
            format!(", {} more left out by the element budget", table.dropped)
        } else {
            String::new()
        },
        if table.truncated && table.dropped == 0 {
            ", cut short by the time or depth budget"
        } else {
            ""
        }
    )?;
    let id_width = table.elements.iter().map(|e| e.id.len()).max().unwrap_or(2);
    for e in &table.elements {
        let s = e.raw.state;
        let flags: Vec<&str> = [
            (s.focused, "focused"),
            (s.selected, "selected"),
            (s.checked, "checked"),
            (!s.enabled, "disabled"),
            (s.expanded, "expanded"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        let b = e.raw.bounds;
        writeln!(
            out,
            "{:<id_width$}  {:<9} {:<28} {:>4},{:<4} {:>4}x{:<4} {}{}{}",
            e.id,
            e.raw.role,
            format!("{:?}", e.raw.name),
            b.x,
            b.y,
            b.width,
            b.height,
            e.raw
                .value
                .as_deref()
                .map(|v| format!("value {v:?} "))
                .unwrap_or_default(),
            if e.raw.options.is_empty() {
                String::new()
            } else {
                format!("options {:?} ", e.raw.options)
            },
            flags.join(",")
        )?;
    }
    Ok(())
}
