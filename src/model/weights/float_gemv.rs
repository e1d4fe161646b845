//! Few-row products with a float matrix read in place (f32, f16 or bf16 as the GGUF stores
//! it): a decode step through an f16 model, or through the f16 token table a tied head
//! shares.
//!
//! The matmul route widens the whole matrix to f32 and hands it to gemm, which packs it
//! again: for one input row that is three passes over a matrix as large as the vocabulary
//! times the hidden size, per token. Here each weight row is widened into a buffer that
//! stays in L1 and dotted with every input row at once, so the matrix is read once and
//! nothing as large is written. Measured on the tiny fixture's 151,936-row head: see the
//! CHANGELOG. Many rows (prefill, the vision tower) keep the matmul route, where packing
//! pays for itself.

use std::sync::Mutex;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, Storage, Tensor};
use half::{bf16, f16, slice::HalfFloatSliceExt};

use crate::cpu::math::dot;
use crate::cpu::{self, dispatch_fn, CpuPath};

/// Most input rows this route takes: a decode step feeds one, a forced run a few.
pub(super) const MAX_ROWS: usize = 8;

/// Weight rows per parallel task: big enough to amortize a task, small enough to spread
/// a 2,048-row projection over the threads.
const ROWS_PER_TASK: usize = 256;

/// A float matrix's bytes as the file stores them.
#[derive(Clone, Copy)]
enum Stored<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    Bf16(&'a [bf16]),
}

impl Stored<'_> {
    /// Row `j` (of `k` values) widened into `out`.
    #[inline(always)]
    fn widen_row(&self, j: usize, k: usize, out: &mut [f32]) {
        match self {
            Stored::F32(w) => out.copy_from_slice(&w[j * k..][..k]),
            Stored::F16(w) => w[j * k..][..k].convert_to_f32_slice(out),
            Stored::Bf16(w) => w[j * k..][..k].convert_to_f32_slice(out),
        }
    }
}

/// `x (m, k) @ wᵀ` for a float [`QTensor`] `w` of shape `(n, k)` on the CPU, as `(m, n)`
/// values; `None` when this route does not apply (more than [`MAX_ROWS`] rows, a quantized
/// or non-CPU matrix, bytes not aligned for their type), and the caller takes the matmul
/// route.
pub(super) fn qtensor_gemv(
    w: &QTensor,
    x: &[f32],
    m: usize,
) -> candle_core::Result<Option<Vec<f32>>> {
    if !w.device().is_cpu() {
        return Ok(None);
    }
    let Ok((n, k)) = w.shape().dims2() else {
        return Ok(None);
    };
    let data = w.data()?;
    let stored = match w.dtype() {
        GgmlDType::F32 => bytemuck::try_cast_slice(&data).ok().map(Stored::F32),
        GgmlDType::F16 => bytemuck::try_cast_slice(&data).ok().map(Stored::F16),
        GgmlDType::BF16 => bytemuck::try_cast_slice(&data).ok().map(Stored::Bf16),
        _ => None,
    };
    Ok(stored.and_then(|s| checked_gemv(s, x, m, n, k)))
}

/// [`qtensor_gemv`] for a float [`Tensor`] `w` `(n, k)` kept as stored on the CPU (half
/// safetensors weights), contiguous.
pub(super) fn tensor_gemv(
    w: &Tensor,
    x: &[f32],
    m: usize,
) -> candle_core::Result<Option<Vec<f32>>> {
    let Ok((n, k)) = w.dims2() else {
        return Ok(None);
    };
    let (storage, layout) = w.storage_and_layout();
    let Some((start, end)) = layout.contiguous_offsets() else {
        return Ok(None);
    };
    let stored = match &*storage {
        Storage::Cpu(CpuStorage::F32(v)) => v.get(start..end).map(Stored::F32),
        Storage::Cpu(CpuStorage::F16(v)) => v.get(start..end).map(Stored::F16),
        Storage::Cpu(CpuStorage::BF16(v)) => v.get(start..end).map(Stored::Bf16),
        _ => None,
    };
    Ok(stored.and_then(|s| checked_gemv(s, x, m, n, k)))
}

/// [`gemv`] when the sizes agree and the row count is one this route takes.
fn checked_gemv(w: Stored<'_>, x: &[f32], m: usize, n: usize, k: usize) -> Option<Vec<f32>> {
    let len = match w {
        Stored::F32(v) => v.len(),
        Stored::F16(v) => v.len(),
        Stored::Bf16(v) => v.len(),
    };
    let fits = (1..=MAX_ROWS).contains(&m) && n > 0 && k > 0 && len == n * k && x.len() == m * k;
    fits.then(|| gemv(cpu::path(), w, x, m, n, k))
}

/// The product on kernel path `path`, weight rows split into tasks; the result `(m, n)`.
fn gemv(path: CpuPath, w: Stored<'_>, x: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    // Each task writes its rows' outputs for every input row, transposed: `(rows, m)`.
    let mut transposed = vec![0f32; n * m];
    let tasks: Vec<Mutex<(usize, &mut [f32])>> = transposed
        .chunks_mut(ROWS_PER_TASK * m)
        .enumerate()
        .map(|(t, out)| Mutex::new((t * ROWS_PER_TASK, out)))
        .collect();
    // Work offered to the pass (`cpu::beside`) runs here, on the calling thread.
    crate::cpu::beside::execute_chunked(tasks.len(), |range| {
        let mut row = vec![0f32; k];
        for t in range {
            let Ok(mut task) = tasks[t].lock() else {
                continue;
            };
            let (first, ref mut out) = *task;
            rows_on(path, w, x, k, first, &mut row, out);
        }
    });
    drop(tasks);
    let mut y = vec![0f32; m * n];
    for (j, outs) in transposed.chunks_exact(m).enumerate() {
        for (r, &v) in outs.iter().enumerate() {
            y[r * n + j] = v;
        }
    }
    y
}

dispatch_fn!(
    /// [`rows`] compiled for `path`.
    fn rows_on(w: Stored<'_>, x: &[f32], k: usize, first: usize, row: &mut [f32], out: &mut [f32]) => rows
);

/// Weight rows `first..` (as many as `out` holds, `m` values each) against every input row.
#[inline(always)]
fn rows<const FMA: bool>(
    w: Stored<'_>,
    x: &[f32],
    k: usize,
    first: usize,
    row: &mut [f32],
    out: &mut [f32],
) {
    let m = x.len() / k;
    for (i, outs) in out.chunks_exact_mut(m).enumerate() {
        w.widen_row(first + i, k, row);
        for (o, xr) in outs.iter_mut().zip(x.chunks_exact(k)) {
            *o = dot::<FMA>(row, xr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use rand::{Rng, SeedableRng};

    /// The same products as the matmul route, summed in another order.
    const GEMV_RTOL: f32 = 1e-5;

    #[test]
    fn matches_the_matmul_route_for_every_float_type_and_path() -> anyhow::Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // Odd sizes: a last task with fewer rows, a row length off the vector width.
        for &(n, k) in &[(1usize, 1usize), (700, 37), (513, 64)] {
            let w: Vec<f32> = (0..n * k).map(|_| rng.random_range(-1.0..1.0)).collect();
            let wt = Tensor::from_vec(w, (n, k), &Device::Cpu)?;
            for dtype in [GgmlDType::F32, GgmlDType::F16, GgmlDType::BF16] {
                let q = QTensor::quantize(&wt, dtype)?;
                let reference = q.dequantize(&Device::Cpu)?;
                for m in [1usize, 3, MAX_ROWS] {
                    let x: Vec<f32> = (0..m * k).map(|_| rng.random_range(-1.0..1.0)).collect();
                    let xt = Tensor::from_vec(x.clone(), (m, k), &Device::Cpu)?;
                    let want: Vec<f32> = xt.matmul(&reference.t()?)?.flatten_all()?.to_vec1()?;
                    let scale = want.iter().fold(1f32, |a, v| a.max(v.abs()));
                    for path in CpuPath::available() {
                        let Some(stored) = stored_of(&q)? else {
                            anyhow::bail!("{dtype:?} was not taken");
                        };
                        let got = gemv(path, stored.as_stored(), &x, m, n, k);
                        let diff = got
                            .iter()
                            .zip(&want)
                            .fold(0f32, |a, (g, w)| a.max((g - w).abs()));
                        anyhow::ensure!(
                            diff <= GEMV_RTOL * scale,
                            "{dtype:?} {path:?} n {n} k {k} m {m}: {diff}"
                        );
                    }
                    // The entries take it: the mapped matrix and the stored tensor.
                    let via_q = qtensor_gemv(&q, &x, m)?
                        .ok_or_else(|| anyhow::anyhow!("{dtype:?} m {m}: not taken"))?;
                    anyhow::ensure!(via_q.len() == m * n);
                    let as_tensor = reference.to_dtype(match dtype {
                        GgmlDType::F16 => candle_core::DType::F16,
                        GgmlDType::BF16 => candle_core::DType::BF16,
                        _ => candle_core::DType::F32,
                    })?;
                    let via_t = tensor_gemv(&as_tensor, &x, m)?
                        .ok_or_else(|| anyhow::anyhow!("{dtype:?} m {m}: tensor not taken"))?;
                    anyhow::ensure!(via_t == via_q, "{dtype:?}: the two entries differ");
                }
            }
        }
        Ok(())
    }

    #[test]
    fn declines_what_it_does_not_cover() -> anyhow::Result<()> {
        let wt = Tensor::ones((256, 256), candle_core::DType::F32, &Device::Cpu)?;
        let q4 = QTensor::quantize(&wt, GgmlDType::Q4K)?;
        assert!(qtensor_gemv(&q4, &[0.0; 256], 1)?.is_none(), "quantized");
        let f16 = QTensor::quantize(&wt, GgmlDType::F16)?;
        let many = vec![0f32; 256 * (MAX_ROWS + 1)];
        assert!(
            qtensor_gemv(&f16, &many, MAX_ROWS + 1)?.is_none(),
            "too many rows"
        );
        assert!(
            qtensor_gemv(&f16, &[0.0; 255], 1)?.is_none(),
            "wrong input width"
        );
        assert!(
            tensor_gemv(&wt.t()?, &[0.0; 256], 1)?.is_none(),
            "not contiguous"
        );
        Ok(())
    }

    /// The matrix's values, owned, for calling [`gemv`] on a chosen path.
    enum Owned {
        F32(Vec<f32>),
        F16(Vec<f16>),
        Bf16(Vec<bf16>),
    }

    impl Owned {
        fn as_stored(&self) -> Stored<'_> {
            match self {
                Owned::F32(v) => Stored::F32(v),
                Owned::F16(v) => Stored::F16(v),
                Owned::Bf16(v) => Stored::Bf16(v),
            }
        }
    }

    fn stored_of(q: &QTensor) -> anyhow::Result<Option<Owned>> {
        let data = q.data()?;
        Ok(match q.dtype() {
            GgmlDType::F32 => Some(Owned::F32(bytemuck::pod_collect_to_vec(&data))),
            GgmlDType::F16 => Some(Owned::F16(bytemuck::pod_collect_to_vec(&data))),
            GgmlDType::BF16 => Some(Owned::Bf16(bytemuck::pod_collect_to_vec(&data))),
            _ => None,
        })
    }
}
