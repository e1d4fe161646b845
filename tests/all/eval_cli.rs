//! `sightline eval` end to end: the desktop suite's oracle at 100%, checkers that fail when
//! nothing is done, shards that merge into the unsharded summary, a model run's report, the
//! grounding sample, teardown on Ctrl-C, and clear errors for bad input.
//!
//! Needs Xvfb, xdotool, xterm, zenity, xmessage (x11-utils), mousepad, firefox-esr,
//! dbus-daemon and the accessibility test windows' stack (at-spi2-core, Debian's python3-gi
//! with gir1.2-gtk-3.0 and gir1.2-gtk-4.0, python3-pyqt5); without them the desktop tests say
//! so and pass, unless `SIGHTLINE_REQUIRE_X11_TESTS=1` (as in CI).

use std::path::Path;
use std::time::{Duration, Instant};

use super::eval_support::*;
use anyhow::{ensure, Context};
use serde_json::Value;

/// The tests of this file run one at a time: the oracle's clicks are timed for a machine
/// that is not also running a model beside them.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

const REQUIRE_ENV: &str = "SIGHTLINE_REQUIRE_X11_TESTS";
const SUITE_TOOLS: &[&str] = &[
    "Xvfb",
    "xdotool",
    "xterm",
    "zenity",
    "xmessage",
    "mousepad",
    "dbus-daemon",
    "/usr/libexec/at-spi-bus-launcher",
    "/usr/bin/python3",
    "firefox-esr",
];
/// Tasks in the starter suite: every task file there (the run must find each one).
fn suite_tasks() -> anyhow::Result<u64> {
    let mut n = 0;
    for entry in std::fs::read_dir(root().join("evals/desktop"))? {
        if entry?.path().extension().is_some_and(|x| x == "toml") {
            n += 1;
        }
    }
    ensure!(n >= 25, "only {n} task files found");
    Ok(n)
}

fn tools_available(programs: &[&str]) -> anyhow::Result<bool> {
    let missing: Vec<&str> = programs
        .iter()
        .copied()
        .filter(|p| {
            !std::process::Command::new("sh")
                .args(["-c", &format!("command -v {p} >/dev/null")])
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    if missing.is_empty() {
        return Ok(true);
    }
    ensure!(
        std::env::var(REQUIRE_ENV).as_deref() != Ok("1"),
        "missing tools for the eval tests: {}",
        missing.join(", ")
    );
    eprintln!("SKIPPED: missing {}", missing.join(", "));
    Ok(false)
}

fn json_line(o: &std::process::Output) -> anyhow::Result<Value> {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let line = stdout.lines().last().context("no output")?;
    serde_json::from_str(line).with_context(|| text(o))
}

/// A summary without its timings, which differ from run to run.
fn without_timings(mut s: Value) -> Value {
    if let Some(o) = s.as_object_mut() {
        o.remove("stages_per_turn");
        o.remove("planner_stages_per_call");
    }
    if let Some(tasks) = s.get_mut("per_task").and_then(Value::as_array_mut) {
        for t in tasks {
            if let Some(o) = t.as_object_mut() {
                o.remove("mean_wall_s");
            }
        }
    }
    s
}

/// Every process whose command line or environment names `dir`: what a task left running.
/// The environment catches what a task's programs and session bus started without naming
/// the directory (the AT-SPI bus launcher and registry get the task's `HOME`).
fn processes_naming(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if cmdline.contains(&needle) || String::from_utf8_lossy(&environ).contains(&needle) {
            found.push(cmdline);
        }
    }
    found
}

#[test]
fn oracle_suite_passes_every_task_and_shards_merge_to_the_same_summary() -> anyhow::Result<()> {
    let _serial = serial();
    if !tools_available(SUITE_TOOLS)? {
        return Ok(());
    }
    let work = tempfile::tempdir()?;
    let scratch = work.path().join("scratch");
    std::fs::create_dir(&scratch)?;
    let env = [("TMPDIR", scratch.as_path())];
    let out = work.path().join("all");
    let o = sightline(
        &[
            "eval",
            "desktop",
            "--oracle",
            "--json",
            "--out",
            out.to_str().context("path")?,
        ],
        &env,
        &root(),
    )?;
    ensure!(o.status.success(), "{}", text(&o));
    let all = json_line(&o)?;
    let suite = suite_tasks()?;
    assert_eq!(all["runs"], suite, "{}", text(&o));
    assert_eq!(all["passed"], suite, "{}", text(&o));
    assert_eq!(all["success_rate"], 1.0);
    // One results line per run, each with its trace.
    let lines = std::fs::read_to_string(out.join("results.jsonl"))?;
    assert_eq!(lines.lines().count() as u64, suite);
    for line in lines.lines() {
        let run: Value = serde_json::from_str(line)?;
        let trace = run["trace_dir"].as_str().context("trace_dir")?;
        ensure!(Path::new(trace).join("outcome.json").is_file(), "{trace}");
    }
    // Everything was torn down: no scratch directory and no program is left.
    let left: Vec<_> = std::fs::read_dir(&scratch)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    assert!(left.is_empty(), "left in the scratch directory: {left:?}");
    assert!(
        processes_naming(&scratch).is_empty(),
        "{:?}",
        processes_naming(&scratch)
    );

    // Shards of a part of the suite (the whole suite once is enough to run): merged, they
    // give the summary of the same tasks' unsharded runs.
    const PART: &str = "xterm-*";
    let shards = work.path().join("shards");
    for shard in ["0/2", "1/2"] {
        let o = sightline(
            &[
                "eval",
                "desktop",
                "--oracle",
                "--tasks",
                PART,
                "--shard",
                shard,
                "--out",
                shards.to_str().context("path")?,
            ],
            &env,
            &root(),
        )?;
        ensure!(o.status.success(), "{}", text(&o));
    }
    let part_of_all = work.path().join("part-of-all.jsonl");
    let kept: Vec<&str> = lines
        .lines()
        .filter(|l| l.contains("\"task\":\"xterm-"))
        .collect();
    ensure!(kept.len() >= 4, "{} xterm runs", kept.len());
    std::fs::write(&part_of_all, kept.join("\n") + "\n")?;
    let o = sightline(
        &[
            "eval",
            "merge",
            "--json",
            part_of_all.to_str().context("path")?,
        ],
        &[],
        &root(),
    )?;
    ensure!(o.status.success(), "{}", text(&o));
    let unsharded = json_line(&o)?;
    let files: Vec<String> = ["results-shard-0-of-2.jsonl", "results-shard-1-of-2.jsonl"]
        .iter()
        .map(|f| shards.join(f).to_string_lossy().into_owned())
        .collect();
    let o = sightline(
        &["eval", "merge", "--json", &files[0], &files[1]],
        &[],
        &root(),
    )?;
    ensure!(o.status.success(), "{}", text(&o));
    assert_eq!(without_timings(json_line(&o)?), without_timings(unsharded));
    // Overlapping results are refused rather than double-counted.
    let o = sightline(&["eval", "merge", &files[0], &files[0]], &[], &root())?;
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("appears twice"),
        "{}",
        text(&o)
    );
    Ok(())
}

#[test]
fn checkers_fail_when_the_agent_does_nothing() -> anyhow::Result<()> {
    let _serial = serial();
    if !tools_available(SUITE_TOOLS)? {
        return Ok(());
    }
    let work = tempfile::tempdir()?;
    let noop = root().join("evals/noop.jsonl");
    let o = sightline(
        &[
            "eval",
            "desktop",
            "--json",
            "--replay",
            noop.to_str().context("path")?,
            "--tasks",
            "xterm-echo-file,zenity-question-no,mousepad-type-save,xmessage-apply,\
                        zenity-file-choose,a11y-press-beta,a11y-name-and-notify,loop-delayed-viewer",
            "--out",
            work.path().to_str().context("path")?,
        ],
        &[],
        &root(),
    )?;
    ensure!(o.status.success(), "{}", text(&o));
    let s = json_line(&o)?;
    assert_eq!(s["runs"], 8, "{}", text(&o));
    assert_eq!(s["passed"], 0, "{}", text(&o));
    // The no-op claims done at once: every failure is a claim the checker rejected.
    assert_eq!(
        s["failures"]["claimed_done_but_check_failed"],
        8,
        "{}",
        text(&o)
    );
    Ok(())
}

/// The tasks whose oracle targets element ids only (no `xy:` point), each with the first id
/// its oracle names.
fn element_id_tasks() -> anyhow::Result<Vec<(String, String)>> {
    let mut tasks = Vec::new();
    for entry in std::fs::read_dir(root().join("evals/desktop"))? {
        let path = entry?.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".oracle.jsonl"))
        else {
            continue;
        };
        let oracle = std::fs::read_to_string(&path)?;
        if oracle.contains("xy:") {
            continue;
        }
        let first_id = oracle
            .split("\"target_id\": \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .with_context(|| format!("{name}: an oracle without xy: names no target id"))?;
        tasks.push((name.to_string(), first_id.to_string()));
    }
    tasks.sort();
    Ok(tasks)
}

/// The oracles that click element ids resolve them only through the task's session bus, so
/// with `--no-elements` (no bus, the agent without elements) every one of them fails, and
/// fails for the honest reason: its first failed step is the first id it names, not in the
/// view.
#[test]
fn without_elements_every_element_id_oracle_fails_on_its_first_id() -> anyhow::Result<()> {
    let _serial = serial();
    if !tools_available(SUITE_TOOLS)? {
        return Ok(());
    }
    let tasks = element_id_tasks()?;
    ensure!(tasks.len() >= 16, "element-id tasks: {tasks:?}");
    let names: Vec<&str> = tasks.iter().map(|(n, _)| n.as_str()).collect();
    let work = tempfile::tempdir()?;
    let out = work.path().join("out");
    let o = sightline(
        &[
            "eval",
            "desktop",
            "--oracle",
            "--no-elements",
            "--json",
            "--tasks",
            &names.join(","),
            "--out",
            out.to_str().context("path")?,
        ],
        &[],
        &root(),
    )?;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let s = json_line(&o)?;
    assert_eq!(s["runs"], tasks.len(), "{}", text(&o));
    assert_eq!(s["passed"], 0, "{}", text(&o));
    for line in std::fs::read_to_string(out.join("results.jsonl"))?.lines() {
        let run: Value = serde_json::from_str(line)?;
        let task = run["task"].as_str().unwrap_or_default();
        let (_, first_id) = tasks
            .iter()
            .find(|(n, _)| n == task)
            .with_context(|| format!("unexpected task in {run}"))?;
        // The first step on an element id fails (its batch ends, the run goes on) and the
        // checker finds the task undone, whatever the replay claims next.
        assert_eq!(run["passed"], false, "{run}");
        let trace = run["trace_dir"].as_str().context("no trace")?;
        let turns = sightline::runner::trace::read_turns(std::path::Path::new(trace))?;
        let first_failure = turns
            .iter()
            .flat_map(|t| &t.attempts)
            .find(|a| !a.succeeded)
            .and_then(|a| a.error.clone())
            .with_context(|| format!("{task}: no step failed: {run}"))?;
        ensure!(
            first_failure.contains(&format!("{first_id:?}")),
            "{task}: the first failure does not name {first_id}: {first_failure}"
        );
    }
    Ok(())
}

#[test]
fn model_run_on_three_tasks_writes_a_full_report_whatever_the_score() -> anyhow::Result<()> {
    let _serial = serial();
    if !tools_available(&["Xvfb", "xdotool", "zenity", "xmessage"])? {
        return Ok(());
    }
    let work = tempfile::tempdir()?;
    let tiny = root().join("models/fixtures/tiny-a");
    let o = sightline(
        &[
            "eval",
            "desktop",
            "--json",
            "--model",
            tiny.to_str().context("path")?,
            "--tasks",
            "zenity-question-yes,zenity-question-no,xmessage-apply",
            // One planner call per task: the random tiny model writes long strings, and
            // the report's shape is what is tested, not the score.
            "--max-steps",
            "1",
            "--timeout",
            "1",
            "--out",
            work.path().to_str().context("path")?,
        ],
        &[],
        &root(),
    )?;
    ensure!(o.status.success(), "{}", text(&o));
    let s = json_line(&o)?;
    assert_eq!(s["runs"], 3, "{}", text(&o));
    assert_eq!(s["tasks"], 3);
    assert_eq!(s["planners"][0], tiny.to_str().context("path")?);
    let (lo, hi) = (
        s["ci95"][0].as_f64().context("ci")?,
        s["ci95"][1].as_f64().context("ci")?,
    );
    let rate = s["success_rate"].as_f64().context("rate")?;
    ensure!(lo <= rate && rate <= hi, "{s}");
    let failed = 3 - s["passed"].as_u64().context("passed")?;
    let by_reason: u64 = s["failures"]
        .as_object()
        .context("failures")?
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(by_reason, failed, "{s}");
    // The model planner's own stages were read from the runs.
    let calls = s["planner_stages_per_call"]["calls"]
        .as_u64()
        .context("planner stages")?;
    ensure!(calls >= 3, "{s}");
    ensure!(
        s["planner_stages_per_call"]["decode_ms"]
            .as_f64()
            .context("decode")?
            > 0.0
    );
    ensure!(
        s["stages_per_turn"]["turns"].as_u64().context("turns")? >= 3,
        "{s}"
    );
    let lines = std::fs::read_to_string(work.path().join("results.jsonl"))?;
    for line in lines.lines() {
        let run: Value = serde_json::from_str(line)?;
        ensure!(
            run["reason"].is_string() && run["check"]["passed"].is_boolean(),
            "{run}"
        );
    }
    std::fs::metadata(work.path().join("summary.json"))?;
    Ok(())
}

#[test]
fn ctrl_c_tears_every_task_down_and_exits_130() -> anyhow::Result<()> {
    let _serial = serial();
    if !tools_available(&["Xvfb", "xdotool", "xterm"])? {
        return Ok(());
    }
    let work = tempfile::tempdir()?;
    let scratch = work.path().join("scratch");
    std::fs::create_dir(&scratch)?;
    // A replay that waits: the xterm and the display are up when Ctrl-C comes.
    let slow = work.path().join("slow.jsonl");
    std::fs::write(
        &slow,
        r#"{"kind":"batch","purpose":"wait","steps":[{"purpose":"wait","action":{"type":"wait","ms":20000}}]}"#,
    )?;
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_sightline"))
        .args(["eval", "desktop", "--tasks", "xterm-echo-file", "--replay"])
        .arg(&slow)
        .arg("--out")
        .arg(work.path().join("out"))
        .env("TMPDIR", &scratch)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    // Wait until the task's xterm runs, then interrupt as a terminal would.
    let deadline = Instant::now() + Duration::from_secs(30);
    while processes_naming(&scratch)
        .iter()
        .all(|p| !p.contains("xterm"))
    {
        ensure!(Instant::now() < deadline, "the task's xterm never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let pid = i32::try_from(child.id())?;
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
    let o = child.wait_with_output()?;
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert!(
        processes_naming(&scratch).is_empty(),
        "{:?}",
        processes_naming(&scratch)
    );
    assert_eq!(std::fs::read_dir(&scratch)?.count(), 0);
    let results = std::fs::read_to_string(work.path().join("out/results.jsonl"))?;
    assert!(results.contains("\"reason\":\"interrupted\""), "{results}");
    Ok(())
}

#[test]
fn grounding_sample_is_scored_with_the_tiny_model() -> anyhow::Result<()> {
    let _serial = serial();
    let work = tempfile::tempdir()?;
    let data = root().join("evals/grounding/sample/data.jsonl");
    let tiny = root().join("models/fixtures/tiny-a");
    let per_record = work.path().join("records.jsonl");
    let o = sightline(
        &[
            "eval",
            "grounding",
            data.to_str().context("path")?,
            "--model",
            tiny.to_str().context("path")?,
            "--device",
            "cpu",
            "--out",
            per_record.to_str().context("path")?,
            "--json",
            // Three records (two text targets and an icon) keep the random model's ~4 s per
            // record within the test budget; the scoring itself has unit tests.
            "--limit",
            "3",
        ],
        &[],
        &root(),
    )?;
    ensure!(o.status.success(), "{}", text(&o));
    let s = json_line(&o)?;
    let records = 3u64;
    assert_eq!(s["overall"]["n"], records, "{s}");
    assert_eq!(
        s["by_type"]["text"]["n"].as_u64().context("text")?
            + s["by_type"]["icon"]["n"].as_u64().context("icon")?,
        records
    );
    assert_eq!(s["by_platform"]["desktop"]["n"], records);
    let lines = std::fs::read_to_string(&per_record)?;
    assert_eq!(lines.lines().count() as u64, records);
    for line in lines.lines() {
        let r: Value = serde_json::from_str(line)?;
        // A hit needs a point inside the box; a miss without a point says why.
        if r["hit"] == true {
            let (x, y) = (
                r["point"][0].as_f64().context("x")?,
                r["point"][1].as_f64().context("y")?,
            );
            let b = &r["target"];
            ensure!(
                b["x1"].as_f64() <= Some(x)
                    && Some(x) <= b["x2"].as_f64()
                    && b["y1"].as_f64() <= Some(y)
                    && Some(y) <= b["y2"].as_f64(),
                "{r}"
            );
        } else if r["point"].is_null() {
            ensure!(r["error"].is_string(), "{r}");
        }
    }
    Ok(())
}

#[test]
fn grounding_runs_a_grounding_model_in_its_own_dialect() -> anyhow::Result<()> {
    let _serial = serial();
    let work = tempfile::tempdir()?;
    let data = root().join("evals/grounding/sample/data.jsonl");
    let tiny = root().join("models/fixtures/tiny-a");
    let per_record = work.path().join("records.jsonl");
    let o = sightline(
        &[
            "eval",
            "grounding",
            data.to_str().context("path")?,
            "--model",
            tiny.to_str().context("path")?,
            "--device",
            "cpu",
            // UI-Venus-1.5's bare point: `[x,y]` or `[-1,-1]`, nothing else.
            "--dialect",
            "grounding-point",
            "--out",
            per_record.to_str().context("path")?,
            "--json",
            "--limit",
            "2",
        ],
        &[],
        &root(),
    )?;
    ensure!(o.status.success(), "{}", text(&o));
    assert_eq!(json_line(&o)?["overall"]["n"], 2u64);
    for line in std::fs::read_to_string(&per_record)?.lines() {
        let r: Value = serde_json::from_str(line)?;
        // Every answer is a point, or the dialect's "nothing matches" (`[-1,-1]`, a fail).
        ensure!(
            r["point"].is_array()
                || r["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("the move was fail")),
            "{r}"
        );
    }
    Ok(())
}

#[test]
fn grounding_sample_is_what_its_generator_makes() -> anyhow::Result<()> {
    let _serial = serial();
    let dir = root().join("evals/grounding/sample");
    let (images, jsonl) = synthetic_sample();
    if std::env::var("SIGHTLINE_REGENERATE_SAMPLE").as_deref() == Ok("1") {
        std::fs::create_dir_all(&dir)?;
        for (name, img) in &images {
            img.save(dir.join(name))?;
        }
        std::fs::write(dir.join("data.jsonl"), &jsonl)?;
    }
    assert_eq!(std::fs::read_to_string(dir.join("data.jsonl"))?, jsonl);
    for (name, img) in &images {
        let committed = image::open(dir.join(name))?.to_rgb8();
        ensure!(committed == *img, "{name} differs from the generator's");
    }
    Ok(())
}

#[test]
fn bad_suites_and_arguments_exit_2_naming_the_problem() -> anyhow::Result<()> {
    let _serial = serial();
    let work = tempfile::tempdir()?;
    let suite = work.path().join("suite");
    std::fs::create_dir(&suite)?;
    std::fs::write(suite.join("broken.toml"), "goal = \"g\"\n")?;
    let suite_s = suite.to_str().context("path")?;
    let cases: [(&[&str], &str); 5] = [
        (
            &["eval", "desktop", "--oracle", "--suite", suite_s],
            "broken.toml",
        ),
        (
            &["eval", "desktop", "--oracle", "--tasks", "no-such-*"],
            "no-such-*",
        ),
        (&["eval", "desktop", "--oracle", "--shard", "2/2"], "2/2"),
        (
            &["eval", "merge", "/no/such/results.jsonl"],
            "/no/such/results.jsonl",
        ),
        (
            &["eval", "grounding", "/no/such/data.jsonl"],
            "/no/such/data.jsonl",
        ),
    ];
    for (args, needle) in cases {
        let o = sightline(args, &[], &root())?;
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(needle),
            "{args:?}: {}",
            text(&o)
        );
    }
    Ok(())
}
