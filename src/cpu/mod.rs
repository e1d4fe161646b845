//! The CPU the kernels run on: run-time detection of its instruction sets, the dispatch of
//! hand-written kernels to their variants, the f32 math they share, and candle's own
//! quantized tiers.
//!
//! # Kernel paths
//!
//! Every hot loop is written once, as `#[inline(always)]` code generic over `FMA` (whether
//! `a * b + c` may be one fused instruction), and compiled three times on x86-64: inside a
//! `#[target_feature(enable = "avx512f,…")]` function, inside an `avx2,fma` one, and for
//! the build's own target (baseline x86-64, SSE2, for the README's `cargo build --release`).
//! The register tiles of the fused attention also have hand-written AVX-512 and AVX2
//! kernels. [`selected`] picks the path once per process from CPUID, so a default build
//! runs the AVX-512 or AVX2 code on CPUs that have it. On aarch64 NEON and FMA are part
//! of the baseline, so the generic code compiled for the target (with `FMA`) is the NEON
//! path, and `portable` there runs the same code.
//!
//! `SIGHTLINE_CPU_FEATURES=avx512|avx2|portable` (read once) forces a path, so one machine
//! can measure the others. Forcing a path the CPU lacks does not fail: the best path the
//! CPU has below the requested one is used, and [`selected`]'s `warning` says so (the
//! `bench` command prints it). An unknown value is treated the same way (automatic choice,
//! with a warning).

mod candle_tier;
mod detect;
mod dispatch;
pub mod math;
pub mod peak;

pub use candle_tier::{
    apply_forced_path_to_candle, candle_quantized_level, candle_quantized_tier, CandleQuantTier,
    CANDLE_FORCE_AVX2_ENV, CANDLE_FORCE_AVXVNNI_ENV,
};
pub use detect::{
    path, resolve, selected, undispatched_features, CpuPath, Selection, CPU_FEATURES_ENV,
};
pub(crate) use dispatch::dispatch_fn;

/// Hand the heap memory freed since the last call back to the system.
///
/// An image encode allocates and frees activations of tens of megabytes each (the
/// vision tower's MLP input at ~5,000 patches is 80 MB in f32). glibc's allocator
/// raises its `mmap` threshold after such a block is freed, so later ones come from the
/// heap, and freed heap memory stays resident: a turn's peak memory then counts the
/// encode's leftovers under the prefill that follows. `malloc_trim` returns the free
/// pages; it costs milliseconds against an encode's tens of seconds. A no-op elsewhere
/// (other allocators return large blocks themselves).
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases memory glibc's allocator holds free; it takes
    // no pointers and is safe to call from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}
