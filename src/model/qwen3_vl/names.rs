//! Qwen3-VL's tensor names: the Hugging Face checkpoint names the model code asks for, and
//! the names llama.cpp's converter gives the same tensors in a GGUF pair
//! (`gguf-py/gguf/constants.py` TENSOR_NAMES and `conversion/qwen3vl.py`). One table, read
//! by the loader ([`gguf_name`]) and by `sightline bench`, which writes GGUF files.

use crate::model::weights::GgufPart;

/// Per text layer: checkpoint module (under `model.language_model.layers.N.`) → GGUF name
/// (under `blk.N.`).
pub const TEXT_LAYER_NAMES: &[(&str, &str)] = &[
    ("input_layernorm", "attn_norm"),
    ("post_attention_layernorm", "ffn_norm"),
    ("self_attn.q_proj", "attn_q"),
    ("self_attn.k_proj", "attn_k"),
    ("self_attn.v_proj", "attn_v"),
    ("self_attn.o_proj", "attn_output"),
    ("self_attn.q_norm", "attn_q_norm"),
    ("self_attn.k_norm", "attn_k_norm"),
    ("mlp.gate_proj", "ffn_gate"),
    ("mlp.up_proj", "ffn_up"),
    ("mlp.down_proj", "ffn_down"),
];

/// Text tensors outside the layers: checkpoint name → GGUF name (text file).
pub const TEXT_GLOBAL_NAMES: &[(&str, &str)] = &[
    (
        "model.language_model.embed_tokens.weight",
        "token_embd.weight",
    ),
    ("model.language_model.norm.weight", "output_norm.weight"),
    ("lm_head.weight", "output.weight"),
];

/// Per vision block: checkpoint module (under `model.visual.blocks.N.`) → GGUF name (under
/// `v.blk.N.`).
pub const VISION_BLOCK_NAMES: &[(&str, &str)] = &[
    ("norm1", "ln1"),
    ("norm2", "ln2"),
    ("attn.qkv", "attn_qkv"),
    ("attn.proj", "attn_out"),
    ("mlp.linear_fc1", "ffn_up"),
    ("mlp.linear_fc2", "ffn_down"),
];

/// Per DeepStack merger: checkpoint module (under `model.visual.deepstack_merger_list.I.`)
/// → GGUF name (under `v.deepstack.L.`, L the vision layer merger I taps).
pub const DEEPSTACK_NAMES: &[(&str, &str)] = &[
    ("norm", "norm"),
    ("linear_fc1", "fc1"),
    ("linear_fc2", "fc2"),
];

/// Vision modules outside the blocks: checkpoint module (under `model.visual.`) → GGUF
/// module (mmproj file).
pub const VISION_GLOBAL_NAMES: &[(&str, &str)] = &[
    ("pos_embed", "v.position_embd"),
    ("patch_embed.proj", "v.patch_embd"),
    ("merger.norm", "v.post_ln"),
    ("merger.linear_fc1", "mm.0"),
    ("merger.linear_fc2", "mm.2"),
];

/// The GGUF name of the Conv3d patch embedding's temporal slice `t`: llama.cpp stores the
/// `(hidden, C, T, P, P)` kernel as T slices of `(hidden, C, P, P)`.
pub fn patch_embed_slice(t: usize) -> String {
    if t == 0 {
        "v.patch_embd.weight".to_string()
    } else {
        format!("v.patch_embd.weight.{t}")
    }
}

fn lookup<'a>(table: &'a [(&str, &str)], hf: &str) -> Option<&'a str> {
    table.iter().find(|(h, _)| *h == hf).map(|(_, g)| *g)
}

/// The GGUF name of text layer `layer`'s `tensor` (a checkpoint name relative to the layer,
/// such as `self_attn.q_proj.weight`), as llama.cpp's converter writes it.
pub fn text_layer_gguf(layer: usize, tensor: &str) -> Option<String> {
    let (module, suffix) = tensor.rsplit_once('.')?;
    Some(format!(
        "blk.{layer}.{}.{suffix}",
        lookup(TEXT_LAYER_NAMES, module)?
    ))
}

/// The GGUF name of vision block `block`'s `tensor` (relative to the block, such as
/// `attn.qkv.bias`).
pub fn vision_block_gguf(block: usize, tensor: &str) -> Option<String> {
    let (module, suffix) = tensor.rsplit_once('.')?;
    Some(format!(
        "v.blk.{block}.{}.{suffix}",
        lookup(VISION_BLOCK_NAMES, module)?
    ))
}

/// The GGUF name of the DeepStack merger that taps vision layer `layer`, for `tensor`
/// (relative to the merger, such as `linear_fc1.weight`). llama.cpp numbers the mergers by
/// the layer they tap.
pub fn deepstack_gguf(layer: usize, tensor: &str) -> Option<String> {
    let (module, suffix) = tensor.rsplit_once('.')?;
    Some(format!(
        "v.deepstack.{layer}.{}.{suffix}",
        lookup(DEEPSTACK_NAMES, module)?
    ))
}

/// The GGUF file and name of a checkpoint tensor; `deepstack_layers` are the vision layers
/// the DeepStack mergers tap (`deepstack_visual_indexes`). `None` for a name the converter
/// does not write.
pub fn gguf_name(name: &str, deepstack_layers: &[usize]) -> Option<(GgufPart, String)> {
    if let Some(g) = lookup(TEXT_GLOBAL_NAMES, name) {
        return Some((GgufPart::Text, g.to_string()));
    }
    if let Some(rest) = name.strip_prefix("model.language_model.layers.") {
        let (layer, tail) = rest.split_once('.')?;
        return Some((GgufPart::Text, text_layer_gguf(layer.parse().ok()?, tail)?));
    }
    let rest = name.strip_prefix("model.visual.")?;
    if let Some(b) = rest.strip_prefix("blocks.") {
        let (block, tail) = b.split_once('.')?;
        return Some((
            GgufPart::Mmproj,
            vision_block_gguf(block.parse().ok()?, tail)?,
        ));
    }
    if let Some(d) = rest.strip_prefix("deepstack_merger_list.") {
        let (i, tail) = d.split_once('.')?;
        let layer = *deepstack_layers.get(i.parse::<usize>().ok()?)?;
        return Some((GgufPart::Mmproj, deepstack_gguf(layer, tail)?));
    }
    let (module, suffix) = rest.rsplit_once('.')?;
    Some((
        GgufPart::Mmproj,
        format!("{}.{suffix}", lookup(VISION_GLOBAL_NAMES, module)?),
    ))
}

/// Other names a checkpoint tensor may carry: exports made before transformers moved
/// the decoder under `model.language_model` and the tower under `model.visual` (as
/// Qwen2-VL-era fine-tuning scripts still write them).
pub fn legacy_names(name: &str) -> Vec<String> {
    if let Some(rest) = name.strip_prefix("model.language_model.") {
        vec![
            format!("model.{rest}"),
            format!("language_model.model.{rest}"),
        ]
    } else if let Some(rest) = name.strip_prefix("model.visual.") {
        vec![format!("visual.{rest}")]
    } else if name == "lm_head.weight" {
        vec!["language_model.lm_head.weight".to_string()]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_names_map_to_the_converters_gguf_names() {
        let ds = [5, 11, 17];
        let cases = [
            (
                "model.language_model.embed_tokens.weight",
                GgufPart::Text,
                "token_embd.weight",
            ),
            (
                "model.language_model.norm.weight",
                GgufPart::Text,
                "output_norm.weight",
            ),
            ("lm_head.weight", GgufPart::Text, "output.weight"),
            (
                "model.language_model.layers.3.self_attn.o_proj.weight",
                GgufPart::Text,
                "blk.3.attn_output.weight",
            ),
            (
                "model.language_model.layers.0.post_attention_layernorm.weight",
                GgufPart::Text,
                "blk.0.ffn_norm.weight",
            ),
            (
                "model.visual.blocks.2.attn.qkv.bias",
                GgufPart::Mmproj,
                "v.blk.2.attn_qkv.bias",
            ),
            (
                "model.visual.deepstack_merger_list.1.linear_fc2.weight",
                GgufPart::Mmproj,
                "v.deepstack.11.fc2.weight",
            ),
            (
                "model.visual.merger.linear_fc2.bias",
                GgufPart::Mmproj,
                "mm.2.bias",
            ),
            (
                "model.visual.pos_embed.weight",
                GgufPart::Mmproj,
                "v.position_embd.weight",
            ),
        ];
        for (hf, part, gguf) in cases {
            assert_eq!(gguf_name(hf, &ds), Some((part, gguf.to_string())), "{hf}");
        }
        assert_eq!(
            gguf_name("model.visual.deepstack_merger_list.3.norm.weight", &ds),
            None
        );
        assert_eq!(
            gguf_name("model.language_model.layers.0.mlp.unknown.weight", &ds),
            None
        );
    }
}
