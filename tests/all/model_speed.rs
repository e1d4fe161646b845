//! Decode and prefill speed of our own code on a synthetic mid-size model (random
//! weights, real vocabulary width). Not a comparison with llama.cpp and not a timed
//! assertion: it catches pathologies (a step that copies the cache, a per-token
//! allocation that grows with the context). Ignored by default:
//!
//! `cargo test --release --test all model_speed:: -- --ignored --nocapture`

use std::collections::HashMap;
use std::time::Instant;

use anyhow::Result;
use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, Tensor};
use rand::{Rng, SeedableRng};
use sightline::{LoadOptions, ModelSource, Qwen3Vl, VisionLanguageModel};

const HIDDEN: usize = 1024;
const FF: usize = 3072;
const LAYERS: usize = 4;
const HEADS: usize = 16;
const KV_HEADS: usize = 8;
const HEAD_DIM: usize = 64;
const VOCAB: usize = 151_936;
const V_HIDDEN: usize = 256;

fn random(rng: &mut rand::rngs::StdRng, shape: &[usize]) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.random_range(-0.05f32..0.05)).collect();
    Ok(Tensor::from_vec(data, shape, &Device::Cpu)?.to_dtype(DType::F16)?)
}

fn synthetic_model(dir: &std::path::Path) -> Result<()> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut t: HashMap<String, Tensor> = HashMap::new();
    let ones = |n: usize| Tensor::ones(n, DType::F16, &Device::Cpu);
    let lm = "model.language_model";
    t.insert(
        format!("{lm}.embed_tokens.weight"),
        random(&mut rng, &[VOCAB, HIDDEN])?,
    );
    t.insert(format!("{lm}.norm.weight"), ones(HIDDEN)?);
    for l in 0..LAYERS {
        let p = format!("{lm}.layers.{l}");
        for (name, shape) in [
            ("self_attn.q_proj", [HEADS * HEAD_DIM, HIDDEN]),
            ("self_attn.k_proj", [KV_HEADS * HEAD_DIM, HIDDEN]),
            ("self_attn.v_proj", [KV_HEADS * HEAD_DIM, HIDDEN]),
            ("self_attn.o_proj", [HIDDEN, HEADS * HEAD_DIM]),
            ("mlp.gate_proj", [FF, HIDDEN]),
            ("mlp.up_proj", [FF, HIDDEN]),
            ("mlp.down_proj", [HIDDEN, FF]),
        ] {
            t.insert(format!("{p}.{name}.weight"), random(&mut rng, &shape)?);
        }
        for name in ["input_layernorm", "post_attention_layernorm"] {
            t.insert(format!("{p}.{name}.weight"), ones(HIDDEN)?);
        }
        t.insert(format!("{p}.self_attn.q_norm.weight"), ones(HEAD_DIM)?);
        t.insert(format!("{p}.self_attn.k_norm.weight"), ones(HEAD_DIM)?);
    }
    let v = "model.visual";
    let merged = 4 * V_HIDDEN;
    t.insert(
        format!("{v}.patch_embed.proj.weight"),
        random(&mut rng, &[V_HIDDEN, 3, 2, 16, 16])?,
    );
    t.insert(
        format!("{v}.patch_embed.proj.bias"),
        random(&mut rng, &[V_HIDDEN])?,
    );
    t.insert(
        format!("{v}.pos_embed.weight"),
        random(&mut rng, &[64, V_HIDDEN])?,
    );
    let p = format!("{v}.blocks.0");
    for (name, shape) in [
        ("attn.qkv", vec![3 * V_HIDDEN, V_HIDDEN]),
        ("attn.proj", vec![V_HIDDEN, V_HIDDEN]),
        ("mlp.linear_fc1", vec![V_HIDDEN, V_HIDDEN]),
        ("mlp.linear_fc2", vec![V_HIDDEN, V_HIDDEN]),
    ] {
        t.insert(format!("{p}.{name}.weight"), random(&mut rng, &shape)?);
        t.insert(format!("{p}.{name}.bias"), random(&mut rng, &shape[..1])?);
    }
    for name in ["norm1", "norm2"] {
        t.insert(format!("{p}.{name}.weight"), ones(V_HIDDEN)?);
        t.insert(format!("{p}.{name}.bias"), ones(V_HIDDEN)?);
    }
    t.insert(format!("{v}.merger.norm.weight"), ones(V_HIDDEN)?);
    t.insert(format!("{v}.merger.norm.bias"), ones(V_HIDDEN)?);
    t.insert(
        format!("{v}.merger.linear_fc1.weight"),
        random(&mut rng, &[merged, merged])?,
    );
    t.insert(
        format!("{v}.merger.linear_fc1.bias"),
        random(&mut rng, &[merged])?,
    );
    t.insert(
        format!("{v}.merger.linear_fc2.weight"),
        random(&mut rng, &[HIDDEN, merged])?,
    );
    t.insert(
        format!("{v}.merger.linear_fc2.bias"),
        random(&mut rng, &[HIDDEN])?,
    );
    candle_core::safetensors::save(&t, dir.join("model.safetensors"))?;
    let config = serde_json::json!({
        "model_type": "qwen3_vl",
        "tie_word_embeddings": true,
        "text_config": {
            "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FF,
            "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "rope_theta": 5_000_000.0,
            "rope_scaling": {"mrope_section": [12, 10, 10], "mrope_interleaved": true, "rope_type": "default"}
        },
        "vision_config": {
            "depth": 1, "hidden_size": V_HIDDEN, "intermediate_size": V_HIDDEN, "num_heads": 4,
            "out_hidden_size": HIDDEN, "num_position_embeddings": 64, "deepstack_visual_indexes": []
        }
    });
    std::fs::write(dir.join("config.json"), config.to_string())?;
    Ok(())
}

#[test]
#[ignore = "speed report, run by hand"]
fn decode_and_prefill_speed_on_a_synthetic_mid_size_model() -> Result<()> {
    let dir = tempfile::tempdir()?;
    synthetic_model(dir.path())?;
    for q in [GgmlDType::Q8_0, GgmlDType::Q4K] {
        let mut model = Qwen3Vl::load(&LoadOptions {
            quantize: Some(q),
            ..LoadOptions::new(ModelSource::Safetensors {
                dir: dir.path().to_path_buf(),
            })
        })?;
        // The LM head alone, the floor of a decode step at this vocabulary width.
        let head = candle_core::quantized::QTensor::quantize(
            &Tensor::ones((VOCAB, HIDDEN), DType::F32, &Device::Cpu)?,
            q,
        )?;
        let head = candle_core::quantized::QMatMul::from_qtensor(head)?;
        let x = Tensor::ones((1, HIDDEN), DType::F32, &Device::Cpu)?;
        let start = Instant::now();
        for _ in 0..16 {
            candle_core::Module::forward(&head, &x)?;
        }
        let head_ms = 1000.0 * start.elapsed().as_secs_f64() / 16.0;
        let prompt: Vec<u32> = (0..512).map(|i| 1000 + i).collect();
        let start = Instant::now();
        model.feed(&prompt, &[])?;
        let prefill = start.elapsed().as_secs_f64();
        let steps = 64;
        let start = Instant::now();
        for i in 0..steps {
            model.feed(&[2000 + i], &[])?;
        }
        let decode = start.elapsed().as_secs_f64();
        eprintln!(
            "{q:?} ({LAYERS} layers, hidden {HIDDEN}, vocab {VOCAB}): prefill {:.1} tok/s, decode {:.1} tok/s ({:.2} ms/step; LM head alone {head_ms:.2} ms)",
            512.0 / prefill,
            steps as f64 / decode,
            1000.0 * decode / steps as f64
        );
    }
    Ok(())
}
