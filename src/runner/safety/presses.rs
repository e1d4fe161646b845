//! What clicks, key presses and drags commit to: a control named in the label table
//! (`labels.rs`) in any of its ten languages, judged by the element's real accessible name
//! when the screen gives one; a generic answer (OK, Yes, Ja, 确定) in a dialog whose text or
//! title says the act cannot be undone; chords that close (Alt+F4, Ctrl/Super+W/Q,
//! Ctrl+F4, Ctrl+D in a terminal) or delete (Shift+Delete, Delete on a selected file or list
//! item); a drag onto the Trash; and how each key changes a terminal's line.

use cel_contracts::{PlanningElement, PlanningView};
use enigo::Key;

use super::grants::{GrantKind, Target};
use super::labels::{self, Use};
use super::refusal::Need;
use super::typed::Edit;
use crate::moves::parse_point;
use crate::runner::elements::ElementFacts;
use crate::runner::input::{parse_key_chord, parse_key_combo};
use crate::text_norm::{normalize, words};

/// Roles (the view's short role names) of fields that take typed text: clicking one commits
/// nothing, and keys typed after go into it.
const TEXT_FIELD_ROLES: &[&str] = &[
    "text",
    "entry",
    "input",
    "textbox",
    "textarea",
    "searchbox",
    "spin",
    "combobox",
    "password",
    "paragraph",
    "document",
];

/// Roles of items in a list of files, messages or records (Delete deletes the selected one).
const LIST_ITEM_ROLES: &[&str] = &["listitem", "treeitem", "cell", "row", "icon", "option"];

/// Roles of text that describes a dialog (its message, its heading).
const DESCRIPTION_ROLES: &[&str] = &["label", "heading", "paragraph", "alert", "status"];

/// The role of a terminal's text area.
pub(super) const TERMINAL_ROLE: &str = "terminal";

/// Where typed keys go, as far as the gate can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// Possibly a terminal: typed text and keys are judged as a command line.
    MaybeTerminal,
    /// An application's field or control that the accessibility tree shows is not a terminal.
    NotTerminal {
        /// Whether it is a field that takes text (there Shift+Delete cuts and Delete erases a
        /// character).
        text_field: bool,
    },
}

impl Focus {
    /// The focus after clicking (or typing into) an element of this role and name in `view`'s
    /// application. An unknown element (a point nothing describes, a window without
    /// accessibility) may be a terminal; so may any element of a terminal emulator or an IDE
    /// (whose terminal panel may report itself as a text field), and an element whose name
    /// says it is one ("Terminal 1", "bash").
    pub(super) fn of_element(role: Option<&str>, names: &[String], view: &PlanningView) -> Focus {
        if is_terminal_app(&view.screen.active_app) || names.iter().any(|n| names_a_terminal(n)) {
            return Focus::MaybeTerminal;
        }
        match role {
            Some(r) if r == TERMINAL_ROLE => Focus::MaybeTerminal,
            Some(r) => Focus::NotTerminal {
                text_field: TEXT_FIELD_ROLES.contains(&r),
            },
            None => Focus::MaybeTerminal,
        }
    }

    /// The focus a view shows: its focused element, else unknown.
    pub(super) fn of_view(view: &PlanningView) -> Focus {
        match view.elements.iter().find(|e| e.state.focused) {
            Some(e) => Focus::of_element(
                Some(&e.element_type),
                &e.label.iter().cloned().collect::<Vec<_>>(),
                view,
            ),
            None => Focus::MaybeTerminal,
        }
    }
}

/// Words in an element's name that say it is a terminal or a shell.
const TERMINAL_NAME_WORDS: &[&str] = &[
    "terminal",
    "console",
    "shell",
    "xterm",
    "konsole",
    "bash",
    "zsh",
    "fish",
    "powershell",
    "pwsh",
    "tty",
    "cmd",
];

fn names_a_terminal(name: &str) -> bool {
    let normalized = normalize(name);
    words(&normalized)
        .iter()
        .any(|w| TERMINAL_NAME_WORDS.contains(w))
}

/// Parts of the application name (the window class) of terminal emulators and of editors
/// with a terminal panel: typing there may reach a shell whatever element the tree reports.
const TERMINAL_APPS: &[&str] = &[
    "term",
    "rxvt",
    "konsole",
    "kitty",
    "alacritty",
    "wezterm",
    "foot",
    "tilix",
    "terminator",
    "guake",
    "yakuake",
    "tilda",
    "st-256color",
    "code",
    "codium",
    "cursor",
    "jetbrains",
    "idea",
    "pycharm",
    "clion",
    "goland",
    "webstorm",
    "rider",
    "emacs",
    "console",
    "shell",
];

fn is_terminal_app(app: &str) -> bool {
    let app = app.to_lowercase();
    TERMINAL_APPS.iter().any(|t| app.contains(t))
}

/// What the screen says about a target: the element's role and names.
pub(super) struct Seen {
    pub role: Option<String>,
    pub names: Vec<String>,
    pub is_point: bool,
}

/// What a target id is, from the accessibility tree (`seen`) and the view.
pub(super) fn seen_target(
    target_id: &str,
    view: &PlanningView,
    seen: &dyn Fn(&str) -> Option<ElementFacts>,
) -> Seen {
    let facts = seen(target_id);
    let element = view.elements.iter().find(|e| e.id == target_id);
    let mut names = Vec::new();
    names.extend(facts.as_ref().map(|f| f.name.clone()));
    // The label, never the value: a field whose text says "send" is not a Send button.
    names.extend(element.and_then(|e| e.label.clone()));
    Seen {
        role: facts
            .map(|f| f.role)
            .or_else(|| element.map(|e| e.element_type.clone())),
        names,
        is_point: parse_point(target_id).is_some(),
    }
}

/// What a click on `target_id` commits to. `Err` says why it cannot be judged at all (a
/// point that nothing on screen or in the plan describes).
pub(super) fn click_needs(
    target_id: &str,
    purpose: &str,
    batch_purpose: &str,
    view: &PlanningView,
    seen: &dyn Fn(&str) -> Option<ElementFacts>,
) -> Result<Vec<Need>, String> {
    let target = seen_target(target_id, view, seen);
    if target
        .role
        .as_deref()
        .is_some_and(|r| TEXT_FIELD_ROLES.contains(&r) || r == TERMINAL_ROLE)
    {
        return Ok(Vec::new());
    }
    let mut texts = target.names.clone();
    if target.is_point {
        // A point click is described by the planner when the screen names nothing there.
        let described = |t: &str| !words(&normalize(t)).is_empty();
        if described(purpose) {
            texts.push(purpose.to_string());
        } else if described(batch_purpose) {
            texts.push(batch_purpose.to_string());
        } else if target.names.is_empty() {
            return Err(
                "a click on a point that nothing describes (no element there, no purpose); \
                 describe what it presses in the step's purpose"
                    .to_string(),
            );
        }
    }
    Ok(pressing(&texts, view))
}

/// What pressing a control named by one of `texts` commits to.
fn pressing(texts: &[String], view: &PlanningView) -> Vec<Need> {
    for text in texts {
        if let Some(label) = labels::first(text, Use::Control) {
            return vec![Need::new(
                label.kind,
                Target::Unknown,
                format!("pressing \"{}\"", text.trim()),
            )];
        }
    }
    for text in texts {
        if labels::first(text, Use::Confirm).is_some() {
            if let Some(need) = dialog_commit(text, view) {
                return vec![need];
            }
        }
    }
    Vec::new()
}

/// A generic answer pressed in a dialog whose text or title says the act cannot be undone:
/// the kind the dialog's text names (a control word in it), else the phrase's own kind.
fn dialog_commit(answer: &str, view: &PlanningView) -> Option<Need> {
    let description = dialog_text(view);
    let context = labels::first(&description, Use::Context)?;
    let kind = labels::first(&description, Use::Control)
        .map(|l| l.kind)
        .unwrap_or(context.kind);
    Some(Need::new(
        kind,
        Target::Unknown,
        format!(
            "answering \"{}\" to a dialog that says \"{}\"",
            answer.trim(),
            clip(&description, 80)
        ),
    ))
}

/// The window title and the descriptive text elements on screen, one per line.
fn dialog_text(view: &PlanningView) -> String {
    let mut parts: Vec<&str> = vec![view.screen.window.as_str()];
    for e in &view.elements {
        if DESCRIPTION_ROLES.contains(&e.element_type.as_str()) {
            parts.extend(e.label.as_deref());
            parts.extend(e.value.as_deref());
        }
    }
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn clip(text: &str, max_chars: usize) -> String {
    let one_line = text.replace('\n', " / ");
    if one_line.chars().count() <= max_chars {
        one_line
    } else {
        format!("{}…", one_line.chars().take(max_chars).collect::<String>())
    }
}

/// What a drag commits to: dropping onto the Trash (or a Delete control) deletes.
pub(super) fn drag_needs(
    from: &str,
    to: &str,
    purpose: &str,
    view: &PlanningView,
    seen: &dyn Fn(&str) -> Option<ElementFacts>,
) -> Vec<Need> {
    let target = seen_target(to, view, seen);
    let mut texts = target.names;
    if target.is_point {
        texts.push(purpose.to_string());
    }
    let onto_trash = texts.iter().any(|t| {
        labels::first(t, Use::Trash).is_some()
            || labels::first(t, Use::Control).is_some_and(|l| l.kind == GrantKind::Delete)
    });
    let dragged = seen_target(from, view, seen)
        .names
        .into_iter()
        .next()
        .unwrap_or_else(|| from.to_string());
    if onto_trash {
        vec![Need::new(
            GrantKind::Delete,
            Target::Unknown,
            format!("dragging \"{dragged}\" onto the Trash"),
        )]
    } else {
        Vec::new()
    }
}

/// What a key chord does: the needs it has by itself, the edits it makes to a terminal's
/// line, and whether it moves the focus somewhere unknown.
#[derive(Debug, Default)]
pub(super) struct KeyEffect {
    pub needs: Vec<Need>,
    pub edits: Vec<Edit>,
    pub focus_unknown: bool,
}

/// The keys of a chord, parsed as the input layer would; names it cannot parse are kept
/// lower-cased, so a misspelt chord is still judged by its key names.
struct Chord {
    keys: Vec<Key>,
    names: Vec<String>,
}

impl Chord {
    fn new(keys: &[String]) -> Self {
        let spelled = keys.join("+");
        let parsed = parse_key_combo(keys)
            .ok()
            .or_else(|| parse_key_chord(&spelled).ok())
            .unwrap_or_default();
        let names = keys
            .iter()
            .flat_map(|k| k.split(['+', ' ']))
            .map(|n| n.trim().to_lowercase())
            .filter(|n| !n.is_empty())
            .collect();
        Self {
            keys: parsed,
            names,
        }
    }

    fn named(&self, set: &[&str]) -> bool {
        self.names.iter().any(|n| set.contains(&n.as_str()))
    }

    fn has(&self, key: Key, names: &[&str]) -> bool {
        self.keys.contains(&key) || self.named(names)
    }

    fn ctrl(&self) -> bool {
        self.has(Key::Control, &["ctrl", "control", "ctrl_l", "ctrl_r"])
    }
    fn alt(&self) -> bool {
        self.has(Key::Alt, &["alt", "option", "alt_l", "alt_r"])
    }
    fn shift(&self) -> bool {
        self.has(Key::Shift, &["shift", "shift_l", "shift_r"])
    }
    fn meta(&self) -> bool {
        self.has(
            Key::Meta,
            &["super", "meta", "cmd", "command", "win", "windows", "logo"],
        )
    }

    /// A letter key, in either case.
    fn letter(&self, c: char) -> bool {
        self.keys.contains(&Key::Unicode(c))
            || self.keys.contains(&Key::Unicode(c.to_ascii_uppercase()))
            || self.named(&[c.encode_utf8(&mut [0; 4])])
    }

    /// The keys that are not modifiers.
    fn main_keys(&self) -> Vec<Key> {
        self.keys
            .iter()
            .copied()
            .filter(|k| !matches!(k, Key::Control | Key::Alt | Key::Shift | Key::Meta))
            .collect()
    }
}

/// Judges a key press or chord. `focus` says where it goes; `view` gives the selected items
/// and a dialog's text.
pub(super) fn key_effect(keys: &[String], focus: Focus, view: &PlanningView) -> KeyEffect {
    let c = Chord::new(keys);
    let spelled = keys.join("+");
    let mut fx = KeyEffect::default();
    let maybe_terminal = focus == Focus::MaybeTerminal;
    let text_field = matches!(focus, Focus::NotTerminal { text_field: true });
    let (ctrl, alt, shift, meta) = (c.ctrl(), c.alt(), c.shift(), c.meta());
    let f4 = c.has(Key::F4, &["f4"]);
    let delete = c.has(Key::Delete, &["delete", "del"]);
    let backspace = c.has(Key::Backspace, &["backspace"]);
    let close = |what: &str| Need::new(GrantKind::Close, Target::Unknown, what.to_string());

    // Closing: a chord that contains a closing chord closes, whatever else it holds.
    if ((alt || ctrl) && f4) || ((ctrl || meta) && (c.letter('w') || c.letter('q'))) {
        fx.needs.push(close(&format!(
            "closing a window, tab or application ({spelled}), which may discard unsaved work"
        )));
    }
    if ctrl && alt && (delete || backspace) {
        fx.needs.push(Need::new(
            GrantKind::System,
            Target::Unknown,
            format!("restarting or ending the desktop session ({spelled})"),
        ));
    }
    if ctrl && !alt && !shift && c.letter('d') && maybe_terminal {
        fx.needs.push(close(&format!(
            "ending a terminal's shell ({spelled}), which closes its window"
        )));
    }
    if shift && delete && !ctrl && !text_field {
        fx.needs.push(Need::new(
            GrantKind::Delete,
            Target::Unknown,
            format!("deleting the selected items permanently ({spelled})"),
        ));
    } else if delete && !ctrl && !alt && !text_field && list_item_selected(view) {
        fx.needs.push(Need::new(
            GrantKind::Delete,
            Target::Unknown,
            format!("deleting the selected items ({spelled})"),
        ));
    }
    let paste = (ctrl && shift && c.letter('v'))
        || (shift && c.has(Key::Insert, &["insert", "ins"]))
        || (ctrl && !shift && c.letter('v'));
    if paste && maybe_terminal {
        fx.needs.push(Need::new(
            GrantKind::Shell,
            Target::Unknown,
            format!(
                "pasting text the gate never saw ({spelled}) into what may be a terminal, \
                 where a newline in it runs it"
            ),
        ));
    }
    let enter = c.has(Key::Return, &["enter", "return", "kp_enter"]);
    let space = c.has(Key::Space, &["space"]);
    if (enter || space) && !ctrl && !alt && !meta {
        fx.needs.extend(enter_on_focused(view, enter));
    }
    if alt && c.has(Key::Tab, &["tab"])
        || meta && c.main_keys().is_empty()
        || (ctrl && alt && c.letter('t'))
    {
        fx.focus_unknown = true;
    }
    if maybe_terminal {
        fx.edits = line_edits(&c, ctrl, alt, shift, meta);
    }
    fx
}

/// Enter or Space goes to the focused control: a focused "Delete" button is pressed; with
/// nothing focused, Enter presses a dialog's default answer, judged by the dialog's text.
fn enter_on_focused(view: &PlanningView, enter: bool) -> Vec<Need> {
    let focused = view.elements.iter().find(|e| e.state.focused);
    match focused {
        Some(e) if !TEXT_FIELD_ROLES.contains(&e.element_type.as_str()) => {
            let names: Vec<String> = e.label.iter().cloned().collect();
            pressing(&names, view)
        }
        Some(_) => Vec::new(),
        None if enter => {
            let answers: Vec<&PlanningElement> = view
                .elements
                .iter()
                .filter(|e| {
                    e.label.as_deref().is_some_and(|l| {
                        labels::first(l, Use::Confirm).is_some()
                            || labels::first(l, Use::Control).is_some()
                    })
                })
                .collect();
            answers
                .first()
                .and_then(|e| e.label.as_deref())
                .and_then(|l| dialog_commit(l, view))
                .into_iter()
                .collect()
        }
        None => Vec::new(),
    }
}

/// Whether the view shows a selected item of a list (a file, a message, a record).
fn list_item_selected(view: &PlanningView) -> bool {
    view.elements
        .iter()
        .any(|e| e.state.selected && LIST_ITEM_ROLES.contains(&e.element_type.as_str()))
}

/// How a chord changes a terminal's line (readline's keys).
fn line_edits(c: &Chord, ctrl: bool, alt: bool, shift: bool, meta: bool) -> Vec<Edit> {
    let main = c.main_keys();
    if meta {
        return Vec::new();
    }
    if ctrl || alt {
        let letter = |l: char| c.letter(l);
        if ctrl && (letter('j') || letter('m') || letter('o')) {
            return vec![Edit::Submit];
        }
        if ctrl && letter('h') {
            return vec![Edit::Backspace];
        }
        if (ctrl && (letter('a') || letter('e') || letter('b') || letter('f')))
            || (alt && (letter('b') || letter('f')))
        {
            return vec![Edit::CursorMove];
        }
        if ctrl && (letter('c') || letter('u') || letter('k') || letter('l') || letter('z')) {
            // Cleared or killed text stays in the model (see the module docs).
            return Vec::new();
        }
        if main.is_empty() {
            return Vec::new();
        }
        return vec![Edit::Taint(
            "an editing, history or yank key that inserts text the gate cannot see",
        )];
    }
    let mut edits = Vec::new();
    for key in main {
        match key {
            Key::Return => edits.push(Edit::Submit),
            Key::Space => edits.push(Edit::Text(" ".into())),
            Key::Unicode(ch) => {
                let ch = if shift { ch.to_ascii_uppercase() } else { ch };
                if shift && !ch.is_ascii_alphabetic() {
                    edits.push(Edit::Taint(
                        "a shifted key whose character depends on the layout",
                    ));
                } else {
                    edits.push(Edit::Text(ch.to_string()));
                }
            }
            Key::Backspace => edits.push(Edit::Backspace),
            Key::Delete => edits.push(Edit::DeleteForward),
            Key::LeftArrow | Key::RightArrow | Key::Home | Key::End => edits.push(Edit::CursorMove),
            Key::Tab => edits.push(Edit::Taint("a Tab completion")),
            Key::UpArrow | Key::DownArrow | Key::PageUp | Key::PageDown => {
                edits.push(Edit::Taint("a line recalled from the history"))
            }
            _ => {}
        }
    }
    edits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(spec: &str) -> Vec<String> {
        vec![spec.to_string()]
    }

    #[test]
    fn closing_chords_are_found_inside_larger_chords() {
        let view = crate::view::empty_view("");
        for chord in [
            "alt+f4",
            "alt+f4+x",
            "ctrl+w+a",
            "q+ctrl",
            "super+q",
            "ctrl+F4",
            "ctrl+shift+w",
        ] {
            let fx = key_effect(&keys(chord), Focus::MaybeTerminal, &view);
            assert!(
                fx.needs.iter().any(|n| n.kind == GrantKind::Close),
                "{chord}"
            );
        }
        for chord in ["ctrl+s", "alt+tab", "ctrl+a", "f4", "ctrl+shift+t"] {
            let fx = key_effect(&keys(chord), Focus::MaybeTerminal, &view);
            assert!(fx.needs.is_empty(), "{chord}");
        }
    }

    #[test]
    fn a_text_field_of_a_terminal_or_an_ide_may_still_reach_a_shell() {
        let mut view = crate::view::empty_view("");
        let text = Some("text");
        assert_eq!(
            Focus::of_element(text, &["Subject".into()], &view),
            Focus::NotTerminal { text_field: true }
        );
        assert_eq!(
            Focus::of_element(text, &["Terminal 1, bash".into()], &view),
            Focus::MaybeTerminal
        );
        assert_eq!(
            Focus::of_element(Some("terminal"), &[], &view),
            Focus::MaybeTerminal
        );
        view.screen.active_app = "Code".into();
        assert_eq!(
            Focus::of_element(text, &["Subject".into()], &view),
            Focus::MaybeTerminal
        );
    }

    #[test]
    fn ctrl_d_closes_a_terminal_but_not_a_text_field() {
        let view = crate::view::empty_view("");
        let in_terminal = key_effect(&keys("ctrl+d"), Focus::MaybeTerminal, &view);
        assert!(in_terminal.needs.iter().any(|n| n.kind == GrantKind::Close));
        let in_field = key_effect(
            &keys("ctrl+d"),
            Focus::NotTerminal { text_field: true },
            &view,
        );
        assert!(in_field.needs.is_empty());
    }
}
