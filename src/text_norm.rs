//! One text normalization for every judgement on words a person reads: the planner's clarify
//! rule reads goals, and the runner's gate reads control labels and dialog text, through
//! [`normalize`], so a spelling that looks like "Delete" to a person is "delete" to both.
//! (Typed command lines are not normalized: a shell runs the bytes typed, and `rm` spelt with
//! a Cyrillic `м` is a different, missing command.)
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
//! (`'Delete` and `"delete"` are the word `delete`).

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

/// [`normalize`] without the lower-casing. Confusables fold to lower-case Latin letters.
fn fold(text: &str) -> String {
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
}
