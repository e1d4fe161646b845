//! Loading the model's `tokenizer.json` and the Qwen special tokens Sightline relies on.

use std::io::Read;
use std::path::Path;

use candle_core::quantized::gguf_file;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use crate::error::{Error, Result};

/// Largest decompressed `tokenizer.json.gz`: Qwen's tokenizer.json is ~11 MB; a gzip bomb
/// (3 MB expanding to 3 GB) stops here.
pub const MAX_TOKENIZER_JSON_BYTES: u64 = 64 << 20;

/// Read a `tokenizer.json`, or a gzip-compressed `tokenizer.json.gz` (decompressed with a cap
/// of [`MAX_TOKENIZER_JSON_BYTES`]). The file is opened through [`crate::input_file`].
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer> {
    let json = read_tokenizer_json(path)?;
    Tokenizer::from_bytes(&json).map_err(|e| Error::tokenizer_caused(path.display().to_string(), e))
}

/// The JSON text of a `tokenizer.json` or `tokenizer.json.gz`.
pub(crate) fn read_tokenizer_json(path: &Path) -> Result<Vec<u8>> {
    let bytes = crate::input_file::read_bytes(path, crate::input_file::InputKind::Tokenizer)?;
    if path.extension().is_none_or(|ext| ext != "gz") {
        return Ok(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len() * 6);
    flate2::read::GzDecoder::new(bytes.as_slice())
        .take(MAX_TOKENIZER_JSON_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::tokenizer_caused(format!("{}: not valid gzip", path.display()), e))?;
    if out.len() as u64 > MAX_TOKENIZER_JSON_BYTES {
        return Err(Error::tokenizer(format!(
            "{}: decompresses to more than {MAX_TOKENIZER_JSON_BYTES} bytes",
            path.display()
        )));
    }
    Ok(out)
}

/// A tokenizer's vocabulary without the tokenizer: each id's token as the file writes it
/// (for byte-level BPE, in the GPT-2 byte alphabet) and which ids are added tokens.
///
/// Read straight from the file the tokenizer is built from, in a fraction of the time the
/// tokenizer takes to build (its merges are neither parsed into pairs nor hashed), so the
/// grammar's token environment can be built from it while the tokenizer is
/// (`LocalPlanner::load`). [`Vocabulary::of`] reads a built tokenizer the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocabulary {
    /// `(token, id)` of every token, added ones included (ids unique).
    pub tokens: Vec<(String, u32)>,
    /// Ids of the added tokens (`<|im_end|>`, `<think>`, …).
    pub added: std::collections::HashSet<u32>,
    /// Whether the tokenizer decodes byte-level BPE (the only kind the grammar supports).
    pub byte_level: bool,
}

impl Vocabulary {
    /// The vocabulary of a built tokenizer.
    pub fn of(tokenizer: &Tokenizer) -> Self {
        let byte_level = tokenizer
            .get_decoder()
            .and_then(|d| serde_json::to_value(d).ok())
            .is_some_and(|d| d["type"] == "ByteLevel");
        Vocabulary {
            tokens: tokenizer.get_vocab(true).into_iter().collect(),
            added: tokenizer.get_added_tokens_decoder().into_keys().collect(),
            byte_level,
        }
    }

    /// The vocabulary of a `tokenizer.json` (or `.json.gz`), as [`load_tokenizer`] would
    /// build it: the model's vocabulary and the added tokens.
    pub fn from_tokenizer_json(path: &Path) -> Result<Self> {
        #[derive(serde::Deserialize)]
        struct File {
            model: Model,
            #[serde(default)]
            added_tokens: Vec<Added>,
            decoder: Option<Decoder>,
        }
        #[derive(serde::Deserialize)]
        struct Model {
            #[serde(default)]
            vocab: std::collections::HashMap<String, u32>,
        }
        #[derive(serde::Deserialize)]
        struct Added {
            id: u32,
            content: String,
        }
        #[derive(serde::Deserialize)]
        struct Decoder {
            #[serde(rename = "type")]
            kind: String,
        }
        let json = read_tokenizer_json(path)?;
        let file: File = serde_json::from_slice(&json)
            .map_err(|e| Error::tokenizer_caused(path.display().to_string(), e))?;
        let mut by_text = file.model.vocab;
        let mut added = std::collections::HashSet::new();
        for token in file.added_tokens {
            added.insert(token.id);
            by_text.insert(token.content, token.id);
        }
        Ok(Vocabulary {
            tokens: by_text.into_iter().collect(),
            added,
            byte_level: file.decoder.is_some_and(|d| d.kind == "ByteLevel"),
        })
    }

    /// The vocabulary a GGUF file carries, as [`tokenizer_from_gguf`] would build it.
    pub fn from_gguf(content: &gguf_file::Content, path: &Path) -> Result<Self> {
        let mut vocabulary = Vocabulary {
            tokens: Vec::new(),
            added: std::collections::HashSet::new(),
            byte_level: true,
        };
        for (id, token, kind) in gguf_tokens(content, path)? {
            match kind {
                GgufToken::Normal => {}
                GgufToken::Added { .. } => {
                    vocabulary.added.insert(id);
                }
            }
            vocabulary.tokens.push((token, id));
        }
        Ok(vocabulary)
    }
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
pub(crate) const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// GGUF token types (llama.cpp's `llama_token_type`).
const TOKEN_TYPE_NORMAL: i32 = 1;
const TOKEN_TYPE_CONTROL: i32 = 3;
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// What a GGUF token is to the tokenizer.
enum GgufToken {
    /// Part of the BPE vocabulary.
    Normal,
    /// An added token (`special` for control tokens).
    Added { special: bool },
}

/// A GGUF metadata value, or a tokenizer error naming the file and key.
fn gguf_value<'a>(
    content: &'a gguf_file::Content,
    path: &Path,
    key: &str,
) -> Result<&'a gguf_file::Value> {
    content.metadata.get(key).ok_or_else(|| {
        Error::tokenizer(format!(
            "{}: GGUF metadata key {key} is missing",
            path.display()
        ))
    })
}

/// A GGUF metadata array of strings.
fn gguf_strings(content: &gguf_file::Content, path: &Path, key: &str) -> Result<Vec<String>> {
    let err = |e: candle_core::Error| Error::tokenizer(format!("{}: {key}: {e}", path.display()));
    gguf_value(content, path, key)?
        .to_vec()
        .map_err(err)?
        .iter()
        .map(|v| v.to_string().cloned().map_err(err))
        .collect()
}

/// The tokens of the vocabulary a GGUF file carries (`tokenizer.ggml.*`), each with its id
/// and kind; llama.cpp's `[PAD…]` padding and unused token types are left out, as in the
/// model's own `tokenizer.json`. Only Qwen's byte-level BPE (`gpt2`/`qwen2`) is accepted.
fn gguf_tokens(content: &gguf_file::Content, path: &Path) -> Result<Vec<(u32, String, GgufToken)>> {
    let err = |reason: String| Error::tokenizer(format!("{}: {reason}", path.display()));
    let text = |key: &str| -> Result<String> {
        gguf_value(content, path, key)?
            .to_string()
            .cloned()
            .map_err(|e| err(format!("{key}: {e}")))
    };
    let (model, pre) = (text("tokenizer.ggml.model")?, text("tokenizer.ggml.pre")?);
    if model != "gpt2" || pre != "qwen2" {
        return Err(err(format!(
            "tokenizer {model}/{pre} is not supported: only Qwen's byte-level BPE (gpt2/qwen2)"
        )));
    }
    let tokens = gguf_strings(content, path, "tokenizer.ggml.tokens")?;
    let types: Vec<i32> = gguf_value(content, path, "tokenizer.ggml.token_type")?
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
    Ok(tokens
        .into_iter()
        .zip(types)
        .enumerate()
        .filter_map(|(id, (token, kind))| {
            let kind = match kind {
                TOKEN_TYPE_NORMAL => GgufToken::Normal,
                TOKEN_TYPE_CONTROL | TOKEN_TYPE_USER_DEFINED if !token.starts_with("[PAD") => {
                    GgufToken::Added {
                        special: kind == TOKEN_TYPE_CONTROL,
                    }
                }
                _ => return None,
            };
            Some((id as u32, token, kind))
        })
        .collect())
}

/// Rebuild the Hugging Face tokenizer a llama.cpp GGUF file carries (`tokenizer.ggml.*`).
///
/// Official GGUF repos ship no `tokenizer.json`; the GGUF holds the vocabulary, the merges
/// and the pre-tokenizer's name. Only byte-level BPE with the `qwen2` pre-tokenizer is
/// supported (every Qwen3-VL model). llama.cpp pads the vocabulary to the logits width with
/// `[PAD…]` tokens; they are left out, as in the model's own `tokenizer.json`.
///
/// The parts are built directly, as the `tokenizer.json` of a Qwen model describes them
/// (NFC; the Qwen2 split, then byte-level; byte-level post-processing and decoding; BPE with
/// empty prefix and suffix), rather than written to JSON and parsed again: that round trip
/// of 150k tokens and 290k merges was most of the tokenizer's start-up. Added tokens are
/// added in id order, as the JSON loader adds them, and each must land on its GGUF id.
pub fn tokenizer_from_gguf(content: &gguf_file::Content, path: &Path) -> Result<Tokenizer> {
    let err = |reason: String| Error::tokenizer(format!("{}: {reason}", path.display()));
    let mut vocab = Vocab::default();
    let mut added = Vec::new();
    for (id, token, kind) in gguf_tokens(content, path)? {
        match kind {
            GgufToken::Normal => {
                vocab.insert(token, id);
            }
            // As Qwen's tokenizer.json lists them: matched as they are, never normalized.
            GgufToken::Added { special } => {
                added.push((id, AddedToken::from(token, special).normalized(false)));
            }
        }
    }
    let merges = gguf_strings(content, path, "tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| match m.split_once(' ') {
            Some((a, b)) => Ok((a.to_string(), b.to_string())),
            None => Err(err(format!("merge {m:?} is not two tokens"))),
        })
        .collect::<Result<Vec<_>>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .continuing_subword_prefix(String::new())
        .end_of_word_suffix(String::new())
        .build()
        .map_err(|e| err(format!("BPE: {e}")))?;
    let split = Split::new(
        SplitPattern::Regex(QWEN2_PATTERN.to_string()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|e| err(format!("pre-tokenizer: {e}")))?;
    let byte_level = ByteLevel::new(false, false, false);
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer
        .with_normalizer(Some(NFC))
        .map_err(|e| err(format!("normalizer: {e}")))?
        .with_pre_tokenizer(Some(Sequence::new(vec![split.into(), byte_level.into()])))
        .with_post_processor(Some(byte_level))
        .with_decoder(Some(ByteLevel::new(true, true, true)));
    tokenizer
        .add_tokens(added.iter().map(|(_, t)| t.clone()))
        .map_err(|e| err(format!("added tokens: {e}")))?;
    for (id, token) in &added {
        let got = tokenizer.token_to_id(&token.content);
        if got != Some(*id) {
            return Err(err(format!(
                "added token {:?} has id {id} in the file but {got:?} in the vocabulary",
                token.content
            )));
        }
    }
    Ok(tokenizer)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tokenizer metadata of a GGUF file with `tokens` of `types` and `merges`.
    fn gguf_with(tokens: &[&str], types: &[i32], merges: &[&str]) -> gguf_file::Content {
        use gguf_file::Value;
        let strings =
            |v: &[&str]| Value::Array(v.iter().map(|t| Value::String(t.to_string())).collect());
        let metadata = [
            ("tokenizer.ggml.model", Value::String("gpt2".into())),
            ("tokenizer.ggml.pre", Value::String("qwen2".into())),
            ("tokenizer.ggml.tokens", strings(tokens)),
            (
                "tokenizer.ggml.token_type",
                Value::Array(types.iter().map(|t| Value::I32(*t)).collect()),
            ),
            ("tokenizer.ggml.merges", strings(merges)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        gguf_file::Content {
            magic: gguf_file::VersionedMagic::GgufV3,
            metadata,
            tensor_infos: Default::default(),
            tensor_data_offset: 0,
        }
    }

    #[test]
    fn a_gguf_vocabulary_builds_a_tokenizer_whose_added_tokens_keep_their_ids() -> Result<()> {
        let path = Path::new("small.gguf");
        let content = gguf_with(&["a", "b", "ab", "<|x|>"], &[1, 1, 1, 3], &["a b"]);
        let tok = tokenizer_from_gguf(&content, path)?;
        let ids = encode_ids(&tok, "abab<|x|>a", "test")?;
        assert_eq!(ids, [2, 2, 3, 0]);
        assert_eq!(tok.decode(&ids, true).ok().as_deref(), Some("ababa"));

        // An added token whose id the vocabulary cannot give it (an unused entry before it)
        // is refused, naming the token, instead of being shifted to another id.
        let gap = gguf_with(&["a", "b", "ab", "zz", "<|x|>"], &[1, 1, 1, 5, 3], &["a b"]);
        let e = tokenizer_from_gguf(&gap, path).err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("<|x|>") && e.contains("id 4")),
            "{e:?}"
        );
        // A merge that is not two tokens is an error naming it.
        let bad = gguf_with(&["a", "b", "ab"], &[1, 1, 1], &["ab"]);
        let e = tokenizer_from_gguf(&bad, path).err().map(|e| e.to_string());
        assert!(e.as_deref().is_some_and(|e| e.contains("\"ab\"")), "{e:?}");
        Ok(())
    }
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

    /// The vocabulary read straight from a file is the one the tokenizer built from that file
    /// has: the real Qwen `tokenizer.json.gz`, and the GGUF fixture made by llama.cpp's
    /// converter (whose `[PAD…]` padding both leave out).
    #[test]
    fn the_vocabulary_read_from_a_file_is_the_built_tokenizers() -> anyhow::Result<()> {
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures");
        let sorted = |mut v: Vocabulary| {
            v.tokens.sort();
            v
        };
        let json = fixtures.join("tokenizer.json.gz");
        let from_file = sorted(Vocabulary::from_tokenizer_json(&json)?);
        assert_eq!(from_file, sorted(Vocabulary::of(&load_tokenizer(&json)?)));
        assert_eq!(from_file.tokens.len(), 151_669);
        assert!(from_file.byte_level);

        let gguf = fixtures.join("tiny-a/tiny-a-f16.gguf");
        let content = gguf_file::Content::read(&mut std::fs::File::open(&gguf)?)?;
        let from_gguf = sorted(Vocabulary::from_gguf(&content, &gguf)?);
        let built = tokenizer_from_gguf(&content, &gguf)?;
        assert_eq!(from_gguf, sorted(Vocabulary::of(&built)));
        // The GGUF carries the same vocabulary as the model's own tokenizer.json.
        assert_eq!(from_gguf.tokens, from_file.tokens);
        assert_eq!(from_gguf.added, from_file.added);
        Ok(())
    }
}
