//! The `verify_done` grader (ARCHITECTURE.md, decision 7).
//!
//! The grader asks its own question under its own short system turn
//! ([`GRADER_SYSTEM_PROMPT`](crate::planner::prompt::GRADER_SYSTEM_PROMPT)): the screen,
//! the goal, the agent's claim, "Yes or No?". Two heads read the answer:
//!
//! - **Zero-shot** ([`GraderHead::zero_shot`]): the verdict logit is the log-sum-exp of the
//!   next-token logits over the tokenizer's single-token spellings of yes ([`YES_SPELLINGS`])
//!   minus the same over no ([`NO_SPELLINGS`]), plus [`ZERO_SHOT_BIAS`]. Only when the claim
//!   is rejected, a second, constrained one-word answer (the four [`HINT_WORDS`]' logits
//!   after a follow-up question) gives the hint.
//! - **Trained** ([`GraderHead::load`]): a linear head on the last hidden state, a
//!   safetensors file with `weight` `(5, hidden)` and `bias` `(5,)` (f32, f16 or bf16), rows
//!   `verdict, retry_last_action, different_action, different_target, give_up`, fitted by
//!   [`fit_head`] (`sightline grader fit`) on labelled
//!   [`GraderExample`](crate::moves::GraderExample)s.
//!
//! `verified = p(done) >= threshold` either way.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use cel_contracts::{DoneVerdict, NextActionHint};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::error::{Error, Result};
use crate::planner::prompt::PromptRenderer;

/// Spellings of yes the zero-shot verdict sums over (those that are one token).
pub const YES_SPELLINGS: [&str; 6] = ["Yes", " Yes", "yes", " yes", "YES", " YES"];
/// Spellings of no, likewise.
pub const NO_SPELLINGS: [&str; 6] = ["No", " No", "no", " no", "NO", " NO"];
/// The answer words for the four hints, in [`HINTS`] order.
pub const HINT_WORDS: [&str; 4] = ["Retry", "Switch", "Target", "Stop"];
/// The hints, in the head's row order (after the verdict row).
pub const HINTS: [NextActionHint; 4] = [
    NextActionHint::RetryLastAction,
    NextActionHint::DifferentAction,
    NextActionHint::DifferentTarget,
    NextActionHint::GiveUp,
];
/// Rows of the head: the verdict and the four hints.
pub const HEAD_ROWS: usize = 5;

/// The zero-shot verdict's bias, in nats. A false "done" ends a run with a wrong claim,
/// while a false "not done" costs one more turn, so a tie must reject: at -1 a model
/// whose yes and no spellings are equally likely gives p(done) = sigmoid(-1) = 0.27,
/// and the claim passes the default threshold of 0.5 once yes is e ≈ 2.7 times as likely
/// as no. Chosen by that argument, not fitted: a trained head replaces it with a bias
/// fitted on the user's own examples.
pub const ZERO_SHOT_BIAS: f32 = -1.0;

/// How a verdict is read from the model.
#[derive(Debug, Clone)]
pub enum GraderHead {
    /// Log-sum-exp of the yes spellings' logits against the no spellings'.
    ZeroShot {
        /// Token ids of the one-token yes spellings.
        yes: Vec<u32>,
        /// Token ids of the one-token no spellings.
        no: Vec<u32>,
        /// Token ids of the hint words, in [`HINTS`] order.
        hints: [u32; 4],
        /// Added to the verdict logit.
        bias: f32,
    },
    /// A linear head `(5, hidden)` + bias over the last hidden state.
    Trained {
        /// `(5, hidden)`, f32.
        weight: Tensor,
        /// `(5,)`, f32.
        bias: Tensor,
    },
}

/// The head's five numbers for one question.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraderLogits {
    /// Verdict logit: done when `sigmoid(verdict) >= threshold`.
    pub verdict: f32,
    /// One logit per hint, in [`HINTS`] order.
    pub hints: [f32; 4],
}

impl GraderHead {
    /// The zero-shot head for `renderer`'s tokenizer. Errors when the tokenizer spells
    /// neither yes nor no (or a hint word) as one token.
    pub fn zero_shot(renderer: &PromptRenderer) -> Result<Self> {
        let yes = renderer.single_token_words(&YES_SPELLINGS)?;
        let no = renderer.single_token_words(&NO_SPELLINGS)?;
        if yes.is_empty() || no.is_empty() {
            return Err(Error::tokenizer(
                "the tokenizer has no one-token spelling of yes or no: the zero-shot grader needs them",
            ));
        }
        let mut hints = [0u32; 4];
        for (slot, word) in hints.iter_mut().zip(HINT_WORDS) {
            *slot = renderer.answer_token(word)?;
        }
        Ok(GraderHead::ZeroShot {
            yes,
            no,
            hints,
            bias: ZERO_SHOT_BIAS,
        })
    }

    /// A head from explicit weights `(5, hidden)` and bias `(5,)`.
    pub fn from_tensors(weight: Tensor, bias: Tensor) -> Result<Self> {
        let (rows, _) = weight.dims2().map_err(|_| shape_error("weight", &weight))?;
        if rows != HEAD_ROWS {
            return Err(shape_error("weight", &weight));
        }
        if bias.dims() != [HEAD_ROWS] {
            return Err(shape_error("bias", &bias));
        }
        Ok(GraderHead::Trained {
            weight: weight.to_dtype(DType::F32)?,
            bias: bias.to_dtype(DType::F32)?,
        })
    }

    /// A trained head from a safetensors file (see the module docs for the format), checked
    /// against the model's hidden size.
    pub fn load(path: &Path, hidden_size: usize, device: &Device) -> Result<Self> {
        let tensors = candle_core::safetensors::load(path, device)
            .map_err(|e| Error::model_file_caused(path, "not a grader head", e))?;
        let get = |name: &str| {
            tensors
                .get(name)
                .cloned()
                .ok_or_else(|| Error::model_file(path, format!("missing tensor {name:?}")))
        };
        let head = Self::from_tensors(get("weight")?, get("bias")?)
            .map_err(|e| Error::model_file_caused(path, "", e))?;
        if let GraderHead::Trained { weight, .. } = &head {
            let (_, hidden) = weight.dims2()?;
            if hidden != hidden_size {
                return Err(Error::model_file(
                    path,
                    format!("grader head is for hidden size {hidden}, the model has {hidden_size}"),
                ));
            }
        }
        Ok(head)
    }

    /// Apply a trained head to a hidden state `(hidden,)`; `None` for the zero-shot head.
    pub fn apply(&self, hidden: &Tensor) -> Result<Option<GraderLogits>> {
        let GraderHead::Trained { weight, bias } = self else {
            return Ok(None);
        };
        let hidden = hidden
            .flatten_all()?
            .to_device(weight.device())?
            .to_dtype(DType::F32)?
            .unsqueeze(1)?;
        let logits = (weight.matmul(&hidden)?.squeeze(1)? + bias)?.to_vec1::<f32>()?;
        Ok(Some(GraderLogits {
            verdict: logits[0],
            hints: [logits[1], logits[2], logits[3], logits[4]],
        }))
    }

    /// p(done) from the question's next-token `logits` `(vocab,)` and last `hidden`
    /// state, with the hint logits when the head gives them at once (trained); `None`
    /// means: ask the follow-up and read [`hint_logits`](Self::hint_logits).
    pub fn verdict_logit(
        &self,
        logits: &Tensor,
        hidden: &Tensor,
    ) -> Result<(f32, Option<[f32; 4]>)> {
        match self {
            GraderHead::ZeroShot { yes, no, bias, .. } => {
                let row = logits
                    .flatten_all()?
                    .to_dtype(DType::F32)?
                    .to_vec1::<f32>()?;
                let verdict = log_sum_exp(&row, yes)? - log_sum_exp(&row, no)? + bias;
                Ok((sigmoid(verdict), None))
            }
            GraderHead::Trained { .. } => {
                let out = self.apply(hidden)?.ok_or_else(|| {
                    Error::Internal("a trained grader head gave no logits".into())
                })?;
                Ok((out.p_done(), Some(out.hints)))
            }
        }
    }

    /// The hint words' logits from the follow-up's next-token `logits` (the constrained
    /// one-word answer). A trained head has no word ids: it answers from its own rows.
    pub fn hint_logits(&self, logits: &Tensor) -> Result<[f32; 4]> {
        let GraderHead::ZeroShot { hints, .. } = self else {
            return Err(Error::Internal(
                "a trained grader head gives its hints with the verdict".into(),
            ));
        };
        let row = logits
            .flatten_all()?
            .to_dtype(DType::F32)?
            .to_vec1::<f32>()?;
        let mut out = [0f32; 4];
        for (slot, id) in out.iter_mut().zip(hints) {
            *slot = *row.get(*id as usize).ok_or_else(|| {
                Error::Internal(format!("hint token {id} is past the logits row"))
            })?;
        }
        Ok(out)
    }
}

/// `log Σ exp(row[id])` over `ids`, computed stably. Errors on an id past the row.
pub fn log_sum_exp(row: &[f32], ids: &[u32]) -> Result<f32> {
    let values: Vec<f32> = ids
        .iter()
        .map(|&id| {
            row.get(id as usize).copied().ok_or_else(|| {
                Error::invalid_input(format!("token {id} is past a logits row of {}", row.len()))
            })
        })
        .collect::<Result<_>>()?;
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return Ok(max);
    }
    Ok(max + values.iter().map(|v| (v - max).exp()).sum::<f32>().ln())
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The verdict for a rejected claim with probability `p`: the hint the logits favour
/// and a one-sentence reason.
pub fn rejection(p: f32, hints: [f32; 4]) -> DoneVerdict {
    let hint = GraderLogits {
        verdict: 0.0,
        hints,
    }
    .hint();
    let lacking = match hint {
        NextActionHint::RetryLastAction => "the last action does not seem to have taken effect",
        NextActionHint::DifferentAction => "the screen does not show the goal reached; this kind of action is not getting there",
        NextActionHint::DifferentTarget => "the screen does not show the goal reached; the action seems to have hit the wrong element",
        NextActionHint::GiveUp => "the goal does not look reachable from this screen",
    };
    DoneVerdict {
        verified: false,
        reason: format!("Not verified (p={p:.2}): {lacking}."),
        next_action_hint: Some(hint),
    }
}

impl GraderLogits {
    /// Probability that the goal is done.
    pub fn p_done(&self) -> f32 {
        sigmoid(self.verdict)
    }

    /// The most likely hint.
    pub fn hint(&self) -> NextActionHint {
        let mut best = 0;
        for (i, logit) in self.hints.iter().enumerate() {
            if *logit > self.hints[best] {
                best = i;
            }
        }
        HINTS[best]
    }

    /// The verdict at `threshold`, with a one-sentence reason and a hint when rejected.
    pub fn verdict(&self, threshold: f32) -> DoneVerdict {
        let p = self.p_done();
        if p >= threshold {
            return DoneVerdict {
                verified: true,
                reason: String::new(),
                next_action_hint: None,
            };
        }
        rejection(p, self.hints)
    }
}

fn shape_error(name: &str, t: &Tensor) -> Error {
    Error::Tensor {
        name: name.to_string(),
        reason: format!(
            "grader head expects (5, hidden) weight and (5,) bias, found {:?}",
            t.dims()
        ),
    }
}

/// Settings of [`fit_head`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitOptions {
    /// Seed of the train / held-out split.
    pub seed: u64,
    /// Share of the examples held out for the accuracy, in (0, 1).
    pub held_out: f32,
    /// Gradient-descent steps.
    pub steps: usize,
    /// Step size (on standardized features).
    pub learning_rate: f32,
    /// L2 penalty on the weights.
    pub l2: f32,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            seed: 0,
            held_out: 0.25,
            steps: 500,
            learning_rate: 0.5,
            l2: 1e-3,
        }
    }
}

/// A fitted head and how well it does.
#[derive(Debug, Clone)]
pub struct FitReport {
    /// `(5, hidden)` row-major.
    pub weight: Vec<f32>,
    /// `(5,)`.
    pub bias: Vec<f32>,
    /// Hidden size.
    pub hidden: usize,
    /// Verdict accuracy on the training part.
    pub train_accuracy: f32,
    /// Verdict accuracy on the held-out part.
    pub held_out_accuracy: f32,
    /// Examples in each part.
    pub train_len: usize,
    /// Examples held out.
    pub held_out_len: usize,
}

impl FitReport {
    /// Write the head as safetensors (`weight`, `bias`, f32).
    pub fn save(&self, path: &Path) -> Result<()> {
        let weight = Tensor::from_vec(self.weight.clone(), (HEAD_ROWS, self.hidden), &Device::Cpu)?;
        let bias = Tensor::from_vec(self.bias.clone(), HEAD_ROWS, &Device::Cpu)?;
        candle_core::safetensors::save(
            &std::collections::HashMap::from([
                ("weight".to_string(), weight),
                ("bias".to_string(), bias),
            ]),
            path,
        )
        .map_err(|e| Error::model_file_caused(path, "cannot write the grader head", e))
    }
}

/// Fit the `(5, hidden)` head by logistic regression on hidden states: the verdict row on
/// every example's `verified` label, each hint row one-against-the-rest on the rejected
/// examples that carry a hint. Features are standardized with the training part's mean
/// and spread, and the scaling folded into the saved weights. Deterministic: a seeded
/// split, full-batch gradient descent from zeros.
pub fn fit_head(
    features: &[Vec<f32>],
    verified: &[bool],
    hints: &[Option<NextActionHint>],
    options: &FitOptions,
) -> Result<FitReport> {
    let n = features.len();
    if n < 4 || verified.len() != n || hints.len() != n {
        return Err(Error::invalid_input(format!(
            "grader fit needs at least 4 labelled examples with one label each, got {n}"
        )));
    }
    let hidden = features[0].len();
    if hidden == 0 || features.iter().any(|f| f.len() != hidden) {
        return Err(Error::invalid_input("hidden states of different sizes"));
    }
    if !(options.held_out > 0.0 && options.held_out < 1.0) {
        return Err(Error::invalid_input(format!(
            "held-out share {} is not in (0, 1)",
            options.held_out
        )));
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut StdRng::seed_from_u64(options.seed));
    let held = ((n as f32 * options.held_out).round() as usize).clamp(1, n - 1);
    let (test, train) = order.split_at(held);

    let mut mean = vec![0f32; hidden];
    let mut spread = vec![0f32; hidden];
    for &i in train {
        for (m, x) in mean.iter_mut().zip(&features[i]) {
            *m += x / train.len() as f32;
        }
    }
    for &i in train {
        for ((s, x), m) in spread.iter_mut().zip(&features[i]).zip(&mean) {
            *s += (x - m) * (x - m) / train.len() as f32;
        }
    }
    let spread: Vec<f32> = spread.iter().map(|v| v.sqrt().max(1e-6)).collect();
    let standard = |i: usize| -> Vec<f32> {
        features[i]
            .iter()
            .zip(&mean)
            .zip(&spread)
            .map(|((x, m), s)| (x - m) / s)
            .collect()
    };
    let train_x: Vec<Vec<f32>> = train.iter().map(|&i| standard(i)).collect();

    let mut weight = vec![0f32; HEAD_ROWS * hidden];
    let mut bias = vec![0f32; HEAD_ROWS];
    // Row 0: the verdict, on every training example.
    let labels: Vec<Option<bool>> = train.iter().map(|&i| Some(verified[i])).collect();
    let (w, b) = logistic(&train_x, &labels, options);
    weight[..hidden].copy_from_slice(&w);
    bias[0] = b;
    // Rows 1..5: each hint against the others, on rejected examples with a hint.
    for (row, hint) in HINTS.iter().enumerate() {
        let labels: Vec<Option<bool>> = train
            .iter()
            .map(|&i| match (verified[i], hints[i]) {
                (false, Some(h)) => Some(h == *hint),
                _ => None,
            })
            .collect();
        let (w, b) = logistic(&train_x, &labels, options);
        weight[(row + 1) * hidden..(row + 2) * hidden].copy_from_slice(&w);
        bias[row + 1] = b;
    }
    // Fold the standardization in: w·(x - m)/s + b = (w/s)·x + (b - Σ w m / s).
    for row in 0..HEAD_ROWS {
        let w = &mut weight[row * hidden..(row + 1) * hidden];
        let mut shift = 0f32;
        for ((wj, m), s) in w.iter_mut().zip(&mean).zip(&spread) {
            *wj /= s;
            shift += *wj * m;
        }
        bias[row] -= shift;
    }
    let accuracy = |part: &[usize]| {
        let right = part
            .iter()
            .filter(|&&i| {
                let z: f32 = weight[..hidden]
                    .iter()
                    .zip(&features[i])
                    .map(|(w, x)| w * x)
                    .sum::<f32>()
                    + bias[0];
                (z >= 0.0) == verified[i]
            })
            .count();
        right as f32 / part.len() as f32
    };
    Ok(FitReport {
        train_accuracy: accuracy(train),
        held_out_accuracy: accuracy(test),
        train_len: train.len(),
        held_out_len: test.len(),
        weight,
        bias,
        hidden,
    })
}

/// Binary logistic regression by full-batch gradient descent on the examples with a
/// label; zeros when none has one.
fn logistic(xs: &[Vec<f32>], labels: &[Option<bool>], options: &FitOptions) -> (Vec<f32>, f32) {
    let hidden = xs.first().map_or(0, Vec::len);
    let mut w = vec![0f32; hidden];
    let mut b = 0f32;
    let labelled: Vec<(&Vec<f32>, f32)> = xs
        .iter()
        .zip(labels)
        .filter_map(|(x, y)| y.map(|y| (x, if y { 1.0 } else { 0.0 })))
        .collect();
    if labelled.is_empty() {
        return (w, -10.0);
    }
    let n = labelled.len() as f32;
    let mut grad = vec![0f32; hidden];
    for _ in 0..options.steps {
        grad.iter_mut().for_each(|g| *g = 0.0);
        let mut grad_b = 0f32;
        for (x, y) in &labelled {
            let z: f32 = w.iter().zip(x.iter()).map(|(w, x)| w * x).sum::<f32>() + b;
            let err = sigmoid(z) - y;
            for (g, xj) in grad.iter_mut().zip(x.iter()) {
                *g += err * xj;
            }
            grad_b += err;
        }
        for (wj, g) in w.iter_mut().zip(&grad) {
            *wj -= options.learning_rate * (g / n + options.l2 * *wj);
        }
        b -= options.learning_rate * grad_b / n;
    }
    (w, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::TokenEnv;
    use crate::model::scripted::{Script, ScriptedModel};
    use std::sync::Arc;

    /// The zero-shot head and a scripted model over the real Qwen vocabulary.
    fn zero_shot_and_model(target: &str) -> Result<(GraderHead, ScriptedModel)> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tokenizer.json.gz");
        let tokenizer = crate::tokenizer::load_tokenizer(&path)?;
        let env = TokenEnv::from_tokenizer(&tokenizer, 151_936)?;
        let head = GraderHead::zero_shot(&PromptRenderer::new(tokenizer)?)?;
        let model = ScriptedModel::new(
            Arc::new(env.token_bytes()),
            env.eos(),
            Script::Steer {
                target: target.as_bytes().to_vec(),
                prompt_len: 0,
            },
        )?;
        Ok((head, model))
    }

    #[test]
    fn zero_shot_rejects_when_yes_and_no_logits_are_equal() -> Result<()> {
        // Steering toward unrelated text leaves every yes and no spelling at logit 0.
        let (head, model) = zero_shot_and_model("zzz")?;
        let logits = model.logits()?;
        let hidden = Tensor::zeros(8, DType::F32, &Device::Cpu)?;
        let (p, hints) = head.verdict_logit(&logits, &hidden)?;
        assert!(hints.is_none(), "the zero-shot hint comes from a follow-up");
        assert!(p < 0.5, "p = {p}");
        assert!((p - sigmoid(ZERO_SHOT_BIAS)).abs() < 1e-6, "p = {p}");
        let GraderHead::ZeroShot { yes, no, .. } = &head else {
            return Err(Error::invalid_input("not zero-shot"));
        };
        assert!(yes.len() >= 4 && no.len() >= 4, "{yes:?} {no:?}");
        Ok(())
    }

    #[test]
    fn zero_shot_accepts_when_the_model_says_yes_and_sums_over_spellings() -> Result<()> {
        // Steering toward "Yes" lifts the `Yes` token alone (logit 4, every other spelling
        // 0): log(e^4 + 5) - log(6) - 1 = 1.3 nats, p = 0.79.
        let (head, model) = zero_shot_and_model("Yes")?;
        let (p, _) = head.verdict_logit(
            &model.logits()?,
            &Tensor::zeros(8, DType::F32, &Device::Cpu)?,
        )?;
        assert!(p > 0.75, "p = {p}");
        let (head, model) = zero_shot_and_model("No")?;
        let (p, _) = head.verdict_logit(
            &model.logits()?,
            &Tensor::zeros(8, DType::F32, &Device::Cpu)?,
        )?;
        assert!(p < 0.1, "p = {p}");
        // Log-sum-exp: two spellings at 0 and one at ln 2 sum to ln 4.
        let lse = log_sum_exp(&[0.0, 0.0, 2f32.ln()], &[0, 1, 2])?;
        assert!((lse - 4f32.ln()).abs() < 1e-6);
        Ok(())
    }

    #[test]
    fn fitting_separates_a_linear_signal_and_holds_out_a_seeded_part() -> Result<()> {
        let mut rng = StdRng::seed_from_u64(3);
        let mut features = Vec::new();
        let mut verified = Vec::new();
        for i in 0..80 {
            let done = i % 2 == 0;
            let mut x: Vec<f32> = (0..6)
                .map(|_| rand::Rng::random_range(&mut rng, -1.0..1.0))
                .collect();
            x[2] += if done { 3.0 } else { -3.0 };
            x[4] += 100.0; // an offset the standardization must fold back
            features.push(x);
            verified.push(done);
        }
        let hints: Vec<Option<NextActionHint>> = verified
            .iter()
            .map(|&v| (!v).then_some(NextActionHint::DifferentTarget))
            .collect();
        let report = fit_head(&features, &verified, &hints, &FitOptions::default())?;
        assert_eq!((report.train_len, report.held_out_len), (60, 20));
        assert!(report.held_out_accuracy >= 0.95, "{report:?}");
        let again = fit_head(&features, &verified, &hints, &FitOptions::default())?;
        assert_eq!(report.weight, again.weight, "deterministic");
        // The saved head gives the same verdicts through `apply`.
        let head = GraderHead::from_tensors(
            Tensor::from_vec(report.weight.clone(), (HEAD_ROWS, 6), &Device::Cpu)?,
            Tensor::from_vec(report.bias.clone(), HEAD_ROWS, &Device::Cpu)?,
        )?;
        let logits = head
            .apply(&Tensor::new(features[1].as_slice(), &Device::Cpu)?)?
            .ok_or_else(|| Error::invalid_input("no logits"))?;
        let verdict = logits.verdict(0.5);
        assert!(!verdict.verified);
        assert_eq!(
            verdict.next_action_hint,
            Some(NextActionHint::DifferentTarget)
        );
        Ok(())
    }

    fn head_forcing(verdict: f32, hint: usize) -> Result<GraderHead> {
        // hidden = [1, 0, 0]: the logits are the weights' first column.
        let mut w = vec![0f32; HEAD_ROWS * 3];
        w[0] = verdict;
        w[(1 + hint) * 3] = 5.0;
        let weight = Tensor::from_vec(w, (HEAD_ROWS, 3), &Device::Cpu)?;
        GraderHead::from_tensors(weight, Tensor::zeros(HEAD_ROWS, DType::F32, &Device::Cpu)?)
    }

    #[test]
    fn forced_verdicts_and_hints_come_out_as_set() -> Result<()> {
        let hidden = Tensor::new(&[1f32, 0.0, 0.0], &Device::Cpu)?;
        let apply = |head: GraderHead| -> Result<GraderLogits> {
            head.apply(&hidden)?
                .ok_or_else(|| Error::invalid_input("no logits"))
        };
        let yes = apply(head_forcing(4.0, 0)?)?.verdict(0.5);
        assert!(yes.verified && yes.next_action_hint.is_none() && yes.reason.is_empty());
        for (i, want) in HINTS.iter().enumerate() {
            let v = apply(head_forcing(-4.0, i)?)?.verdict(0.5);
            assert!(!v.verified);
            assert_eq!(v.next_action_hint, Some(*want));
            assert!(v.reason.starts_with("Not verified"), "{}", v.reason);
        }
        Ok(())
    }

    #[test]
    fn the_threshold_decides() -> Result<()> {
        let hidden = Tensor::new(&[1f32, 0.0, 0.0], &Device::Cpu)?;
        let logits = head_forcing(0.0, 1)?
            .apply(&hidden)?
            .ok_or_else(|| Error::invalid_input("no logits"))?; // p = 0.5
        assert!(logits.verdict(0.5).verified);
        assert!(!logits.verdict(0.6).verified);
        Ok(())
    }

    #[test]
    fn wrong_shapes_are_errors() -> Result<()> {
        let w = Tensor::zeros((4, 3), DType::F32, &Device::Cpu)?;
        let b = Tensor::zeros(5, DType::F32, &Device::Cpu)?;
        assert!(matches!(
            GraderHead::from_tensors(w, b),
            Err(Error::Tensor { .. })
        ));
        Ok(())
    }

    #[test]
    fn a_trained_head_file_loads_and_checks_the_hidden_size() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = dir.path().join("head.safetensors");
        let weight = Tensor::ones((HEAD_ROWS, 8), DType::F16, &Device::Cpu)?;
        let bias = Tensor::zeros(HEAD_ROWS, DType::F32, &Device::Cpu)?;
        candle_core::safetensors::save(
            &std::collections::HashMap::from([
                ("weight".to_string(), weight),
                ("bias".to_string(), bias),
            ]),
            &path,
        )?;
        assert!(GraderHead::load(&path, 8, &Device::Cpu).is_ok());
        let err = GraderHead::load(&path, 16, &Device::Cpu).expect_err("hidden size mismatch");
        assert!(err.to_string().contains("hidden size 8"), "{err}");
        Ok(())
    }
}
