//! Fused ("flash") attention on the CPU in f32, for many query rows: blocks of queries
//! walk the keys in blocks, with a running softmax (max, sum) per row, so the score
//! matrix is never materialized. The matmul route writes, scales, exponentiates and
//! reads back 4,888² scores per head and layer for a 1280-token screenshot (a fresh
//! 64 MB buffer per chunk, libm `expf` per score); here a block of scores lives in L1/L2
//! and the exponential is a vectorizable polynomial.
//!
//! Products are register tiles of [`TR`] rows × [`TW`] columns: hand-written AVX-512 and
//! AVX2+FMA kernels, and fixed-size array loops for the portable (and NEON) path. The
//! whole per-task loop (tiles, softmax, rescaling) is compiled once per path and chosen
//! at run time ([`cpu::path`]), so a default build runs the AVX-512 or AVX2 code on CPUs
//! that have it.

use std::sync::Mutex;

use candle_core::Tensor;

use super::attention_inputs::AttentionInputs;
use crate::cpu::math::{exp_nonpositive, exp_sub_sum, fmadd, max_of};
use crate::cpu::{self, dispatch_fn, CpuPath};
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

/// `out[i][j] = Σ_c a[i][c] · bt[c][j]` for [`TR`] rows of `a` (row stride `a_stride`,
/// `depth` columns) and [`TW`] columns of `bt` (row stride `bt_stride`), with the
/// kernel of `path` (the portable loop where `path`'s instructions are missing).
#[inline(always)]
fn tile_a_bt<const FMA: bool>(
    path: CpuPath,
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
    {
        match path {
            // SAFETY: the instructions are present (`supported` reads the cached CPUID),
            // and the bounds the kernels read were checked above.
            CpuPath::Avx512 if path.supported() => {
                return unsafe { x86::tile_a_bt_avx512(a, a_stride, bt, bt_stride, depth) };
            }
            CpuPath::Avx2 if path.supported() => {
                return unsafe { x86::tile_a_bt_avx2(a, a_stride, bt, bt_stride, depth) };
            }
            _ => {}
        }
    }
    let _ = path;
    tile_a_bt_portable::<FMA>(a, a_stride, bt, bt_stride, depth)
}

/// `acc[i] += Σ_j p[i][j] · v[j]` for [`TR`] rows of `p` (row stride `p_stride`), `kn`
/// keys, and [`TW`] columns of `v` (row stride `v_stride`), with the kernel of `path`.
#[inline(always)]
fn tile_p_v<const FMA: bool>(
    path: CpuPath,
    p: &[f32],
    p_stride: usize,
    v: &[f32],
    v_stride: usize,
    kn: usize,
    acc: &mut [[f32; TW]; TR],
) {
    #[cfg(target_arch = "x86_64")]
    if kn > 0 && p.len() >= (TR - 1) * p_stride + kn && v.len() >= (kn - 1) * v_stride + TW {
        match path {
            // SAFETY: as in `tile_a_bt`.
            CpuPath::Avx512 if path.supported() => {
                return unsafe { x86::tile_p_v_avx512(p, p_stride, v, v_stride, kn, acc) };
            }
            CpuPath::Avx2 if path.supported() => {
                return unsafe { x86::tile_p_v_avx2(p, p_stride, v, v_stride, kn, acc) };
            }
            _ => {}
        }
    }
    let _ = path;
    tile_p_v_portable::<FMA>(p, p_stride, v, v_stride, kn, acc)
}

/// [`tile_a_bt`] in plain Rust: the compiler vectorizes it to the widths the enclosing
/// function's target features allow.
#[inline(always)]
fn tile_a_bt_portable<const FMA: bool>(
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
                    *o = fmadd::<FMA>(x, y, *o);
                }
            }
        }
        rows.copy_from_slice(&acc);
    }
    out
}

/// [`tile_p_v`] in plain Rust.
#[inline(always)]
fn tile_p_v_portable<const FMA: bool>(
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
                    *o = fmadd::<FMA>(x, y, *o);
                }
            }
        }
        rows.copy_from_slice(&a);
    }
}

/// The register tiles with explicit vectors. AVX-512: [`TW`] = 32 columns are two
/// registers, a tile is 16 accumulators. Measured on the vision shape (one layer of a
/// 1280-token screenshot, 2 threads, native build): 0.74–0.97 s against 1.37–1.46 s
/// for the portable code, which the compiler keeps at 256 bits. AVX2 has 16 registers
/// of 8 floats: a tile is done in four quarters of 4 rows × 16 columns (8 accumulators,
/// 2 column loads, 1 broadcast), so nothing spills.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{TR, TW};

    const _: () = assert!(TW == 32 && TR == 8);

    /// # Safety
    /// AVX-512F must be available; `a` must hold `(TR - 1) * a_stride + depth` values and
    /// `bt` `(depth - 1) * bt_stride + TW`, `depth > 0`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile_a_bt_avx512(
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
    pub(super) unsafe fn tile_p_v_avx512(
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

    /// Rows per AVX2 quarter.
    const QR: usize = 4;

    /// # Safety
    /// AVX2 and FMA must be available; bounds as [`tile_a_bt_avx512`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_a_bt_avx2(
        a: &[f32],
        a_stride: usize,
        bt: &[f32],
        bt_stride: usize,
        depth: usize,
    ) -> [[f32; TW]; TR] {
        let mut out = [[0f32; TW]; TR];
        let (a, bt) = (a.as_ptr(), bt.as_ptr());
        for half in 0..2 {
            for pass in 0..TR / QR {
                let mut acc = [_mm256_setzero_ps(); 2 * QR];
                for c in 0..depth {
                    // SAFETY (here and below): within the bounds the caller guarantees.
                    let (b0, b1) = unsafe {
                        let b = bt.add(c * bt_stride + 16 * half);
                        (_mm256_loadu_ps(b), _mm256_loadu_ps(b.add(8)))
                    };
                    for i in 0..QR {
                        let x = _mm256_set1_ps(unsafe { *a.add((pass * QR + i) * a_stride + c) });
                        acc[2 * i] = _mm256_fmadd_ps(x, b0, acc[2 * i]);
                        acc[2 * i + 1] = _mm256_fmadd_ps(x, b1, acc[2 * i + 1]);
                    }
                }
                for i in 0..QR {
                    let row = &mut out[pass * QR + i][16 * half..];
                    unsafe {
                        _mm256_storeu_ps(row.as_mut_ptr(), acc[2 * i]);
                        _mm256_storeu_ps(row.as_mut_ptr().add(8), acc[2 * i + 1]);
                    }
                }
            }
        }
        out
    }

    /// # Safety
    /// AVX2 and FMA must be available; bounds as [`tile_p_v_avx512`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_p_v_avx2(
        p: &[f32],
        p_stride: usize,
        v: &[f32],
        v_stride: usize,
        kn: usize,
        acc: &mut [[f32; TW]; TR],
    ) {
        let (p, v) = (p.as_ptr(), v.as_ptr());
        for half in 0..2 {
            for pass in 0..TR / QR {
                let mut a = [_mm256_setzero_ps(); 2 * QR];
                for i in 0..QR {
                    let row = &acc[pass * QR + i][16 * half..];
                    unsafe {
                        a[2 * i] = _mm256_loadu_ps(row.as_ptr());
                        a[2 * i + 1] = _mm256_loadu_ps(row.as_ptr().add(8));
                    }
                }
                for j in 0..kn {
                    let (v0, v1) = unsafe {
                        let r = v.add(j * v_stride + 16 * half);
                        (_mm256_loadu_ps(r), _mm256_loadu_ps(r.add(8)))
                    };
                    for i in 0..QR {
                        let x = _mm256_set1_ps(unsafe { *p.add((pass * QR + i) * p_stride + j) });
                        a[2 * i] = _mm256_fmadd_ps(x, v0, a[2 * i]);
                        a[2 * i + 1] = _mm256_fmadd_ps(x, v1, a[2 * i + 1]);
                    }
                }
                for i in 0..QR {
                    let row = &mut acc[pass * QR + i][16 * half..];
                    unsafe {
                        _mm256_storeu_ps(row.as_mut_ptr(), a[2 * i]);
                        _mm256_storeu_ps(row.as_mut_ptr().add(8), a[2 * i + 1]);
                    }
                }
            }
        }
    }
}

/// What every task of one attention call reads.
struct Inputs<'a> {
    q: &'a [f32],
    /// Keys transposed per group, `(hd, len_padded)`.
    kt: &'a [f32],
    v: &'a [f32],
    /// `(n, len)` additive mask.
    mask: Option<&'a [f32]>,
    /// Strides of `v`: between groups, between rows.
    vs0: usize,
    vs1: usize,
    n: usize,
    rows: usize,
    len: usize,
    len_padded: usize,
    hd: usize,
    scale: f32,
}

/// One task's working memory.
struct Scratch {
    qs: Vec<f32>,
    s: Vec<f32>,
    o: Vec<f32>,
    m: [f32; QB],
    l: [f32; QB],
}

impl Scratch {
    fn new(hd: usize) -> Self {
        Scratch {
            qs: vec![0f32; QB * hd],
            s: vec![0f32; QB * KB],
            o: vec![0f32; QB * hd],
            m: [f32::NEG_INFINITY; QB],
            l: [0f32; QB],
        }
    }
}

dispatch_fn!(
    /// [`attend_rows`] compiled for `path`.
    fn attend_rows_on(tiles: CpuPath, x: &Inputs, scratch: &mut Scratch, g: usize, r0: usize, dst: &mut [f32]) => attend_rows
);

/// Attention for query rows `r0..r0 + dst.len() / hd` of group `g` into `dst`.
#[inline(always)]
fn attend_rows<const FMA: bool>(
    path: CpuPath,
    x: &Inputs,
    scratch: &mut Scratch,
    g: usize,
    r0: usize,
    dst: &mut [f32],
) {
    let (hd, n, len, len_padded) = (x.hd, x.n, x.len, x.len_padded);
    let Scratch { qs, s, o, m, l } = scratch;
    let nr = dst.len() / hd;
    let nr_tiles = nr.div_ceil(TR) * TR;
    let src = &x.q[(g * x.rows + r0) * hd..][..nr * hd];
    qs.fill(0.0);
    qs.iter_mut().zip(src).for_each(|(d, &v)| *d = v * x.scale);
    o.fill(0.0);
    m.fill(f32::NEG_INFINITY);
    l.fill(0.0);
    let ktg = &x.kt[g * hd * len_padded..][..hd * len_padded];
    for kb0 in (0..len).step_by(KB) {
        let kn = KB.min(len - kb0);
        if let Some(md) = x.mask {
            // A block the mask hides entirely from every row (the future, under a causal
            // mask) adds nothing: skip it.
            let hidden = (0..nr).all(|i| {
                md[((r0 + i) % n) * len + kb0..][..kn]
                    .iter()
                    .all(|&v| v == f32::NEG_INFINITY)
            });
            if hidden {
                continue;
            }
        }
        // Scores of the block.
        for i0 in (0..nr_tiles).step_by(TR) {
            for j0 in (0..kn).step_by(TW) {
                let tile =
                    tile_a_bt::<FMA>(path, &qs[i0 * hd..], hd, &ktg[kb0 + j0..], len_padded, hd);
                for (i, tile_row) in tile.iter().enumerate() {
                    let w = TW.min(kn - j0);
                    s[(i0 + i) * KB + j0..][..w].copy_from_slice(&tile_row[..w]);
                }
            }
        }
        // Running softmax per row.
        for i in 0..nr {
            let row = &mut s[i * KB..i * KB + kn];
            if let Some(md) = x.mask {
                let mrow = &md[((r0 + i) % n) * len + kb0..][..kn];
                row.iter_mut().zip(mrow).for_each(|(v, &a)| *v += a);
            }
            let block_max = max_of(row);
            let new_max = m[i].max(block_max);
            if new_max == f32::NEG_INFINITY {
                // Every key so far masked out: nothing to add yet.
                row.fill(0.0);
                continue;
            }
            let alpha = exp_nonpositive::<FMA>(m[i] - new_max);
            let sum = exp_sub_sum::<FMA>(row, new_max);
            l[i] = l[i] * alpha + sum;
            m[i] = new_max;
            if alpha != 1.0 {
                o[i * hd..(i + 1) * hd].iter_mut().for_each(|v| *v *= alpha);
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
                let vb = &x.v[g * x.vs0 + kb0 * x.vs1 + c0..];
                if w == TW {
                    tile_p_v::<FMA>(path, &s[i0 * KB..], KB, vb, x.vs1, kn, &mut acc);
                } else {
                    for j in 0..kn {
                        let vrow = &vb[j * x.vs1..][..w];
                        for (i, acc_row) in acc.iter_mut().enumerate() {
                            let p = s[(i0 + i) * KB + j];
                            for (a, &v) in acc_row.iter_mut().zip(vrow) {
                                *a = fmadd::<FMA>(p, v, *a);
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
        // A row whose keys were all masked out has no weights: 0/0, NaN, as the matmul
        // route's softmax gives.
        let inv = 1.0 / l[i];
        for (d, &v) in dst[i * hd..(i + 1) * hd].iter_mut().zip(&o[i * hd..]) {
            *d = v * inv;
        }
    }
}

/// Attention for `q` `(groups, rep, n, hd)` against `k`, `v` `(groups, len, hd)` with
/// an optional additive `(n, len)` mask, as [`super::attention::attention`] computes
/// it, on the process's kernel path. `None` when the inputs are not CPU f32 with
/// unit-stride rows (the caller then takes another route).
pub(super) fn flash_cpu(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
) -> Result<Option<Tensor>> {
    flash_cpu_on(cpu::path(), q, k, v, mask, scale)
}

/// [`flash_cpu`] on a given kernel path (one [`CpuPath::supported`] here).
pub(super) fn flash_cpu_on(
    path: CpuPath,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
) -> Result<Option<Tensor>> {
    let Some(views) = AttentionInputs::of(q, k, v, mask)? else {
        return Ok(None);
    };
    let Some((q_data, k_data, v_data, mask_data)) = views.slices() else {
        return Ok(None);
    };
    let AttentionInputs {
        groups,
        rep,
        rows,
        n,
        len,
        hd,
        ks: [ks0, ks1],
        vs: [vs0, vs1],
        ..
    } = views;
    let scale = scale as f32;
    // Keys transposed per group, `(hd, len_padded)`, so a score tile reads TW
    // consecutive keys per dimension; the padding is never read as a score.
    let len_padded = len.div_ceil(TW) * TW;
    let mut kt = vec![0f32; groups * hd * len_padded];
    let mut out = vec![0f32; groups * rows * hd];
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
                // In blocks of 16 keys: each write fills one cache line of a transposed
                // row, the 16 key rows stay in L1.
                for j0 in (0..len).step_by(16) {
                    let jn = 16.min(len - j0);
                    for c in 0..hd {
                        let row = &mut dst[c * len_padded + j0..][..jn];
                        for (jj, x) in row.iter_mut().enumerate() {
                            *x = k_data[g * ks0 + (j0 + jj) * ks1 + c];
                        }
                    }
                }
            }
        });
    }
    let inputs = Inputs {
        q: q_data,
        kt: &kt,
        v: v_data,
        mask: mask_data,
        vs0,
        vs1,
        n,
        rows,
        len,
        len_padded,
        hd,
        scale,
    };
    // One output slice per task: QB rows of one group.
    let mut tasks: Vec<Mutex<(usize, usize, &mut [f32])>> = Vec::new();
    for (g, group_out) in out.chunks_mut(rows * hd).enumerate() {
        for (b, block) in group_out.chunks_mut(QB * hd).enumerate() {
            tasks.push(Mutex::new((g, b * QB, block)));
        }
    }
    pool.execute_chunked(tasks.len(), |range| {
        let mut scratch = Scratch::new(hd);
        for t in range {
            let Ok(mut task) = tasks[t].lock() else {
                continue;
            };
            let (g, r0, ref mut dst) = *task;
            attend_rows_on(path, path, &inputs, &mut scratch, g, r0, dst);
        }
    });
    drop(tasks);
    drop(views);
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
    /// A vector tile against the portable loop: same products, FMA rounding and order
    /// of the sums may differ.
    const TILE_ATOL: f32 = 1e-5;

    fn random(rng: &mut rand::rngs::StdRng, shape: &[usize], amp: f32) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|_| rng.random_range(-amp..amp)).collect();
        Ok(Tensor::from_vec(data, shape, &Device::Cpu)?)
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
        Ok((a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?)
    }

    /// Every kernel path this CPU runs against the matmul route, over shapes that cross
    /// every block and tile edge (rows past [`QB`], keys past [`KB`], head sizes that
    /// are not multiples of [`TW`]), with keys and values viewed from a larger cache
    /// buffer, with and without a causal mask, and with scores large enough for the
    /// running max to move.
    #[test]
    fn flash_matches_the_matmul_route_on_every_path() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for &(groups, rep, n, len, hd, amp) in &[
            (2, 3, 7, 11, 8, 1.0),
            (2, 1, 70, 300, 40, 1.0),
            (1, 2, 130, 530, 64, 3.0),
            (3, 1, 33, 33, 96, 0.5),
            (1, 5, 20, 20, 24, 2.0),
        ] {
            let capacity = len + 5;
            let kb = random(&mut rng, &[groups, capacity, hd], amp)?;
            let vb = random(&mut rng, &[groups, capacity, hd], 1.0)?;
            let (k, v) = (kb.narrow(1, 0, len)?, vb.narrow(1, 0, len)?);
            let q = random(&mut rng, &[groups, rep, n, hd], amp)?;
            let causal = causal_mask(n, len - n, &Device::Cpu)?;
            for mask in [None, Some(&causal)] {
                let scale = 1.0 / (hd as f64).sqrt();
                let reference = matmul_route(&q, &k, &v, mask, scale, usize::MAX)?;
                for path in CpuPath::available() {
                    let fused =
                        flash_cpu_on(path, &q, &k, &v, mask, scale)?.expect("CPU f32 inputs");
                    let diff = max_diff(&fused, &reference)?;
                    assert!(
                        diff <= FLASH_ATOL,
                        "{path:?} {groups}×{rep}×{n} vs {len}, hd {hd}, mask {}: {diff}",
                        mask.is_some()
                    );
                }
            }
        }
        Ok(())
    }

    /// Each vector tile kernel (forced) against the portable loop.
    #[test]
    fn every_tile_kernel_matches_the_portable_loop() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut values =
            |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect() };
        let (depth, a_stride, bt_stride) = (72, 80, 100);
        let a = values(TR * a_stride);
        let bt = values(depth * bt_stride);
        let (kn, p_stride, v_stride) = (50, 64, 40);
        let p = values(TR * p_stride);
        let v = values(kn * v_stride);
        let start: Vec<f32> = values(TR * TW);
        let mut acc_start = [[0f32; TW]; TR];
        for (row, src) in acc_start.iter_mut().zip(start.chunks_exact(TW)) {
            row.copy_from_slice(src);
        }
        let portable = tile_a_bt_portable::<false>(&a, a_stride, &bt, bt_stride, depth);
        let mut acc_portable = acc_start;
        tile_p_v_portable::<false>(&p, p_stride, &v, v_stride, kn, &mut acc_portable);
        for path in CpuPath::available() {
            let fast = tile_a_bt::<true>(path, &a, a_stride, &bt, bt_stride, depth);
            let mut acc_fast = acc_start;
            tile_p_v::<true>(path, &p, p_stride, &v, v_stride, kn, &mut acc_fast);
            for (x, y) in fast
                .iter()
                .flatten()
                .zip(portable.iter().flatten())
                .chain(acc_fast.iter().flatten().zip(acc_portable.iter().flatten()))
            {
                assert!((x - y).abs() <= TILE_ATOL, "{path:?}: {x} vs {y}");
            }
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
        for path in CpuPath::available() {
            let fused = flash_cpu_on(path, &q, &k, &v, Some(&mask), 0.5)?
                .expect("CPU f32 inputs")
                .flatten_all()?
                .to_vec1::<f32>()?;
            assert!(fused[8..16].iter().all(|x| x.is_nan()), "{path:?}");
            assert!(
                fused[..8].iter().chain(&fused[16..]).all(|x| x.is_finite()),
                "{path:?}"
            );
        }
        // Not CPU f32: another route.
        let q16 = q.to_dtype(DType::F16)?;
        assert!(flash_cpu(&q16, &k, &v, None, 0.5)?.is_none());
        Ok(())
    }

    /// Every kernel path side by side in one run, in CPU time of this thread (run with
    /// `CANDLE_NUM_THREADS=1`, `--ignored --nocapture`, optimized): the vision tower's
    /// shape for a 1280-token screenshot (one layer) and a 512-token text prefill layer.
    #[test]
    #[ignore = "measurement"]
    fn flash_paths_timing() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for &(name, groups, rep, n, hd, causal) in &[
            (
                "vision 4888 patches, 16 heads of 64",
                16,
                1,
                4888,
                64,
                false,
            ),
            (
                "text prefill 512, 16 heads / 8 KV of 128",
                8,
                2,
                512,
                128,
                true,
            ),
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
            let paths = CpuPath::available();
            let mut best = vec![f64::INFINITY; paths.len()];
            for _round in 0..3 {
                // Alternating the variants within each round spreads the machine's noise.
                for (i, &path) in paths.iter().enumerate() {
                    let mut result = Ok(None);
                    let secs = crate::cpu::math::thread_cpu_seconds(|| {
                        result = flash_cpu_on(path, &q, &k, &v, mask.as_ref(), scale);
                    });
                    result?.expect("f32");
                    best[i] = best[i].min(secs);
                }
            }
            let portable = best[paths.len() - 1];
            for (path, secs) in paths.iter().zip(&best) {
                println!(
                    "{name}: flash {:>8} best of 3 {:.3} s CPU ({:.2}x portable)",
                    path.name(),
                    secs,
                    portable / secs
                );
            }
        }
        Ok(())
    }
}
