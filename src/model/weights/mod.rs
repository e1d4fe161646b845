//! Weight loading: the files of a checkpoint, read for any architecture.
//!
//! The model code asks for weights by their Hugging Face checkpoint names
//! (`model.language_model.layers.0.self_attn.q_proj.weight`) and gets them ready for
//! candle's [`QMatMul`]. This module reads the formats; the architecture (for Qwen3-VL,
//! `qwen3_vl::WeightSource` and its name table in `qwen3_vl/names.rs`) says which stored
//! tensor a checkpoint name is and what configuration the files describe.
//!
//! - [`source`](ModelSource): where the files are, and [`LoadOptions`];
//! - `safetensors`: a Hugging Face directory (`model.safetensors`, or shards listed in
//!   `model.safetensors.index.json`), f32 / f16 / bf16, memory-mapped; optionally
//!   quantized while loading to Q8_0 / Q6_K / Q5_K / Q4_K ([`LoadOptions::quantize`]). A
//!   matrix whose rows are not a multiple of the quantization block (32 values for Q8_0,
//!   256 for the K-quants) keeps its float weights: the tiny test checkpoints (hidden size
//!   32) stay float under the K-quants;
//! - `gguf`: llama.cpp GGUF files, metadata through [`GgufMeta`], tensors on demand;
//!   on the CPU quantized matrices are read in place from a memory map of the file;
//! - `mapped`: that in-place storage, and [`MappedPages`], which drops a matrix's file
//!   pages once candle has repacked it (candle keeps its repacked copy for good, so the
//!   original need not stay resident beside it);
//! - [`Linear`]: a loaded matrix and bias, applied through [`QMatMul`].
//!
//! Float weights are kept in the activation dtype, except f16 / bf16 matrices on the
//! CPU, which stay in their stored half precision (half the memory) and are widened per
//! matmul. Quantized weights stay quantized, in the type the files store, and go through
//! the quantized matmul kernels of the device (on x86 CPUs with AVX2, Q4_K and Q6_K
//! through the eight-row layouts of `rows8/`).

mod activations;
mod float_gemv;
mod gguf;
mod linear;
mod mapped;
#[cfg(test)]
mod mapped_tests;
mod rows8;
mod safetensors;
mod source;

use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};

pub use activations::{default_activation_dtype, LayerStorage};
pub(crate) use gguf::GgufFile;
pub use gguf::{GgufMeta, GgufPart};
pub use linear::Linear;
pub use mapped::MappedPages;
pub(crate) use safetensors::{open_shards, SafetensorsFiles};
pub use source::{LoadOptions, ModelSource, QUANTIZE_AT_LOAD_TYPES};

/// The eight-row kernels Q4_K and Q6_K matmuls (and on AVX2, Q8_0 on many rows) run on
/// here instead of candle's (`AVX2`
/// or `AVX-512 VNNI`), if any.
pub fn eight_row_kernels() -> Option<&'static str> {
    rows8::kernel().map(rows8::Kernel::label)
}

/// The rows from which products with other quantized types leave candle's kernels here
/// (where the quantized tier is AVX2): Q8_0 laid out in eight rows for the call, the
/// rest widened to f32.
pub fn other_types_widened_from_rows() -> Option<usize> {
    (rows8::kernel() == Some(rows8::Kernel::Avx2)).then_some(linear::WIDEN_FROM_ROWS)
}

/// A tensor as stored in a checkpoint.
pub(crate) enum Stored {
    Float(Tensor),
    Quant(QTensor),
}

/// How stored tensors become the model's weights: the device, the activation dtype and
/// quantize-at-load, from [`LoadOptions`].
#[derive(Debug, Clone)]
pub(crate) struct TensorConverter {
    pub(crate) device: Device,
    pub(crate) dtype: DType,
    pub(crate) quantize: Option<GgmlDType>,
}

impl TensorConverter {
    /// Checks the options (a supported quantization type, a float activation dtype).
    /// `layers`: how the text decoder's matrices are held (quantize-at-load counts as
    /// quantized), which picks the default dtype on CUDA.
    pub(crate) fn new(opts: &LoadOptions, layers: LayerStorage) -> Result<Self> {
        if let Some(q) = opts.quantize {
            if !QUANTIZE_AT_LOAD_TYPES.contains(&q) {
                return Err(Error::config(format!(
                    "quantize-at-load to {q:?} is not supported (use Q8_0, Q6K, Q5K or Q4K)"
                )));
            }
        }
        let dtype = opts
            .dtype
            .unwrap_or_else(|| default_activation_dtype(&opts.device, layers));
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(Error::config(format!(
                "activation dtype {dtype:?} is not a float type"
            )));
        }
        Ok(TensorConverter {
            device: opts.device.clone(),
            dtype,
            quantize: opts.quantize,
        })
    }

    /// A stored tensor as floats on the CPU or the device (quantized storage dequantized);
    /// `path` names the file in errors.
    pub(crate) fn float(&self, name: &str, stored: Stored, path: &Path) -> Result<Tensor> {
        match stored {
            Stored::Float(t) => Ok(t),
            Stored::Quant(q) => q
                .dequantize(&self.device)
                .map_err(|e| Error::model_file_caused(path, format!("tensor {name}"), e)),
        }
    }

    /// A stored matrix as a [`QMatMul`]: quantized storage stays quantized (f32 / f16 /
    /// bf16 "quantized" GGUF storage becomes a float matrix), float storage goes through
    /// [`TensorConverter::matrix_from_float`].
    pub(crate) fn matrix(&self, name: &str, stored: Stored) -> Result<QMatMul> {
        match stored {
            Stored::Float(t) => self.matrix_from_float(name, t),
            Stored::Quant(q) => match q.dtype() {
                GgmlDType::F32 => self.matrix_from_float(name, q.dequantize(&self.device)?),
                // Exact: every f16 and bf16 value is an f32.
                GgmlDType::F16 => {
                    self.matrix_from_float(name, q.dequantize(&self.device)?.to_dtype(DType::F16)?)
                }
                GgmlDType::BF16 => {
                    self.matrix_from_float(name, q.dequantize(&self.device)?.to_dtype(DType::BF16)?)
                }
                _ => Ok(QMatMul::QTensor(Arc::new(q))),
            },
        }
    }

    /// A float matrix, quantized when [`LoadOptions::quantize`] asks and its rows fit the
    /// block size, else kept in the activation dtype (half precision stays half on the CPU).
    pub(crate) fn matrix_from_float(&self, name: &str, t: Tensor) -> Result<QMatMul> {
        if let Some(q) = self.quantize {
            let cols = t.dim(1)?;
            if cols.is_multiple_of(q.block_size()) {
                let f32 = t.to_device(&Device::Cpu)?.to_dtype(DType::F32)?;
                let qt = QTensor::quantize_onto(&f32, q, &self.device)
                    .map_err(|e| Error::tensor_caused(name, format!("quantizing to {q:?}"), e))?;
                return Ok(QMatMul::QTensor(Arc::new(qt)));
            }
        }
        // On the CPU, half-precision matrices stay half (widened per matmul by
        // `Linear::forward`): half the memory, the same numbers. Elsewhere the kernels
        // want the activation dtype.
        let keep = match t.dtype() {
            DType::F16 | DType::BF16 if self.device.is_cpu() => t.dtype(),
            _ => self.dtype,
        };
        Ok(QMatMul::Tensor(t.to_dtype(keep)?.to_device(&self.device)?))
    }
}
