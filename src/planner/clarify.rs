//! The clarify rule: a courtesy question before any model runs, when the goal's object
//! cannot be resolved — a bare pronoun ("delete it", "open that", "send them") with nothing
//! focused or selected in the view to refer to. The question names the act when the goal
//! orders one of [`DESTRUCTIVE_VERBS`] ("Which item should I delete?").
//!
//! Permission is not asked here. A destructive goal ("Delete old.txt", "Wire 2000 euros",
//! "Lösche den Ordner") goes on to the planner, and the runner's gate lets each destructive
//! step run only under a grant the user gave outside the goal (`--allow`), or an approval of
//! that step (`--confirm`); its refusal names the exact grant, which is the better question
//! ("deleting ~/old.txt needs the user's permission (--allow delete:~/old.txt)"). So nothing
//! in a goal's wording — "I confirm", "confirmed", "without asking" — changes what the rule
//! or the gate decides, and a goal that cannot be worded past a list of verbs needs no such
//! list. (The rule used to refuse destructive goals without "I confirm"; "confirm before any
//! deletion" then counted as a confirmation.)
//!
//! The goal is read through [`crate::text_norm::normalize`] first (NFKC, look-alike letters
//! folded, invisible characters dropped, lower case). Judgement calls, chosen and tested:
//! "that"/"this" followed by a noun is a determiner, not a pronoun ("click that button");
//! "what is this?" asks about the screen and acts on nothing. Pronouns are recognised in
//! English only.

use cel_contracts::PlanningView;

use crate::text_norm::normalize;

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

/// The question to ask instead of acting, or `None` when the goal can be attempted: only
/// when its object is a bare pronoun and the view has nothing focused or selected.
pub fn clarify_question(goal: &str, view: &PlanningView) -> Option<String> {
    let normalized = normalize(goal);
    let words = tokens(&normalized);
    if !dangling_pronoun(&words) || view_has_referent(view) {
        return None;
    }
    Some(match destructive_command(&words) {
        Some(verb) => {
            format!("Which item should I {verb}? Nothing on screen is selected; please name it.")
        }
        None => "What does the goal refer to? Nothing on screen is selected or focused; \
                 please name the item."
            .to_string(),
    })
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
    fn goals_whose_object_is_a_bare_pronoun_ask_first() {
        for goal in [
            "Delete it",
            "open that",
            "Move it to the trash",
            "rename this",
            "Send them to Bob",
            "Delete it, I confirm",
            "D\u{0435}lete it",
        ] {
            assert!(clarify_question(goal, &view(false)).is_some(), "{goal}");
        }
    }

    #[test]
    fn destructive_goals_go_on_to_the_planner_whatever_their_wording() {
        // Permission is the gate's business, by grant; the goal's wording asks nothing here.
        for goal in [
            "Delete old.txt",
            "Delete old.txt, I confirm",
            "Clean up ~/tmp, but confirm before any deletion",
            "Get rid of all the files in Downloads",
            "Wire 2000 euros to this IBAN",
            "Lösche alle Dateien im Ordner Downloads",
            "Supprime le dossier Documents",
            "删除下载文件夹中的所有文件",
            "Open the Delete dialog help page",
            "Click that button",
            "What is this?",
            "Scroll down to the Format menu",
        ] {
            assert_eq!(clarify_question(goal, &view(false)), None, "{goal}");
        }
    }

    #[test]
    fn a_selected_element_resolves_the_pronoun() {
        assert_eq!(clarify_question("Open it", &view(true)), None);
        assert_eq!(clarify_question("Delete it", &view(true)), None);
    }

    #[test]
    fn the_question_names_the_act() {
        let q = clarify_question("Send it to Bob", &view(false)).unwrap_or_default();
        assert!(q.contains("send"), "{q}");
    }
}
