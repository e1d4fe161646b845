//! Limits on a move: how many steps, how long each string, how far a scroll or a wait. The
//! grammar enforces them, the prompt states them, the runner relies on them.

/// Longest `expect_after` timeout a move may ask for, in milliseconds.
pub const MAX_EXPECT_MS: u32 = 5_000;

/// Bounds on every free-form part of a move. Token bounds apply to the Lark grammar;
/// the JSON schema turns them into character bounds of
/// [`chars_per_token`](Self::chars_per_token) each.
#[derive(Debug, Clone, PartialEq)]
pub struct MoveLimits {
    /// Most steps in a batch (at least 1). Default 5.
    pub max_steps: usize,
    /// Tokens in a sentence: `purpose`, `summary`, `reason`, `question`. Default 48.
    pub sentence_tokens: usize,
    /// Tokens in a longer text: `type.text`, `set_value.value`, `extract.goal`/`data`,
    /// `navigate.url`, `cdp_eval.expression`. Default 128.
    pub text_tokens: usize,
    /// Tokens in one string of `done.extracted_data` (keys and values). Default 32.
    pub data_string_tokens: usize,
    /// Entries in the object or array of `done.extracted_data`. Default 16.
    pub data_entries: usize,
    /// Longest `wait`, in milliseconds. Default 10,000.
    pub max_wait_ms: u32,
    /// Largest `scroll` amount either way, per axis. Default 5,000.
    pub max_scroll: u32,
    /// Characters per token when the JSON schema bounds strings. Default 4.
    pub chars_per_token: usize,
    /// Tokens of an optional reasoning sentence written before the move, as a
    /// `"thought"` key first in the move object (stripped by
    /// [`parse_move`](crate::decode::parse_move)). 0, the default, leaves it out.
    pub thought_tokens: usize,
}

impl Default for MoveLimits {
    fn default() -> Self {
        MoveLimits {
            max_steps: 5,
            sentence_tokens: 48,
            text_tokens: 128,
            data_string_tokens: 32,
            data_entries: 16,
            max_wait_ms: 10_000,
            max_scroll: 5_000,
            chars_per_token: 4,
            thought_tokens: 0,
        }
    }
}
