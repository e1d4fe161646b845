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

pub mod beside;
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
/// vision tower's MLP input at ~5,000 patches is 80 MB in f32), and while a
/// [`LargeBlocksFromHeap`] scope lives they come from the heap, where freed memory stays
/// resident: a turn's peak memory would then count the encode's leftovers under the
/// prefill that follows. `malloc_trim` returns the free pages; it costs milliseconds
/// against an encode's tens of seconds. A no-op elsewhere (other allocators return large
/// blocks themselves).
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases memory glibc's allocator holds free; it takes
    // no pointers and is safe to call from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Live scopes of [`LargeBlocksFromHeap`], so the last one to end restores the threshold.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
static HEAP_SCOPES: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

/// While alive, large blocks come from glibc's heap and are reused there; when the last
/// such scope ends the free pages go back to the system ([`release_freed_memory`]).
///
/// glibc `mmap`s each block above its threshold (raised as blocks are freed, to at most
/// 32 MiB) and unmaps it on free, so each of an encode's or a long prefill's larger
/// activations (80 MB for the vision MLP's input at ~5,000 patches) is fresh memory whose
/// every page the kernel zeroes on first touch: page faults and zeroing were 8% of the
/// 2B-shape vision encode on a 2-core Zen 3 VM. From the heap, a layer reuses the blocks
/// the layer before it freed (a thread other than the main one allocates from its own
/// arena, whose heaps hold at most 64 MiB: a larger block is mapped there whatever the
/// threshold). Same machine, `sightline bench` alternating with and without:
/// vision encode 45.4 and 46.3 s against 41.7 and 40.8 s. On drop the threshold goes back
/// to glibc's largest dynamic value and its trim threshold to twice that, as they stand
/// after the first large block is freed. A no-op elsewhere.
pub struct LargeBlocksFromHeap(());

/// Largest block the heap serves inside a [`LargeBlocksFromHeap`] scope.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HEAP_BLOCKS_UP_TO: libc::c_int = 1 << 30;

/// glibc's largest dynamic `mmap` threshold on 64-bit targets (`DEFAULT_MMAP_THRESHOLD_MAX`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const GLIBC_MMAP_THRESHOLD_MAX: libc::c_int = 32 << 20;

impl LargeBlocksFromHeap {
    /// Open a scope.
    pub fn new() -> Self {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let mut scopes = HEAP_SCOPES.lock().unwrap_or_else(|e| e.into_inner());
            if *scopes == 0 {
                set_thresholds(HEAP_BLOCKS_UP_TO, HEAP_BLOCKS_UP_TO);
            }
            *scopes += 1;
        }
        LargeBlocksFromHeap(())
    }
}

impl Default for LargeBlocksFromHeap {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for LargeBlocksFromHeap {
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let mut scopes = HEAP_SCOPES.lock().unwrap_or_else(|e| e.into_inner());
            *scopes = scopes.saturating_sub(1);
            if *scopes == 0 {
                set_thresholds(GLIBC_MMAP_THRESHOLD_MAX, 2 * GLIBC_MMAP_THRESHOLD_MAX);
                release_freed_memory();
            }
        }
    }
}

/// glibc's `mmap` and trim thresholds. A refused value leaves that threshold as it was
/// (only speed depends on them).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_thresholds(mmap: libc::c_int, trim: libc::c_int) {
    // SAFETY: `mallopt` changes allocator parameters only; it takes no pointers and is
    // safe to call from any thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, mmap);
        libc::mallopt(libc::M_TRIM_THRESHOLD, trim);
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// Bytes glibc holds in `mmap`ed blocks.
    fn mapped_bytes() -> usize {
        // SAFETY: `mallinfo2` only reads the allocator's counters.
        unsafe { libc::mallinfo2() }.hblkhd
    }

    /// Inside a scope (nested too) a block far above glibc's largest dynamic threshold comes
    /// from the heap: no test thread can map a block under 1 GiB while the scope lives, so
    /// the mapped bytes do not grow by the block's size, whatever else runs.
    #[test]
    fn large_blocks_come_from_the_heap_inside_a_scope() {
        // Above glibc's largest dynamic threshold (32 MiB), below the 64 MiB a thread's own
        // arena can hold in one heap (larger blocks are mapped there whatever the threshold).
        const BLOCK: usize = 48 << 20;
        let outer = LargeBlocksFromHeap::new();
        let inner = LargeBlocksFromHeap::new();
        let before = mapped_bytes();
        let block = vec![1u8; BLOCK];
        let after = mapped_bytes();
        assert!(after < before + BLOCK, "{before} -> {after} bytes mapped");
        drop(inner);
        let second = vec![2u8; BLOCK];
        assert!(
            mapped_bytes() < before + BLOCK,
            "the outer scope still lives"
        );
        assert_eq!(block.len() + second.len(), 2 * BLOCK);
        drop(outer);
    }
}
