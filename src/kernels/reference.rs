//! The CPU reference of the masked token pick: the definition the CUDA and Metal
//! kernels (`kernels/masked_argmax.{cu,metal}`) are tested against, and the code the
//! CPU decode path runs.
//!
//! A mask is packed like toktrie's `SimpleVob`: bit `i % 32` of word `i / 32` set means
//! token `i` is allowed. Tokens past the row (`i >= logits.len()`) or past the mask
//! (`i / 32 >= mask.len()`) are never allowed.

/// Bits per mask word.
pub const MASK_WORD_BITS: usize = 32;

/// The allowed token with the highest logit.
///
/// - Ties go to the lowest id.
/// - NaN is never chosen: a NaN logit is a broken model, and emitting its token
///   would hide that.
/// - `-inf` can be chosen, but only when every allowed non-NaN logit is `-inf`; then
///   the lowest such id (the grammar still needs a token).
/// - `None` when no allowed token has a non-NaN logit (nothing allowed, or all NaN).
///
/// Cost: one pass over the words of `mask`; the logits of fully masked words are
/// not read (structure positions allow a handful of tokens).
#[inline(never)]
pub fn masked_argmax(logits: &[f32], mask: &[u32]) -> Option<u32> {
    let n = logits.len();
    let mut best: Option<u32> = None;
    // -inf until a finite or +inf candidate is seen; `v > best_v` is false for NaN,
    // so NaN never enters, and strict `>` keeps the lowest id on ties.
    let mut best_v = f32::NEG_INFINITY;
    for (w, &word) in mask.iter().enumerate() {
        let base = w * MASK_WORD_BITS;
        if word == 0 || base >= n {
            continue;
        }
        if word == u32::MAX && base + MASK_WORD_BITS <= n {
            // Fully allowed word (inside strings most words are): the word's max
            // first, branch-free (`f32::max` skips NaN), then its first position only
            // when it beats the best so far, which is rare after the first words.
            let chunk = &logits[base..base + MASK_WORD_BITS];
            let chunk_max = chunk.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            if chunk_max > best_v {
                best_v = chunk_max;
                best = chunk
                    .iter()
                    .position(|&v| v == chunk_max)
                    .map(|i| (base + i) as u32);
            }
            continue;
        }
        let mut bits = word;
        while bits != 0 {
            let i = base + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if i >= n {
                break;
            }
            if logits[i] > best_v {
                best_v = logits[i];
                best = Some(i as u32);
            }
        }
    }
    if best.is_some() {
        return best;
    }
    // No allowed logit above -inf: the first allowed -inf, if any (rare: a model
    // that pushes every allowed token to -inf).
    first_allowed(logits, mask, |v| v == f32::NEG_INFINITY)
}

/// Draw an allowed token from the softmax of `logits / temperature` restricted to
/// the mask, by inverse CDF with the uniform `u` the caller drew (so the caller's
/// seeded generator stays the only source of randomness).
///
/// Definition: let `m` be the logit of [`masked_argmax`]; each allowed token with a
/// non-NaN logit `l` has weight `w = exp((l - m) / temperature)` (computed in f32;
/// it underflows to 0 far below `m`, and 0-weight tokens are never drawn). With
/// `W` the sum of the weights, the result is the first allowed token, in id order,
/// whose running sum of weights exceeds `u * W`. If rounding leaves none (`u` just
/// below 1), the last token with a positive weight.
///
/// Degenerate cases return [`masked_argmax`]: `temperature` not > 0 (including NaN:
/// "no spread"), or `m` not finite (a `+inf` logit takes everything; all allowed
/// `-inf` leaves no distribution). `None` exactly when [`masked_argmax`] is `None`.
/// `u` is clamped into `[0, 1)`; NaN counts as 0.
///
/// The sums here are f64; a device sums in f32 in another order, so near a CDF
/// boundary (within ~1e-6 of `u`) the two may pick neighbours. Away from the
/// boundaries they agree.
///
/// Cost: two passes over the allowed tokens after the argmax pass.
#[inline(never)]
pub fn masked_sample(logits: &[f32], mask: &[u32], temperature: f32, u: f32) -> Option<u32> {
    let best = masked_argmax(logits, mask)?;
    let m = logits[best as usize];
    if temperature.is_nan() || temperature <= 0.0 || !m.is_finite() {
        return Some(best);
    }
    let weight = |v: f32| ((v - m) / temperature).exp();
    let mut total = 0f64;
    for_each_allowed(logits, mask, |_, v| {
        if !v.is_nan() {
            total += f64::from(weight(v));
        }
        true
    });
    let u = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) };
    let target = f64::from(u) * total;
    let mut running = 0f64;
    let mut chosen = best;
    for_each_allowed(logits, mask, |i, v| {
        let w = if v.is_nan() { 0.0 } else { weight(v) };
        if w > 0.0 {
            running += f64::from(w);
            chosen = i;
            if running > target {
                return false;
            }
        }
        true
    });
    Some(chosen)
}

/// The first `k` tokens of the whole row in [`masked_argmax`]'s order: highest logit
/// first, ties by lowest id, `-inf` after every other logit (by id), NaN never. For any
/// mask, [`masked_argmax`] is the first token of this order the mask allows, so where one
/// of these `k` is allowed it is the masked argmax, found without the mask (what the
/// greedy decoder tries before computing one).
///
/// Cost: one pass over the row, as [`masked_argmax`] on a full mask: a 32-logit chunk is
/// read one by one only when its maximum beats the `k`-th best so far.
pub fn greedy_order(logits: &[f32], k: usize) -> Vec<u32> {
    let mut top: Vec<(f32, u32)> = Vec::with_capacity(k + 1);
    if k == 0 {
        return Vec::new();
    }
    for (c, chunk) in logits.chunks(MASK_WORD_BITS).enumerate() {
        // `f32::max` skips NaN; an all-NaN chunk reads as -inf, and a full list never
        // takes a value that does not beat its last (later ids lose ties).
        let chunk_max = chunk.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        if top.len() == k && chunk_max <= top[k - 1].0 {
            continue;
        }
        for (i, &v) in chunk.iter().enumerate() {
            if v.is_nan() || (top.len() == k && v <= top[k - 1].0) {
                continue;
            }
            // After every value at least as high: ties keep the lower id first.
            let at = top.partition_point(|&(t, _)| t >= v);
            top.insert(at, (v, (c * MASK_WORD_BITS + i) as u32));
            top.truncate(k);
        }
    }
    top.into_iter().map(|(_, id)| id).collect()
}

/// Calls `f(id, logit)` for each allowed id in order while it returns true.
fn for_each_allowed(logits: &[f32], mask: &[u32], mut f: impl FnMut(u32, f32) -> bool) {
    let n = logits.len();
    for (w, &word) in mask.iter().enumerate() {
        let base = w * MASK_WORD_BITS;
        let mut bits = word;
        while bits != 0 {
            let i = base + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if i >= n || !f(i as u32, logits[i]) {
                return;
            }
        }
    }
}

/// The first allowed id whose logit satisfies `pred`.
fn first_allowed(logits: &[f32], mask: &[u32], pred: impl Fn(f32) -> bool) -> Option<u32> {
    let mut found = None;
    for_each_allowed(logits, mask, |i, v| {
        if pred(v) {
            found = Some(i);
            return false;
        }
        true
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(n: usize, allowed: &[u32]) -> Vec<u32> {
        let mut words = vec![0u32; n.div_ceil(MASK_WORD_BITS)];
        for &a in allowed {
            words[a as usize / MASK_WORD_BITS] |= 1 << (a as usize % MASK_WORD_BITS);
        }
        words
    }

    /// The greedy order is the masked argmax's: for random rows (ties, NaN, ±inf) and
    /// random masks, the first of the order the mask allows is the masked argmax, and the
    /// order is that of taking the argmax again and again with the winner left out.
    #[test]
    fn greedy_order_is_the_order_masked_argmax_picks_in() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for case in 0..300 {
            let n = rng.random_range(1..200);
            let row: Vec<f32> = (0..n)
                .map(|_| match rng.random_range(0..12) {
                    0 => f32::NAN,
                    1 => f32::NEG_INFINITY,
                    2 => f32::INFINITY,
                    // Few distinct values: many ties.
                    _ => rng.random_range(-3..3) as f32,
                })
                .collect();
            let k = rng.random_range(0..12);
            let order = greedy_order(&row, k);
            let mut left: Vec<u32> = (0..n as u32).collect();
            let mut expected = Vec::new();
            while expected.len() < k {
                let Some(best) = masked_argmax(&row, &mask(n, &left)) else {
                    break;
                };
                expected.push(best);
                left.retain(|&t| t != best);
            }
            assert_eq!(order, expected, "case {case}: {row:?}");
            let allowed: Vec<u32> = (0..n as u32).filter(|_| rng.random_bool(0.2)).collect();
            let first_allowed = order.iter().copied().find(|t| allowed.contains(t));
            if let Some(t) = first_allowed {
                assert_eq!(
                    masked_argmax(&row, &mask(n, &allowed)),
                    Some(t),
                    "case {case}"
                );
            }
        }
    }

    #[test]
    fn argmax_never_picks_nan_and_picks_minus_inf_only_when_nothing_else_is_left() {
        let logits = [
            f32::NAN,
            f32::NEG_INFINITY,
            f32::NEG_INFINITY,
            -3.0,
            f32::NAN,
        ];
        assert_eq!(masked_argmax(&logits, &mask(5, &[0, 1, 2, 3, 4])), Some(3));
        assert_eq!(masked_argmax(&logits, &mask(5, &[0, 2, 1, 4])), Some(1));
        assert_eq!(masked_argmax(&logits, &mask(5, &[0, 4])), None);
        assert_eq!(masked_argmax(&logits, &mask(5, &[])), None);
    }

    #[test]
    fn argmax_ignores_bits_past_the_row_and_rows_past_the_mask() {
        let logits = [1.0, 2.0, 3.0];
        // Bit 5 is set but the row has 3 logits; the mask covers only word 0.
        assert_eq!(masked_argmax(&logits, &mask(32, &[0, 5])), Some(0));
        let long: Vec<f32> = (0..40).map(|i| i as f32).collect();
        assert_eq!(masked_argmax(&long, &mask(32, &[1, 2])), Some(2));
        assert_eq!(masked_argmax(&long, &[]), None);
    }

    #[test]
    fn sample_degenerates_to_argmax_without_spread_or_with_infinite_best() {
        let logits = [0.5, 2.0, 1.0, f32::INFINITY];
        let all = mask(4, &[0, 1, 2, 3]);
        assert_eq!(masked_sample(&logits, &all, 1.0, 0.0), Some(3));
        let finite = mask(4, &[0, 1, 2]);
        for t in [0.0, -1.0, f32::NAN] {
            assert_eq!(masked_sample(&logits, &finite, t, 0.99), Some(1));
        }
        assert_eq!(masked_sample(&logits, &mask(4, &[]), 1.0, 0.5), None);
    }

    #[test]
    fn sample_walks_the_cdf_in_id_order() {
        // Weights e^0 = 1 for each of three equal logits: thirds of [0, 1).
        let logits = [7.0, 7.0, -1e9, 7.0];
        let m = mask(4, &[0, 1, 2, 3]);
        assert_eq!(masked_sample(&logits, &m, 1.0, 0.0), Some(0));
        assert_eq!(masked_sample(&logits, &m, 1.0, 0.34), Some(1));
        assert_eq!(masked_sample(&logits, &m, 1.0, 0.67), Some(3));
        // Just below 1, and out-of-range u clamped: the last positive weight, never
        // the zero-weight token 2.
        assert_eq!(masked_sample(&logits, &m, 1.0, 0.999_999_9), Some(3));
        assert_eq!(masked_sample(&logits, &m, 1.0, 5.0), Some(3));
        assert_eq!(masked_sample(&logits, &m, 1.0, f32::NAN), Some(0));
    }
}
