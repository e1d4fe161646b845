//! The Q8_0 eight-row layout and its AVX2 kernel: the vision tower's matmuls when the
//! projector file is Q8_0 (what llama.cpp's converter writes as `mmproj-…-Q8_0.gguf`).
//!
//! Stored Q8_0 (GGML `block_q8_0`, 34 bytes per 32 values): `d` (f16) and 32 signed
//! bytes; a value is `d · q`. Here, per eight rows and per 256 values (eight stored
//! blocks of each row): the bytes of sub-block `s` four at a time, all eight rows side
//! by side, and the eight rows' `d` of each sub-block together. The laid-out block is
//! the stored bytes rearranged, the same size (2,176 bytes).
//!
//! The activations are quantized as GGML quantizes them for a Q8_0 matrix (Q8_0 too:
//! a scale per 32 values, rounded to f16), so each sub-block's integer
//! sum is the one candle's and llama.cpp's dot products compute. Both operands are
//! signed, and `maddubs` and `vpdpbusd` take one unsigned: the kernel multiplies `|w|`
//! by `x` with `w`'s sign (GGML's AVX2 trick). A pair of products is at most
//! 2·127·127 = 32,258, so on AVX2 each `maddubs` result goes to 32-bit lanes at once
//! (two would overflow 16 bits); `vpdpbusd` sums into them directly.
//!
//! Every family reads this one layout: the kernel is the 256-bit body of `dot256.rs`
//! with each family's dot step (on AVX-512 VNNI, its EVEX-encoded 256-bit form).

use half::f16;

#[cfg(target_arch = "x86_64")]
use super::dot256::{Body256, DotStep, Kernels};
#[cfg(target_arch = "x86_64")]
use super::shared::TILE;
use super::shared::{Activation, QK_K, ROWS};

/// Values per stored Q8_0 block.
const QK8_0: usize = 32;
/// Sub-blocks per 256 values.
const SUBS: usize = QK_K / QK8_0;
/// Bytes of the eight stored Q8_0 blocks that hold one row's 256 values.
pub(super) const STORED_BYTES: usize = SUBS * (2 + QK8_0);

/// Eight rows' worth of 256 values.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
pub(super) struct Block {
    /// Sub-block `s`, four-byte group `t`, row `r` at `256s + 32t + 4r`.
    qs: [i8; ROWS * QK_K],
    /// Sub-block `s`, row `r` at `8s + r`.
    d: [f16; ROWS * SUBS],
}

const _: () = assert!(std::mem::size_of::<Block>() == ROWS * STORED_BYTES);

/// One [`Block`] from the same 256 values of eight consecutive rows (one layout for
/// every family that takes Q8_0; `lay_out` passes the family).
pub(super) fn interleave(_: super::Kernel, rows: [&[u8]; ROWS]) -> Block {
    let mut out = Block {
        qs: [0; ROWS * QK_K],
        d: [f16::ZERO; ROWS * SUBS],
    };
    for (r, src) in rows.iter().enumerate() {
        for (s, stored) in src.chunks_exact(2 + QK8_0).enumerate() {
            out.d[ROWS * s + r] = f16::from_le_bytes([stored[0], stored[1]]);
            for (t, four) in stored[2..].chunks_exact(4).enumerate() {
                let at = 256 * s + 32 * t + 4 * r;
                for (o, &b) in out.qs[at..at + 4].iter_mut().zip(four) {
                    *o = b as i8;
                }
            }
        }
    }
    out
}

/// One activation span of 256 values quantized to Q8_0: eight 32-value sub-blocks.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
pub(super) struct Q80Block {
    pub(super) qs: [i8; QK_K],
    /// Sub-block `s`'s scale, as stored: rounded to f16.
    pub(super) d: [f32; SUBS],
}

/// GGML's `quantize_row_q8_0` as candle does it: per 32 values `d = max |x| / 127`,
/// values `round(x / d)`, `d` stored as f16.
impl Activation for Q80Block {
    const ZERO: Self = Q80Block {
        qs: [0; QK_K],
        d: [0.0; SUBS],
    };

    #[inline(always)]
    fn quantize(xs: &[f32], out: &mut [Self]) {
        for (x, y) in xs.chunks_exact(QK_K).zip(out.iter_mut()) {
            for (s, (xs, qs)) in x
                .chunks_exact(QK8_0)
                .zip(y.qs.chunks_exact_mut(QK8_0))
                .enumerate()
            {
                let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                for (q, &v) in qs.iter_mut().zip(xs) {
                    *q = (v * id).round() as i8;
                }
                y.d[s] = f16::from_f32(d).to_f32();
            }
        }
    }

    /// Per 32 values: the maximum magnitude in eight lanes, then `round(x / d)` as
    /// Rust's `round` does it (half away from zero: add ±0.49999997, truncate; the
    /// addition rounds exact halves up) and packed to bytes as GGML's AVX2 code packs
    /// them. `max_ps` returns its second operand when the first is NaN, so a NaN value is
    /// skipped in the maximum as `f32::max` skips it, and NaN quotients become 0 as the
    /// `as i8` cast makes them.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn quantize_avx2(xs: &[f32], out: &mut [Self]) {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees the features; every load reads 8 of the 32 values
        // of `v`, every store writes the 32 bytes of one sub-block of `qs`.
        unsafe {
            let magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
            let almost_half = _mm256_set1_ps(0.499_999_97);
            let sign = _mm256_set1_ps(-0.0);
            let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
            for (x, y) in xs.chunks_exact(QK_K).zip(out.iter_mut()) {
                for (s, v) in x.chunks_exact(QK8_0).enumerate() {
                    let v: [__m256; 4] =
                        std::array::from_fn(|i| _mm256_loadu_ps(v.as_ptr().add(8 * i)));
                    let mut m = _mm256_setzero_ps();
                    for &vi in &v {
                        m = _mm256_max_ps(_mm256_and_ps(vi, magnitude), m);
                    }
                    let m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
                    let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
                    let amax = _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
                    let d = amax / 127.0;
                    let id = _mm256_set1_ps(if d != 0.0 { 1.0 / d } else { 0.0 });
                    let q: [__m256i; 4] = std::array::from_fn(|i| {
                        let t = _mm256_mul_ps(v[i], id);
                        let t = _mm256_and_ps(t, _mm256_cmp_ps(t, t, _CMP_ORD_Q));
                        let half = _mm256_or_ps(almost_half, _mm256_and_ps(t, sign));
                        let r = _mm256_round_ps(
                            _mm256_add_ps(t, half),
                            _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC,
                        );
                        _mm256_cvttps_epi32(r)
                    });
                    let words = _mm256_packs_epi16(
                        _mm256_packs_epi32(q[0], q[1]),
                        _mm256_packs_epi32(q[2], q[3]),
                    );
                    let bytes = _mm256_permutevar8x32_epi32(words, order);
                    _mm256_storeu_si256(y.qs.as_mut_ptr().add(QK8_0 * s).cast(), bytes);
                    y.d[s] = _mm_cvtss_f32(_mm_cvtph_ps(
                        _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(d)),
                    ));
                }
            }
        }
    }
}

/// Per sub-block, each row's 32 integer products summed in its 32-bit lane
/// ([`DotStep::dot4_i32`] of `|w|` and `x` with `w`'s sign), then times both scales.
#[cfg(target_arch = "x86_64")]
impl Body256 for Block {
    type Act = Q80Block;

    #[inline(always)]
    unsafe fn group_dot<D: DotStep, const R: usize>(
        w: &[Block],
        rows: &[&[Q80Block]; TILE],
        dst: &mut [[f32; ROWS]; TILE],
    ) {
        use std::arch::x86_64::*;
        let spans: [&[Q80Block]; R] = std::array::from_fn(|i| &rows[i][..w.len()]);
        // SAFETY: every read is within a block (offsets below 2,048 bytes of `qs`, 64
        // scales of `d`) or an activation span (below 256; `steps` is eight, which
        // `black_box` returns unchanged), and the caller guarantees the features.
        unsafe {
            let mut acc = [_mm256_setzero_ps(); R];
            // The four-byte steps of a sub-block run as a loop whose count the compiler
            // does not see. Fully unrolled (LLVM's choice for a known eight), the body
            // loaded all eight steps' weights and their magnitudes first and kept those
            // 16 vectors through the rows: with AVX2's 16 registers it spilled to the
            // stack on every step. As a loop, a step's weights live for that step alone:
            // 103 -> 115 GOP/s on one thread (`rows8_prefill_timing`), the screenshot's
            // encode 34-37 -> 32 s (2 threads, forced AVX2). The Q4_K and Q6_K bodies
            // lost 4-5% the same way, so they stay unrolled.
            let steps = std::hint::black_box(QK8_0 / 4);
            for (b, blk) in w.iter().enumerate() {
                for s in 0..SUBS {
                    if s % 2 == 0 {
                        super::shared::prefetch_ahead(blk, s / 2);
                    }
                    let mut sums = [_mm256_setzero_si256(); R];
                    let weights = blk.qs.as_ptr().add(256 * s);
                    for t in 0..steps {
                        let wv = _mm256_load_si256(weights.add(32 * t).cast());
                        let magnitude = _mm256_abs_epi8(wv);
                        for (sum, span) in sums.iter_mut().zip(&spans) {
                            let four = span[b].qs.as_ptr().add(32 * s + 4 * t).cast::<i32>();
                            let x = _mm256_set1_epi32(four.read_unaligned());
                            *sum = D::dot4_i32(*sum, magnitude, _mm256_sign_epi8(x, wv));
                        }
                    }
                    let dw = _mm256_cvtph_ps(_mm_loadu_si128(blk.d.as_ptr().add(ROWS * s).cast()));
                    for ((a, sum), span) in acc.iter_mut().zip(sums).zip(&spans) {
                        let scale = _mm256_mul_ps(dw, _mm256_set1_ps(span[b].d[s]));
                        *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, *a);
                    }
                }
            }
            for (row, a) in dst.iter_mut().zip(acc) {
                _mm256_storeu_ps(row.as_mut_ptr(), a);
            }
        }
    }
}

/// Q8_0 has no 512-bit arrangement: at the AVX-512 VNNI tier the 256-bit body runs with
/// the EVEX-encoded `vpdpbusd` (on AMD Zen 4 a 512-bit `vpdpbusd` does the work of two
/// 256-bit ones in the same time).
#[cfg(target_arch = "x86_64")]
impl Kernels for Block {
    #[inline(always)]
    unsafe fn group_dot_avx512<const R: usize>(
        w: &[Block],
        rows: &[&[Q80Block]; TILE],
        dst: &mut [[f32; ROWS]; TILE],
    ) {
        // SAFETY: the caller guarantees what the AVX-512 VNNI tier needs, which
        // `group_dot_avx512vl` needs.
        unsafe { super::dot256::group_dot_avx512vl::<Block, R>(w, rows, dst) }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    /// The AVX2 quantizer writes the portable one's bytes and scales, on random rows
    /// at several magnitudes and on the awkward values: exact halves, zeros, NaN,
    /// infinities, subnormals, a scale past f16's range.
    #[test]
    fn the_avx2_quantizer_matches_the_portable_one() {
        if !super::super::shared::Kernel::Avx2.runs_here() {
            return;
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut rows: Vec<Vec<f32>> = [1e-3f32, 1.0, 300.0, 1e9]
            .iter()
            .map(|&scale| {
                (0..2 * QK_K)
                    .map(|_| rng.random_range(-scale..scale))
                    .collect()
            })
            .collect();
        let mut awkward: Vec<f32> = (0..2 * QK_K).map(|i| (i as f32 - 256.0) * 0.5).collect();
        awkward[..32].fill(0.0);
        awkward[40] = f32::NAN;
        awkward[70] = f32::INFINITY;
        awkward[100] = f32::NEG_INFINITY;
        awkward[130..160].fill(1e-41);
        awkward[200] = f32::NAN;
        awkward[201..232].fill(f32::NAN);
        rows.push(awkward);
        // Each sub-block's maximum 127 makes d = 1, so x / d = k + 0.5 exactly.
        rows.push(
            (0..2 * QK_K)
                .map(|i| match i % 32 {
                    0 => 127.0,
                    j => j as f32 - 16.5,
                })
                .collect(),
        );
        for xs in &rows {
            let mut portable = [Q80Block::ZERO; 2];
            Q80Block::quantize(xs, &mut portable);
            let mut fast = [Q80Block::ZERO; 2];
            // SAFETY: `runs_here` checked AVX2, FMA and F16C above.
            unsafe { super::super::shared::quantize_row(xs, &mut fast) };
            for (p, f) in portable.iter().zip(&fast) {
                assert_eq!(p.qs, f.qs, "bytes of {:?}", &xs[..4]);
                for (a, b) in p.d.iter().zip(&f.d) {
                    assert_eq!(a.to_bits(), b.to_bits(), "scales of {:?}", &xs[..4]);
                }
            }
        }
    }
}
