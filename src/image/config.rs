//! The preprocessing settings: patch geometry, visual-token budget, normalization, and
//! the limits that keep untrusted images from exhausting memory.
//!
//! Two steps, as for the model config: [`RawPreprocessorConfig`] mirrors a model's
//! `preprocessor_config.json` (both the transformers 5.x `size.shortest_edge` /
//! `size.longest_edge` layout and the legacy `min_pixels` / `max_pixels` one);
//! [`PreprocessConfig`] is the validated, resolved value the pipeline uses.

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Sightline's default visual-token budget, used when a model ships no
/// `preprocessor_config.json`.
///
/// 1,280 tokens (`1280 * 32 * 32` pixels) holds a 1920×1080 screenshot at 1504×832 (78 %
/// of its linear size, 1,222 tokens), where 12-px UI text stays legible to the vision
/// tower, while keeping the per-turn prefill near the length of the rest of the prompt.
/// Qwen3-VL's own config allows 16,384 tokens, which would spend 2,040 tokens on the
/// same screenshot and over 8,000 on a 4K one. Qwen2-VL shipped 1,280 as its default
/// too, so the model family has seen this budget.
pub const DEFAULT_MAX_TOKENS: usize = 1280;

/// Sightline's default minimum budget: 64 tokens (`64 * 32 * 32` pixels), Qwen3-VL's own
/// `shortest_edge`. A small crop or icon is upscaled to at least this, so the vision
/// tower never sees a grid smaller than those it was trained on.
pub const DEFAULT_MIN_TOKENS: usize = 64;

/// Qwen3-VL's spatial patch side in pixels.
pub const DEFAULT_PATCH_SIZE: usize = 16;
/// Qwen3-VL's temporal patch: a still image is repeated this many times.
pub const DEFAULT_TEMPORAL_PATCH_SIZE: usize = 2;
/// Qwen3-VL's spatial merge: `merge × merge` patches make one language-model token.
pub const DEFAULT_MERGE_SIZE: usize = 2;
/// Qwen3-VL's normalization mean (per RGB channel, after rescaling to 0..1).
pub const DEFAULT_IMAGE_MEAN: [f32; 3] = [0.5, 0.5, 0.5];
/// Qwen3-VL's normalization standard deviation.
pub const DEFAULT_IMAGE_STD: [f32; 3] = [0.5, 0.5, 0.5];
/// The reference's `rescale_factor`: bytes to 0..1.
pub const DEFAULT_RESCALE_FACTOR: f64 = 1.0 / 255.0;

/// Qwen's `smart_resize` refuses images whose long side is more than this many times
/// the short side.
pub const MAX_ASPECT_RATIO: f64 = 200.0;

/// Largest input side accepted, in pixels: checked from the file header before any
/// pixel is decoded, so a decompression bomb allocates nothing. 32,768 covers a
/// screenshot of eight 4K monitors side by side.
pub const DEFAULT_MAX_INPUT_SIDE: u32 = 32_768;

/// Largest input area accepted: 100 megapixels (300 MB as RGB bytes), checked from the
/// header like [`DEFAULT_MAX_INPUT_SIDE`]. The largest real screenshots (8K, 33 MP) fit
/// three times over.
pub const DEFAULT_MAX_INPUT_PIXELS: u64 = 100_000_000;

/// The largest visual-token budget a caller may ask for: the default input-pixel limit in
/// tokens of the smallest Qwen3-VL factor (32 × 32 pixels), rounded up. More would never be
/// used, so a larger `--max-visual-tokens` is a usage error, not a silent clamp.
pub const MAX_VISUAL_TOKENS: usize = 100_000;

/// Bounds on an input image, checked before it is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// Largest width or height, in pixels.
    pub max_side: u32,
    /// Largest `width * height`.
    pub max_pixels: u64,
}

impl Default for InputLimits {
    fn default() -> Self {
        Self {
            max_side: DEFAULT_MAX_INPUT_SIDE,
            max_pixels: DEFAULT_MAX_INPUT_PIXELS,
        }
    }
}

impl InputLimits {
    /// Checks `width × height` against the limits; a zero side is an error too.
    pub fn check(&self, width: u32, height: u32) -> Result<()> {
        if width == 0 || height == 0 {
            return Err(Error::image(format!(
                "image is {width}×{height}: an image needs at least one pixel on each side"
            )));
        }
        if width > self.max_side || height > self.max_side {
            return Err(Error::image(format!(
                "image is {width}×{height}: a side exceeds the limit of {} pixels",
                self.max_side
            )));
        }
        let pixels = u64::from(width) * u64::from(height);
        if pixels > self.max_pixels {
            return Err(Error::image(format!(
                "image is {width}×{height} ({pixels} pixels): exceeds the limit of {} pixels",
                self.max_pixels
            )));
        }
        Ok(())
    }
}

/// `size` in a `preprocessor_config.json`: transformers 5.x writes `shortest_edge` /
/// `longest_edge` (which for Qwen mean pixel counts, not edges); some older files write
/// `min_pixels` / `max_pixels` inside it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawSize {
    /// Minimum pixel count (transformers 5.x name).
    pub shortest_edge: Option<u64>,
    /// Maximum pixel count (transformers 5.x name).
    pub longest_edge: Option<u64>,
    /// Minimum pixel count (legacy name).
    pub min_pixels: Option<u64>,
    /// Maximum pixel count (legacy name).
    pub max_pixels: Option<u64>,
}

/// A model's `preprocessor_config.json`, as written. Unknown keys are ignored.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawPreprocessorConfig {
    /// The pixel budget, new or legacy layout.
    pub size: Option<RawSize>,
    /// Legacy top-level minimum pixel count; wins over `size`, as in the reference.
    pub min_pixels: Option<u64>,
    /// Legacy top-level maximum pixel count; wins over `size`, as in the reference.
    pub max_pixels: Option<u64>,
    /// Spatial patch side.
    pub patch_size: Option<usize>,
    /// Temporal patch length.
    pub temporal_patch_size: Option<usize>,
    /// Spatial merge factor.
    pub merge_size: Option<usize>,
    /// Per-channel mean.
    pub image_mean: Option<Vec<f32>>,
    /// Per-channel standard deviation.
    pub image_std: Option<Vec<f32>>,
    /// Byte-to-float factor.
    pub rescale_factor: Option<f64>,
    /// Whether to apply `rescale_factor`.
    pub do_rescale: Option<bool>,
    /// Whether to apply `image_mean` / `image_std`.
    pub do_normalize: Option<bool>,
    /// Must be true (or absent): patchifying needs the smart resize.
    pub do_resize: Option<bool>,
    /// Must be true (or absent): the vision tower takes RGB.
    pub do_convert_rgb: Option<bool>,
}

/// The resolved preprocessing settings.
///
/// `Default` is Sightline's budget for GUI screenshots ([`DEFAULT_MIN_TOKENS`] to
/// [`DEFAULT_MAX_TOKENS`]) with Qwen3-VL's patch geometry and normalization;
/// [`from_preprocessor_json`](Self::from_preprocessor_json) takes a model's own values.
/// Either can be adjusted with the `with_*` methods, then is checked by
/// [`validate`](Self::validate) (the preprocessing entry points call it).
///
/// ```
/// use sightline::image::PreprocessConfig;
/// let cfg = PreprocessConfig::default().with_max_tokens(256);
/// // A 1920×1080 screenshot at a 256-token budget: 672×384 pixels, 21×12 tokens.
/// assert_eq!(cfg.target_size(1920, 1080)?, (672, 384));
/// assert_eq!(cfg.n_tokens_for(1920, 1080)?, 252);
/// # Ok::<(), sightline::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PreprocessConfig {
    /// Spatial patch side in pixels.
    pub patch_size: usize,
    /// Frames per temporal patch; a still image is repeated this many times.
    pub temporal_patch_size: usize,
    /// `merge × merge` patches make one language-model token.
    pub merge_size: usize,
    /// Smallest pixel count after resizing (the reference's `shortest_edge`).
    pub min_pixels: u64,
    /// Largest pixel count after resizing (the reference's `longest_edge`).
    pub max_pixels: u64,
    /// Byte-to-float factor applied before normalization.
    pub rescale_factor: f64,
    /// Per-channel mean subtracted after rescaling.
    pub image_mean: [f32; 3],
    /// Per-channel standard deviation divided by after subtracting the mean.
    pub image_std: [f32; 3],
    /// Bounds on input images, checked before decoding.
    pub input_limits: InputLimits,
    /// Threads the resize passes may split their rows across; 0 (the default) means
    /// the available cores, at most 8. The result does not depend on it. Measured on
    /// a 2-core machine shared with other jobs, threads cut no wall time (CPU time
    /// per 1080p image is ~30 ms either way); on an idle multi-core machine they do.
    pub threads: usize,
}

impl Default for PreprocessConfig {
    fn default() -> Self {
        let factor = (DEFAULT_PATCH_SIZE * DEFAULT_MERGE_SIZE) as u64;
        Self {
            patch_size: DEFAULT_PATCH_SIZE,
            temporal_patch_size: DEFAULT_TEMPORAL_PATCH_SIZE,
            merge_size: DEFAULT_MERGE_SIZE,
            min_pixels: DEFAULT_MIN_TOKENS as u64 * factor * factor,
            max_pixels: DEFAULT_MAX_TOKENS as u64 * factor * factor,
            rescale_factor: DEFAULT_RESCALE_FACTOR,
            image_mean: DEFAULT_IMAGE_MEAN,
            image_std: DEFAULT_IMAGE_STD,
            input_limits: InputLimits::default(),
            threads: 0,
        }
    }
}

impl PreprocessConfig {
    /// Reads a model's `preprocessor_config.json`. Values it lacks take Sightline's
    /// defaults (see [`Default`](#impl-Default-for-PreprocessConfig)). Errors name the
    /// file and the key.
    pub fn from_preprocessor_json(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = crate::input_file::read_string(path, crate::input_file::InputKind::Config)?;
        let raw: RawPreprocessorConfig = serde_json::from_str(&text)
            .map_err(|e| Error::model_file_caused(path, "not a preprocessor config", e))?;
        Self::from_raw(&raw).map_err(|e| match e {
            Error::Config { reason, source } => Error::ModelFile {
                path: path.to_path_buf(),
                reason,
                source,
            },
            other => other,
        })
    }

    /// The model directory's `preprocessor_config.json` if there is one, else
    /// Sightline's defaults.
    pub fn for_model_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let path = dir.as_ref().join("preprocessor_config.json");
        if path.is_file() {
            Self::from_preprocessor_json(path)
        } else {
            Ok(Self::default())
        }
    }

    /// Resolves a parsed `preprocessor_config.json` and validates it.
    pub fn from_raw(raw: &RawPreprocessorConfig) -> Result<Self> {
        let mut cfg = Self::default();
        if let Some(v) = raw.patch_size {
            cfg.patch_size = v;
        }
        if let Some(v) = raw.temporal_patch_size {
            cfg.temporal_patch_size = v;
        }
        if let Some(v) = raw.merge_size {
            cfg.merge_size = v;
        }
        // The reference's precedence: top-level min/max_pixels, then size.
        let size = raw.size.clone().unwrap_or_default();
        let min = raw.min_pixels.or(size.shortest_edge).or(size.min_pixels);
        let max = raw.max_pixels.or(size.longest_edge).or(size.max_pixels);
        // A default budget computed with the file's own patch geometry.
        let factor = cfg.factor() as u64;
        cfg.min_pixels = min.unwrap_or(DEFAULT_MIN_TOKENS as u64 * factor * factor);
        cfg.max_pixels = max.unwrap_or(DEFAULT_MAX_TOKENS as u64 * factor * factor);
        if let Some(mean) = &raw.image_mean {
            cfg.image_mean = three_channels("image_mean", mean)?;
        }
        if let Some(std) = &raw.image_std {
            cfg.image_std = three_channels("image_std", std)?;
        }
        if let Some(v) = raw.rescale_factor {
            cfg.rescale_factor = v;
        }
        if raw.do_rescale == Some(false) {
            cfg.rescale_factor = 1.0;
        }
        if raw.do_normalize == Some(false) {
            cfg.image_mean = [0.0; 3];
            cfg.image_std = [1.0; 3];
        }
        if raw.do_resize == Some(false) {
            return Err(Error::config(
                "do_resize: false is not supported: Qwen-VL patches need sides that are \
                 multiples of patch_size * merge_size",
            ));
        }
        if raw.do_convert_rgb == Some(false) {
            return Err(Error::config(
                "do_convert_rgb: false is not supported: the vision tower takes RGB",
            ));
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Sets the largest budget to `tokens` language-model tokens
    /// (`tokens * factor²` pixels, [`factor`](Self::factor) = patch × merge). A smallest
    /// budget above it is lowered to it: a caller's cap wins over the model's floor (real
    /// Qwen3-VL configs ask for at least 64 tokens).
    #[must_use]
    pub fn with_max_tokens(mut self, tokens: usize) -> Self {
        let factor = self.factor() as u64;
        // Saturating: a budget too large to express in pixels means "no tighter cap", never
        // a wrap to a tiny one (callers validate against MAX_VISUAL_TOKENS first).
        self.max_pixels = (tokens as u64)
            .saturating_mul(factor)
            .saturating_mul(factor);
        self.min_pixels = self.min_pixels.min(self.max_pixels);
        self
    }

    /// Sets the smallest budget to `tokens` language-model tokens.
    #[must_use]
    pub fn with_min_tokens(mut self, tokens: usize) -> Self {
        let factor = self.factor() as u64;
        self.min_pixels = tokens as u64 * factor * factor;
        self
    }

    /// Sets the largest budget in pixels, as the reference's `longest_edge`.
    #[must_use]
    pub fn with_max_pixels(mut self, pixels: u64) -> Self {
        self.max_pixels = pixels;
        self
    }

    /// Sets the smallest budget in pixels, as the reference's `shortest_edge`.
    #[must_use]
    pub fn with_min_pixels(mut self, pixels: u64) -> Self {
        self.min_pixels = pixels;
        self
    }

    /// Sets the bounds checked on input images before decoding.
    #[must_use]
    pub fn with_input_limits(mut self, limits: InputLimits) -> Self {
        self.input_limits = limits;
        self
    }

    /// Sets how many threads the resize may use (0: the available cores, at most 8;
    /// 1: the calling thread only).
    #[must_use]
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// The thread count [`threads`](Self::threads) stands for.
    pub fn resolved_threads(&self) -> usize {
        if self.threads == 0 {
            super::resize::default_threads()
        } else {
            self.threads
        }
    }

    /// Side of the square of pixels that becomes one language-model token:
    /// `patch_size * merge_size` (32 for Qwen3-VL).
    pub fn factor(&self) -> usize {
        self.patch_size.saturating_mul(self.merge_size)
    }

    /// Length of one row of `pixel_values`: `3 * temporal * patch²`.
    pub fn patch_dim(&self) -> usize {
        3 * self.temporal_patch_size * self.patch_size * self.patch_size
    }

    /// Checks the settings are usable: positive geometry, `min ≤ max`, a budget that
    /// holds at least one token and no more than the input limit, non-zero std.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::config(format!("image preprocessing: {what}")));
        if self.patch_size == 0 || self.temporal_patch_size == 0 || self.merge_size == 0 {
            return bad(format!(
                "patch_size {}, temporal_patch_size {} and merge_size {} must all be positive",
                self.patch_size, self.temporal_patch_size, self.merge_size
            ));
        }
        if self.factor() > 1024 || self.temporal_patch_size > 16 {
            return bad(format!(
                "patch_size * merge_size = {} or temporal_patch_size = {} is implausibly large",
                self.factor(),
                self.temporal_patch_size
            ));
        }
        let factor2 = (self.factor() * self.factor()) as u64;
        if self.min_pixels == 0 || self.min_pixels > self.max_pixels {
            return bad(format!(
                "min_pixels {} must be positive and at most max_pixels {}",
                self.min_pixels, self.max_pixels
            ));
        }
        if self.max_pixels < factor2 {
            return bad(format!(
                "max_pixels {} is less than one token ({factor2} pixels)",
                self.max_pixels
            ));
        }
        if self.max_pixels > self.input_limits.max_pixels {
            return bad(format!(
                "max_pixels {} exceeds the input limit of {} pixels",
                self.max_pixels, self.input_limits.max_pixels
            ));
        }
        if !(self.rescale_factor.is_finite() && self.rescale_factor > 0.0) {
            return bad(format!(
                "rescale_factor {} must be positive",
                self.rescale_factor
            ));
        }
        for c in 0..3 {
            let (m, s) = (self.image_mean[c], self.image_std[c]);
            if !m.is_finite() || !s.is_finite() || s == 0.0 {
                return bad(format!(
                    "image_mean[{c}] = {m} and image_std[{c}] = {s} must be finite, std non-zero"
                ));
            }
        }
        Ok(())
    }

    /// The size `(width, height)` an image of `width × height` is resized to: Qwen's
    /// `smart_resize`, computed with the same floating-point operations as the
    /// reference so the grid is identical. Errors on a zero side or an aspect ratio
    /// over [`MAX_ASPECT_RATIO`].
    pub fn target_size(&self, width: u32, height: u32) -> Result<(u32, u32)> {
        self.validate()?;
        let (h, w) = smart_resize(
            u64::from(height),
            u64::from(width),
            self.factor() as u64,
            self.min_pixels,
            self.max_pixels,
        )?;
        let (Ok(w), Ok(h)) = (u32::try_from(w), u32::try_from(h)) else {
            return Err(Error::image(format!(
                "image {width}×{height} would be resized to {w}×{h}, too large"
            )));
        };
        // Upscaling is bounded by min_pixels, but its rounding is not: check the result too.
        self.input_limits.check(w, h).map_err(|_| {
            Error::image(format!(
                "image {width}×{height} would be resized to {w}×{h}, beyond the input limits"
            ))
        })?;
        Ok((w, h))
    }

    /// Number of `<|image_pad|>` tokens an image of `width × height` becomes, without
    /// decoding it: `(h / patch) * (w / patch) / merge²` of the [`target_size`](Self::target_size).
    pub fn n_tokens_for(&self, width: u32, height: u32) -> Result<usize> {
        let (w, h) = self.target_size(width, height)?;
        Ok((w as usize / self.factor()) * (h as usize / self.factor()))
    }

    /// Number of `<|image_pad|>` tokens for a patch grid `[t, h, w]`:
    /// `t * h * w / merge²`.
    pub fn n_tokens_for_grid(&self, grid_thw: [usize; 3]) -> usize {
        grid_thw.iter().product::<usize>() / (self.merge_size * self.merge_size).max(1)
    }
}

fn three_channels(key: &str, values: &[f32]) -> Result<[f32; 3]> {
    match values {
        // One value is refused rather than broadcast: the reference (transformers) indexes
        // three channels, and a one-entry list is more likely a truncated file than intent.
        [r, g, b] => Ok([*r, *g, *b]),
        _ => Err(Error::config(format!(
            "{key} has {} values, expected 3 (one per RGB channel)",
            values.len()
        ))),
    }
}

/// Qwen's `smart_resize`: `(height, width)` rounded to multiples of `factor` with
/// `min_pixels ≤ h·w ≤ max_pixels` where possible, aspect ratio kept.
///
/// Written with the reference's exact operations (f64 true division, Python's
/// round-half-to-even, `floor`/`ceil`), so the grid is the reference's to the pixel.
pub(crate) fn smart_resize(
    height: u64,
    width: u64,
    factor: u64,
    min_pixels: u64,
    max_pixels: u64,
) -> Result<(u64, u64)> {
    if height == 0 || width == 0 {
        return Err(Error::image(format!(
            "image is {width}×{height}: an image needs at least one pixel on each side"
        )));
    }
    let ratio = height.max(width) as f64 / height.min(width) as f64;
    if ratio > MAX_ASPECT_RATIO {
        return Err(Error::image(format!(
            "image is {width}×{height}: aspect ratio {ratio:.1} exceeds {MAX_ASPECT_RATIO}"
        )));
    }
    let (hf, wf, ff) = (height as f64, width as f64, factor as f64);
    let mut h_bar = (hf / ff).round_ties_even() as u64 * factor;
    let mut w_bar = (wf / ff).round_ties_even() as u64 * factor;
    if h_bar * w_bar > max_pixels {
        let beta = ((height * width) as f64 / max_pixels as f64).sqrt();
        h_bar = factor.max((hf / beta / ff).floor() as u64 * factor);
        w_bar = factor.max((wf / beta / ff).floor() as u64 * factor);
    } else if h_bar * w_bar < min_pixels {
        let beta = (min_pixels as f64 / (height * width) as f64).sqrt();
        h_bar = (hf * beta / ff).ceil() as u64 * factor;
        w_bar = (wf * beta / ff).ceil() as u64 * factor;
    }
    Ok((h_bar, w_bar))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smart_resize_matches_reference_values() -> Result<()> {
        // Values computed with transformers' smart_resize (factor 32).
        let f = 32;
        assert_eq!(smart_resize(192, 256, f, 4096, 49152)?, (192, 256));
        assert_eq!(smart_resize(220, 300, f, 4096, 49152)?, (160, 256));
        assert_eq!(smart_resize(60, 1400, f, 4096, 49152)?, (32, 1056));
        assert_eq!(smart_resize(1080, 1920, f, 65536, 1310720)?, (832, 1504));
        // Round half to even: 48 / 32 = 1.5 rounds to 2, 80 / 32 = 2.5 rounds to 2.
        assert_eq!(smart_resize(48, 80, f, 1, 1 << 30)?, (64, 64));
        Ok(())
    }

    #[test]
    fn smart_resize_rejects_aspect_over_200_and_zero_sides() {
        assert!(matches!(
            smart_resize(1, 201, 32, 4096, 49152),
            Err(Error::Image { .. })
        ));
        assert!(smart_resize(1, 200, 32, 4096, 49152).is_ok());
        assert!(matches!(
            smart_resize(0, 10, 32, 4096, 49152),
            Err(Error::Image { .. })
        ));
    }
}
