//! The safe-path layer for the Hugging Face Hub and its cache.
//!
//! A Hub mirror (`HF_ENDPOINT`) and the cache directory on disk are trusted for *content*
//! (the bytes of a model file) but not for *names*: every value that becomes part of a path —
//! the repo id, the revision, a file name (asked for, listed by the mirror, or named in a
//! safetensors index), the `etag` and `x-repo-commit` headers, the `refs/<revision>` file read
//! back from the cache — is checked here before any path is built from it, and every path
//! used is checked to stay under the cache root after following symlinks ([`ensure_under`]).
//! A bad value is an [`Error::Hub`] naming it, never a panic and never a write elsewhere.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Longest accepted repo id (`owner/name`), revision and file name, in bytes. The Hub's own
/// limits are 96 characters for each half of a repo id; file paths are far shorter in practice.
pub const MAX_REPO_ID_BYTES: usize = 200;
/// See [`MAX_REPO_ID_BYTES`].
pub const MAX_REVISION_BYTES: usize = 256;
/// See [`MAX_REPO_ID_BYTES`]; per path component it is 255 (the usual file-system limit).
pub const MAX_FILE_NAME_BYTES: usize = 1024;
/// Longest accepted etag: a sha256 in hex is 64 characters.
pub const MAX_ETAG_BYTES: usize = 128;

fn bad(what: &str, value: &str, why: &str) -> Error {
    let shown: String = value.chars().take(80).collect();
    Error::hub(
        shown.escape_debug().to_string(),
        format!("unsafe {what} {shown:?} ({why}); refusing to use it as a path"),
    )
}

/// Characters allowed in one component of a repo id or revision.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// A component (between `/`) of a name: non-empty, not `.` or `..`, at most 255 bytes, no
/// control characters, no backslash, no NUL.
fn check_component(what: &str, whole: &str, part: &str) -> Result<()> {
    if part.is_empty() {
        return Err(bad(what, whole, "empty path component"));
    }
    if part == "." || part == ".." {
        return Err(bad(what, whole, "`.` or `..` component"));
    }
    if part.len() > 255 {
        return Err(bad(what, whole, "a component longer than 255 bytes"));
    }
    if let Some(c) = part
        .chars()
        .find(|c| c.is_control() || *c == '\\' || *c == ':')
    {
        return Err(bad(what, whole, &format!("character {c:?} not allowed")));
    }
    Ok(())
}

/// A Hub repo id: `owner/name`, each `[A-Za-z0-9._-]+`, not `.`/`..`, not starting with `.`.
pub fn check_repo_id(repo: &str) -> Result<()> {
    if repo.len() > MAX_REPO_ID_BYTES {
        return Err(bad("repo id", repo, "too long"));
    }
    let Some((owner, name)) = repo.split_once('/') else {
        return Err(bad("repo id", repo, "not owner/name"));
    };
    for part in [owner, name] {
        if part.is_empty() || part.starts_with('.') || !part.chars().all(is_name_char) {
            return Err(bad(
                "repo id",
                repo,
                "each half must be letters, digits, `-`, `_`, `.` and not start with `.`",
            ));
        }
    }
    Ok(())
}

/// A revision (branch, tag or commit): `/`-separated components of `[A-Za-z0-9._-]`, none
/// `.` or `..` (branches like `refs/pr/1` keep their slashes, as the Hub cache does).
pub fn check_revision(revision: &str) -> Result<()> {
    if revision.is_empty() || revision.len() > MAX_REVISION_BYTES {
        return Err(bad("revision", revision, "empty or too long"));
    }
    for part in revision.split('/') {
        check_component("revision", revision, part)?;
        if !part.chars().all(is_name_char) {
            return Err(bad(
                "revision",
                revision,
                "only letters, digits, `-`, `_`, `.` and `/` are allowed",
            ));
        }
    }
    Ok(())
}

/// A file name inside a repo: a relative `/`-separated path, no `.`/`..` components, no
/// absolute path, backslash, drive colon, NUL or control character, at most
/// [`MAX_FILE_NAME_BYTES`].
pub fn check_file_name(file: &str) -> Result<()> {
    if file.is_empty() || file.len() > MAX_FILE_NAME_BYTES {
        return Err(bad("file name", file, "empty or too long"));
    }
    if file.starts_with('/') {
        return Err(bad("file name", file, "absolute path"));
    }
    for part in file.split('/') {
        check_component("file name", file, part)?;
    }
    Ok(())
}

/// A commit hash as the Hub sends it (`x-repo-commit`) and the cache stores it
/// (`refs/<revision>`): exactly 40 lower-case hex digits.
pub fn check_commit(commit: &str) -> Result<()> {
    if commit.len() == 40
        && commit
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(bad("commit hash", commit, "not 40 lower-case hex digits"))
    }
}

/// An etag (`x-linked-etag` or `etag`), after the quotes and a weak `W/` prefix are removed:
/// 1 to [`MAX_ETAG_BYTES`] of `[A-Za-z0-9_-]`. Returns the cleaned etag, which names the blob.
pub fn clean_etag(raw: &str) -> Result<String> {
    let etag = raw.trim();
    let etag = etag.strip_prefix("W/").unwrap_or(etag).replace('"', "");
    if etag.is_empty()
        || etag.len() > MAX_ETAG_BYTES
        || !etag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
    {
        return Err(bad(
            "etag",
            raw,
            "only letters, digits, `-` and `_` are allowed",
        ));
    }
    Ok(etag)
}

/// Checks that `path` (which need not exist yet) stays under `root` once symlinks are
/// followed: the deepest existing ancestor of `path` is canonicalized and must lie under the
/// canonical root. Call it on every path before reading or writing it.
pub fn ensure_under(root: &Path, path: &Path) -> Result<()> {
    let root_real = root.canonicalize().map_err(|e| Error::io(root, e))?;
    let mut existing = path.to_path_buf();
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    // Walk up to the deepest ancestor that exists (a dangling symlink counts as not existing,
    // and is then resolved by its parent; its own target is checked when it is followed).
    while existing.symlink_metadata().is_err() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let real = existing
        .canonicalize()
        .map_err(|e| Error::io(&existing, e))?;
    let escapes = !real.starts_with(&root_real)
        || tail.iter().any(|t| {
            Path::new(t)
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
        });
    if escapes {
        return Err(Error::hub(
            path.display().to_string(),
            format!(
                "the path resolves to {}, outside the Hub cache {}; refusing to use it",
                real.display(),
                root_real.display()
            ),
        ));
    }
    Ok(())
}

/// The cache directory of a model repo: `<root>/models--owner--name` (the Hub cache layout).
pub fn repo_dir(root: &Path, repo: &str) -> Result<PathBuf> {
    check_repo_id(repo)?;
    Ok(root.join(format!("models--{}", repo.replace('/', "--"))))
}

/// Joins a checked `/`-separated relative name under `dir`, one component at a time.
pub fn join_relative(dir: &Path, name: &str) -> PathBuf {
    name.split('/').fold(dir.to_path_buf(), |p, c| p.join(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_and_odd_names_are_refused() {
        for f in [
            "../x",
            "a/../b",
            "/etc/passwd",
            "a//b",
            "a\\b",
            "a\0b",
            "a\nb",
            "c:x",
            ".",
            "",
        ] {
            assert!(check_file_name(f).is_err(), "{f:?}");
        }
        for f in ["model.gguf", "sub/dir/tokenizer.json", "..hidden", "a..b"] {
            assert!(check_file_name(f).is_ok(), "{f:?}");
        }
        for c in [
            "../../../../tmp/x",
            "ABCDEF0123456789abcdef0123456789abcdef01",
            "abc",
        ] {
            assert!(check_commit(c).is_err(), "{c}");
        }
        assert!(check_commit("0123456789abcdef0123456789abcdef01234567").is_ok());
        assert!(clean_etag("\"../../evil\"").is_err());
        assert_eq!(clean_etag("W/\"abc-123\"").ok().as_deref(), Some("abc-123"));
        for r in ["../x", "a/..", "a", "a/b/c", ".a/b", "a/b c"] {
            assert!(check_repo_id(r).is_err(), "{r}");
        }
        for r in ["main", "refs/pr/1", "v1.0"] {
            assert!(check_revision(r).is_ok(), "{r}");
        }
        for r in ["..", "a/../b", "/abs", "a b", ""] {
            assert!(check_revision(r).is_err(), "{r}");
        }
    }

    #[test]
    fn a_symlink_out_of_the_root_is_caught() -> Result<()> {
        let root = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let outside = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        std::os::unix::fs::symlink(outside.path(), root.path().join("link"))
            .map_err(|e| Error::io("symlink", e))?;
        assert!(ensure_under(root.path(), &root.path().join("link/new/file")).is_err());
        assert!(ensure_under(root.path(), &root.path().join("fine/new/file")).is_ok());
        Ok(())
    }
}
