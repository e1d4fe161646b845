//! A grammar compiled against a [`TokenEnv`]: compile once per turn, then clone a
//! fresh matcher for every decode (cheap: the lexer and its caches are shared).

use std::sync::Arc;
use std::time::{Duration, Instant};

use llguidance::api::TopLevelGrammar;
use llguidance::Matcher;
use toktrie::SimpleVob;

use super::bounds::TextSpan;
use super::schema::{MoveSpec, StringCaps};
use super::token_env::TokenEnv;
use crate::error::{Error, Result};

/// Which of [`MoveSpec`]'s two renderings the engine compiles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GrammarEngine {
    /// [`MoveSpec::lark`]: strings bounded by tokens. The default: its masks inside
    /// free text come from llguidance's precomputed token slices.
    #[default]
    Lark,
    /// [`MoveSpec::json_schema`]: strings bounded by characters (`maxLength`).
    JsonSchema,
}

/// A compiled grammar, ready to decode with.
#[derive(Clone)]
pub struct Grammar {
    template: Matcher,
    env: TokenEnv,
    compile_time: Duration,
    string_caps: Option<StringCaps>,
    spans: Vec<(TextSpan, Arc<SimpleVob>)>,
    max_tokens: Option<usize>,
}

crate::debug_fields::debug_fields!(Grammar { compile_time });

impl Grammar {
    /// Compile this turn's move grammar. Cost: a few milliseconds (grows with the
    /// number of element ids). Errors with [`Error::Grammar`] if llguidance rejects
    /// it, which is a bug in [`MoveSpec`] rather than bad input: ids are escaped.
    pub fn for_move(env: &TokenEnv, spec: &MoveSpec, engine: GrammarEngine) -> Result<Self> {
        let top = match engine {
            GrammarEngine::Lark => TopLevelGrammar::from_lark(spec.lark()),
            GrammarEngine::JsonSchema => TopLevelGrammar::from_json_schema(spec.json_schema()),
        };
        let mut grammar = Self::compile(env, top)?;
        grammar.string_caps = Some(spec.string_caps());
        grammar.max_tokens = Some(spec.max_move_tokens());
        Ok(grammar)
    }

    /// A short free-text sentence (for a verdict's reason) as one JSON string of at
    /// most about `max_tokens` tokens: decode it, then read it with
    /// [`parse_sentence`](super::parse_sentence). A JSON string rather than raw text
    /// because its bound is the decoder's token cap, which closes strings cleanly
    /// (llguidance's `max_tokens` would cut inside a UTF-8 character).
    pub fn sentence(env: &TokenEnv, max_tokens: usize) -> Result<Self> {
        if max_tokens == 0 {
            return Err(Error::invalid_input("a sentence needs at least one token"));
        }
        let lark = format!(
            "start: SENTENCE\nSENTENCE: /\"{}\"/\n",
            super::schema::STRING_BODY
        );
        let mut grammar = Self::from_lark(env, &lark)?;
        grammar.string_caps = Some(StringCaps {
            by_key: Vec::new(),
            default_tokens: max_tokens,
        });
        grammar.max_tokens = Some(max_tokens + super::schema::STRING_OVERSHOOT_TOKENS);
        Ok(grammar)
    }

    /// Compile a caller's JSON schema (an OpenAI `response_format` of type `json_schema`),
    /// with llguidance's own JSON-schema support. Cost: milliseconds for ordinary schemas.
    /// Errors with [`Error::Grammar`] naming what llguidance rejects (an unsupported
    /// keyword, a contradiction). Strings the schema leaves unbounded are bounded only by
    /// the decoder's [`DecodeOptions::budget_tokens`](super::DecodeOptions::budget_tokens).
    ///
    /// The JSON is compact (`,` and `:` with no whitespace around them) unless the schema
    /// sets llguidance's own `x-guidance` options: free whitespace between tokens lets a
    /// model pad an answer until its budget runs out.
    pub fn from_json_schema(env: &TokenEnv, mut schema: serde_json::Value) -> Result<Self> {
        if let Some(object) = schema.as_object_mut() {
            object
                .entry("x-guidance")
                .or_insert_with(|| serde_json::json!({ "whitespace_flexible": false }));
        }
        Self::compile(env, TopLevelGrammar::from_json_schema(schema))
    }

    /// Compile any llguidance Lark grammar.
    pub fn from_lark(env: &TokenEnv, lark: &str) -> Result<Self> {
        Self::compile(env, TopLevelGrammar::from_lark(lark.to_string()))
    }

    fn compile(env: &TokenEnv, top: TopLevelGrammar) -> Result<Self> {
        let start = Instant::now();
        let parser = env
            .factory()?
            .create_parser(top)
            .map_err(|e| Error::grammar_caused("", e))?;
        let template = Matcher::new(Ok(parser));
        if let Some(e) = template.get_error() {
            return Err(Error::grammar(e));
        }
        Ok(Grammar {
            template,
            env: env.clone(),
            compile_time: start.elapsed(),
            string_caps: None,
            spans: Vec::new(),
            max_tokens: None,
        })
    }

    /// The bounds of an output the grammar itself does not bound: token bounds on its JSON
    /// string values, on its free-text spans (each with the tokens that end it, from `env`),
    /// and its longest output in tokens, the decoder's budget. For grammars compiled with
    /// [`Grammar::from_lark`] by a caller that knows their shape (the dialect grammars).
    pub fn with_bounds(
        mut self,
        string_caps: Option<StringCaps>,
        spans: Vec<TextSpan>,
        max_tokens: usize,
    ) -> Self {
        self.string_caps = string_caps;
        self.spans = spans
            .into_iter()
            .map(|s| {
                let closers = s.closers(&self.env);
                (s, closers)
            })
            .collect();
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Token bounds on JSON string values the decoder enforces (move grammars).
    pub fn string_caps(&self) -> Option<&StringCaps> {
        self.string_caps.as_ref()
    }

    /// Free-text spans the decoder bounds, each with the tokens that end it.
    pub fn spans(&self) -> &[(TextSpan, Arc<SimpleVob>)] {
        &self.spans
    }

    /// The most tokens any output of this grammar can take, when the grammar knows it
    /// (move and sentence grammars): the decoder's budget. `None` for a grammar
    /// compiled from arbitrary Lark, which decodes under
    /// [`DecodeOptions::budget_tokens`](super::DecodeOptions::budget_tokens).
    pub fn max_tokens(&self) -> Option<usize> {
        self.max_tokens
    }

    /// How long compiling took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// The token environment it was compiled against.
    pub fn env(&self) -> &TokenEnv {
        &self.env
    }

    /// A fresh matcher at the start of the grammar. Cost: a clone of the parser
    /// state (microseconds); the compiled lexer is shared.
    pub fn matcher(&self) -> Matcher {
        self.template.clone()
    }
}
