//! What the gate found a step needs ([`Need`]) and, when the grants do not cover it, the
//! structured refusal ([`Refusal`]): the step, why, and the exact `--allow` flags that would
//! let it run. Its `Display` is one line for the planner's history and the user.

use std::fmt;
use std::path::Path;

use super::grants::{home_dir, GrantKind, Target};

/// One permission a step needs: a kind, what it touches, and a phrase saying what the step
/// does ("deleting ~/tmp/old.txt").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The grant kind that allows it.
    pub kind: GrantKind,
    /// What it touches, for a scoped grant.
    pub target: Target,
    /// What the step does, as a gerund phrase ("deleting ~/tmp/old.txt", "running `make`,
    /// which the gate does not know").
    pub what: String,
}

impl Need {
    /// A need of `kind` on `target`.
    pub fn new(kind: GrantKind, target: Target, what: impl Into<String>) -> Self {
        Self {
            kind,
            target,
            what: what.into(),
        }
    }

    /// The `--allow` value that grants exactly this: the kind, scoped to the path when there
    /// is one (`delete:~/tmp/old.txt`, `delete:~/tmp/**`), else the bare kind.
    pub fn grant_spec(&self) -> String {
        if !self.kind.takes_paths() {
            return self.kind.name().to_string();
        }
        match &self.target {
            Target::Path(p) => format!("{}:{}", self.kind, tilde(p)),
            Target::Inside(d) => {
                format!("{}:{}/**", self.kind, tilde(d).trim_end_matches('/'))
            }
            Target::Unknown => self.kind.name().to_string(),
        }
    }

    /// The command-line flag for [`Need::grant_spec`], quoted for a POSIX shell when needed.
    pub fn allow_flag(&self) -> String {
        format!("--allow {}", shell_quote(&self.grant_spec()))
    }
}

/// A path with the home directory written as `~`.
pub fn tilde(path: &Path) -> String {
    if let Some(home) = home_dir() {
        if let Ok(rest) = path.strip_prefix(&home) {
            return if rest.as_os_str().is_empty() {
                "~".to_string()
            } else {
                format!("~/{}", rest.display())
            };
        }
    }
    path.display().to_string()
}

/// `text` as one word for a POSIX shell: as it is when it has only safe characters, else in
/// single quotes.
fn shell_quote(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:~*@%+=,".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// A step the gate refused: which step, what it would have done, and the grants that would
/// allow it. The runner records it as the step's outcome; its [`Display`](fmt::Display) is
/// the history line the planner reads next turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The step's index in its batch.
    pub step_index: usize,
    /// The step's purpose, as the planner wrote it.
    pub purpose: String,
    /// The step's action, described (`type "rm -rf ~"`, `key alt+F4`).
    pub action: String,
    /// What the step needs that no grant covers (empty only when [`Refusal::unjudgeable`] says
    /// why no grant can apply).
    pub missing: Vec<Need>,
    /// Why the step cannot be judged at all (a click on a point nothing describes); only an
    /// approval of that one step lets it run.
    pub unjudgeable: Option<String>,
}

impl Refusal {
    /// The kinds missing, each once, in [`GrantKind::ALL`] order.
    pub fn kinds(&self) -> Vec<GrantKind> {
        let mut kinds: Vec<GrantKind> = self.missing.iter().map(|n| n.kind).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// The `--allow` flags that would let the step run, each once, in order of need.
    pub fn allow_flags(&self) -> Vec<String> {
        let mut flags: Vec<String> = Vec::new();
        for need in &self.missing {
            let flag = need.allow_flag();
            if !flags.contains(&flag) {
                flags.push(flag);
            }
        }
        flags
    }

    /// What the step would do, as one phrase ("deleting ~/x and overwriting ~/y"), or why it
    /// cannot be judged.
    pub fn what(&self) -> String {
        match &self.unjudgeable {
            Some(why) => why.clone(),
            None => join_and(&self.whats()),
        }
    }

    /// The missing needs' phrases, each once.
    fn whats(&self) -> Vec<&str> {
        let mut whats: Vec<&str> = Vec::new();
        for need in &self.missing {
            if !whats.contains(&need.what.as_str()) {
                whats.push(&need.what);
            }
        }
        whats
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(why) = &self.unjudgeable {
            return write!(f, "refused: {why}");
        }
        let whats = self.whats();
        let verb = if whats.len() == 1 { "needs" } else { "need" };
        write!(
            f,
            "refused: {} {verb} the user's permission ({})",
            join_and(&whats),
            self.allow_flags().join(" ")
        )
    }
}

/// "a", "a and b", "a, b and c".
fn join_and(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A path for a phrase: `~`-relative when under the home directory.
pub(super) fn shown(path: &Path) -> String {
    tilde(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_refusal_names_what_and_the_exact_grant() {
        let r = Refusal {
            step_index: 1,
            purpose: "remove it".into(),
            action: "type \"rm /srv/old.txt\"".into(),
            missing: vec![Need::new(
                GrantKind::Delete,
                Target::Path(PathBuf::from("/srv/old.txt")),
                "deleting /srv/old.txt",
            )],
            unjudgeable: None,
        };
        assert_eq!(
            r.to_string(),
            "refused: deleting /srv/old.txt needs the user's permission (--allow \
             delete:/srv/old.txt)"
        );
        let two = Refusal {
            missing: vec![
                Need::new(GrantKind::Shell, Target::Unknown, "running `make`"),
                Need::new(
                    GrantKind::Overwrite,
                    Target::Inside(PathBuf::from("/srv/my dir")),
                    "overwriting files in /srv/my dir",
                ),
            ],
            ..r
        };
        assert_eq!(
            two.to_string(),
            "refused: running `make` and overwriting files in /srv/my dir need the user's \
             permission (--allow shell --allow 'overwrite:/srv/my dir/**')"
        );
        assert_eq!(two.kinds(), vec![GrantKind::Overwrite, GrantKind::Shell]);
    }
}
