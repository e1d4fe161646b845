//! Rescale, normalize and patchify in one pass over the resized RGB image.
//!
//! The reference computes `((byte as f64 * rescale_factor) as f32 - mean) / std` in f32,
//! then reorders `(C, H, W)` into rows of `(C, T, ph, pw)` ordered by
//! `(block_h, block_w, merge_h, merge_w)`, repeating each patch `T` times for the
//! temporal axis. A byte has 256 values, so the arithmetic becomes a per-channel table
//! with the reference's exact f32 results, and the reorder writes each output row once.

use super::config::PreprocessConfig;

/// Per-channel lookup: byte → normalized f32, exactly as the reference's f64 rescale,
/// f32 cast, f32 subtract and f32 divide.
pub(crate) fn normalization_table(cfg: &PreprocessConfig) -> [[f32; 256]; 3] {
    let mut lut = [[0f32; 256]; 3];
    for (c, table) in lut.iter_mut().enumerate() {
        for (v, out) in table.iter_mut().enumerate() {
            let rescaled = (v as f64 * cfg.rescale_factor) as f32;
            *out = (rescaled - cfg.image_mean[c]) / cfg.image_std[c];
        }
    }
    lut
}

/// Patch geometry of one image.
pub(crate) struct Grid {
    /// Patch rows.
    pub h: usize,
    /// Patch columns.
    pub w: usize,
}

/// Writes `pixel_values` for an interleaved RGB image of `width × height` (both
/// multiples of `patch * merge`): `grid.h * grid.w` rows of `3 * T * patch²` floats.
///
/// The output is appended in its final order, so it is never zero-filled first (at
/// 1,280 tokens it is 30 MB, and a memset of it cost a tenth of the whole step).
#[inline(never)]
pub(crate) fn patchify(
    rgb: &[u8],
    width: usize,
    height: usize,
    cfg: &PreprocessConfig,
) -> (Vec<f32>, Grid) {
    let p = cfg.patch_size;
    let m = cfg.merge_size;
    let grid = Grid {
        h: height / p,
        w: width / p,
    };
    let frame_len = p * p; // one (channel, frame) block of a row
    let lut = normalization_table(cfg);
    let mut out = Vec::with_capacity(grid.h * grid.w * cfg.patch_dim());
    for bh in 0..grid.h / m {
        for bw in 0..grid.w / m {
            for mh in 0..m {
                for mw in 0..m {
                    let y0 = (bh * m + mh) * p;
                    let x0 = (bw * m + mw) * p;
                    for (c, table) in lut.iter().enumerate() {
                        let frame_start = out.len();
                        for y in y0..y0 + p {
                            let src = &rgb[(y * width + x0) * 3..(y * width + x0 + p) * 3];
                            out.extend(src.chunks_exact(3).map(|px| table[usize::from(px[c])]));
                        }
                        // The temporal axis: a still image is the same frame T times.
                        for _ in 1..cfg.temporal_patch_size {
                            out.extend_from_within(frame_start..frame_start + frame_len);
                        }
                    }
                }
            }
        }
    }
    (out, grid)
}
