//! Half-precision activations (the CUDA default is bf16) on the CPU, against the
//! reference goldens. Exercises the dtype handling a GPU build relies on.

use crate::model_support::{argmax, cosine, fixtures, screen, Golden};
use anyhow::{ensure, Result};
use candle_core::{DType, IndexOp};
use sightline::{LoadOptions, ModelSource, Qwen3Vl, VisionLanguageModel};

/// bf16/f16 activations: minimum cosine similarity of the last logits row to the
/// reference's, and the share of positions whose top-1 must match. Measured on
/// ui_exact: bf16 cosine 0.99995 / 0.99997, top-1 0.968 / 0.984 (tiny-a / tiny-b);
/// f16 cosine 0.9999998, top-1 0.984 / 1.0.
const HALF_MIN_COSINE: f32 = 0.9999;
const HALF_TOP1_MIN_AGREEMENT: f32 = 0.95;

#[test]
fn half_precision_activations_track_the_reference() -> Result<()> {
    for dtype in [DType::BF16, DType::F16] {
        for name in ["tiny-a", "tiny-b"] {
            let mut model = Qwen3Vl::load(&LoadOptions {
                dtype: Some(dtype),
                ..LoadOptions::new(ModelSource::Safetensors {
                    dir: fixtures().join(name),
                })
            })?;
            let golden = Golden::load(name, "ui_exact")?;
            let ids = golden.input_ids()?;
            let image = model.encode_image(&screen("ui_exact")?)?;
            let logits = model.forward_all_logits(&ids, &[image])?;
            let ours_last = logits.i(ids.len() - 1)?.to_vec1::<f32>()?;
            let reference = golden.get("logits_last")?.to_vec1::<f32>()?;
            let c = cosine(&ours_last, &reference);
            let ref_argmax = golden.ids("logits_argmax")?;
            let rows = logits.to_vec2::<f32>()?;
            let agree = rows
                .iter()
                .zip(&ref_argmax)
                .filter(|(row, &r)| argmax(row) as u32 == r)
                .count() as f32
                / ids.len() as f32;
            eprintln!("{dtype:?} {name}: last-row cosine {c}, top-1 agreement {agree}");
            ensure!(c >= HALF_MIN_COSINE, "{dtype:?} {name}: cosine {c}");
            ensure!(
                agree >= HALF_TOP1_MIN_AGREEMENT,
                "{dtype:?} {name}: top-1 {agree}"
            );
        }
    }
    Ok(())
}
