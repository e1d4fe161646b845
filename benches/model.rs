//! Model stages: vision encode, prefill (fresh against system-prefix reuse), one decode step,
//! the grader head's extra pass. On the tiny fixture, or on the model `SIGHTLINE_BENCH_MODEL`
//! names (a safetensors directory or a GGUF file with its mmproj beside it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use sightline::image::{preprocess_bytes, PreprocessConfig};
use sightline::model::qwen3_vl::Qwen3Vl;
use sightline::model::weights::{LoadOptions, ModelSource};
use sightline::VisionLanguageModel;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures")
}

/// The model to bench and its name in the report.
pub fn bench_model_source() -> (ModelSource, String) {
    match std::env::var_os("SIGHTLINE_BENCH_MODEL") {
        Some(path) => {
            let path = PathBuf::from(path);
            let source = if path.is_dir() {
                ModelSource::Safetensors { dir: path.clone() }
            } else {
                let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
                let mmproj = std::fs::read_dir(&dir)
                    .ok()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .find(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("mmproj") && n.ends_with(".gguf"))
                    })
                    .expect("SIGHTLINE_BENCH_MODEL: an mmproj*.gguf beside the text GGUF");
                ModelSource::Gguf {
                    text: path.clone(),
                    mmproj,
                }
            };
            (source, path.display().to_string())
        }
        None => (
            ModelSource::Safetensors {
                dir: fixtures().join("tiny-a"),
            },
            "tiny-a".to_string(),
        ),
    }
}

fn load() -> (Qwen3Vl, String) {
    let (source, name) = bench_model_source();
    let model = Qwen3Vl::load(&LoadOptions::new(source)).expect("bench model loads");
    (model, name)
}

/// Vision encode of a 1920×1080 screenshot at the 1280-token budget.
pub fn vision(c: &mut Criterion) {
    let (mut model, name) = load();
    let png = crate::preprocess::synthetic_png();
    let cfg = PreprocessConfig::default().with_max_tokens(1280);
    let pixels = preprocess_bytes(&png, &cfg).expect("preprocess");
    let mut group = c.benchmark_group("vision_encode");
    // Criterion's minimum: at 2B size one encode takes minutes on a small CPU.
    group.sample_size(10);
    group.throughput(Throughput::Elements(
        pixels.grid_thw.iter().product::<usize>() as u64,
    ));
    group.bench_function(BenchmarkId::new("patches", &name), |b| {
        b.iter(|| model.encode_image(&pixels).expect("encode"))
    });
    group.finish();
}

/// Prefill of a 512-token prompt from scratch, against reusing a cached 448-token prefix and
/// prefilling the last 64; then one decode step.
pub fn prefill_and_decode(c: &mut Criterion) {
    let (mut model, name) = load();
    let prompt: Vec<u32> = (0..512u32).map(|i| 1000 + (i * 37) % 50_000).collect();
    let prefix = 448;

    let mut group = c.benchmark_group("prefill");
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(prompt.len() as u64));
    group.bench_function(BenchmarkId::new("fresh_512", &name), |b| {
        b.iter(|| {
            model.truncate(0).expect("truncate");
            model.feed(&prompt, &[]).expect("prefill")
        })
    });
    model.truncate(0).expect("truncate");
    model.feed(&prompt[..prefix], &[]).expect("prefix");
    group.throughput(Throughput::Elements((prompt.len() - prefix) as u64));
    group.bench_function(BenchmarkId::new("reuse_448_new_64", &name), |b| {
        b.iter(|| {
            model.truncate(prefix).expect("truncate");
            model.feed(&prompt[prefix..], &[]).expect("prefill")
        })
    });
    group.finish();

    let mut group = c.benchmark_group("decode_step");
    group.throughput(Throughput::Elements(1));
    model.truncate(0).expect("truncate");
    model.feed(&prompt, &[]).expect("prefill");
    group.bench_function(BenchmarkId::new("one_token_at_512", &name), |b| {
        b.iter(|| {
            model.truncate(prompt.len()).expect("truncate");
            // Reading the logits back is part of a CPU step (the sampler reads them on the
            // host) and synchronizes a device step before the clock stops.
            let logits = model.feed(&[1234], &[]).expect("decode");
            logits.to_vec1::<f32>().expect("logits")
        })
    });
    group.finish();
}
