//! `sightline bench`: random-weight models with a real model's dimensions, and the
//! measurements of one turn's stages on them, optionally side by side with llama.cpp.
//!
//! - [`shape`]: the dimension table (Qwen3-VL 2B / 4B / 8B, and a tiny one for tests).
//! - [`plan`]: every file, tensor, storage type and metadata key of a generated model,
//!   laid out as llama.cpp's converter and quantizer write them.
//!   The `f16` format's safetensors directory is planned in `safetensors_plan.rs`.
//! - [`vocab`]: the real Qwen tokenizer every generated model carries, as GGUF arrays.
//! - [`gguf_writer`]: a GGUF writer that streams tensor data.
//! - [`generate`]: writing a plan to disk chunk by chunk, and the on-disk cache.
//! - [`flops`]: the operations of vision and prefill, counted from the dimensions.
//! - [`stages`]: the measurements (load, memory, vision, prefill, decode, grammar, turn).
//! - [`llama_cpp`]: finding, running and parsing `llama-bench` and `llama-mtmd-cli`.
//! - [`report`]: the result, as a table or one JSON object.
//! - [`run`]: one whole run: the model, each stage on the chosen device, llama.cpp alternating.

pub mod flops;
pub mod generate;
pub mod gguf_writer;
pub mod llama_cpp;
pub mod plan;
mod planned;
pub mod report;
pub mod run;
mod safetensors_plan;
pub mod shape;
pub mod stages;
pub mod vocab;

pub use generate::{default_cache_root, ensure_model, BenchModel, GenerateOptions};
pub use plan::{plan_model, BenchFormat};
pub use shape::ModelShape;
