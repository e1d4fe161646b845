//! One text normalization for every safety judgement on words: the planner's clarify rule and
//! the runner's destructive-step gate read goals, labels and typed text through [`normalize`],
//! so a spelling that looks like "Delete" to a person is "delete" to both.
//!
//! The steps, in order:
//! 1. Unicode NFKC: full-width letters (`Ｄｅｌｅｔｅ`), ligatures and other compatibility forms
//!    become their plain letters.
//! 2. Invisible characters are dropped: zero-width spaces and joiners, the word joiner, the
//!    byte-order mark, soft hyphens, bidirectional controls.
//! 3. Confusables are folded: Cyrillic and Greek letters that look like Latin ones (`Dеlеtе`
//!    with Cyrillic `е`) become the Latin letter. The table covers the look-alikes of the
//!    26 Latin letters in those two scripts; it is not Unicode's full confusables list.
//! 4. Typographic quotes and dashes become ASCII (`’` → `'`, `–` → `-`).
//! 5. Lower case (Unicode `to_lowercase`, a full case fold for the Latin letters we judge).
//!
//! [`words`] then splits the result into words, splitting punctuation and quotes off them
//! (`'Delete` and `"delete"` are the word `delete`). [`affirms`] finds an affirmative phrase
//! that no negation governs.

use unicode_normalization::UnicodeNormalization;

/// Characters that render as nothing (or almost nothing) and would split a word unseen.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}' // soft hyphen
            | '\u{034F}' // combining grapheme joiner
            | '\u{061C}' // Arabic letter mark
            | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' // Hangul fillers
            | '\u{180E}' // Mongolian vowel separator
            | '\u{200B}'..='\u{200F}' // zero-width space, joiners, LRM/RLM
            | '\u{202A}'..='\u{202E}' // bidi embeddings and overrides
            | '\u{2060}'..='\u{2064}' // word joiner, invisible operators
            | '\u{2066}'..='\u{206F}' // bidi isolates, deprecated format chars
            | '\u{FE00}'..='\u{FE0F}' // variation selectors
            | '\u{FEFF}' // byte-order mark / zero-width no-break space
    )
}

/// The Latin letter a Cyrillic or Greek look-alike stands for (after lower-casing or not:
/// both cases are listed), or `None`.
fn confusable_latin(c: char) -> Option<char> {
    Some(match c {
        // Cyrillic
        'а' | 'А' => 'a',
        'в' | 'В' => 'b',
        'с' | 'С' | 'ϲ' | 'Ϲ' => 'c',
        'ԁ' => 'd',
        'е' | 'Е' | 'ё' | 'Ё' => 'e',
        'һ' | 'Һ' | 'н' | 'Н' => 'h',
        'і' | 'І' | 'ӏ' | 'Ӏ' => 'i',
        'ј' | 'Ј' => 'j',
        'к' | 'К' => 'k',
        'м' | 'М' => 'm',
        'о' | 'О' => 'o',
        'р' | 'Р' => 'p',
        'ԛ' | 'Ԛ' => 'q',
        'г' => 'r',
        'ѕ' | 'Ѕ' => 's',
        'т' | 'Т' => 't',
        'ц' => 'u',
        'ѵ' | 'Ѵ' => 'v',
        'ԝ' | 'Ԝ' | 'ш' => 'w',
        'х' | 'Х' => 'x',
        'у' | 'У' | 'ү' | 'Ү' => 'y',
        // Greek
        'α' | 'Α' => 'a',
        'β' | 'Β' => 'b',
        'ε' | 'Ε' => 'e',
        'η' | 'Η' => 'h',
        'ι' | 'Ι' => 'i',
        'κ' | 'Κ' => 'k',
        'μ' | 'Μ' => 'm',
        'ν' | 'Ν' => 'v',
        'ο' | 'Ο' | 'σ' => 'o',
        'ρ' | 'Ρ' => 'p',
        'τ' | 'Τ' => 't',
        'υ' | 'Υ' => 'u',
        'χ' | 'Χ' => 'x',
        'γ' => 'y',
        'ζ' | 'Ζ' => 'z',
        // Latin look-alikes outside ASCII
        'ı' => 'i',
        'ſ' => 's',
        _ => return None,
    })
}

/// Typographic punctuation that stands for an ASCII one.
fn ascii_punctuation(c: char) -> Option<char> {
    Some(match c {
        '‘' | '’' | '‚' | '‛' | '′' | 'ʼ' | '´' => '\'',
        '“' | '”' | '„' | '‟' | '″' | '«' | '»' => '"',
        '‐' | '‑' | '‒' | '–' | '—' | '―' | '−' => '-',
        _ => return None,
    })
}

/// NFKC, invisible characters removed, confusables folded, quotes and dashes made ASCII,
/// lower case. See the module docs.
pub fn normalize(text: &str) -> String {
    fold(text).to_lowercase()
}

/// [`normalize`] without the lower-casing, for text where case carries meaning (shell flags:
/// `chmod -R` recurses, `-r` does not). Confusables fold to lower-case Latin letters.
pub fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.nfkc() {
        if is_invisible(c) {
            continue;
        }
        out.push(
            confusable_latin(c)
                .or_else(|| ascii_punctuation(c))
                .unwrap_or(c),
        );
    }
    out
}

/// The words of a normalized text: runs of letters, digits, `_` and inner `'`/`-`
/// ("don't", "factory-reset"); quotes and punctuation around a word are split off.
pub fn words(normalized: &str) -> Vec<&str> {
    normalized
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '\'' | '-' | '_')))
        .map(|w| w.trim_matches(|c| matches!(c, '\'' | '-' | '_')))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Words that negate what follows them within a few words ("not confirmed", "I don't
/// confirm", "without confirmation", "never ask").
const NEGATIONS: &[&str] = &[
    "not", "no", "don't", "dont", "do not", "never", "without", "isn't", "isnt", "aren't",
    "wasn't", "haven't", "hasn't", "didn't", "won't", "cannot", "can't", "nor", "neither",
];

/// How many words before a phrase a negation still governs it ("not yet fully confirmed").
const NEGATION_REACH_WORDS: usize = 3;

/// Whether a normalized text carries one of `phrases` (each a sequence of words, already
/// normalized) affirmatively: the phrase appears as whole words, is not itself prefixed
/// (`unconfirmed`, `nonconfirmed` are different words), and no negation stands within
/// `NEGATION_REACH_WORDS` words before it in the same clause. Phrases that are themselves
/// negative in form ("don't ask") are matched as given and not negated again.
pub fn affirms(normalized: &str, phrases: &[&str]) -> bool {
    for clause in normalized.split(['.', ';', '!', '?', '\n', ',', '(', ')']) {
        let ws = words(clause);
        for phrase in phrases {
            let pw: Vec<&str> = words(phrase);
            if pw.is_empty() || pw.len() > ws.len() {
                continue;
            }
            for start in 0..=ws.len() - pw.len() {
                if ws[start..start + pw.len()] != pw[..] {
                    continue;
                }
                let from = start.saturating_sub(NEGATION_REACH_WORDS);
                let window = &ws[from..start];
                let negated = window.iter().enumerate().any(|(i, w)| {
                    NEGATIONS.contains(w) || (*w == "do" && window.get(i + 1) == Some(&"not"))
                });
                if !negated {
                    return true;
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn look_alike_spellings_normalize_to_plain_latin() {
        for s in [
            "Delete",
            "Dеlеtе",       // Cyrillic е
            "Ｄｅｌｅｔｅ", // full width
            "De\u{200B}lete",
            "Del\u{00AD}ete",
            "DΕLΕΤΕ", // Greek capitals
        ] {
            assert_eq!(normalize(s), "delete", "{s:?}");
        }
    }

    #[test]
    fn words_split_quotes_and_punctuation_off() {
        let n = normalize("'Delete\" the “file”, don't!");
        assert_eq!(words(&n), vec!["delete", "the", "file", "don't"]);
    }

    #[test]
    fn confirmation_must_be_affirmative() {
        let phrases = ["confirmed", "i confirm", "confirm"];
        for yes in [
            "delete old.txt, confirmed",
            "I confirm the deletion",
            "delete it (confirmed)",
        ] {
            assert!(affirms(&normalize(yes), &phrases), "{yes}");
        }
        for no in [
            "Delete old.txt (not confirmed)",
            "delete old.txt, unconfirmed",
            "I don't confirm",
            "I do not confirm this",
            "delete without confirmation",
            "never confirmed",
            "it is not yet confirmed",
        ] {
            assert!(!affirms(&normalize(no), &phrases), "{no}");
        }
    }
}
