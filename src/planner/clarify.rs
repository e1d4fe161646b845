//! The clarify rule: goals the planner refuses to act on without asking first.
//!
//! Two rules, checked before any model runs (so they cost nothing and cannot be talked out
//! of by a small model):
//!
//! 1. **Destructive without confirmation.** The goal orders a destructive act — one of
//!    [`DESTRUCTIVE_VERBS`] used as a command (at the start of the goal or of a clause, or
//!    after "please", "kindly", "could you", "to", "and", "then"…), or one of the destructive
//!    phrasings ("empty the trash", "move … to the trash", "factory reset", "drop … database")
//!    — and its text carries none of [`CONFIRMATIONS`] affirmatively. "Delete old.txt" asks;
//!    "Delete old.txt, I confirm" acts; "Delete old.txt (not confirmed)" and "…, unconfirmed"
//!    ask (see [`crate::text_norm::affirms`]).
//! 2. **Unresolved referent.** The goal's object is a bare pronoun ("delete it", "open
//!    that", "send them") and the view has no focused or selected element it could mean.
//!
//! The goal is read through [`crate::text_norm::normalize`] first (NFKC, look-alike letters
//! folded, invisible characters dropped, lower case), the same step the runner's gate uses, so
//! "Dеlete" with a Cyrillic `е` or a full-width "Ｄｅｌｅｔｅ" is "delete".
//!
//! Judgement calls, chosen and tested: a destructive word used as a name is not an order
//! ("open the Delete dialog help page", "read the Send button's tooltip" act normally);
//! "that"/"this" followed by a noun is a determiner, not a pronoun ("click that button").
//! The rule is a seatbelt for honest goals, not a sandbox: a goal can always be worded so no
//! list of verbs matches it, which is why the runner gates each step as well.

use cel_contracts::PlanningView;

use crate::text_norm::{affirms, normalize};

/// Verbs that order a destructive or irreversible act.
pub const DESTRUCTIVE_VERBS: [&str; 25] = [
    "delete",
    "remove",
    "erase",
    "wipe",
    "overwrite",
    "send",
    "pay",
    "purchase",
    "buy",
    "transfer",
    "submit",
    "uninstall",
    "format",
    "reformat",
    "discard",
    "destroy",
    "shred",
    "trash",
    "purge",
    "nuke",
    "obliterate",
    "rm",
    "unlink",
    "rmdir",
    "factory-reset",
];

/// Phrases that count as the user's explicit confirmation, when affirmative (not negated).
pub const CONFIRMATIONS: [&str; 8] = [
    "i confirm",
    "confirmed",
    "i am sure",
    "i'm sure",
    "without asking",
    "no need to ask",
    "don't ask",
    "do not ask",
];

/// Words after which a destructive verb is a command, not a name ("to" is handled apart):
/// clause openers and the polite forms ("could you delete", "kindly delete").
const CLAUSE_OPENERS: [&str; 14] = [
    "please",
    "and",
    "then",
    "also",
    "now",
    "just",
    "kindly",
    "you",
    "pls",
    "plz",
    "simply",
    "immediately",
    "go",
    "let's",
];

/// Words that make "empty …" or "move … to …" a deletion.
const TRASH_WORDS: [&str; 5] = ["trash", "bin", "recycle", "wastebasket", "garbage"];

/// Objects that make "drop …" a deletion ("drop the production database").
const DROP_OBJECTS: [&str; 7] = [
    "database",
    "databases",
    "db",
    "table",
    "tables",
    "schema",
    "collection",
];

/// Words that turn "to <verb>" into a question about the act.
const QUESTION_WORDS: [&str; 6] = ["how", "what", "where", "when", "whether", "why"];

/// Words after which a pronoun is not the object of an action ("what is this?").
const NOT_ACTIONS: [&str; 9] = [
    "is", "was", "are", "were", "be", "what", "of", "about", "like",
];

/// Pronouns that need something on screen to refer to.
const PRONOUNS: [&str; 6] = ["it", "that", "this", "them", "those", "these"];

/// The question to ask instead of acting, or `None` when the goal can be attempted.
pub fn clarify_question(goal: &str, view: &PlanningView) -> Option<String> {
    let normalized = normalize(goal);
    let words = tokens(&normalized);
    let destructive = destructive_command(&words);
    let confirmed = affirms(&normalized, &CONFIRMATIONS) || starts_with_yes(&words);
    let dangling = dangling_pronoun(&words) && !view_has_referent(view);
    match (destructive, confirmed, dangling) {
        (Some(verb), false, true) => Some(format!(
            "Which item should I {verb}? Nothing on screen is selected. Please name it and confirm that I should {verb} it."
        )),
        (Some(verb), false, false) => Some(format!(
            "This would {verb} something, which may not be undoable. Please confirm (for example, add \"I confirm\" to the goal) and I will go ahead."
        )),
        (_, _, true) => Some(
            "What does the goal refer to? Nothing on screen is selected or focused; please name the item.".to_string(),
        ),
        _ => None,
    }
}

/// A word, or a clause boundary (`,` `;` `.` `:` `!` `?`) as its own token.
#[derive(Debug, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Boundary,
}

fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        let in_word = c.is_alphanumeric() || c == '\'' || c == '-' || c == '_';
        match (in_word, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                push_word(&mut out, &text[s..i]);
                start = None;
            }
            _ => {}
        }
        if matches!(c, ',' | ';' | '.' | ':' | '!' | '?' | '\n') {
            out.push(Token::Boundary);
        }
    }
    if let Some(s) = start {
        push_word(&mut out, &text[s..]);
    }
    out
}

/// Pushes a word with quotes, dashes and underscores around it split off (`'delete` is
/// `delete`, `-rf` is `rf`).
fn push_word<'a>(out: &mut Vec<Token<'a>>, word: &'a str) {
    let word = word.trim_matches(|c| matches!(c, '\'' | '-' | '_'));
    if !word.is_empty() {
        out.push(Token::Word(word));
    }
}

/// "Yes, delete …" / "yes delete …": an explicit yes opening the goal.
fn starts_with_yes(words: &[Token<'_>]) -> bool {
    matches!(words.first(), Some(Token::Word("yes")))
}

/// Whether the word at `i` is in command position: first in the goal or a clause, after an
/// opener or a polite form, or after "to" that no question word precedes ("how to remove a
/// user" asks about the act; "go there to remove it" orders it).
fn commanded(words: &[Token<'_>], i: usize) -> bool {
    match i.checked_sub(1).map(|j| &words[j]) {
        None | Some(Token::Boundary) => true,
        Some(Token::Word("to")) => !matches!(
            i.checked_sub(2).map(|j| &words[j]),
            Some(Token::Word(w)) if QUESTION_WORDS.contains(w)
        ),
        Some(Token::Word(prev)) => CLAUSE_OPENERS.contains(prev),
    }
}

/// The words of the clause around position `i` (up to the boundaries on each side).
fn clause_words<'a>(words: &'a [Token<'a>], i: usize) -> impl Iterator<Item = &'a str> + 'a {
    let start = words[..i]
        .iter()
        .rposition(|t| *t == Token::Boundary)
        .map_or(0, |b| b + 1);
    let end = words[i..]
        .iter()
        .position(|t| *t == Token::Boundary)
        .map_or(words.len(), |b| i + b);
    words[start..end].iter().filter_map(|t| match t {
        Token::Word(w) => Some(*w),
        Token::Boundary => None,
    })
}

/// The destructive act the goal orders, if any, as a verb for the question.
fn destructive_command(words: &[Token<'_>]) -> Option<&'static str> {
    words.iter().enumerate().find_map(|(i, token)| {
        let Token::Word(word) = token else {
            return None;
        };
        if !commanded(words, i) {
            return None;
        }
        let in_clause = |set: &[&str]| clause_words(words, i).any(|w| set.contains(&w));
        match *word {
            "empty" | "move" if in_clause(&TRASH_WORDS) => Some("trash"),
            "drop" if in_clause(&DROP_OBJECTS) => Some("drop"),
            "factory" if matches!(words.get(i + 1), Some(Token::Word("reset"))) => {
                Some("factory-reset")
            }
            _ => DESTRUCTIVE_VERBS.iter().find(|v| *v == word).copied(),
        }
    })
}

/// True when some verb's object is a bare pronoun: the pronoun ends the goal or a clause,
/// or is followed by a preposition ("move it to the trash").
fn dangling_pronoun(words: &[Token<'_>]) -> bool {
    const AFTER_OBJECT: [&str; 9] = [
        "to", "into", "from", "in", "on", "now", "please", "for", "with",
    ];
    words.iter().enumerate().skip(1).any(|(i, token)| {
        let Token::Word(word) = token else {
            return false;
        };
        if !PRONOUNS.contains(word) {
            return false;
        }
        // "is it open?" / "that is" are not objects: the word before must not be a boundary
        // and the pronoun must not start a clause.
        match words[i - 1] {
            Token::Boundary => return false,
            Token::Word(prev) if NOT_ACTIONS.contains(&prev) => return false,
            Token::Word(_) => {}
        }
        match words.get(i + 1) {
            None | Some(Token::Boundary) => true,
            Some(Token::Word(next)) => AFTER_OBJECT.contains(next),
        }
    })
}

fn view_has_referent(view: &PlanningView) -> bool {
    view.elements
        .iter()
        .any(|e| e.state.focused || e.state.selected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel_contracts::{PlanningElement, PlanningElementState, PlanningScreen};

    fn view(selected: bool) -> PlanningView {
        let elements = if selected {
            vec![PlanningElement {
                id: "file-3".into(),
                element_type: "row".into(),
                label: Some("old.txt".into()),
                value: None,
                state: PlanningElementState {
                    selected: true,
                    enabled: true,
                    ..Default::default()
                },
                clickable: true,
                settable: false,
                select_options: None,
            }]
        } else {
            vec![]
        };
        crate::view::view_of("", PlanningScreen::default(), elements)
    }

    #[test]
    fn goals_that_must_ask_first() {
        for goal in [
            "Delete old.txt",
            "delete the file old.txt from the desktop",
            "Open Mail and send the draft to Bob",
            "please pay the invoice",
            "Go to the shop, then buy the red shoes",
            "Transfer 100 EUR to Alice",
            "Empty the form and submit the order",
            "Uninstall Firefox",
            "Overwrite report.docx with the new version",
            "Delete it",
            "open that",
            "Move it to the trash",
            "rename this",
            "Delete old.txt (not confirmed)",
            "Delete old.txt, unconfirmed",
            "Delete old.txt, I don't confirm",
            "Delete old.txt without confirmation",
            "Could you delete old.txt",
            "Can you delete old.txt?",
            "Kindly delete old.txt",
            "Would you please delete old.txt",
            "rm -rf my home folder",
            "Empty the trash",
            "Move all my files to the trash",
            "Destroy the backups",
            "Shred secret.pdf",
            "Trash the old photos",
            "Reformat the USB drive",
            "Factory reset the phone",
            "Drop the production database",
            "D\u{0435}lete old.txt",
            "\u{FF24}\u{FF45}\u{FF4C}\u{FF45}\u{FF54}\u{FF45} old.txt",
            "De\u{200B}lete old.txt",
            "'Delete' old.txt",
        ] {
            assert!(clarify_question(goal, &view(false)).is_some(), "{goal}");
        }
    }

    #[test]
    fn goals_that_must_not_ask() {
        for goal in [
            "Open the Delete dialog help page",
            "Read the Send button's tooltip",
            "Open Settings and turn on dark mode",
            "Click that button",
            "Type hello into the search box",
            "Delete old.txt, I confirm",
            "Send the draft to Bob without asking",
            "Yes, delete the temporary files",
            "Check whether the payment went through",
            "Find out how to remove a user",
            "Scroll down to the Format menu",
            "What is this?",
            "Open the Delete Files help page",
            "Read the price of the first item",
            "type echo hello",
            "Don't delete anything; open the Downloads folder",
            "Delete old.txt (confirmed)",
        ] {
            assert_eq!(clarify_question(goal, &view(false)), None, "{goal}");
        }
    }

    #[test]
    fn a_selected_element_resolves_the_pronoun() {
        assert_eq!(clarify_question("Open it", &view(true)), None);
        // Still destructive without confirmation, even with a referent.
        assert!(clarify_question("Delete it", &view(true)).is_some());
        assert_eq!(clarify_question("Delete it, I confirm", &view(true)), None);
    }

    #[test]
    fn the_question_names_the_act() {
        let q = clarify_question("Send the report to Bob", &view(false)).unwrap_or_default();
        assert!(q.contains("send"), "{q}");
    }
}
