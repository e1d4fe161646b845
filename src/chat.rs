//! Qwen's chat format, rendered in one place: turns (`<|im_start|>role … <|im_end|>`) and the
//! image run (`<|vision_start|>`, one `<|image_pad|>` per visual token, `<|vision_end|>`).
//!
//! The planner's agent and grader prompts, `sightline generate` and `--show-prompt` all build
//! their text from these functions, so a change of template (a model family's own, a Thinking
//! variant's assistant opening) is made once. The image run is the one part that is not
//! tokenized from text: its pads are pushed as ids ([`image_ids`]), and shown in prompts
//! written for people as one placeholder ([`image_placeholder`]).

use crate::tokenizer::SpecialTokens;

/// Who speaks a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The system instructions.
    System,
    /// The user (the screen, the task, the question).
    User,
    /// The model's answer.
    Assistant,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// The text that opens a turn of `role`.
pub fn open(role: Role) -> String {
    format!("<|im_start|>{}\n", role.name())
}

/// The text that ends a turn.
pub const END: &str = "<|im_end|>\n";

/// A whole turn: its opening, `text`, its end.
pub fn turn(role: Role, text: &str) -> String {
    format!("{}{text}{END}", open(role))
}

/// The end of the current turn and the opening of the assistant's answer: where a prompt
/// stops for the model to continue.
pub fn answer() -> String {
    format!("{END}{}", open(Role::Assistant))
}

/// An image of `n` visual tokens as text, pads spelled out (it tokenizes to
/// [`image_ids`]).
pub fn image_text(n: usize) -> String {
    format!(
        "<|vision_start|>{}<|vision_end|>",
        "<|image_pad|>".repeat(n)
    )
}

/// An image of `n` visual tokens as ids.
pub fn image_ids(special: &SpecialTokens, n: usize) -> Vec<u32> {
    let mut ids = Vec::with_capacity(n + 2);
    ids.push(special.vision_start);
    ids.extend(std::iter::repeat_n(special.image_pad, n));
    ids.push(special.vision_end);
    ids
}

/// An image of `n` visual tokens as people read a prompt (`--show-prompt`): one placeholder
/// instead of `n` pads.
pub fn image_placeholder(n: usize) -> String {
    format!("<|vision_start|><image × {n}><|vision_end|>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_turn_then_the_answer_opening_is_qwens_chatml() {
        let text = format!("{}{}Hello{}", open(Role::User), image_text(2), answer());
        assert_eq!(
            text,
            "<|im_start|>user\n<|vision_start|><|image_pad|><|image_pad|><|vision_end|>Hello\
             <|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(
            turn(Role::System, "Be brief."),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
        );
    }
}
