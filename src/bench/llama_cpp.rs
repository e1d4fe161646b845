//! llama.cpp side by side: find `llama-bench` and `llama-mtmd-cli`, run them on the same
//! files, threads and lengths, and read their results.
//!
//! - `llama-bench -o json` prints a JSON array with one object per test; a prefill test
//!   has `n_prompt > 0, n_gen = 0`, a decode test the reverse, and `avg_ts` is its mean
//!   tokens per second (`tools/llama-bench/llama-bench.cpp`, `json_printer`). `cpu_info`
//!   names the CPU and `backends` the ggml backends.
//! - `llama-mtmd-cli` logs `mtmd batch encoding done in N ms` around the vision tower
//!   (`tools/mtmd/mtmd-cli.cpp`; older builds: `image slice encoded in N ms`) and
//!   `image decoded (batch i/n) in N ms` for feeding the image tokens
//!   (`tools/mtmd/mtmd-helper.cpp`); `system_info: … | AVX = 1 | …` lists the CPU
//!   features its build uses.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};

/// The llama.cpp tools to compare with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LlamaTools {
    /// `llama-bench`.
    pub bench: Option<PathBuf>,
    /// `llama-mtmd-cli`.
    pub mtmd_cli: Option<PathBuf>,
}

/// Where to look for the tools: explicit paths win, then `dir`, then `PATH`.
#[derive(Debug, Clone, Default)]
pub struct ToolSearch {
    /// `--llama-bench PATH`.
    pub bench: Option<PathBuf>,
    /// `--llama-mtmd-cli PATH`.
    pub mtmd_cli: Option<PathBuf>,
    /// `--llama-dir DIR` (the tools directly in it, or in its `bin/` or `build/bin/`).
    pub dir: Option<PathBuf>,
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

fn find_tool(name: &str, explicit: Option<&PathBuf>, dir: Option<&PathBuf>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return is_executable(p).then(|| p.clone());
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = dir {
        dirs.extend([d.clone(), d.join("bin"), d.join("build/bin")]);
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

impl ToolSearch {
    /// Resolve the tools; a tool given by an explicit path that is not executable is an
    /// error, one merely not found is `None`.
    pub fn resolve(&self) -> Result<LlamaTools> {
        for (flag, p) in [
            ("--llama-bench", &self.bench),
            ("--llama-mtmd-cli", &self.mtmd_cli),
        ] {
            if let Some(p) = p {
                if !is_executable(p) {
                    return Err(Error::invalid_input(format!(
                        "{flag} {}: not an executable file",
                        p.display()
                    )));
                }
            }
        }
        Ok(LlamaTools {
            bench: find_tool("llama-bench", self.bench.as_ref(), self.dir.as_ref()),
            mtmd_cli: find_tool("llama-mtmd-cli", self.mtmd_cli.as_ref(), self.dir.as_ref()),
        })
    }
}

/// One `llama-bench` test result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LlamaBenchTest {
    /// Prompt tokens (prefill test when `n_gen` is 0).
    pub n_prompt: u64,
    /// Generated tokens (decode test when `n_prompt` is 0).
    pub n_gen: u64,
    /// Tokens in the context before the test (`-d`; 0 for builds without it).
    pub n_depth: u64,
    /// Threads used.
    pub n_threads: u64,
    /// Mean tokens per second.
    pub avg_ts: f64,
    /// Its standard deviation.
    pub stddev_ts: f64,
}

/// What `llama-bench -o json` printed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LlamaBenchOutput {
    /// The tests, in order.
    pub tests: Vec<LlamaBenchTest>,
    /// `cpu_info` of the first test.
    pub cpu_info: String,
    /// `backends` of the first test.
    pub backends: String,
    /// `build_commit` of the first test.
    pub build_commit: String,
}

impl LlamaBenchOutput {
    /// Tokens per second of the prefill test of `n` tokens (`pp<n>`).
    pub fn prefill_ts(&self, n: u64) -> Option<f64> {
        self.tests
            .iter()
            .find(|t| t.n_prompt == n && t.n_gen == 0)
            .map(|t| t.avg_ts)
    }

    /// Tokens per second of the decode test of `n` tokens (`tg<n>`).
    pub fn decode_ts(&self, n: u64) -> Option<f64> {
        self.tests
            .iter()
            .find(|t| t.n_gen == n && t.n_prompt == 0)
            .map(|t| t.avg_ts)
    }
}

/// Parse `llama-bench -o json` output. Text before the opening `[` (log lines some builds
/// print on stdout) is skipped.
pub fn parse_llama_bench_json(stdout: &str) -> Result<LlamaBenchOutput> {
    let bad = |reason: String| Error::invalid_input(format!("llama-bench JSON: {reason}"));
    let start = stdout
        .find('[')
        .ok_or_else(|| bad("no JSON array in the output".into()))?;
    let json: serde_json::Value = serde_json::from_str(stdout[start..].trim())
        .map_err(|e| Error::invalid_input_caused("llama-bench JSON", e))?;
    let items = json.as_array().ok_or_else(|| bad("not an array".into()))?;
    let num = |v: &serde_json::Value, k: &str| -> Result<f64> {
        v.get(k)
            .and_then(|x| x.as_f64())
            .ok_or_else(|| bad(format!("a test without a numeric {k}")))
    };
    let tests = items
        .iter()
        .map(|t| {
            Ok(LlamaBenchTest {
                n_prompt: num(t, "n_prompt")? as u64,
                n_gen: num(t, "n_gen")? as u64,
                n_depth: num(t, "n_depth").unwrap_or(0.0) as u64,
                n_threads: num(t, "n_threads")? as u64,
                avg_ts: num(t, "avg_ts")?,
                stddev_ts: num(t, "stddev_ts").unwrap_or(0.0),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let first_str = |k: &str| {
        items
            .first()
            .and_then(|t| t.get(k))
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .unwrap_or_default()
    };
    Ok(LlamaBenchOutput {
        tests,
        cpu_info: first_str("cpu_info"),
        backends: first_str("backends"),
        build_commit: first_str("build_commit"),
    })
}

/// What `llama-mtmd-cli` logged about the image.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MtmdTimings {
    /// Vision tower (`image slice encoded in N ms`), summed over slices.
    pub encode_ms: f64,
    /// Feeding the image tokens to the text model (`image decoded … in N ms`), summed.
    pub decode_ms: Option<f64>,
    /// The `system_info:` line, when logged.
    pub system_info: Option<String>,
}

fn ms_after(line: &str, marker: &str) -> Option<f64> {
    let rest = &line[line.find(marker)? + marker.len()..];
    rest.trim().strip_suffix("ms")?.trim().parse().ok()
}

/// Parse `llama-mtmd-cli`'s log (stdout and stderr together).
pub fn parse_mtmd_log(log: &str) -> Result<MtmdTimings> {
    let mut encode = None::<f64>;
    let mut decode = None::<f64>;
    let mut system_info = None;
    for line in log.lines() {
        // Older builds log per slice (mtmd-helper.cpp); current mtmd-cli logs per batch.
        if line.contains("image slice encoded in") || line.contains("mtmd batch encoding done in") {
            if let Some(v) = ms_after(line, " in") {
                *encode.get_or_insert(0.0) += v;
            }
        } else if line.contains("image decoded") {
            if let Some(v) = ms_after(line, ") in").or_else(|| ms_after(line, "decoded in")) {
                *decode.get_or_insert(0.0) += v;
            }
        } else if let Some(i) = line.find("system_info:") {
            system_info = Some(line[i..].trim().to_string());
        }
    }
    Ok(MtmdTimings {
        encode_ms: encode.ok_or_else(|| {
            Error::invalid_input("llama-mtmd-cli log has no \"image slice encoded in N ms\" line")
        })?,
        decode_ms: decode,
        system_info,
    })
}

/// Settings shared by both tools' runs.
#[derive(Debug, Clone)]
pub struct LlamaRun {
    /// Threads (`-t`).
    pub threads: usize,
    /// Repetitions (`-r`).
    pub repeat: usize,
    /// Longest time one tool run may take.
    pub timeout: Duration,
    /// Offload every layer to the GPU (`-ngl 999`, the vision tower too), as Sightline runs
    /// on one; else keep everything on the CPU (`-ngl 0`: a llama.cpp built with a GPU
    /// backend offloads by default).
    pub gpu: bool,
}

impl LlamaRun {
    /// `-ngl` for this run.
    fn gpu_layers(&self) -> &'static str {
        if self.gpu {
            "999"
        } else {
            "0"
        }
    }
}

fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Result<(String, String)> {
    let name = format!("{:?}", cmd.get_program());
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| Error::Process {
        tool: name.clone(),
        source,
    })?;
    // Read both pipes on threads so a chatty tool cannot block on a full pipe.
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = std::io::Read::read_to_string(o, &mut s);
        }
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            let _ = std::io::Read::read_to_string(e, &mut s);
        }
        s
    });
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| Error::invalid_input_caused(name.as_str(), e))?
        {
            break status;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::invalid_input(format!(
                "{name} ran longer than {} s",
                timeout.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    if !status.success() {
        let tail: String = stderr
            .lines()
            .rev()
            .take(8)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(Error::invalid_input(format!(
            "{name} failed ({status}):\n{tail}"
        )));
    }
    Ok((stdout, stderr))
}

/// Run `llama-bench` for one prefill (`-p prompt -n 0`) or decode (`-p 0 -n gen`) test,
/// after `depth` tokens already in the context (`-d`: a decode measured after a prompt,
/// as ours is, pays for attention over that prompt).
pub fn run_llama_bench(
    tool: &Path,
    model: &Path,
    prompt: usize,
    gen: usize,
    depth: usize,
    run: &LlamaRun,
) -> Result<LlamaBenchOutput> {
    let mut cmd = Command::new(tool);
    cmd.arg("-m")
        .arg(model)
        .args(["-t", &run.threads.to_string()])
        .args(["-p", &prompt.to_string()])
        .args(["-n", &gen.to_string()])
        .args(["-d", &depth.to_string()])
        .args(["-r", &run.repeat.to_string()])
        .args(["-ngl", run.gpu_layers()])
        .args(["-o", "json"]);
    let (stdout, _) = run_with_timeout(cmd, run.timeout)?;
    parse_llama_bench_json(&stdout)
}

/// Run `llama-mtmd-cli` on one image with the same visual-token budget, one generated
/// token, and read its image timings.
pub fn run_mtmd(
    tool: &Path,
    text: &Path,
    mmproj: &Path,
    image: &Path,
    max_visual_tokens: usize,
    run: &LlamaRun,
) -> Result<MtmdTimings> {
    let mut cmd = Command::new(tool);
    cmd.arg("-m")
        .arg(text)
        .arg("--mmproj")
        .arg(mmproj)
        .arg("--image")
        .arg(image)
        .args(["--image-max-tokens", &max_visual_tokens.to_string()])
        .args(["-p", "describe", "-n", "1", "-t", &run.threads.to_string()])
        .args(["--temp", "0", "--no-warmup"])
        .args(["-ngl", run.gpu_layers()])
        // A context for the image and the prompt: the default is the model's trained
        // context (262,144 positions for Qwen3-VL), whose KV cache alone is ~30 GB.
        .args(["-c", &(max_visual_tokens + 512).max(4096).to_string()])
        // Generated GGUFs carry no chat template (nor do the converter-made fixtures);
        // Qwen's is ChatML, and the template does not change the image timings.
        .args(["--chat-template", "chatml"]);
    if !run.gpu {
        cmd.arg("--no-mmproj-offload");
    }
    let (stdout, stderr) = run_with_timeout(cmd, run.timeout)?;
    parse_mtmd_log(&format!("{stdout}\n{stderr}"))
}

/// The CPU features a `system_info` line reports as on (`AVX2 = 1`).
pub fn features_on(system_info: &str) -> Vec<String> {
    system_info
        .split('|')
        .filter_map(|part| {
            let (k, v) = part.split_once('=')?;
            let k = k.trim().rsplit(':').next()?.trim();
            (v.trim() == "1" && !k.is_empty()).then(|| k.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape `llama-bench -o json` prints (json_printer in llama-bench.cpp).
    const BENCH_JSON: &str = r#"[
  {
    "build_commit": "abc1234",
    "build_number": 1,
    "cpu_info": "Intel(R) Xeon(R) Platinum 8481C",
    "gpu_info": "",
    "backends": "CPU",
    "model_filename": "Qwen3VL-2B-Bench-Q4_K_M.gguf",
    "n_threads": 2,
    "n_prompt": 512,
    "n_gen": 0,
    "avg_ns": 7000000000,
    "stddev_ns": 1000,
    "avg_ts": 73.142857,
    "stddev_ts": 0.5
  },
  {
    "build_commit": "abc1234",
    "cpu_info": "Intel(R) Xeon(R) Platinum 8481C",
    "backends": "CPU",
    "n_threads": 2,
    "n_prompt": 0,
    "n_gen": 64,
    "n_depth": 512,
    "avg_ns": 5000000000,
    "stddev_ns": 1000,
    "avg_ts": 12.8,
    "stddev_ts": 0.1
  }
]
"#;

    #[test]
    fn llama_bench_json_gives_pp_and_tg_rates() -> Result<()> {
        let out = parse_llama_bench_json(&format!("load_backend: loaded CPU\n{BENCH_JSON}"))?;
        assert_eq!(out.prefill_ts(512), Some(73.142857));
        assert_eq!(out.decode_ts(64), Some(12.8));
        assert_eq!(out.decode_ts(128), None);
        // Builds before `-d` print no depth.
        assert_eq!((out.tests[0].n_depth, out.tests[1].n_depth), (0, 512));
        assert_eq!(out.cpu_info, "Intel(R) Xeon(R) Platinum 8481C");
        assert_eq!(out.backends, "CPU");
        assert!(parse_llama_bench_json("[{\"n_prompt\": 1}]").is_err());
        Ok(())
    }

    #[test]
    fn mtmd_log_gives_the_image_encode_time() -> Result<()> {
        let log = "system_info: n_threads = 2 / 2 | CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | AVX512 = 0 | \n\
                   encoding image slice...\n\
                   image slice encoded in 41235 ms\n\
                   decoding image batch 1/1, n_tokens_batch = 1280\n\
                   image decoded (batch 1/1) in 15032 ms\n";
        let t = parse_mtmd_log(log)?;
        assert_eq!(t.encode_ms, 41235.0);
        assert_eq!(t.decode_ms, Some(15032.0));
        let info = t.system_info.unwrap_or_default();
        assert_eq!(features_on(&info), vec!["SSE3", "AVX", "AVX2", "F16C"]);
        assert!(parse_mtmd_log("no image here").is_err());
        // Captured from /opt/llama-bin/llama-mtmd-cli (build 0c1e570) on a generated tiny model.
        let captured = "0.02.064.981 I encoding mtmd batch, n_chunks = 1 (done = 1, total = 3)\n\
                        0.02.350.551 I mtmd batch encoding done in 286 ms\n";
        assert_eq!(parse_mtmd_log(captured)?.encode_ms, 286.0);
        Ok(())
    }
}
