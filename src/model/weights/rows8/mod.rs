//! Q4_K and Q6_K matrices laid out eight rows at a time, and their matmul kernels: the
//! CPU path for those matmuls on every x86-64 CPU with AVX2, at each of candle's tiers
//! (and Q8_0 matrices laid out for many-row products, `q80.rs`):
//! AVX2 (no VNNI: AMD Zen 2/3, Intel before Ice Lake, and a run forced there with
//! `SIGHTLINE_CPU_FEATURES=avx2`), AVX-VNNI (256-bit VNNI without AVX-512: Intel Alder
//! Lake and later desktops and laptops) and AVX-512 VNNI (Intel Ice Lake and later Xeons,
//! AMD Zen 4 and later).
//!
//! At the AVX2 tier candle repacks each Q4_K matrix into tiles whose scales are widened
//! to f32 (0.75 bytes a weight against the file's 0.5625, a second copy beside the
//! file), and its one-row dot products walk one row at a time, spending a third of their
//! instructions on each block's scales. At the AVX-512 VNNI tier it keeps a repacked
//! copy too, and on CPUs with AMX a second one in AMX tiles for prefill: a whole turn's
//! peak memory was 1.4× the bound a turn is held to (files + KV cache + 25%). candle's
//! Q6_K matrix-vector products at its VNNI tiers read the stored blocks a third as fast
//! as its Q8_0 ones. llama.cpp's AVX2 path interleaves eight rows instead (`block_q4_Kx8`); these layouts
//! follow the same idea, arranged so the kernels need no shuffles: per group of eight
//! rows and per 256-value block, the low four bits of the eight rows four bytes at a
//! time, so one 32-byte load (AVX2 and AVX-VNNI) or 64-byte load (AVX-512, two four-byte
//! groups of each row side by side) holds the same weights of all eight rows, and the scales
//! unpacked to one byte each, rows side by side (`q4k.rs` and `q6k.rs` give the
//! details). A matrix is laid out for one family ([`Kernel`]), the one [`kernel()`]
//! picks for this CPU.
//!
//! A layout is the file's bytes rearranged (Q4_K 1,184 bytes per eight blocks against
//! 1,152; Q6_K 1,696 against 1,680): a matrix is laid out once when the model loads, its
//! file pages are then dropped, and every matmul of it — one row when decoding, many
//! when prefilling — runs here, so candle never packs a copy of its own and the
//! resident model is about the size of its files.
//!
//! The activation rows are quantized to Q8_K exactly as candle and llama.cpp do
//! (`-127 / max` scale), and each output is the same integer sum of products as theirs;
//! only the float accumulation order differs (pinned by the tests below). Decoding
//! reads every weight once, so the kernels prefetch a few blocks ahead: the hardware
//! prefetchers alone left a decode step 10% slower.

// Off x86-64 nothing is ever laid out (`kernel()` is `None`) and the kernels do not exist:
// the layout code stays compiled, unused.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

#[cfg(target_arch = "x86_64")]
mod dot256;
mod q4k;
mod q6k;
mod q80;
mod shared;

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QTensor};

use crate::cpu::{candle_quantized_tier, CandleQuantTier};
use crate::error::{Error, Result};
#[cfg(target_arch = "x86_64")]
use dot256::Kernels;
pub(crate) use shared::Kernel;
use shared::{quantize_row, Activation, Q8Block, QK_K, ROWS, TILE};

/// The blocks of a laid-out matrix.
enum Blocks {
    Q4K(Vec<q4k::Block>),
    Q6K(Vec<q6k::Block>),
    Q80(Vec<q80::Block>),
}

/// A Q4_K, Q6_K or Q8_0 matrix of `n` rows and `k` columns in the eight-row layout.
pub(crate) struct Rows8 {
    /// Row group `g`, block `b` at `g * k / 256 + b`.
    blocks: Blocks,
    /// The kernels the blocks are laid out for.
    kernel: Kernel,
    n: usize,
    k: usize,
}

impl std::fmt::Debug for Rows8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.blocks {
            Blocks::Q4K(_) => "Q4_K",
            Blocks::Q6K(_) => "Q6_K",
            Blocks::Q80(_) => "Q8_0",
        };
        write!(f, "Rows8({kind}, {:?}, {}×{})", self.kernel, self.n, self.k)
    }
}

/// The kernels Q4_K and Q6_K matmuls on this CPU take, if any: the family matching
/// candle's own tier (which honours a run forced to AVX2), where the CPU can run it. Off
/// x86-64 and without AVX2, `None`: candle's kernels.
pub(crate) fn kernel() -> Option<Kernel> {
    static KERNEL: std::sync::OnceLock<Option<Kernel>> = std::sync::OnceLock::new();
    *KERNEL.get_or_init(|| {
        match candle_quantized_tier() {
            CandleQuantTier::Avx2 { .. } => Some(Kernel::Avx2),
            CandleQuantTier::AvxVnni { .. } => Some(Kernel::AvxVnni),
            CandleQuantTier::Avx512Vnni { .. } => Some(Kernel::Avx512Vnni),
            _ => None,
        }
        .filter(|k| k.runs_here())
    })
}

/// A raw pointer handed to pool workers that write disjoint elements through it.
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: only used for writes to disjoint elements, each by one worker, while the
// owner waits for the pool to finish.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as for `Send`: workers share the pointer, never an element.
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the wrapper rather than its field).
    fn get(self) -> *mut T {
        self.0
    }
}

/// How a type's eight stored blocks become one laid-out block for a kernel family.
type Interleave<B> = fn(Kernel, [&[u8]; ROWS]) -> B;

/// Lay out `n × k` weights stored row-major as GGML blocks of `stored` bytes: each
/// group of eight rows' block `b` becomes `interleave` of `kernel` and those eight
/// stored blocks.
fn lay_out<B: Copy + Send>(
    data: &[u8],
    (n, k): (usize, usize),
    stored: usize,
    kernel: Kernel,
    interleave: Interleave<B>,
) -> Result<Vec<B>> {
    let kb = k / QK_K;
    if data.len() != n * kb * stored || !n.is_multiple_of(ROWS) || !k.is_multiple_of(QK_K) {
        return Err(Error::internal(format!(
            "a {n}×{k} matrix of {} bytes in blocks of {stored}",
            data.len()
        )));
    }
    let count = n / ROWS * kb;
    let mut blocks: Vec<B> = Vec::with_capacity(count);
    huge_pages(blocks.as_mut_ptr().cast(), count * std::mem::size_of::<B>());
    let out = SendPtr(blocks.as_mut_ptr());
    candle_core::utils::barrier_pool().execute_chunked(n / ROWS, |groups| {
        for g in groups {
            for b in 0..kb {
                let rows: [&[u8]; ROWS] = std::array::from_fn(|r| {
                    let at = ((g * ROWS + r) * kb + b) * stored;
                    &data[at..at + stored]
                });
                // SAFETY: each (group, block) is written by exactly one worker, and the
                // index is within the capacity (g < n / 8, b < kb).
                unsafe { out.get().add(g * kb + b).write(interleave(kernel, rows)) };
            }
        }
    });
    // SAFETY: the pool has returned, and it wrote every one of the `count` elements.
    unsafe { blocks.set_len(count) };
    Ok(blocks)
}

/// Ask the kernel to back `len` bytes at `ptr` (not yet touched) with transparent huge
/// pages where it is set to do so on request (`madvise` mode, common): a decode step
/// streams the whole model, and with 4 KiB pages every page is a TLB miss and a place
/// where the hardware prefetchers stop. A hint; nothing depends on it being honoured.
fn huge_pages(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + len) / HUGE * HUGE;
        if end > start {
            // SAFETY: the range lies within an allocation this caller owns; MADV_HUGEPAGE
            // changes only how the kernel backs it, never its contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

impl Rows8 {
    /// Lay out a CPU Q4_K, Q6_K or Q8_0 matrix for `kernel`; `None` for anything else
    /// (another type or device, rows not a multiple of eight, columns not whole
    /// 256-value blocks).
    pub(crate) fn from_qtensor(q: &QTensor, kernel: Kernel) -> Result<Option<Arc<Self>>> {
        let laid_out = matches!(q.dtype(), GgmlDType::Q4K | GgmlDType::Q6K | GgmlDType::Q8_0);
        if !laid_out || !q.device().is_cpu() {
            return Ok(None);
        }
        let Ok((n, k)) = q.shape().dims2() else {
            return Ok(None);
        };
        if !n.is_multiple_of(ROWS) || !k.is_multiple_of(QK_K) {
            return Ok(None);
        }
        let data = q.data()?;
        let blocks = match q.dtype() {
            GgmlDType::Q4K => {
                let stored = q4k::STORED_BYTES;
                Blocks::Q4K(lay_out(&data, (n, k), stored, kernel, q4k::interleave)?)
            }
            GgmlDType::Q6K => {
                let stored = q6k::STORED_BYTES;
                Blocks::Q6K(lay_out(&data, (n, k), stored, kernel, q6k::interleave)?)
            }
            _ => {
                let stored = q80::STORED_BYTES;
                Blocks::Q80(lay_out(&data, (n, k), stored, kernel, q80::interleave)?)
            }
        };
        Ok(Some(Arc::new(Rows8 {
            blocks,
            kernel,
            n,
            k,
        })))
    }

    /// How this matrix's activation rows are quantized.
    fn activations(&self) -> Activations {
        match self.blocks {
            Blocks::Q4K(_) | Blocks::Q6K(_) => Activations::Q8K,
            Blocks::Q80(_) => Activations::Q80,
        }
    }

    /// Rows of the matrix (outputs of a matmul).
    pub(crate) fn rows(&self) -> usize {
        self.n
    }

    /// Columns (inputs of a matmul).
    pub(crate) fn columns(&self) -> usize {
        self.k
    }

    /// Dot products of row group `g` with activation rows `row0..row0 + count` (1 to
    /// [`TILE`] rows) of `lhs`, into `dst[i][r]`, with the kernels of `self.kernel`.
    /// Panics if `lhs` is not quantized as [`Rows8::activations`] says or holds fewer
    /// rows, or `g` is past the last group.
    ///
    /// # Safety
    /// The CPU must run `self.kernel` ([`Kernel::runs_here`]); off x86-64 it runs none.
    unsafe fn group_dot(
        &self,
        g: usize,
        lhs: &Lhs,
        (row0, count): (usize, usize),
        dst: &mut [[f32; ROWS]; TILE],
    ) {
        let kb = self.k / QK_K;
        let span = g * kb..(g + 1) * kb;
        // The tile's rows; past `count`, the last row again (its results are not read).
        fn tile<A>(lhs: &[A], kb: usize, row0: usize, count: usize) -> [&[A]; TILE] {
            std::array::from_fn(|i| {
                let row = row0 + i.min(count - 1);
                &lhs[row * kb..(row + 1) * kb]
            })
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller guarantees the CPU runs `self.kernel`, the family the
        // blocks are laid out for.
        unsafe {
            match (&self.blocks, lhs) {
                (Blocks::Q4K(b), Lhs::Q8K(x)) => {
                    group_dot_on(self.kernel, &b[span], &tile(x, kb, row0, count), count, dst)
                }
                (Blocks::Q6K(b), Lhs::Q8K(x)) => {
                    group_dot_on(self.kernel, &b[span], &tile(x, kb, row0, count), count, dst)
                }
                (Blocks::Q80(b), Lhs::Q80(x)) => {
                    group_dot_on(self.kernel, &b[span], &tile(x, kb, row0, count), count, dst)
                }
                _ => unreachable!("`matmul` quantizes the rows as its matrices need"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // The caller's guarantee cannot hold off x86-64.
            let _ = (span, lhs, row0, count, dst, tile::<u8>);
            unreachable!("the eight-row kernels run on x86-64 only")
        }
    }
}

/// [`Rows8::group_dot`] on the blocks `w` of one row group, laid out for `kernel`.
///
/// # Safety
/// The CPU must run `kernel`.
#[cfg(target_arch = "x86_64")]
unsafe fn group_dot_on<B: Kernels>(
    kernel: Kernel,
    w: &[B],
    rows: &[&[B::Act]; TILE],
    count: usize,
    dst: &mut [[f32; ROWS]; TILE],
) {
    use dot256::{group_dot_avx2, group_dot_avxvnni};
    // The kernel instance for `count` activation rows: `$call` with `$r` its count.
    macro_rules! by_count {
        (@$n:literal |$r:ident| $call:expr) => {{
            const $r: usize = $n;
            $call
        }};
        (|$r:ident| $call:expr) => {
            match count {
                1 => by_count!(@1 |$r| $call),
                2 => by_count!(@2 |$r| $call),
                3 => by_count!(@3 |$r| $call),
                _ => by_count!(@4 |$r| $call),
            }
        };
    }
    // SAFETY: the caller guarantees the CPU runs `kernel`, the family each arm calls.
    unsafe {
        match kernel {
            Kernel::Avx2 => by_count!(|R| group_dot_avx2::<B, R>(w, rows, dst)),
            Kernel::AvxVnni => by_count!(|R| group_dot_avxvnni::<B, R>(w, rows, dst)),
            Kernel::Avx512Vnni => by_count!(|R| B::group_dot_avx512::<R>(w, rows, dst)),
        }
    }
}

/// Bytes of quantized activation rows taken against every row group before the next
/// rows: they stay in L2 (512 KiB to 2 MiB a core on the CPUs the kernels run on) beside
/// the group being read.
const ACTIVATION_RUN_BYTES: usize = 256 << 10;

/// How a matmul's activation rows are quantized: as GGML does for the matrix's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Activations {
    /// Q8_K (a scale per 256 values), for Q4_K and Q6_K.
    Q8K,
    /// Q8_0 (a scale per 32 values), for Q8_0.
    Q80,
}

/// Quantized activation rows, `k / 256` blocks a row.
enum Lhs {
    Q8K(Vec<Q8Block>),
    Q80(Vec<q80::Q80Block>),
}

impl Lhs {
    /// Bytes of one 256-value block.
    fn block_bytes(&self) -> usize {
        match self {
            Lhs::Q8K(_) => std::mem::size_of::<Q8Block>(),
            Lhs::Q80(_) => std::mem::size_of::<q80::Q80Block>(),
        }
    }
}

/// `m` rows of `k` values quantized to `A`, one row a worker (one row alone on this
/// thread).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C.
unsafe fn quantize_rows<A: Activation>(xs: &[f32], (m, k): (usize, usize)) -> Vec<A> {
    let kb = k / QK_K;
    let mut lhs = vec![A::ZERO; m * kb];
    if m == 1 {
        // SAFETY: the caller guarantees AVX2, FMA and F16C.
        unsafe { quantize_row(xs, &mut lhs) };
    } else {
        let rows: Vec<_> = lhs
            .chunks_mut(kb)
            .zip(xs.chunks(k))
            .map(std::sync::Mutex::new)
            .collect();
        candle_core::utils::barrier_pool().execute_chunked(m, |range| {
            for row in &rows[range] {
                let Ok(mut row) = row.lock() else { continue };
                let (out, x) = &mut *row;
                // SAFETY: as for one row above.
                unsafe { quantize_row(x, out) };
            }
        });
    }
    lhs
}

/// `xs @ wᵀ` for each matrix of `mats` (all with `k` columns and the same
/// [`Activations`]) and `m` rows of `xs` (row-major `m × k` f32): one `m × n` output
/// per matrix, with `biases[i]`, where given, added to matrix `i`'s every output row as
/// the results are written (the same f32 addition as adding it after, without another
/// pass over the output). The rows are quantized once and every matrix runs in one
/// parallel region (the decode step's q/k/v and gate/up).
pub(crate) fn matmul(
    mats: &[&Rows8],
    biases: &[Option<&[f32]>],
    xs: &[f32],
    m: usize,
) -> Result<Vec<Vec<f32>>> {
    let Some((k, activations)) = mats.first().map(|w| (w.k, w.activations())) else {
        return Ok(Vec::new());
    };
    let bias = |i: usize| biases.get(i).copied().flatten();
    if mats
        .iter()
        .any(|w| w.k != k || w.activations() != activations || !w.kernel.runs_here())
        || xs.len() != m * k
        || biases.len() > mats.len()
        || mats
            .iter()
            .enumerate()
            .any(|(i, w)| bias(i).is_some_and(|b| b.len() != w.n))
    {
        return Err(Error::internal(format!(
            "eight-row matmul of {} values as {m} rows of {k}, matrices {mats:?}, biases of \
             {:?} values",
            xs.len(),
            biases
                .iter()
                .map(|b| b.map(<[f32]>::len))
                .collect::<Vec<_>>()
        )));
    }
    let kb = k / QK_K;
    // SAFETY: every family needs AVX2, FMA and F16C, and the CPU runs the matrices'.
    let lhs = unsafe {
        match activations {
            Activations::Q8K => Lhs::Q8K(quantize_rows(xs, (m, k))),
            Activations::Q80 => Lhs::Q80(quantize_rows(xs, (m, k))),
        }
    };

    let mut outs: Vec<Vec<f32>> = mats.iter().map(|w| vec![0f32; m * w.n]).collect();
    let out_ptrs: Vec<SendPtr<f32>> = outs.iter_mut().map(|o| SendPtr(o.as_mut_ptr())).collect();
    // Work items: runs of activation rows whose quantized blocks stay in L2 (the outer
    // order), and within a run every (matrix, row group), each taking the run's tiles
    // with the group's weights in L1. Over all activation rows at once, a 2,666-token
    // prefill streamed its 10 MB of activation blocks from L3 for every row group.
    let run_rows = (ACTIVATION_RUN_BYTES / (kb * lhs.block_bytes()) / TILE).max(1) * TILE;
    let runs = m.div_ceil(run_rows);
    let mut first_group = vec![0usize];
    let mut groups = 0;
    for w in mats {
        groups += w.n / ROWS;
        first_group.push(groups);
    }
    let lhs = &lhs;
    // Work offered to the pass (`cpu::beside`) runs here, on the calling thread.
    crate::cpu::beside::execute_chunked(runs * groups, |range| {
        for item in range {
            let (run, group) = (item / groups, item % groups);
            let mat = first_group.partition_point(|&f| f <= group) - 1;
            let (w, out) = (mats[mat], out_ptrs[mat]);
            let g = group - first_group[mat];
            let group_bias: Option<[f32; ROWS]> =
                bias(mat).map(|b| std::array::from_fn(|r| b[g * ROWS + r]));
            let run_end = m.min((run + 1) * run_rows);
            for row0 in (run * run_rows..run_end).step_by(TILE) {
                let count = TILE.min(run_end - row0);
                let mut dst = [[0f32; ROWS]; TILE];
                // SAFETY: every matrix's family runs on this CPU (checked above), and
                // `lhs` is quantized as they all need.
                unsafe { w.group_dot(g, lhs, (row0, count), &mut dst) };
                for (i, vals) in dst.iter_mut().take(count).enumerate() {
                    if let Some(group_bias) = &group_bias {
                        vals.iter_mut().zip(group_bias).for_each(|(v, b)| *v += b);
                    }
                    // SAFETY: this item alone writes columns 8g..8g+8 of its run's rows.
                    unsafe {
                        let at = out.get().add((row0 + i) * w.n + g * ROWS);
                        std::ptr::copy_nonoverlapping(vals.as_ptr(), at, ROWS);
                    }
                }
            }
        }
    });
    Ok(outs)
}

/// GGML's Q8_0 product, computed apart from every kernel: `xs` (`m × k`) quantized to
/// Q8_0 by candle's `quantize_row_q8_0` and read back, times the stored matrix's values,
/// summed in f64. This is what GGML's reference `vec_dot_q8_0_q8_0` computes, up to the
/// float order. (candle's own kernels are no reference for Q8_0: at its AVX-512 VNNI
/// tier they give another product, 0.4–1% away on random data.)
#[cfg(test)]
pub(crate) fn ggml_q8_0_product(
    q: &QTensor,
    xs: &candle_core::Tensor,
) -> candle_core::Result<candle_core::Tensor> {
    use candle_core::DType;
    let dev = xs.device();
    let x = QTensor::quantize(xs, GgmlDType::Q8_0)?.dequantize(dev)?;
    let w = q.dequantize(dev)?;
    x.to_dtype(DType::F64)?
        .matmul(&w.to_dtype(DType::F64)?.t()?)?
        .to_dtype(DType::F32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::weights::rows8::shared::test_weights as weights;
    use candle_core::quantized::QMatMul;
    use candle_core::{Device, Module, Tensor};

    /// Both paths quantize the rows identically (Q8_K, or Q8_0 for Q8_0) and sum the same
    /// integer products; only the float summation order differs. Relative to the largest
    /// output.
    const ROWS8_VS_CANDLE_RTOL: f32 = 1e-5;

    fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
        let scale = b
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()))
            .max(f32::MIN_POSITIVE);
        a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
    }

    fn laid_out(w: &Tensor, dtype: GgmlDType, kernel: Kernel) -> anyhow::Result<Arc<Rows8>> {
        Rows8::from_qtensor(&QTensor::quantize(w, dtype)?, kernel)?
            .ok_or_else(|| anyhow::anyhow!("{dtype:?} declined"))
    }

    /// The kernel families this CPU runs (each is tested wherever it can run, not only
    /// the one `kernel()` picks).
    fn kernels_here() -> Vec<Kernel> {
        let here: Vec<Kernel> = Kernel::ALL.into_iter().filter(|k| k.runs_here()).collect();
        if here.is_empty() {
            eprintln!("skipped: this CPU runs none of the eight-row kernels (no AVX2)");
        }
        here
    }

    /// Every family this CPU runs, with each type it lays out.
    fn families_and_types() -> impl Iterator<Item = (Kernel, GgmlDType)> {
        kernels_here()
            .into_iter()
            .flat_map(|k| [GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q8_0].map(|dtype| (k, dtype)))
    }

    #[test]
    fn every_row_count_matches_candles_quantized_matmul() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        // Shapes of the 2B model's projections (n scaled down), one block and several;
        // row counts covering one row, a partial tile, whole tiles and a remainder, and
        // more rows than one run of activation rows holds.
        for (kernel, dtype) in families_and_types() {
            for (seed, (n, k)) in [(1u64, (64, 256)), (2, (96, 2048)), (3, (48, 768))] {
                let w = Tensor::from_vec(weights(seed, n, k), (n, k), &dev)?;
                let rows8 = laid_out(&w, dtype, kernel)?;
                // candle's own quantized matmul for Q4_K and Q6_K: GGML's dot products
                // on the stored blocks, or its repacked tiles, whichever this CPU takes;
                // for Q8_0, GGML's product computed apart (`ggml_q8_0_product`).
                let q = Arc::new(QTensor::quantize(&w, dtype)?);
                let reference = QMatMul::from_arc(Arc::clone(&q))?;
                // 150 rows of 2,048 columns: three runs of activation rows, the last
                // one short.
                for m in [1usize, 2, 3, 4, 5, 9, 150] {
                    let x = weights(seed + 100 + m as u64, m, k);
                    let ours = matmul(&[&rows8], &[], &x, m)?.remove(0);
                    let xs = Tensor::from_vec(x, (m, k), &dev)?;
                    let theirs = match dtype {
                        GgmlDType::Q8_0 => ggml_q8_0_product(&q, &xs)?,
                        _ => reference.forward(&xs)?,
                    };
                    let theirs = theirs.flatten_all()?.to_vec1::<f32>()?;
                    let d = max_rel_diff(&ours, &theirs);
                    anyhow::ensure!(
                        d <= ROWS8_VS_CANDLE_RTOL,
                        "{kernel:?} {dtype:?} n={n} k={k} m={m}: rel diff {d}"
                    );
                }
            }
        }
        Ok(())
    }

    #[test]
    fn several_matrices_in_one_region_match_each_alone() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let k = 512;
        for kernel in kernels_here() {
            let mats: Vec<Arc<Rows8>> = [
                (1u64, 16usize, GgmlDType::Q4K),
                (2, 40, GgmlDType::Q6K),
                (3, 8, GgmlDType::Q4K),
            ]
            .iter()
            .map(|&(seed, n, dtype)| {
                let w = Tensor::from_vec(weights(seed, n, k), (n, k), &dev)?;
                laid_out(&w, dtype, kernel)
            })
            .collect::<anyhow::Result<_>>()?;
            let refs: Vec<&Rows8> = mats.iter().map(|m| m.as_ref()).collect();
            for m in [1usize, 6] {
                let x = weights(9, m, k);
                let together = matmul(&refs, &[], &x, m)?;
                for (w, out) in refs.iter().zip(&together) {
                    anyhow::ensure!(out.len() == m * w.rows());
                    anyhow::ensure!(*out == matmul(&[w], &[], &x, m)?[0], "{kernel:?} m={m}");
                }
            }
        }
        Ok(())
    }

    /// How a timing test measures one run: wall time or this thread's CPU time.
    type Clock = fn(&mut dyn FnMut()) -> f64;

    /// The best of three timings of `run` by `clock`, or the first error it returned.
    fn best_of_three(clock: Clock, mut run: impl FnMut() -> Result<()>) -> anyhow::Result<f64> {
        let (mut best, mut failed) = (f64::INFINITY, None);
        for _ in 0..3 {
            best = best.min(clock(&mut || {
                if let Err(e) = run() {
                    failed.get_or_insert(e);
                }
            }));
        }
        failed.map_or(Ok(best), |e| Err(e.into()))
    }

    /// One-row matmuls (a decode step's kind) on weights far larger than the caches and on
    /// weights that stay in L2, in GB of weights per second of wall time, with the pool's
    /// threads (`CANDLE_NUM_THREADS`): whether the kernels are bound by memory or by
    /// arithmetic. Then one-row and four-row (a prefill tile) matmuls on the L2 weights in
    /// GB per second of this thread's CPU time, which time given to other processes does
    /// not count: the kernels' own speed, steady on a shared machine where wall time is
    /// not, and all of it with `CANDLE_NUM_THREADS=1` (otherwise the other threads' share
    /// is missing). Run optimized with `--ignored --nocapture`.
    #[test]
    #[ignore = "measurement"]
    fn rows8_gemv_bandwidth_timing() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let (n, k) = (6144, 2048);
        for (kernel, dtype) in families_and_types() {
            let w = Tensor::from_vec(weights(11, n, k), (n, k), &dev)?;
            let bytes_one = n * k / QK_K * dtype.type_size();
            // 16 distinct copies (~110-170 MB): every call reads from memory.
            let big: Vec<Arc<Rows8>> = (0..16)
                .map(|_| laid_out(&w, dtype, kernel))
                .collect::<anyhow::Result<_>>()?;
            let small_rows = 512;
            let small = laid_out(
                &Tensor::from_vec(weights(12, small_rows, k), (small_rows, k), &dev)?,
                dtype,
                kernel,
            )?;
            let xs = weights(13, TILE, k);
            // Best of three of `reps` rounds over `mats` with the first `m` rows of `xs`,
            // timed by `clock`.
            let time = |clock: Clock, mats: &[&Rows8], m: usize, reps: usize| {
                best_of_three(clock, || {
                    for _ in 0..reps {
                        for w in mats {
                            matmul(&[w], &[], &xs[..m * k], m)?;
                        }
                    }
                    Ok(())
                })
            };
            let wall: Clock = |f| {
                let t = std::time::Instant::now();
                f();
                t.elapsed().as_secs_f64()
            };
            let cpu: Clock = |f| crate::cpu::math::thread_cpu_seconds(f);
            let big_refs: Vec<&Rows8> = big.iter().map(|m| m.as_ref()).collect();
            let dram = (2 * 16 * bytes_one) as f64 / time(wall, &big_refs, 1, 2)? / 1e9;
            let small_bytes = (2000 * small_rows * k / QK_K * dtype.type_size()) as f64;
            let cached = small_bytes / time(wall, &[small.as_ref()], 1, 2000)? / 1e9;
            let one = small_bytes / time(cpu, &[small.as_ref()], 1, 2000)? / 1e9;
            let four = small_bytes / 4.0 / time(cpu, &[small.as_ref()], TILE, 500)? / 1e9;
            println!(
                "{kernel:?} {dtype:?}: one row {dram:.1} GB/s from memory, {cached:.1} GB/s \
                 from L2; in CPU time from L2, one row {one:.1} GB/s, four rows {four:.1} GB/s"
            );
        }
        Ok(())
    }

    /// A prefill-sized matmul (2,048 activation rows against a 2,048 × 2,048 matrix, the 2B
    /// model's attention output) in billions of operations per second of this thread's
    /// CPU time (a multiply-add counts two): the kernels' speed where the tiles, not the
    /// memory, bound them. Run optimized with `CANDLE_NUM_THREADS=1 --ignored --nocapture`.
    #[test]
    #[ignore = "measurement"]
    fn rows8_prefill_timing() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let (m, n, k) = (2048, 2048, 2048);
        for (kernel, dtype) in families_and_types() {
            let w = laid_out(
                &Tensor::from_vec(weights(21, n, k), (n, k), &dev)?,
                dtype,
                kernel,
            )?;
            let xs = weights(22, m, k);
            // Five products a timing: the CPU clock ticks every few milliseconds, a
            // tenth of one product.
            const REPS: usize = 5;
            let best = best_of_three(
                |f| crate::cpu::math::thread_cpu_seconds(f),
                || (0..REPS).try_for_each(|_| matmul(&[&w], &[], &xs, m).map(drop)),
            )?;
            let gops = 2.0 * (REPS * m * n * k) as f64 / best / 1e9;
            println!("{kernel:?} {dtype:?}: {m} rows × {n}×{k}: {gops:.1} GOP/s of CPU time");
        }
        Ok(())
    }

    #[test]
    fn matrices_the_layout_cannot_hold_are_declined() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let w = Tensor::from_vec(weights(4, 16, 256), (16, 256), &dev)?;
        let q8 = QTensor::quantize(&w, GgmlDType::Q8_0)?;
        let q5 = QTensor::quantize(&w, GgmlDType::Q5K)?;
        for kernel in Kernel::ALL {
            anyhow::ensure!(Rows8::from_qtensor(&q8, kernel)?.is_some(), "{kernel:?}");
            anyhow::ensure!(Rows8::from_qtensor(&q5, kernel)?.is_none(), "{kernel:?}");
        }
        let w12 = Tensor::from_vec(weights(5, 12, 256), (12, 256), &dev)?;
        for dtype in [GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q8_0] {
            let q12 = QTensor::quantize(&w12, dtype)?;
            anyhow::ensure!(
                Rows8::from_qtensor(&q12, Kernel::Avx2)?.is_none(),
                "12 rows are not whole groups"
            );
        }
        let w_short = Tensor::from_vec(weights(7, 8, 96), (8, 96), &dev)?;
        let q_short = QTensor::quantize(&w_short, GgmlDType::Q8_0)?;
        anyhow::ensure!(
            Rows8::from_qtensor(&q_short, Kernel::Avx2)?.is_none(),
            "96 columns are not a whole 256-value block"
        );
        Ok(())
    }

    #[test]
    fn a_matmul_with_mismatched_inputs_is_an_error() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let w = Tensor::from_vec(weights(6, 8, 256), (8, 256), &dev)?;
        let rows8 = laid_out(&w, GgmlDType::Q4K, Kernel::Avx2)?;
        anyhow::ensure!(matmul(&[&rows8], &[], &[0.0; 255], 1).is_err());
        // Matrices whose activations are quantized differently do not share a region.
        let q8_0 = laid_out(&w, GgmlDType::Q8_0, Kernel::Avx2)?;
        anyhow::ensure!(matmul(&[&rows8, &q8_0], &[], &[0.0; 256], 1).is_err());
        // A bias of another length than the matrix's rows, or more biases than matrices.
        let x = [0.5; 256];
        anyhow::ensure!(matmul(&[&rows8], &[Some(&[1.0; 7])], &x, 1).is_err());
        anyhow::ensure!(matmul(&[&rows8], &[None, None], &x, 1).is_err());
        Ok(())
    }

    /// A bias added as the results are written is the same f32 addition as adding it to
    /// the product afterwards: bit for bit, for each matrix of a shared region, and a
    /// matrix without one is left as it was.
    #[test]
    fn a_bias_added_in_the_matmul_equals_adding_it_after() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let k = 512;
        for (kernel, dtype) in families_and_types() {
            let a = laid_out(
                &Tensor::from_vec(weights(7, 24, k), (24, k), &dev)?,
                dtype,
                kernel,
            )?;
            let b = laid_out(
                &Tensor::from_vec(weights(8, 16, k), (16, k), &dev)?,
                dtype,
                kernel,
            )?;
            let bias: Vec<f32> = weights(9, 1, 32)
                .iter()
                .take(24)
                .map(|v| v * 40.0)
                .collect();
            for m in [1usize, 5] {
                let x = weights(10 + m as u64, m, k);
                let plain = matmul(&[&a, &b], &[], &x, m)?;
                let biased = matmul(&[&a, &b], &[Some(&bias), None], &x, m)?;
                let added: Vec<f32> = plain[0]
                    .chunks(24)
                    .flat_map(|row| row.iter().zip(&bias).map(|(y, b)| y + b))
                    .collect();
                anyhow::ensure!(biased[0] == added, "{kernel:?} {dtype:?} m={m}: with bias");
                anyhow::ensure!(biased[1] == plain[1], "{kernel:?} {dtype:?} m={m}: without");
            }
        }
        Ok(())
    }
}
