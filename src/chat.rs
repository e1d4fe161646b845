//! Qwen's chat format, rendered in one place: turns (`<|im_start|>role … <|im_end|>`) and the
//! image run (`<|vision_start|>`, one `<|image_pad|>` per visual token, `<|vision_end|>`).
//!
//! The planner's agent and grader prompts, `sightline generate` and `--show-prompt` all build
//! their text from these functions, so a change of template is made once. A model family's
//! [`Template`] says how its assistant turn opens: Qwen3-VL Instruct models answer right after
//! `<|im_start|>assistant\n`; Thinking variants (Qwen3-VL-*-Thinking and the fine-tunes made
//! from them) are trained with `<think>\n` after it, write their reasoning, close it with
//! `</think>` and then answer. The image run is the one part that is not tokenized from text:
//! its pads are pushed as ids ([`image_ids`]), and shown in prompts written for people as one
//! placeholder ([`image_placeholder`]).

use crate::named_text::named_text;
use crate::tokenizer::SpecialTokens;

/// The token that opens a Thinking variant's reasoning (one added token in Qwen3's vocabulary).
pub const THINK_OPEN: &str = "<think>";

/// The token that closes it; the answer follows.
pub const THINK_CLOSE: &str = "</think>";

/// How a model family's chat template opens the assistant's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Template {
    /// Qwen3-VL Instruct (`qwen3-vl`): the answer starts right after the opening.
    #[default]
    Instruct,
    /// Qwen3-VL Thinking (`qwen3-vl-thinking`): the template puts `<think>\n` after the
    /// opening; the model writes its thought, `</think>`, and then the answer.
    Thinking,
}

impl Template {
    /// Every template, in the order `sightline models info` lists them.
    pub const ALL: &'static [Template] = &[Template::Instruct, Template::Thinking];

    /// The name manifests use.
    pub fn name(self) -> &'static str {
        match self {
            Template::Instruct => "qwen3-vl",
            Template::Thinking => "qwen3-vl-thinking",
        }
    }

    /// Whether the answer starts with a thought closed by [`THINK_CLOSE`].
    pub fn thinks(self) -> bool {
        self == Template::Thinking
    }
}

named_text!(Template, "chat template");

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
/// stops for the model to continue (an Instruct model's opening).
pub fn answer() -> String {
    format!("{END}{}", open(Role::Assistant))
}

/// [`answer`] as `template` opens it: a Thinking variant's prompt ends inside its opened
/// thought (`<think>\n`), as its chat template renders the generation prompt.
pub fn answer_for(template: Template) -> String {
    match template {
        Template::Instruct => answer(),
        Template::Thinking => format!("{}{THINK_OPEN}\n", answer()),
    }
}

/// [`answer`] for a question whose answer is read at once (the grader's yes/no): a Thinking
/// variant gets its thought already closed and empty (`<think>\n\n</think>\n\n`, the form
/// Qwen3's templates use when thinking is off), so its next token is the answer itself.
pub fn answer_without_thought(template: Template) -> String {
    match template {
        Template::Instruct => answer(),
        Template::Thinking => format!("{}{THINK_OPEN}\n\n{THINK_CLOSE}\n\n", answer()),
    }
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
    use crate::error::Result;

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

    /// The Thinking opening is Qwen3-VL-Thinking's generation prompt (`<think>\n` after the
    /// assistant's opening); with no thought wanted it is closed at once, as Qwen3 renders a
    /// turn with thinking off.
    #[test]
    fn a_thinking_template_opens_the_answer_inside_a_thought() -> Result<()> {
        assert_eq!(
            answer_for("qwen3-vl-thinking".parse()?),
            "<|im_end|>\n<|im_start|>assistant\n<think>\n"
        );
        assert_eq!(answer_for(Template::Instruct), answer());
        assert_eq!(
            answer_without_thought(Template::Thinking),
            "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        );
        assert!("qwen3-vl-think".parse::<Template>().is_err());
        Ok(())
    }

    #[test]
    fn template_names_round_trip_and_an_unknown_one_lists_the_known() {
        for t in Template::ALL {
            assert_eq!(format!(" {t} ").parse::<Template>().ok(), Some(*t));
            let json = serde_json::Value::String(t.name().into());
            assert_eq!(serde_json::from_value::<Template>(json).ok(), Some(*t));
        }
        let known: Vec<&str> = Template::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(
            "x".parse::<Template>().err().map(|e| e.to_string()),
            Some(format!(
                "invalid input: unknown chat template \"x\"; known: {}",
                known.join(", ")
            ))
        );
    }
}
