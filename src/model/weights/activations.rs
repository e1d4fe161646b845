//! The activation type a model runs in when the caller does not choose one, from the device
//! and how the text layers are stored (ARCHITECTURE.md decision 29).

use candle_core::{DType, Device};

/// How a model's text layers hold their matrices: what the default activation type follows.
/// Ordered so that a model's storage is the greatest of its matrices' (one quantized matrix
/// makes it quantized, else one half matrix makes it half).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LayerStorage {
    /// f32.
    F32,
    /// f16 or bf16.
    Half,
    /// Quantized (stored so, or quantized at load).
    Quantized,
}

/// The activation dtype used when the caller does not choose one: f32, except on CUDA for
/// half-precision layers, which run in bf16 (tensor-core products, and weights at half the
/// memory of f32). f32 layers stay f32 everywhere, and so do quantized ones: candle's
/// quantized CUDA products take f32 input, so bf16 activations would cost two conversions
/// around each (2B Q4_K_M on an H200: decode step 10.9–11.9 ms in bf16, 6.2–8.6 ms in f32;
/// ARCHITECTURE.md decision 29). On the CPU candle's quantized kernels take f32 too, and on
/// Metal bf16 support depends on the chip.
pub fn default_activation_dtype(device: &Device, layers: LayerStorage) -> DType {
    if device.is_cuda() && layers == LayerStorage::Half {
        DType::BF16
    } else {
        DType::F32
    }
}
