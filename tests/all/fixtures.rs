//! The committed fixtures open and hold what the other tests rely on: the real Qwen
//! tokenizer, the tiny checkpoints in safetensors and GGUF, the golden outputs.

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use candle_core::quantized::gguf_file;
use sightline::tokenizer::{load_tokenizer, SpecialTokens};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures")
}

#[test]
fn tokenizer_encodes_the_chat_format_like_qwen() -> Result<()> {
    let tok = load_tokenizer(&fixtures().join("tokenizer.json.gz"))?;
    let ids = tok
        .encode("<|im_start|>user\nHello<|im_end|>", false)
        .map_err(anyhow::Error::msg)?
        .get_ids()
        .to_vec();
    assert_eq!(ids, [151644, 872, 198, 9707, 151645]);
    assert_eq!(tok.get_vocab_size(true), 151_669);
    Ok(())
}

#[test]
fn tokenizer_agrees_with_the_tiktoken_reference_on_longer_strings() -> Result<()> {
    let tok = load_tokenizer(&fixtures().join("tokenizer.json.gz"))?;
    let cases: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(
        fixtures().join("tokenizer_cases.json"),
    )?)?;
    ensure!(cases.len() >= 5, "expected at least five cases");
    for case in cases {
        let text = case["text"].as_str().context("text")?;
        let want: Vec<u32> = serde_json::from_value(case["ids"].clone())?;
        let got = tok.encode(text, false).map_err(anyhow::Error::msg)?;
        assert_eq!(got.get_ids(), want.as_slice(), "{text:?}");
        let round_trip = tok
            .decode(got.get_ids(), false)
            .map_err(anyhow::Error::msg)?;
        // NFC normalisation is the one change a round trip may make.
        assert_eq!(
            round_trip.chars().filter(|c| *c == '\u{301}').count(),
            0,
            "{text:?}"
        );
    }
    Ok(())
}

#[test]
fn special_tokens_have_the_qwen3_vl_ids() -> Result<()> {
    let tok = load_tokenizer(&fixtures().join("tokenizer.json.gz"))?;
    let special = SpecialTokens::from_tokenizer(&tok)?;
    assert_eq!(special.end_of_text, 151643);
    assert_eq!(special.im_start, 151644);
    assert_eq!(special.im_end, 151645);
    assert_eq!(special.vision_start, 151652);
    assert_eq!(special.vision_end, 151653);
    assert_eq!(special.image_pad, 151655);
    assert_eq!(tok.token_to_id("</think>"), Some(151668));
    Ok(())
}

#[test]
fn a_corrupt_gzip_tokenizer_is_a_tokenizer_error() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("sightline-tok-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("tokenizer.json.gz");
    std::fs::write(&path, b"\x1f\x8b\x08\x00not really gzip")?;
    let Err(err) = load_tokenizer(&path) else {
        anyhow::bail!("a corrupt gzip tokenizer loaded");
    };
    assert!(matches!(err, sightline::Error::Tokenizer { .. }), "{err}");
    assert!(err.to_string().contains("tokenizer.json.gz"), "{err}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn safetensor_names(path: &Path) -> Result<Vec<String>> {
    let bytes = std::fs::read(path)?;
    let st = safetensors::SafeTensors::deserialize(&bytes)?;
    let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
    names.sort();
    Ok(names)
}

#[test]
fn tiny_checkpoints_hold_the_expected_tensors() -> Result<()> {
    let a = safetensor_names(&fixtures().join("tiny-a/model.safetensors"))?;
    let b = safetensor_names(&fixtures().join("tiny-b/model.safetensors"))?;
    for names in [&a, &b] {
        for want in [
            "model.language_model.embed_tokens.weight",
            "model.language_model.layers.0.self_attn.q_norm.weight",
            "model.visual.patch_embed.proj.weight",
            "model.visual.pos_embed.weight",
            "model.visual.merger.linear_fc2.weight",
            "model.visual.deepstack_merger_list.0.linear_fc1.weight",
        ] {
            ensure!(names.iter().any(|n| n == want), "missing {want}");
        }
    }
    // tiny-a ties its LM head to the embeddings; tiny-b does not.
    ensure!(!a.iter().any(|n| n == "lm_head.weight"));
    ensure!(b.iter().any(|n| n == "lm_head.weight"));
    Ok(())
}

fn gguf_metadata(path: &Path) -> Result<gguf_file::Content> {
    let mut file = std::fs::File::open(path).with_context(|| path.display().to_string())?;
    Ok(gguf_file::Content::read(&mut file)?)
}

#[test]
fn gguf_fixtures_carry_qwen3vl_metadata_and_tensors() -> Result<()> {
    for (text, mmproj, layers) in [
        ("tiny-a/tiny-a-f16.gguf", "tiny-a/mmproj-tiny-a-f16.gguf", 3),
        (
            "tiny-b/tiny-b-q8_0.gguf",
            "tiny-b/mmproj-tiny-b-q8_0.gguf",
            2,
        ),
    ] {
        let content = gguf_metadata(&fixtures().join(text))?;
        let arch = content.metadata["general.architecture"].to_string()?;
        assert_eq!(arch, "qwen3vl");
        assert_eq!(
            content.metadata["qwen3vl.block_count"].to_u32()?,
            layers,
            "{text}"
        );
        ensure!(content
            .metadata
            .contains_key("qwen3vl.rope.dimension_sections"));
        ensure!(content.tensor_infos.contains_key("token_embd.weight"));
        ensure!(content
            .tensor_infos
            .contains_key("blk.0.attn_q_norm.weight"));
        let vocab = content.metadata["tokenizer.ggml.tokens"].to_vec()?.len();
        assert_eq!(vocab, 151_936, "{text}");

        let vision = gguf_metadata(&fixtures().join(mmproj))?;
        assert_eq!(vision.metadata["general.architecture"].to_string()?, "clip");
        ensure!(vision.tensor_infos.contains_key("v.patch_embd.weight"));
        ensure!(vision.tensor_infos.contains_key("v.position_embd.weight"));
    }
    let q8 = gguf_metadata(&fixtures().join("tiny-b/tiny-b-q8_0.gguf"))?;
    assert_eq!(
        q8.tensor_infos["blk.0.ffn_up.weight"].ggml_dtype,
        candle_core::quantized::GgmlDType::Q8_0
    );
    Ok(())
}

#[test]
fn golden_outputs_match_their_prompts() -> Result<()> {
    for ckpt in ["tiny-a", "tiny-b"] {
        for case in ["ui_exact", "ui_resize", "ui_wide", "text"] {
            let path = fixtures().join(format!("{ckpt}/golden/{case}.safetensors"));
            let tensors = candle_core::safetensors::load(&path, &candle_core::Device::Cpu)?;
            let n = tensors["input_ids"].dim(0)?;
            assert_eq!(tensors["logits_columns"].dim(0)?, n, "{ckpt}/{case}");
            assert_eq!(tensors["position_ids"].dims(), [3, n], "{ckpt}/{case}");
            assert_eq!(tensors["logits_last"].dim(0)?, 151_936);
            assert_eq!(tensors["greedy"].dim(0)?, 16);
        }
    }
    Ok(())
}

#[test]
fn the_tokenizer_inside_a_gguf_encodes_like_tokenizer_json() -> Result<()> {
    let reference = load_tokenizer(&fixtures().join("tokenizer.json.gz"))?;
    for file in ["tiny-a/tiny-a-f16.gguf", "tiny-b/tiny-b-q8_0.gguf"] {
        let path = fixtures().join(file);
        let tok = sightline::tokenizer::tokenizer_from_gguf(&gguf_metadata(&path)?, &path)?;
        assert_eq!(
            tok.get_vocab_size(true),
            reference.get_vocab_size(true),
            "{file}"
        );
        let cases: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(
            fixtures().join("tokenizer_cases.json"),
        )?)?;
        for case in cases {
            let text = case["text"].as_str().context("text")?;
            let want = reference.encode(text, false).map_err(anyhow::Error::msg)?;
            let got = tok.encode(text, false).map_err(anyhow::Error::msg)?;
            assert_eq!(got.get_ids(), want.get_ids(), "{file}: {text:?}");
            let decoded = |t: &tokenizers::Tokenizer, skip| t.decode(want.get_ids(), skip);
            for skip in [false, true] {
                assert_eq!(
                    decoded(&tok, skip).map_err(anyhow::Error::msg)?,
                    decoded(&reference, skip).map_err(anyhow::Error::msg)?,
                    "{file}: decoding {text:?}"
                );
            }
        }
        // Special and added tokens inside text: the chat format, a thought, a tool call.
        let chat = "<|im_start|>system\nYou act.<|im_end|>\n<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Open it<|im_end|>\n<|im_start|>assistant\n<think>\nok</think>\n<tool_call>{}</tool_call><|endoftext|>";
        let want = reference.encode(chat, false).map_err(anyhow::Error::msg)?;
        let got = tok.encode(chat, false).map_err(anyhow::Error::msg)?;
        assert_eq!(got.get_ids(), want.get_ids(), "{file}: the chat format");
        assert_eq!(
            tok.decode(want.get_ids(), true)
                .map_err(anyhow::Error::msg)?,
            reference
                .decode(want.get_ids(), true)
                .map_err(anyhow::Error::msg)?,
            "{file}: the chat format without specials"
        );
        assert_eq!(
            SpecialTokens::from_tokenizer(&tok)?,
            SpecialTokens::from_tokenizer(&reference)?
        );
    }
    Ok(())
}
