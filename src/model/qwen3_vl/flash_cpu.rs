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
//! at run time ([`crate::cpu::path`]), so a default build runs the AVX-512 or AVX2 code on CPUs
//! that have it.

use std::sync::Mutex;

use candle_core::Tensor;

use super::attention_inputs::{run_kernel, AttentionSlices};
use crate::cpu::math::{exp_nonpositive, exp_sub_sum, fmadd, max_of};
use crate::cpu::{dispatch_fn, CpuPath};
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

/// The operands of one tile product: [`TR`] rows of `a` (row stride `a_stride`, `depth`
/// columns) and [`TW`] columns of `b` (row stride `b_stride`, `depth` rows).
#[derive(Clone, Copy)]
struct TileOperands<'a> {
    a: &'a [f32],
    a_stride: usize,
    b: &'a [f32],
    b_stride: usize,
    depth: usize,
}

/// Where a tile product's [`TR`] × [`TW`] results go: rows `stride` apart in `c`, added to
/// what is there or (`from_zero`) replacing it. The kernels read and write the scores
/// block and the output rows in place: a tile kept on the stack and copied in and out
/// cost 6-7% of the score tiles.
struct TileOut<'a> {
    c: &'a mut [f32],
    stride: usize,
    from_zero: bool,
}

impl TileOperands<'_> {
    /// Whether the slices hold every value a tile reads and writes (`depth > 0`): what
    /// the vector kernels need to work without checks (there are none off x86-64).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fn hold_a_tile(&self, out: &TileOut) -> bool {
        self.depth > 0
            && self.a.len() >= (TR - 1) * self.a_stride + self.depth
            && self.b.len() >= (self.depth - 1) * self.b_stride + TW
            && out.c.len() >= (TR - 1) * out.stride + TW
    }
}

/// `c[i][j] (+)= Σ_k a[i][k] · b[k][j]` over the [`TileOperands`] into the [`TileOut`],
/// with the kernel of `path` (the portable loop where `path`'s instructions are missing
/// or the slices do not hold a whole tile). Scores are `q · kᵀ` from zero with `b` the
/// transposed keys; the weighted values are `p · v` added to the output so far.
#[inline(always)]
fn tile_mul_add<const FMA: bool>(path: CpuPath, x: TileOperands, out: TileOut) {
    #[cfg(target_arch = "x86_64")]
    if x.hold_a_tile(&out) {
        match path {
            CpuPath::Avx512 if path.supported() => {
                // SAFETY: the CPU has AVX-512F (`supported` reads the cached CPUID), and
                // the slices hold a tile (checked above).
                return unsafe { x86::tile_mul_add_avx512(x, out) };
            }
            CpuPath::Avx2 if path.supported() => {
                // SAFETY: the CPU has AVX2 and FMA; the slices hold a tile.
                return unsafe { x86::tile_mul_add_avx2(x, out) };
            }
            _ => {}
        }
    }
    let _ = path;
    // The portable loop: the compiler vectorizes it to the widths the enclosing
    // function's target features allow.
    for pass in 0..TR / PR {
        let mut sums = [[0f32; TW]; PR];
        if !out.from_zero {
            for (i, row) in sums.iter_mut().enumerate() {
                let at = (pass * PR + i) * out.stride;
                row.copy_from_slice(&out.c[at..at + TW]);
            }
        }
        let a = &x.a[pass * PR * x.a_stride..];
        for c in 0..x.depth {
            let Some(b_row) = x.b.get(c * x.b_stride..c * x.b_stride + TW) else {
                break;
            };
            let b_row: &[f32; TW] = b_row.try_into().unwrap_or(&[0.0; TW]);
            for (i, sums_row) in sums.iter_mut().enumerate() {
                let v = a[i * x.a_stride + c];
                for (o, &y) in sums_row.iter_mut().zip(b_row) {
                    *o = fmadd::<FMA>(v, y, *o);
                }
            }
        }
        for (i, row) in sums.iter().enumerate() {
            let at = (pass * PR + i) * out.stride;
            out.c[at..at + TW].copy_from_slice(row);
        }
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

    use super::{TileOperands, TileOut, TR, TW};

    const _: () = assert!(TW == 32 && TR == 8);

    /// [`super::tile_mul_add`] with AVX-512.
    ///
    /// # Safety
    /// AVX-512F must be available, and the slices must hold a tile
    /// ([`TileOperands::hold_a_tile`]).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile_mul_add_avx512(x: TileOperands, out: TileOut) {
        let (a_stride, b_stride, depth) = (x.a_stride, x.b_stride, x.depth);
        let c = out.c.as_mut_ptr();
        let mut sums = [_mm512_setzero_ps(); 2 * TR];
        if !out.from_zero {
            for i in 0..TR {
                // SAFETY: i < TR, so row i's TW = 32 floats (two 16-float loads, at 0 and
                // 16) end within (TR - 1) * stride + TW, which the caller guarantees `c` holds.
                unsafe {
                    let row = c.add(i * out.stride);
                    sums[2 * i] = _mm512_loadu_ps(row);
                    sums[2 * i + 1] = _mm512_loadu_ps(row.add(16));
                }
            }
        }
        let (a, b) = (x.a.as_ptr(), x.b.as_ptr());
        for c in 0..depth {
            // SAFETY: c < depth, so c * b_stride + 32 <= (depth - 1) * b_stride + TW,
            // which the caller guarantees `b` holds.
            let (b0, b1) = unsafe {
                (
                    _mm512_loadu_ps(b.add(c * b_stride)),
                    _mm512_loadu_ps(b.add(c * b_stride + 16)),
                )
            };
            for i in 0..TR {
                // SAFETY: i < TR and c < depth, so the index is below (TR - 1) * a_stride
                // + depth, which the caller guarantees `a` holds.
                let x = _mm512_set1_ps(unsafe { *a.add(i * a_stride + c) });
                sums[2 * i] = _mm512_fmadd_ps(x, b0, sums[2 * i]);
                sums[2 * i + 1] = _mm512_fmadd_ps(x, b1, sums[2 * i + 1]);
            }
        }
        for i in 0..TR {
            // SAFETY: as for the loads of `c` above.
            unsafe {
                let row = c.add(i * out.stride);
                _mm512_storeu_ps(row, sums[2 * i]);
                _mm512_storeu_ps(row.add(16), sums[2 * i + 1]);
            }
        }
    }

    /// Rows per AVX2 quarter.
    const QR: usize = 4;

    /// [`super::tile_mul_add`] with AVX2 and FMA.
    ///
    /// # Safety
    /// AVX2 and FMA must be available, and the slices must hold a tile
    /// ([`TileOperands::hold_a_tile`]).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_mul_add_avx2(x: TileOperands, out: TileOut) {
        let (a_stride, b_stride, depth) = (x.a_stride, x.b_stride, x.depth);
        let (a, b, c) = (x.a.as_ptr(), x.b.as_ptr(), out.c.as_mut_ptr());
        for half in 0..2 {
            for pass in 0..TR / QR {
                let mut sums = [_mm256_setzero_ps(); 2 * QR];
                // Where the 16 floats from column 16 · half of tile row pass * QR + i
                // start (`wrapping_add`: computing the address is safe; each access below
                // says why it is in bounds).
                let row = |i: usize| c.wrapping_add((pass * QR + i) * out.stride + 16 * half);
                if !out.from_zero {
                    for i in 0..QR {
                        // SAFETY: tile row pass * QR + i < TR, so its 16 floats from column
                        // 16 · half (two 8-float accesses, at 0 and 8; the stores below
                        // likewise) end within (TR - 1) * stride + TW, which the caller
                        // guarantees `c` holds.
                        unsafe {
                            sums[2 * i] = _mm256_loadu_ps(row(i));
                            sums[2 * i + 1] = _mm256_loadu_ps(row(i).add(8));
                        }
                    }
                }
                for c in 0..depth {
                    // SAFETY: c < depth and 16 · half + 16 <= TW, so the 16 floats read lie
                    // within (depth - 1) * b_stride + TW, which the caller guarantees.
                    let (b0, b1) = unsafe {
                        let r = b.add(c * b_stride + 16 * half);
                        (_mm256_loadu_ps(r), _mm256_loadu_ps(r.add(8)))
                    };
                    for i in 0..QR {
                        // SAFETY: pass * QR + i < TR and c < depth: within what the caller
                        // guarantees `a` holds.
                        let x = _mm256_set1_ps(unsafe { *a.add((pass * QR + i) * a_stride + c) });
                        sums[2 * i] = _mm256_fmadd_ps(x, b0, sums[2 * i]);
                        sums[2 * i + 1] = _mm256_fmadd_ps(x, b1, sums[2 * i + 1]);
                    }
                }
                for i in 0..QR {
                    // SAFETY: as for the loads of `c` above.
                    unsafe {
                        _mm256_storeu_ps(row(i), sums[2 * i]);
                        _mm256_storeu_ps(row(i).add(8), sums[2 * i + 1]);
                    }
                }
            }
        }
    }
}

/// What every task of one attention call reads.
struct Inputs<'a> {
    q: &'a [f32],
    /// Keys transposed per group in tiles of [`TW`] keys, `(len_padded / TW, hd, TW)`.
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
        // Scores of the block (the last tile's columns past `kn` are scores of the zero
        // padding keys, written and never read).
        for i0 in (0..nr_tiles).step_by(TR) {
            for j0 in (0..kn).step_by(TW) {
                let scores = TileOperands {
                    a: &qs[i0 * hd..],
                    a_stride: hd,
                    b: &ktg[(kb0 + j0) * hd..],
                    b_stride: TW,
                    depth: hd,
                };
                let out = TileOut {
                    c: &mut s[i0 * KB + j0..],
                    stride: KB,
                    from_zero: true,
                };
                tile_mul_add::<FMA>(path, scores, out);
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
                let vb = &x.v[g * x.vs0 + kb0 * x.vs1 + c0..];
                if w == TW {
                    let weighted = TileOperands {
                        a: &s[i0 * KB..],
                        a_stride: KB,
                        b: vb,
                        b_stride: x.vs1,
                        depth: kn,
                    };
                    let out = TileOut {
                        c: &mut o[i0 * hd + c0..],
                        stride: hd,
                        from_zero: false,
                    };
                    tile_mul_add::<FMA>(path, weighted, out);
                } else {
                    // The last columns of a head size that is not a multiple of TW.
                    for j in 0..kn {
                        let vrow = &vb[j * x.vs1..][..w];
                        for i in i0..i0 + TR {
                            let p = s[i * KB + j];
                            for (a, &v) in o[i * hd + c0..][..w].iter_mut().zip(vrow) {
                                *a = fmadd::<FMA>(p, v, *a);
                            }
                        }
                    }
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
/// it, on kernel path `path` (one [`CpuPath::supported`] here). `None` when the inputs
/// are not CPU f32 with unit-stride rows (the caller then takes another route).
pub(super) fn flash_cpu(
    path: CpuPath,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    scale: f64,
) -> Result<Option<Tensor>> {
    run_kernel(q, k, v, mask, |x| fused(path, x, scale as f32))
}

/// [`flash_cpu`]'s work on checked inputs: the `(groups, rep, n, hd)` output values.
fn fused(path: CpuPath, x: &AttentionSlices<'_>, scale: f32) -> Vec<f32> {
    let (groups, rows, n, len, hd) = (x.groups, x.rows, x.n, x.len, x.hd);
    let ([ks0, ks1], [vs0, vs1]) = (x.ks, x.vs);
    let (q_data, k_data, v_data, mask_data) = (x.q, x.k, x.v, x.mask);
    // Keys transposed per group in tiles of TW keys, `(len_padded / TW, hd, TW)`: a score
    // tile reads TW consecutive keys per dimension, and a tile's keys are one contiguous
    // 8 KB run (at 64 dimensions) instead of `hd` rows a whole transposed key row apart
    // (19 KB for a screenshot's 4,888 patches), which had the tile's loads walk 300 pages;
    // the padding is never read as a score.
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
                        let row = &mut dst[(j0 / TW * hd + c) * TW + j0 % TW..][..jn];
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::model::qwen3_vl::attention::matmul_route;
    use crate::model::qwen3_vl::attention::tests::random;
    use crate::model::qwen3_vl::text::causal_mask;
    use candle_core::{DType, Device};
    use rand::{Rng, SeedableRng};

    /// The fused and matmul routes sum the same terms in different orders, and the
    /// exponential here is a polynomial (relative error < 2e-7).
    const FLASH_ATOL: f32 = 1e-5;
    /// A vector tile against the portable loop: same products, FMA rounding and order
    /// of the sums may differ.
    const TILE_ATOL: f32 = 1e-5;

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
                    let fused = flash_cpu(path, &q, &k, &v, mask, scale)?
                        .ok_or_else(|| Error::internal("CPU f32 inputs took another route"))?;
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

    /// Each vector tile kernel (forced) against the portable loop, from zero (the
    /// scores' use) and from a start (the weighted values').
    #[test]
    fn every_tile_kernel_matches_the_portable_loop() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut values =
            |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect() };
        // Results rows 40 apart; the columns between are left alone.
        let c_stride = 40;
        let start: Vec<f32> = values(TR * c_stride);
        for (depth, a_stride, b_stride, from_zero) in [(72, 80, 100, true), (50, 64, 40, false)] {
            let (a, b) = (values(TR * a_stride), values(depth * b_stride));
            let x = TileOperands {
                a: &a,
                a_stride,
                b: &b,
                b_stride,
                depth,
            };
            let mut portable = start.clone();
            let out = TileOut {
                c: &mut portable,
                stride: c_stride,
                from_zero,
            };
            tile_mul_add::<false>(CpuPath::Portable, x, out);
            for (row, start_row) in portable.chunks(c_stride).zip(start.chunks(c_stride)) {
                assert_eq!(
                    row[TW..],
                    start_row[TW..],
                    "a column past the tile was written"
                );
            }
            for path in CpuPath::available() {
                let mut fast = start.clone();
                let out = TileOut {
                    c: &mut fast,
                    stride: c_stride,
                    from_zero,
                };
                tile_mul_add::<true>(path, x, out);
                for (x, y) in fast.iter().zip(&portable) {
                    if (x - y).abs() > TILE_ATOL {
                        return Err(Error::internal(format!(
                            "{path:?} depth {depth}: {x} vs {y}"
                        )));
                    }
                }
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
            let fused = flash_cpu(path, &q, &k, &v, Some(&mask), 0.5)?
                .ok_or_else(|| Error::internal("CPU f32 inputs took another route"))?
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
        assert!(flash_cpu(crate::cpu::path(), &q16, &k, &v, None, 0.5)?.is_none());
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
            let timings = crate::cpu::math::best_seconds_per_path(3, |path| {
                flash_cpu(path, &q, &k, &v, mask.as_ref(), scale)?
                    .map(drop)
                    .ok_or_else(|| Error::internal("f32 inputs took another route"))
            })?;
            for (path, secs, speedup) in timings {
                println!(
                    "{name}: flash {:>8} best of 3 {secs:.3} s CPU ({speedup:.2}x portable)",
                    path.name(),
                );
            }
        }
        Ok(())
    }
}
