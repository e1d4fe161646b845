//! `sightline models info` and `sightline generate` as a user runs them, on the tiny
//! fixtures, and the library's generation loop (`sightline::generate`) against the
//! reference goldens (models/fixtures/tiny-*/golden, chat-templated prompts made by
//! models/scripts/make_tiny_models.py).

use crate::model_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::model_support::{fixtures, load, Golden, Variant};
use anyhow::{ensure, Context, Result};
use candle_core::{DType, Device, Tensor};
use sightline::generate::{ChatGenerator, ChatRequest, GenerateOptions, StopReason, TextStream};
use sightline::image::PreprocessConfig;
use sightline::{EncodedImage, ModelSource, PreprocessedImage, VisionLanguageModel};

/// A dumped logits row against the same position of one batched forward pass over the
/// dumped tokens: max |Δ| relative to the row's max |logit|. The dump comes from one
/// token per pass (KV cache), the check from one pass over everything, so only float
/// summation order differs.
const DUMP_LOGITS_RTOL: f32 = 1e-4;

/// The golden continuation's length.
const GOLDEN_TOKENS: usize = 16;
/// The budget that reproduces the goldens' preprocessing of ui_exact (256×192: 48 tokens).
const GOLDEN_MAX_VISUAL_TOKENS: &str = "48";
/// The goldens' prompts (models/scripts/make_tiny_models.py).
const TEXT_PROMPT: &str = "Hello! Which button closes the dialog?";
const IMAGE_PROMPT: &str = "Click the OK button.";

fn sightline(args: &[&str]) -> Result<Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_sightline"))
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .output()?)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str().context("fixture path is not UTF-8")
}

/// A fixture's `config.json`.
fn config_json(model: &str) -> Result<serde_json::Value> {
    let path = fixtures().join(model).join("config.json");
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

fn u(v: &serde_json::Value, key: &str) -> Result<u64> {
    v[key]
        .as_u64()
        .with_context(|| format!("{key} in config.json"))
}

/// What the `text` and `vision` lines of `models info` must hold for `model`, computed
/// from its config.json.
fn expected_dimensions(model: &str) -> Result<(Vec<String>, Vec<String>)> {
    let root = config_json(model)?;
    let (t, v) = (&root["text_config"], &root["vision_config"]);
    // 4.57 layout: rope_theta beside rope_scaling; 5.x: inside rope_parameters.
    let rope = if t["rope_parameters"].is_object() {
        &t["rope_parameters"]
    } else {
        &t["rope_scaling"]
    };
    let theta = t["rope_theta"]
        .as_f64()
        .or(rope["rope_theta"].as_f64())
        .context("rope_theta")?;
    let list = |v: &serde_json::Value, key: &str| -> Result<Vec<u64>> {
        Ok(v[key]
            .as_array()
            .with_context(|| format!("{key} in config.json"))?
            .iter()
            .filter_map(|x| x.as_u64())
            .collect())
    };
    let tied = root["tie_word_embeddings"].as_bool().unwrap_or(false);
    let text = vec![
        format!("layers {},", u(t, "num_hidden_layers")?),
        format!("hidden {},", u(t, "hidden_size")?),
        format!(" heads {},", u(t, "num_attention_heads")?),
        format!("kv heads {},", u(t, "num_key_value_heads")?),
        format!("head_dim {},", u(t, "head_dim")?),
        format!("ff {},", u(t, "intermediate_size")?),
        format!("vocab {},", u(t, "vocab_size")?),
        format!("tied head {},", if tied { "yes" } else { "no" }),
        format!("rope theta {theta},"),
        format!("mrope_section {:?}", list(rope, "mrope_section")?),
    ];
    let vision = vec![
        format!("depth {},", u(v, "depth")?),
        format!("hidden {},", u(v, "hidden_size")?),
        format!("heads {},", u(v, "num_heads")?),
        format!("ff {},", u(v, "intermediate_size")?),
        format!("patch {},", u(v, "patch_size")?),
        format!("temporal patch {},", u(v, "temporal_patch_size")?),
        format!("merge {},", u(v, "spatial_merge_size")?),
        format!("out hidden {},", u(v, "out_hidden_size")?),
        format!(
            "deepstack layers {:?}",
            list(v, "deepstack_visual_indexes")?
        ),
    ];
    Ok((text, vision))
}

/// Checks that the line of `stdout` starting with `label` holds every item.
fn line_holds(stdout: &str, label: &str, items: &[String]) -> Result<()> {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .with_context(|| format!("no {label} line in:\n{stdout}"))?;
    for item in items {
        ensure!(
            line.contains(item.as_str()),
            "{label} line lacks {item:?}: {line}"
        );
    }
    Ok(())
}

/// Storage types with counts, and tensor bytes, read from the safetensors header.
fn safetensors_facts(path: &Path) -> Result<(BTreeMap<String, usize>, usize, u64)> {
    let bytes = std::fs::read(path)?;
    let st = safetensors::SafeTensors::deserialize(&bytes)?;
    let mut types = BTreeMap::new();
    let mut total = 0u64;
    for (_, view) in st.tensors() {
        *types.entry(format!("{:?}", view.dtype())).or_insert(0) += 1;
        total += view.data().len() as u64;
    }
    // The data region is everything after the 8-byte length and the header.
    let header_len = u64::from_le_bytes(bytes[..8].try_into()?);
    ensure!(total == bytes.len() as u64 - 8 - header_len, "data region");
    Ok((types.clone(), types.values().sum(), total))
}

/// Storage types with counts over a GGUF pair, and the data region's size bounds.
fn gguf_facts(files: &[PathBuf]) -> Result<(BTreeMap<String, usize>, usize, u64, u64)> {
    use candle_core::quantized::gguf_file;
    let mut types = BTreeMap::new();
    let (mut min_bytes, mut max_bytes) = (0u64, 0u64);
    for path in files {
        let mut file = std::fs::File::open(path)?;
        let content = gguf_file::Content::read(&mut file)?;
        for info in content.tensor_infos.values() {
            *types.entry(format!("{:?}", info.ggml_dtype)).or_insert(0) += 1;
        }
        // Tensor data is padded to 32-byte alignment after each tensor.
        let region = std::fs::metadata(path)?.len() - content.tensor_data_offset;
        max_bytes += region;
        min_bytes += region.saturating_sub(32 * content.tensor_infos.len() as u64);
    }
    Ok((types.clone(), types.values().sum(), min_bytes, max_bytes))
}

/// `N bytes` from the `tensors` line.
fn printed_bytes(stdout: &str) -> Result<(usize, u64)> {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("tensors"))
        .context("no tensors line")?;
    let rest = line.trim_start().trim_start_matches("tensors").trim();
    let (count, rest) = rest.split_once(',').context("tensors line")?;
    let bytes = rest.trim().split(' ').next().context("bytes")?;
    Ok((count.trim().parse()?, bytes.parse()?))
}

fn types_line(types: &BTreeMap<String, usize>) -> String {
    let mut sorted: Vec<_> = types.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    sorted
        .iter()
        .map(|(t, n)| format!("{t} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn models_info_prints_config_dimensions_types_and_sizes_for_safetensors_and_gguf() -> Result<()> {
    for (model, gguf_suffix) in [("tiny-a", "f16"), ("tiny-b", "q8_0")] {
        let dir = fixtures().join(model);
        let dims = expected_dimensions(model)?;

        // Safetensors: name config.json (the directory alone resolves to its GGUF pair).
        let out = sightline(&["models", "info", path_str(&dir.join("config.json"))?])?;
        let stdout = text(&out.stdout);
        ensure!(
            out.status.success(),
            "{model}: {stdout}{}",
            text(&out.stderr)
        );
        ensure!(stdout.contains("architecture qwen3_vl"), "{stdout}");
        line_holds(&stdout, "text", &dims.0)?;
        line_holds(&stdout, "vision", &dims.1)?;
        let (types, count, bytes) = safetensors_facts(&dir.join("model.safetensors"))?;
        ensure!(stdout.contains(&types_line(&types)), "{types:?}\n{stdout}");
        ensure!(printed_bytes(&stdout)? == (count, bytes), "{stdout}");

        // GGUF pair, through the directory (the hub's local resolution finds the mmproj).
        let out = sightline(&["models", "info", path_str(&dir)?])?;
        let stdout = text(&out.stdout);
        ensure!(
            out.status.success(),
            "{model}: {stdout}{}",
            text(&out.stderr)
        );
        ensure!(stdout.contains("architecture qwen3vl"), "{stdout}");
        line_holds(&stdout, "text", &dims.0)?;
        line_holds(&stdout, "vision", &dims.1)?;
        let files = [
            dir.join(format!("{model}-{gguf_suffix}.gguf")),
            dir.join(format!("mmproj-{model}-{gguf_suffix}.gguf")),
        ];
        let (types, count, min_bytes, max_bytes) = gguf_facts(&files)?;
        ensure!(stdout.contains(&types_line(&types)), "{types:?}\n{stdout}");
        let (printed_count, printed) = printed_bytes(&stdout)?;
        ensure!(printed_count == count, "{stdout}");
        ensure!(
            (min_bytes..=max_bytes).contains(&printed),
            "{printed} bytes outside the data regions' {min_bytes}..={max_bytes}"
        );
    }
    Ok(())
}

#[test]
fn models_info_on_a_corrupt_file_is_an_error_naming_it() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let src = fixtures().join("tiny-b");
    let text_gguf = tmp.path().join("tiny-b-q8_0.gguf");
    let bytes = std::fs::read(src.join("tiny-b-q8_0.gguf"))?;
    std::fs::write(&text_gguf, &bytes[..200])?;
    std::fs::copy(
        src.join("mmproj-tiny-b-q8_0.gguf"),
        tmp.path().join("mmproj-tiny-b-q8_0.gguf"),
    )?;
    let out = sightline(&["models", "info", path_str(&text_gguf)?])?;
    let all = text(&out.stdout) + &text(&out.stderr);
    ensure!(out.status.code() == Some(2), "{:?}: {all}", out.status);
    ensure!(
        all.contains("error:") && all.contains("tiny-b-q8_0.gguf"),
        "{all}"
    );
    ensure!(!all.contains("panicked"), "{all}");
    Ok(())
}

/// The dump of a `generate --dump-logits` run.
struct Dump {
    logits: Tensor,
    tokens: Vec<u32>,
    prompt_len: usize,
}

fn read_dump(path: &Path) -> Result<Dump> {
    let t = candle_core::safetensors::load(path, &Device::Cpu)?;
    let get = |name: &str| t.get(name).with_context(|| format!("dump has no {name}"));
    let tokens = get("tokens")?
        .to_vec1::<i64>()?
        .into_iter()
        .map(|x| x as u32)
        .collect();
    let prompt_len = get("prompt_len")?.to_vec1::<i64>()?;
    ensure!(prompt_len.len() == 1, "prompt_len {prompt_len:?}");
    Ok(Dump {
        logits: get("logits")?.clone(),
        tokens,
        prompt_len: prompt_len[0] as usize,
    })
}

/// Runs `generate` with `args` plus `--device cpu --dump-logits FILE` and returns stdout,
/// stderr and the dump.
fn generate_dump(args: &[&str]) -> Result<(String, String, Dump)> {
    let tmp = tempfile::tempdir()?;
    let dump = tmp.path().join("logits.safetensors");
    let mut all = vec![
        "generate",
        "--device",
        "cpu",
        "--dump-logits",
        path_str(&dump)?,
    ];
    all.extend_from_slice(args);
    let out = sightline(&all)?;
    let stderr = text(&out.stderr);
    ensure!(out.status.success(), "{args:?}: {stderr}");
    Ok((text(&out.stdout), stderr, read_dump(&dump)?))
}

#[test]
fn generate_greedy_is_deterministic_and_equals_the_golden_continuation() -> Result<()> {
    for model in ["tiny-a", "tiny-b"] {
        let config = fixtures().join(model).join("config.json");
        let golden = Golden::load(model, "text")?;
        let args = [
            "--model",
            path_str(&config)?,
            "--greedy",
            "--max-tokens",
            "16",
            TEXT_PROMPT,
        ];
        let (stdout, stderr, dump) = generate_dump(&args)?;
        let prompt = golden.input_ids()?;
        // The chat template and tokenization equal transformers' (the golden's ids).
        ensure!(dump.prompt_len == prompt.len(), "{model}: prompt_len");
        ensure!(
            dump.tokens[..dump.prompt_len] == prompt[..],
            "{model}: prompt ids differ"
        );
        let expected = golden.ids("greedy")?;
        ensure!(expected.len() == GOLDEN_TOKENS);
        ensure!(
            dump.tokens[dump.prompt_len..] == expected[..],
            "{model}: greedy {:?}\nexpected {expected:?}",
            &dump.tokens[dump.prompt_len..]
        );
        ensure!(
            dump.logits.dims() == [GOLDEN_TOKENS + 1, 151_936],
            "{:?}",
            dump.logits.dims()
        );
        ensure!(
            stderr.contains(&format!("prompt {} tokens", prompt.len()))
                && stderr.contains("generated 16 tokens")
                && stderr.contains("prefill")
                && stderr.contains("decode"),
            "{stderr}"
        );
        // Same command, same output.
        let (again, _, dump_again) = generate_dump(&args)?;
        ensure!(again == stdout, "{model}: {again:?} != {stdout:?}");
        ensure!(
            dump_again.tokens == dump.tokens,
            "{model}: tokens differ between runs"
        );
    }
    Ok(())
}

#[test]
fn generate_with_an_image_equals_the_golden_image_continuation() -> Result<()> {
    let model = "tiny-a";
    let config = fixtures().join(model).join("config.json");
    let screen = fixtures().join("screens/ui_exact.png");
    let (_, stderr, dump) = generate_dump(&[
        "--model",
        path_str(&config)?,
        "--image",
        path_str(&screen)?,
        "--max-visual-tokens",
        GOLDEN_MAX_VISUAL_TOKENS,
        "--max-tokens",
        "16",
        IMAGE_PROMPT,
    ])?;
    let golden = Golden::load(model, "ui_exact")?;
    let prompt = golden.input_ids()?;
    ensure!(
        dump.tokens[..dump.prompt_len] == prompt[..],
        "image prompt ids differ"
    );
    ensure!(
        dump.tokens[dump.prompt_len..] == golden.ids("greedy")?[..],
        "greedy differs"
    );
    ensure!(
        stderr.contains("image 48 tokens") && stderr.contains("encode"),
        "{stderr}"
    );
    Ok(())
}

/// The dumped rows equal one batched forward pass over the dumped tokens, for a sampled
/// run on the GGUF pair (the directory resolves to it).
#[test]
fn dump_logits_rows_match_a_direct_forward_pass() -> Result<()> {
    let dir = fixtures().join("tiny-a");
    let args = [
        "--model",
        path_str(&dir)?,
        "--temperature",
        "1.5",
        "--top-p",
        "0.9",
        "--seed",
        "11",
        "--max-tokens",
        "12",
        TEXT_PROMPT,
    ];
    let (_, _, dump) = generate_dump(&args)?;
    let generated = dump.tokens.len() - dump.prompt_len;
    ensure!((1..=12).contains(&generated), "{generated} tokens");
    ensure!(
        dump.logits.dims() == [generated + 1, 151_936],
        "{:?}",
        dump.logits.dims()
    );
    // The same seed replays the same tokens.
    let (_, _, again) = generate_dump(&args)?;
    ensure!(
        again.tokens == dump.tokens,
        "sampling with a seed is not reproducible"
    );

    let mut model = load("tiny-a", Variant::Gguf)?;
    let all = model.forward_all_logits(&dump.tokens, &[])?;
    let reference = all.narrow(0, dump.prompt_len - 1, generated + 1)?;
    let rows = dump.logits.to_vec2::<f32>()?;
    let reference = reference.to_vec2::<f32>()?;
    for (i, (ours, theirs)) in rows.iter().zip(&reference).enumerate() {
        let scale = theirs.iter().fold(0f32, |m, x| m.max(x.abs()));
        let diff = ours
            .iter()
            .zip(theirs)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        ensure!(
            diff / scale <= DUMP_LOGITS_RTOL,
            "row {i}: {diff} of {scale}"
        );
    }
    Ok(())
}

#[test]
fn chat_prompt_ids_equal_the_goldens_for_text_and_image_prompts() -> Result<()> {
    let source = ModelSource::Safetensors {
        dir: fixtures().join("tiny-b"),
    };
    let generator = ChatGenerator::new(source.tokenizer()?, source.preprocess_config()?, 151_936)?;
    let text_ids = Golden::load("tiny-b", "text")?.input_ids()?;
    ensure!(generator.prompt_ids(TEXT_PROMPT, None)? == text_ids);
    for case in model_support::IMAGE_CASES {
        let golden = Golden::load("tiny-b", case)?.input_ids()?;
        let pads = golden
            .iter()
            .filter(|&&t| t == generator.special().image_pad)
            .count();
        ensure!(
            generator.prompt_ids(IMAGE_PROMPT, Some(pads))? == golden,
            "{case}"
        );
    }
    // The GGUF's own tokenizer encodes the same.
    let gguf = ModelSource::Gguf {
        text: fixtures().join("tiny-b/tiny-b-q8_0.gguf"),
        mmproj: fixtures().join("tiny-b/mmproj-tiny-b-q8_0.gguf"),
    };
    let from_gguf = ChatGenerator::new(gguf.tokenizer()?, PreprocessConfig::default(), 151_936)?;
    ensure!(from_gguf.prompt_ids(TEXT_PROMPT, None)? == text_ids);
    Ok(())
}

/// A test double whose logits put `script[k]` first at the k-th generated step, with a
/// padding id (past the tokenizer, inside the logits row) always higher still.
struct ScriptedSteps {
    script: Vec<u32>,
    prompt_len: usize,
    fed: Vec<u32>,
    device: Device,
}

/// An id past the tokenizer's 151,669 tokens but inside the 151,936-wide row.
const PADDING_ID: usize = 151_900;
const WIDTH: usize = 151_936;

impl VisionLanguageModel for ScriptedSteps {
    fn vocab_size(&self) -> usize {
        WIDTH
    }
    fn hidden_size(&self) -> usize {
        4
    }
    fn device(&self) -> &Device {
        &self.device
    }
    fn dtype(&self) -> candle_core::DType {
        candle_core::DType::F32
    }
    fn cache_len(&self) -> usize {
        self.fed.len()
    }
    fn truncate(&mut self, len: usize) -> sightline::Result<()> {
        self.fed.truncate(len);
        Ok(())
    }
    fn encode_image(&mut self, _: &PreprocessedImage) -> sightline::Result<EncodedImage> {
        Err(sightline::Error::invalid_input("no vision"))
    }
    fn feed(&mut self, tokens: &[u32], _: &[EncodedImage]) -> sightline::Result<Tensor> {
        self.fed.extend_from_slice(tokens);
        let step = self.fed.len() - self.prompt_len;
        let mut row = vec![0f32; WIDTH];
        row[PADDING_ID] = 100.0;
        if let Some(&t) = self.script.get(step) {
            row[t as usize] = 10.0;
        }
        Ok(Tensor::new(row.as_slice(), &self.device)?)
    }
    fn last_hidden(&self) -> sightline::Result<Tensor> {
        Ok(Tensor::zeros(4, DType::F32, &self.device)?)
    }
    fn lm_head_rows(&self, ids: &[u32]) -> sightline::Result<Tensor> {
        Ok(Tensor::zeros((ids.len(), 4), DType::F32, &self.device)?)
    }
}

#[test]
fn generation_stops_at_im_end_never_samples_padding_ids_and_keeps_one_row_per_fed_token(
) -> Result<()> {
    let source = ModelSource::Safetensors {
        dir: fixtures().join("tiny-a"),
    };
    let generator = ChatGenerator::new(source.tokenizer()?, PreprocessConfig::default(), WIDTH)?;
    let hello = generator.prompt_ids("x", None)?;
    let words = generator
        .tokenizer()
        .encode("Hello there", false)
        .map_err(anyhow::Error::msg)?
        .get_ids()
        .to_vec();
    let im_end = generator.special().im_end;
    let mut script = words.clone();
    script.push(im_end);
    script.push(words[0]); // never reached
    let mut model = ScriptedSteps {
        script,
        prompt_len: hello.len(),
        fed: vec![],
        device: Device::Cpu,
    };
    for keep_logits in [false, true] {
        let g = generator.generate(
            &mut model,
            &ChatRequest {
                prompt: "x",
                image: None,
            },
            &GenerateOptions {
                keep_logits,
                ..GenerateOptions::default()
            },
        )?;
        ensure!(g.stop == StopReason::EndToken(im_end), "{:?}", g.stop);
        ensure!(g.text == "Hello there", "{:?}", g.text);
        ensure!(g.tokens.len() == words.len() + 1);
        ensure!(g.tokens.iter().all(|&t| (t as usize) < PADDING_ID));
        let rows = if keep_logits { words.len() + 2 } else { 0 };
        ensure!(g.logits.len() == rows, "{} rows", g.logits.len());
        // Without the dump the stop token is not fed; with it, it is (for the last row).
        let fed = hello.len() + words.len() + usize::from(keep_logits);
        ensure!(model.fed.len() == fed, "{} fed", model.fed.len());
    }
    // A budget shorter than the script stops there.
    let g = generator.generate_from_ids(
        &mut model,
        &hello,
        &[],
        &GenerateOptions {
            max_tokens: 1,
            ..GenerateOptions::default()
        },
    )?;
    ensure!(g.stop == StopReason::MaxTokens && g.tokens == words[..1]);
    Ok(())
}

#[test]
fn generate_errors_are_clear_and_exit_nonzero_without_panicking() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let model = fixtures().join("tiny-b");
    let not_png = tmp.path().join("screen.png");
    std::fs::write(&not_png, b"this is not an image")?;
    let truncated = tmp.path().join("tiny-b-q8_0.gguf");
    let bytes = std::fs::read(model.join("tiny-b-q8_0.gguf"))?;
    std::fs::write(&truncated, &bytes[..bytes.len() / 2])?;
    std::fs::copy(
        model.join("mmproj-tiny-b-q8_0.gguf"),
        tmp.path().join("mmproj-tiny-b-q8_0.gguf"),
    )?;
    let missing = tmp.path().join("nowhere/model.gguf");
    let absent_png = tmp.path().join("absent.png");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--model", path_str(&missing)?], "does not exist"),
        (vec!["--model", path_str(&truncated)?], "tiny-b-q8_0.gguf"),
        (
            vec!["--model", path_str(&model)?, "--image", path_str(&not_png)?],
            "image:",
        ),
        (
            vec![
                "--model",
                path_str(&model)?,
                "--image",
                path_str(&absent_png)?,
            ],
            "absent.png",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["generate", "--device", "cpu"];
        all.extend(args.iter().copied());
        all.push("hi");
        let out = sightline(&all)?;
        let stderr = text(&out.stderr);
        ensure!(
            out.status.code() == Some(2),
            "{args:?}: {:?} {stderr}",
            out.status
        );
        ensure!(
            stderr.contains("error:") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
        ensure!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // Malformed sampling arguments are usage errors.
    let out = sightline(&["generate", "--temperature", "0", "--seed", "1", "hi"])?;
    ensure!(out.status.code() == Some(2), "{:?}", out.status);
    let out = sightline(&[
        "generate",
        "--greedy",
        "--temperature",
        "1",
        "--seed",
        "1",
        "hi",
    ])?;
    ensure!(out.status.code() == Some(2), "{:?}", out.status);
    Ok(())
}

#[test]
fn text_stream_releases_whole_characters_and_adds_up_to_the_full_decode() -> Result<()> {
    let tokenizer = sightline::tokenizer::load_tokenizer(&fixtures().join("tokenizer.json.gz"))?;
    // Rare characters (hieroglyphs) take several byte-level tokens each.
    let text = "Héllo 😀 世界! naïve — ok 𓀀𓁐";
    let ids = tokenizer
        .encode(text, false)
        .map_err(anyhow::Error::msg)?
        .get_ids()
        .to_vec();
    let mut stream = TextStream::new(&tokenizer);
    let mut out = String::new();
    let mut held_back = 0;
    for &id in &ids {
        let piece = stream.push(id)?;
        ensure!(
            !piece.contains('\u{FFFD}'),
            "released a broken character: {piece:?}"
        );
        held_back += usize::from(piece.is_empty());
        out += &piece;
    }
    ensure!(out == text, "{out:?}");
    ensure!(stream.released() == text.len());
    ensure!(
        held_back > 0,
        "no token ended inside a character: the test proves nothing"
    );
    Ok(())
}

/// `generate --dump-logits` with a screenshot that must be resized, end to end (Sightline's
/// own preprocessing of the PNG, the f32 model): the row at the prompt's last position
/// equals the reference's (transformers with its PIL image processor) within
/// [`DUMP_LOGITS_RTOL`] of the row's largest logit.
#[test]
fn dump_logits_with_a_resized_image_match_the_reference() -> Result<()> {
    let model = "tiny-b";
    let config = fixtures().join(model).join("config.json");
    for case in ["ui_resize", "ui_wide"] {
        let screen = fixtures().join(format!("screens/{case}.png"));
        let (_, _, dump) = generate_dump(&[
            "--model",
            path_str(&config)?,
            "--image",
            path_str(&screen)?,
            "--max-visual-tokens",
            GOLDEN_MAX_VISUAL_TOKENS,
            "--max-tokens",
            "1",
            IMAGE_PROMPT,
        ])?;
        let golden = Golden::load(model, case)?;
        ensure!(
            dump.tokens[..dump.prompt_len] == golden.input_ids()?[..],
            "{case}: image prompt ids differ"
        );
        let ours = dump.logits.get(0)?.to_vec1::<f32>()?;
        let theirs = golden.get("logits_last")?.to_vec1::<f32>()?;
        let scale = theirs.iter().fold(0f32, |m, x| m.max(x.abs()));
        let diff = ours
            .iter()
            .zip(&theirs)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        ensure!(
            diff / scale <= DUMP_LOGITS_RTOL,
            "{case}: last-position logits differ by {diff} of {scale}"
        );
    }
    Ok(())
}
