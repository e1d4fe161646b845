//! A turn's answer in the model family's own language: the [`Dialect`] it was trained to
//! answer in and the [`Template`] that opens its turn (a Thinking variant's thought first).
//!
//! [`AnswerSpec::new`] resolves the view and [`GrammarOptions`] like [`MoveSpec::new`] (which
//! it keeps: the actions the runtime can run this turn, the limits), then renders the
//! dialect's grammar from the vocabulary's description of it ([`crate::moves::dialect`]):
//!
//! - `json`: the move grammar itself ([`MoveSpec::lark`]);
//! - the `computer_use` tool call, with or without its `Action:` line (`computer_use.rs`):
//!   only the tool's actions the runtime executes, coordinates on the 0–1000 grid, pyautogui
//!   key names, numbers within the move's limits;
//! - the grounding points (`grounding.rs`).
//!
//! For a Thinking template the grammar starts with the thought, free text bounded by
//! [`MoveLimits::thought_tokens`](crate::moves::MoveLimits::thought_tokens) tokens, then
//! `</think>` (forced once the bound is reached; with a bound of 0 the thought is empty) and
//! the answer. [`decode_answer`] decodes, splits the thought off at the `</think>` token and
//! translates the answer into a [`NextMove`].

mod computer_use;
mod grounding;

use candle_core::Tensor;
use cel_contracts::{NextMove, PlanningView};
use toktrie::TokTrie;

use super::bounds::TextSpan;
use super::decoder::{decode, move_thought, parse_move, DecodeOptions, Decoded};
use super::grammar::{Grammar, GrammarEngine};
use super::schema::{GrammarOptions, MoveSpec, STRING_OVERSHOOT_TOKENS};
use super::token_env::TokenEnv;
use crate::chat::{Template, THINK_CLOSE};
use crate::error::{Error, Result};
use crate::model::VisionLanguageModel;
use crate::moves::dialect::computer_use::{ToolLanguage, TOOL_CALL_CLOSE, TOOL_CALL_OPEN};
use crate::moves::dialect::{self, grounding as grounding_vocab};
use crate::moves::{ActionKind, Dialect};

/// One turn's answer grammar, in a dialect and template (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerSpec {
    dialect: Dialect,
    template: Template,
    moves: MoveSpec,
    thought_tokens: usize,
    tool: Option<ToolLanguage>,
    instruction: String,
}

impl AnswerSpec {
    /// Resolve `view` and `options` into this turn's answer grammar in `dialect`, opened as
    /// `template` opens it. A Thinking template's thought takes the place of the JSON move's
    /// `"thought"` key, with the same bound. Errors: limits that allow nothing
    /// ([`MoveSpec::new`]), and a grounding dialect on a turn that allows no click at an
    /// `xy:` point (its answers are nothing else).
    pub fn new(
        view: &PlanningView,
        options: &GrammarOptions,
        dialect: Dialect,
        template: Template,
    ) -> Result<Self> {
        let thought_tokens = options.limits.thought_tokens;
        let mut options = options.clone();
        if template.thinks() || dialect != Dialect::Json {
            // The thought is the template's (or the dialect's own), not a JSON key.
            options.limits.thought_tokens = 0;
        }
        let moves = MoveSpec::new(view, &options)?;
        let clicks =
            moves.allowed_actions().contains(&ActionKind::Click) && moves.coordinate_targets();
        if dialect.is_grounding() && !clicks {
            return Err(Error::invalid_input(format!(
                "the {dialect} dialect answers with a click at a point, and this turn allows no \
                 click at an xy: point (the runtime needs native input and coordinate targets)"
            )));
        }
        let tool = dialect.is_computer_use().then(|| {
            ToolLanguage::new(
                moves.allowed_actions(),
                moves.coordinate_targets(),
                moves.limits().max_steps,
                dialect.has_action_line(),
            )
        });
        Ok(AnswerSpec {
            dialect,
            template,
            moves,
            thought_tokens,
            tool,
            instruction: view.goal.clone(),
        })
    }

    /// The dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The template.
    pub fn template(&self) -> Template {
        self.template
    }

    /// What the runtime allows this turn, and the limits (the JSON dialect's whole grammar).
    pub fn moves(&self) -> &MoveSpec {
        &self.moves
    }

    /// The `computer_use` tool as offered this turn (the computer-use dialects).
    pub fn tool(&self) -> Option<&ToolLanguage> {
        self.tool.as_ref()
    }

    /// The special tokens the grammar emits, which the model's tokenizer must have.
    pub fn special_tokens(dialect: Dialect, template: Template) -> Vec<&'static str> {
        let mut tokens = Vec::new();
        if template.thinks() {
            tokens.push(THINK_CLOSE);
        }
        if dialect.is_computer_use() {
            tokens.extend([TOOL_CALL_OPEN, TOOL_CALL_CLOSE]);
        }
        tokens
    }

    /// The grammar in llguidance's Lark dialect, its special tokens written by name
    /// (`<</think>>`, for people; [`lark_for`](Self::lark_for) is what compiles).
    pub fn lark(&self) -> String {
        let answer_rule = if self.template.thinks() {
            "answer"
        } else {
            "start"
        };
        let mut g = String::new();
        if self.template.thinks() {
            g += &if self.thought_tokens > 0 {
                format!("start: THOUGHT <{THINK_CLOSE}> THINK_END answer\nTHOUGHT: /(?s:.+)/\n")
            } else {
                format!("start: \"\\n\" <{THINK_CLOSE}> \"\\n\\n\" answer\n")
            };
            // `</think>` then a blank line (Qwen3's), or one newline (UI-MOPD's training
            // targets); either may start the answer.
            g += "THINK_END: /\\n\\n?/\n";
        }
        g += &match self.dialect {
            Dialect::Json => self.moves.lark_from(answer_rule),
            Dialect::ComputerUse | Dialect::ComputerUseAction => {
                self.computer_use_lark(answer_rule)
            }
            Dialect::GroundingPoint | Dialect::GroundingAnswer => self.grounding_lark(answer_rule),
        };
        g
    }

    /// [`lark`](Self::lark) as llguidance compiles it against `env`: each special token the
    /// answer is spelled with (`<tool_call>`, `</think>`) named by its id (`<[151657]>`), the
    /// only way llguidance's Lark names a token whose name is not `<|…|>`-shaped. Errors: a
    /// tokenizer without them ([`check_special_tokens`]).
    pub fn lark_for(&self, env: &TokenEnv) -> Result<String> {
        check_special_tokens(env, self.dialect, self.template)?;
        let trie = env.tok_env().tok_trie();
        let mut lark = self.lark();
        for tag in AnswerSpec::special_tokens(self.dialect, self.template) {
            if let Some(id) = trie.get_special_token(tag) {
                lark = lark.replace(&format!("<{tag}>"), &format!("<[{id}]>"));
            }
        }
        Ok(lark)
    }

    /// The free-text spans the decoder bounds: the thought, and the dialect's own.
    pub fn spans(&self) -> Vec<TextSpan> {
        let mut spans = Vec::new();
        if self.template.thinks() && self.thought_tokens > 0 {
            spans.push(TextSpan {
                after: Vec::new(),
                end: TokTrie::SPECIAL_TOKEN_MARKER,
                tokens: self.thought_tokens,
            });
        }
        spans.extend(match self.dialect {
            Dialect::ComputerUseAction => self.computer_use_spans(),
            Dialect::GroundingAnswer => self.grounding_spans(),
            _ => Vec::new(),
        });
        spans
    }

    /// The most tokens any answer of this grammar can take: the decoder's budget. An
    /// over-estimate (fixed text counted a token per byte), never an under-estimate.
    pub fn max_tokens(&self) -> usize {
        let thought = if !self.template.thinks() {
            0
        } else if self.thought_tokens > 0 {
            // The thought, `</think>`, the blank line.
            self.thought_tokens + STRING_OVERSHOOT_TOKENS + 1 + 2
        } else {
            1 + 1 + 2
        };
        thought
            + match self.dialect {
                Dialect::Json => self.moves.max_move_tokens(),
                Dialect::ComputerUse | Dialect::ComputerUseAction => self.computer_use_max_tokens(),
                Dialect::GroundingPoint | Dialect::GroundingAnswer => self.grounding_max_tokens(),
            }
    }

    /// Compile the grammar against `env`, with its bounds. Errors: a tokenizer without the
    /// special tokens the answer needs ([`Error::Tokenizer`] naming them), or llguidance
    /// rejecting the grammar ([`Error::Grammar`], a bug).
    pub fn grammar(&self, env: &TokenEnv) -> Result<Grammar> {
        check_special_tokens(env, self.dialect, self.template)?;
        if self.dialect == Dialect::Json && !self.template.thinks() {
            return Grammar::for_move(env, &self.moves, GrammarEngine::Lark);
        }
        Ok(Grammar::from_lark(env, &self.lark_for(env)?)?.with_bounds(
            Some(self.moves.string_caps()),
            self.spans(),
            self.max_tokens(),
        ))
    }

    /// Translate an answer (the text after the thought) into a [`NextMove`]: see
    /// [`dialect::computer_use::translate`] and [`dialect::grounding::translate`]; JSON moves
    /// are parsed ([`parse_move`]). Errors are [`Error::Decode`] with the text.
    pub fn translate(&self, answer: &str) -> Result<NextMove> {
        let limits = self.moves.limits();
        match self.dialect {
            Dialect::Json => parse_move(answer),
            Dialect::ComputerUse | Dialect::ComputerUseAction => {
                dialect::computer_use::translate(answer, self.dialect.has_action_line(), limits)
            }
            Dialect::GroundingPoint => grounding_vocab::translate(answer, true, &self.instruction),
            Dialect::GroundingAnswer => {
                grounding_vocab::translate(answer, false, &self.instruction)
            }
        }
    }
}

/// Checks that `env`'s vocabulary has every special token `dialect` and `template` emit.
pub(crate) fn check_special_tokens(
    env: &TokenEnv,
    dialect: Dialect,
    template: Template,
) -> Result<()> {
    let trie = env.tok_env().tok_trie();
    let missing: Vec<&str> = AnswerSpec::special_tokens(dialect, template)
        .into_iter()
        .filter(|t| trie.get_special_token(t).is_none())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::tokenizer(format!(
            "the tokenizer has no {} token, which the {dialect} dialect with the {template} \
             template emits: not a Qwen3 tokenizer",
            missing.join(" or ")
        )))
    }
}

/// A decoded answer: the move, the thought, and how it was decoded.
#[derive(Debug, Clone)]
pub struct DecodedAnswer {
    /// The move the answer translates to.
    pub next_move: NextMove,
    /// The model's thought, when it wrote one (a Thinking variant's, the JSON `"thought"`,
    /// MAI-UI's grounding reasoning), trimmed; never part of the move.
    pub thought: Option<String>,
    /// The answer's text after the thought.
    pub answer: String,
    /// Its tokens, text and stats.
    pub decoded: Decoded,
}

/// [`decode`] under `spec`'s grammar (compiled by [`AnswerSpec::grammar`]), split the
/// thought off at the `</think>` token (a thought may spell `</think>` in plain text; only
/// the token ends it) and translate the rest ([`AnswerSpec::translate`]).
pub fn decode_answer(
    model: &mut dyn VisionLanguageModel,
    first_logits: &Tensor,
    spec: &AnswerSpec,
    grammar: &Grammar,
    options: &DecodeOptions,
) -> Result<DecodedAnswer> {
    let decoded = decode(model, first_logits, grammar, options)?;
    let env = grammar.env();
    let text_of = |tokens: &[u32]| {
        String::from_utf8(env.decode_bytes(tokens))
            .map_err(|e| Error::decode_caused(decoded.text.clone(), "output is not UTF-8", e))
    };
    let close = env.tok_env().tok_trie().get_special_token(THINK_CLOSE);
    let split = spec
        .template
        .thinks()
        .then(|| decoded.tokens.iter().position(|&t| Some(t) == close))
        .flatten();
    let (thought, answer) = match split {
        Some(i) => (
            Some(text_of(&decoded.tokens[..i])?),
            text_of(&decoded.tokens[i + 1..])?,
        ),
        None => (None, decoded.text.clone()),
    };
    let next_move = spec.translate(&answer)?;
    let dialect_thought = match spec.dialect {
        Dialect::Json => move_thought(&answer),
        Dialect::GroundingAnswer => answer
            .split_once(grounding_vocab::THINK_OPEN)
            .and_then(|(_, rest)| rest.split_once(grounding_vocab::THINK_CLOSE))
            .map(|(thought, _)| thought.to_string()),
        _ => None,
    };
    let thought = thought
        .or(dialect_thought)
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty());
    Ok(DecodedAnswer {
        next_move,
        thought,
        answer,
        decoded,
    })
}
