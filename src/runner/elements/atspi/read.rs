//! Reading one element: its short role, what it is called, its value, states and actions, and
//! how a click reaches it.
//!
//! A name is looked for in this order ([`NameSource`]): the accessible name; the
//! `labelled-by` relation (an application that relates a label to its field); the
//! description; a field's placeholder text; the text of its children (a list item or table
//! cell whose text is in child labels or text nodes, a browser paragraph's text). A field
//! still nameless is named later by the label beside it ([`super::super::labels`]).

use atspi::proxy::accessible::AccessibleProxyBlocking;
use atspi::{Interface, InterfaceSet, RelationType, Role, State, StateSet};

use super::bus::Bus;
use super::{Frame, Node, Toolkit};
use crate::runner::coords::ScreenGeometry;
use crate::runner::elements::labels::Found;
use crate::runner::elements::{
    clip_value, input_rect_to_pixels, ClickVia, ElementState, NameSource, PixelRect, RawElement,
    MAX_OPTIONS,
};

/// Characters of a text read for a value or a name (more are clipped anyway).
const MAX_TEXT_READ: i32 = 200;
/// Nodes looked at below an element for the text of its children.
const MAX_CHILD_TEXT_NODES: usize = 16;
/// Levels looked down for the text of children (a GTK list row's label is four down).
const MAX_CHILD_TEXT_DEPTH: usize = 5;
/// Click-like action names, in order of preference, compared without case (Qt spells them
/// `Press`, `Toggle`). `activate` comes last: on a GTK 3 entry it means Enter.
pub(super) const CLICK_ACTIONS: &[&str] = &[
    "click", "press", "toggle", "check", "uncheck", "jump", "switch", "open", "showmenu", "select",
    "activate",
];

/// Most actions of one element whose names are read one by one.
const MAX_ACTIONS: i32 = 8;

/// The names of `node`'s accessible actions. `GetActions` gives the names in the user's
/// language; where none of them is a click-like word this source knows, the untranslated
/// names (`GetName`, one call each) are read instead, so a German desktop's "Umschalten" is
/// still a `toggle`.
pub(super) fn action_names(src: &Bus, node: &Node) -> zbus::Result<Vec<String>> {
    let proxy = src.action(node)?;
    let localized: Vec<String> = proxy.get_actions()?.into_iter().map(|a| a.name).collect();
    let known = localized
        .iter()
        .any(|a| CLICK_ACTIONS.iter().any(|c| a.eq_ignore_ascii_case(c)));
    if known || localized.is_empty() {
        return Ok(localized);
    }
    let n = proxy.n_actions()?.clamp(0, MAX_ACTIONS);
    (0..n).map(|i| proxy.get_name(i)).collect()
}

/// A rectangle in input coordinates (AT-SPI's screen coordinates, or a window's plus its
/// place).
pub(super) type InputRect = PixelRect;

/// What reading needs to know about where the element is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Place<'a> {
    pub toolkit: Toolkit,
    pub geometry: &'a ScreenGeometry,
}

/// The extents of `node` in input coordinates, `None` when it has no usable extents (no
/// Component, a toolkit's "nowhere" of `i32::MIN` or `-1`, an empty size).
pub(super) fn extents(src: &Bus, node: &Node, frame: Frame) -> Option<InputRect> {
    let (x, y, w, h) = src
        .component(node)
        .ok()?
        .get_extents(frame.coord_type())
        .ok()?;
    let offset = frame.offset;
    usable_rect(x, y, w, h).map(|r| InputRect {
        x: r.x.saturating_add(offset.0),
        y: r.y.saturating_add(offset.1),
        ..r
    })
}

/// A rectangle from raw extents, `None` for the values toolkits use for "not on screen".
pub(super) fn usable_rect(x: i32, y: i32, w: i32, h: i32) -> Option<InputRect> {
    let nowhere = x == i32::MIN || y == i32::MIN || (x, y, w, h) == (-1, -1, -1, -1);
    (!nowhere && w > 0 && h > 0).then_some(InputRect {
        x,
        y,
        width: w,
        height: h,
    })
}

/// The short role name of roles a user acts on or reads; `None` for containers, decoration
/// and everything else.
pub(super) fn short_role(role: Role) -> Option<&'static str> {
    Some(match role {
        Role::Button | Role::PushButtonMenu => "button",
        Role::ToggleButton => "toggle",
        Role::CheckBox => "checkbox",
        Role::RadioButton => "radio",
        Role::MenuItem | Role::CheckMenuItem | Role::RadioMenuItem | Role::TearoffMenuItem => {
            "menuitem"
        }
        Role::Menu => "menu",
        Role::Link => "link",
        Role::Entry | Role::Text | Role::PasswordText => "text",
        Role::Terminal => "terminal",
        Role::SpinButton => "spin",
        Role::ComboBox => "combobox",
        Role::Slider => "slider",
        Role::Calendar => "calendar",
        Role::ListItem => "listitem",
        Role::TreeItem => "treeitem",
        Role::TableCell => "cell",
        Role::ColumnHeader | Role::TableColumnHeader => "header",
        Role::PageTab => "tab",
        Role::Label | Role::Static | Role::Caption | Role::StatusBar => "label",
        Role::Heading => "heading",
        Role::Paragraph => "paragraph",
        Role::Landmark => "landmark",
        _ => return None,
    })
}

/// Roles whose children are their own parts or text (a button's label, a link's image): the
/// walk does not go below them.
pub(super) fn is_leaf_control(kind: &str) -> bool {
    matches!(
        kind,
        "button"
            | "toggle"
            | "checkbox"
            | "radio"
            | "text"
            | "terminal"
            | "spin"
            | "slider"
            | "link"
            | "calendar"
            | "header"
    )
}

/// Roles that are text to read: below a kept element they are part of its name.
pub(super) fn is_text_kind(kind: &str) -> bool {
    matches!(kind, "label" | "paragraph" | "heading")
}

/// Whether elements of this short role are controls (clicking them does something).
fn is_control(kind: &str) -> bool {
    !matches!(
        kind,
        "label" | "heading" | "paragraph" | "landmark" | "cell" | "header"
    )
}

/// Roles whose name may come from the text of their children.
fn named_by_children(kind: &str) -> bool {
    matches!(
        kind,
        "listitem"
            | "treeitem"
            | "cell"
            | "tab"
            | "menuitem"
            | "button"
            | "toggle"
            | "link"
            | "heading"
            | "paragraph"
            | "label"
            | "header"
    )
}

/// Roles a label beside them may name.
fn is_field(kind: &str) -> bool {
    matches!(
        kind,
        "text" | "spin" | "combobox" | "slider" | "calendar" | "terminal" | "checkbox"
    )
}

pub(super) fn element_state(states: StateSet) -> ElementState {
    ElementState {
        focused: states.contains(State::Focused),
        selected: states.contains(State::Selected),
        enabled: states.contains(State::Enabled) || states.contains(State::Sensitive),
        checked: states.contains(State::Checked) || states.contains(State::Pressed),
        expanded: states.contains(State::Expanded),
        focusable: states.contains(State::Focusable),
    }
}

/// Text fit to show: embedded-object characters, direction marks and runs of white space
/// are dropped, the rest trimmed.
pub(super) fn clean_text(s: &str) -> String {
    let kept: String = s
        .chars()
        .filter(|c| {
            !matches!(
                c,
                '\u{fffc}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}'
            )
        })
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A name a toolkit made up from the widget's class (`GtkEntry`): no name at all.
fn is_class_name(name: &str) -> bool {
    name.len() > 3
        && name.starts_with("Gtk")
        && name[3..].starts_with(|c: char| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
}

/// The accessible name of `proxy`, cleaned, with toolkit class names taken as no name.
pub(super) fn own_name(proxy: &AccessibleProxyBlocking<'_>, toolkit: Toolkit) -> String {
    let name = clean_text(&proxy.name().unwrap_or_default());
    if toolkit.class_names && is_class_name(&name) {
        String::new()
    } else {
        name
    }
}

/// A number as people write it: no `.0` on whole numbers.
fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// Text of `node` through its Text interface (at most [`MAX_TEXT_READ`] characters), the
/// last ones when `tail` (a terminal's prompt is at the end).
pub(super) fn read_text(src: &Bus, node: &Node, tail: bool) -> zbus::Result<String> {
    let text = src.text(node)?;
    let count = text.character_count()?.max(0);
    let (start, end) = if tail {
        ((count - MAX_TEXT_READ).max(0), count)
    } else {
        (0, count.min(MAX_TEXT_READ))
    };
    let raw = text.get_text(start, end)?;
    let cleaned = clean_text(&raw);
    Ok(
        if tail && cleaned.chars().count() > crate::runner::elements::MAX_VALUE_CHARS {
            let skip = cleaned.chars().count() - (crate::runner::elements::MAX_VALUE_CHARS - 1);
            format!("…{}", cleaned.chars().skip(skip).collect::<String>())
        } else {
            clip_value(&cleaned)
        },
    )
}

/// The text of `node`'s children: the names of showing labels, cells and text nodes below
/// it, or their Text, in order, joined by spaces.
pub(super) fn child_text(src: &Bus, node: &Node, toolkit: Toolkit) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut queue: std::collections::VecDeque<(Node, usize)> = Default::default();
    queue.push_back((node.clone(), 0));
    let mut visited = 0;
    while let Some((n, depth)) = queue.pop_front() {
        if visited >= MAX_CHILD_TEXT_NODES {
            break;
        }
        visited += 1;
        let Ok(proxy) = src.accessible(&n) else {
            continue;
        };
        if depth > 0 {
            let Ok(states) = proxy.get_state() else {
                continue;
            };
            let shown = states.contains(State::Showing)
                || (toolkit.trust_visible && states.contains(State::Visible));
            if !shown {
                continue;
            }
            let role = proxy.get_role().unwrap_or(Role::Invalid);
            if matches!(
                role,
                Role::Label | Role::Static | Role::TableCell | Role::Text | Role::Paragraph
            ) {
                let name = own_name(&proxy, toolkit);
                if !name.is_empty() {
                    parts.push(name);
                    continue;
                }
            }
        }
        if depth < MAX_CHILD_TEXT_DEPTH {
            if let Ok(children) = proxy.get_children() {
                for c in children {
                    if let Some(child) = Node::of(&c, &n.dest) {
                        queue.push_back((child, depth + 1));
                    }
                }
            }
        }
    }
    clip_value(&parts.join(" "))
}

/// Names of the labels `proxy` is `labelled-by`, with their handles.
fn labelled_by(
    src: &Bus,
    proxy: &AccessibleProxyBlocking<'_>,
    node: &Node,
    toolkit: Toolkit,
) -> (String, Vec<String>) {
    let Ok(relations) = proxy.get_relation_set() else {
        return (String::new(), vec![]);
    };
    let mut names = Vec::new();
    let mut handles = Vec::new();
    for (kind, targets) in relations {
        if kind != RelationType::LabelledBy {
            continue;
        }
        for t in targets {
            let Some(target) = Node::of(&t, &node.dest) else {
                continue;
            };
            if let Ok(p) = src.accessible(&target) {
                let name = own_name(&p, toolkit);
                if !name.is_empty() {
                    names.push(name);
                }
            }
            handles.push(target.handle());
        }
    }
    (clip_value(&names.join(" ")), handles)
}

/// The options of a combo box (the names of the items of its popup menu or list) and the
/// chosen one, from a Selection on the combo box or its popup.
fn combo_options(
    src: &Bus,
    node: &Node,
    interfaces: InterfaceSet,
    toolkit: Toolkit,
) -> (Vec<String>, Option<String>) {
    let mut options = Vec::new();
    let mut chosen = None;
    let mut popups: Vec<Node> = Vec::new();
    if interfaces.contains(Interface::Selection) {
        popups.push(node.clone());
    }
    let children = src
        .accessible(node)
        .and_then(|p| p.get_children())
        .unwrap_or_default();
    for c in children {
        let Some(child) = Node::of(&c, &node.dest) else {
            continue;
        };
        let Ok(p) = src.accessible(&child) else {
            continue;
        };
        match p.get_role() {
            Ok(Role::Menu | Role::List | Role::ListBox | Role::Window) => {
                for item in p.get_children().unwrap_or_default() {
                    if options.len() > MAX_OPTIONS {
                        break;
                    }
                    let Some(item) = Node::of(&item, &child.dest) else {
                        continue;
                    };
                    if let Ok(ip) = src.accessible(&item) {
                        let name = own_name(&ip, toolkit);
                        if !name.is_empty() {
                            options.push(name);
                        }
                    }
                }
                popups.push(child);
            }
            Ok(Role::MenuItem | Role::ListItem) => {
                let name = own_name(&p, toolkit);
                if !name.is_empty() && options.len() <= MAX_OPTIONS {
                    options.push(name);
                }
            }
            _ => {}
        }
    }
    for popup in popups {
        let Ok(sel) = src.selection(&popup) else {
            continue;
        };
        if sel.n_selected_children().unwrap_or(0) > 0 {
            if let Some(item) = sel
                .get_selected_child(0)
                .ok()
                .and_then(|r| Node::of(&r, &popup.dest))
            {
                if let Ok(p) = src.accessible(&item) {
                    let name = own_name(&p, toolkit);
                    if !name.is_empty() {
                        chosen = Some(name);
                        break;
                    }
                }
            }
        }
    }
    if options.len() > MAX_OPTIONS {
        options.truncate(MAX_OPTIONS);
        options.push("…".to_string());
    }
    (options, chosen)
}

/// How a click reaches an element of `kind` with these `actions` and interfaces.
pub(super) fn click_via(kind: &str, editable: bool, actions: &[String]) -> ClickVia {
    if editable || matches!(kind, "text" | "terminal" | "spin") {
        // A GTK 3 entry's only action is "activate": Enter, which submits its form.
        return ClickVia::Focus;
    }
    for want in CLICK_ACTIONS {
        if *want == "activate" && matches!(kind, "cell" | "row") {
            // A cell's "activate" opens what the row names (a double-click), not a click.
            continue;
        }
        if let Some(a) = actions.iter().find(|a| a.eq_ignore_ascii_case(want)) {
            return ClickVia::Action(a.clone());
        }
    }
    ClickVia::Pointer
}

/// A node as the walk saw it: its proxy, role, states and extents.
pub(super) struct Seen<'a> {
    pub node: &'a Node,
    pub proxy: &'a AccessibleProxyBlocking<'static>,
    pub role: Role,
    pub states: StateSet,
    pub rect: Option<InputRect>,
}

/// Reads one element; `None` when its role is not one a user acts on or reads, it has no
/// usable extents, or it is a label with nothing to say.
pub(super) fn read_element(
    src: &Bus,
    seen: &Seen<'_>,
    place: Place<'_>,
    container: &str,
) -> zbus::Result<Option<Found>> {
    let Seen {
        node,
        proxy,
        role,
        states,
        rect,
    } = *seen;
    let Some(kind) = short_role(role) else {
        return Ok(None);
    };
    let Some(rect) = rect else {
        return Ok(None);
    };
    let toolkit = place.toolkit;
    let interfaces = proxy.get_interfaces()?;
    let mut name = own_name(proxy, toolkit);
    let mut name_from = NameSource::Own;
    let mut labels = Vec::new();
    let editable = states.contains(State::Editable)
        || (matches!(kind, "text" | "spin") && interfaces.contains(Interface::EditableText));
    let mut value = None;
    let mut options = Vec::new();
    let mut settable = editable || interfaces.contains(Interface::Value);

    if kind == "combobox" {
        // A combo box's accessible name is often its chosen option (GTK 3, Qt).
        let (opts, chosen) = combo_options(src, node, interfaces, toolkit);
        options = opts;
        settable |= !options.is_empty();
        let (related, handles) = labelled_by(src, proxy, node, toolkit);
        labels = handles;
        value = chosen.or_else(|| {
            (!related.is_empty() && !name.is_empty() && name != related).then(|| name.clone())
        });
        if !related.is_empty() {
            name = related;
            name_from = NameSource::Relation;
        } else if value.as_deref() == Some(name.as_str()) {
            name.clear();
        }
        if value.is_none() && editable && interfaces.contains(Interface::Text) {
            // An editable combo box (a browser's address bar) holds text.
            value = read_text(src, node, false).ok().filter(|t| !t.is_empty());
        }
    }
    // GTK 3 describes a scale by its value ("10"): a name that changes with every move would
    // make a new id each time, so the value is no name.
    let value_text = (matches!(kind, "slider" | "spin") && interfaces.contains(Interface::Value))
        .then(|| src.value(node).and_then(|v| v.current_value()).ok())
        .flatten()
        .map(format_number);
    if value_text.as_deref() == Some(name.as_str()) {
        name.clear();
    }
    if name.is_empty() && is_field(kind) && name_from == NameSource::Own {
        let (related, handles) = labelled_by(src, proxy, node, toolkit);
        labels = handles;
        if !related.is_empty() {
            name = related;
            name_from = NameSource::Relation;
        }
    }
    if name.is_empty() {
        let description = clean_text(&proxy.description().unwrap_or_default());
        if !description.is_empty()
            && !named_by_children(kind)
            && value_text.as_deref() != Some(description.as_str())
        {
            name = clip_value(&description);
            name_from = NameSource::Description;
        }
    }
    if name.is_empty() && matches!(kind, "text" | "spin" | "combobox") {
        if let Ok(attrs) = proxy.get_attributes() {
            if let Some(p) = attrs
                .get("placeholder-text")
                .or_else(|| attrs.get("placeholder"))
            {
                let p = clean_text(p);
                if !p.is_empty() {
                    name = clip_value(&p);
                    name_from = NameSource::Placeholder;
                }
            }
        }
    }
    if name.is_empty() && named_by_children(kind) {
        let from_children = if matches!(kind, "paragraph" | "label" | "heading")
            && interfaces.contains(Interface::Text)
        {
            read_text(src, node, false).unwrap_or_default()
        } else {
            child_text(src, node, toolkit)
        };
        if !from_children.is_empty() {
            name = from_children;
            name_from = NameSource::Children;
        }
    }
    if name.is_empty() {
        // A list item or cell may still say something in its description ("Open your
        // personal folder").
        let description = clean_text(&proxy.description().unwrap_or_default());
        if !description.is_empty() && value_text.as_deref() != Some(description.as_str()) {
            name = clip_value(&description);
            name_from = NameSource::Description;
        }
    }
    if name.is_empty() && kind == "landmark" {
        if let Ok(attrs) = proxy.get_attributes() {
            if let Some(r) = attrs.get("xml-roles") {
                name = clean_text(r);
                name_from = NameSource::Description;
            }
        }
    }
    if name.is_empty() {
        name_from = NameSource::None;
        // Text with nothing to say says nothing to the planner.
        // A nameless menu is a popup's container; its items are the elements.
        if matches!(
            kind,
            "label" | "paragraph" | "heading" | "landmark" | "cell" | "header" | "menu"
        ) {
            return Ok(None);
        }
    }

    if value.is_none() && kind == "terminal" && interfaces.contains(Interface::Text) {
        value = read_text(src, node, true).ok().filter(|t| !t.is_empty());
    } else if value.is_none() && editable && interfaces.contains(Interface::Text) {
        value = read_text(src, node, false).ok().filter(|t| !t.is_empty());
    }
    if value.is_none() && interfaces.contains(Interface::Value) && kind != "combobox" {
        value = read_range(src, node);
    }
    let actions: Vec<String> = if interfaces.contains(Interface::Action) {
        action_names(src, node).unwrap_or_default()
    } else {
        Vec::new()
    };
    let click = click_via(kind, editable, &actions);
    let raw = RawElement {
        role: kind.to_string(),
        name,
        value,
        state: element_state(states),
        clickable: is_control(kind) || click != ClickVia::Pointer,
        editable,
        actions,
        bounds: input_rect_to_pixels(place.geometry, rect.x, rect.y, rect.width, rect.height),
        handle: node.handle(),
        click,
        settable,
        options,
        name_from,
    };
    Ok(Some(Found {
        raw,
        container: container.to_string(),
        labelled_by: labels,
    }))
}

/// A range's value as `42 (0–100)`, from the Value interface.
fn read_range(src: &Bus, node: &Node) -> Option<String> {
    let v = src.value(node).ok()?;
    let now = v.current_value().ok()?;
    match (v.minimum_value(), v.maximum_value()) {
        (Ok(lo), Ok(hi)) if lo < hi => Some(format!(
            "{} ({}–{})",
            format_number(now),
            format_number(lo),
            format_number(hi)
        )),
        _ => Some(format_number(now)),
    }
}

/// Whether the node offers the Table interface.
pub(super) fn has_table(seen: &Seen<'_>) -> bool {
    seen.proxy
        .get_interfaces()
        .is_ok_and(|i| i.contains(Interface::Table))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cleaned_of_marks_objects_and_runs_of_space() {
        assert_eq!(clean_text("07\u{200e}∶11"), "07∶11");
        assert_eq!(clean_text(" a \u{fffc}\n b  "), "a b");
    }

    #[test]
    fn class_names_are_no_names() {
        assert!(is_class_name("GtkEntry"));
        assert!(is_class_name("GtkSpinButton"));
        assert!(!is_class_name("Gtk"));
        assert!(!is_class_name("Gtkfoo"));
        assert!(!is_class_name("GtkEntry field"));
    }

    #[test]
    fn numbers_print_without_needless_decimals() {
        assert_eq!(format_number(42.0), "42");
        assert_eq!(format_number(0.5), "0.5");
        assert_eq!(format_number(-3.25), "-3.25");
    }

    #[test]
    fn fields_are_focused_and_cells_never_activated() {
        let a = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(click_via("text", true, &a(&["activate"])), ClickVia::Focus);
        assert_eq!(
            click_via("button", false, &a(&["click"])),
            ClickVia::Action("click".into())
        );
        assert_eq!(
            click_via("checkbox", false, &a(&["SetFocus", "Toggle"])),
            ClickVia::Action("Toggle".into())
        );
        assert_eq!(
            click_via(
                "cell",
                false,
                &a(&["expand or contract", "edit", "activate"])
            ),
            ClickVia::Pointer
        );
        assert_eq!(
            click_via("link", false, &a(&["jump"])),
            ClickVia::Action("jump".into())
        );
        assert_eq!(
            click_via("label", false, &a(&["clickAncestor"])),
            ClickVia::Pointer
        );
    }

    #[test]
    fn nowhere_extents_are_no_extents() {
        assert!(usable_rect(i32::MIN, i32::MIN, 224, 21).is_none());
        assert!(usable_rect(-1, -1, -1, -1).is_none());
        assert!(usable_rect(10, 10, 0, 5).is_none());
        assert!(usable_rect(-20, 10, 30, 5).is_some());
    }
}
