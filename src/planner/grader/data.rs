//! The labelled examples `grader fit` reads: the `grader_examples.jsonl` a traced run writes,
//! once a person has set `verified` (and `hint`) on its lines.

use std::path::Path;

use crate::error::{Error, Result};
use crate::input_file::{self, InputKind};
use crate::moves::GraderExample;

/// Every example of the JSONL file at `path` (blank lines skipped), screenshots resolved
/// against the file's directory. A line that is not an example is an error naming the file
/// and line.
pub fn read_examples(path: &Path) -> Result<Vec<GraderExample>> {
    let text = input_file::read_string(path, InputKind::History)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut example: GraderExample = serde_json::from_str(line).map_err(|e| {
            Error::invalid_input_caused(
                format!("{} line {}: not a grader example", path.display(), n + 1),
                e,
            )
        })?;
        if example.screenshot.is_relative() {
            example.screenshot = base.join(&example.screenshot);
        }
        out.push(example);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screenshots_resolve_against_the_file_and_bad_lines_name_it() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let path = dir.path().join("examples.jsonl");
        std::fs::write(
            &path,
            "{\"screenshot\":\"screens/a.png\",\"goal\":\"g\",\"summary\":\"s\",\"verified\":true}\n\n",
        )
        .map_err(|e| Error::io(&path, e))?;
        let examples = read_examples(&path)?;
        assert_eq!(examples.len(), 1);
        assert_eq!(examples[0].screenshot, dir.path().join("screens/a.png"));
        std::fs::write(&path, "{\"goal\": 3}\n").map_err(|e| Error::io(&path, e))?;
        let err = read_examples(&path).err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("line 1")),
            "{err:?}"
        );
        Ok(())
    }
}
