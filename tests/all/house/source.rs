//! Reading the files: which files there are, and Rust code with comments, strings and
//! attributes taken out, as tokens.

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};

/// Files a reader may open: everything but build output, version control and large files.
pub(super) fn text_files(root: &Path) -> Result<Vec<PathBuf>> {
    const SKIP_DIRS: &[&str] = &["target", ".git", "node_modules"];
    const MAX_BYTES: u64 = 1 << 20;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| dir.display().to_string())? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let name = entry.file_name();
            if kind.is_dir() {
                if !SKIP_DIRS.iter().any(|s| name == *s) {
                    stack.push(entry.path());
                }
            } else if kind.is_file() && entry.metadata()?.len() <= MAX_BYTES {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

pub(super) fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

// ─── Reading the sources ────────────────────────────────────────────────────

/// One source file: its path relative to the repository (`src/hub/mod.rs`) and its code with
/// comments, strings and character literals blanked out (line breaks kept).
pub(super) struct Source {
    pub(super) rel: String,
    pub(super) code: String,
}

pub(super) fn source(rel: &str, text: &str) -> Source {
    Source {
        rel: rel.to_string(),
        code: strip(text),
    }
}

pub(super) fn read_sources(dir: &Path, root: &Path) -> Result<Vec<Source>> {
    let mut out = Vec::new();
    for path in text_files(dir)? {
        if path.extension().is_some_and(|e| e == "rs") {
            let text =
                std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
            out.push(source(&rel(root, &path), &text));
        }
    }
    ensure!(!out.is_empty(), "no Rust files under {}", dir.display());
    Ok(out)
}

/// Blanks comments, string literals (plain, byte, raw) and character literals, keeping line
/// breaks so token lines stay right. Lifetimes (`'a`) are kept.
fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, s: &[char]| {
        out.extend(s.iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
    };
    let mut i = 0;
    while i < c.len() {
        let rest = &c[i..];
        let starts = |s: &str| {
            s.chars()
                .enumerate()
                .all(|(k, ch)| rest.get(k) == Some(&ch))
        };
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if starts("//") {
            let end = rest.iter().position(|&ch| ch == '\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if starts("/*") {
            let (mut depth, mut k) = (0usize, 0usize);
            while k < rest.len() {
                if rest[k] == '/' && rest.get(k + 1) == Some(&'*') {
                    depth += 1;
                    k += 2;
                } else if rest[k] == '*' && rest.get(k + 1) == Some(&'/') {
                    depth -= 1;
                    k += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    k += 1;
                }
            }
            blank(&mut out, &rest[..k.min(rest.len())]);
            i += k;
        } else if !ident_before
            && (starts("r\"") || starts("r#") || starts("br\"") || starts("br#"))
        {
            let skip = if rest[0] == 'b' { 2 } else { 1 };
            let hashes = rest[skip..].iter().take_while(|&&ch| ch == '#').count();
            if rest.get(skip + hashes) != Some(&'"') {
                out.push(rest[0]);
                i += 1;
                continue;
            }
            let body = skip + hashes + 1;
            let mut k = body;
            while k < rest.len() {
                if rest[k] == '"'
                    && rest[k + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    k += 1 + hashes;
                    break;
                }
                k += 1;
            }
            blank(&mut out, &rest[..k.min(rest.len())]);
            i += k;
        } else if rest[0] == '"' || (!ident_before && starts("b\"")) {
            let mut k = if rest[0] == 'b' { 2 } else { 1 };
            while k < rest.len() && rest[k] != '"' {
                k += if rest[k] == '\\' { 2 } else { 1 };
            }
            let end = (k + 1).min(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == '\'' {
            // A character literal ('x', '\n', '\u{1F}') or a lifetime ('a, 'static).
            let len = if rest.get(1) == Some(&'\\') {
                // Skip the escaped character itself ('\'' is four characters).
                rest.get(3..)
                    .and_then(|r| r.iter().position(|&ch| ch == '\''))
                    .map(|p| p + 4)
            } else if rest.get(2) == Some(&'\'') {
                Some(3)
            } else {
                None
            };
            match len {
                Some(len) => {
                    blank(&mut out, &rest[..len]);
                    i += len;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Tokens with their line numbers; attributes (`#[…]`, `#![…]`) are left out.
pub(super) fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::PathSep, line));
            i += 2;
        } else if ch == '#' && (c.get(i + 1) == Some(&'[') || c.get(i + 1) == Some(&'!')) {
            // Skip the attribute up to its matching `]`.
            let mut depth = 0;
            while i < c.len() {
                match c[i] {
                    '[' => depth += 1,
                    ']' => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    '\n' => line += 1,
                    _ => {}
                }
                i += 1;
            }
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}
