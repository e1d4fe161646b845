//! The file graph: names resolved to the files that define them, and its cycles.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use anyhow::{bail, ensure, Result};

use super::scan::{scan, Crate, FileFacts, ModPath, ModuleFacts};
use super::source::{tokens, Source};

// ─── The graph ──────────────────────────────────────────────────────────────

pub(super) struct FileGraph {
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
    pub(super) fn build(sources: &[Source]) -> Result<Self> {
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

    pub(super) fn has_edge(&self, from: &str, to: &str) -> bool {
        self.edges.get(from).is_some_and(|t| t.contains_key(to))
    }

    pub(super) fn edges_from(&self, from: &str) -> Vec<&String> {
        self.edges
            .get(from)
            .map(|t| t.keys().collect())
            .unwrap_or_default()
    }

    /// Every edge from a file under `from` to a file under `to` (path prefixes) that
    /// production code makes, as `from → to (why)`.
    pub(super) fn production_edges(&self, from: &str, to: &str) -> Vec<String> {
        self.edges
            .iter()
            .filter(|(f, _)| f.starts_with(from))
            .flat_map(|(f, ts)| {
                ts.iter()
                    .filter(|(t, e)| t.starts_with(to) && !e.test_only)
                    .map(move |(t, e)| format!("{f} → {t} ({})", e.why))
            })
            .collect()
    }

    /// The `allowed` entries that do not name an edge made by test code only: a production
    /// edge is never allowed, and an entry whose edge is gone must go too.
    pub(super) fn misused_allowances(&self, allowed: &[(&str, &str, &str)]) -> Vec<String> {
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
    pub(super) fn cycles(&self, allowed: &[(&str, &str, &str)]) -> Vec<String> {
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
