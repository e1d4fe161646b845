//! KV-cache reuse, truncation, batched decode and feed misuse on the tiny fixtures.

use crate::model_support::{load, max_abs, max_abs_diff, screen, Golden, Variant};
use anyhow::{ensure, Result};
use candle_core::{IndexOp, Tensor};
use sightline::{Qwen3Vl, VisionLanguageModel};

/// Cached and uncached computations of the same logits: max |Δ| relative to the row's
/// max |logit|. Different matmul shapes sum in different orders, so not bit-exact.
const KV_REUSE_RTOL: f32 = 1e-5;

fn rel(a: &Tensor, b: &Tensor) -> Result<f32> {
    Ok(max_abs_diff(a, b)? / max_abs(b)?)
}

/// The prompt of `case` split after `<|vision_end|>` (or in the middle for text).
fn prompt(
    model: &mut Qwen3Vl,
    name: &str,
    case: &str,
) -> Result<(Vec<u32>, usize, Vec<sightline::EncodedImage>)> {
    let golden = Golden::load(name, case)?;
    let ids = golden.input_ids()?;
    let (split, images) = if case == "text" {
        (ids.len() / 2, vec![])
    } else {
        let end = model.config().vision_end_token_id;
        let at = ids.iter().position(|&t| t == end).unwrap_or(0) + 1;
        (at, vec![model.encode_image(&screen(case)?)?])
    };
    Ok((ids, split, images))
}

#[test]
fn truncate_to_prefix_then_feed_rest_equals_fresh_prefill() -> Result<()> {
    for (name, case) in [
        ("tiny-a", "ui_exact"),
        ("tiny-b", "ui_wide"),
        ("tiny-a", "text"),
    ] {
        let mut model = load(name, Variant::Safetensors)?;
        let (ids, split, images) = prompt(&mut model, name, case)?;
        let fresh = model.forward_all_logits(&ids, &images)?;
        let fresh_last = fresh.i(ids.len() - 1)?;

        // Reuse the prefix of the run just made.
        model.truncate(split)?;
        ensure!(model.cache_len() == split);
        let reused = model.feed(&ids[split..], &[])?;
        let r = rel(&reused, &fresh_last)?;
        eprintln!("{name}/{case}: truncate({split}) + feed rest: rel {r:e}");
        ensure!(r <= KV_REUSE_RTOL, "{name}/{case}: {r}");

        // Prefix alone, then the rest one token at a time (decode steps).
        model.truncate(0)?;
        let prefix_images: &[_] = if split > 0 { &images } else { &[] };
        model.feed(&ids[..split], prefix_images)?;
        let mut last = None;
        for &t in &ids[split..] {
            last = Some(model.feed(&[t], &[])?);
        }
        let stepped = last.ok_or_else(|| anyhow::anyhow!("no tokens after the prefix"))?;
        let r = rel(&stepped, &fresh_last)?;
        eprintln!("{name}/{case}: prefix + single-token steps: rel {r:e}");
        ensure!(r <= KV_REUSE_RTOL, "{name}/{case}: {r}");
        ensure!(model.cache_len() == ids.len());
    }
    Ok(())
}

#[test]
fn repeated_turns_on_a_cached_prefix_give_identical_logits() -> Result<()> {
    let mut model = load("tiny-b", Variant::Safetensors)?;
    let (ids, split, images) = prompt(&mut model, "tiny-b", "ui_resize")?;
    model.feed(&ids[..split], &images)?;
    let first = model.feed(&ids[split..], &[])?;
    for _ in 0..3 {
        model.truncate(split)?;
        // A different continuation in between must not leak into the next turn.
        model.feed(&[9707, 11, 1879], &[])?;
        model.truncate(split)?;
        let again = model.feed(&ids[split..], &[])?;
        ensure!(max_abs_diff(&again, &first)? == 0.0, "turns differ");
    }
    Ok(())
}

#[test]
fn cache_grows_on_demand_without_preallocating_the_context() -> Result<()> {
    let mut model = load("tiny-a", Variant::Safetensors)?;
    ensure!(
        model.cache_capacity() == 0,
        "nothing allocated before the first feed"
    );
    model.feed(&[9707; 10], &[])?;
    let small = model.cache_capacity();
    ensure!((10..=1024).contains(&small), "capacity {small}");
    model.feed(&vec![9707; 600], &[])?;
    ensure!(model.cache_len() == 610);
    ensure!(model.cache_capacity() >= 610 && model.cache_capacity() <= 2 * 610 + 256);
    Ok(())
}

#[test]
fn text_after_image_continues_from_largest_image_position() -> Result<()> {
    let mut model = load("tiny-a", Variant::Safetensors)?;
    let (ids, split, images) = prompt(&mut model, "tiny-a", "ui_wide")?;
    let golden = Golden::load("tiny-a", "ui_wide")?;
    let positions = golden.get("position_ids")?.to_vec2::<i64>()?;
    model.feed(&ids[..split], &images)?;
    ensure!(model.next_text_position() as i64 == positions[0][split]);
    // Cutting back inside the text before the image gives that text's next position.
    model.truncate(3)?;
    ensure!(model.next_text_position() == 3);
    Ok(())
}

#[test]
fn misuse_of_feed_is_an_error_and_leaves_the_cache_unchanged() -> Result<()> {
    let mut model = load("tiny-a", Variant::Safetensors)?;
    let (ids, split, images) = prompt(&mut model, "tiny-a", "ui_exact")?;
    model.feed(&ids[..3], &[])?;
    let len = model.cache_len();
    ensure!(model.feed(&[], &[]).is_err(), "empty feed");
    ensure!(
        model.feed(&ids[3..split], &[]).is_err(),
        "image pads without an image"
    );
    ensure!(
        model.feed(&ids[3..5], &images).is_err(),
        "an image without pads"
    );
    ensure!(
        model.feed(&[u32::MAX], &[]).is_err(),
        "token outside the vocabulary"
    );
    ensure!(model.truncate(len + 1).is_err(), "truncate past the end");
    let mut huge = images[0].clone();
    huge.token_grid = [usize::MAX, 2, 2];
    ensure!(
        model.feed(&ids[3..split], &[huge]).is_err(),
        "overflowing grid"
    );
    ensure!(model.cache_len() == len);
    // The model still computes the right thing afterwards.
    model.feed(&ids[3..split], &images)?;
    let after = model.feed(&ids[split..], &[])?;
    let mut fresh = load("tiny-a", Variant::Safetensors)?;
    let expected = fresh.feed(&ids, &images)?;
    ensure!(rel(&after, &expected)? <= KV_REUSE_RTOL);
    Ok(())
}

#[test]
fn last_hidden_times_lm_head_rows_gives_the_logits() -> Result<()> {
    for name in ["tiny-a", "tiny-b"] {
        let mut model = load(name, Variant::Safetensors)?;
        ensure!(model.last_hidden().is_err(), "nothing fed yet");
        let logits = model.feed(&[151644, 872, 198, 9707, 151645], &[])?;
        let hidden = model.last_hidden()?;
        ensure!(hidden.dims() == [model.hidden_size()]);
        let ids = [0u32, 9707, 151643, 151935];
        let rows = model.lm_head_rows(&ids)?;
        ensure!(rows.dims() == [ids.len(), model.hidden_size()]);
        let ours = rows.matmul(&hidden.unsqueeze(1)?)?.squeeze(1)?;
        let ids_t = Tensor::new(&ids, logits.device())?;
        let expected = logits.index_select(&ids_t, 0)?;
        ensure!(rel(&ours, &expected)? <= KV_REUSE_RTOL, "{name}");
        ensure!(
            model.lm_head_rows(&[151936]).is_err(),
            "id past the vocabulary"
        );
    }
    Ok(())
}

/// Quantized models: decode steps (fused gemv) against one batched pass (quantized
/// matmul): max |Δ| relative to the row's max |logit|. The two also take different CPU
/// attention kernels (a direct loop for one row, the fused kernel for many), which
/// agree to ~1e-6; but every quantized matmul first rounds its input row to 8 bits, so
/// such a difference moves some elements by a whole rounding step, and the steps
/// compound over the layers: measured 9e-3 on tiny-b. A wrong cache gives differences
/// of order 1.
const QUANT_STEP_RTOL: f32 = 2e-2;

#[test]
fn quantized_decode_steps_match_one_batched_pass() -> Result<()> {
    for (name, variant) in [
        ("tiny-b", Variant::Gguf),
        (
            "tiny-a",
            Variant::Quantized(candle_core::quantized::GgmlDType::Q8_0),
        ),
    ] {
        let mut model = load(name, variant)?;
        let (ids, split, images) = prompt(&mut model, name, "ui_exact")?;
        let batched = model.feed(&ids, &images)?;
        model.truncate(split)?;
        let mut last = None;
        for &t in &ids[split..] {
            last = Some(model.feed(&[t], &[])?);
        }
        let stepped = last.ok_or_else(|| anyhow::anyhow!("no tokens after the prefix"))?;
        let r = rel(&stepped, &batched)?;
        eprintln!("{name} {variant:?}: steps vs batched rel {r:e}");
        ensure!(r <= QUANT_STEP_RTOL, "{name}: {r}");
    }
    Ok(())
}

#[test]
fn two_images_in_one_feed_equal_two_feeds_with_one_image_each() -> Result<()> {
    let mut model = load("tiny-a", Variant::Safetensors)?;
    let (first, _, images) = prompt(&mut model, "tiny-a", "ui_exact")?;
    let second_image = model.encode_image(&screen("ui_wide")?)?;
    let cfg = model.config().clone();
    let mut second = vec![cfg.vision_start_token_id];
    second.extend(std::iter::repeat_n(
        cfg.image_token_id,
        second_image.n_tokens(),
    ));
    second.extend([cfg.vision_end_token_id, 9707, 11, 1879]);
    let both = [images[0].clone(), second_image.clone()];
    let all: Vec<u32> = first.iter().chain(&second).copied().collect();
    let together = model.feed(&all, &both)?;
    // The second image arrives in a later feed: its positions continue after the
    // first prompt and its DeepStack rows are relative to that feed.
    model.truncate(first.len())?;
    let split = model.feed(&second, std::slice::from_ref(&second_image))?;
    let r = rel(&split, &together)?;
    eprintln!("two images: split vs together rel {r:e}");
    ensure!(r <= KV_REUSE_RTOL, "{r}");
    // The second image's DeepStack features matter: without them the logits move.
    model.truncate(first.len())?;
    let mut no_deepstack = second_image.clone();
    for d in &mut no_deepstack.deepstack {
        *d = d.zeros_like()?;
    }
    let moved = model.feed(&second, &[no_deepstack])?;
    ensure!(
        rel(&moved, &together)? > 1e-3,
        "DeepStack features were ignored"
    );
    Ok(())
}

#[test]
fn a_kv_prefix_kept_on_disk_continues_bit_for_bit() -> Result<()> {
    use sightline::planner::prefix_store::PrefixStore;
    let dir = tempfile::tempdir()?;
    let mut model = load("tiny-a", Variant::Safetensors)?;
    let (ids, split, images) = prompt(&mut model, "tiny-a", "ui_exact")?;
    // The prefix holds the image: its positions advance by less than its tokens.
    let system = &ids[..split];
    model.feed(system, &images)?;
    let prefix = model
        .kv_prefix(split)?
        .ok_or_else(|| anyhow::anyhow!("Qwen3-VL gives its cache out"))?;
    let weights = [crate::model_support::fixtures().join("tiny-a/model.safetensors")];
    let store = PrefixStore::new(dir.path().to_path_buf(), &weights, "test setup")?;
    store.save(system, &prefix)?;
    let kept = model.feed(&ids[split..], &[])?;

    // Another model instance restores it and continues to the same logits, bit for bit.
    let mut other = load("tiny-a", Variant::Safetensors)?;
    let mut loaded = store
        .load(system)
        .ok_or_else(|| anyhow::anyhow!("the entry just kept is found"))?;
    other.restore_kv_prefix(&mut loaded)?;
    assert_eq!(other.cache_len(), split);
    assert_eq!(
        other.next_text_position(),
        model_next_after(&mut model, split)?
    );
    let restored = other.feed(&ids[split..], &[])?;
    assert_eq!(max_abs_diff(&kept, &restored)?, 0.0);

    // Other tokens, or another setup, find nothing.
    assert!(store.load(&ids[..split - 1]).is_none());
    let elsewhere = PrefixStore::new(dir.path().to_path_buf(), &weights, "other setup")?;
    assert!(elsewhere.load(system).is_none());

    // A prefix that does not fit the model is refused and leaves the cache empty.
    let mut wrong = prefix.clone();
    wrong.layers.pop();
    ensure!(other.restore_kv_prefix(&mut wrong).is_err());
    assert_eq!(other.cache_len(), 0);
    let mut wrong = prefix.clone();
    let last = wrong.layers.len() - 1;
    wrong.layers[last].0 = wrong.layers[last].0.narrow(1, 0, 1)?;
    ensure!(other.restore_kv_prefix(&mut wrong).is_err());
    assert_eq!(other.cache_len(), 0);
    let mut wrong = prefix;
    wrong.next_position[0] = 7;
    ensure!(other.restore_kv_prefix(&mut wrong).is_err());
    assert_eq!(other.cache_len(), 0);
    Ok(())
}

/// The position the next text token takes after `model`'s first `len` positions.
fn model_next_after(model: &mut Qwen3Vl, len: usize) -> Result<u32> {
    model.truncate(len)?;
    Ok(model.next_text_position())
}

/// A prompt fed in chunks (each appending to the cache the next reads, the image run and
/// its DeepStack rows cut across chunks) gives the logits of one pass at every position,
/// and leaves a cache the next token decodes on as on one pass's.
#[test]
fn a_prompt_fed_in_chunks_equals_one_pass() -> Result<()> {
    for (name, case) in [("tiny-a", "ui_exact"), ("tiny-b", "ui_wide")] {
        let mut model = load(name, Variant::Safetensors)?;
        let (ids, split, images) = prompt(&mut model, name, case)?;
        let whole = model.forward_all_logits(&ids, &images)?;
        let whole_next = model.feed(&[9707], &[])?;
        for chunk in [7, 16] {
            // The image run ends at `split`: chunks of 7 cut it many times.
            ensure!(
                chunk < split,
                "{name}/{case}: the image run ends at {split}"
            );
            model.truncate(0)?;
            model.set_prefill_chunk(chunk);
            let chunked = model.forward_all_logits(&ids, &images)?;
            ensure!(model.cache_len() == ids.len());
            let r = rel(&chunked, &whole)?;
            let next = rel(&model.feed(&[9707], &[])?, &whole_next)?;
            eprintln!("{name}/{case}: chunks of {chunk}: rel {r:e}, next token {next:e}");
            ensure!(r <= KV_REUSE_RTOL, "{name}/{case}, chunks of {chunk}: {r}");
            ensure!(
                next <= KV_REUSE_RTOL,
                "{name}/{case}, chunks of {chunk}, next: {next}"
            );
        }
    }
    Ok(())
}
