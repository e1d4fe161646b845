//! `sightline models` as a user runs it, through the binary, on an empty offline cache
//! (`HF_HOME` and `HF_HUB_OFFLINE` are given to the child process).

use std::path::Path;
use std::process::Command;

/// `sightline models …` with an empty offline Hub cache in `home`: (exit code, stdout + stderr).
fn run(argv: &[&str], home: &Path) -> anyhow::Result<(i32, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_sightline"))
        .arg("models")
        .args(argv)
        .env("HF_HOME", home)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("HF_ENDPOINT")
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let code = out
        .status
        .code()
        .ok_or_else(|| anyhow::anyhow!("killed by a signal: {text}"))?;
    Ok((code, text))
}

// `sightline models` exit codes.
const SUCCESS: i32 = 0;
// A failed download or resolution is a setup error: the same code as a usage error.
const FAILED: i32 = 2;
const USAGE: i32 = 2;

#[test]
fn list_shows_every_manifest_and_marks_the_default() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let (code, out) = run(&["list"], cache.path())?;
    assert_eq!(code, SUCCESS);
    for id in ["qwen3-vl-2b", "qwen3-vl-4b", "qwen3-vl-8b"] {
        assert!(out.contains(id), "{out}");
    }
    let default_line = out
        .lines()
        .find(|l| l.contains("(default"))
        .unwrap_or_default();
    assert!(
        default_line.starts_with("qwen3-vl-2b") && default_line.contains("q4_k_m"),
        "{out}"
    );
    assert!(out.contains("0/3 files"), "{out}");
    Ok(())
}

#[test]
fn info_lists_repos_files_and_cache_state_without_network() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let (code, out) = run(&["info", "qwen3-vl-4b"], cache.path())?;
    assert_eq!(code, SUCCESS, "{out}");
    assert!(
        out.contains(
            "Qwen/Qwen3-VL-4B-Instruct-GGUF / Qwen3VL-4B-Instruct-Q8_0.gguf  (not cached)"
        ),
        "{out}"
    );
    assert!(out.contains("variant safetensors:"), "{out}");
    Ok(())
}

#[test]
fn pull_offline_with_empty_cache_fails_naming_repo_and_file() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let (code, out) = run(&["pull", "qwen3-vl-8b:q8_0"], cache.path())?;
    assert_eq!(code, FAILED, "{out}");
    assert!(
        out.contains("Qwen/Qwen3-VL-8B-Instruct-GGUF")
            && out.contains("Qwen3VL-8B-Instruct-Q8_0.gguf"),
        "{out}"
    );
    let (code, out) = run(&["pull", "qwen9"], cache.path())?;
    assert_eq!(code, USAGE, "{out}");
    Ok(())
}

#[test]
fn info_on_an_uncached_repo_says_so_and_on_a_local_path_lists_its_files() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let (code, out) = run(&["info", "someone/Other-VL-GGUF"], cache.path())?;
    assert_eq!(code, SUCCESS, "{out}");
    assert!(
        out.contains("not (completely) cached")
            && out.contains("models pull someone/Other-VL-GGUF"),
        "{out}"
    );
    let tiny = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tiny-b");
    let (code, out) = run(&["info", &tiny.display().to_string()], cache.path())?;
    assert_eq!(code, SUCCESS, "{out}");
    assert!(out.contains("mmproj") && out.contains(".gguf"), "{out}");
    Ok(())
}
