//! Qwen3-VL against the reference (transformers) goldens in models/fixtures/tiny-*/golden.
//!
//! Run with `--nocapture` to see the measured errors.

use crate::model_support::{
    argmax, convert_gguf, cosine, fixtures, load, load_gguf_files, max_abs, max_abs_diff, screen,
    Golden, Variant, IMAGE_CASES,
};
use anyhow::{ensure, Result};
use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, IndexOp, Tensor};
use sightline::model::qwen3_vl::mrope_positions;
use sightline::{Qwen3Vl, VisionLanguageModel};

/// f32 safetensors: max |logit difference| relative to the row's max |logit|.
const F32_LOGITS_RTOL: f32 = 1e-4;
/// f32 safetensors: max |difference| of image embeddings / DeepStack features relative to
/// their max magnitude.
const F32_VISION_RTOL: f32 = 1e-4;
/// GGUF f16 and bf16 (tiny-a): max |logit difference| relative to the row's max |logit|.
const F16_LOGITS_RTOL: f32 = 1e-2;
/// Q8_0: share of positions (all cases together) whose top-1 token equals the
/// reference's. The issue asks for 0.99, which these random fixtures cannot give: many
/// positions are near-ties, and transformers itself with Q8_0-rounded weights agrees
/// with its own f32 output at only 179/182 (tiny-a) and 178/182 (tiny-b) positions
/// (measured with the fixture venv). Measured here: quantize-at-load 179/182 (tiny-a)
/// and 175/182 (tiny-b), GGUF Q8_0 tiny-b 175/182 (its matmuls also quantize the
/// activations, as llama.cpp does). On a CPU whose quantized tier is AVX2, prefill-sized
/// matmuls widen Q8_0 to f32 instead (no activation rounding), and the near-ties fall the
/// other way more often: tiny-b 170/182 for both the GGUF and quantize-at-load, tiny-a
/// 178/182, every flip at a reference margin under 0.8% (measured on a Zen 3 EPYC VM).
/// The count moves by several positions with any change of rounding; the margin condition
/// below is what pins correctness.
const Q8_TOP1_MIN_AGREEMENT: f32 = 0.92;
/// Q8_0: a top-1 disagreement is tolerated only where the reference's top-1 margin is
/// at most this share of the row's max |logit|.
const Q8_NOISE_MARGIN: f32 = 0.01;
/// Q8_0: minimum cosine similarity of a compared logits row to the reference's.
const Q8_MIN_COSINE: f32 = 0.999;

/// What one case measured.
#[derive(Debug, Default)]
struct Measured {
    /// Max over positions of max |Δ| / max |reference row|.
    logits_rel: f32,
    /// Share of positions whose argmax equals the reference's full-row argmax.
    top1_agreement: f32,
    /// Smallest cosine similarity over compared rows (column subsets and the last row).
    min_cosine: f32,
    /// Max |Δ| / max |reference| over image embeddings and DeepStack features.
    vision_rel: f32,
    positions_equal: bool,
    greedy_equal: bool,
    /// Positions whose argmax differs from the reference's.
    top1_mismatches: Vec<usize>,
    /// Number of positions compared.
    positions: usize,
}

fn run_case(model: &mut Qwen3Vl, name: &str, case: &str) -> Result<Measured> {
    let golden = Golden::load(name, case)?;
    let ids = golden.input_ids()?;
    let mut m = Measured::default();
    model.truncate(0)?;

    // Vision tower.
    let images = if case == "text" {
        vec![]
    } else {
        let img = model.encode_image(&screen(case)?)?;
        let reference = golden.get("image_embeds")?;
        m.vision_rel = max_abs_diff(&img.embeddings, reference)? / max_abs(reference)?;
        for (i, ds) in img.deepstack.iter().enumerate() {
            let reference = golden.get(&format!("deepstack_{i}"))?;
            m.vision_rel = m
                .vision_rel
                .max(max_abs_diff(ds, reference)? / max_abs(reference)?);
        }
        vec![img]
    };

    // M-RoPE positions.
    let grids: Vec<[usize; 3]> = images.iter().map(|i| i.token_grid).collect();
    let layout = mrope_positions(&ids, &grids, model.config().image_token_id, 0)?;
    let reference = golden
        .get("position_ids")?
        .to_dtype(DType::I64)?
        .to_vec2::<i64>()?;
    m.positions_equal = (0..3).all(|axis| {
        layout
            .positions
            .iter()
            .zip(&reference[axis])
            .all(|(p, &r)| p[axis] as i64 == r)
    }) && layout.positions.len() == reference[0].len();

    // Logits at every position, as f32 on the CPU whatever the model's device.
    let logits = on_host(&model.forward_all_logits(&ids, &images)?)?;
    let columns: Vec<u32> = golden.ids("logit_columns")?;
    let columns_t = Tensor::new(columns.as_slice(), logits.device())?;
    let ours_cols = logits.index_select(&columns_t, 1)?.to_vec2::<f32>()?;
    let ref_cols = golden.get("logits_columns")?.to_vec2::<f32>()?;
    let absmax = golden.get("logits_absmax")?.to_vec1::<f32>()?;
    let ref_argmax = golden.ids("logits_argmax")?;
    let all = logits.to_vec2::<f32>()?;
    let mut agree = 0;
    m.min_cosine = 1.0;
    for pos in 0..ids.len() {
        let diff = ours_cols[pos]
            .iter()
            .zip(&ref_cols[pos])
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        m.logits_rel = m.logits_rel.max(diff / absmax[pos]);
        m.min_cosine = m.min_cosine.min(cosine(&ours_cols[pos], &ref_cols[pos]));
        if argmax(&all[pos]) as u32 == ref_argmax[pos] {
            agree += 1;
        } else {
            m.top1_mismatches.push(pos);
        }
    }
    m.top1_agreement = agree as f32 / ids.len() as f32;
    m.positions = ids.len();
    let ref_last = golden.get("logits_last")?;
    let ours_last = logits.i(ids.len() - 1)?;
    m.logits_rel = m
        .logits_rel
        .max(max_abs_diff(&ours_last, ref_last)? / absmax[ids.len() - 1]);
    m.min_cosine = m.min_cosine.min(cosine(
        &ours_last.to_vec1::<f32>()?,
        &ref_last.to_vec1::<f32>()?,
    ));

    // Greedy continuation, one cached token at a time.
    let expected = golden.ids("greedy")?;
    let mut next = argmax(&all[ids.len() - 1]) as u32;
    let mut greedy = vec![next];
    while greedy.len() < expected.len() {
        let row = on_host(&model.feed(&[next], &[])?)?.to_vec1::<f32>()?;
        next = argmax(&row) as u32;
        greedy.push(next);
    }
    m.greedy_equal = greedy == expected;
    if !m.greedy_equal {
        eprintln!("{name}/{case}: greedy {greedy:?}\n  expected {expected:?}");
    }
    Ok(m)
}

/// `t` as f32 on the CPU (a GPU model's logits may be half precision, on the GPU).
fn on_host(t: &Tensor) -> Result<Tensor> {
    Ok(t.to_device(&Device::Cpu)?.to_dtype(DType::F32)?)
}

fn all_cases() -> impl Iterator<Item = &'static str> {
    std::iter::once("text").chain(IMAGE_CASES)
}

/// Every case of `name` on `model` matches the reference at f32 tolerance: logits,
/// vision, argmax everywhere, positions and the greedy continuation.
fn check_f32(model: &mut Qwen3Vl, name: &str, label: &str) -> Result<()> {
    for case in all_cases() {
        let m = run_case(model, name, case)?;
        eprintln!("{label} {name}/{case}: {m:?}");
        ensure!(
            m.logits_rel <= F32_LOGITS_RTOL,
            "{label} {name}/{case}: logits {m:?}"
        );
        ensure!(
            m.vision_rel <= F32_VISION_RTOL,
            "{label} {name}/{case}: vision {m:?}"
        );
        ensure!(
            m.top1_agreement == 1.0,
            "{label} {name}/{case}: argmax {m:?}"
        );
        ensure!(m.positions_equal, "{label} {name}/{case}: positions {m:?}");
        ensure!(m.greedy_equal, "{label} {name}/{case}: greedy {m:?}");
    }
    Ok(())
}

#[test]
fn f32_safetensors_matches_reference_everywhere() -> Result<()> {
    for name in ["tiny-a", "tiny-b"] {
        check_f32(&mut load(name, Variant::Safetensors)?, name, "f32")?;
    }
    Ok(())
}

#[test]
fn gguf_f16_tiny_a_matches_reference_within_f16_tolerance() -> Result<()> {
    let mut model = load("tiny-a", Variant::Gguf)?;
    for case in all_cases() {
        let m = run_case(&mut model, "tiny-a", case)?;
        eprintln!("gguf f16 tiny-a/{case}: {m:?}");
        ensure!(m.logits_rel <= F16_LOGITS_RTOL, "tiny-a/{case}: {m:?}");
        ensure!(m.positions_equal, "tiny-a/{case}: positions {m:?}");
    }
    Ok(())
}

/// The reference's top-1 margins `(top1 - top2) / max |logit|` at `positions`, from
/// the f32 model (which matches the reference to ~1e-6, see above).
fn reference_margins(
    f32_model: &mut Qwen3Vl,
    name: &str,
    case: &str,
    positions: &[usize],
) -> Result<Vec<f32>> {
    if positions.is_empty() {
        return Ok(vec![]);
    }
    let golden = Golden::load(name, case)?;
    let ids = golden.input_ids()?;
    f32_model.truncate(0)?;
    let images = if case == "text" {
        vec![]
    } else {
        vec![f32_model.encode_image(&screen(case)?)?]
    };
    let logits = f32_model.forward_all_logits(&ids, &images)?;
    positions
        .iter()
        .map(|&pos| {
            let row = logits.i(pos)?.to_vec1::<f32>()?;
            let mut sorted = row.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let absmax = row.iter().fold(0f32, |m, x| m.max(x.abs()));
            Ok((sorted[0] - sorted[1]) / absmax)
        })
        .collect()
}

#[test]
fn gguf_bf16_tiny_a_matches_reference_within_half_tolerance() -> Result<()> {
    // No bf16 GGUF is committed (the text file alone would be 10 MB): write one from the
    // f16 pair. tiny-a's weights are bf16 to begin with.
    let dir = tempfile::tempdir()?;
    let (text, mmproj) = (
        dir.path().join("tiny-a-bf16.gguf"),
        dir.path().join("mmproj-tiny-a-bf16.gguf"),
    );
    let src = fixtures().join("tiny-a");
    convert_gguf(&src.join("tiny-a-f16.gguf"), &text, GgmlDType::BF16)?;
    convert_gguf(
        &src.join("mmproj-tiny-a-f16.gguf"),
        &mmproj,
        GgmlDType::BF16,
    )?;
    let mut model = load_gguf_files(&text, &mmproj)?;
    for case in all_cases() {
        let m = run_case(&mut model, "tiny-a", case)?;
        eprintln!("gguf bf16 tiny-a/{case}: {m:?}");
        ensure!(m.logits_rel <= F16_LOGITS_RTOL, "tiny-a/{case}: {m:?}");
        ensure!(m.positions_equal, "tiny-a/{case}: positions {m:?}");
    }
    Ok(())
}

/// How far a lossy path (Q8_0 weights, half-precision activations) may move the logits.
#[derive(Debug, Clone, Copy)]
struct Noise {
    min_cosine: f32,
    /// Largest reference top-1 margin at which the top-1 may flip.
    flip_margin: f32,
    min_agreement: f32,
}

const Q8_NOISE: Noise = Noise {
    min_cosine: Q8_MIN_COSINE,
    flip_margin: Q8_NOISE_MARGIN,
    min_agreement: Q8_TOP1_MIN_AGREEMENT,
};

/// Q8_0 checks ([`check_noisy`] with [`Q8_NOISE`]): quantization noise can flip a
/// near-tie (transformers itself, with Q8_0-rounded weights, flips tiny-a's text
/// position 15, margin 0.4%).
fn check_q8(name: &str, variant: Variant) -> Result<()> {
    check_noisy(
        &mut load(name, variant)?,
        name,
        &format!("{variant:?}"),
        Q8_NOISE,
    )
}

/// Top-1 agreement counted over all positions of all cases; a disagreement is
/// accepted only where the reference's own top-1 margin is within `noise.flip_margin`.
fn check_noisy(model: &mut Qwen3Vl, name: &str, label: &str, noise: Noise) -> Result<()> {
    let mut f32_model = load(name, Variant::Safetensors)?;
    let (mut agree, mut total) = (0usize, 0usize);
    for case in all_cases() {
        let m = run_case(model, name, case)?;
        eprintln!("{label} {name}/{case}: {m:?}");
        ensure!(m.min_cosine >= noise.min_cosine, "{name}/{case}: {m:?}");
        total += m.positions;
        agree += m.positions - m.top1_mismatches.len();
        let margins = reference_margins(&mut f32_model, name, case, &m.top1_mismatches)?;
        for (&pos, &margin) in m.top1_mismatches.iter().zip(&margins) {
            eprintln!(
                "  {name}/{case} position {pos}: top-1 differs, reference margin {margin:.4}"
            );
            ensure!(
                margin <= noise.flip_margin,
                "{name}/{case} position {pos}: margin {margin}"
            );
        }
    }
    let agreement = agree as f32 / total as f32;
    eprintln!("{label} {name}: top-1 agreement {agree}/{total} = {agreement:.4}");
    ensure!(
        agreement >= noise.min_agreement,
        "{name}: top-1 agreement {agreement}"
    );
    Ok(())
}

#[test]
fn gguf_q8_0_tiny_b_agrees_with_reference_top1_and_cosine() -> Result<()> {
    check_q8("tiny-b", Variant::Gguf)
}

#[test]
fn quantize_at_load_q8_0_agrees_with_reference_top1_and_cosine() -> Result<()> {
    check_q8("tiny-a", Variant::Quantized(GgmlDType::Q8_0))?;
    check_q8("tiny-b", Variant::Quantized(GgmlDType::Q8_0))
}

/// The same cases on a GPU: `--features cuda` (device `SIGHTLINE_CUDA_DEVICE`, default
/// 0) or `--features metal`. f32 activations must meet the CPU's f32 tolerances; the
/// device's default activations (bf16 on CUDA for these bf16-stored models) are held to
/// the Q8_0 noise bounds, since bf16's 8-bit mantissa rounds each activation by up to
/// 2^-9, the order of Q8_0's per-block step. Measured on an H200: f32 ≤ 1.4e-6 relative;
/// bf16 top-1 agreement 178/182 (tiny-a) and 176/182 (tiny-b), min cosine 0.99990.
#[cfg(any(feature = "cuda", feature = "metal"))]
mod gpu {
    use super::*;
    use crate::model_support::load_on;

    fn device() -> Result<Device> {
        #[cfg(feature = "cuda")]
        let device = Device::new_cuda(
            std::env::var("SIGHTLINE_CUDA_DEVICE")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
        )?;
        #[cfg(not(feature = "cuda"))]
        let device = Device::new_metal(0)?;
        Ok(device)
    }

    #[test]
    fn gpu_f32_safetensors_matches_reference_everywhere() -> Result<()> {
        for name in ["tiny-a", "tiny-b"] {
            let mut model = load_on(name, Variant::Safetensors, device()?, Some(DType::F32))?;
            check_f32(&mut model, name, "gpu f32")?;
        }
        Ok(())
    }

    #[test]
    fn gpu_default_activations_agree_with_reference_top1_and_cosine() -> Result<()> {
        for name in ["tiny-a", "tiny-b"] {
            let mut model = load_on(name, Variant::Safetensors, device()?, None)?;
            check_noisy(&mut model, name, "gpu default dtype", Q8_NOISE)?;
        }
        Ok(())
    }

    /// Q8_0 matrices on the GPU (candle's quantized CUDA/Metal kernels, the path a GGUF
    /// model takes there too), quantized at load.
    #[test]
    fn gpu_quantized_q8_0_agrees_with_reference_top1_and_cosine() -> Result<()> {
        for name in ["tiny-a", "tiny-b"] {
            let variant = Variant::Quantized(GgmlDType::Q8_0);
            let mut model = load_on(name, variant, device()?, None)?;
            check_noisy(&mut model, name, "gpu q8_0", Q8_NOISE)?;
        }
        Ok(())
    }
}
