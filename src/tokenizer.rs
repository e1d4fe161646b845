//! Loading the model's `tokenizer.json` and the Qwen special tokens Sightline relies on.

use std::io::Read;
use std::path::Path;

use candle_core::quantized::gguf_file;
use tokenizers::Tokenizer;

use crate::error::{Error, Result};

/// Largest decompressed `tokenizer.json.gz`: Qwen's tokenizer.json is ~11 MB; a gzip bomb
/// (3 MB expanding to 3 GB) stops here.
pub const MAX_TOKENIZER_JSON_BYTES: u64 = 64 << 20;

/// Read a `tokenizer.json`, or a gzip-compressed `tokenizer.json.gz` (decompressed with a cap
/// of [`MAX_TOKENIZER_JSON_BYTES`]). The file is opened through [`crate::input_file`].
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer> {
    let bytes = crate::input_file::read_bytes(path, crate::input_file::InputKind::Tokenizer)?;
    let json = if path.extension().is_some_and(|ext| ext == "gz") {
        let mut out = Vec::with_capacity(bytes.len() * 6);
        flate2::read::GzDecoder::new(bytes.as_slice())
            .take(MAX_TOKENIZER_JSON_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|e| {
                Error::tokenizer_caused(format!("{}: not valid gzip", path.display()), e)
            })?;
        if out.len() as u64 > MAX_TOKENIZER_JSON_BYTES {
            return Err(Error::tokenizer(format!(
                "{}: decompresses to more than {MAX_TOKENIZER_JSON_BYTES} bytes",
                path.display()
            )));
        }
        out
    } else {
        bytes
    };
    Tokenizer::from_bytes(&json).map_err(|e| Error::tokenizer_caused(path.display().to_string(), e))
}

/// The ids of `text` (special tokens written in it are matched, none are added); `what`
/// names the text in the error.
pub fn encode_ids(tokenizer: &Tokenizer, text: &str, what: &str) -> Result<Vec<u32>> {
    Ok(tokenizer
        .encode(text, false)
        .map_err(|e| Error::tokenizer_caused(what, e))?
        .get_ids()
        .to_vec())
}

/// Ids of the Qwen3-VL chat and vision special tokens, looked up by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialTokens {
    /// `<|endoftext|>`
    pub end_of_text: u32,
    /// `<|im_start|>`
    pub im_start: u32,
    /// `<|im_end|>`
    pub im_end: u32,
    /// `<|vision_start|>`
    pub vision_start: u32,
    /// `<|vision_end|>`
    pub vision_end: u32,
    /// `<|image_pad|>`
    pub image_pad: u32,
}

impl SpecialTokens {
    /// Look the special tokens up in `tokenizer`; a missing one means the tokenizer is
    /// not a Qwen3-VL tokenizer.
    pub fn from_tokenizer(tokenizer: &Tokenizer) -> Result<Self> {
        let id = |name: &str| {
            tokenizer.token_to_id(name).ok_or_else(|| {
                Error::tokenizer(format!(
                    "special token {name} is missing: not a Qwen3-VL tokenizer"
                ))
            })
        };
        Ok(SpecialTokens {
            end_of_text: id("<|endoftext|>")?,
            im_start: id("<|im_start|>")?,
            im_end: id("<|im_end|>")?,
            vision_start: id("<|vision_start|>")?,
            vision_end: id("<|vision_end|>")?,
            image_pad: id("<|image_pad|>")?,
        })
    }
}

/// The pre-tokenizer pattern of Qwen2/Qwen3 (`tokenizer.ggml.pre = "qwen2"` in GGUF).
const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GGUF token types (llama.cpp's `llama_token_type`).
const TOKEN_TYPE_NORMAL: i32 = 1;
const TOKEN_TYPE_CONTROL: i32 = 3;
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// Rebuild the Hugging Face tokenizer a llama.cpp GGUF file carries (`tokenizer.ggml.*`).
///
/// Official GGUF repos ship no `tokenizer.json`; the GGUF holds the vocabulary, the merges
/// and the pre-tokenizer's name. Only byte-level BPE with the `qwen2` pre-tokenizer is
/// supported (every Qwen3-VL model). llama.cpp pads the vocabulary to the logits width with
/// `[PAD…]` tokens; they are left out, as in the model's own `tokenizer.json`.
pub fn tokenizer_from_gguf(content: &gguf_file::Content, path: &Path) -> Result<Tokenizer> {
    let err = |reason: String| Error::tokenizer(format!("{}: {reason}", path.display()));
    let get = |key: &str| {
        content
            .metadata
            .get(key)
            .ok_or_else(|| err(format!("GGUF metadata key {key} is missing")))
    };
    let model = get("tokenizer.ggml.model")?
        .to_string()
        .map_err(|e| err(format!("tokenizer.ggml.model: {e}")))?;
    let pre = get("tokenizer.ggml.pre")?
        .to_string()
        .map_err(|e| err(format!("tokenizer.ggml.pre: {e}")))?;
    if model != "gpt2" || pre != "qwen2" {
        return Err(err(format!(
            "tokenizer {model}/{pre} is not supported: only Qwen's byte-level BPE (gpt2/qwen2)"
        )));
    }
    let strings = |key: &str| -> Result<Vec<String>> {
        get(key)?
            .to_vec()
            .map_err(|e| err(format!("{key}: {e}")))?
            .iter()
            .map(|v| {
                v.to_string()
                    .cloned()
                    .map_err(|e| err(format!("{key}: {e}")))
            })
            .collect()
    };
    let tokens = strings("tokenizer.ggml.tokens")?;
    let merges = strings("tokenizer.ggml.merges")?;
    let types: Vec<i32> = get("tokenizer.ggml.token_type")?
        .to_vec()
        .map_err(|e| err(format!("tokenizer.ggml.token_type: {e}")))?
        .iter()
        .map(|v| {
            v.to_i32()
                .map_err(|e| err(format!("tokenizer.ggml.token_type: {e}")))
        })
        .collect::<Result<_>>()?;
    if types.len() != tokens.len() {
        return Err(err(format!(
            "{} token types for {} tokens",
            types.len(),
            tokens.len()
        )));
    }

    let mut vocab = serde_json::Map::new();
    let mut added = Vec::new();
    for (id, (token, kind)) in tokens.iter().zip(&types).enumerate() {
        match *kind {
            TOKEN_TYPE_NORMAL => {
                vocab.insert(token.clone(), id.into());
            }
            TOKEN_TYPE_CONTROL | TOKEN_TYPE_USER_DEFINED if !token.starts_with("[PAD") => {
                added.push(serde_json::json!({
                    "id": id, "content": token, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": *kind == TOKEN_TYPE_CONTROL,
                }));
            }
            _ => {}
        }
    }
    let byte_level = serde_json::json!({
        "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false,
    });
    let json = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": false},
            byte_level,
        ]},
        "post_processor": byte_level,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": false, "vocab": vocab, "merges": merges,
        },
    });
    Tokenizer::from_bytes(json.to_string().as_bytes()).map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// A `tokenizer.json` that does not parse is an [`Error::Tokenizer`] naming the file,
    /// reading exactly as the flattened message did, with the tokenizers crate's error kept
    /// as the source.
    #[test]
    fn a_tokenizer_json_that_does_not_parse_keeps_the_parsers_error_as_source() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = dir.path().join("tokenizer.json");
        let text = b"{ \"model\": not json";
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        let err = match load_tokenizer(&path) {
            Ok(_) => return Err(Error::internal("a broken tokenizer.json loaded")),
            Err(err) => err,
        };
        let parser_error = match Tokenizer::from_bytes(text) {
            Ok(_) => return Err(Error::internal("the text parsed")),
            Err(e) => e.to_string(),
        };
        assert!(matches!(err, Error::Tokenizer { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("tokenizer: {}: {parser_error}", path.display())
        );
        let source = err.source().map(ToString::to_string);
        assert_eq!(source.as_deref(), Some(parser_error.as_str()));
        Ok(())
    }
}
