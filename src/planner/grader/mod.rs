//! The `verify_done` grader (ARCHITECTURE.md, decision 7).
//!
//! The grader's question follows the agent's own system and screen runs (so a claim judged on
//! the screen the agent last saw reuses their KV): the goal, the agent's claim, "Yes or No?".
//! Two heads read the answer:
//!
//! - **Zero-shot** ([`GraderHead::zero_shot`]): the verdict logit is the log-sum-exp of the
//!   next-token logits over the tokenizer's single-token spellings of yes ([`YES_SPELLINGS`])
//!   minus the same over no ([`NO_SPELLINGS`]), plus [`ZERO_SHOT_BIAS`]. Only when the claim
//!   is rejected, a second, constrained one-word answer (the four [`HINT_WORDS`]' logits
//!   after a follow-up question) gives the hint.
//! - **Trained** ([`GraderHead::load`]): a linear head on the last hidden state, fitted by
//!   [`fit_head`] (`sightline grader fit`) on labelled
//!   [`GraderExample`](crate::moves::GraderExample)s ([`read_examples`]). The file records
//!   what it was fitted on ([`HeadMeta`]: model, hidden size, quantization, visual budget,
//!   prompt) and which hint rows had labels; a head is refused on any other planner, and a
//!   hint row fitted on no label gives no hint.
//!
//! `verified = p(done) >= threshold` either way.
//!
//! The files: `head.rs` reads verdicts (both heads, the head file and its metadata);
//! `fit.rs` fits a head; `data.rs` reads the labelled examples.

mod data;
mod fit;
mod head;

pub use data::read_examples;
pub use fit::{fit_head, FitOptions, FitReport};
pub use head::{
    log_sum_exp, rejection, GraderHead, GraderLogits, HeadMeta, HEAD_ROWS, HINTS, HINT_WORDS,
    NO_SPELLINGS, YES_SPELLINGS, ZERO_SHOT_BIAS,
};
