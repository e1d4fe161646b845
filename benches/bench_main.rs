//! Criterion benches for the stages of Sightline's per-turn path, one file per stage.

mod preprocess;

// criterion's macros generate undocumented items.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::preprocess::bench);
}

criterion::criterion_main!(group::benches);
