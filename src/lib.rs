//! Sightline: a fully offline planner and runner for computer-use agents.
//!
//! Sightline implements the planner side of the [`cel_contracts`] agent contract with a
//! quantized Qwen3-VL vision-language model running locally through candle. Decoding is
//! constrained by a grammar built from the screen, so every move is a valid
//! [`cel_contracts::NextMove`] that targets only what is on screen.

pub mod bench;
pub mod decode;
pub mod error;
pub mod generate;
pub mod hub;
pub mod hub_paths;
pub mod image;
pub mod input_file;
pub mod kernels;
pub mod model;
pub mod planner;
#[cfg(feature = "desktop")]
pub mod runner;
pub mod text_norm;
pub mod tokenizer;
pub mod view;

pub use error::{Error, Result};
pub use model::qwen3_vl::{Qwen3Vl, Qwen3VlConfig};
pub use model::weights::{LoadOptions, ModelSource};
pub use model::{EncodedImage, PreprocessedImage, VisionLanguageModel};
