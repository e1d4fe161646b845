//! `sightline models` as a user runs it, through the binary, on an empty offline cache
//! (`HF_HOME` and `HF_HUB_OFFLINE` are given to the child process), and against the stand-in
//! Hub: user manifests, `list --cached`, `rm`.

use std::path::Path;
use std::process::Command;

/// `sightline models …` with an empty offline Hub cache in `home`: (exit code, stdout + stderr).
fn run(argv: &[&str], home: &Path) -> anyhow::Result<(i32, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_sightline"))
        .arg("models")
        .args(argv)
        .env("HF_HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("HF_ENDPOINT")
        .env_remove("HF_HUB_CACHE")
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
fn info_names_a_gui_models_dialect_and_template() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let (code, out) = run(&["info", "gui-owl-1.5-8b-think"], cache.path())?;
    assert_eq!(code, SUCCESS, "{out}");
    for line in [
        "gguf repo         none",
        "safetensors repo  mPLUG/GUI-Owl-1.5-8B-Think",
        "dialect           qwen-computer-use-action (an Action: sentence, then a computer_use tool call",
        "template          qwen3-vl-thinking",
    ] {
        assert!(out.contains(line), "no {line:?} in {out}");
    }
    let (code, out) = run(&["info", "qwen3-vl-2b"], cache.path())?;
    assert_eq!(code, SUCCESS, "{out}");
    assert!(
        out.contains("dialect           json") && out.contains("template          qwen3-vl\n"),
        "{out}"
    );
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

// ─── Against the stand-in Hub: user manifests, the cache listing, removal ──────────

use crate::hub_support::{seeded_bytes, RepoFile, StandInHub};

const TINY_GGUF: &str = "someone/Tiny-VL-GGUF";
const TINY_ST: &str = "someone/Tiny-VL";

/// A user manifest for the stand-in's repos; `extra` goes under `[gguf]` (a revision pin).
fn tiny_manifest(default: bool, gguf_extra: &str) -> String {
    format!(
        r#"id = "tiny"
name = "Tiny VL"
default = {default}
default_variant = "q4_k_m"
visual_token_budget = 64

[gguf]
repo = "{TINY_GGUF}"
default_mmproj = "f16"
{gguf_extra}

[gguf.quants]
q4_k_m = "Tiny-VL-Q4_K_M.gguf"
q8_0 = "Tiny-VL-Q8_0.gguf"

[gguf.mmproj]
f16 = "mmproj-Tiny-VL-F16.gguf"

[safetensors]
repo = "{TINY_ST}"
"#
    )
}

fn tiny_stand_in() -> anyhow::Result<StandInHub> {
    let hub = StandInHub::start()?;
    let lfs = |n: usize, seed: u64| RepoFile {
        bytes: seeded_bytes(n, seed),
        lfs: true,
    };
    hub.add_repo(
        TINY_GGUF,
        None,
        &[
            ("Tiny-VL-Q4_K_M.gguf", lfs(40_000, 1)),
            ("Tiny-VL-Q8_0.gguf", lfs(70_000, 2)),
            ("mmproj-Tiny-VL-F16.gguf", lfs(20_000, 3)),
        ],
    );
    hub.add_repo(
        TINY_ST,
        None,
        &[(
            "tokenizer.json",
            RepoFile {
                bytes: b"{}".to_vec(),
                lfs: false,
            },
        )],
    );
    Ok(hub)
}

/// `sightline models …` with `HF_HOME` = `home`, the user's config in `config` (as
/// `XDG_CONFIG_HOME`) and the stand-in as the Hub (offline when `server` is `None`).
fn run_with(
    argv: &[&str],
    home: &Path,
    config: &Path,
    server: Option<&StandInHub>,
) -> anyhow::Result<(i32, String)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sightline"));
    cmd.arg("models")
        .args(argv)
        .env("HF_HOME", home)
        .env("XDG_CONFIG_HOME", config)
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_TOKEN");
    match server {
        Some(s) => cmd.env("HF_ENDPOINT", &s.url).env_remove("HF_HUB_OFFLINE"),
        None => cmd.env("HF_HUB_OFFLINE", "1").env_remove("HF_ENDPOINT"),
    };
    let out = cmd.output()?;
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

fn write_user_manifest(config: &Path, text: &str) -> anyhow::Result<()> {
    let dir = config.join("sightline/models");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("tiny.toml"), text)?;
    Ok(())
}

#[test]
fn a_user_manifest_is_listed_becomes_the_default_and_pins_its_revision() -> anyhow::Result<()> {
    let server = tiny_stand_in()?;
    let (home, config) = (tempfile::tempdir()?, tempfile::tempdir()?);
    write_user_manifest(config.path(), &tiny_manifest(true, r#"revision = "v1.0""#))?;
    let (code, out) = run_with(&["list"], home.path(), config.path(), None)?;
    assert_eq!(code, SUCCESS, "{out}");
    let default_line = out
        .lines()
        .find(|l| l.contains("(default"))
        .unwrap_or_default();
    assert!(default_line.starts_with("tiny "), "{out}");
    assert!(
        out.contains("qwen3-vl-2b"),
        "the shipped manifests are still listed: {out}"
    );

    let (code, out) = run_with(&["pull", "tiny"], home.path(), config.path(), Some(&server))?;
    assert_eq!(code, SUCCESS, "{out}");
    // The GGUF files at the pinned revision, the tokenizer at the safetensors repo's main.
    let resolves: Vec<String> = server.seen(|s| {
        s.paths
            .iter()
            .filter(|p| p.contains("/resolve/"))
            .cloned()
            .collect()
    });
    assert!(
        resolves
            .iter()
            .any(|p| p.starts_with(&format!("/{TINY_GGUF}/resolve/v1.0/"))),
        "{resolves:?}"
    );
    assert!(resolves
        .iter()
        .all(|p| !p.starts_with(&format!("/{TINY_GGUF}/resolve/main/"))));
    let gguf_dir = home
        .path()
        .join("hub")
        .join(format!("models--{}", TINY_GGUF.replace('/', "--")));
    assert!(gguf_dir.join("refs/v1.0").is_file());
    assert!(!gguf_dir.join("refs/main").exists());
    Ok(())
}

#[test]
fn a_broken_user_manifest_is_an_error_naming_its_file() -> anyhow::Result<()> {
    let (home, config) = (tempfile::tempdir()?, tempfile::tempdir()?);
    write_user_manifest(config.path(), "id = [")?;
    let (code, out) = run_with(&["list"], home.path(), config.path(), None)?;
    assert_eq!(code, FAILED, "{out}");
    assert!(out.contains("tiny.toml"), "{out}");
    Ok(())
}

#[test]
fn list_cached_shows_sizes_revisions_and_files_and_rm_removes_a_variant_or_a_repo(
) -> anyhow::Result<()> {
    let server = tiny_stand_in()?;
    let (home, config) = (tempfile::tempdir()?, tempfile::tempdir()?);
    write_user_manifest(config.path(), &tiny_manifest(false, ""))?;
    for id in ["tiny", "tiny:q8_0"] {
        let (code, out) = run_with(&["pull", id], home.path(), config.path(), Some(&server))?;
        assert_eq!(code, SUCCESS, "{out}");
    }
    let (code, out) = run_with(&["list", "--cached"], home.path(), config.path(), None)?;
    assert_eq!(code, SUCCESS, "{out}");
    let repo_line = out
        .lines()
        .find(|l| l.starts_with(TINY_GGUF))
        .unwrap_or_default();
    // 40,000 + 70,000 + 20,000 bytes in three files, fetched at main.
    assert!(repo_line.contains("127.0 KiB"), "{out}");
    assert!(repo_line.contains("main@0123456789ab"), "{out}");
    assert!(
        out.contains("Tiny-VL-Q8_0.gguf") && out.contains("tokenizer.json"),
        "{out}"
    );

    // A variant: its text GGUF goes, the shared vision tower stays.
    let (code, out) = run_with(
        &["rm", "tiny:q8_0", "--dry-run"],
        home.path(),
        config.path(),
        None,
    )?;
    assert_eq!(code, SUCCESS, "{out}");
    assert!(
        out.contains("would remove someone/Tiny-VL-GGUF/Tiny-VL-Q8_0.gguf"),
        "{out}"
    );
    assert!(out.contains("would free 68.4 KiB"), "{out}");
    let (code, out) = run_with(&["rm", "tiny:q8_0"], home.path(), config.path(), None)?;
    assert_eq!(code, SUCCESS, "{out}");
    let (_, listed) = run_with(&["list", "--cached"], home.path(), config.path(), None)?;
    assert!(!listed.contains("Tiny-VL-Q8_0.gguf"), "{listed}");
    assert!(listed.contains("mmproj-Tiny-VL-F16.gguf"), "{listed}");
    assert!(listed.contains("58.6 KiB"), "{listed}");

    // The whole model: both repos.
    let (code, out) = run_with(&["rm", "tiny"], home.path(), config.path(), None)?;
    assert_eq!(code, SUCCESS, "{out}");
    assert!(out.contains(&format!("removed {TINY_GGUF}")), "{out}");
    assert!(out.contains(&format!("removed {TINY_ST}")), "{out}");
    let (_, listed) = run_with(&["list", "--cached"], home.path(), config.path(), None)?;
    assert!(listed.contains("no models cached"), "{listed}");
    let (code, out) = run_with(&["rm", "tiny"], home.path(), config.path(), None)?;
    assert_eq!(code, SUCCESS, "{out}");
    assert!(out.contains("nothing cached"), "{out}");
    Ok(())
}
