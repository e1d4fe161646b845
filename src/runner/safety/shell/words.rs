//! Words of a command line resolved without running anything: quotes and escapes removed,
//! `~` expanded; a variable, a substitution or a brace expansion makes a word dynamic; the
//! commands inside substitutions are judged as they are met.

use brush_parser::word::{self, TildeExpr, WordPiece, WordPieceWithSource};
use brush_parser::ParserOptions;

use super::walker::{Arg, Walker};
use crate::runner::safety::glob::has_glob;

impl Walker<'_> {
    /// Resolves a word, judging the commands its substitutions run.
    pub(super) fn arg(&mut self, raw: &str) -> Arg {
        let Ok(pieces) = word::parse(raw, &ParserOptions::default()) else {
            self.need_shell(format!("a word the gate cannot read: {raw}"));
            return Arg::Dynamic(raw.to_string());
        };
        let mut value = String::new();
        let mut fixed = true;
        let mut glob = false;
        for p in &pieces {
            match &p.piece {
                WordPiece::Text(s) => {
                    if has_glob(s) {
                        glob = true;
                    }
                    if is_brace_expansion(s) {
                        fixed = false;
                    }
                    value.push_str(s);
                }
                WordPiece::SingleQuotedText(s) => value.push_str(s),
                WordPiece::AnsiCQuotedText(s) => {
                    // Escapes in $'…' spell any byte (`$'\x72m'` is `rm`): only a plain one is
                    // a fixed value.
                    if s.contains('\\') {
                        fixed = false;
                    } else {
                        value.push_str(s);
                    }
                }
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    if !self.double_quoted(inner, raw, &mut value) {
                        fixed = false;
                    }
                }
                WordPiece::TildeExpansion(TildeExpr::Home) => match self.home() {
                    Some(h) => value.push_str(&h.to_string_lossy()),
                    None => fixed = false,
                },
                WordPiece::TildeExpansion(_) => fixed = false,
                WordPiece::EscapeSequence(s) => value.push_str(unescaped(s)),
                other => {
                    fixed = false;
                    self.piece_substitutions(other, raw, p);
                }
            }
        }
        if !fixed {
            Arg::Dynamic(raw.to_string())
        } else if glob {
            Arg::Glob(value)
        } else {
            Arg::Fixed(value)
        }
    }

    /// Appends a double-quoted sequence's value; false when it holds an expansion.
    fn double_quoted(
        &mut self,
        inner: &[WordPieceWithSource],
        raw: &str,
        value: &mut String,
    ) -> bool {
        let mut fixed = true;
        for p in inner {
            match &p.piece {
                WordPiece::Text(s) => value.push_str(s),
                WordPiece::EscapeSequence(s) => value.push_str(unescaped(s)),
                other => {
                    fixed = false;
                    self.piece_substitutions(other, raw, p);
                }
            }
        }
        fixed
    }

    /// Judges the commands a word piece runs when expanded.
    pub(super) fn piece_substitutions(
        &mut self,
        piece: &WordPiece,
        raw: &str,
        source: &WordPieceWithSource,
    ) {
        match piece {
            WordPiece::CommandSubstitution(script) => self.nested(script),
            WordPiece::BackquotedCommandSubstitution(script) => {
                self.nested(&unescape_backquoted(script))
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                for p in inner {
                    self.piece_substitutions(&p.piece, raw, p);
                }
            }
            WordPiece::ParameterExpansion(_) | WordPiece::ArithmeticExpression(_) => {
                // `${X:-$(cmd)}`, `$(( $(cmd) ))`: the parser keeps these inner words as text,
                // so a substitution inside cannot be judged.
                let text = raw.get(source.start_index..source.end_index).unwrap_or(raw);
                if text.contains("$(") || text.contains('`') {
                    self.need_shell(format!(
                        "a command substitution inside the expansion {text}"
                    ));
                }
            }
            _ => {}
        }
    }
}

/// An unquoted `{a,b}` or `{1..3}` that the shell expands into several words.
fn is_brace_expansion(text: &str) -> bool {
    let Some(open) = text.find('{') else {
        return false;
    };
    text[open..].find('}').is_some_and(|close| {
        let inner = &text[open + 1..open + close];
        inner.contains(',') || inner.contains("..")
    })
}

/// The text of a backquoted substitution with its backslash escapes undone (`\$`, `` \` ``,
/// `\\`), as the shell reads it.
fn unescape_backquoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&next) = chars.peek() {
                if matches!(next, '$' | '`' | '\\') {
                    out.push(next);
                    chars.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

/// What a backslash escape stands for: the character after the backslash; a
/// backslash-newline joins lines and stands for nothing.
fn unescaped(escape: &str) -> &str {
    match escape.trim_start_matches('\\') {
        "\n" => "",
        c => c,
    }
}
