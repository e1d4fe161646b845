//! Tables, tree views and lists with a Table interface, read row by row: only the rows in
//! view, each one element.
//!
//! A row is named by its first cell with text (the cell's name, or the text of the cell's
//! children, as in a file chooser whose name column holds an icon and a text), and its other
//! cells' text is its value (`2 bytes · Text · 07:11`). A row with a check box cell (a
//! checklist) is one `checkbox` element named by the row, toggled by the cell's `toggle`
//! action; any other row is a `row` element whose click selects it in its table. Controls
//! inside cells (a browser table's links) are elements of their own. Column headers are
//! elements too (clicking one sorts, in most toolkits).
//!
//! Which rows are in view: the first is found by a binary search on the rows' extents, or
//! where rows out of view have none (GTK 3), by asking the table which cell lies at its top
//! left. Reading stops
//! at the first row below the view, and a summary element (`table`, `rows 12–31 of 200
//! shown`) tells the planner how many rows are out of view.

use atspi::proxy::accessible::AccessibleProxyBlocking;
use atspi::proxy::table::TableProxyBlocking;
use std::time::Instant;

use atspi::{Interface, Role, State, StateSet};

use super::read::{self, InputRect, Place, Seen};

use super::bus::Bus;
use super::{Context, Frame, Node};
use crate::runner::coords::ScreenGeometry;
use crate::runner::elements::labels::Found;
use crate::runner::elements::{
    clip_value, input_rect_to_pixels, ClickVia, ElementState, NameSource, RawElement,
};

/// Columns read per row at most.
const MAX_COLUMNS: i32 = 8;
/// Rows without extents tolerated before the first row in view, when reading from the top.
const MAX_ROWS_OUT_OF_VIEW: usize = 8;
/// How far below the top of a table its first row is looked for (past its header), pixels.
const HEADER_PROBE_PX: i32 = 80;
/// Step of that search, pixels.
const HEADER_PROBE_STEP_PX: usize = 6;

/// One cell as read.
struct Cell {
    node: Node,
    states: StateSet,
    rect: Option<InputRect>,
    text: String,
    own_named: bool,
    actions: Vec<String>,
    check: bool,
}

/// What the walk gives a table to read it with.
pub(super) struct RowLimits {
    /// When the capture's time is up.
    pub deadline: Instant,
    /// Elements it may still add.
    pub max_found: usize,
}

/// The rows of a table as read: their elements, the nodes the walk is to visit next (column
/// headers, controls inside cells), what it cost, and the rows in view out of all
/// (`first`, `last`, `total`) when some are not.
pub(super) struct Rows<'a> {
    src: &'a Bus,
    geometry: &'a ScreenGeometry,
    limits: RowLimits,
    pub found: Vec<Found>,
    pub visit: Vec<(Node, Context)>,
    pub nodes: usize,
    pub truncated: bool,
    pub summary: Option<(usize, usize, usize)>,
}

impl Rows<'_> {
    fn out_of_budget(&self) -> bool {
        self.found.len() >= self.limits.max_found || Instant::now() >= self.limits.deadline
    }
}

/// Reads the rows in view of a table or list with a Table interface. `Ok(None)` when it has
/// none (or no rows): the walk then goes through its children as for any container.
pub(super) fn read_rows<'a>(
    src: &'a Bus,
    seen: &Seen<'_>,
    ctx: &Context,
    geometry: &'a ScreenGeometry,
    limits: RowLimits,
) -> zbus::Result<Option<Rows<'a>>> {
    if !read::has_table(seen) {
        return Ok(None);
    }
    let mut rows = Rows {
        src,
        geometry,
        limits,
        found: Vec::new(),
        visit: Vec::new(),
        nodes: 0,
        truncated: false,
        summary: None,
    };
    if !read_table(&mut rows, seen, ctx)? {
        return Ok(None);
    }
    Ok(Some(rows))
}

fn read_table(rows: &mut Rows<'_>, seen: &Seen<'_>, ctx: &Context) -> zbus::Result<bool> {
    let table = rows.src.table(seen.node)?;
    let (Ok(n_rows), Ok(n_cols)) = (table.n_rows(), table.n_columns()) else {
        return Ok(false);
    };
    if n_rows <= 0 || n_cols <= 0 {
        return Ok(false);
    }
    let cols = n_cols.min(MAX_COLUMNS);
    let interfaces = seen.proxy.get_interfaces()?;
    let selectable = interfaces.contains(Interface::Selection);
    let clip = ctx.clip.or(seen.rect);
    for c in 0..cols {
        if let Some(header) = table
            .get_column_header(c)
            .ok()
            .and_then(|h| Node::of(&h, &seen.node.dest))
        {
            rows.visit.push((header, ctx.clone()));
        }
    }
    let first = match clip {
        Some(clip) => first_row_in_view(rows, &table, seen.node, clip, n_rows, ctx.frame),
        None => 0,
    };
    let row_ctx = Context {
        in_row: true,
        inside_kept: true,
        ..ctx.clone()
    };
    let mut first_shown: Option<usize> = None;
    let mut last_shown = 0;
    for r in first..n_rows {
        if rows.out_of_budget() {
            rows.truncated = true;
            break;
        }
        let cells = read_row_cells(rows, &table, &seen.node.dest, r, cols, ctx);
        let Some(rect) = row_rect(&cells) else {
            // Before the first row in view, a few rows without a place are passed over.
            if first_shown.is_some() || (r - first) as usize >= MAX_ROWS_OUT_OF_VIEW {
                break;
            }
            continue;
        };
        if let Some(c) = clip {
            if rect.y >= c.y + c.height {
                break;
            }
            if rect.intersect(&c).is_none() {
                continue;
            }
        }
        let r = r as usize;
        first_shown.get_or_insert(r);
        last_shown = r;
        if let Some(found) = row_element(rows, &cells, selectable, ctx) {
            rows.found.push(found);
        }
        controls_in_cells(rows, &cells, &row_ctx);
    }
    let total = n_rows as usize;
    rows.summary = match first_shown {
        Some(first) if last_shown + 1 - first < total => Some((first, last_shown, total)),
        None => Some((1, 0, total)),
        _ => None,
    };
    Ok(true)
}

/// The first row in view: by binary search on the rows' extents, else by the cell the table
/// reports at its top left (rows out of view have no extents in GTK 3), else row 0.
fn first_row_in_view(
    rows: &mut Rows<'_>,
    table: &TableProxyBlocking<'_>,
    node: &Node,
    clip: InputRect,
    n_rows: i32,
    frame: Frame,
) -> i32 {
    let (mut lo, mut hi) = (0, n_rows);
    let mut searchable = true;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        rows.nodes += 1;
        let rect = table
            .get_accessible_at(mid, 0)
            .ok()
            .and_then(|c| Node::of(&c, &node.dest))
            .and_then(|c| read::extents(rows.src, &c, frame));
        let Some(r) = rect else {
            searchable = false;
            break;
        };
        if r.y + r.height <= clip.y {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if searchable {
        return lo;
    }
    let Ok(component) = rows.src.component(node) else {
        return 0;
    };
    let x = clip.x + (clip.width / 4).min(40) - frame.offset.0;
    for dy in (2..HEADER_PROBE_PX.min(clip.height)).step_by(HEADER_PROBE_STEP_PX) {
        rows.nodes += 1;
        let Some(cell) = component
            .get_accessible_at_point(x, clip.y + dy - frame.offset.1, frame.coord_type())
            .ok()
            .and_then(|c| Node::of(&c, &node.dest))
        else {
            continue;
        };
        if let Some(row) = row_of_cell(rows.src, table, &cell) {
            return row;
        }
    }
    0
}

/// The row of a cell: its TableCell position, else its index through the table.
fn row_of_cell(src: &Bus, table: &TableProxyBlocking<'_>, cell: &Node) -> Option<i32> {
    let proxy = src.accessible(cell).ok()?;
    if !matches!(proxy.get_role().ok()?, Role::TableCell) {
        return None;
    }
    if let Ok((row, _)) = src.table_cell(cell).and_then(|c| c.position()) {
        return (row >= 0).then_some(row);
    }
    let index = proxy.get_index_in_parent().ok()?;
    table.get_row_at_index(index).ok().filter(|r| *r >= 0)
}

fn read_row_cells(
    rows: &mut Rows<'_>,
    table: &TableProxyBlocking<'_>,
    dest: &str,
    row: i32,
    cols: i32,
    ctx: &Context,
) -> Vec<Cell> {
    let mut cells = Vec::new();
    for c in 0..cols {
        rows.nodes += 1;
        let Some(node) = table
            .get_accessible_at(row, c)
            .ok()
            .and_then(|r| Node::of(&r, dest))
        else {
            continue;
        };
        if let Some(cell) = read_cell(rows.src, &node, ctx) {
            cells.push(cell);
        }
    }
    cells
}

fn read_cell(src: &Bus, node: &Node, ctx: &Context) -> Option<Cell> {
    let proxy = src.accessible(node).ok()?;
    let states = proxy.get_state().ok()?;
    let role = proxy.get_role().ok()?;
    if matches!(
        role,
        Role::ColumnHeader | Role::TableColumnHeader | Role::RowHeader | Role::TableRowHeader
    ) {
        return None;
    }
    let rect = read::extents(src, node, ctx.frame);
    let own = read::own_name(&proxy, ctx.toolkit);
    let own_named = !own.is_empty();
    let interfaces = proxy.get_interfaces().ok()?;
    let text = if own_named {
        own
    } else if interfaces.contains(Interface::Text) && proxy.child_count().unwrap_or(0) == 0 {
        read::read_text(src, node, false).unwrap_or_default()
    } else {
        read::child_text(src, node, ctx.toolkit)
    };
    // Actions tell a check box cell (which has no text) from others; a row with text reads
    // its anchor's actions only where a click needs them (`row_element`).
    let actions: Vec<String> = if text.is_empty() && interfaces.contains(Interface::Action) {
        read::action_names(src, node).unwrap_or_default()
    } else {
        Vec::new()
    };
    // A check box cell: `checkable`, or a GTK 3 toggle renderer (a "toggle" action and no
    // text; Qt's "Toggle" on a text cell toggles the selection).
    let check = states.contains(State::Checkable)
        || role == Role::CheckBox
        || (text.is_empty() && actions.iter().any(|a| a.eq_ignore_ascii_case("toggle")));
    Some(Cell {
        node: node.clone(),
        states,
        rect,
        text,
        own_named,
        actions,
        check,
    })
}

/// Where a row is: its check box cell, else its first cell with text, else its first cell.
fn row_rect(cells: &[Cell]) -> Option<InputRect> {
    cells
        .iter()
        .find(|c| c.check && c.rect.is_some())
        .or_else(|| {
            cells
                .iter()
                .find(|c| !c.text.is_empty() && c.rect.is_some())
        })
        .or_else(|| cells.iter().find(|c| c.rect.is_some()))
        .and_then(|c| c.rect)
}

fn row_element(rows: &Rows<'_>, cells: &[Cell], selectable: bool, ctx: &Context) -> Option<Found> {
    let key = cells.iter().find(|c| !c.check && !c.text.is_empty());
    let check = cells.iter().find(|c| c.check);
    let anchor = check.or(key)?;
    let rect = anchor.rect?;
    let name = key.map(|k| k.text.clone()).unwrap_or_default();
    let others: Vec<&str> = cells
        .iter()
        .filter(|c| !c.check && !c.text.is_empty())
        .skip(1)
        .map(|c| c.text.as_str())
        .collect();
    let any = |s: State| cells.iter().any(|c| c.states.contains(s));
    let key_states = key.map(|k| k.states).unwrap_or(anchor.states);
    let state = ElementState {
        focused: any(State::Focused),
        selected: any(State::Selected),
        enabled: key_states.contains(State::Enabled) || key_states.contains(State::Sensitive),
        checked: check.is_some_and(|c| c.states.contains(State::Checked)),
        expanded: key_states.contains(State::Expanded),
        focusable: anchor.states.contains(State::Focusable),
    };
    let (role, click, name_from) = match check {
        Some(c) => (
            "checkbox",
            read::click_via("checkbox", false, &c.actions),
            NameSource::Row,
        ),
        None => {
            let click = if ctx.in_combobox {
                // An option of an open combo box: only a click chooses it (a selection in
                // Qt's popup list leaves the combo box's choice as it was).
                ClickVia::Pointer
            } else if selectable || anchor.states.contains(State::Selectable) {
                ClickVia::Select
            } else {
                let actions = read::action_names(rows.src, &anchor.node).unwrap_or_default();
                read::click_via("row", false, &actions)
            };
            let from = if anchor.own_named {
                NameSource::Own
            } else {
                NameSource::Children
            };
            ("row", click, from)
        }
    };
    let raw = RawElement {
        role: role.to_string(),
        name_from: if name.is_empty() {
            NameSource::None
        } else {
            name_from
        },
        name,
        value: (!others.is_empty()).then(|| clip_value(&others.join(" · "))),
        state,
        clickable: click != ClickVia::Pointer || ctx.in_combobox,
        editable: false,
        actions: anchor.actions.clone(),
        bounds: input_rect_to_pixels(rows.geometry, rect.x, rect.y, rect.width, rect.height),
        handle: anchor.node.handle(),
        click,
        settable: false,
        options: vec![],
    };
    Some(Found {
        raw,
        container: ctx.container.clone(),
        labelled_by: vec![],
    })
}

/// Walks the children of cells that hold controls (a link in a browser's table cell); cells
/// that only hold cells, icons or text (GTK 3's name column) are left alone.
fn controls_in_cells(rows: &mut Rows<'_>, cells: &[Cell], ctx: &Context) {
    for cell in cells {
        let Ok(proxy) = rows.src.accessible(&cell.node) else {
            continue;
        };
        if proxy.child_count().unwrap_or(0) <= 0 {
            continue;
        }
        for child in proxy.get_children().unwrap_or_default() {
            let Some(child) = Node::of(&child, &cell.node.dest) else {
                continue;
            };
            let role = rows
                .src
                .accessible(&child)
                .and_then(|p| p.get_role())
                .unwrap_or(Role::Invalid);
            if matches!(
                role,
                Role::TableCell
                    | Role::Image
                    | Role::Icon
                    | Role::Label
                    | Role::Static
                    | Role::Text
            ) {
                continue;
            }
            rows.visit.push((child, ctx.clone()));
        }
    }
}

/// A row (or a row's check box) read again from its cell, for a refresh: bounds and states
/// as they are now; the name is the cell's text for a row, the captured one for a check box
/// (it comes from the row, which the cell alone does not say); the value as captured.
pub(super) fn cell_as_row_again(
    src: &Bus,
    node: &Node,
    proxy: &AccessibleProxyBlocking<'_>,
    states: StateSet,
    rect: InputRect,
    place: Place<'_>,
    captured: &RawElement,
) -> RawElement {
    let name = if captured.role == "row" {
        let own = read::own_name(proxy, place.toolkit);
        if own.is_empty() {
            read::child_text(src, node, place.toolkit)
        } else {
            own
        }
    } else {
        captured.name.clone()
    };
    let mut state = read::element_state(states);
    if captured.role == "row" {
        // The row's check and expansion live in other cells; keep what the capture read.
        state.checked = captured.state.checked;
    }
    RawElement {
        name,
        state,
        bounds: input_rect_to_pixels(place.geometry, rect.x, rect.y, rect.width, rect.height),
        ..captured.clone()
    }
}
