//! The Q4_K eight-row layout and its AVX2, AVX-VNNI and AVX-512 VNNI kernels.
//!
//! Stored Q4_K (GGML `block_q4_K`, 144 bytes per 256 values): `d`, `dmin` (f16), the
//! eight 32-value sub-blocks' 6-bit scales and mins packed in 12 bytes, and 128 bytes of
//! nibbles where byte `32p + l` holds value `64p + l` (low nibble) and `64p + 32 + l`
//! (high). A value is `d · scale · q - dmin · min`.
//!
//! Here, per eight rows: the nibble bytes of pair `p` of sub-blocks four at a time, all
//! eight rows side by side; scales and mins one byte each. The AVX2 and AVX-VNNI kernels
//! are one body with their dot step inlined (`dot256.rs`). Within a 32-value sub-block
//! the AVX2 kernel sums products in 16-bit lanes before applying the scale, which cannot
//! overflow: a pair of products is at most 2·15·127 = 3,810 and a lane sums eight pairs
//! (30,480 < 32,767). The AVX-VNNI kernel sums them with `vpdpbusd` into each row's
//! 32-bit lane (at most 32·15·127 = 60,960: 32 bits, not 16) and applies the scale with a
//! 32-bit multiply. The mins are folded in with the activation's per-sub-block sums.
//!
//! The AVX-512 kernel sums a sub-block's products with `vpdpbusd` into 32-bit lanes
//! (`2r + t % 2` for row `r`, sixteen products each: at most 16·15·127 = 30,480 in
//! magnitude), so a lane's sum fits in its low 16 bits and `vpdpwssd` with the scale in
//! the low half of a lane (high half zero) applies the scale exactly; lanes `2r` and
//! `2r + 1` are added at the end.

use half::f16;

#[cfg(target_arch = "x86_64")]
use super::dot256::{Body256, DotStep, Kernels};
use super::shared::{Kernel, Q8Block, ROWS, TILE};

/// Bytes of one stored Q4_K block.
pub(super) const STORED_BYTES: usize = 144;

/// Eight rows' worth of one 256-value block.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
pub(super) struct Block {
    /// Pair `p` of 32-value sub-blocks, four-byte group `t`, row `r`: the stored bytes
    /// `qs[32p + 4t ..][..4]` of row `r` at [`Kernel::nibble_at`]`(p, t, r, 0)`.
    qs: [u8; 1024],
    /// Sub-block `j`, row `r` at `8j + r`.
    scales: [u8; 64],
    /// Sub-block pair `p`, row `r`: the mins of sub-blocks `2p` and `2p + 1` at
    /// `16p + 2r` and `16p + 2r + 1`.
    mins: [u8; 64],
    d: [f16; ROWS],
    dmin: [f16; ROWS],
}

const _: () = assert!(std::mem::size_of::<Block>() == 1184);

pub(super) const EMPTY: Block = Block {
    qs: [0; 1024],
    scales: [0; 64],
    mins: [0; 64],
    d: [f16::ZERO; ROWS],
    dmin: [f16::ZERO; ROWS],
};

/// The scale and min of sub-block `j` from a Q4_K block's 12 packed bytes (GGML's
/// `get_scale_min_k4`).
fn scale_min(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// One [`Block`] for `kernel` from the same stored block of eight consecutive rows.
pub(super) fn interleave(kernel: Kernel, rows: [&[u8]; ROWS]) -> Block {
    let mut out = EMPTY;
    for (r, src) in rows.iter().enumerate() {
        out.d[r] = f16::from_le_bytes([src[0], src[1]]);
        out.dmin[r] = f16::from_le_bytes([src[2], src[3]]);
        let (packed, qs) = (&src[4..16], &src[16..STORED_BYTES]);
        for j in 0..8 {
            let (sc, m) = scale_min(j, packed);
            out.scales[8 * j + r] = sc;
            out.mins[16 * (j / 2) + 2 * r + j % 2] = m;
        }
        for p in 0..4 {
            for t in 0..8 {
                let at = kernel.nibble_at(p, t, r, 0);
                out.qs[at..at + 4].copy_from_slice(&qs[32 * p + 4 * t..32 * p + 4 * t + 4]);
            }
        }
    }
    out
}

/// The AVX2 and AVX-VNNI kernel ([`Body256`]): per sub-block, the step's sums of a row's
/// 32 products (AVX2: in two 16-bit lanes, at most 16·15·127 = 30,480 each; AVX-VNNI: in
/// one 32-bit lane), times the sub-block's scale; the mins folded in once per block.
#[cfg(target_arch = "x86_64")]
impl Body256 for Block {
    type Act = Q8Block;

    #[inline(always)]
    unsafe fn group_dot<D: DotStep, const R: usize>(
        w: &[Block],
        rows: &[&[Q8Block]; TILE],
        dst: &mut [[f32; ROWS]; TILE],
    ) {
        use std::arch::x86_64::*;
        // SAFETY: every read is within a block (offsets below 1024 / 64 / 256) or an
        // activation block (below 256), and the caller guarantees the CPU features.
        unsafe {
            let m4 = _mm256_set1_epi8(0x0F);
            let mut acc = [_mm256_setzero_ps(); R];
            for (b, blk) in w.iter().enumerate() {
                let mut sums = [_mm256_setzero_si256(); R];
                for p in 0..4 {
                    super::shared::prefetch_ahead(blk, p);
                    let sc = _mm_loadu_si128(blk.scales.as_ptr().add(16 * p).cast());
                    let scales = D::widen_u8_scales(sc);
                    // Sub-blocks 2p (low nibbles, half 0) and 2p + 1 (high, half 1). Up to two
                    // rows, both in one pass over the bytes (a decode step reads each byte
                    // once); at three and four, one per pass, so the R accumulators, the
                    // block's sums and the running totals fit in the 16 registers (both
                    // halves together, with the mins, spilled) and the bytes are re-read
                    // from L1.
                    let passes: &[&[usize]] = if R <= 2 { &[&[0, 1]] } else { &[&[0], &[1]] };
                    for &halves in passes {
                        let mut part = [[_mm256_setzero_si256(); R]; 2];
                        for t in 0..8 {
                            let raw =
                                _mm256_load_si256(blk.qs.as_ptr().add(256 * p + 32 * t).cast());
                            for &h in halves {
                                let q = if h == 1 {
                                    _mm256_and_si256(_mm256_srli_epi16::<4>(raw), m4)
                                } else {
                                    _mm256_and_si256(raw, m4)
                                };
                                let at = 64 * p + 32 * h + 4 * t;
                                for i in 0..R {
                                    let x = rows[i][b].qs.as_ptr().add(at).cast::<i32>();
                                    let x = _mm256_set1_epi32(x.read_unaligned());
                                    part[h][i] = D::dot4(part[h][i], q, x);
                                }
                            }
                        }
                        for &h in halves {
                            for i in 0..R {
                                sums[i] =
                                    _mm256_add_epi32(sums[i], D::scale(part[h][i], scales[h]));
                            }
                        }
                    }
                }
                // The mins, once per block: `dmin · Σ min · Σx` comes off each row's sum.
                let mut min_sums = [_mm256_setzero_si256(); R];
                for p in 0..4 {
                    let mins =
                        _mm256_cvtepu8_epi16(_mm_loadu_si128(blk.mins.as_ptr().add(16 * p).cast()));
                    for i in 0..R {
                        let pair = _mm256_set1_epi32(rows[i][b].pair_sums[p]);
                        min_sums[i] = _mm256_add_epi32(min_sums[i], _mm256_madd_epi16(mins, pair));
                    }
                }
                let d = _mm256_cvtph_ps(_mm_loadu_si128(blk.d.as_ptr().cast()));
                let dmin = _mm256_cvtph_ps(_mm_loadu_si128(blk.dmin.as_ptr().cast()));
                for i in 0..R {
                    let dy = _mm256_set1_ps(rows[i][b].d);
                    acc[i] =
                        _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(sums[i]), acc[i]);
                    acc[i] = _mm256_fnmadd_ps(
                        _mm256_mul_ps(dmin, dy),
                        _mm256_cvtepi32_ps(min_sums[i]),
                        acc[i],
                    );
                }
            }
            for i in 0..R {
                _mm256_storeu_ps(dst[i].as_mut_ptr(), acc[i]);
            }
        }
    }
}

/// The AVX-512 VNNI kernel, on blocks laid out for [`Kernel::Avx512Vnni`].
#[cfg(target_arch = "x86_64")]
impl Kernels for Block {
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn group_dot_avx512<const R: usize>(
        w: &[Block],
        rows: &[&[Q8Block]; TILE],
        dst: &mut [[f32; ROWS]; TILE],
    ) {
        use std::arch::x86_64::*;
        // SAFETY: every read is within a block (offsets below 1024 / 64 / 256) and the
        // caller guarantees the CPU features. Blocks are 32-byte aligned, so the 64-byte
        // loads are unaligned ones.
        unsafe {
            let m4 = _mm512_set1_epi8(0x0F);
            let mut acc = [_mm512_setzero_ps(); R];
            let mut acc_min = [_mm256_setzero_ps(); R];
            for (b, blk) in w.iter().enumerate() {
                // Each row's `d` twice, for its two lanes.
                let d8 = _mm_loadu_si128(blk.d.as_ptr().cast());
                let d = _mm512_cvtph_ps(_mm256_set_m128i(
                    _mm_unpackhi_epi16(d8, d8),
                    _mm_unpacklo_epi16(d8, d8),
                ));
                let dmin = _mm256_cvtph_ps(_mm_loadu_si128(blk.dmin.as_ptr().cast()));
                let mut sums = [_mm512_setzero_si512(); R];
                let mut min_sums = [_mm256_setzero_si256(); R];
                for p in 0..4 {
                    super::shared::prefetch_ahead(blk, p);
                    let sc = _mm_loadu_si128(blk.scales.as_ptr().add(16 * p).cast());
                    let sc_lo = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(sc, sc));
                    let sc_hi = _mm512_cvtepu8_epi32(_mm_unpackhi_epi8(sc, sc));
                    let mins =
                        _mm256_cvtepu8_epi16(_mm_loadu_si128(blk.mins.as_ptr().add(16 * p).cast()));
                    let mut lo_acc = [_mm512_setzero_si512(); R];
                    let mut hi_acc = [_mm512_setzero_si512(); R];
                    for half in 0..4 {
                        let raw =
                            _mm512_loadu_si512(blk.qs.as_ptr().add(256 * p + 64 * half).cast());
                        let lo = _mm512_and_si512(raw, m4);
                        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(raw), m4);
                        for i in 0..R {
                            // Groups t = 2·half and 2·half + 1: eight activation bytes.
                            let x = rows[i][b].qs.as_ptr().add(64 * p + 8 * half);
                            let x_lo = _mm512_set1_epi64(x.cast::<i64>().read_unaligned());
                            let x_hi = _mm512_set1_epi64(x.add(32).cast::<i64>().read_unaligned());
                            lo_acc[i] = _mm512_dpbusd_epi32(lo_acc[i], lo, x_lo);
                            hi_acc[i] = _mm512_dpbusd_epi32(hi_acc[i], hi, x_hi);
                        }
                    }
                    for i in 0..R {
                        sums[i] = _mm512_dpwssd_epi32(sums[i], lo_acc[i], sc_lo);
                        sums[i] = _mm512_dpwssd_epi32(sums[i], hi_acc[i], sc_hi);
                        let pair = _mm256_set1_epi32(rows[i][b].pair_sums[p]);
                        min_sums[i] = _mm256_add_epi32(min_sums[i], _mm256_madd_epi16(mins, pair));
                    }
                }
                for i in 0..R {
                    let dy = rows[i][b].d;
                    acc[i] = _mm512_fmadd_ps(
                        _mm512_mul_ps(d, _mm512_set1_ps(dy)),
                        _mm512_cvtepi32_ps(sums[i]),
                        acc[i],
                    );
                    acc_min[i] = _mm256_fmadd_ps(
                        _mm256_mul_ps(dmin, _mm256_set1_ps(dy)),
                        _mm256_cvtepi32_ps(min_sums[i]),
                        acc_min[i],
                    );
                }
            }
            for i in 0..R {
                let (mut lanes, mut mins) = ([0f32; 2 * ROWS], [0f32; ROWS]);
                _mm512_storeu_ps(lanes.as_mut_ptr(), acc[i]);
                _mm256_storeu_ps(mins.as_mut_ptr(), acc_min[i]);
                for r in 0..ROWS {
                    dst[i][r] = lanes[2 * r] + lanes[2 * r + 1] - mins[r];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    #[test]
    fn the_layout_keeps_every_weight() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let w = Tensor::from_vec(
            super::super::shared::test_weights(4, 16, 256),
            (16, 256),
            &dev,
        )?;
        let q = QTensor::quantize(&w, GgmlDType::Q4K)?;
        let data = q.data()?;
        let stored = q.dequantize(&dev)?.to_vec2::<f32>()?;
        for (kernel, (r, row)) in Kernel::ALL
            .into_iter()
            .flat_map(|k| stored.iter().enumerate().map(move |row| (k, row)))
        {
            let group = r / ROWS;
            let blk = interleave(
                kernel,
                std::array::from_fn(|i| {
                    let at = (group * ROWS + i) * STORED_BYTES;
                    &data[at..at + STORED_BYTES]
                }),
            );
            let rr = r % ROWS;
            for (i, &v) in row.iter().enumerate() {
                let (j, l) = (i / 32, i % 32);
                let p = j / 2;
                let byte = blk.qs[kernel.nibble_at(p, l / 4, rr, l % 4)];
                let q = if j % 2 == 1 { byte >> 4 } else { byte & 15 } as f32;
                let m = blk.mins[16 * p + 2 * rr + j % 2] as f32;
                let ours = blk.d[rr].to_f32() * blk.scales[8 * j + rr] as f32 * q
                    - blk.dmin[rr].to_f32() * m;
                anyhow::ensure!(
                    (ours - v).abs() <= 1e-6,
                    "{kernel:?} row {r} col {i}: {ours} vs {v}"
                );
            }
        }
        Ok(())
    }
}
