//! candle's own quantized CPU tiers: which one candle picks, and holding it at a lower one
//! when a lower kernel path is forced, so one machine can measure another's.

#[cfg(doc)]
use super::detect::CPU_FEATURES_ENV;
use super::detect::{selected, CpuPath};

/// candle's switch that holds its repacked quantized matmuls at their AVX2 level.
pub const CANDLE_FORCE_AVX2_ENV: &str = "MISTRALRS_FORCE_AVX2";

/// candle's switch that holds its repacked quantized matmuls at their AVX-VNNI level
/// (below AVX-512 VNNI, above AVX2), which Sightline's quantized kernels follow too: how
/// an AVX-512 machine measures an Intel Alder Lake-class CPU's quantized matmuls.
pub const CANDLE_FORCE_AVXVNNI_ENV: &str = "MISTRALRS_FORCE_AVXVNNI";

/// Make a forced path below AVX-512 hold candle's quantized kernels at AVX2 too: sets
/// [`CANDLE_FORCE_AVX2_ENV`]`=1` when [`CPU_FEATURES_ENV`] forces `avx2` or `portable`
/// and the variable is unset, so a forced run measures what an AVX2-only CPU runs (the
/// quantized matmuls are most of prefill and decode). Returns whether it set it.
///
/// Call it first thing in `main`, before any thread starts and before the first
/// quantized matmul (candle reads the variable once).
pub fn apply_forced_path_to_candle() -> bool {
    let s = selected();
    let forced_low = s.requested.is_some() && matches!(s.path, CpuPath::Avx2 | CpuPath::Portable);
    if forced_low && std::env::var_os(CANDLE_FORCE_AVX2_ENV).is_none() {
        std::env::set_var(CANDLE_FORCE_AVX2_ENV, "1");
        return true;
    }
    false
}

/// The tier of candle's repacked quantized CPU matmuls, as candle itself picks it
/// (`quantized/repack_x86.rs`, `level()`), honouring [`CANDLE_FORCE_AVX2_ENV`] and
/// [`CANDLE_FORCE_AVXVNNI_ENV`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandleQuantTier {
    /// AVX-512 VNNI; `amx`: CPUID reports AMX-TILE and AMX-INT8 (Q4_K prefill tiles).
    Avx512Vnni {
        /// AMX tiles are used for Q4_K prefill.
        amx: bool,
    },
    /// AVX-VNNI (256-bit `vpdpbusd`); `forced`: held there by [`CANDLE_FORCE_AVXVNNI_ENV`].
    AvxVnni {
        /// Held at AVX-VNNI by the environment although the CPU has AVX-512 VNNI.
        forced: bool,
    },
    /// AVX2 (`maddubs`); `forced`: held there by [`CANDLE_FORCE_AVX2_ENV`].
    Avx2 {
        /// Held at AVX2 by the environment although the CPU has more.
        forced: bool,
    },
    /// No repacked path (no AVX2, or not x86-64 and not aarch64).
    Unrepacked,
    /// aarch64: candle detects NEON dot-product / i8mm itself.
    Neon,
}

impl CandleQuantTier {
    /// How `bench` labels the tier.
    pub fn label(self) -> &'static str {
        match self {
            CandleQuantTier::Avx512Vnni { amx: true } => "AVX-512 VNNI (+AMX for Q4_K prefill)",
            CandleQuantTier::Avx512Vnni { amx: false } => "AVX-512 VNNI",
            CandleQuantTier::AvxVnni { forced: true } => "AVX-VNNI (forced)",
            CandleQuantTier::AvxVnni { forced: false } => "AVX-VNNI",
            CandleQuantTier::Avx2 { forced: true } => "AVX2 (forced)",
            CandleQuantTier::Avx2 { forced: false } => "AVX2",
            CandleQuantTier::Unrepacked => "unrepacked (no AVX2)",
            CandleQuantTier::Neon => "NEON (candle's own detection)",
        }
    }
}

/// The tier candle's repacked quantized CPU matmuls run at (see [`CandleQuantTier`]).
pub fn candle_quantized_tier() -> CandleQuantTier {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let force_avx2 = std::env::var(CANDLE_FORCE_AVX2_ENV).as_deref() == Ok("1");
        let force_vnni = std::env::var(CANDLE_FORCE_AVXVNNI_ENV).as_deref() == Ok("1");
        if !force_avx2 && !force_vnni && has!("avx512f") && has!("avx512vnni") {
            // CPUID leaf 7: AMX-TILE (bit 24) and AMX-INT8 (bit 25), as candle reads them.
            let info = std::arch::x86_64::__cpuid_count(7, 0);
            let amx = info.edx & (1 << 25) != 0 && info.edx & (1 << 24) != 0;
            return CandleQuantTier::Avx512Vnni { amx };
        }
        if !force_avx2 && (force_vnni || has!("avxvnni")) && has!("avx2") {
            let forced = force_vnni && has!("avx512f") && has!("avx512vnni");
            return CandleQuantTier::AvxVnni { forced };
        }
        if has!("avx2") && has!("fma") {
            return CandleQuantTier::Avx2 { forced: force_avx2 };
        }
        CandleQuantTier::Unrepacked
    }
    #[cfg(target_arch = "aarch64")]
    {
        CandleQuantTier::Neon
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        CandleQuantTier::Unrepacked
    }
}

/// The instruction level candle's repacked quantized CPU matmuls run at, for `bench`'s
/// report ([`candle_quantized_tier`]'s label).
pub fn candle_quantized_level() -> &'static str {
    candle_quantized_tier().label()
}
