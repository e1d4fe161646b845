//! The vocabulary of a generated model's plan: a file, its tensors and how each tensor's
//! values are made. `plan.rs` plans the GGUF formats and `safetensors_plan.rs` the
//! safetensors one with it.

use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;

use crate::bench::gguf_writer::GgufTensorInfo;

/// Standard deviation of the random weights: small enough that activations stay finite
/// through every layer of the largest shape (norm weights are 1).
pub const WEIGHT_STD: f32 = 0.02;

/// How a tensor's values are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// Seeded normal values, mean 0, standard deviation [`WEIGHT_STD`].
    Normal,
    /// All ones (norm weights).
    Ones,
    /// All zeros (biases).
    Zeros,
}

/// One tensor to write.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTensor {
    /// Name, shape (row-major) and storage type.
    pub info: GgufTensorInfo,
    /// Its values.
    pub init: Init,
}

/// How a planned file is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A GGUF file.
    Gguf,
    /// A safetensors file.
    Safetensors,
    /// Bytes written as they are (config, tokenizer).
    Raw,
}

/// One file of a generated model.
#[derive(Debug, Clone)]
pub struct PlannedFile {
    /// File name inside the model directory.
    pub name: String,
    /// Its format.
    pub kind: FileKind,
    /// GGUF metadata, in file order (empty for other kinds).
    pub metadata: Vec<(String, Value)>,
    /// Its tensors, in file order.
    pub tensors: Vec<PlannedTensor>,
    /// The bytes of a [`FileKind::Raw`] file.
    pub raw: Vec<u8>,
}

/// A planned tensor: `name`, `shape` (row-major), storage type and values.
pub(crate) fn tensor(
    name: String,
    shape: Vec<usize>,
    dtype: GgmlDType,
    init: Init,
) -> PlannedTensor {
    PlannedTensor {
        info: GgufTensorInfo { name, shape, dtype },
        init,
    }
}
