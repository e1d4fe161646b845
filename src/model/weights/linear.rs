//! [`Linear`]: a matrix (quantized or float) and an optional bias, applied through candle's
//! [`QMatMul`], or on CPUs whose quantized tier is AVX2 or AVX-512 VNNI, Q4_K and Q6_K
//! matrices through the eight-row layouts of `rows8/`. Float matrices stored at half
//! precision, and on the AVX2 tier other quantized matrices applied to many rows, are
//! widened for the call (see [`WIDEN_FROM_ROWS`]).

use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{CpuStorage, DType, Module, Storage, Tensor};

use super::float_gemv;
use super::rows8::{self, Rows8};
use super::MappedPages;
use crate::error::Result;

/// Rows of `xs`: the product of all dims but the last.
fn rows(xs: &Tensor) -> usize {
    xs.dims().iter().rev().skip(1).product()
}

/// `f` of `xs`'s values as f32 in row-major order: read in place from a contiguous CPU
/// f32 tensor (the buffer read-locked meanwhile), converted into a copy otherwise. A
/// vision-tower matmul's input is 20–80 MB.
fn with_f32_values<T>(xs: &Tensor, f: impl FnOnce(&[f32]) -> Result<T>) -> Result<T> {
    {
        let (storage, layout) = xs.storage_and_layout();
        if let (Storage::Cpu(CpuStorage::F32(data)), Some((a, b))) =
            (&*storage, layout.contiguous_offsets())
        {
            if let Some(values) = data.get(a..b) {
                return f(values);
            }
        }
    }
    let x: Vec<f32> = xs.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
    f(&x)
}

/// `xs @ wᵀ` through `gemv` (one of [`float_gemv`]'s entries) when `xs` has at most
/// [`float_gemv::MAX_ROWS`] rows and the entry takes the matrix (`w_dims`: `(out, in)`), in
/// `xs`'s shape (last dim `out`) and dtype; `None` otherwise.
fn few_rows(
    xs: &Tensor,
    w_dims: &[usize],
    gemv: impl FnOnce(&[f32], usize) -> candle_core::Result<Option<Vec<f32>>>,
) -> Result<Option<Tensor>> {
    let m = rows(xs);
    let (Some(&out), true) = (
        w_dims.first(),
        m <= float_gemv::MAX_ROWS && xs.device().is_cpu(),
    ) else {
        return Ok(None);
    };
    let x: Vec<f32> = xs.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
    let Some(y) = gemv(&x, m)? else {
        return Ok(None);
    };
    let mut dims = xs.dims().to_vec();
    if let Some(last) = dims.last_mut() {
        *last = out;
    }
    Ok(Some(
        Tensor::from_vec(y, dims, xs.device())?.to_dtype(xs.dtype())?,
    ))
}

/// Rows from which a quantized matrix that `rows8` does not lay out at load (Q8_0, Q5_K,
/// …) takes another route than candle's kernels on a CPU: Q8_0 is laid out in eight rows
/// for the call and multiplied with int8 activations ([`Linear::q8_0_rows8_forward`]) at
/// every `rows8` tier; on a CPU whose quantized tier is AVX2, other types are widened to
/// f32. candle's AVX2 int8 kernels run those types at 16–28 GOP/s on many rows (4,888 ×
/// 1,024 × 4,096 Q8_0, the 2B vision tower's MLP, measured on a 2-core AMD EPYC Zen 3 VM),
/// where widening the matrix (5–20 ms) and candle's f32 gemm run at 60–150 GFLOP/s and the
/// eight-row Q8_0 kernel at 160–180 GOP/s; at 64 rows candle's kernels and the widening
/// are level, so from 128 rows the other routes win by 2× or more. At the VNNI tiers
/// candle's int8 kernels keep the other types (they are quicker there than at AVX2), and
/// Q8_0 runs on the eight-row kernel with `vpdpbusd`, level with candle's kernels in speed
/// (245–265 against 242–277 GOP/s on a Zen 4-class VM, `q8_0_vision_matmul_timing`) and
/// giving GGML's product, which candle's AVX-512 VNNI kernels do not.
pub(crate) const WIDEN_FROM_ROWS: usize = 128;

/// The largest matrix widened or laid out for a call (elements: 128 MiB of f32); a
/// larger one (an output head) keeps candle's kernels rather than a transient that size.
const WIDEN_MAX_ELEMENTS: usize = 32 << 20;

/// Whether `q` applied to `m` rows on the CPU is widened to f32, or for Q8_0 laid out
/// in eight rows, for the call (see [`WIDEN_FROM_ROWS`]).
fn widens(q: &QTensor, m: usize, on_cpu: bool) -> bool {
    let route = match rows8::kernel() {
        Some(rows8::Kernel::Avx2) => true,
        Some(_) => q.dtype() == GgmlDType::Q8_0,
        None => false,
    };
    route && on_cpu && m >= WIDEN_FROM_ROWS && q.shape().elem_count() <= WIDEN_MAX_ELEMENTS
}

/// A linear layer through [`QMatMul`]: `xs @ weightᵀ + bias`.
#[derive(Debug, Clone)]
pub struct Linear {
    weight: QMatMul,
    bias: Option<Tensor>,
    dtype: DType,
    /// The file pages of a matrix read in place, dropped after each new kind of matmul.
    pages: Option<MappedPages>,
    /// The matrix in the eight-row layout, when every matmul of it runs there.
    rows8: Option<Arc<Rows8>>,
}

impl Linear {
    /// Wrap an already loaded matrix. On a CPU where `rows8` has kernels (AVX2 or
    /// AVX-512 VNNI tier) a Q4_K or Q6_K matrix is laid out for them here, once. A Q8_0
    /// matrix is not: it is laid out only for calls on many rows (see
    /// [`WIDEN_FROM_ROWS`]), so a vision tower's weights stay resident only while an
    /// image is encoded, and its one-row products stay candle's.
    pub fn new(weight: QMatMul, bias: Option<Tensor>, dtype: DType) -> Self {
        let rows8 = match &weight {
            // A matrix the layout cannot hold (or a failed read of a CPU tensor's
            // bytes, which does not happen) keeps candle's kernels: slower, same answer.
            QMatMul::QTensor(q) if matches!(q.dtype(), GgmlDType::Q4K | GgmlDType::Q6K) => {
                rows8::kernel().and_then(|k| Rows8::from_qtensor(q, k).ok().flatten())
            }
            _ => None,
        };
        Linear {
            weight,
            bias,
            dtype,
            pages: None,
            rows8,
        }
    }

    /// A matrix only read by rows (an embedding table): never laid out for matmuls.
    pub fn rows_only(weight: QMatMul, dtype: DType) -> Self {
        Linear {
            weight,
            bias: None,
            dtype,
            pages: None,
            rows8: None,
        }
    }

    /// The same layer, whose matrix is read in place from `pages` of a mapped file: they
    /// are dropped once candle has repacked the matrix for a kind of matmul, or at once
    /// when the matrix has been laid out for `rows8` (nothing reads them again).
    pub fn with_pages(mut self, pages: Option<MappedPages>) -> Self {
        if let (Some(p), Some(_)) = (&pages, &self.rows8) {
            p.release();
        }
        self.pages = pages;
        self
    }

    fn after_matmul(&self, rows: usize) {
        if let Some(pages) = &self.pages {
            pages.after_matmul(rows);
        }
    }

    /// The matrix.
    pub fn weight(&self) -> &QMatMul {
        &self.weight
    }

    /// Apply to `xs` of shape `(.., in_dim)`; the result is in the activation dtype.
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let ys = match &self.weight {
            // A float matrix read in place from a mapped file (the vision tower's f16
            // weights): widened for this call as below, its pages dropped after it, so
            // the tower's weights are resident only while an image is encoded.
            QMatMul::QTensor(q) if is_float(q.dtype()) => {
                if let Some(ys) = few_rows(xs, q.shape().dims(), |x, m| {
                    float_gemv::qtensor_gemv(q, x, m)
                })? {
                    return self.add_bias(ys);
                }
                self.widened_forward(q, xs, xs.dtype())?
            }
            QMatMul::QTensor(_) if self.rows8.is_some() => {
                return Ok(Self::rows8_forward(&[self], xs)?.remove(0))
            }
            QMatMul::QTensor(q) if widens(q, rows(xs), xs.device().is_cpu()) => {
                if let Some(ys) = self.q8_0_rows8_forward(q, xs)? {
                    return Ok(ys);
                }
                self.widened_forward(q, xs, DType::F32)?
                    .to_dtype(self.dtype)?
            }
            QMatMul::QTensor(_) => self.quantized_forward(xs)?,
            // Half-precision weights kept as stored on the CPU: widened for this call.
            QMatMul::Tensor(w) if w.dtype() != xs.dtype() => {
                if let Some(ys) = few_rows(xs, w.dims(), |x, m| float_gemv::tensor_gemv(w, x, m))? {
                    return self.add_bias(ys);
                }
                QMatMul::Tensor(w.to_dtype(xs.dtype())?).forward(xs)?
            }
            _ => self.weight.forward(xs)?,
        };
        self.add_bias(ys)
    }

    /// `xs @ qᵀ` in `dtype` with `q` widened to it for this call; a mapped matrix's pages
    /// are dropped after it, so the matrix is resident only while it is in use.
    fn widened_forward(&self, q: &QTensor, xs: &Tensor, dtype: DType) -> Result<Tensor> {
        let w = q.dequantize(xs.device())?.to_dtype(dtype)?;
        let ys = QMatMul::Tensor(w).forward(&xs.to_dtype(dtype)?)?;
        if let Some(pages) = &self.pages {
            pages.release();
        }
        Ok(ys)
    }

    /// `xs @ qᵀ` (f32) with a Q8_0 `q` laid out in eight rows for this call, its
    /// activations quantized as GGML does for Q8_0: the same integer sums as candle's
    /// kernels, at six times their speed and 1.2× the widened f32 gemm's on the vision
    /// tower's MLP shape (`q8_0_vision_matmul_timing`). A mapped matrix's pages are
    /// dropped after it. The bias is added (in the activation dtype). `None` for another
    /// type or a matrix the layout cannot hold (fewer than 256 columns: it is widened).
    fn q8_0_rows8_forward(&self, q: &QTensor, xs: &Tensor) -> Result<Option<Tensor>> {
        if q.dtype() != GgmlDType::Q8_0 {
            return Ok(None);
        }
        let Some(kernel) = rows8::kernel() else {
            return Ok(None);
        };
        let Some(w) = Rows8::from_qtensor(q, kernel)? else {
            return Ok(None);
        };
        let (m, mut dims) = (rows(xs), xs.dims().to_vec());
        let bias = self.f32_bias()?;
        let y = with_f32_values(xs, |x| {
            Ok(rows8::matmul(&[&w], &[bias.as_deref()], x, m)?.remove(0))
        })?;
        if let Some(pages) = &self.pages {
            pages.release();
        }
        if let Some(last) = dims.last_mut() {
            *last = w.rows();
        }
        let y = Tensor::from_vec(y, dims, xs.device())?.to_dtype(self.dtype)?;
        Ok(Some(match bias {
            Some(_) => y,
            None => self.add_bias(y)?,
        }))
    }

    /// The bias's values when the output is f32, so the matmul can add it as it writes
    /// (the same addition `add_bias` makes); `None` without a bias or at another dtype.
    fn f32_bias(&self) -> Result<Option<Vec<f32>>> {
        match &self.bias {
            Some(b) if self.dtype == DType::F32 && b.dtype() == DType::F32 && b.rank() == 1 => {
                Ok(Some(b.to_vec1()?))
            }
            _ => Ok(None),
        }
    }

    fn add_bias(&self, ys: Tensor) -> Result<Tensor> {
        match &self.bias {
            Some(b) => Ok(ys.broadcast_add(b)?),
            None => Ok(ys),
        }
    }

    /// candle's quantized matmul: it takes f32 input and needs it contiguous. A mapped
    /// matrix's pages are dropped after the first matmul of each row class (candle has
    /// repacked it by then).
    fn quantized_forward(&self, xs: &Tensor) -> Result<Tensor> {
        let xs = xs.to_dtype(DType::F32)?.contiguous()?;
        let ys = self.weight.forward(&xs)?;
        self.after_matmul(rows(&xs));
        Ok(ys.to_dtype(self.dtype)?)
    }

    /// Layers laid out for `rows8` applied to `xs` in one parallel region, bias added.
    fn rows8_forward(layers: &[&Linear], xs: &Tensor) -> Result<Vec<Tensor>> {
        let mats: Vec<&Rows8> = layers.iter().filter_map(|l| l.rows8.as_deref()).collect();
        let m = rows(xs);
        let biases = layers
            .iter()
            .map(|l| l.f32_bias())
            .collect::<Result<Vec<_>>>()?;
        let bias_slices: Vec<Option<&[f32]>> = biases.iter().map(Option::as_deref).collect();
        let outs = with_f32_values(xs, |x| rows8::matmul(&mats, &bias_slices, x, m))?;
        layers
            .iter()
            .zip(mats.iter().zip(outs))
            .zip(&biases)
            .map(|((l, (w, y)), fused)| {
                let mut dims = xs.dims().to_vec();
                if let Some(last) = dims.last_mut() {
                    *last = w.rows();
                }
                let y = Tensor::from_vec(y, dims, xs.device())?.to_dtype(l.dtype)?;
                match fused {
                    Some(_) => Ok(y),
                    None => l.add_bias(y),
                }
            })
            .collect()
    }

    /// Apply several layers to the same `xs`. Layers all laid out for `rows8` share
    /// one quantization of `xs` and one parallel region at any row count; otherwise, for
    /// one row and quantized weights this is candle's fused gemv (the decode step's
    /// q/k/v and gate/up projections); otherwise each layer runs on its own.
    pub fn forward_shared(layers: &[&Linear], xs: &Tensor) -> Result<Vec<Tensor>> {
        let in_dim = xs.dims().last().copied();
        if layers
            .iter()
            .all(|l| l.rows8.as_ref().map(|w| w.columns()) == in_dim)
        {
            return Self::rows8_forward(layers, xs);
        }
        let qtensors: Option<Vec<&QTensor>> = layers
            .iter()
            .map(|l| match &l.weight {
                QMatMul::QTensor(q) if !is_float(q.dtype()) => Some(q.as_ref()),
                _ => None,
            })
            .collect();
        if let (1, Some(qs)) = (rows(xs), qtensors) {
            let lhs = xs.to_dtype(DType::F32)?.contiguous()?;
            let fused = QTensor::gemv_fused_shared_lhs(&qs, &lhs)?;
            if let Some(outs) = fused {
                layers.iter().for_each(|l| l.after_matmul(1));
                return layers
                    .iter()
                    .zip(outs)
                    .map(|(l, y)| {
                        let y = y.to_device(lhs.device())?.to_dtype(l.dtype)?;
                        Ok(match &l.bias {
                            Some(b) => y.broadcast_add(b)?,
                            None => y,
                        })
                    })
                    .collect();
            }
        }
        layers.iter().map(|l| l.forward(xs)).collect()
    }

    /// Rows `ids` of the matrix, dequantized, `(ids.len(), in_dim)` in `dtype`.
    pub fn rows(&self, ids: &Tensor, dtype: DType) -> Result<Tensor> {
        Ok(self.weight.embedding(ids)?.to_dtype(dtype)?)
    }
}

/// Whether a [`QTensor`] of `dtype` holds plain floats (GGUF's F32 / F16 / BF16 storage).
fn is_float(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Max |a - b| over max |b|.
    fn rel(a: &Tensor, b: &Tensor) -> anyhow::Result<f32> {
        let diff = (a - b)?.abs()?.max_all()?.to_scalar::<f32>()?;
        Ok(diff / b.abs()?.max_all()?.to_scalar::<f32>()?)
    }

    /// A quantized matrix on few and many rows, within the rounding of the activations to
    /// 8 bits of the product with its values. Q8_0 on a CPU with eight-row kernels, from
    /// [`WIDEN_FROM_ROWS`] rows, goes through the eight-row layout and gives GGML's
    /// product (the same integer sums, in another float order). Q5_K on many
    /// rows of an AVX2-tier CPU is widened and gives that product exactly; at the VNNI
    /// tiers it stays on candle's kernels.
    #[test]
    fn many_rows_of_a_quantized_matrix_give_the_product_with_its_values() -> anyhow::Result<()> {
        let (n, k) = (96, 256);
        let avx2_tier = rows8::kernel() == Some(rows8::Kernel::Avx2);
        for dtype in [GgmlDType::Q8_0, GgmlDType::Q5K] {
            let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu)?;
            let q = Arc::new(QTensor::quantize(&w, dtype)?);
            let exact_w = q.dequantize(&Device::Cpu)?;
            let layer = Linear::new(QMatMul::QTensor(q.clone()), None, DType::F32);
            for m in [1, WIDEN_FROM_ROWS - 1, WIDEN_FROM_ROWS, 3 * WIDEN_FROM_ROWS] {
                let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?;
                let ours = layer.forward(&x)?;
                let exact = x.matmul(&exact_w.t()?)?;
                let many = m >= WIDEN_FROM_ROWS;
                let routed = match dtype {
                    GgmlDType::Q8_0 => many && rows8::kernel().is_some(),
                    _ => many && avx2_tier,
                };
                anyhow::ensure!(widens(&q, m, true) == routed, "{dtype:?} m={m}: route");
                let r = rel(&ours, &exact)?;
                let widened = dtype == GgmlDType::Q5K && routed;
                let tolerance = if widened { 1e-5 } else { 2e-2 };
                anyhow::ensure!(
                    r <= tolerance,
                    "{dtype:?} m={m}: rel {r} (widened: {widened})"
                );
                if dtype == GgmlDType::Q8_0 && routed {
                    let r = rel(&ours, &rows8::ggml_q8_0_product(&q, &x)?)?;
                    anyhow::ensure!(r <= 1e-5, "{dtype:?} m={m}: rel {r} to GGML's product");
                }
            }
        }
        Ok(())
    }

    /// The 2B vision tower's MLP matmuls (4,888 patch rows × 1,024 → 4,096 and 4,096 →
    /// 1,024) of a Q8_0 matrix by each route this CPU has: the layer as it runs, the matrix
    /// widened to f32 with candle's gemm, and candle's own int8 kernels; wall time with the
    /// pool's threads, best of three, in GOP/s (a multiply-add counts two). Run optimized
    /// with `--ignored --nocapture`.
    #[test]
    #[ignore = "measurement"]
    fn q8_0_vision_matmul_timing() -> anyhow::Result<()> {
        for (m, n, k) in [(4888, 4096, 1024), (4888, 1024, 4096)] {
            let w = Tensor::randn(0f32, 0.05, (n, k), &Device::Cpu)?;
            let q = Arc::new(QTensor::quantize(&w, GgmlDType::Q8_0)?);
            let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?;
            let layer = Linear::new(QMatMul::QTensor(q.clone()), None, DType::F32);
            let candle = QMatMul::QTensor(q.clone());
            let best = |run: &dyn Fn() -> Result<Tensor>| -> anyhow::Result<f64> {
                let mut best = f64::INFINITY;
                for _ in 0..3 {
                    let t = std::time::Instant::now();
                    run()?;
                    best = best.min(t.elapsed().as_secs_f64());
                }
                Ok(2.0 * (m * n * k) as f64 / best / 1e9)
            };
            let as_run = best(&|| layer.forward(&x))?;
            let widened = best(&|| layer.widened_forward(&q, &x, DType::F32))?;
            let int8 = best(&|| Ok(candle.forward(&x)?))?;
            println!(
                "{m}×{k} @ {k}×{n} Q8_0: as the layer runs {as_run:.1} GOP/s; widened to f32 \
                 {widened:.1} GFLOP/s; candle's int8 kernels {int8:.1} GOP/s"
            );
        }
        Ok(())
    }
}
