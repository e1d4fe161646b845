//! Token bounds on the free text of an output, followed token by token as it is decoded: JSON
//! string values ([`StringCaps`]) and free-text spans of a dialect ([`TextSpan`]: a thought
//! before `</think>`, an `Action:` sentence before its newline). When the open string or span
//! has used its bound, [`Bounds::must_close`] names the tokens that end it, and the decoder
//! allows only those (once any character in progress is whole).

use std::sync::Arc;

use toktrie::SimpleVob;

use super::schema::StringCaps;
use super::token_env::TokenEnv;

/// A free-text span of a grammar, bounded by tokens: it opens once the output ends with
/// `after` (at the very start when `after` is empty), and ends at the first byte `end`
/// outside it, which is where the grammar's next part begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextSpan {
    /// What comes just before the span; empty: the span starts the output.
    pub after: Vec<u8>,
    /// The byte that ends it: `\n` for a line, `<` for a tag, or
    /// `toktrie::TokTrie::SPECIAL_TOKEN_MARKER` for a special token such as `</think>` (every
    /// special token's bytes start with it, and no text token's do).
    pub end: u8,
    /// Its bound: once it has taken this many tokens, the next one must end it.
    pub tokens: usize,
}

impl TextSpan {
    /// The tokens that can end the span: those holding its end byte (special tokens for the
    /// special-token marker).
    pub(crate) fn closers(&self, env: &TokenEnv) -> Arc<SimpleVob> {
        env.tokens_with_byte(self.end)
    }
}

/// Where an output is, for its bounds: the JSON string open, the span open, and how many
/// tokens each has taken.
#[derive(Debug)]
pub(super) struct Bounds {
    strings: Option<StringTracker>,
    spans: Vec<(TextSpan, Arc<SimpleVob>)>,
    /// Which spans have been, or are, open: each opens once.
    opened: Vec<bool>,
    /// The span open now.
    open: Option<usize>,
    /// Tokens that added to it.
    tokens_in_span: usize,
    /// The last bytes outside spans, to see where one opens.
    recent: Vec<u8>,
}

/// Bytes [`Bounds`] keeps to find a span's opening (the longest `after` of a dialect is
/// `<grounding_think>`).
const RECENT_BYTES: usize = 64;

impl Bounds {
    pub(super) fn new(strings: Option<&StringCaps>, spans: &[(TextSpan, Arc<SimpleVob>)]) -> Self {
        let open = spans.iter().position(|(s, _)| s.after.is_empty());
        let mut opened = vec![false; spans.len()];
        if let Some(i) = open {
            opened[i] = true;
        }
        Bounds {
            strings: strings.map(StringTracker::new),
            spans: spans.to_vec(),
            opened,
            open,
            tokens_in_span: 0,
            recent: Vec::new(),
        }
    }

    /// Follow one token's bytes.
    pub(super) fn push(&mut self, bytes: &[u8]) {
        let mut touched = self.open.is_some();
        let mut outside: Vec<u8> = Vec::new();
        for &b in bytes {
            if let Some(i) = self.open {
                if b != self.spans[i].0.end {
                    continue;
                }
                self.open = None;
            }
            outside.push(b);
            self.recent.push(b);
            if self.recent.len() > RECENT_BYTES {
                self.recent.drain(..self.recent.len() - RECENT_BYTES);
            }
            let opening = self.spans.iter().enumerate().position(|(i, (s, _))| {
                !self.opened[i] && !s.after.is_empty() && self.recent.ends_with(&s.after)
            });
            if let Some(i) = opening {
                if let Some(tr) = self.strings.as_mut() {
                    tr.push(&std::mem::take(&mut outside));
                }
                self.opened[i] = true;
                self.open = Some(i);
                self.tokens_in_span = 0;
                touched = true;
            }
        }
        if let Some(tr) = self.strings.as_mut() {
            tr.push(&outside);
        }
        if touched && self.open.is_some() {
            self.tokens_in_span += 1;
        }
    }

    /// Whether `token` may end what is open: it holds a JSON string's closing quote, or
    /// the open span's end byte. A token that cannot forces nothing after it while free
    /// text goes on (what the decoder relies on to commit it beside the next pass).
    pub(super) fn may_close(&self, env: &TokenEnv, token: u32) -> bool {
        env.string_closers().is_allowed(token)
            || self.open.is_some_and(|i| self.spans[i].1.is_allowed(token))
    }

    /// The tokens that must come next because the open span or JSON string has used its
    /// bound (and no escape is pending); `None` while nothing is over its bound.
    pub(super) fn must_close<'a>(&'a self, env: &'a TokenEnv) -> Option<&'a SimpleVob> {
        match self.open {
            Some(i) => {
                let (span, closers) = &self.spans[i];
                (self.tokens_in_span >= span.tokens).then_some(closers.as_ref())
            }
            None => self
                .strings
                .as_ref()
                .filter(|s| s.must_close())
                .map(|_| env.string_closers()),
        }
    }
}

/// Follows the JSON being emitted, token by token, to bound string values by tokens
/// ([`StringCaps`]): which string is open, whose value it is, how many tokens it took.
#[derive(Debug)]
struct StringTracker {
    caps: StringCaps,
    in_string: bool,
    escaped: bool,
    /// The open string is an object key or value of a key: its bound.
    cap: usize,
    /// Tokens that added to the open string.
    tokens_in_string: usize,
    /// Content of the string being read, or of the last one closed (keys are short;
    /// longer strings are cut, they cannot match a key name anyway).
    last_string: Vec<u8>,
    /// Key of the value being written: the last string followed by `:`.
    key: Option<Vec<u8>>,
    /// Last structural byte outside strings.
    last_structural: u8,
}

/// Longest key name [`StringTracker`] remembers.
const KEY_MEMORY: usize = 32;

impl StringTracker {
    fn new(caps: &StringCaps) -> Self {
        StringTracker {
            caps: caps.clone(),
            in_string: false,
            escaped: false,
            cap: usize::MAX,
            tokens_in_string: 0,
            last_string: Vec::new(),
            key: None,
            last_structural: b'{',
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let mut touched = self.in_string;
        for &b in bytes {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    self.last_structural = b'"';
                    continue;
                }
                if self.last_string.len() < KEY_MEMORY {
                    self.last_string.push(b);
                }
            } else {
                match b {
                    b'"' => {
                        self.in_string = true;
                        touched = true;
                        self.tokens_in_string = 0;
                        self.cap = if self.last_structural == b':' {
                            self.caps.for_key(self.key.as_deref())
                        } else {
                            self.caps.default_tokens
                        };
                        self.last_string.clear();
                    }
                    b':' => {
                        self.key = Some(self.last_string.clone());
                        self.last_structural = b;
                    }
                    b'{' | b'}' | b'[' | b']' | b',' => self.last_structural = b,
                    _ => {}
                }
            }
        }
        if touched && self.in_string {
            self.tokens_in_string += 1;
        }
    }

    /// The open string has reached its bound and no escape is pending.
    fn must_close(&self) -> bool {
        self.in_string && !self.escaped && self.tokens_in_string >= self.cap
    }
}
