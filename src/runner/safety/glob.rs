//! Path globs for grant scopes: `*` (any characters but `/`), `?` (one character but `/`),
//! `[abc]`/`[a-z]`/`[!a]` (one character of a set), and `**` as a whole path component (any
//! number of components; at the end at least one, so `dir/**` is what is inside `dir`).
//! Matching is dynamic programming (pattern length × path length steps, no backtracking), so
//! a hostile glob cannot make it slow.

/// The characters that start a glob construct.
const GLOB_CHARS: [char; 3] = ['*', '?', '['];

/// The part of `pattern` before its first glob character.
pub(super) fn literal_prefix(pattern: &str) -> &str {
    match pattern.find(GLOB_CHARS) {
        Some(i) => &pattern[..i],
        None => pattern,
    }
}

/// Whether a path contains glob characters.
pub(super) fn has_glob(text: &str) -> bool {
    text.contains(GLOB_CHARS)
}

/// Whether `path` matches `pattern` (both absolute, `/`-separated).
pub(super) fn glob_match(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.split('/').collect();
    let parts: Vec<&str> = path.split('/').collect();
    // reach[j]: the first i pattern components can match the first j path components.
    let mut reach = vec![false; parts.len() + 1];
    reach[0] = true;
    for (k, p) in pat.iter().enumerate() {
        let mut next = vec![false; parts.len() + 1];
        if *p == "**" {
            // Zero or more components, or one or more at the end: `dir/**` is what is inside
            // `dir`, not `dir` itself.
            let at_end = k + 1 == pat.len();
            let mut any = false;
            for j in 0..=parts.len() {
                next[j] = any || (!at_end && reach[j]);
                any |= reach[j];
            }
        } else {
            for j in 0..parts.len() {
                if reach[j] && component_match(p, parts[j]) {
                    next[j + 1] = true;
                }
            }
        }
        reach = next;
    }
    reach[parts.len()]
}

/// One component against one component's glob.
fn component_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = name.chars().collect();
    // reach[j]: the pattern so far can match the first j characters of the name.
    let mut reach = vec![false; s.len() + 1];
    reach[0] = true;
    let mut i = 0;
    while i < p.len() {
        let mut next = vec![false; s.len() + 1];
        match p[i] {
            '*' => {
                let mut any = false;
                for j in 0..=s.len() {
                    any |= reach[j];
                    next[j] = any;
                }
                i += 1;
            }
            '?' => {
                next[1..].copy_from_slice(&reach[..s.len()]);
                i += 1;
            }
            '[' => match class_end(&p, i) {
                Some(end) => {
                    for j in 0..s.len() {
                        next[j + 1] = reach[j] && class_contains(&p[i + 1..end], s[j]);
                    }
                    i = end + 1;
                }
                None => {
                    // An unclosed '[' is a literal character, as in the shell.
                    for j in 0..s.len() {
                        next[j + 1] = reach[j] && s[j] == '[';
                    }
                    i += 1;
                }
            },
            c => {
                for j in 0..s.len() {
                    next[j + 1] = reach[j] && s[j] == c;
                }
                i += 1;
            }
        }
        reach = next;
    }
    reach[s.len()]
}

/// The index of the `]` closing the class opened at `open`.
fn class_end(p: &[char], open: usize) -> Option<usize> {
    let mut k = open + 1;
    if matches!(p.get(k), Some('!' | '^')) {
        k += 1;
    }
    // A ']' right after the opening is a member, not the end.
    if p.get(k) == Some(&']') {
        k += 1;
    }
    (k..p.len()).find(|&j| p[j] == ']')
}

fn class_contains(body: &[char], c: char) -> bool {
    let (negated, body) = match body.first() {
        Some('!' | '^') => (true, &body[1..]),
        _ => (false, body),
    };
    let mut found = false;
    let mut k = 0;
    while k < body.len() {
        if k + 2 < body.len() && body[k + 1] == '-' {
            found |= body[k] <= c && c <= body[k + 2];
            k += 3;
        } else {
            found |= body[k] == c;
            k += 1;
        }
    }
    found != negated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_the_shell_with_double_star_components() {
        for (pattern, path) in [
            ("/h/tmp/**", "/h/tmp/a"),
            ("/h/tmp/**", "/h/tmp/a/b/c"),
            ("/h/**/x.txt", "/h/x.txt"),
            ("/h/**/x.txt", "/h/a/b/x.txt"),
            ("/h/*.log", "/h/a.log"),
            ("/h/?.log", "/h/a.log"),
            ("/h/[ab].log", "/h/b.log"),
            ("/h/[!ab].log", "/h/c.log"),
            ("/h/[a-c]x", "/h/bx"),
        ] {
            assert!(glob_match(pattern, path), "{pattern} {path}");
        }
        for (pattern, path) in [
            ("/h/tmp/**", "/h/tmp"),
            ("/h/tmp/**", "/h/tmpx/a"),
            ("/h/*.log", "/h/a/b.log"),
            ("/h/[ab].log", "/h/c.log"),
            ("/h/x", "/h/x/y"),
        ] {
            assert!(!glob_match(pattern, path), "{pattern} {path}");
        }
    }

    #[test]
    fn a_long_hostile_glob_matches_without_backtracking() {
        let pattern = format!("/{}b", "*".repeat(5_000));
        let path = format!("/{}", "a".repeat(5_000));
        assert!(!glob_match(&pattern, &path));
    }
}
