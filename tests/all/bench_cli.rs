//! `sightline bench` end to end through the binary, on the tiny shape with small token
//! counts: the JSON report parses and carries every documented field, the table prints,
//! the second run reuses the cached model, and `--compare-llama-cpp` on safetensors says
//! why it cannot compare.

use std::process::Command;

use anyhow::{ensure, Context, Result};

fn bench(cache: &std::path::Path, extra: &[&str]) -> Result<std::process::Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_sightline"))
        .args([
            "bench",
            "--shape",
            "tiny",
            "--threads",
            "2",
            "--repeat",
            "1",
        ])
        .args([
            "--prompt-tokens",
            "16",
            "--gen-tokens",
            "4",
            "--max-visual-tokens",
            "64",
        ])
        .arg("--cache-dir")
        .arg(cache)
        .args(extra)
        .output()?)
}

/// Every field `sightline::bench::report` documents, as JSON pointers.
const DOCUMENTED: &[&str] = &[
    "/sightline_version",
    "/model/shape",
    "/model/format",
    "/model/file_bytes",
    "/model/generated",
    "/machine/threads",
    "/machine/candle_threads",
    "/machine/compile_features",
    "/machine/runtime_features",
    "/machine/native_build",
    "/settings/prompt_tokens",
    "/settings/gen_tokens",
    "/settings/repeat",
    "/settings/visual_token_budget",
    "/load/load_ms",
    "/load/rss_after_load_bytes",
    "/load/peak_rss_load_bytes",
    "/peak/f32_gflops",
    "/peak/int8_gops",
    "/memory_check/bound_bytes",
    "/memory_check/kv_cache_bytes",
    "/memory_check/within_bound",
    "/vision/encode_ms",
    "/vision/visual_tokens",
    "/vision/preprocess_ms",
    "/vision/throughput/gops",
    "/vision/throughput/fraction_of_peak",
    "/prefill/throughput/peak",
    "/prefill/tokens_per_s",
    "/prefill/tokens",
    "/decode/tokens_per_s",
    "/decode/step_ms",
    "/grammar/per_token_us",
    "/grammar/commit_per_token_us",
    "/grammar/mask_p99_us",
    "/grammar/step_p99_us",
    "/grammar/run_step_share",
    "/grammar/other_step_p99_us",
    "/grammar/guessed_tokens",
    "/grammar/ratio_to_decode_step",
    "/grammar/forced_share",
    "/grammar/tokens",
    "/turn/total_ms",
    "/turn/first_total_ms",
    "/turn/median_turn/vision_ms",
    "/turn/median_turn/prefill_ms",
    "/turn/median_turn/decode_ms",
    "/turn/median_turn/grammar_ms",
    "/turn/warm_total_ms",
    "/turn/warm_turn/prefill_reused",
    "/turn/new_process_total_ms",
    "/turn/new_process_turn/prefill_from_disk",
    "/turn/context_tokens",
    "/turn/kv_cache_bytes",
    "/turn/memory/end/peak_rss_bytes",
    "/memory_stages",
    "/turn_memory_check/peak_rss_bytes",
    "/turn_memory_check/bound_bytes",
    "/turn_memory_check/kv_cache_bytes",
    "/turn_memory_check/within_bound",
    "/peak_rss_bytes",
    "/llama_cpp",
];

#[test]
fn bench_json_on_the_tiny_shape_has_every_documented_field() -> Result<()> {
    let cache = tempfile::tempdir()?;
    let out = bench(cache.path(), &["--format", "q8_0", "--json"])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.success(), "bench failed: {stderr}");
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("stdout is one JSON object")?;
    for p in DOCUMENTED {
        ensure!(json.pointer(p).is_some(), "missing {p} in {json:#}");
    }
    ensure!(json["model"]["generated"] == true);
    ensure!(json["prefill"]["tokens"] == 16 && json["decode"]["tokens"] == 4);
    let rate = json["decode"]["tokens_per_s"].as_f64().unwrap_or(0.0);
    ensure!(rate > 0.0 && rate.is_finite(), "decode rate {rate}");
    ensure!(json["vision"]["visual_tokens"]
        .as_u64()
        .is_some_and(|t| t > 0 && t <= 64));
    ensure!(
        json["grammar_error"].is_null() && json["turn_error"].is_null(),
        "{json:#}"
    );
    // Fractions of a peak measured on this machine: positive, and below 1 for a model this
    // small. Q8_0 text weights are held against the int8 peak, the tower against f32.
    for stage in ["vision", "prefill"] {
        let f = json[stage]["throughput"]["fraction_of_peak"].as_f64();
        ensure!(f.is_some_and(|f| f > 0.0 && f < 1.0), "{stage}: {json:#}");
    }
    ensure!(json["vision"]["throughput"]["peak"] == "f32");
    ensure!(json["prefill"]["throughput"]["peak"] == "int8", "{json:#}");
    // The second turn on an unchanged screen encodes no image and reuses the system and
    // screen runs: it feeds fewer tokens than the first.
    let (cold, warm) = (&json["turn"]["median_turn"], &json["turn"]["warm_turn"]);
    ensure!(
        warm["image_encoded"] == false && cold["image_encoded"] == true,
        "{json:#}"
    );
    ensure!(
        warm["prefill_reused"].as_u64() > cold["prefill_reused"].as_u64()
            && warm["prefill_new"].as_u64() < cold["prefill_new"].as_u64(),
        "{json:#}"
    );
    // A new process's first turn reads the system prompt the first turn kept on disk, and
    // encodes its new screen.
    let fresh = &json["turn"]["new_process_turn"];
    ensure!(
        fresh["prefill_from_disk"].as_u64().is_some_and(|n| n > 0)
            && fresh["prefill_from_disk"] == fresh["prefill_reused"]
            && fresh["image_encoded"] == true,
        "{json:#}"
    );
    // Memory: one sample per stage, in order, and the turns' bound from the turns' own
    // context (image, prompt and generated tokens), not the prefill stage's.
    let stages: Vec<&str> = json["memory_stages"]
        .as_array()
        .context("memory_stages")?
        .iter()
        .filter_map(|m| m["stage"].as_str())
        .collect();
    ensure!(
        stages == ["load", "vision", "prefill", "decode", "grammar", "turns"],
        "{stages:?}"
    );
    let check = &json["turn_memory_check"];
    let u = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let context = u(&check["context_tokens"]);
    ensure!(context > 16 + 4, "a turn's context of {context} tokens");
    ensure!(u(&check["kv_cache_bytes"]) == u(&json["turn"]["kv_cache_bytes"]) && context > 0);
    let expected = (u(&check["file_bytes"]) + u(&check["kv_cache_bytes"])) as f64 * 1.25;
    ensure!(
        (u(&check["bound_bytes"]) as f64 - expected).abs() <= 1.0,
        "{check:#}"
    );
    ensure!(u(&check["peak_rss_bytes"]) > 0);

    // Second run: the model comes from the cache; the table names every stage.
    let out = bench(cache.path(), &["--format", "q8_0", "--no-turn"])?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout)?;
    for row in [
        "load",
        "vision encode",
        "prefill 16 tok",
        "decode 4 tok",
        "grammar / decode step",
        "memory:",
        "memory by stage",
    ] {
        ensure!(table.contains(row), "no {row:?} row in:\n{table}");
    }
    ensure!(String::from_utf8_lossy(&out.stderr).contains("reused from the cache"));
    Ok(())
}

#[test]
fn compare_llama_cpp_on_safetensors_says_it_needs_gguf() -> Result<()> {
    let cache = tempfile::tempdir()?;
    let out = bench(
        cache.path(),
        &[
            "--format",
            "f16",
            "--quantize",
            "q8_0",
            "--no-turn",
            "--no-vision",
            "--json",
            "--compare-llama-cpp",
        ],
    )?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let why = json["llama_cpp"]["skipped"].as_str().unwrap_or_default();
    ensure!(why.contains("GGUF"), "{json:#}");
    ensure!(json["model"]["quantize"] == "Q8_0");
    ensure!(json["vision"].is_null() && json["prefill"]["tokens_per_s"].as_f64() > Some(0.0));
    Ok(())
}
