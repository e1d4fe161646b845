//! Sightline's integration tests, as one test binary (one link step instead of one per file),
//! one module per topic. Run one topic with `cargo test --test all <module>::`, e.g.
//! `cargo test --test all decode_rules::`.
//!
//! The command-line tests run the real binary (`CARGO_BIN_EXE_sightline`) and give every
//! child process its own environment (`HF_HOME`, `HF_HUB_OFFLINE`, `DISPLAY`), so no test in
//! this binary changes the process environment or installs a signal handler.
//!
//! One test file stays a binary of its own: `tests/runner_desktop.rs` drives the runner in
//! process against a private X server, and xcap and enigo read `DISPLAY` from the process
//! environment on every call, so those tests must set it for the whole process (serialized by
//! `runner_support::x11_lock`); sharing a process with the other tests would race with them.

// Shared helpers, declared once.
#[cfg(feature = "desktop")]
#[allow(dead_code)]
mod a11y_support;
mod decode_support;
mod gate_support;
mod hub_support;
mod model_support;
// Shared with the separate `runner_desktop` binary, which uses the parts this one does not
// (its in-process X probes and the scripted planner).
#[cfg(feature = "desktop")]
#[allow(dead_code)]
mod runner_support;

#[cfg(feature = "desktop")]
mod a11y_dialogs;
#[cfg(feature = "desktop")]
mod a11y_elements;
mod agent_cli;
mod bench_cli;
mod cli;
mod decode_budget;
mod decode_measure;
mod decode_property;
mod decode_rules;
mod decode_tiny_model;
mod dialects;
#[cfg(feature = "desktop")]
mod eval_cli;
#[cfg(feature = "desktop")]
mod eval_support;
mod fixtures;
#[cfg(feature = "desktop")]
mod gate_permission;
mod generate_cli;
mod hostile;
mod house;
mod hub_cli;
mod hub_download;
mod hub_resolve;
mod image_preprocess;
mod kernels_masked_pick;
mod keys;
mod model_dtype;
mod model_errors;
mod model_golden;
mod model_kv;
mod model_quant;
mod model_random_configs;
mod model_speed;
mod planner_local;
mod planner_prompt;
mod prompt_grammar;
mod runner_cli;
#[cfg(feature = "desktop")]
mod runner_fake_screen;
mod serve_clients;
mod serve_mcp;
mod serve_openai;
mod settings_cli;
