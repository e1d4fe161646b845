//! The Q6_K eight-row layout and its AVX2 kernel.
//!
//! Stored Q6_K (GGML `block_q6_K`, 210 bytes per 256 values): 128 bytes of low four
//! bits, 64 bytes of high two bits, sixteen signed 8-bit scales (one per 16 values) and
//! an f16 `d`. A value is `d · scale · (q - 32)` with `q` in `0..64`.
//!
//! Here, per eight rows: the low four bits arranged as in `q4k.rs` (a byte holds value
//! `64p + 4t + c` in its low nibble and `64p + 32 + 4t + c` in its high one), the high
//! two bits of two such bytes in one byte (so one 32-byte load serves two nibble loads),
//! scales side by side and the rows' `d` as f32. The kernel sums a 16-value group's
//! products in 16-bit lanes and adds the activation's `-32 · Σx` for the same lanes
//! before applying the scale: the partial sums may wrap, but the 16-bit sum of
//! `(q - 32) · x` over a lane's eight values is at most 8·32·127 = 32,512 in magnitude,
//! so the wrapped arithmetic ends exact. Products never saturate (`maddubs` of two
//! products: at most 2·63·127 = 16,002).

use half::f16;

use super::shared::{Q8Block, ROWS, TILE};

/// Bytes of one stored Q6_K block.
pub(super) const STORED_BYTES: usize = 210;

/// Eight rows' worth of one 256-value block.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
pub(super) struct Block {
    /// Pair `p` of 32-value halves, four-byte group `t`, row `r`, byte `c` at
    /// `256p + 32t + 4r + c`: low four bits of value `64p + 4t + c` (low nibble) and of
    /// `64p + 32 + 4t + c` (high nibble).
    qs: [u8; 1024],
    /// The high two bits of the same values, for groups `t = 2w` and `2w + 1` at
    /// `128p + 32w + 4r + c`: bits 0–1 and 2–3 for `t = 2w` (low, high nibble's value),
    /// bits 4–5 and 6–7 for `t = 2w + 1`.
    high: [u8; 512],
    /// 16-value group `j`, row `r` at `8j + r`.
    scales: [i8; 128],
    d: [f32; ROWS],
}

const _: () = assert!(std::mem::size_of::<Block>() == 1696);

pub(super) const EMPTY: Block = Block {
    qs: [0; 1024],
    high: [0; 512],
    scales: [0; 128],
    d: [0.0; ROWS],
};

/// The 256 six-bit values of a stored block, in order (GGML's `dequantize_row_q6_K`).
fn values(ql: &[u8], qh: &[u8]) -> [u8; 256] {
    let mut q = [0u8; 256];
    for n in 0..2 {
        for l in 0..32 {
            let (a, b, h) = (ql[64 * n + l], ql[64 * n + l + 32], qh[32 * n + l]);
            q[128 * n + l] = (a & 0xF) | ((h & 3) << 4);
            q[128 * n + l + 32] = (b & 0xF) | (((h >> 2) & 3) << 4);
            q[128 * n + l + 64] = (a >> 4) | (((h >> 4) & 3) << 4);
            q[128 * n + l + 96] = (b >> 4) | (((h >> 6) & 3) << 4);
        }
    }
    q
}

/// One [`Block`] from the same stored block of eight consecutive rows.
pub(super) fn interleave(rows: [&[u8]; ROWS]) -> Block {
    let mut out = EMPTY;
    for (r, src) in rows.iter().enumerate() {
        let q = values(&src[..128], &src[128..192]);
        for (j, &sc) in src[192..208].iter().enumerate() {
            out.scales[8 * j + r] = sc as i8;
        }
        out.d[r] = f16::from_le_bytes([src[208], src[209]]).to_f32();
        for p in 0..4 {
            for t in 0..8 {
                for c in 0..4 {
                    let (lo, hi) = (q[64 * p + 4 * t + c], q[64 * p + 32 + 4 * t + c]);
                    out.qs[256 * p + 32 * t + 4 * r + c] = (lo & 15) | ((hi & 15) << 4);
                    let shift = 4 * (t % 2);
                    out.high[128 * p + 32 * (t / 2) + 4 * r + c] |=
                        ((lo >> 4) << shift) | ((hi >> 4) << (shift + 2));
                }
            }
        }
    }
    out
}

/// Dot products of eight weight rows (`w`: their blocks) with the `R` first `rows`
/// (Q8_K activation rows), into `dst[i][r]`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; every row of `rows` has `w.len()` blocks.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn group_dot<const R: usize>(
    w: &[Block],
    rows: &[&[Q8Block]; TILE],
    dst: &mut [[f32; ROWS]; TILE],
) {
    use std::arch::x86_64::*;
    // SAFETY: every read is within a block (offsets below 1024 / 512 / 128 / 256) and
    // the caller guarantees the CPU features.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let m30 = _mm256_set1_epi8(0x30);
        let mut acc = [_mm256_setzero_ps(); R];
        for (b, blk) in w.iter().enumerate() {
            let d = _mm256_loadu_ps(blk.d.as_ptr());
            let mut sums = [_mm256_setzero_si256(); R];
            for p in 0..4 {
                super::shared::prefetch_ahead(blk, p);
                // Scales of groups 4p, 4p+1 (low nibbles) and 4p+2, 4p+3 (high), each
                // row's twice, for the two 16-bit lanes its products land in.
                let s_lo = _mm_loadu_si128(blk.scales.as_ptr().add(32 * p).cast());
                let s_hi = _mm_loadu_si128(blk.scales.as_ptr().add(32 * p + 16).cast());
                let sc_lo = [
                    _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s_lo, s_lo)),
                    _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(s_lo, s_lo)),
                ];
                let sc_hi = [
                    _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s_hi, s_hi)),
                    _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(s_hi, s_hi)),
                ];
                // One 16-value group of each row at a time (group 4p + u from the low
                // nibbles, 4p + 2 + u from the high ones): R accumulators stay in
                // registers even at R = 4; the nibble bytes are re-read from L1 instead.
                for u in 0..2 {
                    for (high_nibbles, sc, group) in [
                        (false, sc_lo[u], 4 * p + u),
                        (true, sc_hi[u], 4 * p + 2 + u),
                    ] {
                        let mut acc16 = [_mm256_setzero_si256(); R];
                        for t in 4 * u..4 * u + 4 {
                            let raw =
                                _mm256_load_si256(blk.qs.as_ptr().add(256 * p + 32 * t).cast());
                            let hb = _mm256_load_si256(
                                blk.high.as_ptr().add(128 * p + 32 * (t / 2)).cast(),
                            );
                            // The two high bits of this value to bits 4-5 (layout in `high`).
                            let top = match (t % 2, high_nibbles) {
                                (0, false) => _mm256_slli_epi16::<4>(hb),
                                (0, true) => _mm256_slli_epi16::<2>(hb),
                                (_, false) => hb,
                                (_, true) => _mm256_srli_epi16::<2>(hb),
                            };
                            let low = if high_nibbles {
                                _mm256_srli_epi16::<4>(raw)
                            } else {
                                raw
                            };
                            let q = _mm256_or_si256(
                                _mm256_and_si256(low, m4),
                                _mm256_and_si256(top, m30),
                            );
                            let at = 64 * p + 32 * usize::from(high_nibbles) + 4 * t;
                            for i in 0..R {
                                let x = rows[i][b].qs.as_ptr().add(at).cast::<i32>();
                                let x = _mm256_set1_epi32(x.read_unaligned());
                                acc16[i] = _mm256_add_epi16(acc16[i], _mm256_maddubs_epi16(q, x));
                            }
                        }
                        for i in 0..R {
                            let offset = _mm256_set1_epi32(rows[i][b].offsets[group]);
                            let exact = _mm256_add_epi16(acc16[i], offset);
                            sums[i] = _mm256_add_epi32(sums[i], _mm256_madd_epi16(exact, sc));
                        }
                    }
                }
            }
            for i in 0..R {
                let dy = _mm256_set1_ps(rows[i][b].d);
                acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(sums[i]), acc[i]);
            }
        }
        for i in 0..R {
            _mm256_storeu_ps(dst[i].as_mut_ptr(), acc[i]);
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
            super::super::shared::test_weights(7, 16, 512),
            (16, 512),
            &dev,
        )?;
        let q = QTensor::quantize(&w, GgmlDType::Q6K)?;
        let data = q.data()?;
        let stored = q.dequantize(&dev)?.to_vec2::<f32>()?;
        for (r, row) in stored.iter().enumerate() {
            let (group, rr) = (r / ROWS, r % ROWS);
            for (i, &v) in row.iter().enumerate() {
                let (b, i) = (i / 256, i % 256);
                let blk = interleave(std::array::from_fn(|k| {
                    let at = ((group * ROWS + k) * 2 + b) * STORED_BYTES;
                    &data[at..at + STORED_BYTES]
                }));
                let (p, within) = (i / 64, i % 64);
                let (high_nibble, l) = (within >= 32, within % 32);
                let (t, c) = (l / 4, l % 4);
                let byte = blk.qs[256 * p + 32 * t + 4 * rr + c];
                let low4 = if high_nibble { byte >> 4 } else { byte & 15 };
                let shift = 4 * (t % 2) + if high_nibble { 2 } else { 0 };
                let top2 = (blk.high[128 * p + 32 * (t / 2) + 4 * rr + c] >> shift) & 3;
                let q = (low4 | (top2 << 4)) as f32 - 32.0;
                let ours = blk.d[rr] * blk.scales[8 * (i / 16) + rr] as f32 * q;
                anyhow::ensure!((ours - v).abs() <= 1e-6, "row {r} col {i}: {ours} vs {v}");
            }
        }
        Ok(())
    }
}
