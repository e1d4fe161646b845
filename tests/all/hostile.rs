//! The hostile-input suite: forged model files, image and gzip bombs, FIFOs, devices,
//! directories and symlinks, odd JSON, a hostile Hub mirror on 127.0.0.1, wordings for the
//! clarify rule, and the runner gate's corpus (`gate_support`) replayed through the CLI, each
//! destructive case refused without a grant and run with one. The corpus is generated here, at
//! test time.
//!
//! Every CLI case runs the real binary under a timeout and asserts: the expected exit code
//! (2 for a usage or setup error, 3 for a refusal, 0 for a harmless control), exactly one
//! `error:` line naming the file or the reason, no panic (no "panicked", no exit 101), no hang,
//! peak memory (the child's `VmHWM`, polled every 2 ms) under [`MAX_RSS_MB`], and nothing created outside
//! the case's temporary root (snapshotted before and after). Pure checks (many variations of
//! the same class) call the library directly; every class goes through the CLI at least once.
//!
//! The children get their own `HOME`, `HF_HOME`, `HF_ENDPOINT` and `DISPLAY` (the test
//! process's environment is never changed), and one private Xvfb serves the gate cases. The
//! count by class is printed at the end (`cargo test --test all hostile:: -- --nocapture`).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Peak resident memory any child may reach. The binary plans a clarify turn in ~20 MB;
/// the unfixed amplifications (GGUF arrays, PNG bombs, gzip bombs) cost 1.6 to 3 GB.
const MAX_RSS_MB: i64 = 600;
/// Wall-clock limit per child.
const CASE_TIMEOUT: Duration = Duration::from_secs(90);
/// Children run at once.
const WORKERS: usize = 4;
/// The suite's minimum size.
const MIN_CASES: usize = 300;

const BIN: &str = env!("CARGO_BIN_EXE_sightline");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures")
}

// ─── Running a child ────────────────────────────────────────────────────────

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
    peak_rss_mb: i64,
    timed_out: bool,
}

fn run_child(args: &[OsString], env: &[(String, OsString)], cwd: &Path) -> Result<Outcome> {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("HF_ENDPOINT")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env("HF_HUB_OFFLINE", "1")
        .env("SIGHTLINE_LOG", "error");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().context("spawning sightline")?;
    let pid = child.id() as libc::pid_t;
    let mut out = child.stdout.take().context("stdout")?;
    let mut err = child.stderr.take().context("stderr")?;
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let mut timed_out = false;
    let mut peak_kb: i64 = 0;
    let status = loop {
        // The child's own high-water mark. Not `ru_maxrss`: Linux carries the forking
        // process's peak across exec, and this test binary is large.
        peak_kb = peak_kb.max(vm_hwm_kb(pid));
        let mut status = 0;
        // SAFETY: rusage is plain data; wait4 fills it for our own child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waiting on our own child's pid with valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break status;
        }
        if r < 0 {
            bail!("wait4 failed");
        }
        if start.elapsed() > CASE_TIMEOUT && !timed_out {
            timed_out = true;
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ok(Outcome {
        code,
        stdout: String::from_utf8_lossy(&t_out.join().unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned(),
        peak_rss_mb: peak_kb / 1024,
        timed_out,
    })
}

/// `VmHWM` (peak resident set) of a live process in KiB, 0 once it has exited or while it
/// is not yet the binary. `spawn` returns when the exec wakes the vfork parent, which the
/// kernel does just before the child drops the parent's memory map: a read in that window
/// reports this test process's peak (hundreds of MB). The exe link follows the same map, so
/// a read made after it names the binary is the child's own.
fn vm_hwm_kb(pid: libc::pid_t) -> i64 {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let bin = std::fs::canonicalize(BIN).ok();
    if exe.is_none() || exe != bin {
        return 0;
    }
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

// ─── Cases ──────────────────────────────────────────────────────────────────

/// What a CLI case must end with.
#[derive(Clone)]
enum Expect {
    /// Exit 2 and one `error:` line containing the text.
    Error(String),
    /// Exit 3 (the runner gate refused).
    Refused,
    /// Exit 0 and stdout containing the text.
    Ok(String),
}

struct CliCase {
    class: &'static str,
    name: String,
    args: Vec<OsString>,
    env: Vec<(String, OsString)>,
    expect: Expect,
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn judge(case: &CliCase, o: &Outcome) -> Option<String> {
    let fail = |why: String| {
        Some(format!(
            "[{}] {}: {why}\n  exit {} rss {} MB\n  stdout: {}\n  stderr: {}",
            case.class,
            case.name,
            o.code,
            o.peak_rss_mb,
            o.stdout.chars().take(400).collect::<String>(),
            o.stderr.chars().take(800).collect::<String>()
        ))
    };
    if o.timed_out {
        return fail("timed out (hang)".into());
    }
    if o.code == 101 || o.stderr.contains("panicked") {
        return fail("panicked".into());
    }
    if o.peak_rss_mb > MAX_RSS_MB {
        return fail(format!(
            "peak RSS {} MB over {MAX_RSS_MB} MB",
            o.peak_rss_mb
        ));
    }
    let errors: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    match &case.expect {
        Expect::Error(needle) => {
            if o.code != 2 {
                return fail("expected exit 2".into());
            }
            if errors.len() != 1 {
                return fail(format!("expected one error line, got {}", errors.len()));
            }
            if !o.stderr.contains(needle.as_str()) {
                return fail(format!("the error does not name {needle:?}"));
            }
        }
        Expect::Refused => {
            if o.code != 3 {
                return fail("expected exit 3 (refused)".into());
            }
        }
        Expect::Ok(needle) => {
            if o.code != 0 || !o.stdout.contains(needle.as_str()) {
                return fail(format!("expected exit 0 and {needle:?} on stdout"));
            }
        }
    }
    None
}

/// Every path under `root` except the subtrees named in `skip`.
fn snapshot(root: &Path, skip: &[&Path]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if skip.iter().any(|s| p.starts_with(s)) {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p.clone());
            }
            out.insert(p);
        }
    }
    out
}

struct Tally(Mutex<BTreeMap<&'static str, usize>>);

impl Tally {
    fn add(&self, class: &'static str, n: usize) {
        if let Ok(mut m) = self.0.lock() {
            *m.entry(class).or_default() += n;
        }
    }
}

// ─── Generated corpus: GGUF ─────────────────────────────────────────────────

/// A GGUF v3 writer for forged headers.
#[derive(Default)]
struct Gguf {
    bytes: Vec<u8>,
}

impl Gguf {
    fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.bytes.extend_from_slice(s.as_bytes());
        self
    }
    fn header(tensors: u64, kvs: u64) -> Self {
        let mut g = Gguf::default();
        g.bytes.extend_from_slice(b"GGUF");
        g.u32(3).u64(tensors).u64(kvs);
        g
    }
    /// A tensor info: name, 1-D f32 of `n` elements at `offset`.
    fn tensor(&mut self, name: &str, n: u64, offset: u64) -> &mut Self {
        self.str(name).u32(1).u64(n).u32(0).u64(offset)
    }
    fn pad_to(&mut self, align: usize, data: usize) -> Vec<u8> {
        while !self.bytes.len().is_multiple_of(align) {
            self.bytes.push(0);
        }
        self.bytes.extend(std::iter::repeat_n(0u8, data));
        self.bytes.clone()
    }
}

/// Forged GGUF files, each with the reason its error must name.
fn forged_ggufs() -> Vec<(String, Vec<u8>, &'static str)> {
    let mut v: Vec<(String, Vec<u8>, &'static str)> = Vec::new();
    let mut g = Gguf::header(1, 1);
    g.str("general.alignment").u32(4).u32(0);
    g.tensor("t", 4, 0);
    v.push(("alignment_zero".into(), g.pad_to(32, 64), "alignment"));
    for a in [3u32, 6, 100, 33] {
        let mut g = Gguf::header(1, 1);
        g.str("general.alignment").u32(4).u32(a);
        g.tensor("t", 4, 0);
        v.push((format!("alignment_{a}"), g.pad_to(32, 64), "alignment"));
    }
    let mut g = Gguf::header(0, 1);
    g.str("general.alignment").u32(8).str("32");
    v.push(("alignment_string".into(), g.pad_to(32, 0), "alignment"));
    for count in [1u64 << 26, 1 << 40, u64::MAX] {
        let mut g = Gguf::header(0, 1);
        g.str("tokenizer.ggml.tokens").u32(9).u32(0).u64(count);
        v.push((format!("array_count_{count}"), g.pad_to(32, 16), "array"));
    }
    for count in [1u64 << 20, 1 << 30] {
        let mut g = Gguf::header(0, 1);
        g.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(count);
        v.push((format!("string_array_{count}"), g.pad_to(32, 16), "GGUF"));
    }
    for len in [1u64 << 30, u64::MAX] {
        let mut g = Gguf::header(0, 1);
        g.str("general.name").u32(8).u64(len);
        v.push((format!("string_len_{len}"), g.pad_to(32, 16), "GGUF string"));
    }
    for (t, k) in [(u64::MAX, 0u64), (0, u64::MAX), (1 << 21, 0), (0, 1 << 21)] {
        let g = Gguf::header(t, k);
        v.push((format!("counts_{t}_{k}"), g.bytes, "GGUF"));
    }
    let mut g = Gguf::header(2, 0);
    g.tensor("a", 16, 0).tensor("b", 16, 32);
    v.push(("overlapping_tensors".into(), g.pad_to(32, 128), "overlap"));
    let mut g = Gguf::header(1, 0);
    g.tensor("a", 16, 1 << 40);
    v.push(("offset_past_end".into(), g.pad_to(32, 64), "outside"));
    let mut g = Gguf::header(1, 0);
    g.tensor("a", 1 << 30, 0);
    v.push(("tensor_past_end".into(), g.pad_to(32, 64), "outside"));
    let mut g = Gguf::header(1, 0);
    g.tensor("a", 16, u64::MAX - 8);
    v.push(("offset_overflow".into(), g.pad_to(32, 64), "outside"));
    let mut g = Gguf::header(1, 0);
    g.str("a")
        .u32(5)
        .u64(1)
        .u64(1)
        .u64(1)
        .u64(1)
        .u64(1)
        .u32(0)
        .u64(0);
    v.push(("five_dims".into(), g.pad_to(32, 64), "dimensions"));
    let mut g = Gguf::header(1, 0);
    g.str("a").u32(1).u64(16).u32(99).u64(0);
    v.push(("unknown_type".into(), g.pad_to(32, 64), "type"));
    let mut g = Gguf::header(1, 0);
    g.str("a").u32(2).u64(u64::MAX).u64(4).u32(0).u64(0);
    v.push(("shape_overflow".into(), g.pad_to(32, 64), "overflow"));
    let mut g = Gguf::header(0, 1);
    g.str("k").u32(77);
    v.push(("unknown_value_type".into(), g.pad_to(32, 8), "type"));
    let mut bad = Gguf::header(0, 0).bytes;
    bad[0] = b'X';
    v.push(("wrong_magic".into(), bad, "magic"));
    let mut g = Gguf::default();
    g.bytes.extend_from_slice(b"GGUF");
    g.u32(7).u64(0).u64(0);
    v.push(("version_7".into(), g.bytes, "version"));
    v.push(("empty".into(), Vec::new(), "GGUF"));
    v.push(("magic_only".into(), b"GGUF".to_vec(), "GGUF"));
    v
}

// ─── Generated corpus: safetensors ──────────────────────────────────────────

fn safetensors_file(header: &str, data: usize) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend(std::iter::repeat_n(0u8, data));
    out
}

fn forged_safetensors() -> Vec<(String, Vec<u8>, &'static str)> {
    let t = |name: &str, begin: u64, end: u64, n: u64| {
        format!(r#""{name}":{{"dtype":"F32","shape":[{n}],"data_offsets":[{begin},{end}]}}"#)
    };
    let mut v = vec![
        (
            "overlap".to_string(),
            safetensors_file(
                &format!("{{{},{}}}", t("a", 0, 16, 4), t("b", 8, 24, 4)),
                24,
            ),
            "overlap",
        ),
        (
            "past_end".to_string(),
            safetensors_file(&format!("{{{}}}", t("a", 0, 4096, 1024)), 16),
            "outside",
        ),
        (
            "shape_mismatch".to_string(),
            safetensors_file(&format!("{{{}}}", t("a", 0, 16, 5)), 16),
            "shape",
        ),
        (
            "reversed_offsets".to_string(),
            safetensors_file(&format!("{{{}}}", t("a", 16, 0, 4)), 16),
            "data_offsets",
        ),
        (
            "bad_dtype".to_string(),
            safetensors_file(
                r#"{"a":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}}"#,
                4,
            ),
            "dtype",
        ),
        (
            "not_json".to_string(),
            safetensors_file("{not json", 4),
            "JSON",
        ),
        (
            "header_array".to_string(),
            safetensors_file("[1,2,3]", 4),
            "JSON",
        ),
        (
            "shape_overflow".to_string(),
            safetensors_file(
                r#"{"a":{"dtype":"F32","shape":[18446744073709551615,4],"data_offsets":[0,4]}}"#,
                4,
            ),
            "overflow",
        ),
    ];
    let mut huge = (u64::MAX).to_le_bytes().to_vec();
    huge.extend_from_slice(b"{}");
    v.push(("header_len_huge".into(), huge, "header"));
    let mut past = 1000u64.to_le_bytes().to_vec();
    past.extend_from_slice(b"{}");
    v.push(("header_len_past_file".into(), past, "header"));
    v.push(("empty".into(), Vec::new(), "too short"));
    v
}

// ─── Generated corpus: images ───────────────────────────────────────────────

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut crc_input = kind.to_vec();
    crc_input.extend_from_slice(data);
    out.extend_from_slice(&crc_input);
    out.extend_from_slice(&crc32(&crc_input).to_be_bytes());
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A PNG whose header declares `width`×`height` (colour type, bit depth) followed by a short
/// zlib stream of zero rows: the decoder must refuse it from the header alone.
fn png_bomb(width: u32, height: u32, color: u8, depth: u8) -> Result<Vec<u8>> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[depth, color, 0, 0, 0]);
    png_chunk(&mut out, b"IHDR", &ihdr);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&vec![0u8; 1 << 20])?;
    png_chunk(&mut out, b"IDAT", &z.finish()?);
    png_chunk(&mut out, b"IEND", &[]);
    Ok(out)
}

fn grey16_png(values: &[u16], width: u32) -> Result<Vec<u8>> {
    let height = values.len() as u32 / width;
    let img: image::ImageBuffer<image::Luma<u16>, Vec<u16>> =
        image::ImageBuffer::from_raw(width, height, values.to_vec()).context("size")?;
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)?;
    Ok(out.into_inner())
}

fn bad_images() -> Result<Vec<(String, Vec<u8>, &'static str)>> {
    let mut v = Vec::new();
    for (w, h, color, depth) in [
        (10_000u32, 10_000u32, 6u8, 16u8),
        (20_000, 20_000, 2, 8),
        (100_000, 1, 6, 16),
        (40_000, 40_000, 0, 8),
        (1, 200_000_000, 0, 8),
        (16_000, 16_000, 6, 8),
    ] {
        v.push((
            format!("bomb_{w}x{h}_c{color}_d{depth}"),
            png_bomb(w, h, color, depth)?,
            "image",
        ));
    }
    v.push(("zero_width".into(), png_bomb(0, 10, 2, 8)?, "image"));
    let good = grey16_png(&[0x8000; 64], 8)?;
    for cut in [8usize, 20, 33, 40, good.len() - 5] {
        v.push((format!("truncated_at_{cut}"), good[..cut].to_vec(), "image"));
    }
    v.push((
        "gif".into(),
        b"GIF89a\x01\x00\x01\x00\x00\x00\x00;".to_vec(),
        "image",
    ));
    v.push(("garbage".into(), vec![0x42; 100], "image"));
    v.push((
        "jpeg_header_only".into(),
        vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 16],
        "image",
    ));
    v.push(("empty".into(), Vec::new(), "image"));
    Ok(v)
}

// ─── Generated corpus: JSON ─────────────────────────────────────────────────

/// Odd JSON: (name, bytes, valid JSON value) — invalid ones fail for every input kind.
fn odd_json() -> Vec<(String, Vec<u8>, bool)> {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes();
    vec![
        ("deep_nesting_100k".into(), deep(100_000), false),
        ("deep_nesting_1k".into(), deep(1_000), false),
        (
            "deep_objects".into(),
            "{\"a\":".repeat(5_000).into_bytes(),
            false,
        ),
        ("nan_literal".into(), b"{\"x\": NaN}".to_vec(), false),
        ("infinity_literal".into(), b"[Infinity]".to_vec(), false),
        ("truncated".into(), b"{\"elements\": [".to_vec(), false),
        ("invalid_utf8".into(), vec![b'"', 0xFF, 0xFE, b'"'], false),
        ("empty".into(), Vec::new(), false),
        ("bom".into(), b"\xEF\xBB\xBF{}".to_vec(), false),
        ("trailing_garbage".into(), b"{} {}".to_vec(), false),
        ("nul_bytes".into(), vec![0u8; 64], false),
        (
            "huge_number".into(),
            format!("[1{}]", "0".repeat(400)).into_bytes(),
            false,
        ),
        (
            "over_size_limit".into(),
            format!("\"{}\"", "a".repeat(70 << 20)).into_bytes(),
            false,
        ),
        ("wrong_type_number".into(), b"5".to_vec(), true),
        ("wrong_type_string".into(), b"\"a view\"".to_vec(), true),
        (
            "wrong_type_object".into(),
            b"{\"elements\": 5, \"screen\": []}".to_vec(),
            true,
        ),
    ]
}

// ─── The fake Hub mirror ────────────────────────────────────────────────────

const GOOD_COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// Serves hostile answers keyed by the repo name (`evil/<scenario>`), forever, on a thread.
fn start_mirror(outside: PathBuf) -> Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let outside = outside.clone();
            std::thread::spawn(move || {
                let _ = serve(stream, &outside);
            });
        }
    });
    Ok(format!("http://{addr}"))
}

fn serve(mut stream: std::net::TcpStream, outside: &Path) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 65536 {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&req);
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
    let scenario = path
        .split('/')
        .skip_while(|s| *s != "evil")
        .nth(1)
        .unwrap_or("")
        .to_string();
    let outside_abs = outside.join("pwned").display().to_string();
    let listing = |names: &[&str]| {
        let siblings: Vec<String> = names
            .iter()
            .map(|n| format!("{{\"rfilename\":{}}}", serde_json::Value::from(*n)))
            .collect();
        format!("{{\"siblings\":[{}]}}", siblings.join(","))
    };
    let good_listing = listing(&["model-Q8_0.gguf", "mmproj-F16.gguf"]);
    let (status, headers, body): (&str, Vec<(String, String)>, String) = if path
        .starts_with("/api/")
    {
        let body = match scenario.as_str() {
            "list-traversal" => listing(&["../../../pwned-Q8_0.gguf", "mmproj-F16.gguf"]),
            "list-absolute" => listing(&[&format!("{outside_abs}-Q8_0.gguf"), "mmproj-F16.gguf"]),
            "list-backslash" => listing(&["..\\..\\pwned-Q8_0.gguf", "mmproj-F16.gguf"]),
            "list-nul" => listing(&["a\u{0}-Q8_0.gguf", "mmproj-F16.gguf"]),
            "list-dot" => listing(&["./x/../../y-Q8_0.gguf", "mmproj-F16.gguf"]),
            "list-long" => listing(&[
                &format!("{}-Q8_0.gguf", "a".repeat(5000)),
                "mmproj-F16.gguf",
            ]),
            "list-not-json" => "<html>".to_string(),
            "list-wrong-type" => "{\"siblings\": 5}".to_string(),
            _ => good_listing,
        };
        ("200 OK", vec![], body)
    } else {
        let mut h = vec![("content-range".to_string(), "bytes 0-0/4".to_string())];
        let (commit, etag) = match scenario.as_str() {
            "etag-traversal" => (GOOD_COMMIT.to_string(), "\"../../../../pwned\"".to_string()),
            "etag-absolute" => (GOOD_COMMIT.to_string(), format!("\"{outside_abs}\"")),
            "etag-slash" => (GOOD_COMMIT.to_string(), "\"a/b\"".to_string()),
            "etag-empty" => (GOOD_COMMIT.to_string(), "\"\"".to_string()),
            "etag-long" => (GOOD_COMMIT.to_string(), "a".repeat(500)),
            "commit-traversal" => ("../../../../pwned".to_string(), "\"abc\"".to_string()),
            "commit-absolute" => (outside_abs.clone(), "\"abc\"".to_string()),
            "commit-short" => ("abc".to_string(), "\"abc\"".to_string()),
            "commit-upper" => (GOOD_COMMIT.to_uppercase(), "\"abc\"".to_string()),
            "commit-missing" => (String::new(), "\"abc\"".to_string()),
            "size-lie" => {
                h[0].1 = "bytes 0-0/999".to_string();
                (GOOD_COMMIT.to_string(), "\"abc\"".to_string())
            }
            _ => (GOOD_COMMIT.to_string(), "\"abc\"".to_string()),
        };
        if !commit.is_empty() {
            h.push(("x-repo-commit".to_string(), commit));
        }
        h.push(("etag".to_string(), etag));
        ("200 OK", h, "GGUF".to_string())
    };
    let mut resp = format!(
        "HTTP/1.1 {status}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        resp.push_str(&format!("{k}: {v}\r\n"));
    }
    resp.push_str("\r\n");
    resp.push_str(&body);
    stream.write_all(resp.as_bytes())?;
    Ok(())
}

// ─── Xvfb for the gate cases ────────────────────────────────────────────────

struct Xvfb(std::process::Child, String);

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_xvfb() -> Result<Option<Xvfb>> {
    let have = Command::new("sh")
        .args(["-c", "command -v Xvfb && command -v xdpyinfo"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        if std::env::var("SIGHTLINE_REQUIRE_X11_TESTS").is_ok_and(|v| v == "1") {
            bail!("Xvfb or xdpyinfo missing");
        }
        eprintln!("SKIPPED gate CLI cases: Xvfb or xdpyinfo missing");
        return Ok(None);
    }
    let base = 150 + (std::process::id() % 40) * 5;
    for n in base..base + 100 {
        if Path::new(&format!("/tmp/.X{n}-lock")).exists() {
            continue;
        }
        let display = format!(":{n}");
        let child = Command::new("Xvfb")
            // -noreset: without it the server resets when its last client leaves, and a client
            // connecting during the reset is refused.
            .args([
                &display,
                "-screen",
                "0",
                "800x600x24",
                "-nolisten",
                "tcp",
                "-noreset",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let x = Xvfb(child, display.clone());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let ok = Command::new("xdpyinfo")
                .args(["-display", &display])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Ok(Some(x));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    bail!("no Xvfb display came up")
}

/// Goals whose object is a bare pronoun with nothing selected: the clarify rule asks.
const CLARIFY_WORDINGS: &[&str] = &[
    "Delete it",
    "delete it, I confirm",
    "Could you delete it?",
    "Kindly remove them",
    "Move it to the trash",
    "Send them to Bob",
    "open that",
    "rename this",
    "D\u{0435}lete it",
    "\u{FF24}\u{FF45}\u{FF4C}\u{FF45}\u{FF54}\u{FF45} it",
    "De\u{200B}lete it",
    "'Delete' it",
];

/// Destructive goals in any wording go on to the planner: permission is the runner gate's,
/// by grant. Without a model offline, the CLI then fails on the model, not on the rule.
const CLARIFY_CONTROLS: &[&str] = &[
    "Delete old.txt",
    "Delete old.txt, I confirm",
    "Clean up ~/tmp, but confirm before any deletion",
    "Get rid of all the files in Downloads",
    "Wire 2000 euros to this IBAN",
    "Lösche alle Dateien in Downloads",
    "Open the Delete Files help page",
    "Read the price of the first item",
];

/// Library-level variations: verbs × polite forms × spellings, with a pronoun (asks) and
/// with a named object (goes on).
fn clarify_variations() -> Vec<(String, bool)> {
    let verbs = [
        "delete",
        "erase",
        "wipe",
        "destroy",
        "shred",
        "remove",
        "uninstall",
        "purge",
        "send",
        "pay",
    ];
    let openers = [
        "",
        "please ",
        "Could you ",
        "Can you ",
        "Kindly ",
        "Now ",
        "Then ",
    ];
    let mut out = Vec::new();
    for verb in verbs {
        for opener in openers {
            out.push((format!("{opener}{verb} it"), true));
            out.push((format!("{opener}{verb} the report"), false));
            out.push((format!("{opener}{verb} the report, I confirm"), false));
        }
        let fancy: String = verb
            .chars()
            .map(|c| match c {
                'e' => '\u{0435}',
                'o' => '\u{03BF}',
                c => c,
            })
            .collect();
        out.push((format!("{fancy} it"), true));
        let wide: String = verb
            .chars()
            .map(|c| char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c))
            .collect();
        out.push((format!("{wide} it"), true));
        out.push((format!("{wide} the report"), false));
    }
    out
}

// ─── The test ───────────────────────────────────────────────────────────────

#[test]
fn hostile_inputs_fail_cleanly_refuse_or_act_as_documented() -> Result<()> {
    let root = tempfile::tempdir()?;
    let root = root.path().canonicalize()?;
    let cases_dir = root.join("cases");
    let hf_home = root.join("hf");
    let home = root.join("home");
    let work = root.join("work");
    let outside = root.join("outside");
    for d in [&cases_dir, &hf_home, &home, &work, &outside] {
        std::fs::create_dir_all(d)?;
    }
    let tally = Tally(Mutex::new(BTreeMap::new()));
    let mut failures: Vec<String> = Vec::new();
    let file = |name: &str, bytes: &[u8]| -> Result<PathBuf> {
        let p = cases_dir.join(name);
        std::fs::write(&p, bytes)?;
        Ok(p)
    };
    let s = |p: &Path| p.display().to_string();
    let mut cli: Vec<CliCase> = Vec::new();
    let mut case = |class: &'static str, name: String, args: Vec<OsString>, expect: Expect| {
        cli.push(CliCase {
            class,
            name,
            args,
            env: Vec::new(),
            expect,
        });
    };

    // Special files: FIFOs, devices, directories, symlinks, for every input flag.
    let fifo = cases_dir.join("a.fifo");
    let cfifo = std::ffi::CString::new(s(&fifo))?;
    // SAFETY: a valid NUL-terminated path.
    let made = unsafe { libc::mkfifo(cfifo.as_ptr(), 0o600) };
    anyhow::ensure!(made == 0, "mkfifo");
    let link_fifo = cases_dir.join("link-to-fifo.json");
    std::os::unix::fs::symlink(&fifo, &link_fifo)?;
    let link_zero = cases_dir.join("link-to-zero.json");
    std::os::unix::fs::symlink("/dev/zero", &link_zero)?;
    let dangling = cases_dir.join("dangling.json");
    std::os::unix::fs::symlink(cases_dir.join("nowhere"), &dangling)?;
    let specials: Vec<PathBuf> = vec![
        fifo.clone(),
        link_fifo,
        link_zero,
        dangling,
        PathBuf::from("/dev/zero"),
        PathBuf::from("/dev/null"),
        PathBuf::from("/dev/urandom"),
        cases_dir.clone(),
        cases_dir.join("missing.json"),
    ];
    for p in &specials {
        for flag in ["--view", "--history", "--memory", "--screenshot"] {
            case(
                "special-file",
                format!("plan {flag} {}", p.display()),
                os(&["plan", flag, &s(p), "Delete it"]),
                Expect::Error(s(p)),
            );
        }
        case(
            "special-file",
            format!("generate --image {}", p.display()),
            os(&["generate", "--image", &s(p), "hi"]),
            Expect::Error(s(p)),
        );
        case(
            "special-file",
            format!("run --replay {}", p.display()),
            os(&["run", "--dry-run", "--replay", &s(p), "tidy"]),
            Expect::Error(s(p)),
        );
    }

    // Odd JSON for view, history and memory.
    for (name, bytes, valid) in odd_json() {
        let p = file(&format!("{name}.json"), &bytes)?;
        for flag in ["--view", "--history", "--memory"] {
            let expect = if valid && flag == "--memory" {
                Expect::Ok("clarify".into())
            } else {
                Expect::Error(s(&p))
            };
            case(
                "json",
                format!("{flag} {name}"),
                os(&["plan", flag, &s(&p), "Delete it"]),
                expect,
            );
        }
    }
    // A replay that is not JSONL.
    for (name, bytes, _) in odd_json().into_iter().take(8) {
        let p = file(&format!("replay-{name}.jsonl"), &bytes)?;
        case(
            "json",
            format!("replay {name}"),
            os(&["run", "--dry-run", "--replay", &s(&p), "tidy"]),
            Expect::Error(s(&p)),
        );
    }

    // Images through plan (checked before clarify and before any model).
    for (name, bytes, _) in bad_images()? {
        let p = file(&format!("{name}.png"), &bytes)?;
        case(
            "image",
            name.clone(),
            os(&["plan", "--screenshot", &s(&p), "Delete it"]),
            Expect::Error(s(&p)),
        );
    }
    let grey = file("grey16.png", &grey16_png(&[0x8080; 64], 8)?)?;
    case(
        "image",
        "16-bit grey accepted".into(),
        os(&["plan", "--screenshot", &s(&grey), "Delete it"]),
        Expect::Ok("clarify".into()),
    );

    // Forged GGUF text models, through the CLI: a model directory with a real mmproj.
    let tiny = fixtures().join("tiny-b");
    for (name, bytes, needle) in forged_ggufs() {
        let dir = cases_dir.join(format!("gguf-{name}"));
        std::fs::create_dir_all(&dir)?;
        let text = dir.join("forged-Q8_0.gguf");
        std::fs::write(&text, &bytes)?;
        std::fs::copy(
            tiny.join("mmproj-tiny-b-q8_0.gguf"),
            dir.join("mmproj-tiny-b-q8_0.gguf"),
        )?;
        std::fs::copy(
            tiny.join("tokenizer.json.gz"),
            dir.join("tokenizer.json.gz"),
        )?;
        let _ = needle;
        case(
            "gguf",
            format!("models info {name}"),
            os(&["models", "info", &s(&text)]),
            Expect::Error(s(&text)),
        );
        case(
            "gguf",
            name,
            os(&["plan", "--model", &s(&dir), "--device", "cpu", "hi"]),
            Expect::Error(s(&text)),
        );
    }
    // A real 64 MB metadata array (64M one-byte elements): refused from the header.
    {
        let mut g = Gguf::header(0, 1);
        g.str("tokenizer.ggml.token_type")
            .u32(9)
            .u32(0)
            .u64(64 << 20);
        let mut bytes = g.bytes;
        bytes.extend(std::iter::repeat_n(1u8, 64 << 20));
        let dir = cases_dir.join("gguf-64mb-array");
        std::fs::create_dir_all(&dir)?;
        let text = dir.join("forged-Q8_0.gguf");
        std::fs::write(&text, &bytes)?;
        std::fs::copy(
            tiny.join("mmproj-tiny-b-q8_0.gguf"),
            dir.join("mmproj-tiny-b-q8_0.gguf"),
        )?;
        case(
            "gguf",
            "64 MB metadata array".into(),
            os(&["plan", "--model", &s(&dir), "--device", "cpu", "hi"]),
            Expect::Error(s(&text)),
        );
    }
    // A FIFO as the model file.
    {
        let dir = cases_dir.join("gguf-fifo");
        std::fs::create_dir_all(&dir)?;
        let text = dir.join("model-Q8_0.gguf");
        let c = std::ffi::CString::new(s(&text))?;
        // SAFETY: a valid NUL-terminated path.
        anyhow::ensure!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0, "mkfifo");
        std::fs::copy(
            tiny.join("mmproj-tiny-b-q8_0.gguf"),
            dir.join("mmproj-tiny-b-q8_0.gguf"),
        )?;
        case(
            "gguf",
            "model file is a FIFO".into(),
            os(&["plan", "--model", &s(&text), "--device", "cpu", "hi"]),
            Expect::Error(s(&text)),
        );
    }

    // Forged safetensors checkpoints through the CLI.
    for (name, bytes, _) in forged_safetensors() {
        let dir = cases_dir.join(format!("st-{name}"));
        std::fs::create_dir_all(&dir)?;
        std::fs::copy(tiny.join("config.json"), dir.join("config.json"))?;
        std::fs::copy(
            tiny.join("tokenizer.json.gz"),
            dir.join("tokenizer.json.gz"),
        )?;
        let weights = dir.join("model.safetensors");
        std::fs::write(&weights, &bytes)?;
        case(
            "safetensors",
            name,
            os(&["plan", "--model", &s(&dir), "--device", "cpu", "hi"]),
            Expect::Error(s(&weights)),
        );
    }

    // A gzip bomb as the tokenizer, through the CLI (and more through the library below).
    let bomb = {
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..80 {
            z.write_all(&chunk)?;
        }
        z.finish()?
    };
    {
        let dir = cases_dir.join("tokenizer-bomb");
        std::fs::create_dir_all(&dir)?;
        std::fs::copy(tiny.join("config.json"), dir.join("config.json"))?;
        std::fs::copy(
            tiny.join("model.safetensors"),
            dir.join("model.safetensors"),
        )?;
        std::fs::write(dir.join("tokenizer.json.gz"), &bomb)?;
        case(
            "tokenizer",
            "gzip bomb".into(),
            os(&["plan", "--model", &s(&dir), "--device", "cpu", "hi"]),
            Expect::Error("decompresses to more than".into()),
        );
    }

    // Numbers and flags.
    for (flag, value, needle) in [
        ("--temperature", "nan", "temperature"),
        ("--temperature", "inf", "temperature"),
        ("--temperature", "-1", "temperature"),
        ("--temperature", "0", "temperature"),
        ("--top-p", "nan", "top-p"),
        ("--top-p", "-5", "top-p"),
        ("--top-p", "2", "top-p"),
        ("--top-p", "0", "top-p"),
    ] {
        let assigned = format!("{flag}={value}");
        let mut args = vec!["plan", &assigned, "--seed", "1", "hi"];
        if flag == "--top-p" {
            args = vec![
                "plan",
                "--temperature",
                "0.7",
                &assigned,
                "--seed",
                "1",
                "hi",
            ];
        }
        case(
            "numbers",
            format!("plan {flag} {value}"),
            os(&args),
            Expect::Error(needle.into()),
        );
        let mut gargs = vec!["generate", &assigned, "--seed", "1", "hi"];
        if flag == "--top-p" {
            gargs = vec![
                "generate",
                "--temperature",
                "0.7",
                &assigned,
                "--seed",
                "1",
                "hi",
            ];
        }
        case(
            "numbers",
            format!("generate {flag} {value}"),
            os(&gargs),
            Expect::Error(flag.into()),
        );
    }
    for value in ["0", "18014398509481985", "-3", "1000001", "abc"] {
        for cmd in ["plan", "generate"] {
            case(
                "numbers",
                format!("{cmd} --max-visual-tokens {value}"),
                os(&[cmd, &format!("--max-visual-tokens={value}"), "hi"]),
                Expect::Error("--max-visual-tokens".into()),
            );
        }
    }

    // --dump-logits onto things that are not ours to replace.
    let target = file("precious.txt", b"precious")?;
    let link = cases_dir.join("dump-link.safetensors");
    std::os::unix::fs::symlink(&target, &link)?;
    for p in [
        link.clone(),
        fifo.clone(),
        PathBuf::from("/dev/null"),
        cases_dir.clone(),
        cases_dir.join("no/such/dir/x"),
    ] {
        case(
            "dump-logits",
            format!("--dump-logits {}", p.display()),
            os(&[
                "generate",
                "--dump-logits",
                &s(&p),
                "--model",
                &s(&tiny),
                "hi",
            ]),
            Expect::Error(s(&p)),
        );
    }

    // Error channels and codes.
    case(
        "exit-codes",
        "models info of a missing path".into(),
        os(&["models", "info", "./no-such-model"]),
        Expect::Error("no-such-model".into()),
    );
    case(
        "exit-codes",
        "models pull offline".into(),
        os(&["models", "pull", "someone/Other-VL-GGUF"]),
        Expect::Error("HF_HUB_OFFLINE".into()),
    );
    case(
        "exit-codes",
        "run with a missing replay".into(),
        os(&["run", "--dry-run", "--replay", "./none.jsonl", "tidy"]),
        Expect::Error("none.jsonl".into()),
    );

    // Clarify wordings: answered by the rule, no model (there is none in this HF_HOME).
    for w in CLARIFY_WORDINGS {
        case(
            "clarify",
            format!("{w:?}"),
            os(&["plan", "--stats", w]),
            Expect::Ok("\"kind\":\"clarify\"".into()),
        );
    }
    // A control must go on to the model: with none available offline, a setup error.
    for w in CLARIFY_CONTROLS {
        case(
            "clarify",
            format!("control {w:?}"),
            os(&["plan", w]),
            Expect::Error("HF_HUB_OFFLINE".into()),
        );
    }

    // The hostile mirror.
    let endpoint = start_mirror(outside.clone())?;
    let mirror_scenarios = [
        "list-traversal",
        "list-absolute",
        "list-backslash",
        "list-nul",
        "list-dot",
        "list-long",
        "list-not-json",
        "list-wrong-type",
        "etag-traversal",
        "etag-absolute",
        "etag-slash",
        "etag-empty",
        "etag-long",
        "commit-traversal",
        "commit-absolute",
        "commit-short",
        "commit-upper",
        "commit-missing",
        "size-lie",
    ];
    for scenario in mirror_scenarios {
        for cmd in ["plan", "pull"] {
            let repo = format!("evil/{scenario}");
            let args = if cmd == "plan" {
                os(&["plan", "--model", &repo, "hi"])
            } else {
                os(&["models", "pull", &repo])
            };
            cli.push(CliCase {
                class: "hub-mirror",
                name: format!("{cmd} {scenario}"),
                args,
                env: vec![
                    ("HF_ENDPOINT".into(), endpoint.clone().into()),
                    ("HF_HUB_OFFLINE".into(), "0".into()),
                    ("HF_HOME".into(), hf_home.clone().into()),
                ],
                expect: Expect::Error("evil/".into()),
            });
        }
    }
    // A hostile cache, offline.
    let cache = hf_home.join("hub");
    let evil_cache = |name: &str| cache.join(format!("models--evil--{name}"));
    let mk = |name: &str, refs_main: &[u8]| -> Result<PathBuf> {
        let d = evil_cache(name);
        std::fs::create_dir_all(d.join("refs"))?;
        std::fs::write(d.join("refs/main"), refs_main)?;
        Ok(d)
    };
    mk("refs-traversal", b"../../../../outside")?;
    mk("refs-absolute", s(&outside).as_bytes())?;
    mk("refs-huge", &vec![b'a'; 17 << 20])?;
    {
        let d = evil_cache("refs-fifo");
        std::fs::create_dir_all(d.join("refs"))?;
        let c = std::ffi::CString::new(s(&d.join("refs/main")))?;
        // SAFETY: a valid NUL-terminated path.
        anyhow::ensure!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0, "mkfifo");
    }
    for (name, target) in [
        ("snapshot-escape", outside.join("secret-Q8_0.gguf")),
        ("snapshot-fifo", fifo.clone()),
    ] {
        let d = mk(name, GOOD_COMMIT.as_bytes())?;
        let snap = d.join("snapshots").join(GOOD_COMMIT);
        std::fs::create_dir_all(&snap)?;
        std::fs::write(outside.join("secret-Q8_0.gguf"), b"GGUF")?;
        std::os::unix::fs::symlink(&target, snap.join("model-Q8_0.gguf"))?;
        std::os::unix::fs::symlink(&target, snap.join("mmproj-F16.gguf"))?;
    }
    {
        let d = mk("snapshot-dir-link", GOOD_COMMIT.as_bytes())?;
        std::fs::create_dir_all(d.join("snapshots"))?;
        std::os::unix::fs::symlink(&outside, d.join("snapshots").join(GOOD_COMMIT))?;
    }
    for name in [
        "refs-traversal",
        "refs-absolute",
        "refs-huge",
        "refs-fifo",
        "snapshot-escape",
        "snapshot-fifo",
        "snapshot-dir-link",
    ] {
        cli.push(CliCase {
            class: "hub-cache",
            name: name.to_string(),
            args: os(&["plan", "--model", &format!("evil/{name}"), "hi"]),
            env: vec![("HF_HOME".into(), hf_home.clone().into())],
            expect: Expect::Error(String::new()),
        });
    }

    // Gate replays under Xvfb, in a dry run (the gate judges, nothing runs): each refused
    // case exits 3 without a grant and succeeds with the grants it needs; ordinary work
    // succeeds without any.
    crate::gate_support::prepare_home(&home)?;
    let xvfb = start_xvfb()?;
    if let Some(x) = &xvfb {
        let refused = crate::gate_support::refused_cases()
            .into_iter()
            .filter(|c| c.replayable() && !c.kinds.is_empty());
        let harmless = crate::gate_support::harmless_cases()
            .into_iter()
            .filter(|c| c.replayable());
        for (i, case) in refused.chain(harmless).enumerate() {
            let p = file(
                &format!("gate-{i}.jsonl"),
                format!(
                    "{}\n{{\"kind\":\"done\",\"summary\":\"ok\"}}\n",
                    case.replay_line()
                )
                .as_bytes(),
            )?;
            // One refused batch ends the run (else the replay's next move, done, would).
            let base = [
                "run",
                "--dry-run",
                "--max-failures",
                "1",
                "--replay",
                &s(&p),
            ];
            let env = vec![("DISPLAY".to_string(), OsString::from(&x.1))];
            if case.kinds.is_empty() {
                cli.push(CliCase {
                    class: "gate",
                    name: format!("{} (no grant)", case.name),
                    args: os(&[&base[..], &["tidy up the home folder"]].concat()),
                    env,
                    expect: Expect::Ok("succeeded".into()),
                });
                continue;
            }
            cli.push(CliCase {
                class: "gate",
                name: format!("{} (no grant)", case.name),
                args: os(&[&base[..], &["delete it all, I confirm"]].concat()),
                env: env.clone(),
                expect: Expect::Refused,
            });
            let mut args: Vec<&str> = base.to_vec();
            for grant in &case.allow {
                args.extend(["--allow", grant]);
            }
            args.push("tidy up the home folder");
            cli.push(CliCase {
                class: "gate",
                name: format!("{} (--allow {})", case.name, case.allow.join(" --allow ")),
                args: os(&args),
                env,
                expect: Expect::Ok("succeeded".into()),
            });
        }
        // A program on the PATH that no table knows: `xdpyinfo` is there when these run.
        for (allow, expect) in [
            (None, Expect::Refused),
            (Some("shell"), Expect::Ok("succeeded".into())),
        ] {
            let line = serde_json::json!({"kind": "batch", "purpose": "look", "steps": [
                {"purpose": "type", "action": {"type": "type", "text": "xdpyinfo -queryExtensions\n"}}
            ]});
            let p = file(
                &format!("gate-unknown-{}.jsonl", allow.unwrap_or("none")),
                format!("{line}\n{{\"kind\":\"done\",\"summary\":\"ok\"}}\n").as_bytes(),
            )?;
            let mut args = vec!["run", "--dry-run", "--max-failures", "1", "--replay"];
            let path = s(&p);
            args.push(&path);
            if let Some(a) = allow {
                args.extend(["--allow", a]);
            }
            args.push("show the display's extensions");
            cli.push(CliCase {
                class: "gate",
                name: format!("an unknown program on the PATH (allow {allow:?})"),
                args: os(&args),
                env: vec![("DISPLAY".into(), x.1.clone().into())],
                expect,
            });
        }
        cli.push(CliCase {
            class: "gate",
            name: "an unknown grant kind".into(),
            args: os(&[
                "run",
                "--dry-run",
                "--allow",
                "nuke",
                "--replay",
                "./none.jsonl",
                "tidy",
            ]),
            env: vec![("DISPLAY".into(), x.1.clone().into())],
            expect: Expect::Error("unknown kind".into()),
        });
    }

    // Run the CLI cases, WORKERS at a time, under a common HOME and HF_HOME.
    let before = snapshot(&root, &[&cases_dir, &hf_home]);
    let next = AtomicUsize::new(0);
    let peak_seen = AtomicUsize::new(0);
    let found: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(c) = cli.get(i) else { break };
                let mut env = vec![
                    ("HOME".to_string(), OsString::from(&home)),
                    ("HF_HOME".to_string(), OsString::from(&hf_home)),
                ];
                env.extend(c.env.iter().cloned());
                let outcome = run_child(&c.args, &env, &work);
                if let Ok(o) = &outcome {
                    peak_seen.fetch_max(o.peak_rss_mb as usize, Ordering::SeqCst);
                }
                let verdict = match outcome {
                    Ok(o) => judge(c, &o),
                    Err(e) => Some(format!("[{}] {}: {e:#}", c.class, c.name)),
                };
                tally.add(c.class, 1);
                if let Some(v) = verdict {
                    if let Ok(mut f) = found.lock() {
                        f.push(v);
                    }
                }
            });
        }
    });
    failures.extend(found.into_inner().unwrap_or_default());
    drop(xvfb);
    let after = snapshot(&root, &[&cases_dir, &hf_home]);
    for p in after.difference(&before) {
        failures.push(format!("[fs] created outside the cache: {}", p.display()));
    }
    // Nothing the mirror named outside HF_HOME may exist.
    for p in [
        outside.join("pwned"),
        root.join("pwned"),
        root.join("pwned-Q8_0.gguf"),
    ] {
        if p.symlink_metadata().is_ok() {
            failures.push(format!("[fs] the mirror wrote {}", p.display()));
        }
    }

    // Library-level variations (the pure checks).
    for (name, bytes, needle) in forged_ggufs() {
        let p = file(&format!("lib-{name}.gguf"), &bytes)?;
        match sightline::model::file_checks::check_gguf(&p) {
            Err(e) if e.to_string().contains(needle) || e.to_string().contains(&s(&p)) => {}
            other => failures.push(format!("[gguf-lib] {name}: {other:?}")),
        }
        tally.add("gguf", 1);
    }
    // Every truncation of a real GGUF header is refused or accepted, never a panic.
    let real = std::fs::read(tiny.join("tiny-b-q8_0.gguf"))?;
    let header_probe = real.len().min(4096);
    for cut in (0..header_probe).step_by(97) {
        let p = file("lib-truncated.gguf", &real[..cut])?;
        if sightline::model::file_checks::check_gguf(&p).is_ok() {
            failures.push(format!("[gguf-lib] truncated at {cut} accepted"));
        }
        tally.add("gguf", 1);
    }
    anyhow::ensure!(
        sightline::model::file_checks::check_gguf(&tiny.join("tiny-b-q8_0.gguf")).is_ok()
    );
    for (name, bytes, needle) in forged_safetensors() {
        let p = file(&format!("lib-{name}.safetensors"), &bytes)?;
        match sightline::model::file_checks::check_safetensors(&p) {
            Err(e) if e.to_string().contains(needle) => {}
            other => failures.push(format!("[safetensors-lib] {name}: {other:?}")),
        }
        tally.add("safetensors", 1);
    }
    anyhow::ensure!(sightline::model::file_checks::check_safetensors(
        &tiny.join("model.safetensors")
    )
    .is_ok());
    for (name, bytes, _) in bad_images()? {
        if sightline::image::decode_rgb(&bytes, &sightline::image::InputLimits::default()).is_ok() {
            failures.push(format!("[image-lib] {name} accepted"));
        }
        tally.add("image", 1);
    }
    // 16-bit grey is scaled (high byte), not clipped to white.
    for v in [0x0000u16, 0x00FF, 0x1234, 0x8000, 0xFFFF] {
        let rgb = sightline::image::decode_rgb(
            &grey16_png(&[v; 4], 2)?,
            &sightline::image::InputLimits::default(),
        )?;
        if rgb.as_raw()[0] != (v >> 8) as u8 {
            failures.push(format!("[image-lib] grey16 {v:#06x} → {}", rgb.as_raw()[0]));
        }
        tally.add("image", 1);
    }
    let p = file("bomb.json.gz", &bomb)?;
    if sightline::tokenizer::load_tokenizer(&p).is_ok() {
        failures.push("[tokenizer-lib] gzip bomb accepted".into());
    }
    tally.add("tokenizer", 1);
    for (w, asks) in CLARIFY_WORDINGS
        .iter()
        .map(|s| (s.to_string(), true))
        .chain(CLARIFY_CONTROLS.iter().map(|s| (s.to_string(), false)))
        .chain(clarify_variations())
    {
        let view = sightline::view::empty_view(&w);
        let asked = sightline::planner::clarify::clarify_question(&w, &view);
        if asked.is_some() != asks {
            failures.push(format!(
                "[clarify-lib] {w:?}: asked {asked:?}, expected asking: {asks}"
            ));
        }
        tally.add("clarify", 1);
    }
    hub_name_cases(&mut failures, &tally);

    let counts = tally.0.into_inner().unwrap_or_default();
    let total: usize = counts.values().sum();
    eprintln!(
        "hostile-input cases by class ({total} in all; largest child peak RSS {} MB, bound {MAX_RSS_MB} MB):",
        peak_seen.load(Ordering::SeqCst)
    );
    for (class, n) in &counts {
        eprintln!("  {class:<14} {n}");
    }
    if !failures.is_empty() {
        bail!(
            "{} of {total} cases failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
    anyhow::ensure!(
        total >= MIN_CASES,
        "only {total} cases, expected at least {MIN_CASES}"
    );
    Ok(())
}

/// The Hub name checks through the library.
fn hub_name_cases(failures: &mut Vec<String>, tally: &Tally) {
    use sightline::hub::paths::{
        check_commit, check_file_name, check_repo_id, check_revision, clean_etag,
    };
    let bad_names = [
        "../x",
        "a/../../b",
        "/etc/passwd",
        "a\\b",
        "a\0b",
        "a\nb",
        "",
        ".",
        "..",
        "a//b",
        "c:evil",
    ];
    for n in bad_names {
        if check_file_name(n).is_ok() {
            failures.push(format!("[hub-lib] file name {n:?} accepted"));
        }
        if check_revision(n).is_ok() {
            failures.push(format!("[hub-lib] revision {n:?} accepted"));
        }
        if check_repo_id(n).is_ok() {
            failures.push(format!("[hub-lib] repo {n:?} accepted"));
        }
        if clean_etag(n).is_ok() {
            failures.push(format!("[hub-lib] etag {n:?} accepted"));
        }
        if check_commit(n).is_ok() {
            failures.push(format!("[hub-lib] commit {n:?} accepted"));
        }
        tally.add("hub-names", 5);
    }
}
