//! Shared helpers for the model tests: fixture paths, goldens, comparisons.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, Tensor};
use sightline::model::weights::{LoadOptions, ModelSource};
use sightline::{PreprocessedImage, Qwen3Vl};

/// The committed fixtures.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/fixtures")
}

/// The image cases of the goldens (and the text-only case "text").
pub const IMAGE_CASES: [&str; 3] = ["ui_exact", "ui_resize", "ui_wide"];

/// Which files to load.
#[derive(Debug, Clone, Copy)]
pub enum Variant {
    /// `config.json` + `model.safetensors`, f32 activations.
    Safetensors,
    /// The same, quantized at load.
    Quantized(GgmlDType),
    /// The committed GGUF pair.
    Gguf,
}

/// Load `model` (`tiny-a` / `tiny-b`) as `variant`, f32 activations on the CPU.
pub fn load(model: &str, variant: Variant) -> Result<Qwen3Vl> {
    load_on(model, variant, Device::Cpu, Some(DType::F32))
}

/// [`load`] on `device` with activation dtype `dtype` (`None`: the device's default).
pub fn load_on(
    model: &str,
    variant: Variant,
    device: Device,
    dtype: Option<DType>,
) -> Result<Qwen3Vl> {
    let dir = fixtures().join(model);
    let (source, quantize) = match variant {
        Variant::Safetensors => (ModelSource::Safetensors { dir }, None),
        Variant::Quantized(q) => (ModelSource::Safetensors { dir }, Some(q)),
        Variant::Gguf => {
            let suffix = if model == "tiny-a" { "f16" } else { "q8_0" };
            (
                ModelSource::Gguf {
                    text: dir.join(format!("{model}-{suffix}.gguf")),
                    mmproj: dir.join(format!("mmproj-{model}-{suffix}.gguf")),
                },
                None,
            )
        }
    };
    let opts = LoadOptions {
        quantize,
        device,
        dtype,
        ..LoadOptions::new(source)
    };
    Ok(Qwen3Vl::load(&opts)?)
}

/// One golden file.
pub struct Golden {
    pub t: HashMap<String, Tensor>,
}

impl Golden {
    pub fn load(model: &str, case: &str) -> Result<Self> {
        let path = fixtures()
            .join(model)
            .join("golden")
            .join(format!("{case}.safetensors"));
        let t = candle_core::safetensors::load(&path, &Device::Cpu)
            .with_context(|| format!("reading {}", path.display()))?;
        Ok(Golden { t })
    }

    pub fn get(&self, name: &str) -> Result<&Tensor> {
        self.t
            .get(name)
            .ok_or_else(|| anyhow!("golden has no {name}"))
    }

    pub fn ids(&self, name: &str) -> Result<Vec<u32>> {
        Ok(self
            .get(name)?
            .to_dtype(DType::I64)?
            .to_vec1::<i64>()?
            .into_iter()
            .map(|x| x as u32)
            .collect())
    }

    pub fn input_ids(&self) -> Result<Vec<u32>> {
        self.ids("input_ids")
    }
}

/// The reference preprocessing of screen `case`.
pub fn screen(case: &str) -> Result<PreprocessedImage> {
    let path = fixtures()
        .join("screens")
        .join(format!("{case}.safetensors"));
    let t = candle_core::safetensors::load(&path, &Device::Cpu)?;
    let pixel_values = t
        .get("pixel_values")
        .ok_or_else(|| anyhow!("no pixel_values"))?
        .clone();
    let grid: Vec<i64> = t
        .get("image_grid_thw")
        .ok_or_else(|| anyhow!("no image_grid_thw"))?
        .to_vec1()?;
    Ok(PreprocessedImage {
        pixel_values,
        grid_thw: [grid[0] as usize, grid[1] as usize, grid[2] as usize],
    })
}

/// max |a - b| over everything, as f32 (on `b`'s device: goldens live on the CPU).
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
    let a = a.to_device(b.device())?;
    Ok((a.to_dtype(DType::F32)? - b.to_dtype(DType::F32)?)?
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_scalar::<f32>()?)
}

/// max |t|.
pub fn max_abs(t: &Tensor) -> Result<f32> {
    Ok(t.to_dtype(DType::F32)?
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_scalar::<f32>()?)
}

/// Cosine similarity of two vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    (dot / (na * nb).max(1e-30)) as f32
}

/// Index of the largest value (first on ties).
pub fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = i;
        }
    }
    best
}

/// Load a GGUF pair from explicit paths, f32 activations on the CPU.
pub fn load_gguf_files(text: &std::path::Path, mmproj: &std::path::Path) -> Result<Qwen3Vl> {
    Ok(Qwen3Vl::load(&LoadOptions {
        dtype: Some(DType::F32),
        ..LoadOptions::new(ModelSource::Gguf {
            text: text.to_path_buf(),
            mmproj: mmproj.to_path_buf(),
        })
    })?)
}

/// Rewrite the GGUF at `src` into `dst` with every F16 tensor stored as `to` (metadata
/// kept). Makes bf16 GGUF files from the committed f16 ones.
pub fn convert_gguf(src: &std::path::Path, dst: &std::path::Path, to: GgmlDType) -> Result<()> {
    use candle_core::quantized::{gguf_file, QTensor};
    let mut file = std::fs::File::open(src)?;
    let content = gguf_file::Content::read(&mut file)?;
    let mut tensors = Vec::new();
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    for name in names {
        let q = content.tensor(&mut file, name, &Device::Cpu)?;
        let q = if q.dtype() == GgmlDType::F16 {
            QTensor::quantize(&q.dequantize(&Device::Cpu)?, to)?
        } else {
            q
        };
        tensors.push((name.as_str(), q));
    }
    let metadata: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, q)| (*n, q)).collect();
    let mut out = std::fs::File::create(dst)?;
    gguf_file::write(&mut out, &metadata, &tensor_refs)?;
    Ok(())
}
