//! Acting on elements through AT-SPI: a named action, a focus grab, a selection in the
//! containing table or list, and `set_value`.

use std::time::{Duration, Instant};

use atspi::{Interface, Role, State};

use super::bus::Bus;
use super::read::own_name;
use super::Node;
use crate::error::{Error, Result};
use crate::runner::elements::ScreenElement;

/// Levels looked up from a cell for its table.
const MAX_TABLE_LEVELS: usize = 3;
/// How long a change made through the accessibility API may take to show in what the
/// application reports (a browser's page runs in another process, and its tree follows).
const CHANGE_SEEN_WITHIN: Duration = Duration::from_millis(500);
/// Between two looks for that change.
const CHANGE_POLL: Duration = Duration::from_millis(50);

/// Whether `check` holds now or within `wait`, looking every [`CHANGE_POLL`].
fn holds_within(wait: Duration, check: impl Fn() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if check() {
            return true;
        }
        if started.elapsed() >= wait {
            return false;
        }
        std::thread::sleep(CHANGE_POLL);
    }
}

/// Performs the accessible action named `action` (compared without case).
pub(super) fn invoke(src: &Bus, element: &ScreenElement, action: &str) -> Result<()> {
    let node = Node::from_handle(&element.raw.handle)?;
    let what = format!("accessible action {action:?} on {:?}", element.id);
    let failed = |e: zbus::Error| Error::runner_caused(what.clone(), e);
    let refused = |why: &str| Error::runner(format!("{what}: {why}"));
    let proxy = src.action(&node).map_err(failed)?;
    let localized: Vec<String> = proxy
        .get_actions()
        .map_err(failed)?
        .into_iter()
        .map(|a| a.name)
        .collect();
    let index = match localized
        .iter()
        .position(|a| a.eq_ignore_ascii_case(action))
    {
        Some(i) => i,
        None => super::read::action_names(src, &node)
            .map_err(failed)?
            .iter()
            .position(|a| a.eq_ignore_ascii_case(action))
            .ok_or_else(|| refused("the element no longer offers it"))?,
    };
    let index = i32::try_from(index).map_err(|e| Error::runner_caused(what.clone(), e))?;
    match proxy.do_action(index) {
        Ok(true) => Ok(()),
        Ok(false) => Err(refused("the application refused it")),
        Err(e) => Err(failed(e)),
    }
}

/// Gives the element keyboard focus (AT-SPI `Component.GrabFocus`; GTK also presents its
/// window).
pub(super) fn focus(src: &Bus, element: &ScreenElement) -> Result<()> {
    let node = Node::from_handle(&element.raw.handle)?;
    let what = format!("focus on {:?}", element.id);
    let granted = src
        .component(&node)
        .and_then(|c| c.grab_focus())
        .map_err(|e| Error::runner_caused(what.clone(), e))?;
    if !granted {
        return Err(Error::runner(format!("{what}: the application refused it")));
    }
    // A grant is a request: a browser moves focus in its page's process a moment later, and
    // keys typed before then go elsewhere (a space scrolls the page). Focus counts once the
    // element reports it; the caller's pointer click is the way left when it does not.
    let proxy = src
        .accessible(&node)
        .map_err(|e| Error::runner_caused(what.clone(), e))?;
    if holds_within(CHANGE_SEEN_WITHIN, || {
        proxy
            .get_state()
            .is_ok_and(|states| states.contains(State::Focused))
    }) {
        Ok(())
    } else {
        Err(Error::runner(format!(
            "{what}: granted, but the element did not report focus within {} ms",
            CHANGE_SEEN_WITHIN.as_millis()
        )))
    }
}

/// Selects the element in its container: the Selection of its parent, else the row of its
/// table (`Table.AddRowSelection`). Nothing to do when it is selected already (a focus grab
/// on a GTK 3 row selects it).
pub(super) fn select(src: &Bus, element: &ScreenElement) -> Result<()> {
    let node = Node::from_handle(&element.raw.handle)?;
    let what = format!("select {:?}", element.id);
    let failed = |e: zbus::Error| Error::runner_caused(what.clone(), e);
    let proxy = src.accessible(&node).map_err(failed)?;
    let index = proxy.get_index_in_parent().map_err(failed)?;
    let parent = proxy
        .parent()
        .ok()
        .and_then(|p| Node::of(&p, &node.dest))
        .ok_or_else(|| Error::runner(format!("{what}: it has no container")))?;
    if let Ok(selection) = src.selection(&parent) {
        if selection.is_child_selected(index).unwrap_or(false) {
            return Ok(());
        }
        if selection.select_child(index).unwrap_or(false)
            && holds_within(CHANGE_SEEN_WITHIN, || {
                selection.is_child_selected(index).unwrap_or(false)
            })
        {
            return Ok(());
        }
    }
    let mut up = Some(parent);
    for _ in 0..MAX_TABLE_LEVELS {
        let Some(candidate) = up.take() else { break };
        let Ok(p) = src.accessible(&candidate) else {
            break;
        };
        if p.get_interfaces()
            .is_ok_and(|i| i.contains(Interface::Table))
        {
            let table = src.table(&candidate).map_err(failed)?;
            let row = src
                .table_cell(&node)
                .and_then(|c| c.position())
                .map(|(r, _)| r)
                .or_else(|_| table.get_row_at_index(index))
                .map_err(failed)?;
            if table.is_row_selected(row).unwrap_or(false)
                || (table.add_row_selection(row).unwrap_or(false)
                    && holds_within(CHANGE_SEEN_WITHIN, || {
                        table.is_row_selected(row).unwrap_or(false)
                    }))
            {
                return Ok(());
            }
            break;
        }
        up = p.parent().ok().and_then(|r| Node::of(&r, &candidate.dest));
    }
    Err(Error::runner(format!(
        "{what}: neither its container nor its table would select it"
    )))
}

/// Sets a value: a number through Value (within the range), text through EditableText, an
/// option of a combo box through the Selection of the combo box or its popup.
pub(super) fn set_value(src: &Bus, element: &ScreenElement, value: &str) -> Result<&'static str> {
    let node = Node::from_handle(&element.raw.handle)?;
    let what = format!("set_value on {:?}", element.id);
    let failed = |e: zbus::Error| Error::runner_caused(what.clone(), e);
    let proxy = src.accessible(&node).map_err(failed)?;
    let interfaces = proxy.get_interfaces().map_err(failed)?;
    let role = proxy.get_role().map_err(failed)?;
    let is_text = matches!(
        role,
        Role::Entry | Role::Text | Role::PasswordText | Role::Terminal
    );
    if interfaces.contains(Interface::Value) && !is_text && role != Role::ComboBox {
        let v = src.value(&node).map_err(failed)?;
        let (lo, hi) = (
            v.minimum_value().map_err(failed)?,
            v.maximum_value().map_err(failed)?,
        );
        let number: f64 = value.trim().parse().map_err(|_| {
            Error::runner(format!(
                "{what}: it takes a number from {lo} to {hi}, and {value:?} is not a number"
            ))
        })?;
        if !number.is_finite() || (lo < hi && (number < lo || number > hi)) {
            return Err(Error::runner(format!(
                "{what}: {number} is outside its range, {lo} to {hi}"
            )));
        }
        v.set_current_value(number).map_err(failed)?;
        return Ok("number");
    }
    if interfaces.contains(Interface::EditableText) && role != Role::ComboBox {
        let set = src
            .editable_text(&node)
            .and_then(|t| t.set_text_contents(value))
            .map_err(failed)?;
        if !set {
            return Err(Error::runner(format!(
                "{what}: the application refused the text (is the field read-only?)"
            )));
        }
        // Read back: a browser may accept the call and leave its field as it was. A password
        // field may show other characters, as many as were set.
        let wanted = value.chars().count();
        let took = holds_within(CHANGE_SEEN_WITHIN, || {
            let Ok(text) = src.text(&node) else {
                return false;
            };
            let count = text.character_count().unwrap_or(-1);
            let now = text.get_text(0, count.max(0)).unwrap_or_default();
            now == value || (role == Role::PasswordText && now.chars().count() == wanted)
        });
        return if took {
            Ok("text")
        } else {
            Err(Error::runner(format!(
                "{what}: the application accepted the text but its field does not show it; \
                 click the field and type instead"
            )))
        };
    }
    if role == Role::ComboBox || !element.raw.options.is_empty() {
        select_option(
            src,
            &node,
            interfaces.contains(Interface::Selection),
            value,
            &what,
        )?;
        return Ok("option");
    }
    Err(Error::runner(format!(
        "{what}: a {} takes no value (no editable text, no range, no options); click it or \
         type into it instead",
        element.raw.role
    )))
}

/// One option of a combo box: the item, its popup, its index there and its name.
struct OptionItem {
    item: Node,
    popup: Node,
    index: i32,
    name: String,
}

/// Chooses the option named `value` (exactly, else ignoring case and surrounding space).
fn select_option(
    src: &Bus,
    combo: &Node,
    combo_selects: bool,
    value: &str,
    what: &str,
) -> Result<()> {
    let items = combo_items(src, combo);
    let wanted = value.trim();
    let pick = items
        .iter()
        .position(|o| o.name == wanted)
        .or_else(|| {
            items
                .iter()
                .position(|o| o.name.to_lowercase() == wanted.to_lowercase())
        })
        .ok_or_else(|| {
            let names: Vec<&str> = items.iter().map(|o| o.name.as_str()).collect();
            Error::runner(format!(
                "{what}: no option named {wanted:?}; the options are {names:?}"
            ))
        })?;
    let option = &items[pick];
    // Each way is checked by reading the combo box again: some toolkits accept a call and
    // change nothing the user sees (Qt's popup list selects a row, its combo box keeps its
    // choice).
    let chosen = || {
        holds_within(CHANGE_SEEN_WITHIN, || {
            combo_choice(src, combo) == option.name
        })
    };
    // GTK 3: the combo box's own Selection counts the items of its popup.
    if combo_selects {
        if let Ok(sel) = src.selection(combo) {
            if i32::try_from(pick).is_ok_and(|i| sel.select_child(i).unwrap_or(false)) && chosen() {
                return Ok(());
            }
        }
    }
    if let Ok(sel) = src.selection(&option.popup) {
        if sel.select_child(option.index).unwrap_or(false) && chosen() {
            return Ok(());
        }
    }
    if let Ok(names) = super::read::action_names(src, &option.item) {
        let action = src
            .action(&option.item)
            .map_err(|e| Error::runner_caused(what, e))?;
        for want in ["select", "click", "press"] {
            if let Some(i) = names.iter().position(|a| a.eq_ignore_ascii_case(want)) {
                let i = i32::try_from(i).map_err(|e| Error::runner_caused(what, e))?;
                if action.do_action(i).unwrap_or(false) && chosen() {
                    return Ok(());
                }
            }
        }
    }
    Err(Error::runner(format!(
        "{what}: the application would not choose {:?} through its accessibility interface; \
         click the combo box to open it, then click the option",
        option.name
    )))
}

/// What a combo box shows as chosen now: the selected item of its own or its popup's
/// Selection, else its name (GTK 3 and Qt name a combo box after its choice).
fn combo_choice(src: &Bus, combo: &Node) -> String {
    let toolkit = super::Toolkit::default();
    let mut popups = vec![combo.clone()];
    popups.extend(
        src.accessible(combo)
            .and_then(|p| p.get_children())
            .unwrap_or_default()
            .iter()
            .filter_map(|c| Node::of(c, &combo.dest)),
    );
    for popup in popups {
        let Ok(sel) = src.selection(&popup) else {
            continue;
        };
        if sel.n_selected_children().unwrap_or(0) <= 0 {
            continue;
        }
        let name = sel
            .get_selected_child(0)
            .ok()
            .and_then(|r| Node::of(&r, &popup.dest))
            .and_then(|n| src.accessible(&n).ok())
            .map(|p| own_name(&p, toolkit))
            .unwrap_or_default();
        if !name.is_empty() {
            return name;
        }
    }
    src.accessible(combo)
        .map(|p| own_name(&p, toolkit))
        .unwrap_or_default()
}

/// The items of a combo box's popup (a menu or list below it), in order.
fn combo_items(src: &Bus, combo: &Node) -> Vec<OptionItem> {
    let mut items = Vec::new();
    let children = src
        .accessible(combo)
        .and_then(|p| p.get_children())
        .unwrap_or_default();
    for c in children {
        let Some(popup) = Node::of(&c, &combo.dest) else {
            continue;
        };
        let Ok(p) = src.accessible(&popup) else {
            continue;
        };
        if !matches!(
            p.get_role(),
            Ok(Role::Menu | Role::List | Role::ListBox | Role::Window)
        ) {
            continue;
        }
        for (index, item) in p.get_children().unwrap_or_default().iter().enumerate() {
            let Some(item) = Node::of(item, &popup.dest) else {
                continue;
            };
            let Ok(ip) = src.accessible(&item) else {
                continue;
            };
            let name = own_name(&ip, super::Toolkit::default());
            let Ok(index) = i32::try_from(index) else {
                break;
            };
            items.push(OptionItem {
                item,
                popup: popup.clone(),
                index,
                name,
            });
        }
    }
    items
}
