//! Randomized differential test against transformers: random tiny Qwen3-VL configurations
//! (odd head counts, head_dim 24/40, 1-4 vision heads, DeepStack on the last vision layer or
//! none, learned position grids 6x6 to 48x48, both config.json layouts, weights x4) with an
//! image each (exact multiple of 32, resized, very wide, very tall), made by
//! `models/scripts/make_random_configs.py`.
//!
//! f32-stored configurations: each committed configuration written again with f32 weights
//! (`f32_stored_configs_compute_in_f32`). Their reference is the same transformers golden:
//! the script read the bf16 checkpoint back in f32 and ran transformers in f32, so the f32
//! copy holds exactly the weights the golden was computed from.
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

/// How far the nudged f32 copy moves each weight, relative: 2⁻¹⁴, under half a unit in the
/// last place of f16 (2⁻¹¹ to 2⁻¹² relative) and of bf16, so a weight rounded to half
/// precision anywhere would lose the nudge entirely.
const F32_NUDGE: f32 = 1.0 / 16384.0;

/// Write `dir`'s checkpoint with f32 weights into `out` (config and preprocessing copied,
/// the config's dtype set to float32). With `nudge_seed`, each weight is also multiplied by
/// `1 + u · F32_NUDGE`, `u` uniform in [-1, 1] from that seed: weights no half type holds.
fn write_f32_copy(dir: &Path, out: &Path, nudge_seed: Option<u64>) -> Result<()> {
    use rand::{Rng, SeedableRng};
    let tensors = candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(nudge_seed.unwrap_or(0));
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let mut f32_tensors = std::collections::HashMap::new();
    for name in names {
        let t = tensors[name].to_dtype(DType::F32)?;
        let t = match nudge_seed {
            Some(_) => {
                let values: Vec<f32> = t
                    .flatten_all()?
                    .to_vec1::<f32>()?
                    .into_iter()
                    .map(|w| w * (1.0 + F32_NUDGE * rng.random_range(-1.0f32..=1.0)))
                    .collect();
                Tensor::from_vec(values, t.dims(), &Device::Cpu)?
            }
            None => t,
        };
        f32_tensors.insert(name.clone(), t);
    }
    candle_core::safetensors::save(&f32_tensors, out.join("model.safetensors"))?;
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json"))?)?;
    for key in ["dtype", "torch_dtype"] {
        if let Some(v) = config.get_mut(key) {
            *v = serde_json::Value::from("float32");
        }
    }
    std::fs::write(out.join("config.json"), serde_json::to_vec_pretty(&config)?)?;
    for file in [
        "preprocessor_config.json",
        "golden.safetensors",
        "image.png",
    ] {
        if dir.join(file).is_file() {
            std::fs::copy(dir.join(file), out.join(file))?;
        }
    }
    Ok(())
}

/// The vision outputs (embeddings, then DeepStack features) and every logits row of the
/// checkpoint in `dir` on its golden's `pixel_values` and `input_ids`.
fn f32_outputs(dir: &Path) -> Result<(Vec<f32>, Vec<Vec<f32>>)> {
    let golden = candle_core::safetensors::load(dir.join("golden.safetensors"), &Device::Cpu)?;
    let mut model = Qwen3Vl::load(&LoadOptions::new(ModelSource::Safetensors {
        dir: dir.to_path_buf(),
    }))?;
    let grid = ids(&tensor(&golden, "image_grid_thw")?)?;
    let image = PreprocessedImage {
        pixel_values: tensor(&golden, "pixel_values")?,
        grid_thw: [grid[0] as usize, grid[1] as usize, grid[2] as usize],
    };
    let encoded = model.encode_image(&image)?;
    let mut vision = encoded.embeddings.flatten_all()?.to_vec1::<f32>()?;
    for ds in &encoded.deepstack {
        vision.extend(ds.flatten_all()?.to_vec1::<f32>()?);
    }
    let input_ids = ids(&tensor(&golden, "input_ids")?)?;
    let logits = model
        .forward_all_logits(&input_ids, &[encoded])?
        .to_vec2::<f32>()?;
    Ok((vision, logits))
}

/// Weights stored in f32 are computed in f32 with the default options (no dtype asked
/// for): the f32 copy of every committed configuration meets the transformers golden at
/// the same tolerances as its bf16 original, with images (activations in half precision
/// would miss it by ~1e-3), and a nudge of every weight below half precision's resolution
/// reaches the vision outputs and the logits (a weight rounded to f16 or bf16 would erase
/// it). The nudged copy has no reference of its own: it is only compared with the exact
/// copy.
#[test]
fn f32_stored_configs_compute_in_f32() -> Result<()> {
    let dirs = config_dirs(&fixtures().join("random"))?;
    ensure!(!dirs.is_empty(), "no committed random configurations");
    for (i, dir) in dirs.iter().enumerate() {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        let exact = tempfile::tempdir()?;
        write_f32_copy(dir, exact.path(), None)?;
        let e = run_config(exact.path())?;
        eprintln!(
            "{name:?} stored f32: vision {:.2e}, logits {:.2e}; own preprocessing: vision {:.2e}, logits {:.2e}",
            e.vision_rel, e.logits_rel, e.e2e_vision_rel, e.e2e_logits_rel
        );
        ensure!(
            e.vision_rel <= VISION_RTOL
                && e.logits_rel <= LOGITS_RTOL
                && e.e2e_vision_rel <= VISION_RTOL
                && e.e2e_logits_rel <= LOGITS_RTOL
                && e.positions_equal,
            "{name:?} stored f32 differs from the reference: {e:?}"
        );

        let nudged = tempfile::tempdir()?;
        write_f32_copy(dir, nudged.path(), Some(0x5eed_0000 + i as u64))?;
        let (vision, logits) = f32_outputs(exact.path())?;
        let (nudged_vision, nudged_logits) = f32_outputs(nudged.path())?;
        let moved = |a: &[f32], b: &[f32]| a.iter().zip(b).any(|(x, y)| x != y);
        ensure!(
            moved(&vision, &nudged_vision),
            "{name:?}: nudging every f32 weight by 2^-14 left the vision outputs bit-identical: \
             the weights were rounded to half precision"
        );
        ensure!(
            logits.iter().zip(&nudged_logits).any(|(a, b)| moved(a, b)),
            "{name:?}: nudging every f32 weight by 2^-14 left the logits bit-identical"
        );
        let (shift, _) = logits_errors(&nudged_logits, &logits)?;
        eprintln!("{name:?} stored f32, nudged by 2^-14: logits moved {shift:.2e}");
    }
    Ok(())
}
