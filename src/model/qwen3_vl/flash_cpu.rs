//! Fused ("flash") attention on the CPU in f32, for many query rows: blocks of queries
//! walk the keys in blocks, with a running softmax (max, sum) per row, so the score
//! matrix is never materialized. The matmul route writes, scales, exponentiates and
//! reads back 4,888² scores per head and layer for a 1280-token screenshot (a fresh
//! 64 MB buffer per chunk, libm `expf` per score); here a block of scores lives in L1/L2
//! and the exponential is a vectorizable polynomial.
//!
//! Products are register tiles of [`TR`] rows × [`TW`] columns: AVX-512 kernels where
//! the CPU has AVX-512F (checked at run time), elsewhere fixed-size array loops the
//! compiler keeps in vector registers (FMA instructions with `-C target-cpu=native`).

use std::sync::Mutex;

use candle_core::Tensor;

use super::attention::cpu_f32;
use crate::error::Result;

/// Query rows per task (the unit of work on candle's thread pool).
const QB: usize = 64;
/// Keys per block: one block of scores is `QB × KB` f32 (64 KB).
const KB: usize = 256;
/// Register tile: rows.
const TR: usize = 8;
/// Rows per pass of the portable tiles: 4 × [`TW`] f32 accumulators are 16 256-bit
/// registers (8 of AVX-512's).
const PR: usize = 4;
/// Register tile: columns (keys for scores, value dimensions for the weighted sum).
const TW: usize = 32;

/// `a * b + c`, one FMA instruction where the target has it (a libm call otherwise,
/// which is far slower than the two operations).
#[inline(always)]
fn fmadd(a: f32, b: f32, c: f32) -> f32 {
    if cfg!(target_feature = "fma") {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `exp(x)` for `x ≤ 0` (softmax arguments after the max is subtracted), Cephes'
/// `expf` polynomial: relative error below 2e-7 over [-87, 0]; below -87 (including
/// -inf from a mask) it returns 0.
#[inline(always)]
pub(super) fn exp_nonpositive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Not `max`: a NaN must stay NaN.
    let xc = if x < -87.0 { -87.0 } else { x };
    let n = (xc * LOG2E).round_ties_even();
    let r = fmadd(-n, LN2_LO, fmadd(-n, LN2_HI, xc));
    let mut p = 1.987_569_1e-4f32;
    p = fmadd(p, r, 1.398_199_9e-3);
    p = fmadd(p, r, 8.333_452e-3);
    p = fmadd(p, r, 4.166_579_6e-2);
    p = fmadd(p, r, 1.666_666_5e-1);
    p = fmadd(p, r, 0.5);
    let e = fmadd(p * r, r, r) + 1.0;
    // 2^n by building the float's exponent field, n + 127 in [1, 127] after the clamp:
    // adding 2^23 puts that integer in the low mantissa bits, the shift moves it into
    // the exponent (float operations only, unlike an `as i32` cast, so it vectorizes).
    let two_n = f32::from_bits((n + 127.0 + 8_388_608.0).to_bits() << 23);
    if x < -87.0 {
        0.0
    } else {
        e * two_n
    }
}

/// The largest value of `row` (`-inf` when empty; NaNs are skipped, as `f32::max`
/// does): in 16 lanes, which vectorize where a `max` fold does not.
fn max_of(row: &[f32]) -> f32 {
    const LANES: usize = 16;
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

/// `row[j] = exp(row[j] - max)`, returning the sum: in 16 independent lanes so the
/// loop vectorizes.
fn exp_sub_sum(row: &mut [f32], max: f32) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0f32; LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (x, a) in chunk.iter_mut().zip(acc.iter_mut()) {
            *x = exp_nonpositive(*x - max);
            *a += *x;
        }
    }
    let mut tail = 0f32;
    for x in chunks.into_remainder() {
        *x = exp_nonpositive(*x - max);
        tail += *x;
    }
    acc.iter().sum::<f32>() + tail
}

/// `out[i][j] = Σ_c a[i][c] · bt[c][j]` for [`TR`] rows of `a` (row stride `a_stride`,
/// `depth` columns) and [`TW`] columns of `bt` (row stride `bt_stride`).
#[inline(always)]
fn tile_a_bt(
    a: &[f32],
    a_stride: usize,
    bt: &[f32],
    bt_stride: usize,
    depth: usize,
) -> [[f32; TW]; TR] {
    #[cfg(target_arch = "x86_64")]
    if depth > 0
        && a.len() >= (TR - 1) * a_stride + depth
        && bt.len() >= (depth - 1) * bt_stride + TW
        && std::arch::is_x86_feature_detected!("avx512f")
    {
        // SAFETY: AVX-512F is present, and the bounds it reads were checked above.
        return unsafe { avx512::tile_a_bt(a, a_stride, bt, bt_stride, depth) };
    }
    tile_a_bt_portable(a, a_stride, bt, bt_stride, depth)
}

/// `acc[i] += Σ_j p[i][j] · v[j]` for [`TR`] rows of `p` (row stride `p_stride`), `kn`
/// keys, and [`TW`] columns of `v` (row stride `v_stride`).
#[inline(always)]
fn tile_p_v(
    p: &[f32],
    p_stride: usize,
    v: &[f32],
    v_stride: usize,
    kn: usize,
    acc: &mut [[f32; TW]; TR],
) {
    #[cfg(target_arch = "x86_64")]
    if kn > 0
        && p.len() >= (TR - 1) * p_stride + kn
        && v.len() >= (kn - 1) * v_stride + TW
        && std::arch::is_x86_feature_detected!("avx512f")
    {
        // SAFETY: AVX-512F is present, and the bounds it reads were checked above.
        unsafe { avx512::tile_p_v(p, p_stride, v, v_stride, kn, acc) };
        return;
    }
    tile_p_v_portable(p, p_stride, v, v_stride, kn, acc)
}

/// [`tile_a_bt`] in plain Rust: the compiler vectorizes it to the widths it prefers
/// for the target (256 bits on most AVX-512 CPUs, hence the explicit kernels).
#[inline(always)]
fn tile_a_bt_portable(
    a: &[f32],
    a_stride: usize,
    bt: &[f32],
    bt_stride: usize,
    depth: usize,
) -> [[f32; TW]; TR] {
    let mut out = [[0f32; TW]; TR];
    for (pass, rows) in out.chunks_exact_mut(PR).enumerate() {
        let mut acc = [[0f32; TW]; PR];
        let a = &a[pass * PR * a_stride..];
        for c in 0..depth {
            let Some(b) = bt.get(c * bt_stride..c * bt_stride + TW) else {
                break;
            };
            let b: &[f32; TW] = b.try_into().unwrap_or(&[0.0; TW]);
            for (i, acc_row) in acc.iter_mut().enumerate() {
                let x = a[i * a_stride + c];
                for (o, &y) in acc_row.iter_mut().zip(b) {
                    *o = fmadd(x, y, *o);
                }
            }
        }
        rows.copy_from_slice(&acc);
    }
    out
}

/// [`tile_p_v`] in plain Rust.
#[inline(always)]
fn tile_p_v_portable(
    p: &[f32],
    p_stride: usize,
    v: &[f32],
    v_stride: usize,
    kn: usize,
    acc: &mut [[f32; TW]; TR],
) {
    for (pass, rows) in acc.chunks_exact_mut(PR).enumerate() {
        let mut a = [[0f32; TW]; PR];
        a.copy_from_slice(rows);
        let p = &p[pass * PR * p_stride..];
        for j in 0..kn {
            let Some(vrow) = v.get(j * v_stride..j * v_stride + TW) else {
                break;
            };
            let vrow: &[f32; TW] = vrow.try_into().unwrap_or(&[0.0; TW]);
            for (i, a_row) in a.iter_mut().enumerate() {
                let x = p[i * p_stride + j];
                for (o, &y) in a_row.iter_mut().zip(vrow) {
                    *o = fmadd(x, y, *o);
                }
            }
        }
        rows.copy_from_slice(&a);
    }
}

/// The two register tiles with 512-bit vectors: [`TW`] = 32 columns are two registers,
/// so a tile is 16 accumulators. Measured on the vision shape (one layer of a 1280-token
/// screenshot, 2 threads, native build): 0.74–0.97 s against 1.37–1.46 s for the
/// portable code, which the compiler keeps at 256 bits.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{TR, TW};

    const _: () = assert!(TW == 32 && TR == 8);

    /// # Safety
    /// AVX-512F must be available; `a` must hold `(TR - 1) * a_stride + depth` values and
    /// `bt` `(depth - 1) * bt_stride + TW`, `depth > 0`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile_a_bt(
        a: &[f32],
        a_stride: usize,
        bt: &[f32],
        bt_stride: usize,
        depth: usize,
    ) -> [[f32; TW]; TR] {
        let mut acc = [_mm512_setzero_ps(); 2 * TR];
        let (a, bt) = (a.as_ptr(), bt.as_ptr());
        for c in 0..depth {
            // SAFETY (here and below): within the bounds the caller guarantees.
            let (b0, b1) = unsafe {
                (
                    _mm512_loadu_ps(bt.add(c * bt_stride)),
                    _mm512_loadu_ps(bt.add(c * bt_stride + 16)),
                )
            };
            for i in 0..TR {
                let x = _mm512_set1_ps(unsafe { *a.add(i * a_stride + c) });
                acc[2 * i] = _mm512_fmadd_ps(x, b0, acc[2 * i]);
                acc[2 * i + 1] = _mm512_fmadd_ps(x, b1, acc[2 * i + 1]);
            }
        }
        let mut out = [[0f32; TW]; TR];
        for (i, row) in out.iter_mut().enumerate() {
            unsafe {
                _mm512_storeu_ps(row.as_mut_ptr(), acc[2 * i]);
                _mm512_storeu_ps(row.as_mut_ptr().add(16), acc[2 * i + 1]);
            }
        }
        out
    }

    /// # Safety
    /// AVX-512F must be available; `p` must hold `(TR - 1) * p_stride + kn` values and
    /// `v` `(kn - 1) * v_stride + TW`, `kn > 0`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile_p_v(
        p: &[f32],
        p_stride: usize,
        v: &[f32],
        v_stride: usize,
        kn: usize,
        acc: &mut [[f32; TW]; TR],
    ) {
        let mut a = [_mm512_setzero_ps(); 2 * TR];
        for (i, row) in acc.iter().enumerate() {
            unsafe {
                a[2 * i] = _mm512_loadu_ps(row.as_ptr());
                a[2 * i + 1] = _mm512_loadu_ps(row.as_ptr().add(16));
            }
        }
        let (p, v) = (p.as_ptr(), v.as_ptr());
        for j in 0..kn {
            let (v0, v1) = unsafe {
                (
                    _mm512_loadu_ps(v.add(j * v_stride)),
                    _mm512_loadu_ps(v.add(j * v_stride + 16)),
                )
            };
            for i in 0..TR {
                let x = _mm512_set1_ps(unsafe { *p.add(i * p_stride + j) });
                a[2 * i] = _mm512_fmadd_ps(x, v0, a[2 * i]);
                a[2 * i + 1] = _mm512_fmadd_ps(x, v1, a[2 * i + 1]);
            }
        }
        for (i, row) in acc.iter_mut().enumerate() {
            unsafe {
                _mm512_storeu_ps(row.as_mut_ptr(), a[2 * i]);
                _mm512_storeu_ps(row.as_mut_ptr().add(16), a[2 * i + 1]);
            }
        }
    }
}

/// Attention for `q` `(groups, rep, n, hd)` against `k`, `v` `(groups, len, hd)` with
/// an optional additive `(n, len)` mask, as [`super::attention::attention`] computes
/// it. `None` when the inputs are not CPU f32 with unit-stride rows (the caller then
/// takes another route).
pub(super) fn flash_cpu(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
) -> Result<Option<Tensor>> {
    let (groups, rep, n, hd) = q.dims4()?;
    let len = k.dim(1)?;
    let rows = rep * n;
    if rows == 0 || len == 0 || hd == 0 {
        return Ok(None);
    }
    let scale = scale as f32;
    // Keys transposed per group, `(hd, len_padded)`, so a score tile reads TW
    // consecutive keys per dimension; the padding is never read as a score.
    let len_padded = len.div_ceil(TW) * TW;
    let mut kt = vec![0f32; groups * hd * len_padded];
    let mut out = vec![0f32; groups * rows * hd];
    let done = cpu_f32(q, |q_data, q_layout| {
        cpu_f32(k, |k_data, k_layout| {
            cpu_f32(v, |v_data, v_layout| {
                let mask_data = match mask {
                    Some(m) => match cpu_f32(m, |d, l| {
                        l.contiguous_offsets().map(|(a, b)| d[a..b].to_vec())
                    }) {
                        Some(Some(d)) if d.len() == n * len => Some(d),
                        _ => return false,
                    },
                    None => None,
                };
                let (Some((q0, _)), &[ks0, ks1, 1], &[vs0, vs1, 1]) = (
                    q_layout.contiguous_offsets(),
                    k_layout.stride(),
                    v_layout.stride(),
                ) else {
                    return false;
                };
                let (k0, v0) = (k_layout.start_offset(), v_layout.start_offset());
                let pool = candle_core::utils::barrier_pool();
                {
                    let per_group: Vec<Mutex<&mut [f32]>> =
                        kt.chunks_mut(hd * len_padded).map(Mutex::new).collect();
                    pool.execute_chunked(groups, |range| {
                        for g in range {
                            let Ok(mut guard) = per_group[g].lock() else {
                                continue;
                            };
                            let dst: &mut [f32] = &mut guard;
                            // In blocks of 16 keys: each write fills one cache line of
                            // a transposed row, the 16 key rows stay in L1.
                            for j0 in (0..len).step_by(16) {
                                let jn = 16.min(len - j0);
                                for c in 0..hd {
                                    let row = &mut dst[c * len_padded + j0..][..jn];
                                    for (jj, x) in row.iter_mut().enumerate() {
                                        *x = k_data[k0 + g * ks0 + (j0 + jj) * ks1 + c];
                                    }
                                }
                            }
                        }
                    });
                }
                let kt = &kt;
                // One output slice per task: QB rows of one group.
                let mut tasks: Vec<Mutex<(usize, usize, &mut [f32])>> = Vec::new();
                for (g, group_out) in out.chunks_mut(rows * hd).enumerate() {
                    for (b, block) in group_out.chunks_mut(QB * hd).enumerate() {
                        tasks.push(Mutex::new((g, b * QB, block)));
                    }
                }
                pool.execute_chunked(tasks.len(), |range| {
                    let mut qs = vec![0f32; QB * hd];
                    let mut s = vec![0f32; QB * KB];
                    let mut o = vec![0f32; QB * hd];
                    let mut m = [f32::NEG_INFINITY; QB];
                    let mut l = [0f32; QB];
                    for t in range {
                        let Ok(mut task) = tasks[t].lock() else {
                            continue;
                        };
                        let (g, r0, ref mut dst) = *task;
                        let nr = dst.len() / hd;
                        let nr_tiles = nr.div_ceil(TR) * TR;
                        let src = &q_data[q0 + (g * rows + r0) * hd..][..nr * hd];
                        qs.fill(0.0);
                        qs.iter_mut().zip(src).for_each(|(d, &x)| *d = x * scale);
                        o.fill(0.0);
                        m.fill(f32::NEG_INFINITY);
                        l.fill(0.0);
                        let ktg = &kt[g * hd * len_padded..][..hd * len_padded];
                        for kb0 in (0..len).step_by(KB) {
                            let kn = KB.min(len - kb0);
                            if let Some(md) = &mask_data {
                                // A block the mask hides entirely from every row (the
                                // future, under a causal mask) adds nothing: skip it.
                                let hidden = (0..nr).all(|i| {
                                    md[((r0 + i) % n) * len + kb0..][..kn]
                                        .iter()
                                        .all(|&x| x == f32::NEG_INFINITY)
                                });
                                if hidden {
                                    continue;
                                }
                            }
                            // Scores of the block.
                            for i0 in (0..nr_tiles).step_by(TR) {
                                for j0 in (0..kn).step_by(TW) {
                                    let tile = tile_a_bt(
                                        &qs[i0 * hd..],
                                        hd,
                                        &ktg[kb0 + j0..],
                                        len_padded,
                                        hd,
                                    );
                                    for (i, tile_row) in tile.iter().enumerate() {
                                        let w = TW.min(kn - j0);
                                        s[(i0 + i) * KB + j0..][..w]
                                            .copy_from_slice(&tile_row[..w]);
                                    }
                                }
                            }
                            // Running softmax per row.
                            for i in 0..nr {
                                let row = &mut s[i * KB..i * KB + kn];
                                if let Some(md) = &mask_data {
                                    let mrow = &md[((r0 + i) % n) * len + kb0..][..kn];
                                    row.iter_mut().zip(mrow).for_each(|(x, &a)| *x += a);
                                }
                                let block_max = max_of(row);
                                let new_max = m[i].max(block_max);
                                if new_max == f32::NEG_INFINITY {
                                    // Every key so far masked out: nothing to add yet.
                                    row.fill(0.0);
                                    continue;
                                }
                                let alpha = exp_nonpositive(m[i] - new_max);
                                let sum = exp_sub_sum(row, new_max);
                                l[i] = l[i] * alpha + sum;
                                m[i] = new_max;
                                if alpha != 1.0 {
                                    o[i * hd..(i + 1) * hd].iter_mut().for_each(|x| *x *= alpha);
                                }
                            }
                            // Weighted values of the block: o += p · v.
                            for i0 in (0..nr_tiles).step_by(TR) {
                                let mut c0 = 0;
                                while c0 < hd {
                                    let w = TW.min(hd - c0);
                                    let mut acc = [[0f32; TW]; TR];
                                    for (i, acc_row) in acc.iter_mut().enumerate() {
                                        acc_row[..w].copy_from_slice(&o[(i0 + i) * hd + c0..][..w]);
                                    }
                                    let vb = &v_data[v0 + g * vs0 + kb0 * vs1 + c0..];
                                    if w == TW {
                                        tile_p_v(&s[i0 * KB..], KB, vb, vs1, kn, &mut acc);
                                    } else {
                                        for j in 0..kn {
                                            let vrow = &vb[j * vs1..][..w];
                                            for (i, acc_row) in acc.iter_mut().enumerate() {
                                                let p = s[(i0 + i) * KB + j];
                                                for (a, &x) in acc_row.iter_mut().zip(vrow) {
                                                    *a = fmadd(p, x, *a);
                                                }
                                            }
                                        }
                                    }
                                    for (i, acc_row) in acc.iter().enumerate() {
                                        o[(i0 + i) * hd + c0..][..w].copy_from_slice(&acc_row[..w]);
                                    }
                                    c0 += w;
                                }
                            }
                        }
                        for i in 0..nr {
                            // A row whose keys were all masked out has no weights:
                            // 0/0, NaN, as the matmul route's softmax gives.
                            let inv = 1.0 / l[i];
                            for (d, &x) in dst[i * hd..(i + 1) * hd].iter_mut().zip(&o[i * hd..]) {
                                *d = x * inv;
                            }
                        }
                    }
                });
                true
            })
        })
    });
    if done != Some(Some(Some(true))) {
        return Ok(None);
    }
    Ok(Some(Tensor::from_vec(
        out,
        (groups, rep, n, hd),
        q.device(),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::qwen3_vl::attention::matmul_route;
    use crate::model::qwen3_vl::text::causal_mask;
    use candle_core::{DType, Device};
    use rand::{Rng, SeedableRng};

    /// The fused and matmul routes sum the same terms in different orders, and the
    /// exponential here is a polynomial (relative error < 2e-7).
    const FLASH_ATOL: f32 = 1e-5;

    fn random(rng: &mut rand::rngs::StdRng, shape: &[usize], amp: f32) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|_| rng.random_range(-amp..amp)).collect();
        Ok(Tensor::from_vec(data, shape, &Device::Cpu)?)
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
        Ok((a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?)
    }

    #[test]
    fn exp_matches_libm_and_keeps_nan() {
        let mut worst = 0f32;
        for i in 0..=200_000 {
            let x = -87.0 * i as f32 / 200_000.0;
            let rel = ((exp_nonpositive(x) - x.exp()) / x.exp()).abs();
            worst = worst.max(rel);
        }
        assert!(worst < 2e-7, "relative error {worst}");
        assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_nonpositive(-1000.0), 0.0);
        assert!(exp_nonpositive(f32::NAN).is_nan());
    }

    /// Against the matmul route over shapes that cross every block and tile edge (rows
    /// past [`QB`], keys past [`KB`], head sizes that are not multiples of [`TW`]),
    /// with keys and values viewed from a larger cache buffer, with and without a
    /// causal mask, and with scores large enough for the running max to move.
    #[test]
    fn flash_matches_the_matmul_route() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for &(groups, rep, n, len, hd, amp) in &[
            (2, 3, 7, 11, 8, 1.0),
            (2, 1, 70, 300, 40, 1.0),
            (1, 2, 130, 530, 64, 3.0),
            (3, 1, 33, 33, 96, 0.5),
        ] {
            let capacity = len + 5;
            let kb = random(&mut rng, &[groups, capacity, hd], amp)?;
            let vb = random(&mut rng, &[groups, capacity, hd], 1.0)?;
            let (k, v) = (kb.narrow(1, 0, len)?, vb.narrow(1, 0, len)?);
            let q = random(&mut rng, &[groups, rep, n, hd], amp)?;
            let causal = causal_mask(n, len - n, &Device::Cpu)?;
            for mask in [None, Some(&causal)] {
                let scale = 1.0 / (hd as f64).sqrt();
                let fused = flash_cpu(&q, &k, &v, mask, scale)?.expect("CPU f32 inputs");
                let reference = matmul_route(&q, &k, &v, mask, scale, usize::MAX)?;
                let diff = max_diff(&fused, &reference)?;
                assert!(
                    diff <= FLASH_ATOL,
                    "{groups}×{rep}×{n} vs {len}, hd {hd}, mask {}: {diff}",
                    mask.is_some()
                );
            }
        }
        Ok(())
    }

    /// The portable tiles against the dispatched ones (the AVX-512 kernels where the CPU
    /// has them, so both are exercised on such a machine).
    #[test]
    fn portable_tiles_match_the_dispatched_ones() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut values =
            |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect() };
        let (depth, a_stride, bt_stride) = (72, 80, 100);
        let a = values(TR * a_stride);
        let bt = values(depth * bt_stride);
        let fast = tile_a_bt(&a, a_stride, &bt, bt_stride, depth);
        let portable = tile_a_bt_portable(&a, a_stride, &bt, bt_stride, depth);
        let (kn, p_stride, v_stride) = (50, 64, 40);
        let p = values(TR * p_stride);
        let v = values(kn * v_stride);
        let start: Vec<f32> = values(TR * TW);
        let mut acc_fast = [[0f32; TW]; TR];
        for (row, src) in acc_fast.iter_mut().zip(start.chunks_exact(TW)) {
            row.copy_from_slice(src);
        }
        let mut acc_portable = acc_fast;
        tile_p_v(&p, p_stride, &v, v_stride, kn, &mut acc_fast);
        tile_p_v_portable(&p, p_stride, &v, v_stride, kn, &mut acc_portable);
        for (x, y) in fast
            .iter()
            .flatten()
            .zip(portable.iter().flatten())
            .chain(acc_fast.iter().flatten().zip(acc_portable.iter().flatten()))
        {
            assert!((x - y).abs() <= 1e-5, "{x} vs {y}");
        }
        Ok(())
    }

    #[test]
    fn fully_masked_rows_are_nan_as_in_the_matmul_route() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let (q, k, v) = (
            random(&mut rng, &[1, 1, 3, 8], 1.0)?,
            random(&mut rng, &[1, 5, 8], 1.0)?,
            random(&mut rng, &[1, 5, 8], 1.0)?,
        );
        let mut m = vec![0f32; 15];
        m[5..10].fill(f32::NEG_INFINITY);
        let mask = Tensor::from_vec(m, (3, 5), &Device::Cpu)?;
        let fused = flash_cpu(&q, &k, &v, Some(&mask), 0.5)?
            .expect("CPU f32 inputs")
            .flatten_all()?
            .to_vec1::<f32>()?;
        assert!(fused[8..16].iter().all(|x| x.is_nan()));
        assert!(fused[..8].iter().chain(&fused[16..]).all(|x| x.is_finite()));
        // Not CPU f32: another route.
        let q16 = q.to_dtype(DType::F16)?;
        assert!(flash_cpu(&q16, &k, &v, None, 0.5)?.is_none());
        Ok(())
    }

    /// Route timing on this machine (run with `--release --ignored --nocapture`,
    /// natively built): the vision tower's shape for a 1280-token screenshot and a
    /// 512-token text prefill.
    #[test]
    #[ignore = "measurement"]
    fn flash_against_matmul_timing() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for &(name, groups, rep, n, hd, causal) in &[
            ("vision 4888 patches, 16 heads", 16, 1, 4888, 64, false),
            ("text prefill 512, 16 heads / 8 KV", 8, 2, 512, 128, true),
        ] {
            let q = random(&mut rng, &[groups, rep, n, hd], 1.0)?;
            let k = random(&mut rng, &[groups, n, hd], 1.0)?;
            let v = random(&mut rng, &[groups, n, hd], 1.0)?;
            let mask = if causal {
                Some(causal_mask(n, 0, &Device::Cpu)?)
            } else {
                None
            };
            let scale = 1.0 / (hd as f64).sqrt();
            for round in 0..3 {
                let t = std::time::Instant::now();
                let a = flash_cpu(&q, &k, &v, mask.as_ref(), scale)?.expect("f32");
                let flash = t.elapsed();
                let t = std::time::Instant::now();
                let b = matmul_route(
                    &q,
                    &k,
                    &v,
                    mask.as_ref(),
                    scale,
                    super::super::attention::SCORES_BUDGET_BYTES,
                )?;
                let matmul = t.elapsed();
                println!(
                    "{name} round {round}: flash {flash:?}, matmul {matmul:?}, diff {}",
                    max_diff(&a, &b)?
                );
            }
        }
        Ok(())
    }
}
