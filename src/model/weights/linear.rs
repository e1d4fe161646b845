//! [`Linear`]: a matrix (quantized or float) and an optional bias, applied through candle's
//! [`QMatMul`].

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Module, Tensor};

use super::{stored_gemv, MappedPages};
use crate::error::Result;

/// Rows of `xs`: the product of all dims but the last.
fn rows(xs: &Tensor) -> usize {
    xs.dims().iter().rev().skip(1).product()
}

/// A linear layer through [`QMatMul`]: `xs @ weightᵀ + bias`.
#[derive(Debug, Clone)]
pub struct Linear {
    weight: QMatMul,
    bias: Option<Tensor>,
    dtype: DType,
    /// The file pages of a matrix read in place, dropped after each new kind of matmul.
    pages: Option<MappedPages>,
}

impl Linear {
    /// Wrap an already loaded matrix.
    pub fn new(weight: QMatMul, bias: Option<Tensor>, dtype: DType) -> Self {
        Linear {
            weight,
            bias,
            dtype,
            pages: None,
        }
    }

    /// The same layer, whose matrix is read in place from `pages` of a mapped file: they
    /// are dropped once candle has repacked the matrix for a kind of matmul.
    pub fn with_pages(mut self, pages: Option<MappedPages>) -> Self {
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
                let w = q.dequantize(xs.device())?.to_dtype(xs.dtype())?;
                let ys = QMatMul::Tensor(w).forward(xs)?;
                if let Some(pages) = &self.pages {
                    pages.release();
                }
                ys
            }
            // One row on a CPU where candle's repacked tiles read more bytes than the
            // stored blocks (its AVX2 tier): the stored-block dot products. The file pages
            // are this path's working set, so they are not dropped after it.
            QMatMul::QTensor(q) if stored_gemv::wanted(q.dtype()) && rows(xs) == 1 => {
                match stored_gemv::gemv(q, xs)? {
                    Some(ys) => ys.to_dtype(self.dtype)?,
                    None => self.quantized_forward(xs)?,
                }
            }
            QMatMul::QTensor(_) => self.quantized_forward(xs)?,
            // Half-precision weights kept as stored on the CPU: widened for this call.
            QMatMul::Tensor(w) if w.dtype() != xs.dtype() => {
                QMatMul::Tensor(w.to_dtype(xs.dtype())?).forward(xs)?
            }
            _ => self.weight.forward(xs)?,
        };
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
        let in_use = self.pages.as_ref().and_then(|p| p.in_use());
        let ys = self.weight.forward(&xs)?;
        drop(in_use);
        self.after_matmul(rows(&xs));
        Ok(ys.to_dtype(self.dtype)?)
    }

    /// Apply several layers to the same `xs`. For one row and quantized weights this is
    /// candle's fused gemv (one quantization of `xs`, one parallel region: the decode
    /// step's q/k/v and gate/up projections); otherwise each layer runs on its own.
    pub fn forward_shared(layers: &[&Linear], xs: &Tensor) -> Result<Vec<Tensor>> {
        let qtensors: Option<Vec<&QTensor>> = layers
            .iter()
            .map(|l| match &l.weight {
                QMatMul::QTensor(q) if !is_float(q.dtype()) => Some(q.as_ref()),
                _ => None,
            })
            .collect();
        if let (1, Some(qs)) = (rows(xs), qtensors) {
            let lhs = xs.to_dtype(DType::F32)?.contiguous()?;
            let in_use: Vec<_> = layers
                .iter()
                .filter_map(|l| l.pages.as_ref().and_then(|p| p.in_use()))
                .collect();
            let fused = QTensor::gemv_fused_shared_lhs(&qs, &lhs)?;
            drop(in_use);
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
