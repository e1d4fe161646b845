//! The Q6_K eight-row layout and its AVX2, AVX-VNNI and AVX-512 VNNI kernels.
//!
//! Stored Q6_K (GGML `block_q6_K`, 210 bytes per 256 values): 128 bytes of low four
//! bits, 64 bytes of high two bits, sixteen signed 8-bit scales (one per 16 values) and
//! an f16 `d`. A value is `d · scale · (q - 32)` with `q` in `0..64`.
//!
//! Here, per eight rows: the low four bits arranged as in `q4k.rs` (a byte holds value
//! `64p + 4t + c` in its low nibble and `64p + 32 + 4t + c` in its high one), the high
//! two bits of two such bytes in one byte (so one 32-byte load serves two nibble loads),
//! scales side by side and the rows' `d` as f32. The AVX2 and AVX-VNNI kernels are one
//! body with their dot step inlined (`dot256.rs`). The AVX2 kernel sums a 16-value
//! group's products in 16-bit lanes starting from the activation's `-32 · Σx` for the
//! same lanes, then applies the scale: the partial sums may wrap, but the 16-bit sum of
//! `(q - 32) · x` over a lane's eight values is at most 8·32·127 = 32,512 in magnitude,
//! so the wrapped arithmetic ends exact. Products never saturate (`maddubs` of two
//! products: at most 2·63·127 = 16,002). The AVX-VNNI kernel sums them with `vpdpbusd`
//! into each row's 32-bit lane, starting from the group's `-32 · Σx`, and applies the
//! scale with a 32-bit multiply.
//!
//! The AVX-512 kernel sums with `vpdpbusd` into 32-bit lanes (`2r + t % 2` for row
//! `r`, the nibble order of `q4k.rs`), each starting from the activation's `-32 · Σx`
//! over the same eight values, so a lane ends at the exact 16-bit-sized sum and
//! `vpdpwssd` applies the scale as in the Q4_K kernel.

use half::f16;

#[cfg(target_arch = "x86_64")]
use super::dot256::{Body256, DotStep, Kernels};
use super::shared::{Kernel, Q8Block, ROWS, TILE};

/// Bytes of one stored Q6_K block.
pub(super) const STORED_BYTES: usize = 210;

/// Eight rows' worth of one 256-value block.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
pub(super) struct Block {
    /// Pair `p` of 32-value halves, four-byte group `t`, row `r`, byte `c` at
    /// [`Kernel::nibble_at`]`(p, t, r, c)`: low four bits of value `64p + 4t + c` (low
    /// nibble) and of `64p + 32 + 4t + c` (high nibble).
    qs: [u8; 1024],
    /// The high two bits of the same values, where [`high_at`] puts them: two nibble
    /// loads' worth of high bits in one load.
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

/// Where the high two bits of the values at nibble byte `(p, t, r, c)` lie: the byte
/// of `high`, and the shift of the low-nibble value's bits (the high-nibble value's are
/// two above). AVX2 and AVX-VNNI: groups `t = 2w` and `2w + 1` at `128p + 32w + 4r + c`, shifts 0
/// and 4. AVX-512: the 64-byte nibble loads `2v` and `2v + 1` (`t / 2`) at
/// `128p + 64v` plus the byte's place within its load, shifts 0 and 4.
pub(super) fn high_at(kernel: Kernel, p: usize, t: usize, r: usize, c: usize) -> (usize, u32) {
    match kernel {
        Kernel::Avx2 | Kernel::AvxVnni => (128 * p + 32 * (t / 2) + 4 * r + c, 4 * (t % 2) as u32),
        Kernel::Avx512Vnni => (
            128 * p + 64 * (t / 4) + 8 * r + 4 * (t % 2) + c,
            4 * ((t / 2) % 2) as u32,
        ),
    }
}

/// One [`Block`] for `kernel` from the same stored block of eight consecutive rows.
pub(super) fn interleave(kernel: Kernel, rows: [&[u8]; ROWS]) -> Block {
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
                    out.qs[kernel.nibble_at(p, t, r, c)] = (lo & 15) | ((hi & 15) << 4);
                    let (at, shift) = high_at(kernel, p, t, r, c);
                    out.high[at] |= ((lo >> 4) << shift) | ((hi >> 4) << (shift + 2));
                }
            }
        }
    }
    out
}

/// The AVX2 and AVX-VNNI kernel ([`Body256`]): per 16-value group, the step's sums of a
/// row's products starting from the activation's `-32 · Σx` (AVX2: two 16-bit lanes, exact
/// after wrapping, see the module docs; AVX-VNNI: one 32-bit lane, at most 16·32·127 =
/// 65,024 in magnitude), times the group's scale.
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
        // SAFETY: every read is within a block (offsets below 1024 / 512 / 128) or an
        // activation block (below 256), and the caller guarantees the CPU features.
        unsafe {
            let m4 = _mm256_set1_epi8(0x0F);
            let m30 = _mm256_set1_epi8(0x30);
            let mut acc = [_mm256_setzero_ps(); R];
            for (b, blk) in w.iter().enumerate() {
                let d = _mm256_loadu_ps(blk.d.as_ptr());
                let mut sums = [_mm256_setzero_si256(); R];
                for p in 0..4 {
                    super::shared::prefetch_ahead(blk, p);
                    // One 16-value group of each row at a time (group 4p + u from the low
                    // nibbles, 4p + 2 + u from the high ones): R accumulators stay in
                    // registers even at R = 4; the nibble bytes are re-read from L1 instead.
                    for u in 0..2 {
                        for high_nibbles in [false, true] {
                            let group = 4 * p + 2 * usize::from(high_nibbles) + u;
                            let sc = D::load_i8_scales(blk.scales.as_ptr().add(8 * group));
                            let mut group_acc: [__m256i; R] =
                                std::array::from_fn(|i| D::q6k_start(&rows[i][b], group));
                            for t in 4 * u..4 * u + 4 {
                                let raw =
                                    _mm256_load_si256(blk.qs.as_ptr().add(256 * p + 32 * t).cast());
                                let hb = _mm256_load_si256(
                                    blk.high.as_ptr().add(128 * p + 32 * (t / 2)).cast(),
                                );
                                // The two high bits of this value to bits 4-5 (see `high_at`).
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
                                    group_acc[i] = D::dot4(group_acc[i], q, x);
                                }
                            }
                            for i in 0..R {
                                sums[i] = _mm256_add_epi32(sums[i], D::scale(group_acc[i], sc));
                            }
                        }
                    }
                }
                for i in 0..R {
                    let dy = _mm256_set1_ps(rows[i][b].d);
                    acc[i] =
                        _mm256_fmadd_ps(_mm256_mul_ps(d, dy), _mm256_cvtepi32_ps(sums[i]), acc[i]);
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
        // SAFETY: every read is within a block (offsets below 1024 / 512 / 128) or an
        // activation block (below 256, and 32 lane offsets), and the caller guarantees the
        // CPU features. Blocks are 32-byte aligned: the 64-byte loads are unaligned ones.
        unsafe {
            let m4 = _mm512_set1_epi8(0x0F);
            let m30 = _mm512_set1_epi8(0x30);
            // Lane 2r and 2r + 1 take row r's `d`.
            let twice = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
            let mut acc = [_mm512_setzero_ps(); R];
            for (b, blk) in w.iter().enumerate() {
                let d = _mm512_permutexvar_ps(
                    twice,
                    _mm512_castps256_ps512(_mm256_loadu_ps(blk.d.as_ptr())),
                );
                let mut sums = [_mm512_setzero_si512(); R];
                for p in 0..4 {
                    super::shared::prefetch_ahead(blk, p);
                    for u in 0..2 {
                        let hb = _mm512_loadu_si512(blk.high.as_ptr().add(128 * p + 64 * u).cast());
                        for high_nibbles in [false, true] {
                            let group = 4 * p + 2 * usize::from(high_nibbles) + u;
                            // Row r's scale in the low half of lanes 2r and 2r + 1.
                            let s = _mm_loadl_epi64(blk.scales.as_ptr().add(8 * group).cast());
                            let sc = _mm512_cvtepu16_epi32(_mm256_cvtepi8_epi16(
                                _mm_unpacklo_epi8(s, s),
                            ));
                            let mut acc32: [__m512i; R] = std::array::from_fn(|i| {
                                let offsets = rows[i][b].lane_offsets.as_ptr().add(2 * group);
                                _mm512_set1_epi64(offsets.cast::<i64>().read_unaligned())
                            });
                            for half in 2 * u..2 * u + 2 {
                                let raw = _mm512_loadu_si512(
                                    blk.qs.as_ptr().add(256 * p + 64 * half).cast(),
                                );
                                // The two high bits of this value to bits 4-5 (see `high_at`).
                                let top = match (half % 2, high_nibbles) {
                                    (0, false) => _mm512_slli_epi16::<4>(hb),
                                    (0, true) => _mm512_slli_epi16::<2>(hb),
                                    (_, false) => hb,
                                    (_, true) => _mm512_srli_epi16::<2>(hb),
                                };
                                let low = if high_nibbles {
                                    _mm512_srli_epi16::<4>(raw)
                                } else {
                                    raw
                                };
                                let q = _mm512_or_si512(
                                    _mm512_and_si512(low, m4),
                                    _mm512_and_si512(top, m30),
                                );
                                let at = 64 * p + 32 * usize::from(high_nibbles) + 8 * half;
                                for i in 0..R {
                                    let x = rows[i][b].qs.as_ptr().add(at).cast::<i64>();
                                    let x = _mm512_set1_epi64(x.read_unaligned());
                                    acc32[i] = _mm512_dpbusd_epi32(acc32[i], q, x);
                                }
                            }
                            for i in 0..R {
                                sums[i] = _mm512_dpwssd_epi32(sums[i], acc32[i], sc);
                            }
                        }
                    }
                }
                for i in 0..R {
                    let dy = _mm512_set1_ps(rows[i][b].d);
                    acc[i] =
                        _mm512_fmadd_ps(_mm512_mul_ps(d, dy), _mm512_cvtepi32_ps(sums[i]), acc[i]);
                }
            }
            for i in 0..R {
                let mut lanes = [0f32; 2 * ROWS];
                _mm512_storeu_ps(lanes.as_mut_ptr(), acc[i]);
                for r in 0..ROWS {
                    dst[i][r] = lanes[2 * r] + lanes[2 * r + 1];
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
            super::super::shared::test_weights(7, 16, 512),
            (16, 512),
            &dev,
        )?;
        let q = QTensor::quantize(&w, GgmlDType::Q6K)?;
        let data = q.data()?;
        let stored = q.dequantize(&dev)?.to_vec2::<f32>()?;
        for (kernel, (r, row)) in Kernel::ALL
            .into_iter()
            .flat_map(|k| stored.iter().enumerate().map(move |row| (k, row)))
        {
            let (group, rr) = (r / ROWS, r % ROWS);
            for (i, &v) in row.iter().enumerate() {
                let (b, i) = (i / 256, i % 256);
                let blk = interleave(
                    kernel,
                    std::array::from_fn(|k| {
                        let at = ((group * ROWS + k) * 2 + b) * STORED_BYTES;
                        &data[at..at + STORED_BYTES]
                    }),
                );
                let (p, within) = (i / 64, i % 64);
                let (high_nibble, l) = (within >= 32, within % 32);
                let (t, c) = (l / 4, l % 4);
                let byte = blk.qs[kernel.nibble_at(p, t, rr, c)];
                let low4 = if high_nibble { byte >> 4 } else { byte & 15 };
                let (at, shift) = high_at(kernel, p, t, rr, c);
                let shift = shift + if high_nibble { 2 } else { 0 };
                let top2 = (blk.high[at] >> shift) & 3;
                let q = (low4 | (top2 << 4)) as f32 - 32.0;
                let ours = blk.d[rr] * blk.scales[8 * (i / 16) + rr] as f32 * q;
                anyhow::ensure!(
                    (ours - v).abs() <= 1e-6,
                    "{kernel:?} row {r} col {i}: {ours} vs {v}"
                );
            }
        }
        Ok(())
    }
}
