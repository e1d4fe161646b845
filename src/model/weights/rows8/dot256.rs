//! The 256-bit kernel families, AVX2 and AVX-VNNI (and, for Q8_0, AVX-512 VNNI's 256-bit
//! form), which read the same layout and differ only in how a row's products of four
//! weight bytes (unsigned) and four activation bytes (signed) are summed: `maddubs` into
//! two 16-bit lanes per row, or `vpdpbusd` into one 32-bit lane. That step, and the width
//! of the sums it makes, is a [`DotStep`]; each quant family writes its kernel once
//! ([`Body256`]), generic over the step, and [`group_dot_avx2`], [`group_dot_avxvnni`]
//! and [`group_dot_avx512vl`] compile that one body with each step inlined under its own
//! target features.

use std::arch::x86_64::*;

use super::shared::{Q8Block, ROWS, TILE};

/// How a 256-bit kernel sums products of four-byte groups, and so how its per-row sums
/// are laid out and scaled. Every method is inlined into the kernel body that calls it,
/// which is compiled inside a `#[target_feature]` function ([`group_dot_avx2`],
/// [`group_dot_avxvnni`]), so the intrinsics are compiled with that function's features.
///
/// # Safety
/// The methods are `unsafe` because they use vector instructions: a caller must run on
/// a CPU that has AVX2 and the step's own instructions ([`Vpdpbusd`]: AVX-VNNI;
/// [`EvexVpdpbusd`]: AVX-512 VNNI and VL).
pub(super) trait DotStep {
    /// Two sub-blocks' unsigned per-row scales (the first's eight rows in bytes 0–7 of
    /// `scales`, the second's in bytes 8–15), each widened to where [`DotStep::scale`]
    /// multiplies the sums of its rows.
    ///
    /// # Safety
    /// As for the trait.
    unsafe fn widen_u8_scales(scales: __m128i) -> [__m256i; 2];

    /// One group's signed per-row scales, the eight bytes at `scales`, widened to where
    /// [`DotStep::scale`] multiplies the sums of its rows.
    ///
    /// # Safety
    /// As for the trait, and `scales` must point to eight readable bytes.
    unsafe fn load_i8_scales(scales: *const i8) -> __m256i;

    /// Where the sums of Q6_K's 16-value `group` start for activation `row`: its `-32 ·
    /// Σx` over the values each lane takes, so a lane ends at `Σ (q - 32) · x`.
    ///
    /// # Safety
    /// As for the trait.
    unsafe fn q6k_start(row: &Q8Block, group: usize) -> __m256i;

    /// `acc` plus, for each row, the products of the four weight bytes `w` (unsigned)
    /// and the four activation bytes `x` (signed) at the row's place.
    ///
    /// # Safety
    /// As for the trait.
    unsafe fn dot4(acc: __m256i, w: __m256i, x: __m256i) -> __m256i;

    /// `acc` plus, for each row, its four products of `w` (unsigned) and `x` (signed)
    /// summed in 32-bit lane `r`, whatever [`DotStep::dot4`]'s width: for products too
    /// large for two to share a 16-bit lane (Q8_0's `|w| · x`, up to 127 · 127).
    ///
    /// # Safety
    /// As for the trait.
    #[inline(always)]
    unsafe fn dot4_i32(acc: __m256i, w: __m256i, x: __m256i) -> __m256i {
        // SAFETY: the caller's guarantee is `dot4`'s; a step whose `dot4` sums into
        // 32-bit lanes needs nothing more.
        unsafe { Self::dot4(acc, w, x) }
    }

    /// Row `r`'s sum times its scale, in 32-bit lane `r` (`scale` from
    /// [`DotStep::widen_u8_scales`] or [`DotStep::load_i8_scales`]).
    ///
    /// # Safety
    /// As for the trait.
    unsafe fn scale(sums: __m256i, scale: __m256i) -> __m256i;
}

/// AVX2: `maddubs` sums row `r`'s products of bytes 0–1 and 2–3 into 16-bit lanes `2r`
/// and `2r + 1`, and `madd` with the scale in both lanes adds the two. The 16-bit lanes
/// hold a limited number of products; each family's docs give the bound.
pub(super) struct Maddubs;

/// AVX-VNNI: `vpdpbusd` sums row `r`'s four products into 32-bit lane `r`, and the scale
/// is applied with a 32-bit multiply.
pub(super) struct Vpdpbusd;

impl DotStep for Maddubs {
    #[inline(always)]
    unsafe fn widen_u8_scales(scales: __m128i) -> [__m256i; 2] {
        // SAFETY: the caller runs on a CPU with AVX2 (the trait's contract).
        unsafe {
            [
                _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(scales, scales)),
                _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scales, scales)),
            ]
        }
    }

    #[inline(always)]
    unsafe fn load_i8_scales(scales: *const i8) -> __m256i {
        // SAFETY: AVX2 as in `widen_u8_scales`; the caller guarantees the eight bytes.
        unsafe {
            let s = _mm_loadl_epi64(scales.cast());
            _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s, s))
        }
    }

    #[inline(always)]
    unsafe fn q6k_start(row: &Q8Block, group: usize) -> __m256i {
        // SAFETY: as in `widen_u8_scales`.
        unsafe { _mm256_set1_epi32(row.offsets[group]) }
    }

    #[inline(always)]
    unsafe fn dot4(acc: __m256i, w: __m256i, x: __m256i) -> __m256i {
        // SAFETY: as in `widen_u8_scales`.
        unsafe { _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, x)) }
    }

    #[inline(always)]
    unsafe fn dot4_i32(acc: __m256i, w: __m256i, x: __m256i) -> __m256i {
        // SAFETY: as in `widen_u8_scales`.
        unsafe {
            let pairs = _mm256_maddubs_epi16(w, x);
            _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
        }
    }

    #[inline(always)]
    unsafe fn scale(sums: __m256i, scale: __m256i) -> __m256i {
        // SAFETY: as in `widen_u8_scales`.
        unsafe { _mm256_madd_epi16(sums, scale) }
    }
}

impl DotStep for Vpdpbusd {
    #[inline(always)]
    unsafe fn widen_u8_scales(scales: __m128i) -> [__m256i; 2] {
        // SAFETY: the caller runs on a CPU with AVX2 and AVX-VNNI (the trait's contract).
        unsafe {
            [
                _mm256_cvtepu8_epi32(scales),
                _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(scales)),
            ]
        }
    }

    #[inline(always)]
    unsafe fn load_i8_scales(scales: *const i8) -> __m256i {
        // SAFETY: AVX2 as in `widen_u8_scales`; the caller guarantees the eight bytes.
        unsafe { _mm256_cvtepi8_epi32(_mm_loadl_epi64(scales.cast())) }
    }

    #[inline(always)]
    unsafe fn q6k_start(row: &Q8Block, group: usize) -> __m256i {
        let o = &row.lane_offsets;
        // SAFETY: as in `widen_u8_scales`.
        unsafe { _mm256_set1_epi32(o[2 * group] + o[2 * group + 1]) }
    }

    #[inline(always)]
    unsafe fn dot4(acc: __m256i, w: __m256i, x: __m256i) -> __m256i {
        // SAFETY: as in `widen_u8_scales`.
        unsafe { _mm256_dpbusd_avx_epi32(acc, w, x) }
    }

    #[inline(always)]
    unsafe fn scale(sums: __m256i, scale: __m256i) -> __m256i {
        // SAFETY: as in `widen_u8_scales`.
        unsafe { _mm256_mullo_epi32(sums, scale) }
    }
}

/// AVX-512 VNNI's `vpdpbusd` on 256-bit registers (EVEX-encoded, with AVX-512 VL): the
/// same step as [`Vpdpbusd`] on CPUs that have AVX-512 VNNI but not the VEX-encoded
/// AVX-VNNI (AMD Zen 4, Intel Ice Lake and Sapphire Rapids Xeons). Only the sums differ
/// in encoding; the scales are [`Vpdpbusd`]'s.
pub(super) struct EvexVpdpbusd;

impl DotStep for EvexVpdpbusd {
    #[inline(always)]
    unsafe fn widen_u8_scales(scales: __m128i) -> [__m256i; 2] {
        // SAFETY: AVX2 only; the caller runs on a CPU with this step's features.
        unsafe { Vpdpbusd::widen_u8_scales(scales) }
    }

    #[inline(always)]
    unsafe fn load_i8_scales(scales: *const i8) -> __m256i {
        // SAFETY: as in `widen_u8_scales`; the caller guarantees the eight bytes.
        unsafe { Vpdpbusd::load_i8_scales(scales) }
    }

    #[inline(always)]
    unsafe fn q6k_start(row: &Q8Block, group: usize) -> __m256i {
        // SAFETY: as in `widen_u8_scales`.
        unsafe { Vpdpbusd::q6k_start(row, group) }
    }

    #[inline(always)]
    unsafe fn dot4(acc: __m256i, w: __m256i, x: __m256i) -> __m256i {
        // SAFETY: the caller runs on a CPU with AVX-512 VNNI and VL (the trait's contract).
        unsafe { _mm256_dpbusd_epi32(acc, w, x) }
    }

    #[inline(always)]
    unsafe fn scale(sums: __m256i, scale: __m256i) -> __m256i {
        // SAFETY: as in `widen_u8_scales`.
        unsafe { Vpdpbusd::scale(sums, scale) }
    }
}

/// A quant family's 256-bit kernel, written once for every [`DotStep`]; implemented by
/// the family's laid-out block.
pub(super) trait Body256: Sized {
    /// The activation blocks the family's kernels read (Q8_K, or Q8_0 for Q8_0 weights).
    type Act;

    /// Dot products of eight weight rows (`w`: their blocks) with the `R` first `rows`
    /// (activation rows), into `dst[i][r]`. Implementations are
    /// `#[inline(always)]`, so each entry point below gets its own copy with its own
    /// instructions. Panics if a row of `rows` has fewer blocks than `w`, or `R` exceeds
    /// [`TILE`].
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA, F16C and `D`'s instructions.
    unsafe fn group_dot<D: DotStep, const R: usize>(
        w: &[Self],
        rows: &[&[Self::Act]; TILE],
        dst: &mut [[f32; ROWS]; TILE],
    );
}

/// An entry point: [`Body256::group_dot`] with one [`DotStep`], compiled with the target
/// features that step needs, so the body's intrinsics are compiled for them.
macro_rules! entry_point {
    ($(#[$doc:meta])* $name:ident: $step:ty, $features:literal) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name<B: Body256, const R: usize>(
            w: &[B],
            rows: &[&[B::Act]; TILE],
            dst: &mut [[f32; ROWS]; TILE],
        ) {
            // SAFETY: this function's features are the ones the body needs with this
            // step, and the caller guarantees the CPU has them.
            unsafe { B::group_dot::<$step, R>(w, rows, dst) }
        }
    };
}

entry_point!(
    /// [`Body256::group_dot`] with AVX2 ([`Maddubs`]), on blocks laid out for
    /// [`super::Kernel::Avx2`].
    ///
    /// # Safety
    /// The CPU must have what [`super::Kernel::Avx2`] needs.
    group_dot_avx2: Maddubs, "avx2,fma,f16c"
);

entry_point!(
    /// [`Body256::group_dot`] with AVX-VNNI ([`Vpdpbusd`]), on blocks laid out for
    /// [`super::Kernel::AvxVnni`] (the AVX2 layout).
    ///
    /// # Safety
    /// The CPU must have what [`super::Kernel::AvxVnni`] needs.
    group_dot_avxvnni: Vpdpbusd, "avx2,avxvnni,fma,f16c"
);

entry_point!(
    /// [`Body256::group_dot`] with AVX-512 VNNI on 256-bit registers ([`EvexVpdpbusd`]),
    /// on blocks laid out for the AVX2 arrangement: a family without a 512-bit kernel of
    /// its own (Q8_0) at [`super::Kernel::Avx512Vnni`].
    ///
    /// # Safety
    /// The CPU must have what [`super::Kernel::Avx512Vnni`] needs.
    group_dot_avx512vl: EvexVpdpbusd, "avx2,avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c"
);

/// A laid-out block type's kernels: the 256-bit body it shares between AVX2 and AVX-VNNI
/// ([`Body256`]) and its AVX-512 VNNI kernel, which reads its own arrangement (Q4_K,
/// Q6_K) or is the 256-bit body again ([`group_dot_avx512vl`], Q8_0).
pub(super) trait Kernels: Body256 {
    /// [`Body256::group_dot`] with AVX-512 VNNI, on blocks laid out for
    /// [`Kernel::Avx512Vnni`](super::shared::Kernel::Avx512Vnni).
    ///
    /// # Safety
    /// The CPU must have what [`Kernel::Avx512Vnni`](super::shared::Kernel::Avx512Vnni) needs.
    unsafe fn group_dot_avx512<const R: usize>(
        w: &[Self],
        rows: &[&[Self::Act]; TILE],
        dst: &mut [[f32; ROWS]; TILE],
    );
}
