//! Reading a verdict: the zero-shot head, a trained head, and the head file with the record of
//! what it was fitted on.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use cel_contracts::{DoneVerdict, NextActionHint};
use serde::{Deserialize, Serialize};

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
        /// Which hint rows were fitted on labels, in [`HINTS`] order; the others give no
        /// hint (a row fitted on nothing would tie, and a tie would always name the first).
        trained_hints: [bool; 4],
    },
}

/// One logit per hint, in [`HINTS`] order; `None` for a hint the head cannot judge (a
/// trained row that had no labels).
pub type HintLogits = [Option<f32>; 4];

/// The head's numbers for one question.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraderLogits {
    /// Verdict logit: done when `sigmoid(verdict) >= threshold`.
    pub verdict: f32,
    /// The hints' logits.
    pub hints: HintLogits,
}

/// What a trained head was fitted on, written into its file and checked when it is loaded:
/// the same hidden size is not the same model (a head fitted on a 2B Q4 model would load on a
/// fine-tune of the same shape), and the hidden states also depend on the quantization, the
/// screenshot's visual budget and the prompt the question follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadMeta {
    /// The weights ([`ModelSource::identity`](crate::ModelSource::identity)).
    pub model: String,
    /// The model's hidden size.
    pub hidden_size: usize,
    /// How the weights were computed (`as stored` or the quantize-at-load type).
    pub quantization: String,
    /// Visual tokens per screenshot.
    pub visual_tokens: usize,
    /// A fingerprint of the prompt the grader's question follows (system prompt and question
    /// template): another prompt version gives other hidden states.
    pub prompt: String,
}

/// The tensor of a head file that holds its [`HeadMeta`] (and the trained hint rows) as
/// UTF-8 JSON bytes: plain tensors, so the file reads with any safetensors tool.
pub const META_TENSOR: &str = "sightline_meta";

/// What [`META_TENSOR`] holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct HeadRecord {
    pub meta: HeadMeta,
    pub trained_hints: [bool; 4],
}

impl HeadMeta {
    /// The differences from `other`, one phrase each (`model X, this planner Y`).
    fn differences(&self, planner: &HeadMeta) -> Vec<String> {
        let mut out = Vec::new();
        let mut differ = |what: &str, head: String, now: String| {
            if head != now {
                out.push(format!("{what} {head} (this planner: {now})"));
            }
        };
        differ("model", self.model.clone(), planner.model.clone());
        differ(
            "hidden size",
            self.hidden_size.to_string(),
            planner.hidden_size.to_string(),
        );
        differ(
            "quantization",
            self.quantization.clone(),
            planner.quantization.clone(),
        );
        differ(
            "visual budget",
            self.visual_tokens.to_string(),
            planner.visual_tokens.to_string(),
        );
        differ("prompt", self.prompt.clone(), planner.prompt.clone());
        out
    }
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

    /// A head from explicit weights `(5, hidden)` and bias `(5,)`, with the hint rows
    /// that were fitted.
    pub fn from_tensors(weight: Tensor, bias: Tensor, trained_hints: [bool; 4]) -> Result<Self> {
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
            trained_hints,
        })
    }

    /// A trained head from a safetensors file ([`FitReport::save`](super::FitReport::save)
    /// writes them: `weight` `(5, hidden)` and `bias` `(5,)` in f32, f16 or bf16, and
    /// [`META_TENSOR`]), refused unless it was fitted on what `planner` describes.
    pub fn load(path: &Path, planner: &HeadMeta, device: &Device) -> Result<Self> {
        crate::input_file::check(path, crate::input_file::InputKind::ModelWeights)?;
        let tensors = candle_core::safetensors::load(path, device)
            .map_err(|e| Error::model_file_caused(path, "not a grader head", e))?;
        let get = |name: &str| {
            tensors
                .get(name)
                .cloned()
                .ok_or_else(|| Error::model_file(path, format!("missing tensor {name:?}")))
        };
        let record: HeadRecord = get(META_TENSOR)
            .map_err(|_| {
                Error::model_file(
                    path,
                    "the head does not say what it was fitted on (written before grader heads \
                     carried their model record); fit it again with `sightline grader fit`",
                )
            })
            .and_then(|t| {
                let bytes = t.to_dtype(DType::U8)?.to_vec1::<u8>()?;
                serde_json::from_slice(&bytes).map_err(|e| {
                    Error::model_file_caused(path, format!("{META_TENSOR} is not a head record"), e)
                })
            })?;
        let differences = record.meta.differences(planner);
        if !differences.is_empty() {
            return Err(Error::model_file(
                path,
                format!(
                    "this grader head was fitted on another setup: {}; fit a head for this one \
                     with `sightline grader fit`",
                    differences.join(", ")
                ),
            ));
        }
        let head = Self::from_tensors(get("weight")?, get("bias")?, record.trained_hints)
            .map_err(|e| Error::model_file_caused(path, "", e))?;
        if let GraderHead::Trained { weight, .. } = &head {
            let (_, hidden) = weight.dims2()?;
            if hidden != planner.hidden_size {
                return Err(Error::model_file(
                    path,
                    format!(
                        "grader head is for hidden size {hidden}, the model has {}",
                        planner.hidden_size
                    ),
                ));
            }
        }
        Ok(head)
    }

    /// Apply a trained head to a hidden state `(hidden,)`; `None` for the zero-shot head.
    pub fn apply(&self, hidden: &Tensor) -> Result<Option<GraderLogits>> {
        let GraderHead::Trained {
            weight,
            bias,
            trained_hints,
        } = self
        else {
            return Ok(None);
        };
        let hidden = hidden
            .flatten_all()?
            .to_device(weight.device())?
            .to_dtype(DType::F32)?
            .unsqueeze(1)?;
        let logits = (weight.matmul(&hidden)?.squeeze(1)? + bias)?.to_vec1::<f32>()?;
        let mut hints = [None; 4];
        for (i, slot) in hints.iter_mut().enumerate() {
            *slot = trained_hints[i].then_some(logits[i + 1]);
        }
        Ok(Some(GraderLogits {
            verdict: logits[0],
            hints,
        }))
    }

    /// p(done) from the question's next-token `logits` `(vocab,)` and last `hidden`
    /// state, with the hint logits when the head gives them at once (trained); `None`
    /// means: ask the follow-up and read [`hint_logits`](Self::hint_logits).
    pub fn verdict_logit(
        &self,
        logits: &Tensor,
        hidden: &Tensor,
    ) -> Result<(f32, Option<HintLogits>)> {
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
                let out = self
                    .apply(hidden)?
                    .ok_or_else(|| Error::internal("a trained grader head gave no logits"))?;
                Ok((out.p_done(), Some(out.hints)))
            }
        }
    }

    /// The hint words' logits from the follow-up's next-token `logits` (the constrained
    /// one-word answer). A trained head has no word ids: it answers from its own rows.
    pub fn hint_logits(&self, logits: &Tensor) -> Result<HintLogits> {
        let GraderHead::ZeroShot { hints, .. } = self else {
            return Err(Error::internal(
                "a trained grader head gives its hints with the verdict",
            ));
        };
        let row = logits
            .flatten_all()?
            .to_dtype(DType::F32)?
            .to_vec1::<f32>()?;
        let mut out = [None; 4];
        for (slot, id) in out.iter_mut().zip(hints) {
            *slot = Some(*row.get(*id as usize).ok_or_else(|| {
                Error::internal(format!("hint token {id} is past the logits row"))
            })?);
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

pub(super) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The verdict for a rejected claim with probability `p`: the hint the logits favour (none
/// when no hint could be judged) and a one-sentence reason.
pub fn rejection(p: f32, hints: HintLogits) -> DoneVerdict {
    let hint = GraderLogits {
        verdict: 0.0,
        hints,
    }
    .hint();
    let lacking = match hint {
        Some(NextActionHint::RetryLastAction) => {
            "the last action does not seem to have taken effect"
        }
        Some(NextActionHint::DifferentAction) => {
            "the screen does not show the goal reached; this kind of action is not getting there"
        }
        Some(NextActionHint::DifferentTarget) => {
            "the screen does not show the goal reached; the action seems to have hit the wrong \
             element"
        }
        Some(NextActionHint::GiveUp) => "the goal does not look reachable from this screen",
        None => "the screen does not show the goal reached",
    };
    DoneVerdict {
        verified: false,
        reason: format!("Not verified (p={p:.2}): {lacking}."),
        next_action_hint: hint,
    }
}

impl GraderLogits {
    /// Probability that the goal is done.
    pub fn p_done(&self) -> f32 {
        sigmoid(self.verdict)
    }

    /// The most likely hint among those the head can judge; none when it can judge none.
    pub fn hint(&self) -> Option<NextActionHint> {
        let mut best: Option<(usize, f32)> = None;
        for (i, logit) in self.hints.iter().enumerate() {
            if let Some(logit) = *logit {
                if best.is_none_or(|(_, b)| logit > b) {
                    best = Some((i, logit));
                }
            }
        }
        best.map(|(i, _)| HINTS[i])
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
    Error::tensor(
        name,
        format!(
            "grader head expects (5, hidden) weight and (5,) bias, found {:?}",
            t.dims()
        ),
    )
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
        let head = GraderHead::zero_shot(&PromptRenderer::new(tokenizer, String::new())?)?;
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

    fn head_forcing(verdict: f32, hint: usize) -> Result<GraderHead> {
        // hidden = [1, 0, 0]: the logits are the weights' first column.
        let mut w = vec![0f32; HEAD_ROWS * 3];
        w[0] = verdict;
        w[(1 + hint) * 3] = 5.0;
        let weight = Tensor::from_vec(w, (HEAD_ROWS, 3), &Device::Cpu)?;
        GraderHead::from_tensors(
            weight,
            Tensor::zeros(HEAD_ROWS, DType::F32, &Device::Cpu)?,
            [true; 4],
        )
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
            // A head whose hint rows had no labels gives no hint, never the first one.
            let untrained = match head_forcing(-4.0, i)? {
                GraderHead::Trained { weight, bias, .. } => {
                    GraderHead::from_tensors(weight, bias, [false; 4])?
                }
                other => other,
            };
            let v = apply(untrained)?.verdict(0.5);
            assert!(!v.verified && v.next_action_hint.is_none(), "{v:?}");
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
            GraderHead::from_tensors(w, b, [true; 4]),
            Err(Error::Tensor { .. })
        ));
        Ok(())
    }
}
