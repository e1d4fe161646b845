//! The clarify rule: goals the planner refuses to act on without asking first.
//!
//! Two rules, checked before any model runs (so they cost nothing and cannot be talked out
//! of by a small model):
//!
//! 1. **Destructive without confirmation.** The goal orders a destructive act — one of
//!    [`DESTRUCTIVE_VERBS`] used as a command (at the start of the goal or of a clause, or
//!    after "please", "to", "and", "then") — and its text carries none of
//!    [`CONFIRMATIONS`]. "Delete old.txt" asks; "Delete old.txt, I confirm" acts.
//! 2. **Unresolved referent.** The goal's object is a bare pronoun ("delete it", "open
//!    that", "send them") and the view has no focused or selected element it could mean.
//!
//! Judgement calls, chosen and tested: a destructive word used as a name is not an order
//! ("open the Delete dialog help page", "read the Send button's tooltip" act normally);
//! "that"/"this" followed by a noun is a determiner, not a pronoun ("click that button").

use cel_contracts::PlanningView;

/// Verbs that order a destructive or irreversible act.
pub const DESTRUCTIVE_VERBS: [&str; 14] = [
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
    "discard",
];

/// Phrases that count as the user's explicit confirmation.
pub const CONFIRMATIONS: [&str; 7] = [
    "i confirm",
    "confirmed",
    "yes, ",
    "without asking",
    "no need to ask",
    "don't ask",
    "do not ask",
];

/// Words after which a destructive verb is a command, not a name ("to" is handled apart).
const CLAUSE_OPENERS: [&str; 6] = ["please", "and", "then", "also", "now", "just"];

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
    let lower = goal.to_lowercase();
    let words = tokens(&lower);
    let destructive = destructive_command(&words);
    let confirmed = CONFIRMATIONS.iter().any(|c| lower.contains(c));
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
                out.push(Token::Word(&text[s..i]));
                start = None;
            }
            _ => {}
        }
        if matches!(c, ',' | ';' | '.' | ':' | '!' | '?' | '\n') {
            out.push(Token::Boundary);
        }
    }
    if let Some(s) = start {
        out.push(Token::Word(&text[s..]));
    }
    out
}

/// The destructive verb the goal uses as a command, if any.
fn destructive_command(words: &[Token<'_>]) -> Option<&'static str> {
    words.iter().enumerate().find_map(|(i, token)| {
        let Token::Word(word) = token else {
            return None;
        };
        let verb = DESTRUCTIVE_VERBS.iter().find(|v| *v == word)?;
        let commanded = match i.checked_sub(1).map(|j| &words[j]) {
            None | Some(Token::Boundary) => true,
            // "how to remove a user" asks about the act; "go there to remove it" orders it.
            Some(Token::Word("to")) => !matches!(
                i.checked_sub(2).map(|j| &words[j]),
                Some(Token::Word(w)) if QUESTION_WORDS.contains(w)
            ),
            Some(Token::Word(prev)) => CLAUSE_OPENERS.contains(prev),
        };
        commanded.then_some(*verb)
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
