//! Fitting a trained grader head: logistic regression on hidden states of labelled done
//! claims, saved with the record of what it was fitted on.

use std::path::Path;

use candle_core::{Device, Tensor};
use cel_contracts::NextActionHint;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::head::{sigmoid, HeadMeta, HeadRecord, HEAD_ROWS, HINTS, META_TENSOR};
use crate::error::{Error, Result};

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
    /// Which hint rows had labels to fit on, in [`HINTS`] order.
    pub trained_hints: [bool; 4],
}

impl FitReport {
    /// Write the head as safetensors: `weight` and `bias` in f32, and what it was fitted on
    /// (`meta`) with the trained hint rows in [`META_TENSOR`].
    pub fn save(&self, path: &Path, meta: &HeadMeta) -> Result<()> {
        let weight = Tensor::from_vec(self.weight.clone(), (HEAD_ROWS, self.hidden), &Device::Cpu)?;
        let bias = Tensor::from_vec(self.bias.clone(), HEAD_ROWS, &Device::Cpu)?;
        let record = serde_json::to_vec(&HeadRecord {
            meta: meta.clone(),
            trained_hints: self.trained_hints,
        })
        .map_err(|e| Error::model_file_caused(path, "cannot encode the head record", e))?;
        let len = record.len();
        let record = Tensor::from_vec(record, len, &Device::Cpu)?;
        candle_core::safetensors::save(
            &std::collections::HashMap::from([
                ("weight".to_string(), weight),
                ("bias".to_string(), bias),
                (META_TENSOR.to_string(), record),
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
    // Rows 1..5: each hint against the others, on rejected examples with a hint. A row is
    // trained only when its hint was labelled at least once (else it would only learn to
    // say no, and every untrained row would tie).
    let mut trained_hints = [false; 4];
    for (row, hint) in HINTS.iter().enumerate() {
        let labels: Vec<Option<bool>> = train
            .iter()
            .map(|&i| match (verified[i], hints[i]) {
                (false, Some(h)) => Some(h == *hint),
                _ => None,
            })
            .collect();
        trained_hints[row] = labels.contains(&Some(true));
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
        trained_hints,
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
    use super::super::head::GraderHead;
    use super::*;

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
        // Only DifferentTarget was labelled: only its row is trained.
        assert_eq!(report.trained_hints, [false, false, true, false]);
        let head = GraderHead::from_tensors(
            Tensor::from_vec(report.weight.clone(), (HEAD_ROWS, 6), &Device::Cpu)?,
            Tensor::from_vec(report.bias.clone(), HEAD_ROWS, &Device::Cpu)?,
            report.trained_hints,
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
}
