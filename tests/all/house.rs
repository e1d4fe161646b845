//! House rules a newcomer relies on: no import cycle between the files of `src/`, and no
//! reference to a design document the repository does not have.
//!
//! # The file graph
//!
//! A node is a file under `src/`. There is an edge A → B when code in A names an item
//! *defined* in B: a `use` of it, or a path such as `crate::hub::resolve_model(…)`,
//! `super::MoveSpec` or `child::f()`, with re-exports followed to the file that defines the
//! item (so `crate::hub::resolve_model`, re-exported by `src/hub/mod.rs`, is an edge to
//! `src/hub/resolve.rs`). What is *not* an edge, and why:
//!
//! - A parent declaring its children (`mod resolve;`) and re-exporting their items
//!   (`pub use resolve::resolve_model;`): that is the module tree's shape, not a dependency
//!   of the parent's code. A re-exported name the parent's own code also uses is an edge.
//! - Naming a module only (`use crate::hub;`): the later `hub::resolve_model` is resolved.
//! - Comments, doc links, strings and attributes: they do not make the code depend.
//! - Method calls (`hub.resolve(…)`) and trait dispatch: the type they go through was named
//!   by a path or a `use`, which is the edge.
//!
//! A glob import (`use super::*`) is an edge to the files defining each of the module's names
//! that the importing file's code mentions. `src/main.rs` and `src/cli/` are the binary
//! crate: their `crate::` is the binary's root and `sightline::` is the library's.
//!
//! The scan is lexical (comments, strings and attributes stripped, then a token scan that
//! tracks inline `mod … { }` blocks and braces), which is enough for this crate's code:
//! `detector_finds_cycles_and_ignores_parent_declarations_and_comments` checks it on a
//! made-up crate.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};

/// Edges left out of the cycle check, each with the reason it is deliberate:
/// `(from, to, reason)`. Only an edge that test code alone makes (code in a `mod tests`) can
/// be allowed; the test fails on an entry naming a production edge or a vanished one.
const ALLOWED_EDGES: &[(&str, &str, &str)] = &[
    (
        "src/model/qwen3_vl/flash_cpu.rs",
        "src/model/qwen3_vl/attention.rs",
        "flash_cpu's unit tests check the fused kernel against attention.rs's matmul route, \
         its reference; the library's own edge is attention → flash_cpu",
    ),
    (
        "src/model/qwen3_vl/attention.rs",
        "src/model/qwen3_vl/text.rs",
        "attention's unit tests build the text decoder's causal mask (text::causal_mask) to \
         test masked attention as the model calls it; the library's edge is text → attention",
    ),
    (
        "src/model/qwen3_vl/flash_cpu.rs",
        "src/model/qwen3_vl/text.rs",
        "the same causal mask, for flash_cpu's unit tests of the fused kernel under a mask",
    ),
];

#[test]
fn src_files_have_no_import_cycle() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = read_sources(&root.join("src"), root)?;
    let graph = FileGraph::build(&files)?;
    // The scan must see the crate's real dependencies, or "no cycle" would mean nothing.
    for (from, to) in [
        ("src/hub/resolve.rs", "src/hub/spec.rs"),
        ("src/planner/local.rs", "src/decode/decoder.rs"),
        ("src/main.rs", "src/cli/plan.rs"),
        ("src/cli/plan.rs", "src/planner/local.rs"),
    ] {
        ensure!(
            graph.has_edge(from, to),
            "the scan found no edge {from} → {to}; edges from {from}: {:?}",
            graph.edges_from(from)
        );
    }
    let misused = graph.misused_allowances(ALLOWED_EDGES);
    ensure!(misused.is_empty(), "ALLOWED_EDGES: {}", misused.join("; "));
    let cycles = graph.cycles(ALLOWED_EDGES);
    ensure!(
        cycles.is_empty(),
        "file-level import cycles in src/ (break them, or allow an edge in ALLOWED_EDGES with \
         a reason):\n{}",
        cycles.join("\n")
    );
    Ok(())
}

#[test]
fn detector_finds_cycles_and_ignores_parent_declarations_and_comments() -> Result<()> {
    let files = vec![
        source(
            "src/lib.rs",
            "pub mod a;\npub mod b;\npub mod p;\npub mod t1;\npub mod t2;\n",
        ),
        source(
            "src/a.rs",
            "use crate::b::B; // crate::p::Q in a comment\npub struct A(B);\n",
        ),
        source(
            "src/b.rs",
            "pub struct B;\nfn f() -> crate::a::A { todo!() }\n",
        ),
        // A parent declaring and re-exporting its child, and a child using its parent: no cycle.
        source(
            "src/p/mod.rs",
            "mod c;\npub use c::Q;\npub struct Shared;\n",
        ),
        source("src/p/c.rs", "use super::Shared;\npub struct Q(Shared);\n"),
        // A cycle that only a unit test closes.
        source(
            "src/t1.rs",
            "pub fn one() {}\n#[cfg(test)]\nmod tests {\n    use crate::t2::two;\n}\n",
        ),
        source("src/t2.rs", "pub fn two() {\n    crate::t1::one()\n}\n"),
    ];
    let graph = FileGraph::build(&files)?;
    let cycles = graph.cycles(&[]);
    ensure!(
        cycles.len() == 2,
        "expected cycles a ↔ b and t1 ↔ t2, found {cycles:?}"
    );
    ensure!(
        cycles[0].contains("src/a.rs → src/b.rs (line 1: use crate::b::B)"),
        "{cycles:?}"
    );
    ensure!(graph.has_edge("src/p/c.rs", "src/p/mod.rs"));
    ensure!(!graph.has_edge("src/p/mod.rs", "src/p/c.rs"));
    ensure!(
        !graph.has_edge("src/a.rs", "src/p/c.rs"),
        "a comment made an edge"
    );
    // Allowing the test-only edge breaks its cycle; a production edge cannot be allowed.
    let allowed = [
        ("src/t1.rs", "src/t2.rs", "test"),
        ("src/b.rs", "src/a.rs", "no"),
    ];
    let left = graph.cycles(&allowed);
    ensure!(left.len() == 1 && left[0].contains("src/a.rs"), "{left:?}");
    let misused = graph.misused_allowances(&allowed);
    ensure!(
        misused.len() == 1 && misused[0].starts_with("src/b.rs → src/a.rs"),
        "{misused:?}"
    );
    Ok(())
}

/// Module docs that cited a design document the repository does not have ("see <that file>,
/// decision 4") left a newcomer at a dead end: the decisions live in `ARCHITECTURE.md`.
#[test]
fn no_file_mentions_a_design_doc_the_repository_lacks() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Spelled in two parts so this file does not match itself.
    let name = ["DESIGN", "md"].join(".");
    ensure!(
        !root.join(&name).exists(),
        "{name} exists; then this test is moot"
    );
    ensure!(root.join("ARCHITECTURE.md").is_file());
    let mut offenders = Vec::new();
    let mut scanned = 0usize;
    for path in text_files(root)? {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue; // not UTF-8: a fixture, not a document
        };
        scanned += 1;
        for (i, line) in text.lines().enumerate() {
            if line.contains(&name) {
                offenders.push(format!("{}:{}: {}", rel(root, &path), i + 1, line.trim()));
            }
        }
    }
    ensure!(
        scanned > 100,
        "only {scanned} text files found under {}",
        root.display()
    );
    ensure!(
        offenders.is_empty(),
        "{name} is mentioned but does not exist (cite ARCHITECTURE.md):\n{}",
        offenders.join("\n")
    );
    Ok(())
}

/// The map must stay true: every `src/…` path that `ARCHITECTURE.md`, the README or the crate
/// docs cite (in backquotes) exists.
#[test]
fn paths_the_maps_cite_exist() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    let mut cited = 0usize;
    for doc in ["ARCHITECTURE.md", "README.md", "src/lib.rs"] {
        let text = std::fs::read_to_string(root.join(doc)).with_context(|| doc.to_string())?;
        for (i, line) in text.lines().enumerate() {
            for quoted in line.split('`').skip(1).step_by(2) {
                let is_path = quoted.starts_with("src/") && !quoted.contains(['*', ' ', '{', '…']);
                if is_path {
                    cited += 1;
                    if !root.join(quoted).exists() {
                        missing.push(format!("{doc}:{}: {quoted}", i + 1));
                    }
                }
            }
        }
    }
    ensure!(
        cited > 30,
        "only {cited} cited paths found; is the scan broken?"
    );
    ensure!(
        missing.is_empty(),
        "cited paths that do not exist:\n{}",
        missing.join("\n")
    );
    Ok(())
}

/// Files a reader may open: everything but build output, version control and large files.
fn text_files(root: &Path) -> Result<Vec<PathBuf>> {
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

fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

// ─── Reading the sources ────────────────────────────────────────────────────

/// One source file: its path relative to the repository (`src/hub/mod.rs`) and its code with
/// comments, strings and character literals blanked out (line breaks kept).
struct Source {
    rel: String,
    code: String,
}

fn source(rel: &str, text: &str) -> Source {
    Source {
        rel: rel.to_string(),
        code: strip(text),
    }
}

fn read_sources(dir: &Path, root: &Path) -> Result<Vec<Source>> {
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
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Tokens with their line numbers; attributes (`#[…]`, `#![…]`) are left out.
fn tokens(code: &str) -> Vec<(Tok, usize)> {
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

// ─── What each file declares, imports and names ─────────────────────────────

/// A crate in `src/`: the library (`lib.rs`) or the binary (`main.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Crate {
    Lib,
    Bin,
}

/// A module: its crate and its path from the crate root.
type ModPath = (Crate, Vec<String>);

/// One imported name of a `use` declaration.
#[derive(Debug, Clone)]
struct UseLeaf {
    /// The path as written (`super::spec::ModelSpec`, `crate::hub`), or the module for a glob.
    path: Vec<String>,
    /// The name it brings into scope (`None` for a glob).
    name: Option<String>,
    is_pub: bool,
    line: usize,
}

/// A path in code (`crate::hub::resolve_model`, `child::f`), outside `use` declarations.
#[derive(Debug, Clone)]
struct PathRef {
    path: Vec<String>,
    line: usize,
}

#[derive(Debug, Default)]
struct ModuleFacts {
    /// Items defined at the module's top level.
    items: HashSet<String>,
    /// Child modules (file or inline).
    children: HashSet<String>,
    uses: Vec<UseLeaf>,
}

#[derive(Debug, Default)]
struct FileFacts {
    /// References made in each module of the file (the file's module and its inline ones).
    paths: Vec<(Vec<String>, PathRef)>,
    uses: Vec<(Vec<String>, UseLeaf)>,
    /// Identifiers outside `use` declarations: the names the code mentions.
    mentioned: HashSet<String>,
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
];
const NOT_NAMES: &[&str] = &["fn", "mut", "unsafe", "extern", "async", "_"];

/// Scans one file whose top-level module is `module`: items, `mod` children, `use`s, paths.
fn scan(
    toks: &[(Tok, usize)],
    module: &ModPath,
    modules: &mut BTreeMap<ModPath, ModuleFacts>,
    file: &mut FileFacts,
) {
    #[derive(PartialEq)]
    enum Scope {
        Module(String),
        Block,
    }
    let ident = |k: usize| match toks.get(k) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let is = |k: usize, t: &Tok| toks.get(k).map(|(x, _)| x) == Some(t);
    let mut stack: Vec<Scope> = Vec::new();
    let mut pending_mod: Option<String> = None;
    let current = |stack: &[Scope]| -> Vec<String> {
        let mut p = module.1.clone();
        p.extend(stack.iter().filter_map(|s| match s {
            Scope::Module(m) => Some(m.clone()),
            Scope::Block => None,
        }));
        p
    };
    let mut i = 0;
    while i < toks.len() {
        let at_module_level = !stack.contains(&Scope::Block);
        match &toks[i].0 {
            Tok::Punct('{') => {
                stack.push(match pending_mod.take() {
                    Some(m) => Scope::Module(m),
                    None => Scope::Block,
                });
                i += 1;
            }
            Tok::Punct('}') => {
                stack.pop();
                i += 1;
            }
            Tok::Punct(';') => {
                pending_mod = None;
                i += 1;
            }
            Tok::Ident(kw) if kw == "use" => {
                let is_pub = use_is_pub(toks, i);
                let end = (i..toks.len())
                    .find(|&k| is(k, &Tok::Punct(';')))
                    .unwrap_or(toks.len());
                let here = current(&stack);
                let mut leaves = Vec::new();
                use_tree(&toks[i + 1..end], &[], is_pub, &mut leaves);
                for leaf in leaves {
                    modules
                        .entry((module.0, here.clone()))
                        .or_default()
                        .uses
                        .push(leaf.clone());
                    file.uses.push((here.clone(), leaf));
                }
                i = end + 1;
            }
            Tok::Ident(kw) if at_module_level && ITEM_KEYWORDS.contains(&kw.as_str()) => {
                // `const fn f`, `static mut X`: the name is the first non-keyword.
                let mut k = i + 1;
                while ident(k).is_some_and(|s| NOT_NAMES.contains(&s) && s != "_") {
                    k += 1;
                }
                if let Some(name) = ident(k) {
                    let facts = modules.entry((module.0, current(&stack))).or_default();
                    if kw == "mod" {
                        facts.children.insert(name.to_string());
                        pending_mod = Some(name.to_string());
                    }
                    if name != "_" {
                        facts.items.insert(name.to_string());
                    }
                }
                i = k.max(i + 1);
            }
            Tok::Ident(first) if kw_starts_path(toks, i) => {
                let mut path = vec![first.clone()];
                let mut k = i + 1;
                while is(k, &Tok::PathSep) {
                    match ident(k + 1) {
                        Some(s) => path.push(s.to_string()),
                        None => break,
                    }
                    k += 2;
                }
                file.mentioned.insert(first.clone());
                if path.len() >= 2 {
                    let line = toks[i].1;
                    file.paths.push((current(&stack), PathRef { path, line }));
                }
                i = k.max(i + 1);
            }
            Tok::Ident(name) => {
                file.mentioned.insert(name.clone());
                i += 1;
            }
            _ => i += 1,
        }
    }
}

/// Whether the identifier at `i` starts a path (is not itself after a `::`).
fn kw_starts_path(toks: &[(Tok, usize)], i: usize) -> bool {
    i == 0 || toks[i - 1].0 != Tok::PathSep
}

/// Whether the `use` at `i` is preceded by a visibility (`pub`, `pub(crate)`, …).
fn use_is_pub(toks: &[(Tok, usize)], i: usize) -> bool {
    match i.checked_sub(1).map(|k| &toks[k].0) {
        Some(Tok::Ident(s)) => s == "pub",
        Some(Tok::Punct(')')) => {
            // `pub ( crate )`, `pub ( in path )`: walk back to the `(`.
            let open = (0..i).rev().find(|&k| toks[k].0 == Tok::Punct('('));
            open.and_then(|k| k.checked_sub(1))
                .is_some_and(|k| toks[k].0 == Tok::Ident("pub".into()))
        }
        _ => false,
    }
}

/// Expands a use tree (`a::{b, c::{self, D as E}, *}`) into its leaves.
fn use_tree(toks: &[(Tok, usize)], prefix: &[String], is_pub: bool, out: &mut Vec<UseLeaf>) {
    // Split at top-level commas.
    let mut parts: Vec<&[(Tok, usize)]> = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, (t, _)) in toks.iter().enumerate() {
        match t {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth -= 1,
            Tok::Punct(',') if depth == 0 => {
                parts.push(&toks[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&toks[start..]);
    for part in parts {
        let Some(line) = part.first().map(|(_, l)| *l) else {
            continue;
        };
        let mut path = prefix.to_vec();
        let mut k = 0;
        // Leading `::` (an extern crate path) is skipped.
        while k < part.len() {
            match &part[k].0 {
                Tok::Ident(s) if s == "as" => {
                    let alias = match part.get(k + 1) {
                        Some((Tok::Ident(a), _)) => a.clone(),
                        _ => String::new(),
                    };
                    let name = (alias != "_").then_some(alias);
                    out.push(UseLeaf {
                        path: path.clone(),
                        name,
                        is_pub,
                        line,
                    });
                    path.clear();
                    break;
                }
                Tok::Ident(s) => {
                    path.push(s.clone());
                    k += 1;
                }
                Tok::PathSep => k += 1,
                Tok::Punct('*') => {
                    out.push(UseLeaf {
                        path: path.clone(),
                        name: None,
                        is_pub,
                        line,
                    });
                    path.clear();
                    break;
                }
                Tok::Punct('{') => {
                    let inner = &part[k + 1..part.len().saturating_sub(1)];
                    use_tree(inner, &path, is_pub, out);
                    path.clear();
                    break;
                }
                _ => k += 1,
            }
        }
        if path.len() > prefix.len() {
            // `a::b::self` names `a::b`.
            if path.last().is_some_and(|s| s == "self") {
                path.pop();
            }
            let name = path.last().cloned();
            out.push(UseLeaf {
                path,
                name,
                is_pub,
                line,
            });
        }
    }
}

// ─── The graph ──────────────────────────────────────────────────────────────

struct FileGraph {
    /// from → to → the edge.
    edges: BTreeMap<String, BTreeMap<String, Edge>>,
}

struct Edge {
    /// The first reference that made the edge (`line N: path`), a non-test one if any.
    why: String,
    /// Whether only code in `mod tests` makes it.
    test_only: bool,
}

/// What a path names: a module, or an item defined in a file.
#[derive(Clone)]
enum Target {
    Module(ModPath),
    Item(String),
    Unknown,
}

struct Resolver<'a> {
    modules: &'a BTreeMap<ModPath, ModuleFacts>,
    /// The file each module lives in.
    file_of: &'a HashMap<ModPath, String>,
    /// Paths already resolved, by scope; a path being resolved maps to `Unknown`, which cuts
    /// import loops (`use Kind::*` resolving `Kind` through the globs of its own module).
    memo: RefCell<HashMap<(ModPath, Vec<String>), Target>>,
}

impl Resolver<'_> {
    fn is_module(&self, m: &ModPath) -> bool {
        self.file_of.contains_key(m)
    }

    /// Resolves `path` as written in module `scope`.
    fn resolve(&self, scope: &ModPath, path: &[String], depth: usize) -> Target {
        let key = (scope.clone(), path.to_vec());
        if let Some(t) = self.memo.borrow().get(&key) {
            return t.clone();
        }
        self.memo.borrow_mut().insert(key.clone(), Target::Unknown);
        let target = self.resolve_uncached(scope, path, depth);
        self.memo.borrow_mut().insert(key, target.clone());
        target
    }

    fn resolve_uncached(&self, scope: &ModPath, path: &[String], depth: usize) -> Target {
        let Some(first) = path.first() else {
            return Target::Unknown;
        };
        let (krate, here) = (scope.0, &scope.1);
        let mut module: ModPath = match first.as_str() {
            "crate" => (krate, vec![]),
            "self" => (krate, here.clone()),
            "super" => (krate, here[..here.len().saturating_sub(1)].to_vec()),
            "sightline" if krate == Crate::Bin => (Crate::Lib, vec![]),
            name => {
                let child = (krate, [here.clone(), vec![name.to_string()]].concat());
                if self.is_module(&child) {
                    child
                } else if let Some(m) = self.imported_module(scope, name, depth) {
                    m
                } else if path.len() == 1 {
                    // A bare name (from a `use` leaf): an item of this module.
                    return self.item(scope, name, depth);
                } else {
                    return Target::Unknown; // an external crate, a type's associated item
                }
            }
        };
        let mut rest = &path[1..];
        while let Some(seg) = rest.first() {
            let next = match seg.as_str() {
                "super" => (
                    module.0,
                    module.1[..module.1.len().saturating_sub(1)].to_vec(),
                ),
                "self" => module.clone(),
                s => (module.0, [module.1.clone(), vec![s.to_string()]].concat()),
            };
            if !self.is_module(&next) {
                break;
            }
            module = next;
            rest = &rest[1..];
        }
        match rest.first() {
            None => Target::Module(module),
            Some(name) => self.item(&module, name, depth),
        }
    }

    /// A module a `use` in `scope` (or an enclosing inline module's) brought in as `name`.
    fn imported_module(&self, scope: &ModPath, name: &str, depth: usize) -> Option<ModPath> {
        if depth > 16 {
            return None;
        }
        let facts = self.modules.get(scope)?;
        let named = facts
            .uses
            .iter()
            .filter(|u| u.name.as_deref() == Some(name))
            .find_map(|u| match self.resolve(scope, &u.path, depth + 1) {
                Target::Module(m) => Some(m),
                _ => None,
            });
        // Through a glob (`use super::*` in a test module sees the parent's imports).
        named.or_else(|| {
            facts
                .uses
                .iter()
                .filter(|u| u.name.is_none())
                .find_map(|u| match self.resolve(scope, &u.path, depth + 1) {
                    Target::Module(m) if m != *scope => self.imported_module(&m, name, depth + 1),
                    _ => None,
                })
        })
    }

    /// The file defining item `name` of `module`, following `use`s (re-exports and imports,
    /// which a child can name through `super::`) and globs.
    fn item(&self, module: &ModPath, name: &str, depth: usize) -> Target {
        if depth > 16 {
            return Target::Unknown;
        }
        let Some(file) = self.file_of.get(module) else {
            return Target::Unknown;
        };
        let Some(facts) = self.modules.get(module) else {
            return Target::Item(file.clone());
        };
        if facts.items.contains(name) {
            return Target::Item(file.clone());
        }
        for u in facts
            .uses
            .iter()
            .filter(|u| u.name.as_deref() == Some(name))
        {
            match self.resolve(module, &u.path, depth + 1) {
                Target::Item(f) => return Target::Item(f),
                Target::Module(m) => return Target::Module(m),
                Target::Unknown => {}
            }
        }
        for u in facts.uses.iter().filter(|u| u.name.is_none()) {
            if let Target::Module(m) = self.resolve(module, &u.path, depth + 1) {
                let inner = self.modules.get(&m);
                if inner.is_some_and(|f| {
                    f.items.contains(name) || f.uses.iter().any(|u| u.name.as_deref() == Some(name))
                }) {
                    return self.item(&m, name, depth + 1);
                }
            }
        }
        // A macro or an enum's variants re-exported by glob: the module's own file.
        Target::Item(file.clone())
    }

    /// The names a glob import of `module` brings in: its items and its `use`d names.
    fn names_of(&self, module: &ModPath) -> Vec<String> {
        let Some(f) = self.modules.get(module) else {
            return Vec::new();
        };
        let mut names: Vec<String> = f.items.iter().cloned().collect();
        names.extend(f.uses.iter().filter_map(|u| u.name.clone()));
        names
    }
}

impl FileGraph {
    fn build(sources: &[Source]) -> Result<Self> {
        let by_rel: HashMap<&str, &Source> = sources.iter().map(|s| (s.rel.as_str(), s)).collect();
        let mut modules: BTreeMap<ModPath, ModuleFacts> = BTreeMap::new();
        let mut file_of: HashMap<ModPath, String> = HashMap::new();
        let mut facts: BTreeMap<String, (ModPath, FileFacts)> = BTreeMap::new();
        // Walk each crate's module tree from its root, file by file.
        let mut queue: Vec<(ModPath, String)> = Vec::new();
        for (krate, root) in [(Crate::Lib, "src/lib.rs"), (Crate::Bin, "src/main.rs")] {
            if by_rel.contains_key(root) {
                queue.push(((krate, vec![]), root.to_string()));
            }
        }
        ensure!(!queue.is_empty(), "no src/lib.rs or src/main.rs");
        while let Some((module, rel)) = queue.pop() {
            let Some(src) = by_rel.get(rel.as_str()) else {
                bail!(
                    "module {:?} should be in {rel}, which was not read",
                    module.1
                );
            };
            let toks = tokens(&src.code);
            let mut ff = FileFacts::default();
            let before: BTreeSet<ModPath> = modules.keys().cloned().collect();
            modules.entry(module.clone()).or_default();
            scan(&toks, &module, &mut modules, &mut ff);
            // Every module this file holds (itself, inline ones) maps to it; `mod x;` children
            // without a body are files to read next.
            let inline: BTreeSet<ModPath> = ff
                .paths
                .iter()
                .map(|(m, _)| (module.0, m.clone()))
                .chain(ff.uses.iter().map(|(m, _)| (module.0, m.clone())))
                .chain(std::iter::once(module.clone()))
                .collect();
            let new: Vec<ModPath> = modules
                .keys()
                .filter(|m| !before.contains(*m) && m.1.starts_with(&module.1))
                .cloned()
                .collect();
            for m in inline.iter().chain(new.iter()) {
                file_of.insert(m.clone(), rel.clone());
            }
            let dir = child_dir(&rel);
            let children: Vec<String> = modules
                .get(&module)
                .map(|f| f.children.iter().cloned().collect())
                .unwrap_or_default();
            for child in children {
                let child_mod = (module.0, [module.1.clone(), vec![child.clone()]].concat());
                if new.contains(&child_mod)
                    && modules
                        .get(&child_mod)
                        .is_some_and(|f| !f.items.is_empty() || !f.uses.is_empty())
                {
                    continue; // inline `mod child { … }`
                }
                let flat = format!("{dir}/{child}.rs");
                let nested = format!("{dir}/{child}/mod.rs");
                if by_rel.contains_key(flat.as_str()) {
                    queue.push((child_mod, flat));
                } else if by_rel.contains_key(nested.as_str()) {
                    queue.push((child_mod, nested));
                }
                // Otherwise an inline module with nothing in it.
            }
            facts.insert(rel, (module, ff));
        }
        let resolver = Resolver {
            modules: &modules,
            file_of: &file_of,
            memo: RefCell::new(HashMap::new()),
        };
        let mut edges: BTreeMap<String, BTreeMap<String, Edge>> = BTreeMap::new();
        for (rel, (module, ff)) in &facts {
            // Code in an inline `mod tests` of this file.
            let in_tests =
                |scope: &[String]| scope.get(module.1.len()).is_some_and(|m| m == "tests");
            let mut add = |to: String, why: String, test_only: bool| {
                if &to == rel {
                    return;
                }
                let edge = Edge { why, test_only };
                let slot = edges.entry(rel.clone()).or_default();
                match slot.get(&to) {
                    Some(old) if !old.test_only || test_only => {}
                    _ => {
                        slot.insert(to, edge);
                    }
                }
            };
            for (scope, r) in &ff.paths {
                if let Target::Item(to) = resolver.resolve(&(module.0, scope.clone()), &r.path, 0) {
                    add(
                        to,
                        format!("line {}: {}", r.line, r.path.join("::")),
                        in_tests(scope),
                    );
                }
            }
            for (scope, u) in &ff.uses {
                let test_only = in_tests(scope);
                let scope = (module.0, scope.clone());
                let why = format!("line {}: use {}", u.line, u.path.join("::"));
                match &u.name {
                    None => {
                        if let Target::Module(m) = resolver.resolve(&scope, &u.path, 0) {
                            for name in resolver.names_of(&m) {
                                if ff.mentioned.contains(&name) {
                                    if let Target::Item(to) = resolver.item(&m, &name, 0) {
                                        add(to, format!("{why}::* ({name})"), test_only);
                                    }
                                }
                            }
                        }
                    }
                    Some(name) => {
                        // A re-export is the tree's shape, unless this file's code uses it too.
                        if u.is_pub && !ff.mentioned.contains(name) {
                            continue;
                        }
                        if let Target::Item(to) = resolver.resolve(&scope, &u.path, 0) {
                            add(to, why, test_only);
                        }
                    }
                }
            }
        }
        for rel in by_rel.keys() {
            ensure!(
                facts.contains_key(*rel),
                "{rel} is not reached from src/lib.rs or src/main.rs by `mod` declarations"
            );
        }
        Ok(FileGraph { edges })
    }

    fn has_edge(&self, from: &str, to: &str) -> bool {
        self.edges.get(from).is_some_and(|t| t.contains_key(to))
    }

    fn edges_from(&self, from: &str) -> Vec<&String> {
        self.edges
            .get(from)
            .map(|t| t.keys().collect())
            .unwrap_or_default()
    }

    /// The `allowed` entries that do not name an edge made by test code only: a production
    /// edge is never allowed, and an entry whose edge is gone must go too.
    fn misused_allowances(&self, allowed: &[(&str, &str, &str)]) -> Vec<String> {
        allowed
            .iter()
            .filter(|(f, t, _)| !self.is_test_only(f, t))
            .map(
                |(f, t, _)| match self.edges.get(*f).and_then(|ts| ts.get(*t)) {
                    Some(e) => format!("{f} → {t} is made by non-test code ({})", e.why),
                    None => format!("{f} → {t} is no longer an edge"),
                },
            )
            .collect()
    }

    fn is_test_only(&self, from: &str, to: &str) -> bool {
        self.edges
            .get(from)
            .and_then(|ts| ts.get(to))
            .is_some_and(|e| e.test_only)
    }

    /// Each cycle (one per strongly connected component of two or more files), written as
    /// `a.rs → b.rs (line 3: use crate::b::B) → a.rs (…)`, after dropping the `allowed` edges
    /// that only test code makes.
    fn cycles(&self, allowed: &[(&str, &str, &str)]) -> Vec<String> {
        let kept = |from: &str, to: &str| {
            !(self.is_test_only(from, to) && allowed.iter().any(|(f, t, _)| *f == from && *t == to))
        };
        let nodes: Vec<&String> = self
            .edges
            .iter()
            .flat_map(|(f, ts)| std::iter::once(f).chain(ts.keys()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let index: HashMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let succ: Vec<Vec<usize>> = nodes
            .iter()
            .map(|n| {
                self.edges
                    .get(*n)
                    .map(|ts| {
                        ts.keys()
                            .filter(|t| kept(n, t))
                            .map(|t| index[t.as_str()])
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect();
        let mut out = Vec::new();
        for component in strongly_connected(&succ)
            .into_iter()
            .filter(|c| c.len() > 1)
        {
            let members: HashSet<usize> = component.iter().copied().collect();
            let start = component[0];
            // The shortest way back to `start` inside the component.
            let mut prev: HashMap<usize, usize> = HashMap::new();
            let mut frontier = vec![start];
            let mut closing = None;
            'search: while !frontier.is_empty() {
                let mut next = Vec::new();
                for &n in &frontier {
                    for &m in &succ[n] {
                        if m == start {
                            closing = Some(n);
                            break 'search;
                        }
                        if members.contains(&m) && !prev.contains_key(&m) {
                            prev.insert(m, n);
                            next.push(m);
                        }
                    }
                }
                frontier = next;
            }
            let mut path = vec![start];
            let mut at = closing.unwrap_or(start);
            let mut back = vec![at];
            while at != start {
                at = prev[&at];
                back.push(at);
            }
            back.pop();
            path.extend(back.into_iter().rev());
            path.push(start);
            let mut text = nodes[start].clone();
            for pair in path.windows(2) {
                let why = &self.edges[nodes[pair[0]]][nodes[pair[1]]].why;
                text += &format!(" → {} ({why})", nodes[pair[1]]);
            }
            out.push(text);
        }
        out
    }
}

/// Where the files of `rel`'s `mod x;` children live: next to a `mod.rs`/`lib.rs`/`main.rs`,
/// in a directory named after any other file.
fn child_dir(rel: &str) -> String {
    let (dir, file) = rel.rsplit_once('/').unwrap_or(("", rel));
    match file {
        "mod.rs" | "lib.rs" | "main.rs" => dir.to_string(),
        _ => format!("{dir}/{}", file.trim_end_matches(".rs")),
    }
}

/// Tarjan's strongly connected components.
fn strongly_connected(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        succ: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for k in 0..s.succ[v].len() {
            let w = s.succ[v][k];
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let n = succ.len();
    let mut s = State {
        succ,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}
