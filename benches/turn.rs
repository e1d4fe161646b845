//! A whole `decide_next` turn (screenshot in, NextMove out) and a `verify_done` on the cached
//! prefix, with the tiny fixture model (or `SIGHTLINE_BENCH_MODEL`).

use std::path::Path;

use cel_contracts::{PlanningScreen, PlanningView};
use criterion::{BenchmarkId, Criterion};
use sightline::planner::{DeviceChoice, LocalPlanner, PlannerOptions, Turn};

use crate::model::bench_model_source;

fn view() -> PlanningView {
    let screen = PlanningScreen {
        active_app: "Settings".into(),
        window: "Display".into(),
        summary: None,
        url: None,
    };
    sightline::view::view_of("Open the display settings", screen, vec![])
}

/// decide_next with a new screenshot every turn, and verify_done on the same screen.
pub fn bench(c: &mut Criterion) {
    let (source, name) = bench_model_source();
    let mut options = PlannerOptions::new(source);
    options.device = DeviceChoice::Cpu;
    options.max_visual_tokens = Some(1280);
    let planner = LocalPlanner::load(&options).expect("planner loads");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures/screens");
    let screens: Vec<Vec<u8>> = ["ui_exact", "ui_resize", "ui_wide"]
        .iter()
        .map(|n| std::fs::read(fixtures.join(format!("{n}.png"))).expect("fixture screenshot"))
        .collect::<Vec<_>>();
    let v = view();
    let memory = serde_json::Value::Null;
    let mut group = c.benchmark_group("turn");
    group.sample_size(10);
    let mut i = 0;
    group.bench_function(BenchmarkId::new("decide_next", &name), |b| {
        b.iter(|| {
            i += 1;
            planner
                .plan(&Turn {
                    goal: "Open the display settings",
                    history: &[],
                    shared_memory: &memory,
                    view: &v,
                    screenshot: Some(&screens[i % screens.len()]),
                })
                .expect("turn")
        })
    });
    let turn = Turn {
        goal: "Open the display settings",
        history: &[],
        shared_memory: &memory,
        view: &v,
        screenshot: Some(&screens[0]),
    };
    planner.plan(&turn).expect("turn");
    group.bench_function(BenchmarkId::new("verify_done_cached_prefix", &name), |b| {
        b.iter(|| {
            planner
                .verify(&turn, "The display settings are open.")
                .expect("verify")
        })
    });
    group.finish();
}
