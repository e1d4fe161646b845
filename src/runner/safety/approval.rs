//! Approving one refused step: the library's callback ([`Approver`], any
//! `FnMut(&Refusal) -> bool`) or, for `--confirm`, a question on the terminal showing the step
//! ([`PromptApprover`]). An approval lets that one step run; it grants nothing for later steps.

use super::confirm::ConfirmPrompt;
use super::refusal::Refusal;
use crate::error::Result;

/// Decides whether a step the gate refused may run this once.
pub trait Approver: Send {
    /// `Ok(true)` lets the step run; `Ok(false)` keeps the refusal; an error ends the run as
    /// a failure (the question could not be asked).
    fn approve(&mut self, refusal: &Refusal) -> Result<bool>;
}

impl<F> Approver for F
where
    F: FnMut(&Refusal) -> bool + Send,
{
    fn approve(&mut self, refusal: &Refusal) -> Result<bool> {
        Ok(self(refusal))
    }
}

/// Asks a [`ConfirmPrompt`] (the terminal for `--confirm`) about each refused step, showing
/// the step, what it would do and the grant that would allow it in every run.
pub struct PromptApprover(pub Box<dyn ConfirmPrompt>);

impl std::fmt::Debug for PromptApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PromptApprover")
    }
}

impl Approver for PromptApprover {
    fn approve(&mut self, refusal: &Refusal) -> Result<bool> {
        self.0.confirm(&question(refusal))
    }
}

/// The question for one refused step.
pub fn question(refusal: &Refusal) -> String {
    let flags = refusal.allow_flags();
    let every_run = if flags.is_empty() {
        String::new()
    } else {
        format!(" (to allow it in every run: {})", flags.join(" "))
    };
    format!(
        "Allow step {} \"{}\" ({})? It means {}{every_run}.",
        refusal.step_index + 1,
        refusal.purpose,
        refusal.action,
        refusal.what()
    )
}
