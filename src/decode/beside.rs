//! The grammar's work beside the forward pass: while a device (CUDA, Metal) computes a
//! step's logits and the host waits, the grammar gets that step ready, so that after the
//! sample only a swap or a plain commit is left on the critical path, where the device
//! idles.
//!
//! A decode step's grammar work is a commit (advance the parser by the sampled token),
//! the forced run after it, and the next step's mask. The forced run is the costliest:
//! llguidance tokenizes the forced bytes, then walks the token trie under every suffix of
//! the last four tokens to leave out what a longer sampled token could merge with (token
//! healing; p99 ≈300 µs against ≈10 µs for a commit). So while the pass that feeds the
//! sampled token is in flight, [`Beside::prepare`]:
//!
//! - commits that token when it was fed before the grammar took it: a token of free text
//!   that cannot end it (not a string's or span's closer) forces nothing, so it goes to
//!   the model at once and its commit waits for the pass (a run it forces after all is fed
//!   in a pass of its own: the same tokens, one pass more; counted as a late run);
//! - decides the next step: a guess where free text is open (greedy decoding on the CPU),
//!   else its mask;
//! - advances copies of the grammar by each token that mask leaves, where it leaves few
//!   ([`MAX_CANDIDATES`]: ids, keys, keywords, or the few closers at a string's end),
//!   with the run each one forces ([`Ahead`]), so the commit after the sample is a swap.
//!
//! The output is the one committing after every sample gives: each call is the one the
//! commit would make, on the same state (copies share the grammar's lexer).
//!
//! On the CPU the pass is synchronous and takes every core it is given, so the work runs
//! inside it: the calling thread does it in the pass's first large product while the
//! pool's other threads take its rows (`cpu::beside`; the model says whether it can,
//! `VisionLanguageModel::works_beside_pass`). Where no product takes it (a pool of one
//! thread, kernels that take none) the decoder keeps the CPU's own order: the mask right
//! after the commit, before the pass (the same work after a synchronous pass meets the
//! caches the pass left cold: p99 491 µs against 165 on a 2-core AMD EPYC VM; a thread of
//! its own beside the pass ran only once the pass ended, after waits of 0.1–10 ms).

use std::time::{Duration, Instant};

use llguidance::Matcher;
use toktrie::{SimpleVob, TokenId};

use super::bounds::Bounds;
use super::token_env::TokenEnv;
use crate::error::BoxError;

/// The most tokens advanced ahead at one step.
pub const MAX_CANDIDATES: usize = 16;

/// A grammar failure found beside the pass: what was being done, and llguidance's error.
pub type Failure = (&'static str, BoxError);

/// What the next sample needs from the grammar.
pub enum Next {
    /// Free text is open: try the model's own choice first.
    Guess,
    /// The mask, with the copies advanced by its tokens where it has few.
    Mask(SimpleVob, Ahead),
}

/// A step made ready beside the pass.
pub struct Beside {
    /// The run the pending token forced after all (empty as a rule): it must be fed.
    pub late_forced: Vec<TokenId>,
    /// The next step; `None` when the grammar has stopped or a late run is to be fed
    /// first.
    pub next: Option<Next>,
    /// Whether free text is open (the grammar takes a probe); asked only when
    /// guessing or preparing beside the pass.
    pub free_text: bool,
    /// The mask's time, when one was computed.
    pub mask_time: Option<Duration>,
    /// All of it.
    pub time: Duration,
}

impl Beside {
    /// Commit `pending` (and its run, if any), then get the next step ready. `probes`
    /// show that free text is open ([`FreeTextProbes`]); `guessing`: whether
    /// the decoder guesses there; `copies`: whether the step is prepared beside a pass in
    /// flight, where copies ([`Ahead`]) and commits of tokens fed first pay.
    pub fn prepare(
        matcher: &mut Matcher,
        pending: Option<TokenId>,
        bounds: &Bounds,
        env: &TokenEnv,
        probes: &FreeTextProbes,
        guessing: bool,
        copies: bool,
    ) -> Result<Beside, Failure> {
        let t = Instant::now();
        let mut ready = Beside {
            late_forced: Vec::new(),
            next: None,
            free_text: false,
            mask_time: None,
            time: Duration::ZERO,
        };
        if let Some(token) = pending {
            matcher
                .consume_token(token)
                .map_err(|e| ("grammar commit", e.into()))?;
            ready.late_forced = matcher.consume_ff_tokens();
            if let Some(e) = matcher.get_error() {
                return Err(("grammar forced tokens", e.into()));
            }
        }
        if ready.late_forced.is_empty() && !matcher.is_stopped() {
            // Asked only where it decides something: a guess, or a commit fed first.
            let prose = (guessing || copies) && probes.word.is_some_and(|p| takes(matcher, p));
            ready.free_text =
                prose || (copies && probes.inside_character.iter().any(|&p| takes(matcher, p)));
            ready.next = Some(if guessing && prose && bounds.must_close(env).is_none() {
                Next::Guess
            } else {
                let tm = Instant::now();
                let mask = mask_now(matcher, bounds, env)?;
                ready.mask_time = Some(tm.elapsed());
                let ahead = match copies {
                    true => {
                        Ahead::commit(matcher, &candidates(&mask, env.string_closers(), env.eos()))
                    }
                    false => Ahead::default(),
                };
                Next::Mask(mask, ahead)
            });
        }
        ready.time = t.elapsed();
        Ok(ready)
    }
}

/// The mask of the grammar's state, narrowed to the tokens that end the open string or
/// span when it has used its bound (if the grammar allows one now; inside a character or
/// an escape, to those that finish it).
pub fn mask_now(
    matcher: &mut Matcher,
    bounds: &Bounds,
    env: &TokenEnv,
) -> Result<SimpleVob, Failure> {
    let mut mask = matcher
        .compute_mask()
        .map_err(|e| ("grammar mask", e.into()))?;
    if let Some(closers) = bounds.must_close(env) {
        let mut closing = mask.clone();
        closing.and(closers);
        if closing.is_zero() {
            // Inside a character: finish it and nothing more, so the next token can
            // close the string.
            closing = mask.clone();
            closing.and(env.character_finishers());
        }
        if !closing.is_zero() {
            mask = closing;
        }
    }
    Ok(mask)
}

/// Rehearse, on a copy thrown away, the commit the step after the pass may have to make on
/// the critical path: one that computes a forced run with no copy made for it (a string
/// closed in free text, where the decoder guesses; a closer or keyword prefix picked from a
/// mask too large to advance copies for). Called at the pass's end
/// ([`Moment::End`](crate::model::Moment)), in a wait the calling thread would spend idle.
///
/// Why: the pass streams the model's weights through every cache, so the commit after it
/// finds the lexer's states, the parser's rows, the token trie and the tokenizer's tables
/// in memory: on a 2-core AMD EPYC VM, after 512 MiB streamed, such a commit took p50 112
/// µs, and 26 µs after a rehearsal of another token's commit from the same state. Which
/// token is sampled is not known yet; any token that ends the same text goes through most
/// of the same tables (the closing quote, the forced literal after it, its tokenization).
/// Returns whether a commit was rehearsed. The decode's output does not depend on it.
pub fn rehearse(matcher: &Matcher, step: &Beside, env: &TokenEnv, probes: &FreeTextProbes) -> bool {
    let token = match &step.next {
        Some(Next::Guess) => probes.quote,
        Some(Next::Mask(mask, ahead)) if ahead.len() == 0 => first_set(
            mask.as_slice(),
            Some(env.string_closers().as_slice()),
            env.eos(),
        )
        .or_else(|| first_set(mask.as_slice(), None, env.eos())),
        _ => None,
    };
    let Some(token) = token else {
        return false;
    };
    let mut copy = matcher.clone();
    // A refused token would make the copy build an error report: checked first.
    if !takes(&mut copy, token) || copy.consume_token(token).is_err() {
        return false;
    }
    copy.consume_ff_tokens();
    true
}

/// The lowest id set in `a` (and in `b`, when given), `eos` left out.
fn first_set(a: &[u32], b: Option<&[u32]>, eos: TokenId) -> Option<TokenId> {
    set_ids(a, b).find(|&id| id != eos)
}

/// What shows that free text is open.
pub struct FreeTextProbes {
    /// A word with its leading space (` the`): taken where the grammar takes prose and
    /// not where it expects an id, a key or a keyword (none holds a space); a single
    /// letter where the vocabulary has no such token. Where it is taken, guesses pay.
    word: Option<TokenId>,
    /// Two lone UTF-8 continuation bytes, one of which is taken inside a character of
    /// prose, where the word is not (the lowest and the highest: every lead byte takes one
    /// of them next). There a guess seldom is (few tokens go on a character), but a token
    /// that does not close the text forces nothing all the same.
    inside_character: Vec<TokenId>,
    /// The lone quote, which closes a JSON string: the commit [`rehearse`] rehearses where
    /// free text is open.
    quote: Option<TokenId>,
}

impl FreeTextProbes {
    /// The probes in `env`'s vocabulary.
    pub fn new(env: &TokenEnv) -> Self {
        let trie = env.tok_env().tok_trie();
        FreeTextProbes {
            word: [&b" the"[..], b"e"]
                .iter()
                .find_map(|word| trie.token_id(word)),
            inside_character: [0x80u8, 0xBF]
                .iter()
                .filter_map(|b| trie.token_id(&[*b]))
                .collect(),
            quote: trie.token_id(b"\""),
        }
    }
}

/// Whether the grammar's parser can consume `token` now (what a mask would allow).
pub fn takes(matcher: &mut Matcher, token: TokenId) -> bool {
    matcher.validate_tokens(&[token]).is_ok_and(|n| n == 1)
}

/// A grammar advanced by one token and the run that token forces.
pub struct Committed {
    /// The grammar after the token and its forced run.
    pub matcher: Matcher,
    /// The forced run (empty when the grammar forces nothing after the token).
    pub forced: Vec<TokenId>,
}

/// The copies made ahead of one sample.
#[derive(Default)]
pub struct Ahead {
    picks: Vec<(TokenId, Committed)>,
}

impl Ahead {
    /// Advance a copy of `matcher` by each of `candidates` and its forced run. A token
    /// the grammar refuses, or whose run fails, is left out: the plain commit reports it.
    pub fn commit(matcher: &Matcher, candidates: &[TokenId]) -> Ahead {
        let picks = candidates
            .iter()
            .filter_map(|&token| {
                let mut copy = matcher.clone();
                copy.consume_token(token).ok()?;
                let forced = copy.consume_ff_tokens();
                if !forced.is_empty() {
                    // Consuming the run dropped llguidance's forced-token cache; the next
                    // mask would redo the run's tokenization and trie walk to find the
                    // bytes left for the sample. Done here, the mask finds it cached.
                    copy.compute_ff_tokens();
                }
                (!copy.is_error()).then_some((
                    token,
                    Committed {
                        matcher: copy,
                        forced,
                    },
                ))
            })
            .collect();
        Ahead { picks }
    }

    /// The copy advanced by `token`, if one was made.
    pub fn take(&mut self, token: TokenId) -> Option<Committed> {
        let at = self.picks.iter().position(|(t, _)| *t == token)?;
        Some(self.picks.swap_remove(at).1)
    }

    /// Tokens advanced.
    pub fn len(&self) -> usize {
        self.picks.len()
    }
}

/// The tokens worth advancing ahead under `mask`: all of them when at most
/// [`MAX_CANDIDATES`], else those that are also `closers` when at most that many, else
/// none. `eos` is never one (its commit ends the decode and forces nothing).
pub fn candidates(mask: &SimpleVob, closers: &SimpleVob, eos: TokenId) -> Vec<TokenId> {
    few_set(mask.as_slice(), None, eos)
        .or_else(|| few_set(mask.as_slice(), Some(closers.as_slice()), eos))
        .unwrap_or_default()
}

/// The ids set in `a` (and in `b`, when given), unless more than [`MAX_CANDIDATES`].
fn few_set(a: &[u32], b: Option<&[u32]>, eos: TokenId) -> Option<Vec<TokenId>> {
    let mut out = Vec::new();
    for id in set_ids(a, b).filter(|&id| id != eos) {
        if out.len() == MAX_CANDIDATES {
            return None;
        }
        out.push(id);
    }
    Some(out)
}

/// The ids set in the bit set `a` (and in `b`, when given), lowest first.
fn set_ids<'a>(a: &'a [u32], b: Option<&'a [u32]>) -> impl Iterator<Item = TokenId> + 'a {
    a.iter().enumerate().flat_map(move |(i, &word)| {
        let mut word = word & b.map_or(u32::MAX, |b| b.get(i).copied().unwrap_or(0));
        std::iter::from_fn(move || {
            (word != 0).then(|| {
                let id = (i * 32) as TokenId + word.trailing_zeros();
                word &= word - 1;
                id
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vob(ids: &[u32], size: usize) -> SimpleVob {
        let mut v = SimpleVob::alloc(size);
        ids.iter().for_each(|&i| v.allow_token(i));
        v
    }

    #[test]
    fn a_small_mask_is_its_own_candidates_without_end_of_sequence() {
        let mask = vob(&[3, 40, 77, 99], 128);
        let closers = vob(&[], 128);
        assert_eq!(candidates(&mask, &closers, 99), vec![3, 40, 77]);
    }

    #[test]
    fn a_large_mask_gives_its_few_closers_or_nothing() {
        let all: Vec<u32> = (0..100).collect();
        let mask = vob(&all, 128);
        assert_eq!(candidates(&mask, &vob(&[5, 64, 120], 128), 0), vec![5, 64]);
        let many: Vec<u32> = (0..40).collect();
        assert!(candidates(&mask, &vob(&many, 128), 1000).is_empty());
        // Exactly the bound is still taken; one more is not.
        let bound: Vec<u32> = (0..MAX_CANDIDATES as u32).collect();
        assert_eq!(candidates(&vob(&bound, 128), &vob(&[], 128), 1000), bound);
        let over: Vec<u32> = (0..=MAX_CANDIDATES as u32).collect();
        assert!(candidates(&vob(&over, 128), &vob(&[], 128), 1000).is_empty());
    }

    #[test]
    fn the_first_set_id_skips_end_of_sequence_and_honours_the_second_set() {
        let mask = vob(&[3, 40, 77, 99], 128);
        assert_eq!(first_set(mask.as_slice(), None, 3), Some(40));
        let closers = vob(&[77, 120], 128);
        assert_eq!(
            first_set(mask.as_slice(), Some(closers.as_slice()), 3),
            Some(77)
        );
        let none = vob(&[5], 128);
        assert_eq!(first_set(mask.as_slice(), Some(none.as_slice()), 3), None);
        assert_eq!(first_set(vob(&[9], 128).as_slice(), None, 9), None);
    }
}
