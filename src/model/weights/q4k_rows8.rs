//! Q4_K matrices laid out eight rows at a time, and their AVX2 matmul kernel: the CPU
//! path for quantized matmuls where the best integer dot product is AVX2 (no VNNI: AMD
//! Zen 2/3, Intel before Ice Lake, and a run forced there with
//! `SIGHTLINE_CPU_FEATURES=avx2`).
//!
//! At that tier candle repacks each Q4_K matrix into tiles whose scales are widened to
//! f32 (0.75 bytes a weight against the file's 0.5625, a second copy beside the file),
//! and its one-row dot product walks one row at a time, spending a third of its
//! instructions on each block's scales. llama.cpp's AVX2 path interleaves eight rows
//! instead (`block_q4_Kx8`); this layout follows the same idea, arranged so the kernel
//! needs no shuffles:
//!
//! - per group of eight rows and per 256-value block, the quantized bytes of the eight
//!   rows four bytes at a time, so one 32-byte load holds the same four bytes (eight
//!   weights: four low nibbles, four high) of all eight rows;
//! - the scales and mins unpacked from their 6-bit packing to one byte each, rows side
//!   by side, and the eight `d` / `dmin` of the rows together.
//!
//! The layout is the file's bytes rearranged (1,184 bytes per eight blocks against
//! 1,152): the matrix is laid out once when the model loads, the file pages are then
//! dropped, and every matmul of the matrix — one row when decoding, many when
//! prefilling — runs here, so candle never packs a copy of its own.
//!
//! The activation rows are quantized to Q8_K exactly as candle and llama.cpp do
//! (`-127 / max` scale, per-16 sums), and each output is the same integer sum of
//! products as theirs; only the float accumulation order differs (pinned by a test).
//! Within a 32-value sub-block the products are summed in 16-bit lanes before the scale
//! is applied, which cannot overflow: a pair of products is at most 2·15·127 = 3,810 and
//! a lane sums eight pairs (30,480 < 32,767).

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QTensor};
use half::f16;

use crate::error::{Error, Result};
use crate::model::qwen3_vl::cpu::{candle_quantized_tier, CandleQuantTier};

/// Values per quantized block (GGML's `QK_K`).
const QK_K: usize = 256;
/// Bytes of one stored Q4_K block: `d`, `dmin` (f16), 12 bytes of scales, 128 of nibbles.
const Q4K_BYTES: usize = 144;
/// Rows laid out together.
pub(crate) const ROWS: usize = 8;
/// Activation rows one kernel call multiplies against the same eight weight rows.
const TILE: usize = 4;

/// Eight rows' worth of one 256-value block.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
struct Block8 {
    /// Pair `p` of 32-value sub-blocks, four-byte group `t`, row `r`: the stored bytes
    /// `qs[32p + 4t ..][..4]` of row `r` at `256p + 32t + 4r`.
    qs: [u8; 1024],
    /// Sub-block `j`, row `r` at `8j + r`.
    scales: [u8; 64],
    /// Sub-block pair `p`, row `r`: the mins of sub-blocks `2p` and `2p + 1` at
    /// `16p + 2r` and `16p + 2r + 1`.
    mins: [u8; 64],
    d: [f16; ROWS],
    dmin: [f16; ROWS],
}

const _: () = assert!(std::mem::size_of::<Block8>() == 1184);

/// One activation block quantized to Q8_K, with the sums the Q4_K mins need.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
struct Q8Block {
    qs: [i8; QK_K],
    d: f32,
    /// Sub-block pair `p`: the sums of sub-blocks `2p` (low 16 bits) and `2p + 1`.
    pair_sums: [i32; 4],
}

/// A Q4_K matrix of `n` rows and `k` columns in the eight-row layout.
pub(crate) struct Q4kRows8 {
    /// Row group `g`, block `b` at `g * k / 256 + b`.
    blocks: Vec<Block8>,
    n: usize,
    k: usize,
}

impl std::fmt::Debug for Q4kRows8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Q4kRows8({}×{})", self.n, self.k)
    }
}

/// Whether quantized matmuls on this CPU take this path: candle's tier is AVX2 (which
/// honours a forced run) and the kernel can run.
pub(crate) fn wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| {
        matches!(candle_quantized_tier(), CandleQuantTier::Avx2 { .. }) && kernel_runs_here()
    })
}

/// Whether this CPU has what the kernel uses: AVX2, FMA and F16C (every AVX2 CPU has
/// the other two).
fn kernel_runs_here() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        has!("avx2") && has!("fma") && has!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl Q4kRows8 {
    /// Lay out a CPU Q4_K matrix; `None` for anything else (another type or device, rows
    /// not a multiple of eight, columns not whole blocks).
    pub(crate) fn from_qtensor(q: &QTensor) -> Result<Option<Arc<Self>>> {
        if q.dtype() != GgmlDType::Q4K || !q.device().is_cpu() {
            return Ok(None);
        }
        let Ok((n, k)) = q.shape().dims2() else {
            return Ok(None);
        };
        if !n.is_multiple_of(ROWS) || !k.is_multiple_of(QK_K) {
            return Ok(None);
        }
        let data = q.data()?;
        Self::from_bytes(&data, n, k).map(|m| Some(Arc::new(m)))
    }

    /// Lay out `n × k` Q4_K weights stored row-major as GGML blocks.
    fn from_bytes(data: &[u8], n: usize, k: usize) -> Result<Self> {
        let kb = k / QK_K;
        if data.len() != n * kb * Q4K_BYTES || !n.is_multiple_of(ROWS) || !k.is_multiple_of(QK_K) {
            return Err(Error::Internal(format!(
                "a {n}×{k} Q4_K matrix of {} bytes",
                data.len()
            )));
        }
        let empty = Block8 {
            qs: [0; 1024],
            scales: [0; 64],
            mins: [0; 64],
            d: [f16::ZERO; ROWS],
            dmin: [f16::ZERO; ROWS],
        };
        let mut blocks = vec![empty; n / ROWS * kb];
        let out = SendPtr(blocks.as_mut_ptr());
        candle_core::utils::barrier_pool().execute_chunked(n / ROWS, |groups| {
            for g in groups {
                for b in 0..kb {
                    let rows: [&[u8]; ROWS] = std::array::from_fn(|r| {
                        let at = ((g * ROWS + r) * kb + b) * Q4K_BYTES;
                        &data[at..at + Q4K_BYTES]
                    });
                    // SAFETY: each (group, block) is written by exactly one worker, and
                    // the index is within `blocks` (g < n / 8, b < kb).
                    unsafe { *out.get().add(g * kb + b) = interleave(rows) };
                }
            }
        });
        Ok(Q4kRows8 { blocks, n, k })
    }

    /// Rows of the matrix (outputs of a matmul).
    pub(crate) fn rows(&self) -> usize {
        self.n
    }

    /// Columns (inputs of a matmul).
    pub(crate) fn columns(&self) -> usize {
        self.k
    }

    fn group(&self, g: usize) -> &[Block8] {
        let kb = self.k / QK_K;
        &self.blocks[g * kb..(g + 1) * kb]
    }
}

/// A raw pointer handed to pool workers that write disjoint elements through it.
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: only used for writes to disjoint elements, each by one worker, while the
// owner waits for the pool to finish.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the wrapper rather than its field).
    fn get(self) -> *mut T {
        self.0
    }
}

/// The scale and min of sub-block `j` from a Q4_K block's 12 packed bytes (GGML's
/// `get_scale_min_k4`).
fn scale_min(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// One [`Block8`] from the same block of eight consecutive rows.
fn interleave(rows: [&[u8]; ROWS]) -> Block8 {
    let mut out = Block8 {
        qs: [0; 1024],
        scales: [0; 64],
        mins: [0; 64],
        d: [f16::ZERO; ROWS],
        dmin: [f16::ZERO; ROWS],
    };
    for (r, src) in rows.iter().enumerate() {
        out.d[r] = f16::from_le_bytes([src[0], src[1]]);
        out.dmin[r] = f16::from_le_bytes([src[2], src[3]]);
        let (packed, qs) = (&src[4..16], &src[16..Q4K_BYTES]);
        for j in 0..8 {
            let (sc, m) = scale_min(j, packed);
            out.scales[8 * j + r] = sc;
            out.mins[16 * (j / 2) + 2 * r + j % 2] = m;
        }
        for p in 0..4 {
            for t in 0..8 {
                let at = 256 * p + 32 * t + 4 * r;
                out.qs[at..at + 4].copy_from_slice(&qs[32 * p + 4 * t..32 * p + 4 * t + 4]);
            }
        }
    }
    out
}

/// Quantize one activation row of whole blocks to Q8_K (GGML's `quantize_row_q8_K`,
/// as candle does it).
fn quantize_row(xs: &[f32], out: &mut [Q8Block]) {
    for (x, y) in xs.chunks_exact(QK_K).zip(out.iter_mut()) {
        let (mut max, mut amax) = (0f32, 0f32);
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            y.qs = [0; QK_K];
            y.d = 0.0;
            y.pair_sums = [0; 4];
            continue;
        }
        let iscale = -127f32 / max;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = (iscale * v).round().clamp(-128.0, 127.0) as i8;
        }
        let sub = |j: usize| {
            y.qs[32 * j..32 * j + 32]
                .iter()
                .map(|&q| q as i32)
                .sum::<i32>()
        };
        for p in 0..4 {
            let (lo, hi) = (sub(2 * p), sub(2 * p + 1));
            y.pair_sums[p] = (lo & 0xFFFF) | (hi << 16);
        }
        y.d = 1.0 / iscale;
    }
}

/// `xs @ wᵀ` for each matrix of `mats` (all with `k` columns) and `m` rows of `xs`
/// (row-major `m × k` f32): one `m × n` output per matrix. The rows are quantized once
/// and every matrix runs in one parallel region (the decode step's q/k/v and gate/up).
pub(crate) fn matmul(mats: &[&Q4kRows8], xs: &[f32], m: usize) -> Result<Vec<Vec<f32>>> {
    let Some(k) = mats.first().map(|w| w.k) else {
        return Ok(Vec::new());
    };
    if mats.iter().any(|w| w.k != k) || xs.len() != m * k || !kernel_runs_here() {
        return Err(Error::Internal(format!(
            "eight-row Q4_K matmul of {} values as {m} rows of {k}",
            xs.len()
        )));
    }
    let kb = k / QK_K;
    let zero = Q8Block {
        qs: [0; QK_K],
        d: 0.0,
        pair_sums: [0; 4],
    };
    let mut lhs = vec![zero; m * kb];
    let lhs_ptr = SendPtr(lhs.as_mut_ptr());
    let pool = candle_core::utils::barrier_pool();
    let quantize = |rows: std::ops::Range<usize>| {
        for i in rows {
            // SAFETY: row `i`'s blocks are written by this worker only.
            let out = unsafe { std::slice::from_raw_parts_mut(lhs_ptr.get().add(i * kb), kb) };
            quantize_row(&xs[i * k..(i + 1) * k], out);
        }
    };
    if m == 1 {
        quantize(0..1);
    } else {
        pool.execute_chunked(m, quantize);
    }

    let mut outs: Vec<Vec<f32>> = mats.iter().map(|w| vec![0f32; m * w.n]).collect();
    let out_ptrs: Vec<SendPtr<f32>> = outs.iter_mut().map(|o| SendPtr(o.as_mut_ptr())).collect();
    // Work items: (matrix, row group) major, activation tile minor, so a worker walking
    // a range keeps one group's weights in cache across the tiles.
    let tiles = m.div_ceil(TILE);
    let mut first_item = Vec::with_capacity(mats.len() + 1);
    first_item.push(0usize);
    for w in mats {
        first_item.push(first_item.last().copied().unwrap_or(0) + w.n / ROWS * tiles);
    }
    let items = first_item.last().copied().unwrap_or(0);
    let lhs = &lhs;
    pool.execute_chunked(items, |range| {
        for item in range {
            let mat = first_item.partition_point(|&f| f <= item) - 1;
            let (w, out) = (mats[mat], out_ptrs[mat]);
            let local = item - first_item[mat];
            let (g, tile) = (local / tiles, local % tiles);
            let row0 = tile * TILE;
            let count = TILE.min(m - row0);
            let rows: [&[Q8Block]; TILE] = std::array::from_fn(|i| {
                let row = row0 + i.min(count - 1);
                &lhs[row * kb..(row + 1) * kb]
            });
            let mut dst = [[0f32; ROWS]; TILE];
            // SAFETY: `kernel_runs_here()` checked the CPU has AVX2, FMA and F16C.
            unsafe { kernel::group_dot(w.group(g), &rows, count, &mut dst) };
            for (i, vals) in dst.iter().take(count).enumerate() {
                // SAFETY: this item alone writes columns 8g..8g+8 of rows row0..row0+count.
                unsafe {
                    let at = out.get().add((row0 + i) * w.n + g * ROWS);
                    std::ptr::copy_nonoverlapping(vals.as_ptr(), at, ROWS);
                }
            }
        }
    });
    Ok(outs)
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use std::arch::x86_64::*;

    use super::{Block8, Q8Block, ROWS, TILE};

    /// How many blocks ahead of the one being read the kernel prefetches.
    const PREFETCH_BLOCKS: usize = 4;

    /// Dot products of eight weight rows (`w`: their blocks) with the first `count` of
    /// `rows` (Q8_K activation rows), into `dst[i][r]`.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; every row of `rows` has `w.len()` blocks.
    pub(super) unsafe fn group_dot(
        w: &[Block8],
        rows: &[&[Q8Block]; TILE],
        count: usize,
        dst: &mut [[f32; ROWS]; TILE],
    ) {
        // SAFETY: the caller's guarantees are the kernels'.
        unsafe {
            match count {
                1 => group_dot_n::<1>(w, rows, dst),
                2 => group_dot_n::<2>(w, rows, dst),
                3 => group_dot_n::<3>(w, rows, dst),
                _ => group_dot_n::<4>(w, rows, dst),
            }
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn group_dot_n<const R: usize>(
        w: &[Block8],
        rows: &[&[Q8Block]; TILE],
        dst: &mut [[f32; ROWS]; TILE],
    ) {
        // SAFETY: every pointer read is within a block (offsets below 1024 / 64 / 256),
        // and the caller guarantees the CPU features.
        unsafe {
            let m4 = _mm256_set1_epi8(0x0F);
            let mut acc = [_mm256_setzero_ps(); R];
            let mut acc_min = [_mm256_setzero_ps(); R];
            for (b, blk) in w.iter().enumerate() {
                let d = _mm256_cvtph_ps(_mm_loadu_si128(blk.d.as_ptr().cast()));
                let dmin = _mm256_cvtph_ps(_mm_loadu_si128(blk.dmin.as_ptr().cast()));
                let mut sums = [_mm256_setzero_si256(); R];
                let mut min_sums = [_mm256_setzero_si256(); R];
                for p in 0..4 {
                    // The hardware prefetchers do not run far enough ahead of a kernel
                    // that reads each byte once: ask for the block PREFETCH_BLOCKS on
                    // (a fifth of it per quarter; past the end it is a harmless hint).
                    let ahead = (blk as *const Block8)
                        .cast::<i8>()
                        .wrapping_add(PREFETCH_BLOCKS * std::mem::size_of::<Block8>() + 320 * p);
                    for line in 0..5 {
                        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * line));
                    }
                    let sc = _mm_loadu_si128(blk.scales.as_ptr().add(16 * p).cast());
                    let sc_lo = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(sc, sc));
                    let sc_hi = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sc, sc));
                    let mins =
                        _mm256_cvtepu8_epi16(_mm_loadu_si128(blk.mins.as_ptr().add(16 * p).cast()));
                    let mut lo_acc = [_mm256_setzero_si256(); R];
                    let mut hi_acc = [_mm256_setzero_si256(); R];
                    for t in 0..8 {
                        let raw = _mm256_load_si256(blk.qs.as_ptr().add(256 * p + 32 * t).cast());
                        let lo = _mm256_and_si256(raw, m4);
                        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), m4);
                        for i in 0..R {
                            let x = rows[i][b].qs.as_ptr().add(64 * p + 4 * t);
                            let x_lo = _mm256_set1_epi32(x.cast::<i32>().read_unaligned());
                            let x_hi = _mm256_set1_epi32(x.add(32).cast::<i32>().read_unaligned());
                            lo_acc[i] = _mm256_add_epi16(lo_acc[i], _mm256_maddubs_epi16(lo, x_lo));
                            hi_acc[i] = _mm256_add_epi16(hi_acc[i], _mm256_maddubs_epi16(hi, x_hi));
                        }
                    }
                    for i in 0..R {
                        let scaled = _mm256_add_epi32(
                            _mm256_madd_epi16(lo_acc[i], sc_lo),
                            _mm256_madd_epi16(hi_acc[i], sc_hi),
                        );
                        sums[i] = _mm256_add_epi32(sums[i], scaled);
                        let pair = _mm256_set1_epi32(rows[i][b].pair_sums[p]);
                        min_sums[i] = _mm256_add_epi32(min_sums[i], _mm256_madd_epi16(mins, pair));
                    }
                }
                for i in 0..R {
                    let dy = _mm256_set1_ps(rows[i][b].d);
                    acc[i] =
                        _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(sums[i]), acc[i]);
                    acc_min[i] = _mm256_fmadd_ps(
                        _mm256_mul_ps(dmin, dy),
                        _mm256_cvtepi32_ps(min_sums[i]),
                        acc_min[i],
                    );
                }
            }
            for i in 0..R {
                _mm256_storeu_ps(dst[i].as_mut_ptr(), _mm256_sub_ps(acc[i], acc_min[i]));
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod kernel {
    use super::{Block8, Q8Block, ROWS, TILE};

    /// Never called: [`super::wanted`] is false off x86-64.
    pub(super) unsafe fn group_dot(
        _w: &[Block8],
        _rows: &[&[Q8Block]; TILE],
        _count: usize,
        _dst: &mut [[f32; ROWS]; TILE],
    ) {
        unreachable!("the eight-row Q4_K kernel runs on x86-64 only")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QMatMul;
    use candle_core::{Device, Module, Tensor};

    /// Both paths quantize the rows to Q8_K identically and sum the same integer
    /// products; only the float summation order differs. Relative to the largest output.
    const ROWS8_VS_CANDLE_RTOL: f32 = 1e-5;

    fn seeded(seed: u64, len: usize, amp: f32) -> Vec<f32> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        (0..len).map(|_| rng.random_range(-amp..amp)).collect()
    }

    /// `n × k` weights whose scale and offset change every 32 values, so the sub-blocks
    /// of a block get different scales and mins (uniform weights would give them all
    /// the same, and a kernel that mixed them up would pass).
    fn weights(seed: u64, n: usize, k: usize) -> Vec<f32> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut out = Vec::with_capacity(n * k);
        for _ in 0..n * k / 32 {
            let amp = rng.random_range(0.005f32..0.2);
            let offset = rng.random_range(-0.1f32..0.1);
            out.extend((0..32).map(|_| offset + rng.random_range(-amp..amp)));
        }
        out
    }

    fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
        let scale = b
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()))
            .max(f32::MIN_POSITIVE);
        a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
    }

    /// candle's own quantized matmul (the reference: GGML's Q4_K × Q8_K on the stored
    /// blocks, or its repacked tiles, whichever this CPU takes).
    fn candle_matmul(q: QTensor, xs: &Tensor) -> anyhow::Result<Vec<f32>> {
        Ok(QMatMul::from_qtensor(q)?
            .forward(xs)?
            .flatten_all()?
            .to_vec1::<f32>()?)
    }

    #[test]
    fn every_row_count_matches_candles_quantized_matmul() -> anyhow::Result<()> {
        if !kernel_runs_here() {
            eprintln!("skipped: this CPU has no AVX2");
            return Ok(());
        }
        let dev = Device::Cpu;
        // Shapes of the 2B model's projections (n scaled down), one block and several;
        // row counts covering one row, a partial tile, whole tiles and a remainder.
        for (seed, (n, k)) in [(1u64, (64, 256)), (2, (96, 2048)), (3, (48, 768))] {
            let w = Tensor::from_vec(weights(seed, n, k), (n, k), &dev)?;
            let q = QTensor::quantize(&w, GgmlDType::Q4K)?;
            let rows8 = Q4kRows8::from_qtensor(&q)?.ok_or_else(|| anyhow::anyhow!("declined"))?;
            for m in [1usize, 2, 3, 4, 5, 9] {
                let x = seeded(seed + 100 + m as u64, m * k, 1.0);
                let ours = matmul(&[&rows8], &x, m)?.remove(0);
                let xs = Tensor::from_vec(x, (m, k), &dev)?;
                let theirs = candle_matmul(QTensor::quantize(&w, GgmlDType::Q4K)?, &xs)?;
                let d = max_rel_diff(&ours, &theirs);
                anyhow::ensure!(d <= ROWS8_VS_CANDLE_RTOL, "n={n} k={k} m={m}: rel diff {d}");
            }
        }
        Ok(())
    }

    #[test]
    fn several_matrices_in_one_region_match_each_alone() -> anyhow::Result<()> {
        if !kernel_runs_here() {
            return Ok(());
        }
        let dev = Device::Cpu;
        let k = 512;
        let mats: Vec<Arc<Q4kRows8>> = [(1u64, 16usize), (2, 40), (3, 8)]
            .iter()
            .map(|&(seed, n)| -> anyhow::Result<Arc<Q4kRows8>> {
                let w = Tensor::from_vec(weights(seed, n, k), (n, k), &dev)?;
                Q4kRows8::from_qtensor(&QTensor::quantize(&w, GgmlDType::Q4K)?)?
                    .ok_or_else(|| anyhow::anyhow!("declined"))
            })
            .collect::<anyhow::Result<_>>()?;
        let refs: Vec<&Q4kRows8> = mats.iter().map(|m| m.as_ref()).collect();
        for m in [1usize, 6] {
            let x = seeded(9, m * k, 1.0);
            let together = matmul(&refs, &x, m)?;
            for (w, out) in refs.iter().zip(&together) {
                anyhow::ensure!(out.len() == m * w.rows());
                anyhow::ensure!(*out == matmul(&[w], &x, m)?[0], "m={m}");
            }
        }
        Ok(())
    }

    #[test]
    fn layout_keeps_every_weight_and_declines_what_it_cannot_hold() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let w = Tensor::from_vec(weights(4, 16, 256), (16, 256), &dev)?;
        let q = QTensor::quantize(&w, GgmlDType::Q4K)?;
        let rows8 = Q4kRows8::from_qtensor(&q)?.ok_or_else(|| anyhow::anyhow!("declined"))?;
        // Every weight of the layout dequantizes to the stored one (checked without the
        // kernel, so on every CPU).
        let stored = q.dequantize(&dev)?.to_vec2::<f32>()?;
        for (r, row) in stored.iter().enumerate() {
            let blk = &rows8.group(r / ROWS)[0];
            let rr = r % ROWS;
            for (i, &v) in row.iter().enumerate() {
                let (j, l) = (i / 32, i % 32);
                let (p, high) = (j / 2, j % 2 == 1);
                let byte = blk.qs[256 * p + 32 * (l / 4) + 4 * rr + l % 4];
                let nib = if high { byte >> 4 } else { byte & 15 } as f32;
                let m = blk.mins[16 * p + 2 * rr + j % 2] as f32;
                let ours = blk.d[rr].to_f32() * blk.scales[8 * j + rr] as f32 * nib
                    - blk.dmin[rr].to_f32() * m;
                anyhow::ensure!((ours - v).abs() <= 1e-6, "row {r} col {i}: {ours} vs {v}");
            }
        }
        let q8 = QTensor::quantize(&w, GgmlDType::Q8_0)?;
        anyhow::ensure!(Q4kRows8::from_qtensor(&q8)?.is_none());
        let w12 = Tensor::from_vec(seeded(5, 12 * 256, 0.05), (12, 256), &dev)?;
        let q12 = QTensor::quantize(&w12, GgmlDType::Q4K)?;
        anyhow::ensure!(
            Q4kRows8::from_qtensor(&q12)?.is_none(),
            "12 rows are not whole groups"
        );
        Ok(())
    }
}
