//! Sightline: a fully offline planner and runner for computer-use agents.
//!
//! Sightline implements the planner side of the [`cel_contracts`] agent contract with a
//! quantized Qwen3-VL vision-language model running locally through candle. Decoding is
//! constrained by a grammar built from the screen, so every move is a valid
//! [`cel_contracts::NextMove`] that targets only what is on screen.
//!
//! # The crate map
//!
//! The main types, in the order a caller meets them:
//!
//! 1. [`hub::resolve_model`] turns `--model` text (a manifest id such as `qwen3-vl-2b`, a
//!    Hugging Face repo id or a local path) into files on disk, downloading them once.
//! 2. [`ModelSource`] names those files for the loader; [`planner::PlannerOptions`] adds the
//!    device, quantization and decoding settings.
//! 3. [`planner::LocalPlanner::load`] loads the model ([`Qwen3Vl`], a
//!    [`VisionLanguageModel`]), the tokenizer and the grammar's token environment, once.
//! 4. Each turn, [`planner::LocalPlanner`] (a [`cel_contracts::PlanProducer`]) answers
//!    `decide_next` with a [`cel_contracts::NextMove`] and `verify_done` with a
//!    [`cel_contracts::DoneVerdict`]; [`planner::LocalPlanner::plan`] does the same
//!    synchronously and returns the turn's timings.
//! 5. With the `desktop` feature, [`runner::Runner`] drives the screen with any
//!    `PlanProducer`: observe (screenshot and accessibility elements), decide, gate,
//!    execute, look again.
//!
//! ```no_run
//! use sightline::planner::{LocalPlanner, PlannerOptions, Turn};
//! use sightline::ModelSource;
//!
//! # fn main() -> sightline::Result<()> {
//! let source = ModelSource::Gguf {
//!     text: "Qwen3VL-2B-Instruct-Q4_K_M.gguf".into(),
//!     mmproj: "mmproj-Qwen3VL-2B-Instruct-Q8_0.gguf".into(),
//! };
//! let planner = LocalPlanner::load(&PlannerOptions::new(source))?; // once
//! let goal = "Open the settings window";
//! let view = sightline::view::empty_view(goal);
//! let screenshot = std::fs::read("screen.png").map_err(|e| sightline::Error::io("screen.png", e))?;
//! let (next_move, stats) = planner.plan(&Turn {
//!     goal,
//!     history: &[],
//!     shared_memory: &serde_json::Value::Null,
//!     view: &view,
//!     screenshot: Some(&screenshot),
//! })?;
//! println!("{next_move:?} in {:?}", stats.total);
//! # Ok(())
//! # }
//! ```
//!
//! # Modules
//!
//! | module | what it owns |
//! |---|---|
//! | [`planner`] | [`planner::LocalPlanner`]: prompt rendering, compact history, the clarify rule, the grader head |
//! | [`decode`] | the grammar built per turn from the view, llguidance masks, sampling, forced-token runs |
//! | [`model`] | the [`VisionLanguageModel`] trait, Qwen3-VL, the KV cache, weight loading |
//! | [`image`] | screenshot preprocessing: decode, smart resize, normalize, patchify |
//! | [`hub`] | model manifests (`models/*.toml`), downloads into the Hugging Face cache, local paths |
//! | `runner` | the desktop loop (feature `desktop`): xcap capture, elements from the accessibility tree (AT-SPI2), enigo input, safety gates, traces |
//! | [`kernels`] | the masked pick on the device (CUDA, Metal) and its CPU reference |
//! | [`cpu`] | the CPU the kernels run on: instruction-set detection, dispatch, shared f32 math |
//! | [`moves`] | the move vocabulary every layer shares: targets and their one parser, action kinds, keys, capabilities, limits, the grader's example record |
//! | [`chat`], [`tokenizer`], [`view`], [`error`] | Qwen's chat format; the tokenizer and its special tokens; building views; [`Error`] |
//! | [`settings`], [`exit_code`] | the model flags every command shares, parsed once; the commands' exit codes |
//! | [`generate`], [`bench`](mod@bench) | free generation and the benchmark behind `sightline generate` / `bench` |
//!
//! Dependencies point one way: planner → decode → model (through the trait only) → image;
//! everyone may use `moves`, `chat`, `cpu` and `error`, which use nothing above them.
//! `ARCHITECTURE.md` at the repository root has the layers, the data flow of one turn with
//! the file behind each step, and the design decisions the code relies on.

pub mod bench;
pub mod chat;
pub mod cpu;
mod debug_fields;
pub mod decode;
pub mod error;
pub mod eval;
pub mod exit_code;
pub mod generate;
pub mod hub;
pub mod image;
pub mod input_file;
pub mod kernels;
pub mod model;
pub mod moves;
mod named_text;
pub mod planner;
#[cfg(feature = "desktop")]
pub mod runner;
#[cfg(feature = "serve")]
pub mod serve;
pub mod settings;
pub mod text_norm;
pub mod tokenizer;
pub mod view;

pub use error::{Error, Result};
pub use model::qwen3_vl::{Qwen3Vl, Qwen3VlConfig};
pub use model::weights::{LoadOptions, ModelSource};
pub use model::{EncodedImage, PreprocessedImage, VisionLanguageModel};
