//! Pillow's `Image.resize(size, Image.BICUBIC)`, bit for bit, on 8-bit RGB.
//!
//! The reference resizes with Pillow, so this is a port of its `libImaging/Resample.c`
//! path for 8-bit images: a separable convolution (one pass per axis, in Pillow 13's
//! order, see `vertical_first`) with
//! the Keys cubic (`a = -0.5`, support 2) stretched by the downscale factor, which is
//! what antialiases a downscale. Weights are computed in f64 exactly as Pillow does,
//! normalized to sum 1, then turned into 22-bit fixed point; each pass accumulates in
//! i32 and rounds and clamps to u8. Reproducing those steps (not just "a bicubic")
//! is what makes the output identical to the reference, including at the borders,
//! where Pillow drops the taps outside the image and renormalizes.

use image::RgbImage;

/// Bits of fraction in Pillow's fixed-point weights (`32 - 8 - 2`).
const PRECISION_BITS: u32 = 32 - 8 - 2;
/// Half a unit in the last place, Pillow's rounding bias.
const ROUND_BIAS: i32 = 1 << (PRECISION_BITS - 1);
/// Pillow's bicubic support radius (taps reach 2 source pixels at scale 1).
const BICUBIC_SUPPORT: f64 = 2.0;
/// RGB.
const CHANNELS: usize = 3;

/// Pillow's `bicubic_filter`: the Keys cubic with `a = -0.5`.
fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// The taps of one output pixel: first source index and fixed-point weights.
struct Taps {
    /// First source pixel of each output pixel.
    start: Vec<usize>,
    /// Number of taps of each output pixel (≤ `ksize`).
    len: Vec<usize>,
    /// `out_size * ksize` weights, row `i` holding output pixel `i`'s taps.
    weights: Vec<i32>,
    /// Stride of `weights`.
    ksize: usize,
}

impl Taps {
    /// Pillow's `precompute_coeffs` + `normalize_coeffs_8bpc` for a full-image box.
    fn new(in_size: usize, out_size: usize) -> Self {
        // Pillow computes `(double)(in1 - in0) / outSize` with a float box; sides are
        // below 2^24, so the float is exact.
        let scale = in_size as f64 / out_size as f64;
        let filterscale = scale.max(1.0);
        let support = BICUBIC_SUPPORT * filterscale;
        let ksize = support.ceil() as usize * 2 + 1;
        let mut start = Vec::with_capacity(out_size);
        let mut len = Vec::with_capacity(out_size);
        let mut weights = vec![0i32; out_size * ksize];
        let mut row = vec![0f64; ksize];
        let inv = 1.0 / filterscale;
        for xx in 0..out_size {
            let center = (xx as f64 + 0.5) * scale;
            // C's `(int)` truncates toward zero; the clamps follow.
            let xmin = ((center - support + 0.5) as i64).max(0);
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64);
            let n = (xmax - xmin).max(0) as usize;
            let n = n.min(ksize);
            let mut total = 0.0;
            for (x, w) in row.iter_mut().enumerate().take(n) {
                *w = bicubic(((x as i64 + xmin) as f64 - center + 0.5) * inv);
                total += *w;
            }
            let dst = &mut weights[xx * ksize..xx * ksize + n];
            for (d, &w) in dst.iter_mut().zip(&row[..n]) {
                let w = if total != 0.0 { w / total } else { w };
                let scaled = w * f64::from(1u32 << PRECISION_BITS);
                *d = if w < 0.0 {
                    (scaled - 0.5) as i32
                } else {
                    (scaled + 0.5) as i32
                };
            }
            start.push(xmin as usize);
            len.push(n);
        }
        Self {
            start,
            len,
            weights,
            ksize,
        }
    }

    fn of(&self, i: usize) -> (usize, &[i32]) {
        let k = &self.weights[i * self.ksize..i * self.ksize + self.len[i]];
        (self.start[i], k)
    }

    /// The same taps as windows of exactly `ksize` pixels: a window that would run
    /// past the end starts earlier, its weights shifted right and zero-padded. Zero
    /// weights add exactly 0 to the integer sums, so results are unchanged, and a
    /// fixed trip count lets the compiler unroll the inner loop. `None` when the
    /// input is narrower than a window.
    fn fixed_windows(&self, in_size: usize) -> Option<(Vec<usize>, Vec<i32>)> {
        let k = self.ksize;
        let last_start = in_size.checked_sub(k)?;
        let mut starts = Vec::with_capacity(self.start.len());
        let mut weights = vec![0i32; self.start.len() * k];
        for (i, row) in weights.chunks_exact_mut(k).enumerate() {
            let (start, taps) = self.of(i);
            let fixed_start = start.min(last_start);
            let shift = start - fixed_start;
            row[shift..shift + taps.len()].copy_from_slice(taps);
            starts.push(fixed_start);
        }
        Some((starts, weights))
    }
}

/// Pillow's `clip8`: a fixed-point sum to a byte, rounding already biased in.
#[inline(always)]
fn clip8(v: i32) -> u8 {
    if v >= (1 << PRECISION_BITS << 8) {
        255
    } else if v <= 0 {
        0
    } else {
        (v >> PRECISION_BITS) as u8
    }
}

/// Resizes an RGB image to `width × height` exactly as Pillow's
/// `Image.resize((width, height), Image.BICUBIC)` does (no `reducing_gap`).
///
/// Cost: O((w_out · h_in + w_out · h_out) · taps) integer multiply-adds (the first
/// pass's rows depend on the order, see `vertical_first`), taps ≈ 4 × the downscale
/// factor + 1, and one intermediate buffer. The same size returns a copy, as Pillow
/// does; a zero-sized source or target gives a black image of the target size.
pub fn resize_bicubic(src: &RgbImage, width: u32, height: u32) -> RgbImage {
    let (in_w, in_h) = (src.width() as usize, src.height() as usize);
    let (out_w, out_h) = (width as usize, height as usize);
    if out_w == 0 || out_h == 0 || in_w == 0 || in_h == 0 {
        return RgbImage::new(width, height);
    }
    let pixels = resize_rgb(
        src.as_raw(),
        (in_w, in_h),
        (out_w, out_h),
        default_threads(),
    );
    // Invariant: resize_rgb returns exactly out_w * out_h * 3 bytes.
    RgbImage::from_raw(width, height, pixels).unwrap_or_else(|| RgbImage::new(width, height))
}

/// [`resize_bicubic`] on a raw interleaved RGB buffer; returns `out_w * out_h * 3` bytes.
/// Rows of each pass are split across up to `threads` threads (1: the calling thread
/// only); the result does not depend on it.
pub(crate) fn resize_rgb(
    src: &[u8],
    (in_w, in_h): (usize, usize),
    (out_w, out_h): (usize, usize),
    threads: usize,
) -> Vec<u8> {
    use std::borrow::Cow;
    if (in_w, in_h) == (out_w, out_h) {
        return src.to_vec();
    }
    let need_horizontal = in_w != out_w;
    let need_vertical = in_h != out_h;
    let vert = Taps::new(in_h, out_h);
    let horiz = Taps::new(in_w, out_w);
    if vertical_first((in_w, in_h), (out_w, out_h)) {
        let mut tmp = vec![0u8; in_w * out_h * CHANNELS];
        vertical_pass(src, in_w, 0, &vert, &mut tmp, threads);
        if !need_horizontal {
            return tmp;
        }
        let mut out = vec![0u8; out_w * out_h * CHANNELS];
        horizontal_pass(&tmp, in_w, 0..out_h, &horiz, out_w, &mut out, threads);
        return out;
    }
    // Horizontal first, and only over the source rows the vertical pass will read.
    let (rows, row_offset) = if need_horizontal {
        let first = vert.start[0];
        let last = vert.start[out_h - 1] + vert.len[out_h - 1];
        let mut tmp = vec![0u8; (last - first) * out_w * CHANNELS];
        horizontal_pass(src, in_w, first..last, &horiz, out_w, &mut tmp, threads);
        (Cow::Owned(tmp), first)
    } else {
        (Cow::Borrowed(src), 0)
    };
    if !need_vertical {
        return rows.into_owned();
    }
    let mut out = vec![0u8; out_w * out_h * CHANNELS];
    vertical_pass(&rows, out_w, row_offset, &vert, &mut out, threads);
    out
}

/// Pillow 13's choice of pass order (`ImagingResampleInner`): the vertical pass goes
/// first when the height shrinks by more than twice as many pixels as the width does.
/// The two orders round differently, so this decides bit-exactness. Pillow 12 and
/// older always ran the horizontal pass first, so against them the rare
/// vertical-first sizes differ by a few grey levels; the reference here is the
/// Pillow 13.0 that made the fixtures.
fn vertical_first((in_w, in_h): (usize, usize), (out_w, out_h): (usize, usize)) -> bool {
    let shrink_h = in_h as i64 - out_h as i64;
    let shrink_w = in_w as i64 - out_w as i64;
    shrink_h > 0 && shrink_h > shrink_w * 2
}

/// The horizontal pass over source rows `rows`, into `dst` (`rows.len()` rows of
/// `out_w` pixels). Rows are independent and split across threads.
#[inline(never)]
fn horizontal_pass(
    src: &[u8],
    in_w: usize,
    rows: std::ops::Range<usize>,
    taps: &Taps,
    out_w: usize,
    dst: &mut [u8],
    threads: usize,
) {
    let in_stride = in_w * CHANNELS;
    let out_stride = out_w * CHANNELS;
    let fixed = taps.fixed_windows(in_w);
    let first_row = rows.start;
    parallel_rows(dst, out_stride, threads, |row0, chunk| {
        for (i, dst_row) in chunk.chunks_exact_mut(out_stride).enumerate() {
            let y = first_row + row0 + i;
            let src_row = &src[y * in_stride..(y + 1) * in_stride];
            match &fixed {
                Some((starts, weights)) => match taps.ksize {
                    5 => row_fixed::<5>(src_row, starts, weights, dst_row),
                    7 => row_fixed::<7>(src_row, starts, weights, dst_row),
                    9 => row_fixed::<9>(src_row, starts, weights, dst_row),
                    11 => row_fixed::<11>(src_row, starts, weights, dst_row),
                    13 => row_fixed::<13>(src_row, starts, weights, dst_row),
                    _ => row_taps(src_row, taps, dst_row),
                },
                None => row_taps(src_row, taps, dst_row),
            }
        }
    });
}

/// One output row from windows of exactly `K` taps (see [`Taps::fixed_windows`]).
#[inline(always)]
fn row_fixed<const K: usize>(
    src_row: &[u8],
    starts: &[usize],
    weights: &[i32],
    dst_row: &mut [u8],
) {
    let windows = starts.iter().zip(weights.chunks_exact(K));
    for (out_px, (&start, k)) in dst_row.chunks_exact_mut(CHANNELS).zip(windows) {
        let px = &src_row[start * CHANNELS..(start + K) * CHANNELS];
        let (mut r, mut g, mut b) = (ROUND_BIAS, ROUND_BIAS, ROUND_BIAS);
        for t in 0..K {
            r += i32::from(px[t * CHANNELS]) * k[t];
            g += i32::from(px[t * CHANNELS + 1]) * k[t];
            b += i32::from(px[t * CHANNELS + 2]) * k[t];
        }
        out_px[0] = clip8(r);
        out_px[1] = clip8(g);
        out_px[2] = clip8(b);
    }
}

/// One output row from Pillow's variable-length taps (any size, any width).
fn row_taps(src_row: &[u8], taps: &Taps, dst_row: &mut [u8]) {
    for (x, out_px) in dst_row.chunks_exact_mut(CHANNELS).enumerate() {
        let (start, k) = taps.of(x);
        let px = &src_row[start * CHANNELS..(start + k.len()) * CHANNELS];
        let (mut r, mut g, mut b) = (ROUND_BIAS, ROUND_BIAS, ROUND_BIAS);
        for (p, &w) in px.chunks_exact(CHANNELS).zip(k) {
            r += i32::from(p[0]) * w;
            g += i32::from(p[1]) * w;
            b += i32::from(p[2]) * w;
        }
        out_px[0] = clip8(r);
        out_px[1] = clip8(g);
        out_px[2] = clip8(b);
    }
}

/// Output pixels below which a pass runs on the calling thread: spawning costs tens
/// of microseconds, a 256×256 pass about a millisecond.
const PARALLEL_MIN_BYTES: usize = 256 * 256 * CHANNELS;
/// Most threads a pass uses by default; the passes are memory-bound beyond a few cores.
pub(crate) const MAX_DEFAULT_THREADS: usize = 8;

/// The default thread count: the available cores, at most [`MAX_DEFAULT_THREADS`].
pub(crate) fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_DEFAULT_THREADS)
}

/// Runs `f(first_row, rows)` over `dst` split into contiguous runs of whole rows of
/// `stride` bytes, one per thread (scoped threads, no pool; the caller takes the
/// first run). Every row is computed by the same code whatever the split, so results
/// do not depend on it.
fn parallel_rows<F>(dst: &mut [u8], stride: usize, threads: usize, f: F)
where
    F: Fn(usize, &mut [u8]) + Sync,
{
    let n_rows = dst.len() / stride.max(1);
    let threads = threads.min(n_rows);
    if threads <= 1 || dst.len() < PARALLEL_MIN_BYTES {
        f(0, dst);
        return;
    }
    let rows_per_thread = n_rows.div_ceil(threads);
    std::thread::scope(|scope| {
        let f = &f;
        let mut chunks = dst.chunks_mut(rows_per_thread * stride).enumerate();
        // The calling thread takes the first chunk itself.
        let first = chunks.next();
        for (i, chunk) in chunks {
            scope.spawn(move || f(i * rows_per_thread, chunk));
        }
        if let Some((_, chunk)) = first {
            f(0, chunk);
        }
    });
}

/// The vertical pass: `dst` rows from rows of `src` (`width` pixels each, the first
/// being source row `row_offset`). Rows are independent and split across threads.
#[inline(never)]
fn vertical_pass(
    src: &[u8],
    width: usize,
    row_offset: usize,
    taps: &Taps,
    dst: &mut [u8],
    threads: usize,
) {
    let stride = width * CHANNELS;
    parallel_rows(dst, stride, threads, |row0, chunk| {
        // Row-at-a-time accumulation so the inner loop is a straight multiply-add over
        // a row, which the compiler vectorizes.
        let mut acc = vec![0i32; stride];
        for (i, dst_row) in chunk.chunks_exact_mut(stride).enumerate() {
            let (start, k) = taps.of(row0 + i);
            acc.fill(ROUND_BIAS);
            for (t, &w) in k.iter().enumerate() {
                let row = start + t - row_offset;
                let src_row = &src[row * stride..(row + 1) * stride];
                for (a, &p) in acc.iter_mut().zip(src_row) {
                    *a += i32::from(p) * w;
                }
            }
            for (d, &a) in dst_row.iter_mut().zip(&acc) {
                *d = clip8(a);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one_in_fixed_point_and_stay_in_bounds() {
        for (i, o) in [(300, 256), (1400, 1056), (60, 32), (7, 64), (1920, 1504)] {
            let taps = Taps::new(i, o);
            for x in 0..o {
                let (start, k) = taps.of(x);
                assert!(start + k.len() <= i);
                let sum: i32 = k.iter().sum();
                assert!(
                    (sum - (1 << PRECISION_BITS)).abs() <= k.len() as i32,
                    "{i}->{o} at {x}: {sum}"
                );
            }
        }
    }

    #[test]
    fn fixed_windows_give_the_same_rows_as_variable_taps() {
        let mut state = 12345u32;
        for (i, o) in [(300, 256), (97, 64), (20, 64), (640, 32), (9, 4), (13, 60)] {
            let src: Vec<u8> = (0..i * CHANNELS)
                .map(|_| {
                    state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (state >> 16) as u8
                })
                .collect();
            let taps = Taps::new(i, o);
            let mut want = vec![0u8; o * CHANNELS];
            row_taps(&src, &taps, &mut want);
            let mut got = vec![0u8; o * CHANNELS];
            horizontal_pass(&src, i, 0..1, &taps, o, &mut got, 1);
            assert_eq!(got, want, "{i}->{o}");
        }
    }

    /// Pillow's algorithm written the plain way: one output pixel at a time, no
    /// windows, no threads.
    fn serial_reference(
        src: &[u8],
        (in_w, in_h): (usize, usize),
        (out_w, out_h): (usize, usize),
    ) -> Vec<u8> {
        let (horiz, vert) = (Taps::new(in_w, out_w), Taps::new(in_h, out_h));
        let h_pass = |img: &[u8], w: usize, h: usize| {
            let mut out = vec![0u8; out_w * h * CHANNELS];
            for y in 0..h {
                let row = &img[y * w * CHANNELS..(y + 1) * w * CHANNELS];
                row_taps(
                    row,
                    &horiz,
                    &mut out[y * out_w * CHANNELS..(y + 1) * out_w * CHANNELS],
                );
            }
            out
        };
        let v_pass = |img: &[u8], w: usize| {
            let mut out = vec![0u8; w * out_h * CHANNELS];
            for y in 0..out_h {
                let (start, k) = vert.of(y);
                for i in 0..w * CHANNELS {
                    let sum = k.iter().enumerate().fold(ROUND_BIAS, |acc, (t, &wt)| {
                        acc + i32::from(img[(start + t) * w * CHANNELS + i]) * wt
                    });
                    out[y * w * CHANNELS + i] = clip8(sum);
                }
            }
            out
        };
        if vertical_first((in_w, in_h), (out_w, out_h)) {
            h_pass(&v_pass(src, in_w), in_w, out_h)
        } else {
            v_pass(&h_pass(src, in_w, in_h), out_w)
        }
    }

    #[test]
    fn threaded_windowed_resize_equals_the_serial_algorithm() {
        let mut state = 99u32;
        // Large enough to be split across threads; both pass orders.
        for ((iw, ih), (ow, oh)) in [
            ((700, 500), (416, 320)),
            ((500, 700), (480, 200)),
            ((300, 260), (640, 352)),
        ] {
            let src: Vec<u8> = (0..iw * ih * CHANNELS)
                .map(|_| {
                    state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (state >> 16) as u8
                })
                .collect();
            assert!(ow * oh * CHANNELS >= PARALLEL_MIN_BYTES);
            let want = serial_reference(&src, (iw, ih), (ow, oh));
            // Splits that do and do not divide the rows evenly, whatever this machine has.
            for threads in [1, 3, 4] {
                let got = resize_rgb(&src, (iw, ih), (ow, oh), threads);
                assert_eq!(got, want, "{iw}x{ih} -> {ow}x{oh} on {threads} threads");
            }
        }
    }

    #[test]
    fn constant_image_stays_constant() {
        let src = vec![137u8; 50 * 30 * 3];
        for (w, h) in [(32, 32), (96, 64), (50, 64), (64, 30)] {
            let out = resize_rgb(&src, (50, 30), (w, h), 2);
            assert!(out.iter().all(|&v| v == 137), "{w}x{h}");
        }
    }
}
