//! Task files of the desktop suite: what to start, the goal, how to check it, the budgets.
//!
//! One task is one TOML file; its oracle replay (moves that solve it) sits beside it as
//! `<name>.oracle.jsonl` unless the file names another. A suite is a directory of them, sorted
//! by name, so `--shard I/N` slices the same list on every machine.
//!
//! ```toml
//! goal = "Answer Yes in the dialog"
//! tags = ["zenity", "trivial"]
//! screen = [1280, 800]            # optional, the virtual screen's size
//! accessibility = true            # optional: false runs it without a session bus (and so
//!                                 # without accessibility elements)
//! allow = ["close"]               # optional: `run --allow` grants the task needs (placeholders
//!                                 # filled: "delete:{tmp}/**")
//!
//! [budget]                        # optional
//! max_steps = 5
//! timeout_s = 60
//!
//! [[setup]]                       # run in order with `sh -c`
//! run = "zenity --question --text 'Continue?'; echo $? > {tmp}/answer"
//! background = true               # keep it running during the task (killed afterwards)
//! wait_window = "Question"        # wait until a visible window's name matches (regex)
//! place = [0, 0]                  # then move that window to x, y (there is no window manager)
//!
//! [check]                         # exit 0 = the task succeeded
//! run = "test \"$(cat {tmp}/answer)\" = 0"
//! wait_s = 5                      # poll until it passes or this long has passed
//! ```
//!
//! Placeholders in `goal`, `run`, `check.run` and the oracle replay: `{tmp}` (the task's own
//! scratch directory, also the working directory of setup and check), `{home}` (the task's
//! private `HOME`), `{display}` (`:N`) and `{suite}` (the suite directory, for fixture files).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};

/// File name ending of task files.
pub const TASK_EXT: &str = "toml";
/// File name ending of a task's default oracle replay (`<name>.oracle.jsonl`).
pub const ORACLE_SUFFIX: &str = ".oracle.jsonl";
/// Default virtual screen of a task.
pub const DEFAULT_SCREEN: (u32, u32) = (1280, 800);
/// Default step budget of a task.
pub const DEFAULT_MAX_STEPS: u32 = 15;
/// Default wall-clock budget of a task's run, in seconds.
pub const DEFAULT_TIMEOUT_S: u64 = 120;
/// Default time a checker is polled for.
pub const DEFAULT_CHECK_WAIT_S: f64 = 5.0;
/// Default time to wait for a setup window.
pub const DEFAULT_WINDOW_WAIT_S: f64 = 20.0;

/// One task, as read from its file.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The file stem: the task's id in reports.
    pub name: String,
    /// The task file.
    pub path: PathBuf,
    /// The goal given to the agent (placeholders not yet substituted).
    pub goal: String,
    /// Free labels for grouping results.
    pub tags: Vec<String>,
    /// The virtual screen's width and height.
    pub screen: (u32, u32),
    /// Whether the task gets a private session bus, so its programs expose their
    /// accessibility trees and the agent sees their elements (default true; false for a
    /// program that misbehaves with one).
    pub accessibility: bool,
    /// The run's budgets.
    pub budget: TaskBudget,
    /// Setup commands, in order.
    pub setup: Vec<SetupCommand>,
    /// Extra environment for setup and check commands.
    pub env: BTreeMap<String, String>,
    /// Grants the agent runs with (`sightline run --allow`), for a task whose solution is
    /// destructive by design; placeholders are filled before use.
    pub allow: Vec<String>,
    /// The checker.
    pub check: Checker,
    /// The oracle replay file.
    pub oracle: PathBuf,
}

/// The budgets a task's run gets.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskBudget {
    /// Steps before the run fails.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// Wall-clock seconds before the run fails.
    #[serde(default = "default_timeout_s")]
    pub timeout_s: u64,
}

impl Default for TaskBudget {
    fn default() -> Self {
        Self {
            max_steps: DEFAULT_MAX_STEPS,
            timeout_s: DEFAULT_TIMEOUT_S,
        }
    }
}

fn default_max_steps() -> u32 {
    DEFAULT_MAX_STEPS
}
fn default_timeout_s() -> u64 {
    DEFAULT_TIMEOUT_S
}
fn default_check_wait_s() -> f64 {
    DEFAULT_CHECK_WAIT_S
}
fn default_window_wait_s() -> f64 {
    DEFAULT_WINDOW_WAIT_S
}

/// One setup command.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupCommand {
    /// Shell text, run with `sh -c` in the task's scratch directory.
    pub run: String,
    /// Keep it running while the task runs (an application); otherwise it must exit 0.
    #[serde(default)]
    pub background: bool,
    /// Wait until a visible window whose name matches this regex exists.
    #[serde(default)]
    pub wait_window: Option<String>,
    /// Seconds to wait for that window.
    #[serde(default = "default_window_wait_s")]
    pub wait_window_s: f64,
    /// Move the window found by `wait_window` to this x, y (no window manager places it).
    #[serde(default)]
    pub place: Option<(i32, i32)>,
}

/// How success is decided.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checker {
    /// Shell text; exit 0 means the task succeeded.
    pub run: String,
    /// Poll the checker until it passes or this many seconds have passed.
    #[serde(default = "default_check_wait_s")]
    pub wait_s: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    goal: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    screen: Option<(u32, u32)>,
    #[serde(default)]
    accessibility: Option<bool>,
    #[serde(default)]
    budget: Option<TaskBudget>,
    #[serde(default)]
    setup: Vec<SetupCommand>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    allow: Vec<String>,
    check: Checker,
    #[serde(default)]
    oracle: Option<PathBuf>,
}

/// Largest virtual screen side accepted (Xvfb's own limit is higher; this catches typos).
const MAX_SCREEN_SIDE: u32 = 8192;
/// Smallest virtual screen side accepted.
const MIN_SCREEN_SIDE: u32 = 64;

impl Task {
    /// Reads and checks one task file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let bad = |why: String| Error::invalid_input(format!("task {}: {why}", path.display()));
        let raw: RawTask = toml::from_str(&text)
            .map_err(|e| Error::invalid_input_caused(format!("task {}", path.display()), e))?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| bad("the file name is not UTF-8".into()))?
            .to_string();
        if raw.goal.trim().is_empty() {
            return Err(bad("the goal is empty".into()));
        }
        if raw.check.run.trim().is_empty() {
            return Err(bad("check.run is empty".into()));
        }
        if !(raw.check.wait_s.is_finite() && raw.check.wait_s >= 0.0) {
            return Err(bad("check.wait_s must be a number of seconds ≥ 0".into()));
        }
        let screen = raw.screen.unwrap_or(DEFAULT_SCREEN);
        let side_ok = |s: u32| (MIN_SCREEN_SIDE..=MAX_SCREEN_SIDE).contains(&s);
        if !side_ok(screen.0) || !side_ok(screen.1) {
            return Err(bad(format!(
                "screen {}x{} is outside {MIN_SCREEN_SIDE}..={MAX_SCREEN_SIDE} per side",
                screen.0, screen.1
            )));
        }
        let budget = raw.budget.unwrap_or_default();
        if budget.max_steps == 0 || budget.timeout_s == 0 {
            return Err(bad(
                "budget.max_steps and budget.timeout_s must be ≥ 1".into()
            ));
        }
        for (i, s) in raw.setup.iter().enumerate() {
            if s.run.trim().is_empty() {
                return Err(bad(format!("setup {} has an empty run", i + 1)));
            }
            if let Some(pattern) = &s.wait_window {
                if pattern.is_empty() {
                    return Err(bad(format!("setup {} has an empty wait_window", i + 1)));
                }
            }
            if s.place.is_some() && s.wait_window.is_none() {
                return Err(bad(format!(
                    "setup {}: place needs wait_window to find the window",
                    i + 1
                )));
            }
            if !(s.wait_window_s.is_finite() && s.wait_window_s > 0.0) {
                return Err(bad(format!("setup {}: wait_window_s must be > 0", i + 1)));
            }
        }
        for grant in &raw.allow {
            check_grant(grant).map_err(|why| bad(format!("allow {grant:?}: {why}")))?;
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let oracle = match raw.oracle {
            Some(p) => dir.join(p),
            None => dir.join(format!("{name}{ORACLE_SUFFIX}")),
        };
        Ok(Task {
            name,
            path: path.to_path_buf(),
            goal: raw.goal,
            tags: raw.tags,
            screen,
            accessibility: raw.accessibility.unwrap_or(true),
            budget,
            setup: raw.setup,
            env: raw.env,
            allow: raw.allow,
            check: raw.check,
            oracle,
        })
    }
}

/// Checks a task's grant: its kind is one `run --allow` knows (the scope is checked by the run,
/// once the placeholders are filled).
fn check_grant(grant: &str) -> std::result::Result<(), String> {
    let kind = grant.split(':').next().unwrap_or_default();
    #[cfg(feature = "desktop")]
    {
        kind.parse::<crate::runner::safety::GrantKind>()
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    #[cfg(not(feature = "desktop"))]
    {
        if kind.trim().is_empty() {
            Err("the kind is empty".to_string())
        } else {
            Ok(())
        }
    }
}

/// Reads every `*.toml` task of a suite directory, sorted by name. A suite without tasks, or
/// two tasks with one name, is an error.
pub fn load_suite(dir: &Path) -> Result<Vec<Task>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut tasks = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if path.extension().and_then(|e| e.to_str()) == Some(TASK_EXT) && path.is_file() {
            tasks.push(Task::load(&path)?);
        }
    }
    tasks.sort_by(|a, b| a.name.cmp(&b.name));
    if tasks.is_empty() {
        return Err(Error::invalid_input(format!(
            "suite {}: no *.{TASK_EXT} task files",
            dir.display()
        )));
    }
    Ok(tasks)
}

/// Keeps the tasks whose name matches one of the comma-separated globs (`*`, `?`); an empty
/// pattern keeps all. A pattern that matches nothing is an error, so a typo is not a silent
/// empty run.
pub fn filter_tasks(tasks: Vec<Task>, patterns: &str) -> Result<Vec<Task>> {
    let globs: Vec<&str> = patterns
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if globs.is_empty() {
        return Ok(tasks);
    }
    for g in &globs {
        if !tasks.iter().any(|t| glob_match(g, &t.name)) {
            return Err(Error::invalid_input(format!(
                "--tasks {g}: matches no task of the suite"
            )));
        }
    }
    Ok(tasks
        .into_iter()
        .filter(|t| globs.iter().any(|g| glob_match(g, &t.name)))
        .collect())
}

/// Whether `text` matches `pattern`, where `*` is any run of characters and `?` one character.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matching with one backtrack point (the last `*`): linear in practice.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A slice `index` of `count` (`--shard I/N`, I from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which slice, from 0.
    pub index: usize,
    /// How many slices.
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::invalid_input(format!("--shard {s}: expected I/N with 0 ≤ I < N"));
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// The tasks of this shard: every `count`-th task of the sorted list, from `index`.
    /// Round-robin rather than contiguous blocks, so long and short tasks (neighbours in name
    /// order) spread over the shards.
    pub fn select<T>(&self, items: Vec<T>) -> Vec<T> {
        items
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % self.count == self.index)
            .map(|(_, t)| t)
            .collect()
    }
}

/// The values placeholders stand for in one task's run.
#[derive(Debug, Clone)]
pub struct Placeholders {
    /// `{tmp}`.
    pub tmp: PathBuf,
    /// `{home}`.
    pub home: PathBuf,
    /// `{display}`.
    pub display: String,
    /// `{suite}`.
    pub suite: PathBuf,
}

impl Placeholders {
    /// `text` with every known placeholder replaced; other braces are left alone (shell
    /// `${VAR}`, awk programs).
    pub fn apply(&self, text: &str) -> String {
        text.replace("{tmp}", &self.tmp.to_string_lossy())
            .replace("{home}", &self.home.to_string_lossy())
            .replace("{display}", &self.display)
            .replace("{suite}", &self.suite.to_string_lossy())
    }

    /// Like [`Placeholders::apply`] for JSON text: the values are escaped as JSON string
    /// content, so a path with a quote or backslash keeps the replay valid.
    pub fn apply_json(&self, text: &str) -> String {
        let esc = |s: &str| {
            let quoted = serde_json::Value::String(s.to_string()).to_string();
            quoted[1..quoted.len() - 1].to_string()
        };
        text.replace("{tmp}", &esc(&self.tmp.to_string_lossy()))
            .replace("{home}", &esc(&self.home.to_string_lossy()))
            .replace("{display}", &esc(&self.display))
            .replace("{suite}", &esc(&self.suite.to_string_lossy()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_stars_and_question_marks() {
        assert!(glob_match("zenity-*", "zenity-question-yes"));
        assert!(glob_match("*yes", "zenity-question-yes"));
        assert!(glob_match("x?erm*", "xterm-echo"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("zenity-*", "xterm-echo"));
        assert!(!glob_match("a*b*c", "a-b-d"));
        assert!(glob_match("a*b*c", "a-b-x-b-c"));
    }

    #[test]
    fn shards_partition_the_list_and_reject_bad_specs() -> Result<()> {
        let items: Vec<u32> = (0..7).collect();
        let a = "0/2".parse::<Shard>()?.select(items.clone());
        let b = "1/2".parse::<Shard>()?.select(items.clone());
        assert_eq!(a, vec![0, 2, 4, 6]);
        assert_eq!(b, vec![1, 3, 5]);
        for bad in ["2/2", "1", "a/b", "0/0", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        Ok(())
    }

    #[test]
    fn placeholders_are_replaced_and_other_braces_kept() {
        let p = Placeholders {
            tmp: "/t/x".into(),
            home: "/h".into(),
            display: ":5".into(),
            suite: "/s".into(),
        };
        assert_eq!(
            p.apply("cd {tmp} && echo ${HOME} {home} {display} {suite} {other}"),
            "cd /t/x && echo ${HOME} /h :5 /s {other}"
        );
        let q = Placeholders {
            tmp: "/t/a\"b".into(),
            ..p
        };
        assert_eq!(q.apply_json(r#"{"text":"{tmp}"}"#), r#"{"text":"/t/a\"b"}"#);
    }

    #[test]
    fn task_files_are_checked_with_the_file_named() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io(Path::new("tmp"), e))?;
        let write = |name: &str, text: &str| -> Result<PathBuf> {
            let p = dir.path().join(name);
            std::fs::write(&p, text).map_err(|e| Error::io(&p, e))?;
            Ok(p)
        };
        let good = write(
            "b-task.toml",
            "goal = \"g\"\ntags=[\"t\"]\n[[setup]]\nrun=\"true\"\n[check]\nrun=\"true\"\n",
        )?;
        let t = Task::load(&good)?;
        assert_eq!(t.name, "b-task");
        assert_eq!(t.oracle, dir.path().join("b-task.oracle.jsonl"));
        assert_eq!(t.budget, TaskBudget::default());
        // A task gets a session bus unless its file turns accessibility off.
        assert!(t.accessibility);
        let plain = write(
            "c-task.toml",
            "goal = \"g\"\naccessibility = false\n[check]\nrun=\"true\"\n",
        )?;
        assert!(!Task::load(&plain)?.accessibility);
        std::fs::remove_file(&plain).map_err(|e| Error::io(&plain, e))?;
        write("a-task.toml", "goal = \"g\"\n[check]\nrun=\"true\"\n")?;
        let names: Vec<String> = load_suite(dir.path())?
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["a-task", "b-task"]);

        for (name, text, why) in [
            (
                "e1.toml",
                "goal=\"\"\n[check]\nrun=\"true\"\n",
                "goal is empty",
            ),
            ("e2.toml", "goal=\"g\"\n", "check"),
            (
                "e3.toml",
                "goal=\"g\"\nscreen=[10,10]\n[check]\nrun=\"x\"\n",
                "screen",
            ),
            (
                "e4.toml",
                "goal=\"g\"\nbogus=1\n[check]\nrun=\"x\"\n",
                "bogus",
            ),
            (
                "e5.toml",
                "goal=\"g\"\n[[setup]]\nrun=\"x\"\nplace=[0,0]\n[check]\nrun=\"x\"\n",
                "place needs wait_window",
            ),
        ] {
            let p = write(name, text)?;
            let err = Task::load(&p)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(name) && err.contains(why), "{name}: {err}");
            std::fs::remove_file(&p).map_err(|e| Error::io(&p, e))?;
        }
        let err = filter_tasks(load_suite(dir.path())?, "nope-*")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("nope-*"), "{err}");
        assert_eq!(filter_tasks(load_suite(dir.path())?, "a-*")?.len(), 1);
        Ok(())
    }
}
