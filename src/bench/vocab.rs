//! The vocabulary every generated bench model carries: the real Qwen tokenizer, and the
//! `tokenizer.ggml.*` arrays llama.cpp's converter writes for it.

use std::io::Read;

use candle_core::quantized::gguf_file::Value;

use crate::error::{Error, Result};

/// The Qwen tokenizer (real vocabulary, 151,669 tokens) every generated model carries:
/// the committed fixture, gzip-compressed.
pub const TOKENIZER_JSON_GZ: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/models/fixtures/tokenizer.json.gz"
));

/// llama.cpp's token types (`llama_token_type`).
const TOKEN_NORMAL: i32 = 1;
const TOKEN_CONTROL: i32 = 3;
const TOKEN_USER_DEFINED: i32 = 4;
const TOKEN_UNUSED: i32 = 5;

/// The `tokenizer.ggml.*` arrays llama.cpp's converter writes for the Qwen tokenizer.
#[derive(Debug, Clone)]
pub struct GgufVocab {
    /// Token strings by id, padded to the logits width with `[PAD<id>]`.
    pub tokens: Vec<Value>,
    /// llama.cpp token types (normal, control, user-defined, unused for padding).
    pub token_types: Vec<Value>,
    /// Merges as `"left right"`.
    pub merges: Vec<Value>,
    /// `<|im_end|>`.
    pub eos: u32,
    /// `<|endoftext|>`.
    pub padding: u32,
}

/// Build the converter's vocabulary arrays from [`TOKENIZER_JSON_GZ`], padded to `width`.
pub fn gguf_vocab(width: usize) -> Result<GgufVocab> {
    const WHAT: &str = "embedded tokenizer.json.gz";
    let bad = |reason: String| Error::tokenizer(format!("{WHAT}: {reason}"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(TOKENIZER_JSON_GZ)
        .read_to_string(&mut text)
        .map_err(|e| Error::tokenizer_caused(WHAT, e))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::tokenizer_caused(WHAT, e))?;
    let model = &json["model"];
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| bad("no model.vocab".into()))?;
    let mut tokens: Vec<Option<(String, i32)>> = vec![None; width];
    let mut put = |id: u64, token: &str, kind: i32| -> Result<()> {
        let slot = tokens
            .get_mut(id as usize)
            .ok_or_else(|| bad(format!("token id {id} is past the logits width {width}")))?;
        *slot = Some((token.to_string(), kind));
        Ok(())
    };
    for (token, id) in vocab {
        let id = id.as_u64().ok_or_else(|| bad(format!("id of {token:?}")))?;
        put(id, token, TOKEN_NORMAL)?;
    }
    let (mut eos, mut padding) = (None, None);
    for added in json["added_tokens"].as_array().into_iter().flatten() {
        let (Some(id), Some(content)) = (added["id"].as_u64(), added["content"].as_str()) else {
            return Err(bad("an added token without id or content".into()));
        };
        let special = added["special"].as_bool().unwrap_or(false);
        put(
            id,
            content,
            if special {
                TOKEN_CONTROL
            } else {
                TOKEN_USER_DEFINED
            },
        )?;
        match content {
            "<|im_end|>" => eos = Some(id as u32),
            "<|endoftext|>" => padding = Some(id as u32),
            _ => {}
        }
    }
    let (tokens, token_types) = tokens
        .into_iter()
        .enumerate()
        .map(|(id, t)| {
            let (s, k) = t.unwrap_or_else(|| (format!("[PAD{id}]"), TOKEN_UNUSED));
            (Value::String(s), Value::I32(k))
        })
        .unzip();
    let merges = model["merges"]
        .as_array()
        .ok_or_else(|| bad("no model.merges".into()))?
        .iter()
        .map(|m| match m {
            serde_json::Value::String(s) => Ok(Value::String(s.clone())),
            serde_json::Value::Array(pair) => {
                let parts: Vec<&str> = pair.iter().filter_map(|p| p.as_str()).collect();
                Ok(Value::String(parts.join(" ")))
            }
            other => Err(bad(format!("merge {other}"))),
        })
        .collect::<Result<_>>()?;
    Ok(GgufVocab {
        tokens,
        token_types,
        merges,
        eos: eos.ok_or_else(|| bad("no <|im_end|>".into()))?,
        padding: padding.ok_or_else(|| bad("no <|endoftext|>".into()))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocab_arrays_equal_the_converter_made_fixture() -> anyhow::Result<()> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/fixtures/tiny-a/tiny-a-f16.gguf"
        );
        let content =
            candle_core::quantized::gguf_file::Content::read(&mut std::fs::File::open(path)?)?;
        let ours = gguf_vocab(crate::bench::shape::QWEN3_VL_VOCAB)?;
        let strings = |v: &[Value]| -> Vec<String> {
            v.iter()
                .map(|x| x.to_string().cloned().unwrap_or_default())
                .collect()
        };
        let theirs = |k: &str| content.metadata[k].to_vec().cloned();
        assert_eq!(
            strings(&ours.tokens),
            strings(&theirs("tokenizer.ggml.tokens")?)
        );
        assert_eq!(
            strings(&ours.merges),
            strings(&theirs("tokenizer.ggml.merges")?)
        );
        let types =
            |v: &[Value]| -> Vec<i32> { v.iter().map(|x| x.to_i32().unwrap_or(-1)).collect() };
        assert_eq!(
            types(&ours.token_types),
            types(&theirs("tokenizer.ggml.token_type")?)
        );
        assert_eq!(
            Value::U32(ours.eos).to_u32()?,
            content.metadata["tokenizer.ggml.eos_token_id"].to_u32()?
        );
        Ok(())
    }
}
