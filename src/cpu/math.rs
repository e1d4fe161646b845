//! f32 math the hand-written kernels share: a fused multiply-add that is one instruction only
//! where the caller's compiled variant allows it, a polynomial exponential, and reductions in
//! independent lanes that vectorize. Every function is `#[inline(always)]` and generic over
//! `FMA`, so it is compiled into each variant [`dispatch_fn`](crate::cpu::dispatch_fn) makes.

/// `a * b + c`: one FMA instruction when `FMA` (only instantiate it so inside a function
/// compiled with the `fma` feature: elsewhere it is a libm call, far slower than the two
/// operations).
#[inline(always)]
pub fn fmadd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `exp(x)` for `x ≤ 0` (softmax arguments after the max is subtracted): `2ⁿ · e^r` with
/// `r` in [-ln2/2, ln2/2] and `e^r ≈ 1 + r + r² P(r)`, `P` a degree-3 minimax fit
/// (`models/scripts/fit_exp_poly.py`: 1.05e-7 in exact arithmetic, 1.6e-7 evaluated in
/// f32). Relative error below 2e-7 over [-87, 0]; below -87 (including -inf from a mask)
/// it returns 0; NaN stays NaN. Cephes' degree-5 `P`, used before, is a little more
/// accurate and costs two more multiply-adds a value: the vision tower's attention (one
/// layer, one thread, forced AVX2 path of a Zen 4-class EPYC VM, release build) 1.252 -> 1.222 s.
#[inline(always)]
pub fn exp_nonpositive<const FMA: bool>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    /// 1.5 · 2²³ + 127: adding it rounds `x · log2 e` (magnitude below 2²²) to the nearest
    /// integer `n` (ties to even) and leaves `n + 127`, the biased exponent of 2ⁿ, in the
    /// low mantissa bits, which a shift moves into the exponent field. Float operations
    /// only, so it vectorizes on every x86-64 (`round_ties_even` needs SSE4.1 and is a
    /// libm call in a baseline build; an `as i32` cast does not vectorize), and one
    /// addition does the rounding and the bias.
    const SHIFT: f32 = 12_583_039.0;
    // Not `max`: a NaN must stay NaN.
    let xc = if x < -87.0 { -87.0 } else { x };
    let z = fmadd::<FMA>(xc, LOG2E, SHIFT);
    let n = z - SHIFT;
    let r = fmadd::<FMA>(-n, LN2_LO, fmadd::<FMA>(-n, LN2_HI, xc));
    let mut p = 8.312_525e-3f32;
    p = fmadd::<FMA>(p, r, 4.189_011_4e-2);
    p = fmadd::<FMA>(p, r, 1.666_711_4e-1);
    p = fmadd::<FMA>(p, r, 0.499_992_3);
    let e = fmadd::<FMA>(p * r, r, r) + 1.0;
    // n + 127 is in [1, 127] after the clamp: the shift leaves exactly it in the exponent
    // field (the mantissa's leading 1.5 · 2²³ bits fall off the top).
    let two_n = f32::from_bits(z.to_bits() << 23);
    if x < -87.0 {
        0.0
    } else {
        e * two_n
    }
}

/// Independent accumulator lanes of the reductions below: a plain `sum()` is one chain
/// of dependent float additions (about 4 cycles per element); 16 lanes fill one AVX-512
/// register or two AVX2 ones.
const LANES: usize = 16;

/// `a · b` in [`LANES`] independent lanes.
#[inline(always)]
pub fn dot<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let split = a.len().min(b.len()) / LANES * LANES;
    for (x, y) in a[..split]
        .chunks_exact(LANES)
        .zip(b[..split].chunks_exact(LANES))
    {
        for i in 0..LANES {
            acc[i] = fmadd::<FMA>(x[i], y[i], acc[i]);
        }
    }
    let tail: f32 = a[split..].iter().zip(&b[split..]).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// `out += p · x`.
#[inline(always)]
pub fn axpy<const FMA: bool>(p: f32, x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = fmadd::<FMA>(p, v, *o);
    }
}

/// The largest value of `row` (`-inf` when empty; NaNs are skipped, as `f32::max`
/// does), in [`LANES`] lanes, which vectorize where a `max` fold does not.
#[inline(always)]
pub fn max_of(row: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a = if x > *a { x } else { *a };
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    acc.iter().fold(tail, |a, &b| a.max(b))
}

/// `row[j] = exp(row[j] - max)`, returning the sum, in [`LANES`] lanes.
#[inline(always)]
pub fn exp_sub_sum<const FMA: bool>(row: &mut [f32], max: f32) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (x, a) in chunk.iter_mut().zip(acc.iter_mut()) {
            *x = exp_nonpositive::<FMA>(*x - max);
            *a += *x;
        }
    }
    let mut tail = 0f32;
    for x in chunks.into_remainder() {
        *x = exp_nonpositive::<FMA>(*x - max);
        tail += *x;
    }
    acc.iter().sum::<f32>() + tail
}

/// Seconds `f` took on this thread's CPU (Linux's `/proc/thread-self/schedstat`, which
/// does not count time the scheduler gave to other processes: the kernel timings are taken
/// on a shared machine), or wall-clock seconds where that file is unreadable. Run the
/// timing tests with `CANDLE_NUM_THREADS=1` so all the work is on this thread.
#[cfg(test)]
pub fn thread_cpu_seconds(mut f: impl FnMut()) -> f64 {
    fn on_cpu_ns() -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        stat.split_whitespace().next()?.parse().ok()
    }
    let wall = std::time::Instant::now();
    let before = on_cpu_ns();
    f();
    match (before, on_cpu_ns()) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 * 1e-9,
        _ => wall.elapsed().as_secs_f64(),
    }
}

/// The best of `rounds` CPU times ([`thread_cpu_seconds`]) of `f` on each path this CPU
/// runs, and each path's speed-up over the portable one (the last of
/// [`CpuPath::available`](crate::cpu::CpuPath::available)). The paths alternate within
/// each round, which spreads the machine's noise over them.
#[cfg(test)]
pub fn best_seconds_per_path<E>(
    rounds: usize,
    mut f: impl FnMut(crate::cpu::CpuPath) -> Result<(), E>,
) -> Result<Vec<(crate::cpu::CpuPath, f64, f64)>, E> {
    let paths = crate::cpu::CpuPath::available();
    let mut best = vec![f64::INFINITY; paths.len()];
    for _round in 0..rounds {
        for (i, &path) in paths.iter().enumerate() {
            let mut result = Ok(());
            let secs = thread_cpu_seconds(|| result = f(path));
            result?;
            best[i] = best[i].min(secs);
        }
    }
    let portable = best[paths.len() - 1];
    Ok(paths
        .into_iter()
        .zip(best)
        .map(|(path, secs)| (path, secs, portable / secs))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{dispatch_fn, CpuPath};

    /// The polynomial exponential against libm, per compiled variant.
    const EXP_RTOL: f32 = 2e-7;

    #[inline(always)]
    fn exp_many<const FMA: bool>(xs: &[f32], out: &mut [f32]) {
        for (o, &x) in out.iter_mut().zip(xs) {
            *o = exp_nonpositive::<FMA>(x);
        }
    }
    dispatch_fn!(fn exp_dispatched(xs: &[f32], out: &mut [f32]) => exp_many);

    #[test]
    fn exp_matches_libm_on_every_path_and_keeps_nan() {
        let xs: Vec<f32> = (0..=200_000)
            .map(|i| -87.0 * i as f32 / 200_000.0)
            .chain([f32::NEG_INFINITY, -1000.0, -87.5, f32::NAN, -0.0])
            .collect();
        for path in CpuPath::available() {
            let mut out = vec![0f32; xs.len()];
            exp_dispatched(path, &xs, &mut out);
            let mut worst = 0f32;
            for (&x, &y) in xs.iter().zip(&out).take(200_001) {
                worst = worst.max(((y - x.exp()) / x.exp()).abs());
            }
            assert!(worst < EXP_RTOL, "{path:?}: relative error {worst}");
            let n = xs.len();
            assert_eq!(&out[n - 5..n - 2], &[0.0, 0.0, 0.0], "{path:?}");
            assert!(out[n - 2].is_nan(), "{path:?}");
            assert_eq!(out[n - 1], 1.0, "{path:?}");
        }
    }
}
