//! `sightline models` as the binary runs it (the CLI module is compiled into this test).

#[path = "../src/cli/models.rs"]
#[allow(dead_code)]
mod models;

use models::{exit_code, models_with, ModelsArgs, ModelsCommand};
use sightline::hub::Hub;

fn run(command: ModelsCommand, hub: &Hub) -> (i32, String) {
    let mut out = Vec::new();
    let code = models_with(&ModelsArgs { command }, hub, &mut out);
    (code, String::from_utf8_lossy(&out).into_owned())
}

fn empty_offline_hub(dir: &std::path::Path) -> Hub {
    Hub::from_env()
        .with_cache_dir(dir.to_path_buf())
        .with_offline(true)
        .with_progress(false)
}

#[test]
fn list_shows_every_manifest_and_marks_the_default() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let (code, out) = run(ModelsCommand::List, &empty_offline_hub(cache.path()));
    assert_eq!(code, exit_code::SUCCESS);
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
    let (code, out) = run(
        ModelsCommand::Info {
            id: "qwen3-vl-4b".into(),
        },
        &empty_offline_hub(cache.path()),
    );
    assert_eq!(code, exit_code::SUCCESS, "{out}");
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
    let (code, out) = run(
        ModelsCommand::Pull {
            id: "qwen3-vl-8b:q8_0".into(),
        },
        &empty_offline_hub(cache.path()),
    );
    assert_eq!(code, exit_code::FAILED, "{out}");
    assert!(
        out.contains("Qwen/Qwen3-VL-8B-Instruct-GGUF")
            && out.contains("Qwen3VL-8B-Instruct-Q8_0.gguf"),
        "{out}"
    );
    let (code, out) = run(
        ModelsCommand::Pull { id: "qwen9".into() },
        &empty_offline_hub(cache.path()),
    );
    assert_eq!(code, exit_code::USAGE, "{out}");
    Ok(())
}

#[test]
fn info_on_an_uncached_repo_says_so_and_on_a_local_path_lists_its_files() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    let hub = empty_offline_hub(cache.path());
    let (code, out) = run(
        ModelsCommand::Info {
            id: "someone/Other-VL-GGUF".into(),
        },
        &hub,
    );
    assert_eq!(code, exit_code::SUCCESS, "{out}");
    assert!(
        out.contains("not (completely) cached")
            && out.contains("models pull someone/Other-VL-GGUF"),
        "{out}"
    );
    let tiny = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/tiny-b");
    let (code, out) = run(
        ModelsCommand::Info {
            id: tiny.display().to_string(),
        },
        &hub,
    );
    assert_eq!(code, exit_code::SUCCESS, "{out}");
    assert!(out.contains("mmproj") && out.contains(".gguf"), "{out}");
    Ok(())
}
