//! Randomized differential test against transformers: random tiny Qwen3-VL configurations
//! (odd head counts, head_dim 24/40, 1-4 vision heads, DeepStack on the last vision layer or
//! none, learned position grids 6x6 to 48x48, both config.json layouts, weights x4) with an
//! image each (exact multiple of 32, resized, very wide, very tall), made by
//! `models/scripts/make_random_configs.py`.
//!
//! The committed subset is `models/fixtures/random/`; set `SIGHTLINE_RANDOM_CONFIGS` to a
//! directory the script wrote to run a full generated set. Run with
//! `cargo test --test all model_random_configs:: -- --nocapture` for the per-configuration
//! errors.

use std::path::{Path, PathBuf};

use crate::model_support::{fixtures, max_abs, max_abs_diff};
use anyhow::{anyhow, ensure, Context, Result};
use candle_core::{DType, Device, Tensor};
use sightline::image::{preprocess_bytes, PreprocessConfig};
use sightline::model::qwen3_vl::mrope_positions;
use sightline::model::weights::{LoadOptions, ModelSource};
use sightline::{PreprocessedImage, Qwen3Vl, VisionLanguageModel};

/// Max |Δ| of a logits row relative to the reference row's max |logit|, every position.
const LOGITS_RTOL: f32 = 1e-4;
/// Max |Δ| of image embeddings and DeepStack features relative to their max magnitude.
const VISION_RTOL: f32 = 1e-4;

/// Our preprocessing of `image.png` against the reference's `pixel_values`: bit-exact
/// where there is no resize, Pillow's bicubic rounding otherwise (the image tests pin it).
const PIXELS_ATOL: f32 = 2e-2;

/// What one configuration measured.
#[derive(Debug)]
struct Errors {
    name: String,
    /// From the reference's `pixel_values`.
    vision_rel: f32,
    logits_rel: f32,
    last_rel: f32,
    positions_equal: bool,
    /// End to end from `image.png` through Sightline's own preprocessing (as `generate`
    /// runs it): pixel difference, vision and logits errors.
    e2e_pixels: f32,
    e2e_vision_rel: f32,
    e2e_logits_rel: f32,
    /// Transformers' torchvision image processor against its PIL one (the reference
    /// here): pixel difference and last-position logits, when the golden has them.
    /// Reported only: it measures transformers' two backends, not Sightline.
    torchvision: Option<(f32, f32)>,
}

/// One run: logits of every position, the vision outputs' relative error, the token grids.
struct Run {
    logits: Vec<Vec<f32>>,
    vision_rel: f32,
    grids: Vec<[usize; 3]>,
}

/// Logits of every position and the relative error of the vision outputs, for `image`.
fn logits_and_vision(
    model: &mut Qwen3Vl,
    golden: &std::collections::HashMap<String, Tensor>,
    input_ids: &[u32],
    image: Option<&PreprocessedImage>,
) -> Result<Run> {
    model.truncate(0)?;
    let mut vision_rel = 0f32;
    let mut images = Vec::new();
    if let Some(image) = image {
        let encoded = model.encode_image(image)?;
        let reference = tensor(golden, "image_embeds")?;
        vision_rel = max_abs_diff(&encoded.embeddings, &reference)? / max_abs(&reference)?;
        for (i, ds) in encoded.deepstack.iter().enumerate() {
            let reference = tensor(golden, &format!("deepstack_{i}"))?;
            vision_rel = vision_rel.max(max_abs_diff(ds, &reference)? / max_abs(&reference)?);
        }
        ensure!(
            golden
                .get(&format!("deepstack_{}", encoded.deepstack.len()))
                .is_none(),
            "the reference has more DeepStack features than we computed"
        );
        images.push(encoded);
    }
    let grids = images.iter().map(|i| i.token_grid).collect();
    let logits = model
        .forward_all_logits(input_ids, &images)?
        .to_vec2::<f32>()?;
    Ok(Run {
        logits,
        vision_rel,
        grids,
    })
}

/// Max over positions, and at the last position, of max |Δ| / max |reference row|.
fn logits_errors(ours: &[Vec<f32>], theirs: &[Vec<f32>]) -> Result<(f32, f32)> {
    ensure!(ours.len() == theirs.len(), "position count");
    let mut all = 0f32;
    let mut last = 0f32;
    for (a, b) in ours.iter().zip(theirs) {
        let scale = b.iter().fold(0f32, |m, x| m.max(x.abs()));
        let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        last = diff / scale;
        all = all.max(last);
    }
    Ok((all, last))
}

fn tensor(map: &std::collections::HashMap<String, Tensor>, name: &str) -> Result<Tensor> {
    map.get(name)
        .cloned()
        .ok_or_else(|| anyhow!("golden has no {name}"))
}

fn ids(t: &Tensor) -> Result<Vec<u32>> {
    Ok(t.to_dtype(DType::I64)?
        .to_vec1::<i64>()?
        .into_iter()
        .map(|x| x as u32)
        .collect())
}

fn run_config(dir: &Path) -> Result<Errors> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let golden = candle_core::safetensors::load(dir.join("golden.safetensors"), &Device::Cpu)
        .with_context(|| format!("{}: golden.safetensors", dir.display()))?;
    let mut model = Qwen3Vl::load(&LoadOptions {
        dtype: Some(DType::F32),
        ..LoadOptions::new(ModelSource::Safetensors {
            dir: dir.to_path_buf(),
        })
    })
    .with_context(|| format!("loading {}", dir.display()))?;
    let input_ids = ids(&tensor(&golden, "input_ids")?)?;
    let theirs = tensor(&golden, "logits")?.to_vec2::<f32>()?;

    let reference_image = match golden.get("pixel_values") {
        Some(pixels) => {
            let grid = ids(&tensor(&golden, "image_grid_thw")?)?;
            Some(PreprocessedImage {
                pixel_values: pixels.clone(),
                grid_thw: [grid[0] as usize, grid[1] as usize, grid[2] as usize],
            })
        }
        None => None,
    };
    let Run {
        logits: ours,
        vision_rel,
        grids,
    } = logits_and_vision(&mut model, &golden, &input_ids, reference_image.as_ref())
        .with_context(|| name.clone())?;
    let (logits_rel, last_rel) = logits_errors(&ours, &theirs)?;

    let layout = mrope_positions(&input_ids, &grids, model.config().image_token_id, 0)?;
    let reference = tensor(&golden, "position_ids")?.to_vec2::<i64>()?;
    let positions_equal = layout.positions.len() == reference[0].len()
        && (0..3).all(|axis| {
            layout
                .positions
                .iter()
                .zip(&reference[axis])
                .all(|(p, &r)| p[axis] as i64 == r)
        });

    // End to end: Sightline's own preprocessing of the PNG at the same budget.
    let (mut e2e_pixels, mut e2e_vision_rel, mut e2e_logits_rel) = (0f32, 0f32, 0f32);
    if let Some(reference_image) = &reference_image {
        let cfg = PreprocessConfig::for_model_dir(dir)?;
        let bytes = std::fs::read(dir.join("image.png"))?;
        let image = preprocess_bytes(&bytes, &cfg)?;
        ensure!(
            image.grid_thw == reference_image.grid_thw,
            "{name}: grid {:?}, the reference's {:?}",
            image.grid_thw,
            reference_image.grid_thw
        );
        e2e_pixels = max_abs_diff(&image.pixel_values, &reference_image.pixel_values)?;
        let run = logits_and_vision(&mut model, &golden, &input_ids, Some(&image))?;
        e2e_vision_rel = run.vision_rel;
        e2e_logits_rel = logits_errors(&run.logits, &theirs)?.0;
    }
    let torchvision = match (
        golden.get("pixel_values_torchvision"),
        golden.get("logits_torchvision"),
        &reference_image,
    ) {
        (Some(pixels), Some(logits), Some(reference_image)) => {
            let pixels = max_abs_diff(pixels, &reference_image.pixel_values)?;
            let (_, last) = logits_errors(&logits.to_vec2::<f32>()?, &theirs)?;
            Some((pixels, last))
        }
        _ => None,
    };
    Ok(Errors {
        name,
        torchvision,
        vision_rel,
        logits_rel,
        last_rel,
        positions_equal,
        e2e_pixels,
        e2e_vision_rel,
        e2e_logits_rel,
    })
}

fn config_dirs(root: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .with_context(|| format!("reading {}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("golden.safetensors").is_file())
        .collect();
    dirs.sort();
    Ok(dirs)
}

#[test]
fn random_configs_match_transformers_with_images() -> Result<()> {
    let root = std::env::var_os("SIGHTLINE_RANDOM_CONFIGS")
        .map(PathBuf::from)
        .unwrap_or_else(|| fixtures().join("random"));
    let dirs = config_dirs(&root)?;
    ensure!(
        !dirs.is_empty(),
        "no configurations under {}",
        root.display()
    );
    let mut failures = Vec::new();
    for dir in &dirs {
        let e = run_config(dir)?;
        eprintln!(
            "{}: vision {:.2e}, logits (all positions) {:.2e}, last position {:.2e}, positions equal {}; \
             own preprocessing: pixels {:.2e}, vision {:.2e}, logits {:.2e}",
            e.name,
            e.vision_rel,
            e.logits_rel,
            e.last_rel,
            e.positions_equal,
            e.e2e_pixels,
            e.e2e_vision_rel,
            e.e2e_logits_rel
        );
        if let Some((pixels, last)) = e.torchvision {
            eprintln!(
                "  (transformers' torchvision image processor against its PIL one: pixels {pixels:.2e}, \
                 last-position logits {last:.2e})"
            );
        }
        if e.vision_rel > VISION_RTOL
            || e.logits_rel > LOGITS_RTOL
            || !e.positions_equal
            || e.e2e_pixels > PIXELS_ATOL
            || e.e2e_vision_rel > VISION_RTOL
            || e.e2e_logits_rel > LOGITS_RTOL
        {
            failures.push(e);
        }
    }
    ensure!(
        failures.is_empty(),
        "{} of {} configurations differ from the reference: {failures:?}",
        failures.len(),
        dirs.len()
    );
    Ok(())
}
