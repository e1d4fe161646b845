//! The canonical tokenization of ASCII text for Qwen's tokenizer, without the tokenizer's
//! pre-tokenizing regex.
//!
//! llguidance tokenizes the bytes a grammar forces (`","action":{"type":"`, …), joined to
//! the token sampled before them, at every commit that forces a run, on the critical path
//! of the decode. The tokenizer splits text with its pre-tokenizer's regular expression
//! (fancy-regex, a backtracking engine) before its byte-level BPE: after a CPU pass has
//! streamed the weights through the caches, one such call on a new dozen-byte string took
//! 80–170 µs on a 2-core AMD EPYC VM, most of a commit. Forced bytes are the grammar's
//! literals, ASCII; over ASCII the expression's classes (`\p{L}`, `\p{N}`, `\s`) are a few
//! byte ranges, so [`AsciiSplit`] splits by hand, exactly as the expression does, and
//! hands each piece to the tokenizer's own BPE model (its merges, its word cache).
//!
//! It applies only where the tokenizer's pipeline is that one ([`AsciiSplit::for_tokenizer`]:
//! NFC or no normalizer, Qwen2's split expression then byte-level mapping, no truncation or
//! padding; the model's own `tokenize` gets the pieces, as in the pipeline), and only to text
//! of printable ASCII, tab, line feed and carriage return holding no added token; everything
//! else goes to the tokenizer as before. Differential tests hold it to the tokenizer on
//! generated text, for `tokenizer.json` and for the tokenizer assembled from a GGUF.

use std::collections::HashMap;

use tokenizers::models::ModelWrapper;
use tokenizers::{Model, Tokenizer};
use toktrie::TokenId;

use super::byte_level::byte_level_decoder;
use crate::tokenizer::QWEN2_PATTERN;

/// Splits ASCII text as Qwen's pre-tokenizer does and tokenizes the pieces with the
/// tokenizer's BPE (see the module).
pub(super) struct AsciiSplit {
    /// The added tokens' texts: text holding one goes to the tokenizer.
    added: Vec<String>,
    /// Byte-level BPE's character for each byte.
    chars: [char; 256],
}

impl AsciiSplit {
    /// The fast path for `tokenizer`, if its pipeline is the one this reproduces.
    pub(super) fn for_tokenizer(tokenizer: &Tokenizer) -> Option<Self> {
        let normalizer = serde_json::to_value(tokenizer.get_normalizer()).ok()?;
        if !(normalizer.is_null() || normalizer.get("type")?.as_str()? == "NFC") {
            return None;
        }
        let pre = serde_json::to_value(tokenizer.get_pre_tokenizer()?).ok()?;
        let steps = pre.get("pretokenizers")?.as_array()?;
        let [split, bytes] = steps.as_slice() else {
            return None;
        };
        let split_ok = split.get("type")?.as_str()? == "Split"
            && split.get("pattern")?.get("Regex")?.as_str()? == QWEN2_PATTERN
            && split.get("behavior")?.as_str()? == "Isolated"
            && !split.get("invert")?.as_bool()?;
        let bytes_ok = bytes.get("type")?.as_str()? == "ByteLevel"
            && !bytes.get("add_prefix_space")?.as_bool()?
            && !bytes.get("use_regex")?.as_bool()?;
        let plain = tokenizer.get_truncation().is_none() && tokenizer.get_padding().is_none();
        if !(pre.get("type")?.as_str()? == "Sequence" && split_ok && bytes_ok && plain) {
            return None;
        }
        let added = tokenizer
            .get_added_tokens_decoder()
            .into_values()
            .map(|t| t.content)
            .filter(|c| !c.is_empty())
            .collect();
        let decoder: HashMap<char, u8> = byte_level_decoder();
        let mut chars = ['\0'; 256];
        for (c, b) in decoder {
            chars[b as usize] = c;
        }
        Some(AsciiSplit { added, chars })
    }

    /// The tokenizer's tokens for `text`, or `None` where this path does not apply (a byte
    /// outside its alphabet, an added token's text) or the model fails.
    pub(super) fn tokenize(&self, model: &ModelWrapper, text: &str) -> Option<Vec<TokenId>> {
        let bytes = text.as_bytes();
        if !bytes.iter().all(|&b| in_alphabet(b)) || self.added.iter().any(|a| text.contains(a)) {
            return None;
        }
        let mut ids = Vec::new();
        let mut piece = String::new();
        for range in pieces(bytes) {
            piece.clear();
            piece.extend(bytes[range].iter().map(|&b| self.chars[b as usize]));
            ids.extend(model.tokenize(&piece).ok()?.into_iter().map(|t| t.id));
        }
        Some(ids)
    }
}

/// The bytes the hand split covers: printable ASCII, tab, line feed, carriage return (the
/// other control bytes are left to the tokenizer, whose `\s` takes some of them).
fn in_alphabet(b: u8) -> bool {
    matches!(b, b' '..=b'~' | b'\t' | b'\n' | b'\r')
}

fn letter(b: u8) -> bool {
    b.is_ascii_alphabetic()
}

fn digit(b: u8) -> bool {
    b.is_ascii_digit()
}

fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn newline(b: u8) -> bool {
    matches!(b, b'\n' | b'\r')
}

/// `[^\s\p{L}\p{N}]`: neither space, letter nor digit.
fn other(b: u8) -> bool {
    !space(b) && !letter(b) && !digit(b)
}

/// The pieces [`QWEN2_PATTERN`] matches in `s` (bytes of [`in_alphabet`]), in order; they
/// cover `s` (every byte starts some alternative's match).
fn pieces(s: &[u8]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        (at < s.len()).then(|| {
            let end = match_at(s, at);
            let range = at..end;
            at = end;
            range
        })
    })
}

/// The end of the expression's match starting at `i` (leftmost-first: the first
/// alternative that matches, each with the regex engine's backtracking made explicit).
fn match_at(s: &[u8], i: usize) -> usize {
    let at = |k: usize| s.get(k).copied();
    let run = |from: usize, class: fn(u8) -> bool| {
        from + s[from..].iter().take_while(|&&b| class(b)).count()
    };
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if at(i) == Some(b'\'') {
        let lower = |k| at(k).map(|b: u8| b.to_ascii_lowercase());
        match lower(i + 1) {
            Some(b's' | b't' | b'm' | b'd') => return i + 2,
            Some(b'r') if lower(i + 2) == Some(b'e') => return i + 3,
            Some(b'v') if lower(i + 2) == Some(b'e') => return i + 3,
            Some(b'l') if lower(i + 2) == Some(b'l') => return i + 3,
            _ => {}
        }
    }
    let b = s[i];
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if !newline(b) && !letter(b) && !digit(b) && at(i + 1).is_some_and(letter) {
        return run(i + 1, letter);
    }
    if letter(b) {
        return run(i, letter);
    }
    // \p{N}
    if digit(b) {
        return i + 1;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    let others_from = if b == b' ' && at(i + 1).is_some_and(other) {
        Some(i + 1)
    } else if other(b) {
        Some(i)
    } else {
        None
    };
    if let Some(from) = others_from {
        return run(run(from, other), newline);
    }
    // What is left starts a run of spaces.
    let end = run(i, space);
    // \s*[\r\n]+ : up to the run's last line break.
    if let Some(last) = s[i..end].iter().rposition(|&b| newline(b)) {
        return i + last + 1;
    }
    // \s+(?!\S) : the run, less its last space where something follows it.
    if end == s.len() {
        return end;
    }
    if end - i >= 2 {
        return end - 1;
    }
    // \s+
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::{Context, Result};
    use std::path::Path;

    fn qwen() -> Result<Tokenizer> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tokenizer.json.gz");
        Ok(crate::tokenizer::load_tokenizer(&path)?)
    }

    /// Text built to cross every alternative's edges: cased contractions, letters against
    /// digits, runs of spaces, tabs and line breaks before words, punctuation and ends, and
    /// the JSON a move grammar forces.
    fn corpus(n: usize) -> Vec<String> {
        const PARTS: &[&str] = &[
            "a", "Z", "kind", "Type", "x1", "42", "7", " ", "  ", "   ", "\t", "\n", "\r\n",
            "\n\n", " \n", "\r", " \t", "'s", "'T", "'re", "'VE", "'m", "'ll", "'D", "'", "'x",
            "\"", "\",\"", "\":\"", "\"}", "}}]}", ",{\"", "[", ".", ".'", ")(", "===", "?!", "_",
            "-", "e12", "\\", "/", "~", "#", "@", "{", "<", ">", "|", "`", "^", "%",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..n)
            .map(|_| {
                let len = (next() % 12) as usize;
                (0..len)
                    .map(|_| PARTS[(next() % PARTS.len() as u64) as usize])
                    .collect::<String>()
            })
            .collect()
    }

    /// On Qwen's tokenizer the hand split gives the tokenizer's own tokens for every text
    /// it takes, and takes every text of its alphabet with no added token in it.
    #[test]
    fn the_hand_split_tokenizes_as_the_tokenizer_does() -> Result<()> {
        let tokenizer = qwen()?;
        let split = AsciiSplit::for_tokenizer(&tokenizer).context("Qwen's pipeline is matched")?;
        let mut texts = corpus(4000);
        texts.extend(
            [
                "",
                " ",
                "\n",
                "\"steps\":[{\"purpose\":\"",
                "select\",\"from_x\":",
                " //\"}}]}",
            ]
            .map(String::from),
        );
        for text in &texts {
            let expected = tokenizer
                .encode_fast(text.as_str(), false)
                .map_err(anyhow::Error::msg)?;
            let got = split.tokenize(tokenizer.get_model(), text);
            assert_eq!(got.as_deref(), Some(expected.get_ids()), "{text:?}");
        }
        Ok(())
    }

    /// The tokenizer assembled from a GGUF made by llama.cpp's converter has the same
    /// pipeline, so it gets the hand split and the same tokens.
    #[test]
    fn the_tokenizer_assembled_from_a_gguf_gets_the_hand_split() -> Result<()> {
        let gguf =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tiny-a/tiny-a-f16.gguf");
        let content =
            candle_core::quantized::gguf_file::Content::read(&mut std::fs::File::open(&gguf)?)?;
        let tokenizer = crate::tokenizer::tokenizer_from_gguf(&content, &gguf)?;
        let split =
            AsciiSplit::for_tokenizer(&tokenizer).context("the GGUF's pipeline is matched")?;
        for text in corpus(500) {
            let expected = tokenizer
                .encode_fast(text.as_str(), false)
                .map_err(anyhow::Error::msg)?;
            let got = split.tokenize(tokenizer.get_model(), &text);
            assert_eq!(got.as_deref(), Some(expected.get_ids()), "{text:?}");
        }
        Ok(())
    }

    /// Text outside the alphabet, or holding an added token, is left to the tokenizer.
    #[test]
    fn other_text_is_left_to_the_tokenizer() -> Result<()> {
        let tokenizer = qwen()?;
        let split = AsciiSplit::for_tokenizer(&tokenizer).context("matched")?;
        for text in [
            "caf\u{e9}",
            "a\u{b}b",
            "x\u{c}",
            "\0",
            "done<|im_end|>",
            "<think>",
        ] {
            assert_eq!(
                split.tokenize(tokenizer.get_model(), text),
                None,
                "{text:?}"
            );
        }
        Ok(())
    }

    /// A tokenizer whose pipeline differs (another split expression, a prefix space, a
    /// normalizer that changes ASCII) gets no hand split.
    #[test]
    fn another_pipeline_gets_no_hand_split() -> Result<()> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tokenizer.json.gz");
        let json = String::from_utf8(crate::tokenizer::read_tokenizer_json(&path)?)?;
        let pattern = serde_json::to_string(QWEN2_PATTERN)?;
        let changed = [
            json.replacen(&pattern, r#""\\s+|\\S+""#, 1),
            json.replacen(
                r#""add_prefix_space":false"#,
                r#""add_prefix_space":true"#,
                1,
            ),
            json.replacen(r#"{"type":"NFC"}"#, r#"{"type":"Lowercase"}"#, 1),
        ];
        for variant in changed {
            assert_ne!(
                variant, json,
                "the fixture's JSON has the text each variant changes"
            );
            let tokenizer =
                Tokenizer::from_bytes(variant.as_bytes()).map_err(anyhow::Error::msg)?;
            assert!(AsciiSplit::for_tokenizer(&tokenizer).is_none());
        }
        Ok(())
    }

    fn split(s: &str) -> Vec<&str> {
        pieces(s.as_bytes()).map(|r| &s[r]).collect()
    }

    /// The expression's pieces on hand-picked cases, as the tokenizer's pre-tokenizer gives
    /// them (checked against `tokenizers`' Python binding).
    #[test]
    fn the_split_follows_each_alternative_of_the_expression() {
        assert_eq!(split(".'\",\"kind\":\""), vec![".'\",\"", "kind", "\":\""]);
        assert_eq!(split("I'm here'LL"), vec!["I", "'m", " here", "'LL"]);
        assert_eq!(split("a 12 b"), vec!["a", " ", "1", "2", " b"]);
        assert_eq!(split("x  \n\n  y"), vec!["x", "  \n\n", " ", " y"]);
        assert_eq!(split("x   "), vec!["x", "   "]);
        assert_eq!(split("x \t y"), vec!["x", " \t", " y"]);
        assert_eq!(split(" {\"a\n"), vec![" {\"", "a", "\n"]);
        assert_eq!(split("}}\r\n]"), vec!["}}\r\n", "]"]);
        assert_eq!(split(" 'x"), vec![" '", "x"]);
    }
}
