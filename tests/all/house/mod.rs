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
//! The scan is lexical (`source.rs`: comments, strings and attributes stripped; `scan.rs`: a
//! token scan that tracks inline `mod … { }` blocks and braces; `graph.rs`: names resolved
//! through `use`s and re-exports, then the cycles), which is enough for this crate's code:
//! `detector_finds_cycles_and_ignores_parent_declarations_and_comments` checks it on a
//! made-up crate.

mod graph;
mod scan;
mod source;

use std::path::Path;

use anyhow::{ensure, Context, Result};

use graph::FileGraph;
use source::{read_sources, rel, source, text_files};

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

/// The layering ARCHITECTURE.md states, as rules on the file graph: `(files under, must not
/// use files under, the reason ARCHITECTURE.md gives)`. Test code may cross them.
const LAYER_RULES: &[(&str, &str, &str)] = &[
    (
        "src/runner/",
        "src/planner/",
        "the runner knows a planner only as a PlanProducer",
    ),
    (
        "src/runner/",
        "src/decode/",
        "the runner knows a planner only as a PlanProducer; the move vocabulary is moves/",
    ),
    (
        "src/model/weights/",
        "src/model/qwen3_vl/",
        "the generic loader knows no architecture",
    ),
    (
        "src/model/",
        "src/decode/",
        "the model knows nothing of grammars",
    ),
    (
        "src/model/",
        "src/planner/",
        "the model knows nothing of agents",
    ),
    (
        "src/model/",
        "src/runner/",
        "the model knows nothing of the desktop",
    ),
    (
        "src/decode/",
        "src/planner/",
        "the decoder sits below the planner",
    ),
    (
        "src/decode/",
        "src/runner/",
        "the decoder knows nothing of the desktop",
    ),
    (
        "src/planner/",
        "src/runner/",
        "the planner knows nothing of the desktop",
    ),
    (
        "src/moves/",
        "src/decode/",
        "the vocabulary uses nothing above it",
    ),
    (
        "src/moves/",
        "src/planner/",
        "the vocabulary uses nothing above it",
    ),
    (
        "src/moves/",
        "src/runner/",
        "the vocabulary uses nothing above it",
    ),
    (
        "src/moves/",
        "src/model/",
        "the vocabulary uses nothing above it",
    ),
    (
        "src/cpu/",
        "src/model/",
        "CPU detection and dispatch serve the model, not the reverse",
    ),
    (
        "src/hub/",
        "src/model/",
        "the hub names files; the model reads them",
    ),
    (
        "src/hub/",
        "src/planner/",
        "the hub names files for any caller",
    ),
    (
        "src/chat.rs",
        "src/planner/",
        "the chat format is shared vocabulary",
    ),
    (
        "src/decode/",
        "src/exit_code.rs",
        "nothing below the CLI and eval knows exit codes",
    ),
    (
        "src/model/",
        "src/exit_code.rs",
        "nothing below the CLI and eval knows exit codes",
    ),
    (
        "src/planner/",
        "src/exit_code.rs",
        "nothing below the CLI and eval knows exit codes",
    ),
    (
        "src/runner/",
        "src/serve/",
        "the server sits beside the CLI, above the runner and the planner",
    ),
    (
        "src/planner/",
        "src/serve/",
        "the server sits beside the CLI, above the runner and the planner",
    ),
    (
        "src/decode/",
        "src/serve/",
        "the server sits beside the CLI, above the runner and the planner",
    ),
    (
        "src/model/",
        "src/serve/",
        "the server sits beside the CLI, above the runner and the planner",
    ),
    (
        "src/moves/",
        "src/serve/",
        "the server sits beside the CLI, above the runner and the planner",
    ),
    (
        "src/hub/",
        "src/serve/",
        "the server sits beside the CLI, above the runner and the planner",
    ),
];

#[test]
fn layers_depend_one_way_as_the_architecture_says() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = read_sources(&root.join("src"), root)?;
    let graph = FileGraph::build(&files)?;
    let mut broken = Vec::new();
    for (from, to, why) in LAYER_RULES {
        for edge in graph.production_edges(from, to) {
            broken.push(format!("{edge}: {why}"));
        }
    }
    ensure!(
        broken.is_empty(),
        "edges against the layering of ARCHITECTURE.md:\n{}",
        broken.join("\n")
    );
    // The rules must bite: the same check finds the edges that do exist.
    ensure!(!graph
        .production_edges("src/planner/", "src/decode/")
        .is_empty());
    ensure!(!graph
        .production_edges("src/runner/", "src/moves/")
        .is_empty());
    ensure!(!graph
        .production_edges("src/serve/", "src/runner/")
        .is_empty());
    Ok(())
}

/// A vocabulary has one home: the `xy:` syntax is parsed only in `src/moves/target.rs`, the
/// chat template is written only in `src/chat.rs`, and exit codes are defined only in
/// `src/exit_code.rs`. Each pattern is what a second home would have to contain.
#[test]
fn each_vocabulary_is_written_in_one_file() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let homes: &[(&str, &[&str])] = &[
        (
            "src/moves/target.rs",
            &[
                "strip_prefix(\"xy:\")",
                "starts_with(\"xy:\")",
                "strip_prefix(XY_PREFIX)",
                "starts_with(XY_PREFIX)",
            ],
        ),
        (
            "src/chat.rs",
            &[
                "<|im_start|>system",
                "<|im_start|>user",
                "<|im_start|>assistant",
                "<|im_start|>{",
                "\"<|image_pad|>\".repeat",
            ],
        ),
        (
            "src/exit_code.rs",
            &[
                "const SUCCESS",
                "const USAGE_OR_SETUP",
                "const INTERRUPTED",
                "const REFUSED",
            ],
        ),
    ];
    let mut found = Vec::new();
    for path in text_files(&root.join("src"))? {
        let rel_path = rel(root, &path);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for (home, patterns) in homes {
            let here: Vec<&&str> = patterns.iter().filter(|p| text.contains(**p)).collect();
            if rel_path == *home && here.is_empty() {
                found.push(format!(
                    "{home} contains none of {patterns:?}: update this test"
                ));
            }
            if rel_path != *home {
                for pattern in here {
                    found.push(format!("{rel_path}: {pattern} (its home is {home})"));
                }
            }
        }
    }
    ensure!(found.is_empty(), "{}", found.join("\n"));
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
