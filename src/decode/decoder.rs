//! The decode loop: mask → sample → commit, with forced-token runs fed to the model
//! as one multi-token forward pass.

use std::time::{Duration, Instant};

use candle_core::Tensor;
use cel_contracts::NextMove;
use llguidance::Matcher;
use toktrie::{SimpleVob, TokenId};

use super::beside::{mask_now, rehearse, takes, Ahead, Beside, FreeTextProbes, Next};
use super::bounds::Bounds;
use super::grammar::Grammar;
use super::sampler::{Sampler, Sampling};
use crate::error::{BoxError, Error, Result};
use crate::kernels::{greedy_order, TokenPicker};
use crate::model::{Moment, VisionLanguageModel};

/// How to decode.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeOptions {
    /// Token choice; greedy by default.
    pub sampling: Sampling,
    /// Most tokens emitted (sampled + forced, EOS not counted) before giving up, for
    /// grammars that do not bound their own length. Running out is an
    /// [`Error::Decode`] carrying the text so far. Move grammars ignore it: their
    /// budget is [`Grammar::max_tokens`], derived from the grammar's own bounds, so
    /// no move can run out of tokens (bound the move with [`MoveLimits`] instead).
    /// Default 1,024.
    ///
    /// [`MoveLimits`]: super::MoveLimits
    pub budget_tokens: usize,
    /// Feed each forced-token run in one forward pass (default). Off feeds them one
    /// token per pass: the same output, more passes (kept for tests and benches).
    pub batch_forced: bool,
    /// Greedy decoding on the CPU: try the model's own choices against the grammar
    /// before computing a mask (default; see [`decode`]). Off computes every mask: the
    /// same output, more grammar time (kept for tests and benches).
    pub guess_first: bool,
    /// Whether the grammar prepares each step while the forward pass before it computes
    /// (see the `beside` module): the commit of a free-text token, the next mask, and
    /// copies of the grammar advanced by the few tokens that mask leaves. `None` (default):
    /// where the model can ([`VisionLanguageModel::works_beside_pass`]): on a device (CUDA,
    /// Metal), whose pass runs while the host works, and on the CPU where the pass's
    /// products take the work onto the calling thread while the pool's other threads carry
    /// the pass on; otherwise the CPU's own order (the mask right after the commit, before
    /// the pass). `Some(false)`: on the CPU its own order; on a device every commit after
    /// its sample, the mask still while the pass is in flight. `Some(true)`: prepared
    /// beside the pass, after it where the model cannot run it inside. The same output
    /// either way (kept for tests and benches).
    pub beside_pass: Option<bool>,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            sampling: Sampling::Greedy,
            budget_tokens: 1024,
            batch_forced: true,
            guess_first: true,
            beside_pass: None,
        }
    }
}

/// Where the time of one decode went, and how many tokens were forced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodeStats {
    /// Tokens emitted (sampled + forced), EOS not counted.
    pub tokens: usize,
    /// Tokens the grammar forced (fed without sampling).
    pub forced_tokens: usize,
    /// Model forward passes ([`VisionLanguageModel::feed`] calls).
    pub forward_calls: usize,
    /// Time of each mask computation, in order (beside the pass or not).
    pub mask_times: Vec<Duration>,
    /// Grammar time besides masks: commits, forced-token computation, and the checks
    /// of guessed tokens.
    pub commit_time: Duration,
    /// Grammar time of each sampled token on the critical path, in order: its mask if one
    /// was computed there, its check if it was guessed, its commit and the forced run
    /// after it (what ran beside the pass is in `beside_time` instead).
    pub step_grammar_times: Vec<Duration>,
    /// For each of `step_grammar_times`: whether that commit computed a forced run on the
    /// critical path (llguidance tokenizes the run and walks the token trie for token
    /// healing: the slowest commits; a run taken from a grammar copy is not counted).
    pub step_computed_run: Vec<bool>,
    /// Sampled tokens the grammar took as the model chose them, with no mask computed.
    pub guessed_tokens: usize,
    /// Of those, the ones that were not the model's first choice (the grammar refused
    /// the ones before them).
    pub guessed_after_refusals: usize,
    /// Time in the model (`feed`, and reading the logits back when the model is on
    /// the CPU). A CPU pass that ran the grammar's work inside it (`beside_time`) counts
    /// what that work cost it: the pass's own time, longer by about the work's time
    /// divided by the threads.
    pub model_time: Duration,
    /// Time spent sampling (on a GPU model: the mask upload, the kernel and the
    /// 4-byte read back that waits for the forward pass).
    pub sample_time: Duration,
    /// Grammar copies advanced ahead of a sample ([`DecodeOptions::beside_pass`]).
    pub ahead_copies: usize,
    /// Sampled tokens whose commit was one of those copies.
    pub committed_ahead: usize,
    /// Sampled tokens of free text fed before their commit, which ran beside the pass.
    pub committed_beside: usize,
    /// Of those, the ones that forced a run after all, fed in a pass of its own.
    pub late_runs: usize,
    /// Commits rehearsed at the end of a CPU pass, on a copy thrown away
    /// (`beside::rehearse`): where the step after it may commit a forced run with no copy
    /// made for it, so that commit finds the grammar's tables in the caches.
    pub rehearsals: usize,
    /// Grammar time beside the forward pass (its masks are in `mask_times` too, but not
    /// in `step_grammar_times`): on a device while the pass is in flight, on the CPU inside
    /// the pass (see `DecodeOptions::beside_pass`), or after a pass that could not take
    /// it where `beside_pass` forces the order.
    pub beside_time: Duration,
}

impl DecodeStats {
    /// Total grammar time: masks plus commits.
    pub fn grammar_time(&self) -> Duration {
        self.mask_times.iter().sum::<Duration>() + self.commit_time
    }

    /// Share of emitted tokens that were forced, 0 when nothing was emitted.
    pub fn forced_share(&self) -> f64 {
        if self.tokens == 0 {
            0.0
        } else {
            self.forced_tokens as f64 / self.tokens as f64
        }
    }
}

/// The result of a decode: the emitted tokens and their text.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// Emitted token ids, EOS not included.
    pub tokens: Vec<TokenId>,
    /// Their text (UTF-8; the grammars only allow whole characters).
    pub text: String,
    /// Counters and timings.
    pub stats: DecodeStats,
}

/// Decode one grammar-constrained output.
///
/// `first_logits` are the logits of the prompt's last position, `(vocab,)`: the
/// model's KV cache already holds the prompt. Each step computes the grammar mask,
/// samples among the allowed tokens, commits it, then asks the grammar for the run
/// of tokens it now forces; the sampled token and that run go to the model in one
/// `feed` call (the grammar's opening run too, before the first sample). Stops when the grammar accepts and can go no further, or when EOS
/// is chosen (only allowed where the grammar accepts). Tokens that end the grammar
/// are not fed, so the cache holds the prompt and all but the last emitted run.
///
/// Errors: [`Error::Decode`] when the budget runs out, the grammar reaches a dead
/// end (a bug), or the output is not UTF-8; [`Error::InvalidInput`] when the
/// logits are not one row as wide as the token environment; model errors as is.
pub fn decode(
    model: &mut dyn VisionLanguageModel,
    first_logits: &Tensor,
    grammar: &Grammar,
    options: &DecodeOptions,
) -> Result<Decoded> {
    let env = grammar.env();
    let eos = env.eos();
    let mut stats = DecodeStats::default();
    let mut matcher = grammar.matcher();
    let mut sampler = Sampler::new(options.sampling);
    let mut tokens: Vec<TokenId> = Vec::new();
    // Where the model's device has a kernel, the token is chosen there and only its
    // id comes back; the CPU path copies the row as before.
    let mut picker = TokenPicker::default();
    let mut logits = StepLogits::new(first_logits, env.n_vocab())?;
    let mut bounds = Bounds::new(grammar.string_caps(), grammar.spans());
    // A grammar that knows its longest output (every move grammar) sets the budget
    // itself, so a decode never runs out before the move is complete.
    let budget = grammar.max_tokens().unwrap_or(options.budget_tokens);

    let text_of =
        |tokens: &[TokenId]| String::from_utf8_lossy(&env.decode_bytes(tokens)).into_owned();
    let fail = |reason: String, tokens: &[TokenId]| Error::decode(text_of(tokens), reason);
    // A failure with the grammar engine's (or decoder's) error kept as the cause.
    let fail_caused = |reason: &str, cause: BoxError, tokens: &[TokenId]| {
        Error::decode_caused(text_of(tokens), reason, cause)
    };

    // Tokens emitted but not yet fed: the grammar's opening run, then each sampled
    // token with the run it forces.
    let t = Instant::now();
    let mut unfed: Vec<TokenId> = matcher.consume_ff_tokens();
    stats.commit_time += t.elapsed();
    if let Some(e) = matcher.get_error() {
        return Err(fail(format!("grammar forced tokens: {e}"), &tokens));
    }
    stats.forced_tokens += unfed.len();
    tokens.extend_from_slice(&unfed);
    unfed
        .iter()
        .for_each(|&t| bounds.push(env.token_bytes_of(t)));

    // Where the model works beside its pass (a device's pass in flight; the CPU model's
    // calling thread inside its products), the grammar prepares the next step while the
    // pass runs (see `Beside`); otherwise before the pass, right after the commit while the
    // parser's tables are warm.
    let on_cpu = first_logits.device().is_cpu();
    let mut beside = options
        .beside_pass
        .unwrap_or_else(|| model.works_beside_pass());
    let guessing = on_cpu && options.guess_first && sampler.is_greedy();
    let probes = FreeTextProbes::new(env);
    // A sampled token fed before the grammar took it: its commit runs beside the pass.
    let mut pending: Option<TokenId> = None;
    // The copies a sample did not take, freed beside the next pass.
    let mut spent: Option<Ahead> = None;
    loop {
        if pending.is_none() && matcher.is_stopped() {
            break;
        }
        if tokens.len() >= budget {
            return Err(fail(format!("token budget of {budget} exhausted"), &tokens));
        }
        let copies = beside;
        let prepare = |matcher: &mut Matcher, pending: Option<TokenId>| {
            Beside::prepare(matcher, pending, &bounds, env, &probes, guessing, copies)
                .map_err(|(reason, cause)| fail_caused(reason, cause, &tokens))
        };
        // With nothing to feed, or on the CPU without `beside`, the step is prepared
        // before the pass, on the critical path.
        let grammar_before_prepare = stats.grammar_time();
        let critical = unfed.is_empty() || (on_cpu && !beside);
        let prepared = if critical {
            let prepared = prepare(&mut matcher, pending.take())?;
            if !unfed.is_empty() {
                let t = Instant::now();
                stats.forward_calls += if options.batch_forced { 1 } else { unfed.len() };
                let row = feed_run(model, &unfed, options.batch_forced)?;
                logits = StepLogits::new(&row, env.n_vocab())?;
                stats.model_time += t.elapsed();
                unfed.clear();
            }
            prepared
        } else {
            // The grammar's work runs while the pass computes (on a device its logits are
            // read, by the sample, after the grammar is ready).
            let t = Instant::now();
            stats.forward_calls += if options.batch_forced { 1 } else { unfed.len() };
            let mut ready = None;
            let mut rehearsal = None;
            let mut work = |moment| match moment {
                Moment::Start => {
                    drop(spent.take());
                    ready = Some(prepare(&mut matcher, pending.take()));
                }
                Moment::End => {
                    // Guessing is greedy decoding on the CPU, the one order whose pass ends
                    // with the caches cold (see `beside::rehearse`).
                    if let Some(Ok(step)) = ready.as_ref().filter(|_| guessing) {
                        let t = Instant::now();
                        if rehearse(&matcher, step, env, &probes) {
                            rehearsal = Some(t.elapsed());
                        }
                    }
                }
            };
            let (row, ran) = feed_run_beside(model, &unfed, options.batch_forced, &mut work)?;
            if let Some(time) = rehearsal {
                stats.rehearsals += 1;
                stats.beside_time += time;
            }
            logits = StepLogits::new(&row, env.n_vocab())?;
            stats.model_time += t.elapsed();
            unfed.clear();
            if !ran && options.beside_pass.is_none() {
                // The model's pass did not take the work (the CPU model on kernels that
                // take none): the CPU's order from the next step on, if the model says so.
                beside = model.works_beside_pass();
            }
            ready
                .ok_or_else(|| Error::internal("the grammar's work beside the pass never ran"))??
        };
        // What the pass hid: in flight on a device, inside it on the CPU. Where it ran
        // after a pass that could not take it (forced, or the step that found out), it
        // is counted apart all the same: what a pass would hide.
        let in_flight = !critical;
        let mask_time = prepared.mask_time.unwrap_or_default();
        match in_flight {
            false => stats.commit_time += prepared.time.saturating_sub(mask_time),
            true => stats.beside_time += prepared.time,
        }
        stats.mask_times.extend(prepared.mask_time);
        if !prepared.late_forced.is_empty() {
            // A commit made beside the pass forced a run after all: it is fed in a pass
            // of its own (the same tokens, one pass more).
            stats.late_runs += 1;
            stats.forced_tokens += prepared.late_forced.len();
            tokens.extend_from_slice(&prepared.late_forced);
            prepared
                .late_forced
                .iter()
                .for_each(|&t| bounds.push(env.token_bytes_of(t)));
            unfed = prepared.late_forced;
            continue;
        }
        let Some(next) = prepared.next else {
            break;
        };
        let grammar_before = match in_flight {
            false => grammar_before_prepare,
            true => stats.grammar_time(),
        };
        let (choice, mask_empty, mut ahead) = match next {
            Next::Guess => {
                // Only a guessing decode is handed a guess to make (`Beside::prepare`).
                match guess(&mut matcher, logits.host()?, env, &mut stats) {
                    Some(token) => (Some(token), false, Ahead::default()),
                    None => {
                        let t = Instant::now();
                        let mask = mask_now(&mut matcher, &bounds, env)
                            .map_err(|(reason, cause)| fail_caused(reason, cause, &tokens))?;
                        stats.mask_times.push(t.elapsed());
                        let choice =
                            sample(&mut sampler, &mut picker, &mut logits, &mask, &mut stats)?;
                        (choice, mask.is_zero(), Ahead::default())
                    }
                }
            }
            Next::Mask(mask, ahead) => {
                let choice = sample(&mut sampler, &mut picker, &mut logits, &mask, &mut stats)?;
                (choice, mask.is_zero(), ahead)
            }
        };
        let token = choice.ok_or_else(|| {
            let reason = if mask_empty {
                "the grammar allows no token"
            } else {
                "every token the grammar allows has a NaN logit (the model output is broken)"
            };
            fail(reason.into(), &tokens)
        })?;
        stats.ahead_copies += ahead.len();
        let t = Instant::now();
        let mut computed_run = false;
        let forced = match ahead.take(token) {
            Some(committed) => {
                matcher = committed.matcher;
                stats.committed_ahead += 1;
                tokens.push(token);
                committed.forced
            }
            None if beside
                && prepared.free_text
                && token != eos
                && !bounds.may_close(env, token) =>
            {
                // Free text goes on after this token, so it forces nothing: it is fed
                // now and committed beside the pass.
                pending = Some(token);
                stats.committed_beside += 1;
                tokens.push(token);
                Vec::new()
            }
            None => {
                matcher
                    .consume_token(token)
                    .map_err(|e| fail_caused("grammar commit", e.into(), &tokens))?;
                if token == eos {
                    stats.commit_time += t.elapsed();
                    stats
                        .step_grammar_times
                        .push(stats.grammar_time() - grammar_before);
                    stats.step_computed_run.push(false);
                    break;
                }
                tokens.push(token);
                let forced = matcher.consume_ff_tokens();
                if let Some(e) = matcher.get_error() {
                    return Err(fail(format!("grammar forced tokens: {e}"), &tokens));
                }
                computed_run = !forced.is_empty();
                forced
            }
        };
        // The copies not taken are freed beside the next pass where there is one (the
        // next step is prepared there), else here, on the clock.
        match beside {
            true => spent = Some(ahead),
            false => drop(ahead),
        }
        unfed.push(token);
        stats.commit_time += t.elapsed();
        stats
            .step_grammar_times
            .push(stats.grammar_time() - grammar_before);
        stats.step_computed_run.push(computed_run);
        stats.forced_tokens += forced.len();
        tokens.extend_from_slice(&forced);
        unfed.extend_from_slice(&forced);
        bounds.push(env.token_bytes_of(token));
        forced
            .iter()
            .for_each(|&t| bounds.push(env.token_bytes_of(t)));
    }

    stats.tokens = tokens.len();
    let text = String::from_utf8(env.decode_bytes(&tokens))
        .map_err(|e| fail_caused("output is not UTF-8", e.into(), &tokens))?;
    Ok(Decoded {
        tokens,
        text,
        stats,
    })
}

/// A decoded move: the parsed [`NextMove`] and how it was decoded.
#[derive(Debug, Clone)]
pub struct DecodedMove {
    /// The move.
    pub next_move: NextMove,
    /// Its tokens, text and stats.
    pub decoded: Decoded,
}

/// [`decode`] with a move grammar, then parse the JSON into a [`NextMove`]. A parse
/// failure is an [`Error::Decode`] with the text: a bug, since the grammar allows
/// only valid moves.
pub fn decode_move(
    model: &mut dyn VisionLanguageModel,
    first_logits: &Tensor,
    grammar: &Grammar,
    options: &DecodeOptions,
) -> Result<DecodedMove> {
    let decoded = decode(model, first_logits, grammar, options)?;
    let next_move = parse_move(&decoded.text)?;
    Ok(DecodedMove { next_move, decoded })
}

/// Parse move JSON; failures are [`Error::Decode`] with the text attached. A leading
/// `"thought"` key (see [`MoveLimits::thought_tokens`](super::MoveLimits)) is
/// dropped: it is the model's note to itself, not part of the move.
pub fn parse_move(text: &str) -> Result<NextMove> {
    // The parser's message is the reason: kept as the cause, shown alone.
    let failed = |e: serde_json::Error| Error::decode_caused(text, "", e);
    let mut value: serde_json::Value = serde_json::from_str(text).map_err(failed)?;
    if let Some(object) = value.as_object_mut() {
        object.remove("thought");
    }
    serde_json::from_value(value).map_err(failed)
}

/// The `"thought"` of a decoded move's text, if it has one.
pub fn move_thought(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.get("thought")?.as_str().map(str::to_string)
}

/// Read the output of a [`Grammar::sentence`] decode (a JSON string) as text.
pub fn parse_sentence(text: &str) -> Result<String> {
    serde_json::from_str(text).map_err(|e| Error::decode_caused(text, "", e))
}

/// The logits of the current step, kept where the model produced them. A host copy
/// is made at once for a CPU model (the sampler reads it in place) and on demand
/// elsewhere (only when the sampling has no device rule, such as top-p below 1).
struct StepLogits {
    row: Tensor,
    host: Option<Vec<f32>>,
}

impl StepLogits {
    /// `logits`, checked to be one row of `n_vocab`.
    fn new(logits: &Tensor, n_vocab: usize) -> Result<Self> {
        let dims = logits.dims();
        if dims != [n_vocab] {
            return Err(Error::invalid_input(format!(
                "logits have shape {dims:?}, expected [{n_vocab}] (one row of the token environment's width)"
            )));
        }
        let mut step = StepLogits {
            row: logits.clone(),
            host: None,
        };
        if logits.device().is_cpu() {
            step.host()?;
        }
        Ok(step)
    }

    /// The row as host f32, copied on first use.
    fn host(&mut self) -> Result<&[f32]> {
        if self.host.is_none() {
            let row = self
                .row
                .to_dtype(candle_core::DType::F32)?
                .to_vec1::<f32>()?;
            self.host = Some(row);
        }
        Ok(self.host.as_deref().unwrap_or_default())
    }
}

/// Greedy decoding on the CPU tries the model's own choices before a mask.
///
/// Where the grammar takes the unmasked argmax it is the masked argmax too (the same
/// lowest-id maximum), so the output is the one a mask would give; a check is one
/// lexer step, while a mask costs 5–100 µs (the first tokens of a free string walk
/// thousands of trie nodes, because tokens holding a quote may close the string and
/// run into what follows). Where the grammar refuses it, the next ones in the same order
/// ([`greedy_order`]) are checked, [`GUESSES`] in all: the first one taken is the masked
/// argmax as well. Only where all are refused (or the order reaches a token a check
/// cannot decide for the mask) is the mask computed after the pass, on the critical
/// path, so guesses are tried only where the grammar would take prose (a probe,
/// `beside::FreeTextProbes`): where strings are open, masks are the slowest and any
/// model's choice the likeliest to be taken; elsewhere the mask is small and is computed
/// beside the pass.
///
/// End of sequence is never guessed (the mask decides where the grammar accepts), nor a
/// token with no bytes (padding ids): reaching one ends the guesses.
fn guess(
    matcher: &mut Matcher,
    logits: &[f32],
    env: &super::TokenEnv,
    stats: &mut DecodeStats,
) -> Option<TokenId> {
    let t = Instant::now();
    let order = greedy_order(logits, GUESSES);
    stats.sample_time += t.elapsed();
    let t = Instant::now();
    let taken = order
        .into_iter()
        .take_while(|&token| token != env.eos() && !env.token_bytes_of(token).is_empty())
        .enumerate()
        .find(|&(_, token)| takes(matcher, token));
    stats.commit_time += t.elapsed();
    stats.guessed_tokens += usize::from(taken.is_some());
    stats.guessed_after_refusals += usize::from(taken.is_some_and(|(i, _)| i > 0));
    taken.map(|(_, token)| token)
}

/// The model's choices [`guess`] checks before computing a mask: a refused check costs
/// about a microsecond, a mask after the pass tens of them.
const GUESSES: usize = 8;

/// [`feed_run`] with `beside` run once, beside the first pass
/// ([`VisionLanguageModel::feed_beside`]); whether it ran while that pass computed.
fn feed_run_beside(
    model: &mut dyn VisionLanguageModel,
    run: &[TokenId],
    batched: bool,
    beside: &mut dyn FnMut(Moment),
) -> Result<(Tensor, bool)> {
    let first = if batched { run.len() } else { 1.min(run.len()) };
    let (mut last, ran) = model.feed_beside(&run[..first], beside)?;
    if first < run.len() {
        last = feed_run(model, &run[first..], false)?;
    }
    Ok((last, ran))
}

/// Feed a run of tokens: in one pass, or one pass per token.
fn feed_run(model: &mut dyn VisionLanguageModel, run: &[TokenId], batched: bool) -> Result<Tensor> {
    if batched {
        return model.feed(run, &[]);
    }
    let mut last = None;
    for &tok in run {
        last = Some(model.feed(&[tok], &[])?);
    }
    last.ok_or_else(|| Error::internal("an empty token run to feed"))
}

/// One token under `mask`, with the sampling time counted; an error naming why none
/// could be chosen.
fn sample(
    sampler: &mut Sampler,
    picker: &mut TokenPicker,
    logits: &mut StepLogits,
    mask: &SimpleVob,
    stats: &mut DecodeStats,
) -> Result<Option<TokenId>> {
    let t = Instant::now();
    let token = choose(sampler, picker, logits, mask)?;
    stats.sample_time += t.elapsed();
    Ok(token)
}

/// One token under `mask`: on the logits' device when they are not on the host and
/// the sampling has a device rule (one kernel, 4 bytes back), else on the host.
fn choose(
    sampler: &mut Sampler,
    picker: &mut TokenPicker,
    logits: &mut StepLogits,
    mask: &SimpleVob,
) -> Result<Option<TokenId>> {
    if logits.host.is_none() {
        if let Some(rule) = sampler.device_rule(mask.num_set()) {
            return picker.pick(&logits.row, mask.as_slice(), rule);
        }
    }
    Ok(sampler.sample(logits.host()?, mask))
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;
    use candle_core::Device;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::error::Error as _;

    /// Text that is not a move is an [`Error::Decode`] carrying the text, reading as the
    /// parser's message did, with serde_json's error kept as its source.
    #[test]
    fn a_move_that_does_not_parse_keeps_the_parsers_error_as_source() -> anyhow::Result<()> {
        for text in [r#"{"kind":"#, r#"{"kind":"teleport"}"#] {
            let err = match parse_move(text) {
                Ok(mv) => anyhow::bail!("{text} parsed as {mv:?}"),
                Err(err) => err,
            };
            anyhow::ensure!(
                matches!(&err, Error::Decode { text: t, .. } if t == text),
                "{err:?}"
            );
            let source = err.source().context("no source")?;
            anyhow::ensure!(
                source.downcast_ref::<serde_json::Error>().is_some(),
                "{source:?}"
            );
            anyhow::ensure!(
                err.to_string() == format!("decoded text is not a valid move ({source}): {text}"),
                "{err}"
            );
        }
        Ok(())
    }

    /// The device route (`TokenPicker`, here on its CPU backend, as a GPU model would
    /// take it) and the host route (`Sampler::sample`) choose the same greedy tokens.
    #[test]
    fn device_and_host_routes_choose_the_same_greedy_token() -> anyhow::Result<()> {
        let n = 1000;
        let mut rng = StdRng::seed_from_u64(21);
        let mut sampler = Sampler::new(Sampling::Greedy);
        let mut picker = TokenPicker::default();
        for density in [0.002, 0.3, 1.0] {
            let row: Vec<f32> = (0..n).map(|_| rng.random_range(-5.0..5.0)).collect();
            let mut mask = SimpleVob::alloc(n);
            (0..n as u32)
                .filter(|_| rng.random_bool(density))
                .for_each(|t| mask.allow_token(t));
            let tensor = Tensor::new(row.as_slice(), &Device::Cpu)?;
            let mut on_device = StepLogits {
                row: tensor.clone(),
                host: None,
            };
            let mut on_host = StepLogits::new(&tensor, n)?;
            let device = choose(&mut sampler, &mut picker, &mut on_device, &mask)?;
            assert!(on_device.host.is_none(), "the device route copied the row");
            let host = choose(&mut sampler, &mut picker, &mut on_host, &mask)?;
            assert_eq!(device, host, "density {density}");
            assert!(device.is_some());
        }
        Ok(())
    }
}
