//! The token environment: the model's vocabulary as byte strings in a toktrie
//! [`TokTrie`], and the llguidance [`ParserFactory`] built on it.
//!
//! Built once per model; every per-turn grammar is compiled against it. The trie takes
//! about 0.15 s for Qwen's 151k tokens; the parser factory's precomputed token slices take
//! longer (about 0.4 s) and are needed only when the first grammar is compiled, so they are
//! built on a thread of their own ([`Background`]) while the caller goes on (in a turn:
//! the screenshot's preprocessing, the vision tower and the prefill come first).
//!
//! The trie is built here from the `tokenizers` vocabulary rather than through
//! `toktrie_hf_tokenizers`, which pins an older `tokenizers` than the rest of the
//! crate. Qwen's tokenizer is byte-level BPE: each token string is written in the
//! GPT-2 "bytes to unicode" alphabet, which [`byte_level_decoder`] maps back to raw
//! bytes. Added tokens (`<|im_end|>`, `<think>`, …) get toktrie's special-token
//! marking (a leading `0xFF` byte), so no grammar over text can ever produce them:
//! the only special token a grammar allows is the end-of-sequence token when it
//! accepts.
//!
//! The logits row is wider than the tokenizer (151,936 against 151,669 for Qwen);
//! the ids past the tokenizer get empty byte strings, which toktrie never allows.

use std::collections::HashMap;
use std::sync::Arc;

use llguidance::ParserFactory;
use tokenizers::Tokenizer;
use toktrie::{SimpleVob, TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};

use super::ascii_split::AsciiSplit;
use super::byte_level::byte_level_decoder;
use crate::error::{Error, Result};
use crate::tokenizer::Vocabulary;

/// The name of the token that ends a move: Qwen's end of a chat turn.
pub const EOS_TOKEN: &str = "<|im_end|>";

/// A value built on a thread of its own, waited for at its first use.
struct Background<T> {
    value: std::sync::OnceLock<std::result::Result<T, String>>,
    build: std::sync::Mutex<Option<std::thread::JoinHandle<Result<T>>>>,
}

impl<T: Send + 'static> Background<T> {
    /// Start `build` on a thread named `name`.
    fn start(name: &str, build: impl FnOnce() -> Result<T> + Send + 'static) -> Result<Self> {
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(build)
            .map_err(|e| Error::internal_caused(format!("starting {name}"), e))?;
        Ok(Background {
            value: std::sync::OnceLock::new(),
            build: std::sync::Mutex::new(Some(handle)),
        })
    }

    /// The value, once built; an error that says why it could not be. Callers after the
    /// first get the same value or the same error.
    fn get(&self) -> Result<&T> {
        let built = self.value.get_or_init(|| {
            let handle = self.build.lock().ok().and_then(|mut h| h.take());
            match handle.map(std::thread::JoinHandle::join) {
                Some(Ok(built)) => built.map_err(|e| e.to_string()),
                Some(Err(_)) => Err("the build thread panicked".into()),
                None => Err("the build was never started".into()),
            }
        });
        built.as_ref().map_err(|e| Error::grammar(e.clone()))
    }
}

/// The model's vocabulary, as llguidance sees it, plus the parser factory that
/// compiles grammars against it. Cheap to clone (shared).
#[derive(Clone)]
pub struct TokenEnv {
    env: TokEnv,
    /// The same environment, concrete, to [`bind`](Self::bind) the tokenizer.
    hf: Arc<HfTokenizerEnv>,
    factory: Arc<Background<ParserFactory>>,
    eos: TokenId,
    n_vocab: usize,
    tokenizer_vocab: usize,
    closers: Arc<SimpleVob>,
    finishers: Arc<SimpleVob>,
    /// [`TokenEnv::tokens_with_byte`]'s sets, made on first use.
    with_byte: Arc<std::sync::Mutex<HashMap<u8, Arc<SimpleVob>>>>,
}

impl std::fmt::Debug for TokenEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenEnv")
            .field("n_vocab", &self.n_vocab)
            .field("tokenizer_vocab", &self.tokenizer_vocab)
            .field("eos", &self.eos)
            .finish()
    }
}

/// toktrie's view of the tokenizer: the trie, and the real tokenizer for the
/// canonical tokenization llguidance needs to force tokens.
struct HfTokenizerEnv {
    /// Set by [`TokenEnv::bind`] (the environment may be built from the vocabulary while
    /// the tokenizer is still being built); until then the trie tokenizes greedily. With
    /// it, the hand split of ASCII text where the tokenizer's pipeline allows one.
    tokenizer: std::sync::OnceLock<(Tokenizer, Option<AsciiSplit>)>,
    trie: TokTrie,
    /// Tokenizations of forced byte strings. llguidance tokenizes the forced bytes
    /// at every step (twice after a forced run), and the same few dozen structural
    /// strings (`","action":{"type":"`, …) recur in every move; the tokenizer call
    /// costs tens of microseconds, a lookup well under one.
    memo: std::sync::Mutex<HashMap<Vec<u8>, Vec<TokenId>>>,
}

/// Most tokenizations [`HfTokenizerEnv`] remembers before starting over.
const TOKENIZE_MEMO_ENTRIES: usize = 4096;

impl TokenizerEnv for HfTokenizerEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        if let Some(hit) = self.memo.lock().ok().and_then(|m| m.get(s).cloned()) {
            return hit;
        }
        let tokens = self.tokenize_uncached(s);
        if let Ok(mut memo) = self.memo.lock() {
            if memo.len() >= TOKENIZE_MEMO_ENTRIES {
                memo.clear();
            }
            memo.insert(s.to_vec(), tokens.clone());
        }
        tokens
    }
}

impl HfTokenizerEnv {
    fn tokenize_uncached(&self, s: &[u8]) -> Vec<TokenId> {
        // Valid UTF-8 runs go through the real tokenizer (canonical ids, which is what
        // forced tokens must be); the trie's greedy tokenization covers the rest, and a
        // tokenizer error, instead of panicking inside the parser.
        self.trie.tokenize_with_greedy_fallback(s, |text| {
            let Some((tokenizer, split)) = self.tokenizer.get() else {
                return self.trie.greedy_tokenize(text.as_bytes());
            };
            if let Some(ids) = split
                .as_ref()
                .and_then(|split| split.tokenize(tokenizer.get_model(), text))
            {
                return ids;
            }
            match tokenizer.encode_fast(text, false) {
                Ok(enc) => enc.get_ids().to_vec(),
                Err(_) => self.trie.greedy_tokenize(text.as_bytes()),
            }
        })
    }
}

impl TokenEnv {
    /// Build the environment from the model's tokenizer, with `n_vocab` the width of
    /// the model's logits row: [`from_vocabulary`](Self::from_vocabulary), then
    /// [`bind`](Self::bind).
    pub fn from_tokenizer(tokenizer: &Tokenizer, n_vocab: usize) -> Result<Self> {
        let env = Self::from_vocabulary(&Vocabulary::of(tokenizer), n_vocab)?;
        env.bind(tokenizer.clone())?;
        Ok(env)
    }

    /// Build the environment from the tokenizer's vocabulary, with `n_vocab` the width of
    /// the model's logits row; [`bind`](Self::bind) the tokenizer before compiling grammars
    /// (forced tokens need its canonical tokenization).
    ///
    /// Cost: about a second for a 151k vocabulary (trie, then the parser factory's
    /// precomputed token slices). Errors when `n_vocab` is smaller than the
    /// vocabulary, when the tokenizer is not byte-level BPE, or when it lacks the
    /// end-of-turn token [`EOS_TOKEN`].
    pub fn from_vocabulary(vocabulary: &Vocabulary, n_vocab: usize) -> Result<Self> {
        let tokenizer_vocab = vocabulary.tokens.len();
        if n_vocab < tokenizer_vocab {
            return Err(Error::tokenizer(format!(
                "the model's logits are {n_vocab} wide but the tokenizer has \
                 {tokenizer_vocab} tokens: tokenizer and model do not match"
            )));
        }
        let eos = vocabulary
            .tokens
            .iter()
            .find(|(text, _)| text == EOS_TOKEN)
            .map(|&(_, id)| id)
            .ok_or_else(|| {
                Error::tokenizer(format!("the end-of-turn token {EOS_TOKEN} is missing"))
            })?;
        if !vocabulary.byte_level {
            return Err(Error::tokenizer(
                "only byte-level BPE tokenizers are supported (decoder is not ByteLevel)",
            ));
        }

        let decoder = byte_level_decoder();
        let mut words: Vec<Vec<u8>> = vec![Vec::new(); n_vocab];
        for (text, id) in &vocabulary.tokens {
            let id = *id;
            let slot = words.get_mut(id as usize).ok_or_else(|| {
                Error::tokenizer(format!("token {text:?} has id {id}, past the vocabulary"))
            })?;
            *slot = if vocabulary.added.contains(&id) {
                let mut bytes = Vec::with_capacity(text.len() + 1);
                bytes.push(TokTrie::SPECIAL_TOKEN_MARKER);
                bytes.extend_from_slice(text.as_bytes());
                bytes
            } else {
                text.chars()
                    .map(|c| decoder.get(&c).copied())
                    .collect::<Option<Vec<u8>>>()
                    .ok_or_else(|| {
                        Error::tokenizer(format!(
                            "token {id} {text:?} has a character outside the byte-level alphabet"
                        ))
                    })?
            };
        }

        let info = TokRxInfo {
            tok_end_of_turn: Some(eos),
            ..TokRxInfo::new(n_vocab as u32, eos)
        };
        let trie = TokTrie::from(&info, &words);
        let mut closers = trie.alloc_token_set();
        let mut finishers = trie.alloc_token_set();
        for (id, word) in words.iter().enumerate() {
            if closes_string(word) {
                closers.allow_token(id as TokenId);
            }
            if finishes_character(word) {
                finishers.allow_token(id as TokenId);
            }
        }
        let hf = Arc::new(HfTokenizerEnv {
            tokenizer: std::sync::OnceLock::new(),
            trie,
            memo: Default::default(),
        });
        let env: TokEnv = hf.clone();
        // llguidance's JSON token slices: precomputed token classes that answer masks
        // inside strings without walking the vocabulary. Keeping only the unbounded
        // string class measured ~5% faster for the Lark grammar, but it leaves the
        // JSON-schema engine's `maxLength` strings without any (1.7 ms masks).
        let factory_env = env.clone();
        let factory = Background::start("sightline-parser-factory", move || {
            let mut factory = ParserFactory::new_simple(&factory_env)
                .map_err(|e| Error::grammar_caused("building the parser factory", e))?;
            factory.quiet();
            Ok(factory)
        })?;
        Ok(TokenEnv {
            env,
            hf,
            factory: Arc::new(factory),
            eos,
            n_vocab,
            tokenizer_vocab,
            closers: Arc::new(closers),
            finishers: Arc::new(finishers),
            with_byte: Default::default(),
        })
    }

    /// Give the environment the tokenizer its vocabulary came from, for the canonical
    /// tokenization of forced tokens. Errors (and binds nothing) when the tokenizer's
    /// vocabulary is not the one the environment was built from: its size, its
    /// end-of-turn token, and every token at a stride of 61 ids are compared (a whole
    /// comparison would cost a tenth of the build this runs beside). Binding twice keeps
    /// the first.
    pub fn bind(&self, tokenizer: Tokenizer) -> Result<()> {
        let trie = self.env.tok_trie();
        let disagree = |what: String| {
            Error::tokenizer(format!(
                "the tokenizer does not match the vocabulary its token environment was built \
                 from: {what}"
            ))
        };
        let size = tokenizer.get_vocab_size(true);
        if size != self.tokenizer_vocab {
            return Err(disagree(format!(
                "{size} tokens against {}",
                self.tokenizer_vocab
            )));
        }
        if tokenizer.token_to_id(EOS_TOKEN) != Some(self.eos) {
            return Err(disagree(format!("{EOS_TOKEN} is not id {}", self.eos)));
        }
        let decoder = byte_level_decoder();
        for id in (0..self.n_vocab as TokenId).step_by(61) {
            let expected = trie.token(id);
            let bytes: Option<Vec<u8>> = tokenizer.id_to_token(id).map(|text| {
                if expected.first() == Some(&TokTrie::SPECIAL_TOKEN_MARKER) {
                    let mut b = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    b.extend_from_slice(text.as_bytes());
                    b
                } else {
                    text.chars()
                        .filter_map(|c| decoder.get(&c).copied())
                        .collect()
                }
            });
            if bytes.as_deref().unwrap_or_default() != expected {
                return Err(disagree(format!("token {id} differs")));
            }
        }
        let split = AsciiSplit::for_tokenizer(&tokenizer);
        let _ = self.hf.tokenizer.set((tokenizer, split));
        Ok(())
    }

    /// The toktrie environment llguidance works with.
    pub fn tok_env(&self) -> &TokEnv {
        &self.env
    }

    /// The parser factory grammars are compiled with; the first call waits until its
    /// background build has finished.
    pub fn factory(&self) -> Result<&ParserFactory> {
        self.factory.get()
    }

    /// The end-of-sequence token ([`EOS_TOKEN`]).
    pub fn eos(&self) -> TokenId {
        self.eos
    }

    /// Width of a logits row (the trie's vocabulary size).
    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// Number of ids the tokenizer knows; ids from here to [`n_vocab`](Self::n_vocab)
    /// are padding and never allowed.
    pub fn tokenizer_vocab(&self) -> usize {
        self.tokenizer_vocab
    }

    /// The bytes of `tokens`, special tokens spelled out (`</think>`, `<tool_call>`).
    pub fn decode_bytes(&self, tokens: &[TokenId]) -> Vec<u8> {
        self.env.tok_trie().decode(tokens)
    }

    /// Tokens that end a JSON string when one is open and no escape is pending: a `"`
    /// with no backslash before it in the token.
    pub fn string_closers(&self) -> &SimpleVob {
        &self.closers
    }

    /// Tokens that only finish a UTF-8 character already begun: one to three
    /// continuation bytes (`0x80..=0xBF`) and nothing else. When a string has used its
    /// token bound in the middle of a character, the decoder allows only these until
    /// the character is whole and the string can close, so a bounded string overshoots
    /// its bound by at most three tokens (see `MoveSpec::max_move_tokens`).
    pub fn character_finishers(&self) -> &SimpleVob {
        &self.finishers
    }

    /// The tokens whose bytes hold `byte`; for toktrie's special-token marker
    /// ([`TokTrie::SPECIAL_TOKEN_MARKER`]), the special tokens (`</think>`, `<|im_end|>`, …).
    /// The tokens that can end a free-text span of a grammar (`crate::decode::TextSpan`).
    /// Cost: one pass over the vocabulary the first time for each byte (a few milliseconds
    /// for Qwen's), a lookup after.
    pub fn tokens_with_byte(&self, byte: u8) -> Arc<SimpleVob> {
        if let Some(hit) = self
            .with_byte
            .lock()
            .ok()
            .and_then(|m| m.get(&byte).cloned())
        {
            return hit;
        }
        let trie = self.env.tok_trie();
        let mut set = trie.alloc_token_set();
        for id in 0..self.n_vocab as TokenId {
            let word = trie.token(id);
            let special = word.len() > 1 && word[0] == TokTrie::SPECIAL_TOKEN_MARKER;
            let holds = if byte == TokTrie::SPECIAL_TOKEN_MARKER {
                special
            } else {
                !special && word.contains(&byte)
            };
            if holds {
                set.allow_token(id);
            }
        }
        let set = Arc::new(set);
        if let Ok(mut cache) = self.with_byte.lock() {
            cache.insert(byte, Arc::clone(&set));
        }
        set
    }

    /// The bytes of one token (empty for padding ids and ids out of range).
    pub fn token_bytes_of(&self, token: TokenId) -> &[u8] {
        let trie = self.env.tok_trie();
        if (token as usize) < self.n_vocab {
            trie.token(token)
        } else {
            &[]
        }
    }

    /// The bytes of every token id, in id order (special tokens carry toktrie's
    /// `0xFF` marker; padding ids are empty). For test doubles and tools.
    pub fn token_bytes(&self) -> Vec<Vec<u8>> {
        let trie = self.env.tok_trie();
        (0..self.n_vocab as TokenId)
            .map(|t| trie.token(t).to_vec())
            .collect()
    }

    /// Canonical token ids of `text` (no special tokens).
    pub fn tokenize(&self, text: &str) -> Vec<TokenId> {
        self.env.tokenize(text)
    }
}

/// Whether a token's bytes hold a `"` with no backslash before it (in the token).
fn finishes_character(word: &[u8]) -> bool {
    (1..=3).contains(&word.len()) && word.iter().all(|b| (0x80..=0xBF).contains(b))
}

fn closes_string(word: &[u8]) -> bool {
    match word.iter().position(|&b| b == b'"') {
        Some(q) => {
            word.first() != Some(&TokTrie::SPECIAL_TOKEN_MARKER) && !word[..q].contains(&b'\\')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_background_value_is_built_once_and_a_failed_build_is_an_error_every_time() -> Result<()> {
        let built = Background::start("test-ok", || Ok(41 + 1))?;
        assert_eq!(*built.get()?, 42);
        assert_eq!(*built.get()?, 42);

        let failed: Background<u8> =
            Background::start("test-err", || Err(Error::grammar("no slices")))?;
        for _ in 0..2 {
            let e = failed.get().err().map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains("no slices")),
                "{e:?}"
            );
        }

        #[allow(clippy::panic)]
        let panicked: Background<u8> = Background::start("test-panic", || panic!("boom"))?;
        let e = panicked.get().err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains("panicked")),
            "{e:?}"
        );
        Ok(())
    }
}
