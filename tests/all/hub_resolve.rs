//! Model resolution: manifest ids, Hub repo ids and local paths, cache hits and the offline
//! errors. No test touches the network: they run offline or against a closed local port.

use std::error::Error as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use sightline::hub::{self, DownloadError, Hub, ModelFiles, ModelSpec, RetryPolicy};
use sightline::Error;

/// An offline failure must be immediate; this bounds "no hang".
const NO_HANG: Duration = Duration::from_secs(5);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures")
}

/// Lays out files in hf-hub's cache format: models--owner--name/{refs/main, snapshots/<commit>/file}.
fn seed_cache(cache: &Path, repo: &str, files: &[(&str, &str)]) -> anyhow::Result<PathBuf> {
    let repo_dir = cache.join(format!("models--{}", repo.replace('/', "--")));
    let commit = "0123456789abcdef0123456789abcdef01234567";
    std::fs::create_dir_all(repo_dir.join("refs"))?;
    std::fs::write(repo_dir.join("refs/main"), commit)?;
    let snap = repo_dir.join("snapshots").join(commit);
    for (name, content) in files {
        let p = snap.join(name);
        std::fs::create_dir_all(p.parent().context("no parent")?)?;
        std::fs::write(&p, content)?;
    }
    Ok(snap)
}

fn offline_hub(cache: &Path) -> Hub {
    Hub::from_env()
        .with_cache_dir(cache.to_path_buf())
        .with_offline(true)
        .with_progress(false)
}

#[test]
fn manifest_id_resolves_to_cached_gguf_pair_and_tokenizer() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let gguf = seed_cache(
        cache.path(),
        "Qwen/Qwen3-VL-2B-Instruct-GGUF",
        &[
            ("Qwen3VL-2B-Instruct-Q4_K_M.gguf", "text"),
            ("mmproj-Qwen3VL-2B-Instruct-Q8_0.gguf", "vision"),
        ],
    )?;
    let st = seed_cache(
        cache.path(),
        "Qwen/Qwen3-VL-2B-Instruct",
        &[("tokenizer.json", "{}")],
    )?;
    let hub = offline_hub(cache.path());
    let spec = hub::parse_model_spec("qwen3-vl-2b")?;
    let model = hub.resolve("qwen3-vl-2b", &spec)?;
    assert_eq!(
        model.files,
        ModelFiles::Gguf {
            model: gguf.join("Qwen3VL-2B-Instruct-Q4_K_M.gguf"),
            mmproj: gguf.join("mmproj-Qwen3VL-2B-Instruct-Q8_0.gguf"),
            tokenizer: Some(st.join("tokenizer.json")),
        }
    );
    assert_eq!(model.visual_token_budget, 1024);
    assert_eq!(model.source, "manifest qwen3-vl-2b:q4_k_m");
    Ok(())
}

#[test]
fn manifest_variants_select_quant_or_safetensors_and_unknown_ones_are_listed() -> anyhow::Result<()>
{
    let m = hub::find_manifest("qwen3-vl-4b")?.context("no 4b manifest")?;
    let files = m.files_for(Some("Q8_0"))?;
    assert_eq!(files[0].repo, "Qwen/Qwen3-VL-4B-Instruct-GGUF");
    assert_eq!(files[0].file, "Qwen3VL-4B-Instruct-Q8_0.gguf");
    assert_eq!(files[1].file, "mmproj-Qwen3VL-4B-Instruct-Q8_0.gguf");
    let st = m.files_for(Some("safetensors"))?;
    assert!(st.iter().all(|f| f.repo == "Qwen/Qwen3-VL-4B-Instruct"));
    let err = hub::parse_model_spec("qwen3-vl-4b:q2_k")
        .err()
        .context("q2_k accepted")?;
    let text = err.to_string();
    assert!(
        text.contains("q4_k_m") && text.contains("q8_0") && text.contains("safetensors"),
        "{text}"
    );
    Ok(())
}

#[test]
fn every_manifest_has_gguf_and_safetensors_repos_for_its_size() -> anyhow::Result<()> {
    for (id, size) in [
        ("qwen3-vl-2b", "2B"),
        ("qwen3-vl-4b", "4B"),
        ("qwen3-vl-8b", "8B"),
    ] {
        let m = hub::find_manifest(id)?.context(id)?;
        let gguf = m.gguf.as_ref().context("gguf")?;
        assert_eq!(gguf.repo, format!("Qwen/Qwen3-VL-{size}-Instruct-GGUF"));
        assert_eq!(m.safetensors.repo, format!("Qwen/Qwen3-VL-{size}-Instruct"));
        assert_eq!(
            gguf.quants["q4_k_m"],
            format!("Qwen3VL-{size}-Instruct-Q4_K_M.gguf")
        );
        assert_eq!(
            gguf.mmproj["f16"],
            format!("mmproj-Qwen3VL-{size}-Instruct-F16.gguf")
        );
    }
    Ok(())
}

#[test]
fn gui_model_manifests_declare_their_dialect_and_template() -> anyhow::Result<()> {
    use sightline::chat::Template;
    use sightline::moves::Dialect;
    for (id, repo, dialect, template) in [
        (
            "qwen3-vl-2b",
            "Qwen/Qwen3-VL-2B-Instruct",
            Dialect::Json,
            Template::Instruct,
        ),
        (
            "qwen3-vl-4b-thinking",
            "Qwen/Qwen3-VL-4B-Thinking",
            Dialect::Json,
            Template::Thinking,
        ),
        (
            "gui-owl-1.5-2b",
            "mPLUG/GUI-Owl-1.5-2B-Instruct",
            Dialect::ComputerUseAction,
            Template::Instruct,
        ),
        (
            "gui-owl-1.5-8b-think",
            "mPLUG/GUI-Owl-1.5-8B-Think",
            Dialect::ComputerUseAction,
            Template::Thinking,
        ),
        (
            "ui-mopd-8b",
            "UI-MOPD/Qwen3-VL-8B-Thinking-UI-MOPD-Student",
            Dialect::ComputerUseAction,
            Template::Thinking,
        ),
        (
            "mai-ui-2b",
            "Tongyi-MAI/MAI-UI-2B",
            Dialect::GroundingAnswer,
            Template::Instruct,
        ),
        (
            "ui-venus-1.5-8b",
            "inclusionAI/UI-Venus-1.5-8B",
            Dialect::GroundingPoint,
            Template::Instruct,
        ),
    ] {
        let m = hub::find_manifest(id)?.context(id)?;
        assert_eq!(
            (m.safetensors.repo.as_str(), m.dialect, m.template),
            (repo, dialect, template),
            "{id}"
        );
        // Every variant it offers names its files (a safetensors-only model has no GGUF).
        for v in m.variants() {
            m.files_for(Some(&v))?;
        }
    }
    let think = hub::find_manifest("gui-owl-1.5-8b-think")?.context("think")?;
    assert!(think.gguf.is_none());
    assert_eq!(think.variants(), ["safetensors"]);
    assert!(think.files_for(Some("q4_k_m")).is_err());
    Ok(())
}

#[test]
fn repo_ids_resolve_through_manifests_or_the_cached_listing() -> anyhow::Result<()> {
    // A repo a manifest knows uses the manifest.
    match hub::parse_model_spec("Qwen/Qwen3-VL-8B-Instruct-GGUF:q8_0")? {
        ModelSpec::Manifest { manifest, variant } => {
            assert_eq!(manifest.id, "qwen3-vl-8b");
            assert_eq!(variant.as_deref(), Some("q8_0"));
        }
        other => anyhow::bail!("expected a manifest, got {other:?}"),
    }
    // Any other repo: files are chosen from the listing (the cached snapshot when offline).
    let cache = tempfile::tempdir()?;
    let snap = seed_cache(
        cache.path(),
        "someone/GUI-Owl-2B-GGUF",
        &[
            ("GUI-Owl-2B-Q8_0.gguf", "t8"),
            ("GUI-Owl-2B-Q4_K_M.gguf", "t4"),
            ("mmproj-GUI-Owl-2B-F16.gguf", "v"),
        ],
    )?;
    let hub = offline_hub(cache.path());
    let spec = hub::parse_model_spec("someone/GUI-Owl-2B-GGUF")?;
    assert!(matches!(spec, ModelSpec::HubRepo { .. }));
    let model = hub.resolve("someone/GUI-Owl-2B-GGUF", &spec)?;
    let ModelFiles::Gguf {
        model: text,
        mmproj,
        tokenizer,
    } = model.files
    else {
        anyhow::bail!("expected GGUF files");
    };
    assert_eq!(text, snap.join("GUI-Owl-2B-Q4_K_M.gguf"));
    assert_eq!(mmproj, snap.join("mmproj-GUI-Owl-2B-F16.gguf"));
    assert_eq!(tokenizer, None);

    // A sharded safetensors repo: the shards come from the index.
    let snap = seed_cache(
        cache.path(),
        "someone/MAI-UI-2B",
        &[
            ("config.json", "{}"),
            ("tokenizer.json", "{}"),
            (
                "model.safetensors.index.json",
                r#"{"metadata":{},"weight_map":{"a":"model-00002-of-00002.safetensors","b":"model-00001-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}}"#,
            ),
            ("model-00001-of-00002.safetensors", "w1"),
            ("model-00002-of-00002.safetensors", "w2"),
        ],
    )?;
    let spec = hub::parse_model_spec("someone/MAI-UI-2B")?;
    let model = hub.resolve("someone/MAI-UI-2B", &spec)?;
    let ModelFiles::Safetensors {
        weights,
        preprocessor_config,
        ..
    } = model.files
    else {
        anyhow::bail!("expected safetensors files");
    };
    assert_eq!(
        weights,
        vec![
            snap.join("model-00001-of-00002.safetensors"),
            snap.join("model-00002-of-00002.safetensors")
        ]
    );
    assert_eq!(preprocessor_config, None);
    Ok(())
}

#[test]
fn local_paths_resolve_to_the_fixture_gguf_pair_or_checkpoint() -> anyhow::Result<()> {
    let tiny = fixtures().join("tiny-a");
    let model = hub::resolve_model(tiny.to_str().context("path")?)?;
    assert_eq!(
        model.files,
        ModelFiles::Gguf {
            model: tiny.join("tiny-a-f16.gguf"),
            mmproj: tiny.join("mmproj-tiny-a-f16.gguf"),
            tokenizer: Some(tiny.join("tokenizer.json.gz")),
        }
    );
    let by_file = hub::resolve_model(tiny.join("tiny-a-f16.gguf").to_str().context("path")?)?;
    assert_eq!(by_file.files, model.files);
    let st = hub::resolve_model(tiny.join("config.json").to_str().context("path")?)?;
    let ModelFiles::Safetensors {
        config,
        weights,
        preprocessor_config,
        ..
    } = st.files
    else {
        anyhow::bail!("expected safetensors");
    };
    assert_eq!(config, tiny.join("config.json"));
    assert_eq!(weights, vec![tiny.join("model.safetensors")]);
    assert_eq!(
        preprocessor_config,
        Some(tiny.join("preprocessor_config.json"))
    );

    let mmproj = hub::resolve_model(
        tiny.join("mmproj-tiny-a-f16.gguf")
            .to_str()
            .context("path")?,
    );
    assert!(matches!(mmproj, Err(Error::Hub { reason, .. }) if reason.contains("mmproj")));
    let missing = hub::resolve_model("./no/such/model.gguf");
    assert!(matches!(missing, Err(Error::Hub { reason, .. }) if reason.contains("does not exist")));
    let unknown = hub::parse_model_spec("qwen9");
    assert!(matches!(unknown, Err(Error::Hub { reason, .. }) if reason.contains("qwen3-vl-2b")));
    Ok(())
}

/// `sightline plan --model SPEC` with `HF_HOME` = `home` and `HF_HUB_OFFLINE=1` given to the
/// child process: the error line, and how long the binary took.
fn offline_resolve_error(spec: &str, home: &Path) -> anyhow::Result<(String, Duration)> {
    let t0 = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sightline"))
        .args(["plan", "--model", spec, "--device", "cpu", "goal"])
        .env("HF_HOME", home)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("HF_ENDPOINT")
        .output()?;
    let elapsed = t0.elapsed();
    anyhow::ensure!(out.status.code() == Some(2), "expected exit 2: {out:?}");
    Ok((String::from_utf8_lossy(&out.stderr).into_owned(), elapsed))
}

#[test]
fn offline_with_an_empty_hf_home_names_the_repo_and_file_without_hanging() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let (message, elapsed) = offline_resolve_error("qwen3-vl-2b", home.path())?;
    assert!(elapsed < NO_HANG, "took {elapsed:?}");
    assert!(message.contains("error: model qwen3-vl-2b: "), "{message}");
    assert!(
        message.contains("Qwen/Qwen3-VL-2B-Instruct-GGUF"),
        "{message}"
    );
    assert!(
        message.contains("Qwen3VL-2B-Instruct-Q4_K_M.gguf"),
        "{message}"
    );
    assert!(message.contains("HF_HUB_OFFLINE"), "{message}");
    assert!(
        message.contains(&home.path().display().to_string()),
        "{message}"
    );
    let (message, _) = offline_resolve_error("someone/Other-VL-GGUF", home.path())?;
    assert!(
        message.contains("someone/Other-VL-GGUF") && message.contains("not in the local cache"),
        "{message}"
    );
    Ok(())
}

#[test]
fn unreachable_hub_is_retried_then_fails_naming_repo_and_file() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    // Port 9 (discard) on loopback is closed here: the connection is refused at once.
    let hub = Hub::from_env()
        .with_cache_dir(cache.path().to_path_buf())
        .with_offline(false)
        .with_endpoint(Some("http://127.0.0.1:9".into()))
        .with_progress(false)
        .with_retry(RetryPolicy {
            attempts: 3,
            first_delay: Duration::from_millis(10),
            ..RetryPolicy::default()
        });
    let t0 = Instant::now();
    let result = hub.fetch(
        "qwen3-vl-2b",
        "Qwen/Qwen3-VL-2B-Instruct-GGUF",
        "main",
        "Qwen3VL-2B-Instruct-Q4_K_M.gguf",
    );
    assert!(t0.elapsed() < NO_HANG, "took {:?}", t0.elapsed());
    let err = result.err().context("a closed port answered")?;
    let Error::Hub { reason, .. } = &err else {
        anyhow::bail!("expected a Hub error, got {err:?}");
    };
    assert!(reason.contains("downloading Qwen3VL-2B-Instruct-Q4_K_M.gguf from the Hub repo Qwen/Qwen3-VL-2B-Instruct-GGUF"), "{reason}");
    // The network error is kept as the cause, after the policy's three tries.
    let cause = err
        .source()
        .and_then(|s| s.downcast_ref::<DownloadError>())
        .context("no DownloadError cause")?;
    assert!(
        matches!(cause, DownloadError::Network { attempts: 3, .. }),
        "{cause:?}"
    );
    assert!(
        cause.source().is_some(),
        "the HTTP client's error was dropped"
    );
    Ok(())
}

#[test]
fn a_cached_repo_resolves_when_the_hub_cannot_be_reached() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let snap = seed_cache(
        cache.path(),
        "someone/Cached-VL-GGUF",
        &[
            ("Cached-VL-Q4_K_M.gguf", "t"),
            ("mmproj-Cached-VL-F16.gguf", "v"),
        ],
    )?;
    let hub = Hub::from_env()
        .with_cache_dir(cache.path().to_path_buf())
        .with_offline(false)
        .with_endpoint(Some("http://127.0.0.1:9".into()))
        .with_progress(false);
    let spec = hub::parse_model_spec("someone/Cached-VL-GGUF")?;
    let model = hub.resolve("someone/Cached-VL-GGUF", &spec)?;
    let ModelFiles::Gguf { model: text, .. } = model.files else {
        anyhow::bail!("expected GGUF files");
    };
    assert_eq!(text, snap.join("Cached-VL-Q4_K_M.gguf"));
    Ok(())
}
