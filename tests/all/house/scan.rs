//! What each file declares (items, `mod` children), imports (`use` leaves) and names
//! (paths, identifiers), per module.

use std::collections::{BTreeMap, HashSet};

use super::source::Tok;

// ─── What each file declares, imports and names ─────────────────────────────

/// A crate in `src/`: the library (`lib.rs`) or the binary (`main.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Crate {
    Lib,
    Bin,
}

/// A module: its crate and its path from the crate root.
pub(super) type ModPath = (Crate, Vec<String>);

/// One imported name of a `use` declaration.
#[derive(Debug, Clone)]
pub(super) struct UseLeaf {
    /// The path as written (`super::spec::ModelSpec`, `crate::hub`), or the module for a glob.
    pub(super) path: Vec<String>,
    /// The name it brings into scope (`None` for a glob).
    pub(super) name: Option<String>,
    pub(super) is_pub: bool,
    pub(super) line: usize,
}

/// A path in code (`crate::hub::resolve_model`, `child::f`), outside `use` declarations.
#[derive(Debug, Clone)]
pub(super) struct PathRef {
    pub(super) path: Vec<String>,
    pub(super) line: usize,
}

#[derive(Debug, Default)]
pub(super) struct ModuleFacts {
    /// Items defined at the module's top level.
    pub(super) items: HashSet<String>,
    /// Child modules (file or inline).
    pub(super) children: HashSet<String>,
    pub(super) uses: Vec<UseLeaf>,
}

#[derive(Debug, Default)]
pub(super) struct FileFacts {
    /// References made in each module of the file (the file's module and its inline ones).
    pub(super) paths: Vec<(Vec<String>, PathRef)>,
    pub(super) uses: Vec<(Vec<String>, UseLeaf)>,
    /// Identifiers outside `use` declarations: the names the code mentions.
    pub(super) mentioned: HashSet<String>,
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
];
const NOT_NAMES: &[&str] = &["fn", "mut", "unsafe", "extern", "async", "_"];

/// Scans one file whose top-level module is `module`: items, `mod` children, `use`s, paths.
pub(super) fn scan(
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
