//! The masked pick (argmax and softmax sample under a packed grammar mask): the CPU
//! reference against an independent naive definition, and each device kernel
//! against the reference. The device tests need `--features cuda` or
//! `--features metal` and a GPU (`SIGHTLINE_CUDA_DEVICE` / the default Metal device);
//! this machine has neither, so only the CPU tests run here.

use anyhow::{ensure, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sightline::kernels::{masked_argmax, masked_sample, MASK_WORD_BITS};

/// Qwen's logits width: the row the decoder really passes.
const QWEN_WIDTH: usize = 151_936;

/// Widths around the word boundaries and the real one.
const WIDTHS: [usize; 8] = [1, 31, 32, 33, 100, 1000, 4097, QWEN_WIDTH];

/// Shares of allowed tokens: structure positions allow a few, strings most.
const DENSITIES: [f64; 6] = [0.0, 0.0005, 0.05, 0.5, 0.97, 1.0];

/// Largest gap between an empirical frequency and its softmax probability over
/// [`DRAWS`] draws: ~4.5 standard deviations of a frequency near 1/2.
const SAMPLE_FREQ_ATOL: f64 = 0.005;

/// Uniform draws for the frequency test.
const DRAWS: usize = 200_000;

/// Logits of a row: uniform in [-12, 12), never zero-filled, with a few NaN and
/// ±inf sprinkled in when `specials`.
fn random_row(rng: &mut StdRng, n: usize, specials: bool) -> Vec<f32> {
    let mut row: Vec<f32> = (0..n).map(|_| rng.random_range(-12.0..12.0)).collect();
    if specials && n > 8 {
        for _ in 0..(n / 50).max(2) {
            let i = rng.random_range(0..n);
            row[i] = match rng.random_range(0..3) {
                0 => f32::NAN,
                1 => f32::NEG_INFINITY,
                _ => -1e30,
            };
        }
    }
    row
}

/// A packed mask over `n` tokens allowing each with probability `density`.
fn random_mask(rng: &mut StdRng, n: usize, density: f64) -> Vec<u32> {
    let mut words = vec![0u32; n.div_ceil(MASK_WORD_BITS)];
    for i in 0..n {
        if rng.random_bool(density) {
            words[i / MASK_WORD_BITS] |= 1 << (i % MASK_WORD_BITS);
        }
    }
    words
}

fn allowed(mask: &[u32], i: usize) -> bool {
    mask.get(i / MASK_WORD_BITS)
        .is_some_and(|w| (w >> (i % MASK_WORD_BITS)) & 1 == 1)
}

/// The definition, written the slow obvious way: best non-NaN allowed logit, lowest
/// id on ties (so -inf only when nothing better is allowed).
fn naive_argmax(logits: &[f32], mask: &[u32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in logits.iter().enumerate() {
        if !allowed(mask, i) || v.is_nan() {
            continue;
        }
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i as u32)
}

/// Softmax probabilities over the allowed tokens at `temperature`, in f64.
fn softmax(logits: &[f32], mask: &[u32], temperature: f64) -> Vec<f64> {
    let m = logits
        .iter()
        .enumerate()
        .filter(|&(i, v)| allowed(mask, i) && !v.is_nan())
        .map(|(_, &v)| f64::from(v))
        .fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = logits
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if allowed(mask, i) && !v.is_nan() {
                ((f64::from(v) - m) / temperature).exp()
            } else {
                0.0
            }
        })
        .collect();
    let total: f64 = w.iter().sum();
    w.into_iter().map(|x| x / total).collect()
}

#[test]
fn argmax_matches_the_naive_definition_on_random_rows_and_masks() -> Result<()> {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut checked = 0;
    for &n in &WIDTHS {
        for &density in &DENSITIES {
            for specials in [false, true] {
                let row = random_row(&mut rng, n, specials);
                let mask = random_mask(&mut rng, n, density);
                let (got, want) = (masked_argmax(&row, &mask), naive_argmax(&row, &mask));
                ensure!(
                    got == want,
                    "n={n} density={density} specials={specials}: {got:?} != {want:?}"
                );
                checked += usize::from(want.is_some());
            }
        }
    }
    ensure!(checked > 50, "only {checked} rows had an answer");
    Ok(())
}

#[test]
fn argmax_breaks_ties_to_the_lowest_allowed_id() -> Result<()> {
    let mut rng = StdRng::seed_from_u64(11);
    let mut row = random_row(&mut rng, QWEN_WIDTH, false);
    for i in [151_000, 40_001, 77, 33] {
        row[i] = 99.0;
    }
    let mut mask = vec![u32::MAX; QWEN_WIDTH / MASK_WORD_BITS];
    ensure!(masked_argmax(&row, &mask) == Some(33));
    mask[1] &= !(1 << 1); // disallow 33
    ensure!(masked_argmax(&row, &mask) == Some(77));
    Ok(())
}

#[test]
fn all_masked_but_one_returns_that_token_unless_its_logit_is_nan() -> Result<()> {
    let mut rng = StdRng::seed_from_u64(12);
    let n = 1000 + 13; // not a multiple of 32
    for _ in 0..50 {
        let mut row = random_row(&mut rng, n, false);
        let only = rng.random_range(0..n);
        let mut mask = vec![0u32; n.div_ceil(MASK_WORD_BITS)];
        mask[only / MASK_WORD_BITS] |= 1 << (only % MASK_WORD_BITS);
        row[only] = -50.0;
        ensure!(masked_argmax(&row, &mask) == Some(only as u32));
        ensure!(masked_sample(&row, &mask, 1.0, 0.7) == Some(only as u32));
        row[only] = f32::NEG_INFINITY;
        ensure!(masked_argmax(&row, &mask) == Some(only as u32));
        row[only] = f32::NAN;
        ensure!(masked_argmax(&row, &mask).is_none());
        ensure!(masked_sample(&row, &mask, 1.0, 0.7).is_none());
    }
    ensure!(masked_argmax(&[1.0; 40], &[0, 0]).is_none());
    Ok(())
}

#[test]
fn sample_frequencies_match_the_masked_softmax_on_a_small_vocab() -> Result<()> {
    let logits = [1.0f32, 2.5, -0.5, 2.0, 3.0, f32::NAN, 0.25, 1.75, -3.0, 2.9];
    let mask = [0b11_1101_1011u32]; // all but 2 and 5
    let temperature = 0.8;
    let probs = softmax(&logits, &mask, f64::from(temperature));
    let mut rng = StdRng::seed_from_u64(13);
    let mut counts = [0usize; 10];
    for _ in 0..DRAWS {
        let id = masked_sample(&logits, &mask, temperature, rng.random::<f32>())
            .ok_or_else(|| anyhow::anyhow!("no token drawn"))?;
        counts[id as usize] += 1;
    }
    for (id, (&c, &p)) in counts.iter().zip(&probs).enumerate() {
        let freq = c as f64 / DRAWS as f64;
        ensure!(
            (freq - p).abs() <= SAMPLE_FREQ_ATOL,
            "token {id}: frequency {freq:.4} vs softmax {p:.4}"
        );
        ensure!(
            p > 0.0 || c == 0,
            "token {id} is masked or NaN but was drawn"
        );
    }
    Ok(())
}

#[test]
fn sample_at_real_width_lands_on_the_token_whose_cdf_interval_holds_u() -> Result<()> {
    let mut rng = StdRng::seed_from_u64(14);
    let row = random_row(&mut rng, QWEN_WIDTH, true);
    let mask = random_mask(&mut rng, QWEN_WIDTH, 0.5);
    let temperature = 2.0;
    let probs = softmax(&row, &mask, temperature);
    // The midpoints of the 20 most likely tokens' CDF intervals, in id order.
    let mut top: Vec<usize> = (0..QWEN_WIDTH).filter(|&i| probs[i] > 0.0).collect();
    top.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]));
    top.truncate(20);
    let mut cdf = 0.0;
    for (i, &p) in probs.iter().enumerate() {
        if top.contains(&i) {
            let u = (cdf + p / 2.0) as f32;
            let got = masked_sample(&row, &mask, temperature as f32, u);
            ensure!(got == Some(i as u32), "u={u}: {got:?}, expected {i}");
        }
        cdf += p;
    }
    Ok(())
}

/// Device against reference, for any device a kernel exists for.
#[cfg(any(feature = "cuda", feature = "metal"))]
mod device {
    use super::*;
    use candle_core::{Device, Tensor};
    use sightline::kernels::{PickRule, TokenPicker};

    /// A draw is compared only where the reference gives the same id at `u` and at
    /// `u ± SAMPLE_U_MARGIN`: the device sums in f32 in another order, which moves
    /// the CDF boundaries by far less than this.
    const SAMPLE_U_MARGIN: f32 = 1e-4;

    pub fn matches_reference(device: &Device) -> Result<()> {
        let mut rng = StdRng::seed_from_u64(0xde71ce);
        let mut picker = TokenPicker::default();
        let mut compared_draws = 0;
        for &n in &WIDTHS {
            for &density in &DENSITIES {
                for specials in [false, true] {
                    let row = random_row(&mut rng, n, specials);
                    let mask = random_mask(&mut rng, n, density);
                    let on_device = Tensor::new(row.as_slice(), device)?;
                    let got = picker.pick(&on_device, &mask, PickRule::Argmax)?;
                    let want = masked_argmax(&row, &mask);
                    ensure!(
                        got == want,
                        "argmax n={n} density={density}: {got:?} != {want:?}"
                    );
                    for temperature in [0.5f32, 1.0, 3.0] {
                        for _ in 0..8 {
                            let u = rng.random::<f32>();
                            let near = [u - SAMPLE_U_MARGIN, u + SAMPLE_U_MARGIN].map(|v| {
                                masked_sample(&row, &mask, temperature, v.clamp(0.0, 1.0))
                            });
                            let want = masked_sample(&row, &mask, temperature, u);
                            if near != [want, want] {
                                continue; // u sits on a CDF boundary
                            }
                            let got = picker.pick(
                                &on_device,
                                &mask,
                                PickRule::Sample { temperature, u },
                            )?;
                            ensure!(got == want, "sample n={n} density={density} t={temperature} u={u}: {got:?} != {want:?}");
                            compared_draws += 1;
                        }
                    }
                }
            }
        }
        ensure!(compared_draws > 500, "only {compared_draws} draws compared");
        // Ties at the real width, and all masked but one.
        let mut row = random_row(&mut rng, QWEN_WIDTH, false);
        for i in [150_000, 9_000, 4_097] {
            row[i] = 50.0;
        }
        let full = vec![u32::MAX; QWEN_WIDTH / MASK_WORD_BITS];
        let t = Tensor::new(row.as_slice(), device)?;
        ensure!(picker.pick(&t, &full, PickRule::Argmax)? == Some(4_097));
        let mut one = vec![0u32; QWEN_WIDTH / MASK_WORD_BITS];
        one[151_935 / 32] = 1 << (151_935 % 32);
        ensure!(picker.pick(&t, &one, PickRule::Argmax)? == Some(151_935));
        let rule = PickRule::Sample {
            temperature: 1.0,
            u: 0.999,
        };
        ensure!(picker.pick(&t, &one, rule)? == Some(151_935));
        ensure!(picker
            .pick(&t, &vec![0; full.len()], PickRule::Argmax)?
            .is_none());
        Ok(())
    }
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_kernel_matches_the_reference() -> Result<()> {
    let ordinal = std::env::var("SIGHTLINE_CUDA_DEVICE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    device::matches_reference(&candle_core::Device::new_cuda(ordinal)?)
}

#[cfg(feature = "metal")]
#[test]
fn metal_kernel_matches_the_reference() -> Result<()> {
    device::matches_reference(&candle_core::Device::new_metal(0)?)
}

/// Side-by-side timing on the host (ignored by default; run with
/// `cargo test --release --test all kernels_masked_pick:: -- --ignored --nocapture`): the
/// reference against what the CPU sampler did before it, for dense masks (copy the
/// row, set masked logits to -inf, candle's argmax) and sparse ones (visit the set
/// bits of a `SimpleVob`), on Qwen-width rows.
#[test]
#[ignore]
fn measure_reference_against_the_previous_cpu_argmax() -> Result<()> {
    use candle_core::{Device, Tensor};
    use std::time::Instant;
    use toktrie::SimpleVob;

    const REPS: usize = 200;
    let mut rng = StdRng::seed_from_u64(15);
    let row = random_row(&mut rng, QWEN_WIDTH, false);
    println!(
        "masked argmax over {QWEN_WIDTH} logits, median of {REPS}, ratio = reference / previous"
    );
    for density in [1.0, 0.97, 0.5, 0.01, 0.0005] {
        let words = random_mask(&mut rng, QWEN_WIDTH, density);
        let mut vob = SimpleVob::alloc(QWEN_WIDTH);
        for i in 0..QWEN_WIDTH {
            if allowed(&words, i) {
                vob.allow_token(i as u32);
            }
        }
        let previous = |row: &[f32]| -> Result<Option<u32>> {
            if vob.num_set() * 4 < row.len() {
                let mut best: Option<(u32, f32)> = None;
                vob.iter_set_entries(|i| {
                    if best.is_none_or(|(_, b)| row[i] > b) {
                        best = Some((i as u32, row[i]));
                    }
                });
                return Ok(best.map(|(i, _)| i));
            }
            let mut copy = row.to_vec();
            vob.iter_unset_entries(|i| copy[i] = f32::NEG_INFINITY);
            let t = Tensor::from_vec(copy, row.len(), &Device::Cpu)?;
            Ok(Some(t.argmax(0)?.to_scalar::<u32>()?))
        };
        let median = |f: &mut dyn FnMut() -> Result<Option<u32>>| -> Result<(f64, Option<u32>)> {
            let mut times = Vec::with_capacity(REPS);
            let mut last = None;
            for _ in 0..REPS {
                let t = Instant::now();
                last = std::hint::black_box(f()?);
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            times.sort_by(f64::total_cmp);
            Ok((times[REPS / 2], last))
        };
        let (new_us, new_id) = median(&mut || Ok(masked_argmax(&row, &words)))?;
        let (old_us, old_id) = median(&mut || previous(&row))?;
        ensure!(
            new_id == old_id,
            "density {density}: {new_id:?} != {old_id:?}"
        );
        println!(
            "density {density:>7}: reference {new_us:8.1} µs, previous {old_us:8.1} µs, ratio {:.2}",
            new_us / old_us
        );
    }
    Ok(())
}
