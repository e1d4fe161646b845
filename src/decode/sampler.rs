//! Choosing a token from a logits row under a grammar mask.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use toktrie::{SimpleVob, TokenId};

use crate::kernels::{masked_argmax, PickRule};

/// How the next token is chosen among those the grammar allows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Sampling {
    /// The allowed token with the highest logit (lowest id on ties). Deterministic.
    #[default]
    Greedy,
    /// Nucleus sampling: softmax of `logits / temperature` over the allowed tokens,
    /// keep the most likely ones up to cumulative probability `top_p`, draw with a
    /// generator seeded by `seed`.
    TopP {
        /// Softmax temperature, > 0.
        temperature: f32,
        /// Probability mass kept, in (0, 1].
        top_p: f32,
        /// Seed of the random generator (one generator per decode).
        seed: u64,
    },
}

impl Sampling {
    /// Nucleus sampling, validated: `temperature` finite and > 0, `top_p` in (0, 1]. Every
    /// command that samples (`plan`, `generate`, the library's options) goes through this, so
    /// `nan`, `inf` or a negative value is one error everywhere.
    pub fn top_p(temperature: f32, top_p: f32, seed: u64) -> crate::Result<Self> {
        check_temperature(temperature)?;
        check_top_p(top_p)?;
        Ok(Sampling::TopP {
            temperature,
            top_p,
            seed,
        })
    }
}

/// A sampling temperature must be finite and > 0 (greedy decoding is its own mode).
pub fn check_temperature(temperature: f32) -> crate::Result<()> {
    if temperature.is_finite() && temperature > 0.0 {
        Ok(())
    } else {
        Err(crate::Error::invalid_input(format!(
            "temperature {temperature}: expected a finite number > 0 (greedy decoding needs no temperature)"
        )))
    }
}

/// A nucleus mass must be in (0, 1].
pub fn check_top_p(top_p: f32) -> crate::Result<()> {
    if top_p > 0.0 && top_p <= 1.0 {
        Ok(())
    } else {
        Err(crate::Error::invalid_input(format!(
            "top-p {top_p}: expected a probability in (0, 1]"
        )))
    }
}

/// A sampler with its random state; one per decode.
#[derive(Debug)]
pub struct Sampler {
    sampling: Sampling,
    rng: StdRng,
    scratch: Vec<(TokenId, f32)>,
}

/// Candidates whose logit is further than this below the best (after temperature)
/// carry less than e^-20 of its probability: dropping them changes no draw that
/// matters and keeps the sort short.
const LOGIT_WINDOW: f32 = 20.0;

impl Sampler {
    /// A sampler for `sampling`.
    pub fn new(sampling: Sampling) -> Self {
        let seed = match sampling {
            Sampling::TopP { seed, .. } => seed,
            Sampling::Greedy => 0,
        };
        Sampler {
            sampling,
            rng: StdRng::seed_from_u64(seed),
            scratch: Vec::new(),
        }
    }

    /// Whether this sampler takes the best allowed token (no draw).
    pub fn is_greedy(&self) -> bool {
        matches!(self.sampling, Sampling::Greedy)
    }

    /// Choose a token allowed by `mask` from `logits`. `None` when no allowed token
    /// inside the row has a non-NaN logit (see [`masked_argmax`], the one definition
    /// of greedy shared with the device kernels). A mask with a single allowed token
    /// returns it without drawing, so forcing a token never moves the random state.
    ///
    /// Cost: greedy is one pass over the mask words, reading the logits of allowed
    /// words only; top-p adds a partial sort of the `TOP_P_CANDIDATES` best allowed
    /// tokens.
    #[inline(never)]
    pub fn sample(&mut self, logits: &[f32], mask: &SimpleVob) -> Option<TokenId> {
        let n = logits.len().min(mask.len());
        let allowed = mask.num_set();
        if allowed == 0 {
            return None;
        }
        let best = masked_argmax(&logits[..n], mask.as_slice())?;
        let (temperature, top_p) = match self.sampling {
            Sampling::Greedy => return Some(best),
            Sampling::TopP {
                temperature, top_p, ..
            } => (temperature, top_p),
        };
        let best_logit = logits[best as usize];
        // A NaN or non-positive temperature means "no spread": take the best.
        let spread = temperature > 0.0;
        if allowed == 1 || !best_logit.is_finite() || !spread {
            return Some(best);
        }
        let scratch = &mut self.scratch;
        scratch.clear();
        mask.iter_set_entries(|idx| {
            if idx < n && !logits[idx].is_nan() {
                let z = (logits[idx] - best_logit) / temperature;
                if z > -LOGIT_WINDOW {
                    scratch.push((idx as TokenId, z));
                }
            }
        });
        let by_weight =
            |a: &(TokenId, f32), b: &(TokenId, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if scratch.len() > TOP_P_CANDIDATES {
            scratch.select_nth_unstable_by(TOP_P_CANDIDATES - 1, by_weight);
            scratch.truncate(TOP_P_CANDIDATES);
        }
        scratch.sort_by(by_weight);
        for c in scratch.iter_mut() {
            c.1 = c.1.exp();
        }
        let total: f32 = scratch.iter().map(|(_, p)| p).sum();
        let keep_mass = total * top_p.clamp(f32::MIN_POSITIVE, 1.0);
        let mut kept = 0;
        let mut mass = 0.0;
        for (_, p) in scratch.iter() {
            kept += 1;
            mass += p;
            if mass >= keep_mass {
                break;
            }
        }
        let mut draw = self.rng.random::<f32>() * mass;
        for &(id, p) in &scratch[..kept] {
            if draw < p {
                return Some(id);
            }
            draw -= p;
        }
        Some(scratch[kept - 1].0)
    }
}

impl Sampler {
    /// The rule to run on the device for a mask that allows `allowed` tokens, or
    /// `None` when this sampling must run on the host (top-p below 1 needs a sort
    /// of the candidates). Greedy is [`PickRule::Argmax`]; top-p of 1 is a plain
    /// temperature draw, [`PickRule::Sample`] with a uniform taken from this
    /// sampler's generator, except when a single token is allowed (no draw, as in
    /// [`sample`](Self::sample)).
    ///
    /// The device draws in id order and the host in weight order, so one seed gives
    /// the same sequence on one device every time, not the same one on CPU and GPU.
    pub fn device_rule(&mut self, allowed: usize) -> Option<PickRule> {
        match self.sampling {
            Sampling::Greedy => Some(PickRule::Argmax),
            Sampling::TopP {
                temperature, top_p, ..
            } if top_p >= 1.0 => {
                if allowed <= 1 || temperature.is_nan() || temperature <= 0.0 {
                    return Some(PickRule::Argmax);
                }
                Some(PickRule::Sample {
                    temperature,
                    u: self.rng.random::<f32>(),
                })
            }
            Sampling::TopP { .. } => None,
        }
    }
}

/// Top-p draws from at most this many of the best allowed tokens; the rest of a
/// 151k vocabulary holds no mass that matters and would make every step sort it.
pub const TOP_P_CANDIDATES: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(n: usize, allowed: &[u32]) -> SimpleVob {
        let mut m = SimpleVob::alloc(n);
        for &a in allowed {
            m.allow_token(a);
        }
        m
    }

    #[test]
    fn greedy_takes_the_best_allowed_token_not_the_best_token() {
        let logits = [5.0, 1.0, 3.0, 2.0];
        let mut s = Sampler::new(Sampling::Greedy);
        assert_eq!(s.sample(&logits, &mask(4, &[1, 2, 3])), Some(2));
        assert_eq!(s.sample(&logits, &mask(4, &[])), None);
    }

    #[test]
    fn greedy_agrees_for_dense_and_sparse_masks_and_breaks_ties_by_lowest_id() {
        // Most allowed (full words scanned) and few allowed (bits visited) pick the same.
        let n = 64;
        let mut logits: Vec<f32> = (0..n).map(|i| ((i * 37) % 11) as f32).collect();
        logits[5] = f32::NAN;
        let all: Vec<u32> = (0..n as u32).filter(|&i| i != 20).collect();
        let few = [3u32, 9, 14, 25];
        let mut s = Sampler::new(Sampling::Greedy);
        let visit = |allowed: &[u32]| {
            allowed
                .iter()
                .copied()
                .filter(|&i| !logits[i as usize].is_nan())
                .fold(None::<(u32, f32)>, |b, i| match b {
                    Some((_, v)) if v >= logits[i as usize] => b,
                    _ => Some((i, logits[i as usize])),
                })
                .map(|(i, _)| i)
        };
        assert_eq!(s.sample(&logits, &mask(n, &all)), visit(&all));
        assert_eq!(s.sample(&logits, &mask(n, &few)), visit(&few));
        // NaN is never chosen: a row of NaNs is a broken model, not token 0.
        let all_nan = vec![f32::NAN; n];
        assert_eq!(s.sample(&all_nan, &mask(n, &all)), None);
    }

    #[test]
    fn device_rule_is_argmax_for_greedy_and_draws_only_for_full_top_p() {
        let mut greedy = Sampler::new(Sampling::Greedy);
        assert_eq!(greedy.device_rule(10), Some(PickRule::Argmax));
        let mut nucleus = Sampler::new(Sampling::TopP {
            temperature: 0.7,
            top_p: 0.9,
            seed: 1,
        });
        assert_eq!(nucleus.device_rule(10), None);
        let full = Sampling::TopP {
            temperature: 0.7,
            top_p: 1.0,
            seed: 3,
        };
        let (mut a, mut b) = (Sampler::new(full), Sampler::new(full));
        // A forced step draws nothing, so `a` and `b` stay in step.
        assert_eq!(a.device_rule(1), Some(PickRule::Argmax));
        let (ra, rb) = (a.device_rule(10), b.device_rule(10));
        assert_eq!(ra, rb);
        assert!(
            matches!(ra, Some(PickRule::Sample { temperature, u }) if temperature == 0.7 && (0.0..1.0).contains(&u)),
            "{ra:?}"
        );
    }

    #[test]
    fn top_p_is_reproducible_and_stays_inside_the_nucleus() {
        let logits = [0.0, 4.0, 3.9, -10.0, 3.8];
        let m = mask(5, &[0, 1, 2, 3, 4]);
        let sampling = Sampling::TopP {
            temperature: 1.0,
            top_p: 0.9,
            seed: 7,
        };
        let draws = |seed_sampler: &mut Sampler| -> Vec<u32> {
            (0..200)
                .filter_map(|_| seed_sampler.sample(&logits, &m))
                .collect()
        };
        let a = draws(&mut Sampler::new(sampling));
        let b = draws(&mut Sampler::new(sampling));
        assert_eq!(a, b);
        assert!(a.iter().all(|t| [1, 2, 4].contains(t)), "{a:?}");
        assert!(a.contains(&1) && a.contains(&2) && a.contains(&4));
    }
}
