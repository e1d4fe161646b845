//! Writing a planned model to disk and caching it: values are made and quantized one row
//! chunk at a time on a few threads and streamed to the file, so memory stays at a few
//! chunks however large the model is. A completion marker written last tells a finished
//! model from an interrupted one.

use std::io::Write;
use std::path::{Path, PathBuf};

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use half::f16;
use rand::{Rng, SeedableRng};

use crate::bench::gguf_writer::GgufStreamWriter;
use crate::bench::plan::{plan_model, BenchFormat, ModelPlan};
use crate::bench::planned::{FileKind, Init, PlannedFile, PlannedTensor, WEIGHT_STD};
use crate::bench::shape::ModelShape;
use crate::error::{Error, Result};
use crate::model::weights::ModelSource;

/// The file whose presence means the model directory is complete. Written last.
pub const COMPLETE_MARKER: &str = "sightline-bench-complete.json";
/// Bumped whenever the generator's output changes, so older caches are remade.
pub const GENERATOR_VERSION: u32 = 1;
/// Values generated per chunk (4 MiB of f32).
const CHUNK_VALUES: usize = 1 << 20;
/// Seed of every generated model; each tensor's stream is derived from it and its name.
pub const BASE_SEED: u64 = 0x5167_6874_6c69_6e65;

/// A generated (or reused) model on disk.
#[derive(Debug, Clone)]
pub struct BenchModel {
    /// The directory holding its files.
    pub dir: PathBuf,
    /// How to load it.
    pub source: ModelSource,
    /// Total size of its files in bytes.
    pub file_bytes: u64,
    /// Whether this call wrote it (false: reused from the cache).
    pub generated: bool,
    /// Seconds spent writing it (0 when reused).
    pub generate_secs: f64,
}

/// How to make a model.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// Threads generating and quantizing chunks.
    pub threads: usize,
    /// Show indicatif progress bars on stderr.
    pub progress: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            progress: false,
        }
    }
}

/// Where generated models live: `$SIGHTLINE_CACHE/bench`, else
/// `~/.cache/sightline/bench` (`$XDG_CACHE_HOME` honoured), else `./.sightline-cache/bench`.
pub fn default_cache_root() -> PathBuf {
    crate::planner::prefix_store::cache_root().join("bench")
}

/// The marker's content: what was generated, and the size of every file.
fn marker_json(plan: &ModelPlan, sizes: &[(String, u64)]) -> serde_json::Value {
    serde_json::json!({
        "generator_version": GENERATOR_VERSION,
        "shape": plan.shape.name(),
        "format": plan.format.name(),
        "seed": BASE_SEED,
        "files": sizes.iter().map(|(n, s)| serde_json::json!({"name": n, "bytes": s})).collect::<Vec<_>>(),
    })
}

/// The files of a complete model in `dir`, if its marker is there, is for this shape,
/// format and generator version, and every file it lists has the size it records.
fn complete_files(dir: &Path, plan: &ModelPlan) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join(COMPLETE_MARKER)).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    if json["generator_version"].as_u64() != Some(GENERATOR_VERSION as u64)
        || json["shape"].as_str() != Some(plan.shape.name())
        || json["format"].as_str() != Some(plan.format.name())
    {
        return None;
    }
    let mut total = 0;
    for f in json["files"].as_array()? {
        let name = f["name"].as_str()?;
        let bytes = f["bytes"].as_u64()?;
        if std::fs::metadata(dir.join(name)).ok()?.len() != bytes {
            return None;
        }
        total += bytes;
    }
    Some(total)
}

fn source_for(dir: &Path, plan: &ModelPlan) -> Result<ModelSource> {
    if plan.format.is_gguf() {
        let (text, mmproj) = plan.gguf_names().ok_or_else(|| {
            Error::invalid_input(format!("{} plan has no GGUF pair", plan.format))
        })?;
        Ok(ModelSource::Gguf {
            text: dir.join(text),
            mmproj: dir.join(mmproj),
        })
    } else {
        Ok(ModelSource::Safetensors {
            dir: dir.to_path_buf(),
        })
    }
}

/// The `shape` model in `format` under `cache_root/<shape>-<format>/`: reused when its
/// marker says it is complete, otherwise (missing, interrupted, older generator) the
/// directory is emptied and the model written again.
pub fn ensure_model(
    shape: ModelShape,
    format: BenchFormat,
    cache_root: &Path,
    options: &GenerateOptions,
) -> Result<BenchModel> {
    let dir = cache_root.join(format!("{}-{}", shape.name(), format.name()));
    let plan = plan_model(shape, format)?;
    if let Some(file_bytes) = complete_files(&dir, &plan) {
        return Ok(BenchModel {
            source: source_for(&dir, &plan)?,
            dir,
            file_bytes,
            generated: false,
            generate_secs: 0.0,
        });
    }
    let started = std::time::Instant::now();
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let file_bytes = write_model(&plan, &dir, options)?;
    Ok(BenchModel {
        source: source_for(&dir, &plan)?,
        dir,
        file_bytes,
        generated: true,
        generate_secs: started.elapsed().as_secs_f64(),
    })
}

/// Write every file of `plan` into `dir`, then the completion marker. Returns the
/// total size of the files.
pub fn write_model(plan: &ModelPlan, dir: &Path, options: &GenerateOptions) -> Result<u64> {
    let bar = if options.progress {
        let bar = indicatif::ProgressBar::new(plan.tensor_bytes()?);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {wide_msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(format!("making {}-{}", plan.shape, plan.format));
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut sizes = Vec::new();
    for file in &plan.files {
        let path = dir.join(&file.name);
        match file.kind {
            FileKind::Raw => {
                std::fs::write(&path, &file.raw).map_err(|e| Error::io(&path, e))?;
            }
            FileKind::Gguf => write_gguf(file, &path, options.threads, &bar)?,
            FileKind::Safetensors => write_safetensors(file, &path, options.threads, &bar)?,
        }
        let len = std::fs::metadata(&path)
            .map_err(|e| Error::io(&path, e))?
            .len();
        sizes.push((file.name.clone(), len));
    }
    bar.finish_and_clear();
    let marker = dir.join(COMPLETE_MARKER);
    let text = serde_json::to_string_pretty(&marker_json(plan, &sizes))
        .map_err(|e| Error::internal_caused("marker", e))?;
    std::fs::write(&marker, text).map_err(|e| Error::io(&marker, e))?;
    Ok(sizes.iter().map(|(_, s)| s).sum())
}

fn write_gguf(
    file: &PlannedFile,
    path: &Path,
    threads: usize,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let infos: Vec<_> = file.tensors.iter().map(|t| t.info.clone()).collect();
    let mut w = GgufStreamWriter::create(path, &file.metadata, &infos)?;
    for t in &file.tensors {
        bar.set_message(t.info.name.clone());
        for_each_chunk(t, threads, |bytes| {
            bar.inc(bytes.len() as u64);
            w.write_data(bytes)
        })?;
    }
    w.finish()
}

fn write_safetensors(
    file: &PlannedFile,
    path: &Path,
    threads: usize,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
    let mut offset = 0usize;
    for t in &file.tensors {
        let bytes = t.info.bytes()?;
        let dtype = match t.info.dtype {
            GgmlDType::F16 => "F16",
            GgmlDType::F32 => "F32",
            other => {
                return Err(Error::tensor(
                    t.info.name.clone(),
                    format!("{other:?} cannot be stored in safetensors"),
                ))
            }
        };
        header.insert(
            t.info.name.clone(),
            serde_json::json!({"dtype": dtype, "shape": t.info.shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut json =
        serde_json::to_vec(&header).map_err(|e| Error::internal_caused("safetensors header", e))?;
    // The data starts 8-byte aligned, as the safetensors writer pads it.
    while (json.len() + 8) % 8 != 0 {
        json.push(b' ');
    }
    let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
    let io = |e| Error::io(path, e);
    out.write_all(&(json.len() as u64).to_le_bytes())
        .map_err(io)?;
    out.write_all(&json).map_err(io)?;
    for t in &file.tensors {
        bar.set_message(t.info.name.clone());
        for_each_chunk(t, threads, |bytes| {
            bar.inc(bytes.len() as u64);
            out.write_all(bytes).map_err(io)
        })?;
    }
    out.flush().map_err(io)?;
    out.get_ref().sync_all().map_err(io)
}

/// Rows and columns a tensor is generated in: quantization blocks run along the last
/// dimension, so a chunk is a run of whole rows.
fn rows_cols(shape: &[usize]) -> (usize, usize) {
    match shape {
        [] => (1, 1),
        [n] => (1, *n),
        [rows, rest @ ..] => (*rows, rest.iter().product()),
    }
}

fn seed_of(name: &str) -> u64 {
    // FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    }) ^ BASE_SEED
}

/// The storage bytes of rows `rows` of tensor `t`.
fn chunk_bytes(
    t: &PlannedTensor,
    chunk: usize,
    rows: std::ops::Range<usize>,
    cols: usize,
) -> Result<Vec<u8>> {
    let n = rows.len() * cols;
    let values: Vec<f32> = match t.init {
        Init::Ones => vec![1.0; n],
        Init::Zeros => vec![0.0; n],
        Init::Normal => {
            let mut rng = rand::rngs::StdRng::seed_from_u64(
                seed_of(&t.info.name)
                    .wrapping_add((chunk as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            );
            let mut v = Vec::with_capacity(n + 1);
            // Box-Muller: two normal values per pair of uniforms.
            while v.len() < n {
                let u1: f32 = rng.random::<f32>().max(f32::MIN_POSITIVE);
                let u2: f32 = rng.random::<f32>();
                let r = (-2.0 * u1.ln()).sqrt() * WEIGHT_STD;
                let (s, c) = (std::f32::consts::TAU * u2).sin_cos();
                v.push(r * c);
                v.push(r * s);
            }
            v.truncate(n);
            v
        }
    };
    match t.info.dtype {
        GgmlDType::F32 => Ok(values.iter().flat_map(|x| x.to_le_bytes()).collect()),
        GgmlDType::F16 => Ok(values
            .iter()
            .flat_map(|&x| f16::from_f32(x).to_le_bytes())
            .collect()),
        dtype => {
            let xs = Tensor::from_vec(values, (rows.len(), cols), &Device::Cpu)?;
            let q = QTensor::quantize(&xs, dtype).map_err(|e| {
                Error::tensor_caused(t.info.name.clone(), format!("quantizing to {dtype:?}"), e)
            })?;
            Ok(q.data()?.into_owned())
        }
    }
}

/// Produce tensor `t`'s bytes in row chunks, `threads` chunks at a time, and hand them
/// to `sink` in order.
fn for_each_chunk(
    t: &PlannedTensor,
    threads: usize,
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let (rows, cols) = rows_cols(&t.info.shape);
    let rows_per_chunk = (CHUNK_VALUES / cols.max(1)).clamp(1, rows.max(1));
    let chunks: Vec<std::ops::Range<usize>> = (0..rows)
        .step_by(rows_per_chunk)
        .map(|r| r..(r + rows_per_chunk).min(rows))
        .collect();
    for (wave_index, wave) in chunks.chunks(threads.max(1)).enumerate() {
        let first = wave_index * threads.max(1);
        let results: Vec<Result<Vec<u8>>> = std::thread::scope(|s| {
            let handles: Vec<_> = wave
                .iter()
                .enumerate()
                .map(|(i, r)| s.spawn(move || chunk_bytes(t, first + i, r.clone(), cols)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::internal(format!(
                            "generating {} panicked",
                            t.info.name
                        )))
                    })
                })
                .collect()
        });
        for bytes in results {
            sink(&bytes?)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::qwen3_vl::config::{GgufMeta, GgufTensorFacts};
    use crate::model::qwen3_vl::{Qwen3Vl, Qwen3VlConfig};
    use crate::model::weights::LoadOptions;
    use crate::model::VisionLanguageModel;
    use candle_core::quantized::gguf_file;

    /// `shape`'s configuration as a GGUF reader sees it: GGUF stores the RMS epsilon as f32.
    fn as_gguf_stores_it(shape: ModelShape) -> Qwen3VlConfig {
        let mut cfg = shape.config();
        cfg.text.rms_norm_eps = cfg.text.rms_norm_eps as f32 as f64;
        cfg
    }

    fn options() -> GenerateOptions {
        GenerateOptions {
            threads: 2,
            progress: false,
        }
    }

    /// The configuration a reader resolves from a planned GGUF pair's headers alone.
    fn config_from_headers(plan: &ModelPlan) -> anyhow::Result<Qwen3VlConfig> {
        let read = |f: &PlannedFile| -> anyhow::Result<gguf_file::Content> {
            let infos: Vec<_> = f.tensors.iter().map(|t| t.info.clone()).collect();
            let (bytes, _) = crate::bench::gguf_writer::header_bytes(&f.metadata, &infos)?;
            Ok(gguf_file::Content::read(&mut std::io::Cursor::new(bytes))?)
        };
        let text = read(&plan.files[0])?;
        let mmproj = read(&plan.files[1])?;
        let embd = text.tensor_infos["token_embd.weight"].shape.dims().to_vec();
        let patch = mmproj.tensor_infos["v.patch_embd.weight"]
            .shape
            .dims()
            .to_vec();
        let facts = GgufTensorFacts {
            vocab_size: embd[0],
            has_output: text.tensor_infos.contains_key("output.weight"),
            temporal_patch_size: 1 + usize::from(
                mmproj.tensor_infos.contains_key("v.patch_embd.weight.1"),
            ),
            in_channels: patch[1],
        };
        let p = Path::new("planned");
        Ok(Qwen3VlConfig::from_gguf(
            &GgufMeta {
                path: p,
                metadata: &text.metadata,
            },
            &GgufMeta {
                path: p,
                metadata: &mmproj.metadata,
            },
            &facts,
        )?)
    }

    #[test]
    fn real_shape_headers_resolve_to_the_shape_table() -> anyhow::Result<()> {
        for shape in [ModelShape::B2, ModelShape::B4, ModelShape::B8] {
            for format in [BenchFormat::Q4KM, BenchFormat::Q8_0] {
                let plan = plan_model(shape, format)?;
                assert_eq!(
                    config_from_headers(&plan)?,
                    as_gguf_stores_it(shape),
                    "{shape} {format}"
                );
            }
            let plan = plan_model(shape, BenchFormat::F16)?;
            let config = String::from_utf8(plan.files[0].raw.clone())?;
            assert_eq!(
                Qwen3VlConfig::from_json_str(&config)?,
                shape.config(),
                "{shape} f16"
            );
        }
        // 2B Q4_K_M: about 1.1 GB of text weights, as llama.cpp's file is.
        let plan = plan_model(ModelShape::B2, BenchFormat::Q4KM)?;
        let text: usize = plan.files[0]
            .tensors
            .iter()
            .map(|t| t.info.bytes().unwrap_or(0))
            .sum();
        assert!((1_000_000_000..1_300_000_000).contains(&text), "{text}");
        Ok(())
    }

    #[test]
    fn generated_tiny_models_load_and_give_finite_logits() -> anyhow::Result<()> {
        let root = tempfile::tempdir()?;
        for format in BenchFormat::ALL {
            let made = ensure_model(ModelShape::Tiny, format, root.path(), &options())?;
            assert!(made.generated);
            let mut opts = LoadOptions::new(made.source.clone());
            if !format.is_gguf() {
                opts.quantize = Some(GgmlDType::Q8_0);
            }
            let mut model = Qwen3Vl::load(&opts)?;
            let expected = if format.is_gguf() {
                as_gguf_stores_it(ModelShape::Tiny)
            } else {
                ModelShape::Tiny.config()
            };
            assert_eq!(model.config(), &expected, "{format}");
            let logits: Vec<f32> = model.feed(&[151644, 872, 198, 9707], &[])?.to_vec1()?;
            assert_eq!(logits.len(), 151_936);
            assert!(logits.iter().all(|x| x.is_finite()), "{format}");
            // Random weights: the logits are not all equal.
            assert!(logits.iter().any(|&x| x != logits[0]), "{format}");
        }
        Ok(())
    }

    #[test]
    fn cache_reuses_a_complete_model_and_remakes_an_interrupted_one() -> anyhow::Result<()> {
        let root = tempfile::tempdir()?;
        let first = ensure_model(ModelShape::Tiny, BenchFormat::Q8_0, root.path(), &options())?;
        assert!(first.generated);
        let second = ensure_model(ModelShape::Tiny, BenchFormat::Q8_0, root.path(), &options())?;
        assert!(!second.generated, "a complete model is reused");
        assert_eq!(second.file_bytes, first.file_bytes);

        // Interrupted before the marker: regenerated.
        std::fs::remove_file(first.dir.join(COMPLETE_MARKER))?;
        assert!(
            ensure_model(ModelShape::Tiny, BenchFormat::Q8_0, root.path(), &options())?.generated
        );

        // A file cut short after the marker was written: regenerated.
        let ModelSource::Gguf { text, .. } = &first.source else {
            anyhow::bail!("q8_0 is a GGUF pair");
        };
        let full = std::fs::metadata(text)?.len();
        let f = std::fs::OpenOptions::new().write(true).open(text)?;
        f.set_len(1000)?;
        let again = ensure_model(ModelShape::Tiny, BenchFormat::Q8_0, root.path(), &options())?;
        assert!(again.generated);
        assert_eq!(std::fs::metadata(text)?.len(), full);
        Ok(())
    }

    #[test]
    fn generation_is_deterministic_whatever_the_thread_count() -> anyhow::Result<()> {
        let plan = plan_model(ModelShape::Tiny, BenchFormat::Q4KM)?;
        let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
        write_model(
            &plan,
            a.path(),
            &GenerateOptions {
                threads: 1,
                progress: false,
            },
        )?;
        write_model(
            &plan,
            b.path(),
            &GenerateOptions {
                threads: 3,
                progress: false,
            },
        )?;
        for f in &plan.files {
            assert_eq!(
                std::fs::read(a.path().join(&f.name))?,
                std::fs::read(b.path().join(&f.name))?,
                "{}",
                f.name
            );
        }
        Ok(())
    }
}
