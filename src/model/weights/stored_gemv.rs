//! Single-row quantized matmuls on the matrix's stored blocks, where that reads fewer bytes
//! than candle's default.
//!
//! A decode step reads every weight once, so it runs at the speed memory delivers the
//! bytes. At its AVX2 tier (no VNNI: most AMD Zen 2/3 and pre-Ice-Lake Intel CPUs, and a
//! run forced there with `SIGHTLINE_CPU_FEATURES=avx2`) candle sends a one-row Q4_K matmul
//! to its repacked tiles, which store each 256-value block with its scales and mins widened
//! to f32: 0.75 bytes a weight against the file's 0.5625, a third more traffic on most of
//! the model. Here such a matmul runs candle's own AVX2 Q4_K × Q8_K dot product
//! (`k_quants::matmul`, the routine candle uses for matrices it does not repack) on the
//! blocks as loaded. The activation row is quantized to Q8_K exactly as candle's repacked
//! path does, so the two differ only in summation order (pinned by a test).
//!
//! At the VNNI tiers candle's 512-bit kernels (with their fused projections) stay faster
//! and are left alone; Q6_K one-row matmuls already take the stored-block path in candle.

use candle_core::quantized::k_quants::{self, BlockQ4K, GgmlType};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};

use crate::error::Result;
use crate::model::qwen3_vl::cpu::{candle_quantized_tier, CandleQuantTier};

/// Whether one-row matmuls of `dtype` go to [`gemv`] on this CPU (candle's tier, which
/// honours a forced AVX2 run).
pub(crate) fn wanted(dtype: GgmlDType) -> bool {
    static AVX2_TIER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    dtype == GgmlDType::Q4K
        && *AVX2_TIER
            .get_or_init(|| matches!(candle_quantized_tier(), CandleQuantTier::Avx2 { .. }))
}

/// `xs @ wᵀ` for a CPU `w` of `(n, k)` Q4_K blocks and `xs` of one f32 row (any leading
/// dims multiplying to 1), on the stored blocks. `None` when the inputs are not that
/// (another dtype or device, several rows, `k` not whole blocks): the caller then takes
/// candle's path.
pub(crate) fn gemv(w: &QTensor, xs: &Tensor) -> Result<Option<Tensor>> {
    if w.dtype() != GgmlDType::Q4K || !w.device().is_cpu() || !xs.device().is_cpu() {
        return Ok(None);
    }
    let Ok((n, k)) = w.shape().dims2() else {
        return Ok(None);
    };
    let dims = xs.dims();
    let rows: usize = dims.iter().rev().skip(1).product();
    if rows != 1 || dims.last() != Some(&k) || !k.is_multiple_of(BlockQ4K::BLCK_SIZE) {
        return Ok(None);
    }
    let data = w.data()?;
    let Some(blocks) = as_q4k_blocks(&data, n * k / BlockQ4K::BLCK_SIZE) else {
        return Ok(None);
    };
    let lhs: Vec<f32> = xs.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
    let mut dst = vec![0f32; n];
    k_quants::matmul((1, k, n), &lhs, blocks, &mut dst)?;
    let mut out_dims = dims.to_vec();
    if let Some(last) = out_dims.last_mut() {
        *last = n;
    }
    Ok(Some(Tensor::from_vec(dst, out_dims, &Device::Cpu)?))
}

/// The bytes of a CPU Q4_K matrix as its blocks, when they are exactly `count` aligned
/// blocks (candle keeps them in a `Vec<BlockQ4K>`, so they are; checked, not assumed).
fn as_q4k_blocks(data: &[u8], count: usize) -> Option<&[BlockQ4K]> {
    let size = std::mem::size_of::<BlockQ4K>();
    let aligned = data.as_ptr().align_offset(std::mem::align_of::<BlockQ4K>()) == 0;
    if !aligned || data.len() != count * size {
        return None;
    }
    // SAFETY: the pointer is aligned for BlockQ4K and covers exactly `count` of them;
    // BlockQ4K is `repr(C)` plain data (f16s and byte arrays) valid for any bit pattern,
    // and the slice borrows `data`, which outlives it.
    Some(unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<BlockQ4K>(), count) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QMatMul;
    use candle_core::Module;

    /// Both paths quantize the row to Q8_K identically and sum the same integer products;
    /// only the float summation order differs. Relative to the largest output.
    const STORED_VS_CANDLE_RTOL: f32 = 1e-5;

    /// `len` seeded values uniform in `[-amp, amp)`.
    fn seeded(seed: u64, len: usize, amp: f32) -> Vec<f32> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        (0..len).map(|_| rng.random_range(-amp..amp)).collect()
    }

    fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
        let scale = b
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()))
            .max(f32::MIN_POSITIVE);
        a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
    }

    #[test]
    fn q4k_gemv_on_stored_blocks_matches_candles_matmul() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        // Shapes of the 2B model's projections (scaled down in n) and a multi-block k.
        for (seed, (n, k)) in [(1u64, (64, 256)), (2, (96, 2048)), (3, (48, 768))] {
            let w = Tensor::from_vec(seeded(seed, n * k, 0.05), (n, k), &dev)?;
            let q = QTensor::quantize(&w, GgmlDType::Q4K)?;
            let xs = Tensor::from_vec(seeded(seed + 100, k, 1.0), (1, 1, k), &dev)?;
            let ours = gemv(&q, &xs)?.ok_or_else(|| anyhow::anyhow!("gemv declined"))?;
            anyhow::ensure!(ours.dims() == [1, 1, n]);
            let theirs = QMatMul::from_qtensor(q)?.forward(&xs)?;
            let (a, b) = (
                ours.flatten_all()?.to_vec1::<f32>()?,
                theirs.flatten_all()?.to_vec1::<f32>()?,
            );
            let d = max_rel_diff(&a, &b);
            anyhow::ensure!(d <= STORED_VS_CANDLE_RTOL, "n={n} k={k}: rel diff {d}");
        }
        Ok(())
    }

    #[test]
    fn gemv_declines_several_rows_and_other_types() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let w = Tensor::from_vec(seeded(4, 32 * 256, 0.05), (32, 256), &dev)?;
        let q4 = QTensor::quantize(&w, GgmlDType::Q4K)?;
        let q8 = QTensor::quantize(&w, GgmlDType::Q8_0)?;
        let two_rows = Tensor::from_vec(seeded(5, 512, 1.0), (2, 256), &dev)?;
        let one_row = Tensor::from_vec(seeded(6, 256, 1.0), (1, 256), &dev)?;
        let wrong_k = Tensor::from_vec(seeded(7, 512, 1.0), (1, 512), &dev)?;
        anyhow::ensure!(gemv(&q4, &two_rows)?.is_none());
        anyhow::ensure!(gemv(&q8, &one_row)?.is_none());
        anyhow::ensure!(gemv(&q4, &wrong_k)?.is_none());
        Ok(())
    }
}
