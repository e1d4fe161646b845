//! The `verify_done` grader head (ARCHITECTURE.md, decision 7).
//!
//! After one forward pass over the grader question (see
//! [`render_grader_question`](crate::planner::prompt::render_grader_question)), a linear head on
//! the last hidden state gives five logits: the verdict, then one per [`NextActionHint`].
//!
//! **Zero-shot weights** come from the language-model head: the question asks for one answer
//! word, so the row of `Yes` against the mean of the four other answers' rows is the verdict,
//! and each answer's row is its hint's logit. No training, no extra file.
//!
//! **A trained head** replaces them: a safetensors file with `weight` `(5, hidden)` and `bias`
//! `(5,)` (f32, f16 or bf16), rows in the order `verdict, retry_last_action, different_action,
//! different_target, give_up`. `verified = sigmoid(verdict) >= threshold`.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use cel_contracts::{DoneVerdict, NextActionHint};

use crate::error::{Error, Result};
use crate::model::VisionLanguageModel;
use crate::planner::prompt::PromptRenderer;

/// The answer word that means "done".
pub const YES_WORD: &str = "Yes";
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

/// A linear head `(5, hidden)` + bias over the last hidden state.
#[derive(Debug, Clone)]
pub struct GraderHead {
    weight: Tensor,
    bias: Tensor,
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
    /// Zero-shot weights from `model`'s language-model head rows for the answer words.
    pub fn zero_shot(model: &dyn VisionLanguageModel, renderer: &PromptRenderer) -> Result<Self> {
        let mut ids = vec![renderer.answer_token(YES_WORD)?];
        for word in HINT_WORDS {
            ids.push(renderer.answer_token(word)?);
        }
        let rows = model.lm_head_rows(&ids)?.to_dtype(DType::F32)?; // (5, hidden)
        let yes = rows.narrow(0, 0, 1)?;
        let hints = rows.narrow(0, 1, 4)?;
        let verdict = (yes - hints.mean_keepdim(0)?)?;
        let weight = Tensor::cat(&[&verdict, &hints], 0)?;
        let bias = Tensor::zeros(HEAD_ROWS, DType::F32, weight.device())?;
        Ok(GraderHead { weight, bias })
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
        Ok(GraderHead {
            weight: weight.to_dtype(DType::F32)?,
            bias: bias.to_dtype(DType::F32)?,
        })
    }

    /// A trained head from a safetensors file (see the module docs for the format), checked
    /// against the model's hidden size.
    pub fn load(path: &Path, hidden_size: usize, device: &Device) -> Result<Self> {
        let tensors = candle_core::safetensors::load(path, device)
            .map_err(|e| Error::model_file(path, format!("not a grader head: {e}")))?;
        let get = |name: &str| {
            tensors
                .get(name)
                .cloned()
                .ok_or_else(|| Error::model_file(path, format!("missing tensor {name:?}")))
        };
        let head = Self::from_tensors(get("weight")?, get("bias")?)
            .map_err(|e| Error::model_file(path, e.to_string()))?;
        let (_, hidden) = head.weight.dims2()?;
        if hidden != hidden_size {
            return Err(Error::model_file(
                path,
                format!("grader head is for hidden size {hidden}, the model has {hidden_size}"),
            ));
        }
        Ok(head)
    }

    /// Apply the head to a hidden state `(hidden,)`.
    pub fn apply(&self, hidden: &Tensor) -> Result<GraderLogits> {
        let hidden = hidden
            .to_device(self.weight.device())?
            .to_dtype(DType::F32)?
            .unsqueeze(1)?;
        let logits = (self.weight.matmul(&hidden)?.squeeze(1)? + &self.bias)?.to_vec1::<f32>()?;
        Ok(GraderLogits {
            verdict: logits[0],
            hints: [logits[1], logits[2], logits[3], logits[4]],
        })
    }
}

impl GraderLogits {
    /// Probability that the goal is done.
    pub fn p_done(&self) -> f32 {
        1.0 / (1.0 + (-self.verdict).exp())
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
        let hint = self.hint();
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let yes = head_forcing(4.0, 0)?.apply(&hidden)?.verdict(0.5);
        assert!(yes.verified && yes.next_action_hint.is_none() && yes.reason.is_empty());
        for (i, want) in HINTS.iter().enumerate() {
            let v = head_forcing(-4.0, i)?.apply(&hidden)?.verdict(0.5);
            assert!(!v.verified);
            assert_eq!(v.next_action_hint, Some(*want));
            assert!(v.reason.starts_with("Not verified"), "{}", v.reason);
        }
        Ok(())
    }

    #[test]
    fn the_threshold_decides() -> Result<()> {
        let hidden = Tensor::new(&[1f32, 0.0, 0.0], &Device::Cpu)?;
        let logits = head_forcing(0.0, 1)?.apply(&hidden)?; // p = 0.5
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
