//! The `--confirm` prompt: asked before each batch, answered on the terminal or by a script.

use std::collections::VecDeque;
use std::io::{BufRead, Write};

use crate::error::{Error, Result};

/// Where `--confirm` answers come from: the terminal in the CLI, a script in tests.
pub trait ConfirmPrompt: Send {
    /// Asks a yes/no question; `Ok(true)` lets the batch run.
    fn confirm(&mut self, question: &str) -> Result<bool>;
}

/// Asks on the terminal: the question on stderr, one line from stdin; only `y` or `yes`
/// (any case) accepts, and end of input declines.
#[derive(Debug, Default, Clone, Copy)]
pub struct TerminalPrompt;

impl ConfirmPrompt for TerminalPrompt {
    fn confirm(&mut self, question: &str) -> Result<bool> {
        let mut err = std::io::stderr();
        // A failed write to stderr leaves the question unseen; decline rather than act blind.
        if write!(err, "{question} [y/N] ")
            .and_then(|_| err.flush())
            .is_err()
        {
            return Ok(false);
        }
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| Error::io("<stdin>", e))?;
        Ok(matches!(line.trim().to_lowercase().as_str(), "y" | "yes"))
    }
}

/// Answers from a fixed list, recording each question; once the list is exhausted it declines.
#[derive(Debug, Default, Clone)]
pub struct ScriptedPrompt {
    answers: VecDeque<bool>,
    /// The questions asked so far, oldest first.
    pub asked: Vec<String>,
}

impl ScriptedPrompt {
    /// A prompt that gives these answers in order.
    pub fn new(answers: impl IntoIterator<Item = bool>) -> Self {
        Self {
            answers: answers.into_iter().collect(),
            asked: Vec::new(),
        }
    }
}

impl ConfirmPrompt for ScriptedPrompt {
    fn confirm(&mut self, question: &str) -> Result<bool> {
        self.asked.push(question.to_string());
        Ok(self.answers.pop_front().unwrap_or(false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripted_prompt_answers_in_order_then_declines() -> Result<()> {
        let mut p = ScriptedPrompt::new([true]);
        assert!(p.confirm("one?")?);
        assert!(!p.confirm("two?")?);
        assert_eq!(p.asked, vec!["one?", "two?"]);
        Ok(())
    }
}
