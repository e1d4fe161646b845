//! Quantize-at-load to the K-quants: matrices whose rows fit the 256-value block are
//! quantized, the others keep their float weights (the documented fallback).

use crate::model_support::{argmax, cosine, load, max_abs_diff, screen, Golden, Variant};
use anyhow::{ensure, Result};
use candle_core::quantized::GgmlDType;
use sightline::VisionLanguageModel;

/// K-quants on tiny-b's vision mergers (the only matrices with 256-value rows): minimum
/// cosine similarity of the last logits row to the f32 model's.
const K_QUANT_MIN_COSINE: f32 = 0.99;

#[test]
fn k_quants_keep_float_weights_where_rows_do_not_fit_the_block() -> Result<()> {
    // tiny-a has no matrix with a row length divisible by 256: every weight stays
    // float, so the logits are exactly the f32 model's.
    let golden = Golden::load("tiny-a", "ui_exact")?;
    let ids = golden.input_ids()?;
    let mut f32_model = load("tiny-a", Variant::Safetensors)?;
    let image = f32_model.encode_image(&screen("ui_exact")?)?;
    let expected = f32_model.feed(&ids, &[image])?;
    for q in [GgmlDType::Q4K, GgmlDType::Q5K, GgmlDType::Q6K] {
        let mut model = load("tiny-a", Variant::Quantized(q))?;
        let image = model.encode_image(&screen("ui_exact")?)?;
        let logits = model.feed(&ids, &[image])?;
        ensure!(max_abs_diff(&logits, &expected)? == 0.0, "{q:?}");
    }
    Ok(())
}

#[test]
fn k_quants_on_vision_mergers_stay_close_to_f32() -> Result<()> {
    let golden = Golden::load("tiny-b", "ui_exact")?;
    let ids = golden.input_ids()?;
    let mut f32_model = load("tiny-b", Variant::Safetensors)?;
    let image = f32_model.encode_image(&screen("ui_exact")?)?;
    let expected = f32_model.feed(&ids, &[image])?.to_vec1::<f32>()?;
    for q in [GgmlDType::Q4K, GgmlDType::Q5K, GgmlDType::Q6K] {
        let mut model = load("tiny-b", Variant::Quantized(q))?;
        let image = model.encode_image(&screen("ui_exact")?)?;
        let logits = model.feed(&ids, &[image])?.to_vec1::<f32>()?;
        let c = cosine(&logits, &expected);
        eprintln!(
            "tiny-b {q:?}: cosine {c}, top-1 equal {}",
            argmax(&logits) == argmax(&expected)
        );
        ensure!(c >= K_QUANT_MIN_COSINE, "{q:?}: cosine {c}");
        ensure!(c < 1.0, "{q:?}: nothing was quantized");
    }
    Ok(())
}
