//! Criterion benches for every stage of a turn, one file per stage.
//!
//! Run: `cargo bench`. Model stages use the tiny fixture models unless
//! `SIGHTLINE_BENCH_MODEL` points at a model directory or GGUF file (see README).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]
#![allow(
    clippy::expect_used,
    reason = "criterion's bench functions and timed closures cannot return an error: a stage \
              that cannot be set up or run has nothing to measure, and the panic names it"
)]

use criterion::{criterion_group, criterion_main, Criterion};

mod grammar;
mod model;
mod preprocess;
mod turn;

/// Prints the machine the numbers come from, once.
fn machine(_c: &mut Criterion) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    eprintln!("machine: {model}, {cpus} threads available");
}

criterion_group!(
    benches,
    machine,
    preprocess::bench,
    grammar::bench,
    model::vision,
    model::prefill_and_decode,
    turn::bench
);
criterion_main!(benches);
