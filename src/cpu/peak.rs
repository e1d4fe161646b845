//! The machine's arithmetic peak, measured: what "a fraction of peak" in `sightline bench`
//! is a fraction of.
//!
//! A nominal peak (cores × clock × FMA units × lanes × 2) needs the sustained clock under
//! vector load, which no file on a VM reports truthfully, and the number of FMA ports, which
//! CPUID does not give. So the peak is measured the way a roofline is: every thread runs a
//! loop of independent multiply-adds held in registers (twelve accumulator chains, more than
//! the FMA latency times the ports, so the units never wait), with the same instruction set
//! the kernels run on this machine, all threads at once, best of three runs.
//!
//! - **f32**: fused multiply-add on the kernel path's widest vectors ([`CpuPath`]: 512-bit
//!   on AVX-512, 256-bit on AVX2, 128-bit NEON on aarch64; on the portable path, SSE2
//!   multiplies and adds), two operations per lane each. The reference for the vision tower
//!   and for float text weights.
//! - **int8**: the dot-product instruction of candle's quantized tier
//!   ([`CandleQuantTier`]): `vpdpbusd` on 512-bit (AVX-512 VNNI) or 256-bit (AVX-VNNI)
//!   vectors, or AVX2's `vpmaddubsw` + `vpmaddwd` + `vpaddd`; two operations per byte pair.
//!   The reference for quantized text weights, whose products run as int8 dots. `None`
//!   where the tier has no x86 int8 dot (aarch64, no AVX2).

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{candle_quantized_tier, CandleQuantTier, CpuPath};

/// Independent accumulator chains per thread.
const CHAINS: usize = 12;
/// How long one measured run should take.
const RUN_TARGET: Duration = Duration::from_millis(120);
/// Measured runs; the best counts.
const RUNS: usize = 3;

/// The measured peak of this machine on `threads` threads.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Peak {
    /// Threads that ran at once.
    pub threads: usize,
    /// The f32 path measured ([`CpuPath::name`]).
    pub f32_path: String,
    /// f32 operations per second, in billions (a multiply-add counts two).
    pub f32_gflops: f64,
    /// The int8 instruction measured, if any.
    pub int8_path: Option<String>,
    /// int8 operations per second, in billions (a byte multiply-add counts two).
    pub int8_gops: Option<f64>,
}

impl Peak {
    /// The better of two measures of the same machine, field by field: a peak is what the
    /// machine can do, and a measure taken while a neighbour on the same host ran is low
    /// (on a shared VM one start-of-run measure read 142 GFLOP/s where the quiet figure
    /// was 231, and the stages were then reported above 100% of it).
    pub fn best_of(self, other: Peak) -> Peak {
        let int8_wins = other.int8_gops.unwrap_or(0.0) > self.int8_gops.unwrap_or(0.0);
        Peak {
            threads: self.threads,
            f32_gflops: self.f32_gflops.max(other.f32_gflops),
            f32_path: self.f32_path,
            int8_path: if int8_wins {
                other.int8_path
            } else {
                self.int8_path
            },
            int8_gops: if int8_wins {
                other.int8_gops
            } else {
                self.int8_gops
            },
        }
    }
}

/// Measure the peak of `path` (the kernels' path) and of candle's quantized tier on
/// `threads` threads. Takes about a second.
pub fn measure(path: CpuPath, threads: usize) -> Peak {
    let threads = threads.max(1);
    let f32_gflops = best_rate(threads, |iters| f32_probe(path, iters));
    let int8 = int8_kind();
    let int8_gops = int8.map(|kind| best_rate(threads, |iters| int8_probe(kind, iters)));
    Peak {
        threads,
        f32_path: path.name().to_string(),
        f32_gflops,
        int8_path: int8.map(|k| k.name().to_string()),
        int8_gops,
    }
}

/// The best rate, in billions of operations per second, of `probe` (which runs `iters`
/// iterations and returns the operations it did) on `threads` threads at once.
fn best_rate(threads: usize, probe: impl Fn(u64) -> f64 + Sync) -> f64 {
    // Calibrate on one thread so that one run takes about RUN_TARGET.
    let mut iters = 1u64 << 14;
    loop {
        let t = Instant::now();
        probe(iters);
        let took = t.elapsed();
        if took >= RUN_TARGET / 8 || iters >= 1 << 40 {
            let scale = RUN_TARGET.as_secs_f64() / took.as_secs_f64().max(1e-9);
            iters = ((iters as f64 * scale) as u64).max(1);
            break;
        }
        iters *= 4;
    }
    let mut best = 0f64;
    for _ in 0..RUNS {
        let start = Barrier::new(threads);
        let (ops, secs) = std::thread::scope(|s| {
            let runs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        let t = Instant::now();
                        let ops = probe(iters);
                        (ops, t.elapsed().as_secs_f64())
                    })
                })
                .collect();
            runs.into_iter()
                .filter_map(|r| r.join().ok())
                .fold((0.0, 0f64), |(o, s), (ops, secs)| (o + ops, s.max(secs)))
        });
        if secs > 0.0 {
            best = best.max(ops / secs / 1e9);
        }
    }
    best
}

/// `iters` rounds of [`CHAINS`] f32 multiply-adds on `path`'s vectors; the operations done.
fn f32_probe(path: CpuPath, iters: u64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if path == CpuPath::Avx512 && CpuPath::Avx512.supported() {
            // SAFETY: the CPU has AVX-512F (checked just above).
            unsafe { x86::fma512(iters) };
            return (iters * CHAINS as u64 * 16 * 2) as f64;
        }
        if path == CpuPath::Avx2 && CpuPath::Avx2.supported() {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            unsafe { x86::fma256(iters) };
            return (iters * CHAINS as u64 * 8 * 2) as f64;
        }
    }
    let _ = path;
    portable_mul_add(iters);
    (iters * CHAINS as u64 * 4 * 2) as f64
}

/// The build target's own multiply-add on four-lane rows: fused NEON on aarch64, SSE2
/// multiplies and adds on baseline x86-64.
fn portable_mul_add(iters: u64) {
    let mut acc = [[1.0f32; 4]; CHAINS];
    let (a, b) = (black_box([0.999_9f32; 4]), black_box([1e-4f32; 4]));
    for _ in 0..iters {
        for chain in acc.iter_mut() {
            for ((x, &a), &b) in chain.iter_mut().zip(&a).zip(&b) {
                *x = if cfg!(target_arch = "aarch64") {
                    x.mul_add(a, b)
                } else {
                    *x * a + b
                };
            }
        }
    }
    black_box(acc);
}

/// The int8 dot-product instruction of candle's quantized tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Int8Kind {
    Vnni512,
    Vnni256,
    Avx2,
}

impl Int8Kind {
    fn name(self) -> &'static str {
        match self {
            Int8Kind::Vnni512 => "AVX-512 VNNI",
            Int8Kind::Vnni256 => "AVX-VNNI",
            Int8Kind::Avx2 => "AVX2 maddubs",
        }
    }

    /// Byte multiply-adds per instruction sequence.
    fn macs(self) -> u64 {
        match self {
            Int8Kind::Vnni512 => 64,
            Int8Kind::Vnni256 | Int8Kind::Avx2 => 32,
        }
    }
}

fn int8_kind() -> Option<Int8Kind> {
    match candle_quantized_tier() {
        CandleQuantTier::Avx512Vnni { .. } => Some(Int8Kind::Vnni512),
        CandleQuantTier::AvxVnni { .. } => Some(Int8Kind::Vnni256),
        CandleQuantTier::Avx2 { .. } => Some(Int8Kind::Avx2),
        CandleQuantTier::Unrepacked | CandleQuantTier::Neon => None,
    }
}

/// `iters` rounds of [`CHAINS`] int8 dot steps of `kind`; the operations done.
fn int8_probe(kind: Int8Kind, iters: u64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        match kind {
            Int8Kind::Vnni512 if has!("avx512f") && has!("avx512vnni") => {
                // SAFETY: the CPU has AVX-512F and AVX-512 VNNI (checked in the guard).
                unsafe { x86::vnni512(iters) }
            }
            Int8Kind::Vnni256 if has!("avxvnni") => {
                // SAFETY: the CPU has AVX-VNNI (checked in the guard).
                unsafe { x86::vnni256(iters) }
            }
            Int8Kind::Avx2 if has!("avx2") => {
                // SAFETY: the CPU has AVX2 (checked in the guard).
                unsafe { x86::maddubs256(iters) }
            }
            _ => return 0.0,
        }
    }
    (iters * CHAINS as u64 * kind.macs() * 2) as f64
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The probes' loops: [`CHAINS`] register accumulators, one instruction (sequence) each
    //! per round, the result kept alive through `black_box`.
    use std::arch::x86_64::*;
    use std::hint::black_box;

    use super::CHAINS;

    /// `iters` rounds of `step` on each of [`CHAINS`] accumulators starting at `init`;
    /// inlined into each `#[target_feature]` probe so `step` compiles to its instruction.
    #[inline(always)]
    fn rounds<V: Copy>(iters: u64, init: V, step: impl Fn(V) -> V) {
        let mut acc = [init; CHAINS];
        for _ in 0..iters {
            for x in acc.iter_mut() {
                *x = step(*x);
            }
        }
        black_box(acc);
    }

    #[target_feature(enable = "avx512f")]
    pub(super) fn fma512(iters: u64) {
        let (a, b) = (
            _mm512_set1_ps(black_box(0.999_9)),
            _mm512_set1_ps(black_box(1e-4)),
        );
        rounds(iters, _mm512_set1_ps(1.0), |x| _mm512_fmadd_ps(x, a, b));
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn fma256(iters: u64) {
        let (a, b) = (
            _mm256_set1_ps(black_box(0.999_9)),
            _mm256_set1_ps(black_box(1e-4)),
        );
        rounds(iters, _mm256_set1_ps(1.0), |x| _mm256_fmadd_ps(x, a, b));
    }

    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) fn vnni512(iters: u64) {
        let (a, b) = (
            _mm512_set1_epi8(black_box(3)),
            _mm512_set1_epi8(black_box(-2)),
        );
        rounds(iters, _mm512_setzero_si512(), |x| {
            _mm512_dpbusd_epi32(x, a, b)
        });
    }

    #[target_feature(enable = "avxvnni")]
    pub(super) fn vnni256(iters: u64) {
        let (a, b) = (
            _mm256_set1_epi8(black_box(3)),
            _mm256_set1_epi8(black_box(-2)),
        );
        rounds(iters, _mm256_setzero_si256(), |x| {
            _mm256_dpbusd_avx_epi32(x, a, b)
        });
    }

    /// AVX2 has no four-byte dot: `vpmaddubsw` sums byte pairs into 16-bit lanes, and a
    /// kernel adds those to 16-bit sums (the eight-row kernels' step; llama.cpp's and
    /// candle's add a `vpmaddwd` to widen them, a second multiply-port instruction). The
    /// accumulator is the unsigned operand, so every multiply depends on the last round.
    #[target_feature(enable = "avx2")]
    pub(super) fn maddubs256(iters: u64) {
        let b = _mm256_set1_epi8(black_box(-2));
        rounds(iters, _mm256_set1_epi8(black_box(3)), |x| {
            _mm256_add_epi16(x, _mm256_maddubs_epi16(x, b))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_this_cpu_has_measures_a_positive_peak_and_wider_paths_are_not_slower() {
        let (mut last, mut int8) = (0.0, None);
        for path in [CpuPath::Portable, CpuPath::Avx2, CpuPath::Avx512] {
            if !path.supported() {
                continue;
            }
            let p = measure(path, 1);
            assert!(p.f32_gflops > 0.1, "{path:?}: {p:?}");
            // Wider vectors do at least as much per second; 0.5 leaves room for a busy
            // machine between the measurements.
            assert!(p.f32_gflops > last * 0.5, "{path:?}: {p:?} after {last}");
            last = p.f32_gflops;
            if let (Some(gops), Some(_)) = (p.int8_gops, &p.int8_path) {
                assert!(gops > 0.1, "{p:?}");
                int8 = Some(gops);
            }
        }
        // The int8 tier's vectors are as wide as the widest f32 path's (candle picks its
        // tier from the same CPU), a byte dot does four times the operations of an f32
        // multiply-add of that width (64 against 16 per 256 bits), and no x86 CPU issues
        // more of them per cycle than FMAs. Far above 4×, the probe measured something
        // other than its multiplies (as when the compiler hoisted a multiply of constants
        // out of the loop and timed the additions).
        if let Some(gops) = int8 {
            assert!(
                gops < 6.0 * last,
                "int8 {gops} GOP/s against f32 {last} GFLOP/s"
            );
        }
    }
}
