//! Grammar-constrained decoding: every move is valid `NextMove` JSON that targets only
//! what is on screen.
//!
//! Three stages, each with its own cost:
//!
//! 1. [`TokenEnv`], once per model (~1 s): the vocabulary as a toktrie trie with the
//!    logits width as its size, and llguidance's parser factory.
//! 2. [`Grammar`], once per turn (milliseconds): [`MoveSpec::new`] resolves the view
//!    and [`GrammarOptions`] into allowed actions and targets, and
//!    [`Grammar::for_move`] compiles it. [`WarmUp`] walks a new grammar on a thread of
//!    its own while the prompt is fed, so the decode finds its lexer states built.
//! 3. [`decode_move`], per output: mask → sample → commit from the logits of the
//!    prompt's last position, forced-token runs fed as one forward pass, the JSON
//!    parsed into a [`cel_contracts::NextMove`]. On a device the grammar gets each
//!    step ready while the pass before it is in flight (`beside`).
//!
//! ```no_run
//! # fn main() -> sightline::Result<()> {
//! use sightline::decode::{decode_move, DecodeOptions, Grammar, GrammarEngine, GrammarOptions, MoveSpec, TokenEnv};
//! # let tokenizer: tokenizers::Tokenizer = unimplemented!();
//! # let view: cel_contracts::PlanningView = unimplemented!();
//! # let mut model: Box<dyn sightline::VisionLanguageModel> = unimplemented!();
//! # let prompt: Vec<u32> = vec![];
//! let env = TokenEnv::from_tokenizer(&tokenizer, model.vocab_size())?; // once per model
//! let spec = MoveSpec::new(&view, &GrammarOptions::default())?;        // per turn
//! let grammar = Grammar::for_move(&env, &spec, GrammarEngine::Lark)?;
//! let logits = model.feed(&prompt, &[])?;
//! let out = decode_move(model.as_mut(), &logits, &grammar, &DecodeOptions::default())?;
//! println!("{:?} ({} tokens, {} forced)", out.next_move, out.decoded.stats.tokens, out.decoded.stats.forced_tokens);
//! # Ok(()) }
//! ```

mod answer;
mod ascii_split;
mod beside;
mod bounds;
mod byte_level;
mod decoder;
mod grammar;
mod sampler;
mod schema;
#[cfg(test)]
mod step_timing;
mod token_env;
mod warm_up;

pub(crate) use answer::check_special_tokens;
pub use answer::{decode_answer, AnswerSpec, DecodedAnswer};
pub use bounds::TextSpan;
pub use byte_level::byte_level_decoder;
pub use decoder::{
    decode, decode_move, move_thought, parse_move, parse_sentence, DecodeOptions, DecodeStats,
    Decoded, DecodedMove,
};
pub use grammar::{Grammar, GrammarEngine};
pub use sampler::{check_temperature, check_top_p, Sampler, Sampling};
pub use schema::{GrammarOptions, MoveSpec, StringCaps};
pub use token_env::{TokenEnv, EOS_TOKEN};
pub use warm_up::{WarmUp, WarmUpStats, MAX_WALKS};

#[cfg(test)]
mod tests {
    /// The planner keeps these across turns inside a `PlanProducer` (Send + Sync).
    #[test]
    fn decoder_types_can_live_in_a_planner() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<super::TokenEnv>();
        send_sync::<super::Grammar>();
        send_sync::<super::MoveSpec>();
    }
}
