//! Loading the model's `tokenizer.json` and the Qwen special tokens Sightline relies on.

use std::io::Read;
use std::path::Path;

use tokenizers::Tokenizer;

use crate::error::{Error, Result};

/// Read a `tokenizer.json`, or a gzip-compressed `tokenizer.json.gz`.
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let json = if path.extension().is_some_and(|ext| ext == "gz") {
        let mut out = Vec::with_capacity(bytes.len() * 6);
        flate2::read::GzDecoder::new(bytes.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| Error::Tokenizer(format!("{}: not valid gzip: {e}", path.display())))?;
        out
    } else {
        bytes
    };
    Tokenizer::from_bytes(&json)
        .map_err(|e| Error::Tokenizer(format!("{}: {e}", path.display())))
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
                Error::Tokenizer(format!(
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
