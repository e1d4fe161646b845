//! What the eight-row layouts and their kernels share: the block shapes, the quantized
//! activation rows and the prefetch hint.

/// Values per quantized block (GGML's `QK_K`).
pub(super) const QK_K: usize = 256;
/// Rows laid out together.
pub(super) const ROWS: usize = 8;
/// Activation rows one kernel call multiplies against the same eight weight rows.
pub(super) const TILE: usize = 4;
/// How many blocks ahead of the one being read the kernels prefetch.
const PREFETCH_BLOCKS: usize = 4;

/// The kernel family a matrix is laid out for: each reads the weights in the order its
/// widest integer dot product takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// 256-bit `maddubs` (AVX2, FMA, F16C): one load holds four weights of each row.
    Avx2,
    /// 256-bit `vpdpbusd` (AVX-VNNI, without AVX-512: Intel Alder Lake and later desktops
    /// and laptops): the AVX2 layout, one instruction where AVX2 takes two.
    AvxVnni,
    /// 512-bit `vpdpbusd` (AVX-512 F/BW/VL and VNNI): one load holds eight weights of
    /// each row, two four-weight groups side by side.
    Avx512Vnni,
}

impl Kernel {
    /// Every family, for the tests that check each on the CPUs that can run it.
    #[cfg(test)]
    pub(crate) const ALL: [Kernel; 3] = [Kernel::Avx2, Kernel::AvxVnni, Kernel::Avx512Vnni];

    /// Whether this CPU has every instruction the family's kernels use.
    pub(crate) fn runs_here(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma") && has!("f16c");
            match self {
                Kernel::Avx2 => avx2,
                Kernel::AvxVnni => avx2 && has!("avxvnni"),
                Kernel::Avx512Vnni => {
                    avx2 && has!("avx512f")
                        && has!("avx512bw")
                        && has!("avx512vl")
                        && has!("avx512vnni")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = self;
            false
        }
    }

    /// How `bench` names the kernels.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kernel::Avx2 => "AVX2",
            Kernel::AvxVnni => "AVX-VNNI",
            Kernel::Avx512Vnni => "AVX-512 VNNI",
        }
    }

    /// Where, among a block's 1,024 nibble bytes, byte `c` of four-byte group `t` of
    /// row `r` in sub-block pair `p` lies: AVX2 (and AVX-VNNI) puts group `t` of the eight
    /// rows in one 32-byte run; AVX-512 puts groups `2w` and `2w + 1` of each row next to each other
    /// in one 64-byte run (32-bit lane `2r + t % 2` of a load holds row `r`'s group `t`).
    pub(super) fn nibble_at(self, p: usize, t: usize, r: usize, c: usize) -> usize {
        match self {
            Kernel::Avx2 | Kernel::AvxVnni => 256 * p + 32 * t + 4 * r + c,
            Kernel::Avx512Vnni => 256 * p + 64 * (t / 2) + 8 * r + 4 * (t % 2) + c,
        }
    }
}

/// One activation block quantized to Q8_K, with the sums the kernels fold in.
#[repr(C, align(32))]
#[derive(Clone, Copy)]
pub(super) struct Q8Block {
    pub(super) qs: [i8; QK_K],
    pub(super) d: f32,
    /// Q4_K mins: sub-block pair `p`, the sums of 32-value sub-blocks `2p` (low 16 bits)
    /// and `2p + 1` (high 16 bits).
    pub(super) pair_sums: [i32; 4],
    /// Q6_K's `-32` offset: 16-value group `j`, `-32 ×` the sum of its values at
    /// positions 0 and 1 mod 4 (low 16 bits) and 2 and 3 mod 4 (high 16 bits), the two
    /// 16-bit lanes a row's products of four consecutive values land in.
    pub(super) offsets: [i32; 16],
    /// The same offsets for the AVX-512 kernel's 32-bit lanes: group `j`, `-32 ×` the
    /// sum of its values at positions 0–3 and 8–11 (`2j`) and 4–7 and 12–15 (`2j + 1`),
    /// the values row `r`'s lanes `2r` and `2r + 1` take.
    pub(super) lane_offsets: [i32; 32],
}

pub(super) const Q8_ZERO: Q8Block = Q8Block {
    qs: [0; QK_K],
    d: 0.0,
    pair_sums: [0; 4],
    offsets: [0; 16],
    lane_offsets: [0; 32],
};

/// Two 16-bit values in one 32-bit lane, `lo` first.
fn pack16(lo: i32, hi: i32) -> i32 {
    (lo & 0xFFFF) | (hi << 16)
}

/// A type of quantized activation block (256 values) the kernels read: how a row of
/// whole blocks is quantized. Implementations are `#[inline(always)]`, so
/// [`quantize_row`] compiles each with its own target features.
pub(super) trait Activation: Copy + Send + Sync {
    /// A block of zeros.
    const ZERO: Self;
    /// Quantize `xs` (whole blocks) into `out`.
    fn quantize(xs: &[f32], out: &mut [Self]);

    /// [`quantize`](Self::quantize) written with AVX2 intrinsics where the family has
    /// them: the same bytes and scales. The compiler does not vectorize the portable
    /// loop's running maximum (a chain of scalar `max`) or its saturating casts (one byte
    /// inserted at a time).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn quantize_avx2(xs: &[f32], out: &mut [Self]) {
        Self::quantize(xs, out)
    }
}

/// Quantize one activation row of whole blocks to `A`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C (compiled for them so the intrinsics and the
/// rounding are inlined and the loops vectorized).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quantize_row<A: Activation>(xs: &[f32], out: &mut [A]) {
    // SAFETY: this function's features, which the caller guarantees.
    unsafe { A::quantize_avx2(xs, out) }
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn quantize_row<A: Activation>(xs: &[f32], out: &mut [A]) {
    A::quantize(xs, out)
}

/// Q8_K, GGML's `quantize_row_q8_K` as candle does it: values in `-127..=127`, rounded
/// half away from zero.
impl Activation for Q8Block {
    const ZERO: Self = Q8_ZERO;

    #[inline(always)]
    fn quantize(xs: &[f32], out: &mut [Self]) {
        quantize_row_generic(xs, out)
    }
}

#[inline(always)]
fn quantize_row_generic(xs: &[f32], out: &mut [Q8Block]) {
    for (x, y) in xs.chunks_exact(QK_K).zip(out.iter_mut()) {
        let (mut max, mut amax) = (0f32, 0f32);
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            *y = Q8_ZERO;
            continue;
        }
        let iscale = -127f32 / max;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = (iscale * v).round().clamp(-128.0, 127.0) as i8;
        }
        // Per 16-value group: the sums at positions 0, 1 and 2, 3 mod 4.
        let mut low = [0i32; 16];
        let mut high = [0i32; 16];
        for (j, group) in y.qs.chunks_exact(16).enumerate() {
            for four in group.chunks_exact(4) {
                low[j] += four[0] as i32 + four[1] as i32;
                high[j] += four[2] as i32 + four[3] as i32;
            }
        }
        for p in 0..4 {
            let group = |j: usize| low[j] + high[j];
            y.pair_sums[p] = pack16(
                group(4 * p) + group(4 * p + 1),
                group(4 * p + 2) + group(4 * p + 3),
            );
        }
        for j in 0..16 {
            y.offsets[j] = pack16(-32 * low[j], -32 * high[j]);
        }
        for (k, lane) in y.lane_offsets.iter_mut().enumerate() {
            let (j, h) = (k / 2, k % 2);
            let at = |start: usize| &y.qs[16 * j + start..16 * j + start + 4];
            let sum: i32 = at(4 * h)
                .iter()
                .chain(at(8 + 4 * h))
                .map(|&v| v as i32)
                .sum();
            *lane = -32 * sum;
        }
        y.d = 1.0 / iscale;
    }
}

/// Ask for quarter `part` of the block `PREFETCH_BLOCKS` after `block` (a hint: past
/// the end of the matrix it does nothing).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn prefetch_ahead<B>(block: &B, part: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    let lines = std::mem::size_of::<B>().div_ceil(64).div_ceil(4);
    let ahead = (block as *const B)
        .cast::<i8>()
        .wrapping_add(PREFETCH_BLOCKS * std::mem::size_of::<B>() + 64 * lines * part);
    for line in 0..lines {
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * line)) };
    }
}

#[cfg(test)]
/// `n × k` weights whose scale and offset change every 16 values, so the sub-blocks
/// of a block get different scales and mins (uniform weights would give them all
/// the same, and a kernel that mixed them up would pass).
pub(super) fn test_weights(seed: u64, n: usize, k: usize) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n * k);
    for _ in 0..n * k / 16 {
        let amp = rng.random_range(0.005f32..0.2);
        let offset = rng.random_range(-0.1f32..0.1);
        out.extend((0..16).map(|_| offset + rng.random_range(-amp..amp)));
    }
    out
}
