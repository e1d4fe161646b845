//! Broken or mismatched model files give typed errors that name the file or tensor.
//! Every broken file is written into a temporary directory.

use std::path::Path;

use crate::model_support::{fixtures, load, max_abs_diff, Variant};
use anyhow::{anyhow, ensure, Result};
use candle_core::{DType, Device, Tensor};
use sightline::model::qwen3_vl::check_tokenizer;
use sightline::tokenizer::load_tokenizer;
use sightline::{Error, LoadOptions, ModelSource, Qwen3Vl, Qwen3VlConfig, VisionLanguageModel};

fn load_dir(dir: &Path) -> sightline::Result<Qwen3Vl> {
    Qwen3Vl::load(&LoadOptions::new(ModelSource::Safetensors {
        dir: dir.to_path_buf(),
    }))
}

fn load_gguf(text: &Path, mmproj: &Path) -> sightline::Result<Qwen3Vl> {
    Qwen3Vl::load(&LoadOptions::new(ModelSource::Gguf {
        text: text.to_path_buf(),
        mmproj: mmproj.to_path_buf(),
    }))
}

/// A tempdir holding tiny-b's config.json and the given tensors as model.safetensors.
fn dir_with(tensors: &std::collections::HashMap<String, Tensor>) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    std::fs::copy(
        fixtures().join("tiny-b/config.json"),
        dir.path().join("config.json"),
    )?;
    candle_core::safetensors::save(tensors, dir.path().join("model.safetensors"))?;
    Ok(dir)
}

fn tiny_b_tensors() -> Result<std::collections::HashMap<String, Tensor>> {
    Ok(candle_core::safetensors::load(
        fixtures().join("tiny-b/model.safetensors"),
        &Device::Cpu,
    )?)
}

fn message(r: sightline::Result<Qwen3Vl>) -> Result<(Error, String)> {
    match r {
        Ok(_) => Err(anyhow!("loading succeeded")),
        Err(e) => {
            let m = e.to_string();
            Ok((e, m))
        }
    }
}

#[test]
fn truncated_safetensors_names_the_file() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::copy(
        fixtures().join("tiny-a/config.json"),
        dir.path().join("config.json"),
    )?;
    let bytes = std::fs::read(fixtures().join("tiny-a/model.safetensors"))?;
    std::fs::write(
        dir.path().join("model.safetensors"),
        &bytes[..bytes.len() / 2],
    )?;
    let (err, msg) = message(load_dir(dir.path()))?;
    ensure!(matches!(err, Error::ModelFile { .. }), "{err:?}");
    ensure!(msg.contains("model.safetensors"), "{msg}");
    Ok(())
}

#[test]
fn missing_tensor_is_named() -> Result<()> {
    let mut tensors = tiny_b_tensors()?;
    let name = "model.language_model.layers.1.mlp.up_proj.weight";
    tensors
        .remove(name)
        .ok_or_else(|| anyhow!("fixture lacks {name}"))?;
    let dir = dir_with(&tensors)?;
    let (err, msg) = message(load_dir(dir.path()))?;
    ensure!(matches!(err, Error::ModelFile { .. }), "{err:?}");
    ensure!(msg.contains(name), "{msg}");
    Ok(())
}

#[test]
fn wrong_shape_is_named_with_expected_and_found() -> Result<()> {
    let mut tensors = tiny_b_tensors()?;
    let name = "model.visual.blocks.0.attn.qkv.weight";
    tensors.insert(
        name.into(),
        Tensor::zeros((64, 64), DType::F16, &Device::Cpu)?,
    );
    let dir = dir_with(&tensors)?;
    let (err, msg) = message(load_dir(dir.path()))?;
    ensure!(matches!(err, Error::Tensor { .. }), "{err:?}");
    ensure!(
        msg.contains(name) && msg.contains("[192, 64]") && msg.contains("[64, 64]"),
        "{msg}"
    );
    Ok(())
}

#[test]
fn directory_without_weights_is_a_model_file_error() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::copy(
        fixtures().join("tiny-b/config.json"),
        dir.path().join("config.json"),
    )?;
    let (err, _) = message(load_dir(dir.path()))?;
    ensure!(matches!(err, Error::ModelFile { .. }), "{err:?}");
    let empty = tempfile::tempdir()?;
    let (err, msg) = message(load_dir(empty.path()))?;
    ensure!(
        matches!(err, Error::Io { .. }) && msg.contains("config.json"),
        "{err:?}"
    );
    Ok(())
}

#[test]
fn sharded_safetensors_load_like_the_single_file() -> Result<()> {
    let tensors = tiny_b_tensors()?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(
        fixtures().join("tiny-b/config.json"),
        dir.path().join("config.json"),
    )?;
    let (mut a, mut b) = (
        std::collections::HashMap::new(),
        std::collections::HashMap::new(),
    );
    let mut map = serde_json::Map::new();
    for (name, t) in tensors {
        let (shard, file) = if name.contains("visual") {
            (&mut a, "model-00001-of-00002.safetensors")
        } else {
            (&mut b, "model-00002-of-00002.safetensors")
        };
        map.insert(name.clone(), file.into());
        shard.insert(name, t);
    }
    candle_core::safetensors::save(&a, dir.path().join("model-00001-of-00002.safetensors"))?;
    candle_core::safetensors::save(&b, dir.path().join("model-00002-of-00002.safetensors"))?;
    let index = serde_json::json!({ "metadata": {}, "weight_map": map });
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        index.to_string(),
    )?;
    let mut sharded = load_dir(dir.path())?;
    let mut single = load("tiny-b", Variant::Safetensors)?;
    let ids = [151644, 872, 198, 9707, 151645];
    let d = max_abs_diff(&sharded.feed(&ids, &[])?, &single.feed(&ids, &[])?)?;
    ensure!(d == 0.0, "sharded and single differ by {d}");
    Ok(())
}

#[test]
fn truncated_gguf_names_the_file() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let src = fixtures().join("tiny-a/tiny-a-f16.gguf");
    let mmproj = fixtures().join("tiny-a/mmproj-tiny-a-f16.gguf");
    let bytes = std::fs::read(&src)?;
    // Cut inside the tensor data, then inside the header.
    for cut in [bytes.len() * 9 / 10, 200] {
        let broken = dir.path().join(format!("cut-{cut}.gguf"));
        std::fs::write(&broken, &bytes[..cut])?;
        let (err, msg) = message(load_gguf(&broken, &mmproj))?;
        ensure!(matches!(err, Error::ModelFile { .. }), "{err:?}");
        ensure!(msg.contains(&format!("cut-{cut}.gguf")), "{msg}");
    }
    Ok(())
}

#[test]
fn mmproj_of_another_model_is_rejected() -> Result<()> {
    let a = fixtures().join("tiny-a");
    let b = fixtures().join("tiny-b");
    let (err, msg) = message(load_gguf(
        &a.join("tiny-a-f16.gguf"),
        &b.join("mmproj-tiny-b-q8_0.gguf"),
    ))?;
    ensure!(matches!(err, Error::ModelFile { .. }), "{err:?}");
    ensure!(
        msg.contains("mmproj-tiny-b-q8_0.gguf") && msg.contains("does not belong"),
        "{msg}"
    );
    // Swapped: a text GGUF where the mmproj should be.
    let (err, msg) = message(load_gguf(
        &a.join("tiny-a-f16.gguf"),
        &a.join("tiny-a-f16.gguf"),
    ))?;
    ensure!(
        matches!(err, Error::ModelFile { .. }) && msg.contains("clip"),
        "{msg}"
    );
    Ok(())
}

#[test]
fn tokenizer_that_belongs_to_another_model_is_rejected() -> Result<()> {
    let tokenizer = load_tokenizer(&fixtures().join("tokenizer.json.gz"))?;
    let config_path = fixtures().join("tiny-a/config.json");
    let cfg = Qwen3VlConfig::from_config_json(&config_path)?;
    check_tokenizer(&cfg, &tokenizer)?;
    let text = std::fs::read_to_string(&config_path)?;
    let other = Qwen3VlConfig::from_json_str(&text.replace("151655", "151654"))?;
    let err = check_tokenizer(&other, &tokenizer).err();
    ensure!(matches!(err, Some(Error::Tokenizer { .. })), "{err:?}");
    let small = Qwen3VlConfig {
        text: sightline::model::qwen3_vl::TextConfig {
            vocab_size: 151_660,
            ..cfg.text.clone()
        },
        ..cfg
    };
    let err = check_tokenizer(&small, &tokenizer).err();
    ensure!(matches!(err, Some(Error::Tokenizer { .. })), "{err:?}");
    Ok(())
}

#[test]
fn bad_images_are_errors_not_panics() -> Result<()> {
    let mut model = load("tiny-b", Variant::Safetensors)?;
    let pv = Tensor::zeros((16, 1536), DType::F32, &Device::Cpu)?;
    for grid in [
        [1, 4, 4],
        [1, 2, 8],
        [0, 4, 4],
        [1, 3, 4],
        [1, 4, 5],
        [1, 100_000, 2],
    ] {
        let bad = sightline::PreprocessedImage {
            pixel_values: pv.clone(),
            grid_thw: grid,
        };
        let r = model.encode_image(&bad);
        // [1,4,4] and [1,2,8] match the 16 patches and are valid.
        ensure!(
            r.is_ok() == (grid == [1, 4, 4] || grid == [1, 2, 8]),
            "{grid:?}: {r:?}"
        );
    }
    Ok(())
}

#[test]
fn legacy_tensor_names_load_like_the_current_ones() -> Result<()> {
    let tensors: std::collections::HashMap<String, Tensor> = tiny_b_tensors()?
        .into_iter()
        .map(|(name, t)| {
            let name = name
                .replace("model.language_model.", "model.")
                .replace("model.visual.", "visual.");
            (name, t)
        })
        .collect();
    let dir = dir_with(&tensors)?;
    let mut legacy = load_dir(dir.path())?;
    let mut current = load("tiny-b", Variant::Safetensors)?;
    let ids = [151644, 872, 198, 9707, 151645];
    let d = max_abs_diff(&legacy.feed(&ids, &[])?, &current.feed(&ids, &[])?)?;
    ensure!(d == 0.0, "legacy names differ by {d}");
    Ok(())
}

#[test]
fn info_reports_dimensions_and_storage_types_without_loading() -> Result<()> {
    use sightline::model::qwen3_vl::WeightSource;
    let b = fixtures().join("tiny-b");
    let ws = WeightSource::open(&LoadOptions::new(ModelSource::Gguf {
        text: b.join("tiny-b-q8_0.gguf"),
        mmproj: b.join("mmproj-tiny-b-q8_0.gguf"),
    }))?;
    let info = ws.info();
    ensure!(info.tensor_count == 25 + 40, "{info:?}");
    ensure!(
        info.storage_types.get("Q8_0").copied().unwrap_or(0) > 0,
        "{info:?}"
    );
    ensure!(info.config.text.num_hidden_layers == 2 && !info.config.text.tie_word_embeddings);
    let mut st = WeightSource::open(&LoadOptions::new(ModelSource::Safetensors { dir: b }))?.info();
    // GGUF stores the epsilon as f32.
    st.config.text.rms_norm_eps = st.config.text.rms_norm_eps as f32 as f64;
    ensure!(
        st.config == info.config,
        "GGUF and safetensors configs differ:\n{st:?}\n{info:?}"
    );
    Ok(())
}
