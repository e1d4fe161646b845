//! The `f16` bench format: a Hugging Face safetensors directory (`config.json`, the
//! tokenizer, `model.safetensors`) with a real model's dimensions.

use crate::bench::planned::{tensor, FileKind, Init, PlannedFile, PlannedTensor};
use crate::bench::shape::ModelShape;
use crate::bench::vocab::TOKENIZER_JSON_GZ;
use crate::error::{Error, Result};
use crate::model::qwen3_vl::Qwen3VlConfig;
use candle_core::quantized::GgmlDType;

/// The checkpoint tensors of the safetensors layout (transformers' names), all F16.
fn safetensors_tensors(cfg: &Qwen3VlConfig) -> Vec<PlannedTensor> {
    let t = &cfg.text;
    let v = &cfg.vision;
    let f16 = GgmlDType::F16;
    let w = |name: String, shape: Vec<usize>| tensor(name, shape, f16, Init::Normal);
    let ones = |name: String, n: usize| tensor(name, vec![n], f16, Init::Ones);
    let zeros = |name: String, n: usize| tensor(name, vec![n], f16, Init::Zeros);
    let (h, hd, ff) = (t.hidden_size, t.head_dim, t.intermediate_size);
    let (q, kv) = (t.num_attention_heads * hd, t.num_key_value_heads * hd);
    let lm = "model.language_model";
    let mut out = vec![w(
        format!("{lm}.embed_tokens.weight"),
        vec![t.vocab_size, h],
    )];
    for i in 0..t.num_hidden_layers {
        let p = format!("{lm}.layers.{i}");
        out.push(ones(format!("{p}.input_layernorm.weight"), h));
        out.push(ones(format!("{p}.post_attention_layernorm.weight"), h));
        out.push(w(format!("{p}.self_attn.q_proj.weight"), vec![q, h]));
        out.push(w(format!("{p}.self_attn.k_proj.weight"), vec![kv, h]));
        out.push(w(format!("{p}.self_attn.v_proj.weight"), vec![kv, h]));
        out.push(w(format!("{p}.self_attn.o_proj.weight"), vec![h, q]));
        out.push(ones(format!("{p}.self_attn.q_norm.weight"), hd));
        out.push(ones(format!("{p}.self_attn.k_norm.weight"), hd));
        out.push(w(format!("{p}.mlp.gate_proj.weight"), vec![ff, h]));
        out.push(w(format!("{p}.mlp.up_proj.weight"), vec![ff, h]));
        out.push(w(format!("{p}.mlp.down_proj.weight"), vec![h, ff]));
    }
    out.push(ones(format!("{lm}.norm.weight"), h));
    if !t.tie_word_embeddings {
        out.push(w("lm_head.weight".into(), vec![t.vocab_size, h]));
    }
    let vp = "model.visual";
    let (d, vff) = (v.hidden_size, v.intermediate_size);
    let merged = d * v.spatial_merge_size * v.spatial_merge_size;
    out.push(w(
        format!("{vp}.patch_embed.proj.weight"),
        vec![
            d,
            v.in_channels,
            v.temporal_patch_size,
            v.patch_size,
            v.patch_size,
        ],
    ));
    out.push(zeros(format!("{vp}.patch_embed.proj.bias"), d));
    out.push(w(
        format!("{vp}.pos_embed.weight"),
        vec![v.num_position_embeddings, d],
    ));
    let linear = |out: &mut Vec<PlannedTensor>, name: String, rows: usize, cols: usize| {
        out.push(w(format!("{name}.weight"), vec![rows, cols]));
        out.push(zeros(format!("{name}.bias"), rows));
    };
    let norm = |out: &mut Vec<PlannedTensor>, name: String, n: usize| {
        out.push(ones(format!("{name}.weight"), n));
        out.push(zeros(format!("{name}.bias"), n));
    };
    for i in 0..v.depth {
        let p = format!("{vp}.blocks.{i}");
        norm(&mut out, format!("{p}.norm1"), d);
        norm(&mut out, format!("{p}.norm2"), d);
        linear(&mut out, format!("{p}.attn.qkv"), 3 * d, d);
        linear(&mut out, format!("{p}.attn.proj"), d, d);
        linear(&mut out, format!("{p}.mlp.linear_fc1"), vff, d);
        linear(&mut out, format!("{p}.mlp.linear_fc2"), d, vff);
    }
    // A patch merger: a norm of `norm_width` (the main merger normalizes before merging
    // patches, the DeepStack mergers after), then two linears.
    let merger = |out: &mut Vec<PlannedTensor>, name: String, norm_width: usize| {
        norm(out, format!("{name}.norm"), norm_width);
        linear(out, format!("{name}.linear_fc1"), merged, merged);
        linear(out, format!("{name}.linear_fc2"), v.out_hidden_size, merged);
    };
    merger(&mut out, format!("{vp}.merger"), d);
    for i in 0..v.deepstack_visual_indexes.len() {
        merger(&mut out, format!("{vp}.deepstack_merger_list.{i}"), merged);
    }
    out
}

/// A transformers 5.x `config.json` for `cfg`.
pub fn config_json(cfg: &Qwen3VlConfig) -> serde_json::Value {
    let t = &cfg.text;
    let v = &cfg.vision;
    serde_json::json!({
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "model_type": "qwen3_vl",
        "image_token_id": cfg.image_token_id,
        "vision_start_token_id": cfg.vision_start_token_id,
        "vision_end_token_id": cfg.vision_end_token_id,
        "tie_word_embeddings": t.tie_word_embeddings,
        "text_config": {
            "model_type": "qwen3_vl_text",
            "vocab_size": t.vocab_size,
            "hidden_size": t.hidden_size,
            "intermediate_size": t.intermediate_size,
            "num_hidden_layers": t.num_hidden_layers,
            "num_attention_heads": t.num_attention_heads,
            "num_key_value_heads": t.num_key_value_heads,
            "head_dim": t.head_dim,
            "rms_norm_eps": t.rms_norm_eps,
            "hidden_act": "silu",
            "attention_bias": false,
            "max_position_embeddings": t.max_position_embeddings,
            "tie_word_embeddings": t.tie_word_embeddings,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": t.rope_theta,
                "mrope_section": t.mrope_section,
                "mrope_interleaved": t.mrope_interleaved,
            },
        },
        "vision_config": {
            "model_type": "qwen3_vl",
            "depth": v.depth,
            "hidden_size": v.hidden_size,
            "intermediate_size": v.intermediate_size,
            "num_heads": v.num_heads,
            "patch_size": v.patch_size,
            "temporal_patch_size": v.temporal_patch_size,
            "spatial_merge_size": v.spatial_merge_size,
            "out_hidden_size": v.out_hidden_size,
            "in_channels": v.in_channels,
            "num_position_embeddings": v.num_position_embeddings,
            "deepstack_visual_indexes": v.deepstack_visual_indexes,
            "hidden_act": "gelu_pytorch_tanh",
        },
    })
}

pub(crate) fn safetensors_files(
    shape: ModelShape,
    cfg: &Qwen3VlConfig,
) -> Result<Vec<PlannedFile>> {
    let raw = |name: &str, raw: Vec<u8>| PlannedFile {
        name: name.to_string(),
        kind: FileKind::Raw,
        metadata: Vec::new(),
        tensors: Vec::new(),
        raw,
    };
    let config = serde_json::to_vec_pretty(&config_json(cfg))
        .map_err(|e| Error::internal_caused(format!("config.json for {shape}"), e))?;
    Ok(vec![
        raw("config.json", config),
        raw("tokenizer.json.gz", TOKENIZER_JSON_GZ.to_vec()),
        PlannedFile {
            name: "model.safetensors".into(),
            kind: FileKind::Safetensors,
            metadata: Vec::new(),
            tensors: safetensors_tensors(cfg),
            raw: Vec::new(),
        },
    ])
}
