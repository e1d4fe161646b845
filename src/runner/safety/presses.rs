//! What a click or a key chord presses: a control labelled with an irreversible commitment
//! (Delete, Pay, Send, …), judged by its real accessible name when the screen gives one, or a
//! chord that closes a window or deletes permanently.

use cel_contracts::PlanningView;
use enigo::Key;

use super::DestructiveKind;
use crate::moves::parse_point;
use crate::runner::elements::ElementFacts;
use crate::runner::input::{parse_key_chord, parse_key_combo};
use crate::text_norm::{normalize, words};

/// Label words that commit to something irreversible when clicked.
const COMMIT_WORDS: &[&str] = &[
    "delete",
    "remove",
    "erase",
    "discard",
    "pay",
    "send",
    "buy",
    "purchase",
    "checkout",
    "transfer",
    "uninstall",
    "wipe",
    "format",
];

/// Multi-word labels with the same effect.
const COMMIT_PHRASES: &[&str] = &[
    "don't save",
    "dont save",
    "do not save",
    "place order",
    "check out",
    "empty trash",
    "confirm payment",
    "submit payment",
];

/// Whether a text — a control's accessible name, a label, a click's purpose — names an
/// irreversible commitment (Delete, Pay, Send, "Don't save", …), judged after [`normalize`]
/// (look-alike letters, full-width forms, invisible characters, quotes around the word).
/// Returns the word or phrase found. The runner's gate uses it for every click; callers that
/// know the real element name judge that name with it too.
pub fn destructive_text(text: &str) -> Option<String> {
    commit_word_in(text)
}

/// What a coordinate click with no description is called in a refusal.
const UNDESCRIBED_POINT_CLICK: &str = "an undescribed point";

/// For a click: the element's real accessible name (`seen`), its label and value from the
/// view; for an `xy:` point, the name of the element under it and the step's purpose (the
/// planner's own description of what it clicks), else the batch's purpose. A point click with
/// no element name under it and no words in either purpose is refused: nothing says what it
/// presses, so the gate cannot tell a Delete button from a blank spot, and the planner can
/// always describe a click (rule chosen so an empty purpose is never a way around the gate).
pub(super) fn click_trigger(
    target_id: &str,
    purpose: &str,
    batch_purpose: &str,
    view: &PlanningView,
    seen: &dyn Fn(&str) -> Option<ElementFacts>,
) -> Option<(DestructiveKind, String)> {
    let seen_name = seen(target_id).map(|f| f.name);
    let mut texts: Vec<&str> = Vec::new();
    texts.extend(seen_name.as_deref());
    if let Some(el) = view.elements.iter().find(|e| e.id == target_id) {
        texts.extend(el.label.as_deref());
        texts.extend(el.value.as_deref());
    }
    if parse_point(target_id).is_some() {
        let described = |t: &str| !words(&normalize(t)).is_empty();
        if described(purpose) {
            texts.push(purpose);
        } else if described(batch_purpose) {
            texts.push(batch_purpose);
        } else if seen_name.is_none() {
            return Some((
                DestructiveKind::Commits,
                UNDESCRIBED_POINT_CLICK.to_string(),
            ));
        }
    }
    texts
        .into_iter()
        .find_map(commit_word_in)
        .map(|w| (DestructiveKind::Commits, w))
}

/// The commit word or phrase in a label, matched on whole words, case-insensitively.
fn commit_word_in(label: &str) -> Option<String> {
    let normalized = normalize(label);
    let words = words(&normalized);
    let joined = format!(" {} ", words.join(" "));
    if let Some(p) = COMMIT_PHRASES
        .iter()
        .find(|p| joined.contains(&format!(" {p} ")))
    {
        return Some(p.to_string());
    }
    COMMIT_WORDS
        .iter()
        .find(|w| words.contains(w))
        .map(|w| w.to_string())
}

/// A chord that closes a window or quits (Alt+F4, Ctrl/Super+W, Ctrl/Super+Q) or deletes
/// permanently (Shift+Delete). A chord counts when it CONTAINS such a combination, whatever
/// else it holds and in whatever order (`alt+f4+x`, `ctrl+w+a`, `q+ctrl`): pressing the extra
/// key does not stop the close. A chord the input layer cannot parse is judged by its key
/// names, so a misspelling is not a way around the gate.
pub(super) fn chord_trigger(keys: &[String]) -> Option<(DestructiveKind, String)> {
    let spelled = keys.join("+");
    let parsed = parse_key_combo(keys)
        .ok()
        .or_else(|| parse_key_chord(&spelled).ok());
    let names: Vec<String> = keys
        .iter()
        .flat_map(|k| k.split(['+', ' ']))
        .map(|n| normalize(n.trim()))
        .filter(|n| !n.is_empty())
        .collect();
    let named = |set: &[&str]| names.iter().any(|n| set.contains(&n.as_str()));
    let pressed =
        |k: Key, set: &[&str]| parsed.as_ref().is_some_and(|p| p.contains(&k)) || named(set);
    let alt = pressed(Key::Alt, &["alt", "option", "alt_l", "alt_r"]);
    let f4 = pressed(Key::F4, &["f4"]);
    let ctrl_or_super = pressed(Key::Control, &["ctrl", "control", "ctrl_l", "ctrl_r"])
        || pressed(
            Key::Meta,
            &["super", "meta", "cmd", "command", "win", "windows", "logo"],
        );
    let letter = |c: char| {
        parsed.as_ref().is_some_and(|p| {
            p.contains(&Key::Unicode(c)) || p.contains(&Key::Unicode(c.to_ascii_uppercase()))
        }) || named(&[c.encode_utf8(&mut [0; 4])])
    };
    if (alt && f4) || (ctrl_or_super && (letter('w') || letter('q'))) {
        return Some((DestructiveKind::ClosesWithoutSaving, spelled));
    }
    let shift = pressed(Key::Shift, &["shift", "shift_l", "shift_r"]);
    if shift && pressed(Key::Delete, &["delete", "del"]) {
        return Some((DestructiveKind::Deletes, spelled));
    }
    None
}
