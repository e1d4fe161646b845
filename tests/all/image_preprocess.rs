//! Image preprocessing against the reference (transformers' `Qwen2VLImageProcessorPil`
//! on Pillow): the committed screenshots end to end, Pillow's pixel-format conversions
//! and bicubic resize on their own, every error case, and both styles of
//! `preprocessor_config.json`.

use std::collections::HashMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use image::{DynamicImage, ImageFormat, RgbImage};
use rand::{Rng, SeedableRng};
use safetensors::{Dtype, SafeTensors};
use sightline::image::{
    decode_rgb, n_image_tokens, preprocess_bytes, preprocess_image, preprocess_rgb, resize_bicubic,
    InputLimits, PreprocessConfig, PIXEL_ATOL,
};
use sightline::Error;

/// A JPEG is decoded by zune-jpeg here and libjpeg-turbo in the reference; on a
/// synthetic UI at quality 95 their pixels differ by a few grey levels at most.
/// Normalized values span 2 / 255 per grey level with std 0.5.
const JPEG_MEAN_ATOL: f32 = 0.02;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/fixtures")
}

/// A safetensors file held in memory, read tensor by tensor.
struct Fixture {
    bytes: Vec<u8>,
}

impl Fixture {
    fn open(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
        Ok(Self { bytes })
    }

    fn st(&self) -> Result<SafeTensors<'_>> {
        Ok(SafeTensors::deserialize(&self.bytes)?)
    }

    fn metadata(&self) -> Result<HashMap<String, String>> {
        let (_, meta) = SafeTensors::read_metadata(&self.bytes)?;
        Ok(meta.metadata().clone().unwrap_or_default())
    }

    fn meta_u64(&self, key: &str) -> Result<u64> {
        let meta = self.metadata()?;
        let v = meta.get(key).with_context(|| format!("metadata {key}"))?;
        Ok(v.parse()?)
    }

    fn u8s(&self, name: &str) -> Result<(Vec<usize>, Vec<u8>)> {
        let st = self.st()?;
        let t = st.tensor(name)?;
        ensure!(t.dtype() == Dtype::U8, "{name}: {:?}", t.dtype());
        Ok((t.shape().to_vec(), t.data().to_vec()))
    }

    fn f32s(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>)> {
        let st = self.st()?;
        let t = st.tensor(name)?;
        ensure!(t.dtype() == Dtype::F32, "{name}: {:?}", t.dtype());
        let values = t
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok((t.shape().to_vec(), values))
    }

    fn i64s(&self, name: &str) -> Result<Vec<i64>> {
        let st = self.st()?;
        let t = st.tensor(name)?;
        ensure!(t.dtype() == Dtype::I64, "{name}: {:?}", t.dtype());
        Ok(t.data()
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .collect())
    }

    fn rgb(&self, name: &str) -> Result<RgbImage> {
        let (shape, data) = self.u8s(name)?;
        let [h, w, 3] = shape[..] else {
            bail!("{name}: shape {shape:?}")
        };
        RgbImage::from_raw(w as u32, h as u32, data).context("rgb buffer")
    }
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The tiny models' preprocessor config with the budget the screenshots were made with.
fn screen_config(fx: &Fixture) -> Result<PreprocessConfig> {
    Ok(PreprocessConfig::from_preprocessor_json(
        fixtures().join("tiny-a/preprocessor_config.json"),
    )?
    .with_min_pixels(fx.meta_u64("min_pixels")?)
    .with_max_pixels(fx.meta_u64("max_pixels")?))
}

/// Runs one committed screenshot through the pipeline; returns the max abs difference.
fn check_screen(name: &str) -> Result<f32> {
    let dir = fixtures().join("screens");
    let fx = Fixture::open(&dir.join(format!("{name}.safetensors")))?;
    let cfg = screen_config(&fx)?;
    let png = std::fs::read(dir.join(format!("{name}.png")))?;
    let got = preprocess_bytes(&png, &cfg)?;

    let want_grid = fx.i64s("image_grid_thw")?;
    let got_grid: Vec<i64> = got.grid_thw.iter().map(|&v| v as i64).collect();
    assert_eq!(got_grid, want_grid, "{name}: grid");
    let (want_shape, want) = fx.f32s("pixel_values")?;
    assert_eq!(
        got.pixel_values.dims(),
        want_shape.as_slice(),
        "{name}: shape"
    );
    let got_values: Vec<f32> = got.pixel_values.flatten_all()?.to_vec1()?;
    let diff = max_abs_diff(&got_values, &want);
    eprintln!("{name}: grid {:?}, max abs diff {diff:e}", got.grid_thw);
    assert!(
        diff <= PIXEL_ATOL,
        "{name}: max abs diff {diff} > {PIXEL_ATOL}"
    );
    Ok(diff)
}

#[test]
fn screenshot_without_resize_matches_reference() -> Result<()> {
    check_screen("ui_exact")?;
    Ok(())
}

#[test]
fn screenshot_with_bicubic_downscale_matches_reference() -> Result<()> {
    check_screen("ui_resize")?;
    Ok(())
}

#[test]
fn very_wide_screenshot_matches_reference_grid_and_pixels() -> Result<()> {
    check_screen("ui_wide")?;
    Ok(())
}

#[test]
fn token_count_is_grid_area_over_merge_squared() -> Result<()> {
    let dir = fixtures().join("screens");
    let fx = Fixture::open(&dir.join("ui_wide.safetensors"))?;
    let cfg = screen_config(&fx)?;
    let pre = preprocess_bytes(&std::fs::read(dir.join("ui_wide.png"))?, &cfg)?;
    // 1400×60 → 1056×32: 2 × 66 patches, 1 × 33 tokens.
    assert_eq!(pre.grid_thw, [1, 2, 66]);
    assert_eq!(n_image_tokens(&pre, cfg.merge_size), 33);
    assert_eq!(cfg.n_tokens_for_grid(pre.grid_thw), 33);
    assert_eq!(cfg.n_tokens_for(1400, 60)?, 33);
    Ok(())
}

fn cases() -> Result<Fixture> {
    Fixture::open(&fixtures().join("image_cases.safetensors"))
}

#[test]
fn pixel_formats_convert_to_rgb_like_pillow() -> Result<()> {
    let fx = cases()?;
    let names = [
        "gray8",
        "gray_alpha8",
        "gray16",
        "gray_alpha16",
        "rgb16",
        "rgba16",
        "rgba8",
        "palette_trns",
        "gray_trns",
        "rgb_trns",
    ];
    for name in names {
        let (_, png) = fx.u8s(&format!("conv_{name}.png"))?;
        let mut want = fx.rgb(&format!("conv_{name}.rgb"))?;
        let got = decode_rgb(&png, &InputLimits::default())?;
        if name == "gray16" {
            // Pillow clips 16-bit grey at 255; Sightline scales (takes the high byte).
            let grey = image::load_from_memory(&png)?.into_luma16();
            let scaled: Vec<u8> = grey
                .as_raw()
                .iter()
                .flat_map(|&v| [(v >> 8) as u8; 3])
                .collect();
            want = image::RgbImage::from_raw(grey.width(), grey.height(), scaled)
                .ok_or_else(|| anyhow::anyhow!("gray16 size"))?;
        }
        assert_eq!(got.dimensions(), want.dimensions(), "{name}");
        let mismatches = got
            .as_raw()
            .iter()
            .zip(want.as_raw())
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(
            mismatches, 0,
            "{name}: {mismatches} bytes differ from Pillow"
        );
    }
    Ok(())
}

#[test]
fn bicubic_resize_of_noise_is_bit_exact_with_pillow() -> Result<()> {
    let fx = cases()?;
    let n_cases = fx
        .st()?
        .names()
        .iter()
        .filter(|n| n.starts_with("resize_") && n.ends_with(".src"))
        .count();
    ensure!(
        n_cases >= 17,
        "expected at least 17 resize cases, found {n_cases}"
    );
    for i in 0..n_cases {
        let src = fx.rgb(&format!("resize_{i}.src"))?;
        let want = fx.rgb(&format!("resize_{i}.out"))?;
        let got = resize_bicubic(&src, want.width(), want.height());
        let max_diff = got
            .as_raw()
            .iter()
            .zip(want.as_raw())
            .map(|(&a, &b)| a.abs_diff(b))
            .max()
            .unwrap_or(0);
        assert_eq!(
            max_diff,
            0,
            "resize_{i}: {:?} -> {:?} differs from Pillow by up to {max_diff}",
            src.dimensions(),
            want.dimensions()
        );
    }
    Ok(())
}

#[test]
fn rgba_png_with_every_alpha_level_matches_reference_pipeline() -> Result<()> {
    let fx = cases()?;
    let meta = fx.metadata()?;
    let floats = |key: &str| -> Result<[f32; 3]> {
        let v: Vec<f32> = meta
            .get(key)
            .context("metadata")?
            .split(',')
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        v.try_into()
            .map_err(|_| anyhow::anyhow!("{key}: three values"))
    };
    let mut cfg = PreprocessConfig::default()
        .with_min_pixels(fx.meta_u64("min_pixels")?)
        .with_max_pixels(fx.meta_u64("max_pixels")?);
    cfg.image_mean = floats("image_mean")?;
    cfg.image_std = floats("image_std")?;
    let (_, png) = fx.u8s("rgba_pipeline.png")?;
    let got = preprocess_bytes(&png, &cfg)?;
    let grid: Vec<usize> = fx
        .i64s("rgba_pipeline.image_grid_thw")?
        .iter()
        .map(|&v| v as usize)
        .collect();
    assert_eq!(got.grid_thw.to_vec(), grid);
    let (_, want) = fx.f32s("rgba_pipeline.pixel_values")?;
    let got_values: Vec<f32> = got.pixel_values.flatten_all()?.to_vec1()?;
    assert_eq!(got_values.len(), want.len());
    let diff = max_abs_diff(&got_values, &want);
    eprintln!("rgba_pipeline: max abs diff {diff:e}");
    assert!(diff <= PIXEL_ATOL, "max abs diff {diff}");
    Ok(())
}

fn ui_resize() -> Result<(DynamicImage, PreprocessConfig, Vec<f32>)> {
    let dir = fixtures().join("screens");
    let fx = Fixture::open(&dir.join("ui_resize.safetensors"))?;
    let img = image::load_from_memory(&std::fs::read(dir.join("ui_resize.png"))?)?;
    Ok((img, screen_config(&fx)?, fx.f32s("pixel_values")?.1))
}

fn encode(img: &DynamicImage, format: ImageFormat) -> Result<Vec<u8>> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format)?;
    Ok(out.into_inner())
}

#[test]
fn opaque_rgba_and_decoded_inputs_give_the_same_patches_as_rgb_png() -> Result<()> {
    let (img, cfg, want) = ui_resize()?;
    let rgba = DynamicImage::ImageRgba8(img.to_rgba8());
    for (what, got) in [
        (
            "rgba png",
            preprocess_bytes(&encode(&rgba, ImageFormat::Png)?, &cfg)?,
        ),
        ("rgba image", preprocess_image(&rgba, &cfg)?),
        ("rgb image", preprocess_image(&img, &cfg)?),
    ] {
        let values: Vec<f32> = got.pixel_values.flatten_all()?.to_vec1()?;
        let diff = max_abs_diff(&values, &want);
        assert!(diff <= PIXEL_ATOL, "{what}: {diff}");
    }
    Ok(())
}

#[test]
fn grayscale_png_is_replicated_to_three_equal_channels() -> Result<()> {
    let (img, cfg, _) = ui_resize()?;
    let gray = DynamicImage::ImageLuma8(img.to_luma8());
    let from_png = preprocess_bytes(&encode(&gray, ImageFormat::Png)?, &cfg)?;
    // Same as an RGB image whose three channels are the gray value.
    let rgb = DynamicImage::ImageLuma8(img.to_luma8()).to_rgb8();
    let from_rgb = preprocess_rgb(&rgb, &cfg)?;
    assert_eq!(from_png.grid_thw, from_rgb.grid_thw);
    let a: Vec<f32> = from_png.pixel_values.flatten_all()?.to_vec1()?;
    let b: Vec<f32> = from_rgb.pixel_values.flatten_all()?.to_vec1()?;
    assert_eq!(a, b);
    // Within a row the three channel blocks (each temporal × 16 × 16) are equal.
    let block = a.len() / from_png.grid_thw.iter().product::<usize>() / 3;
    let row = &a[..3 * block];
    assert_eq!(row[..block], row[block..2 * block]);
    assert_eq!(row[..block], row[2 * block..]);
    Ok(())
}

#[test]
fn jpeg_is_accepted_with_the_same_grid_and_close_pixels() -> Result<()> {
    let (img, cfg, want) = ui_resize()?;
    let mut jpeg = Cursor::new(Vec::new());
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 95)
        .encode_image(&img.to_rgb8())?;
    let got = preprocess_bytes(jpeg.get_ref(), &cfg)?;
    assert_eq!(got.grid_thw, [1, 10, 16]);
    let values: Vec<f32> = got.pixel_values.flatten_all()?.to_vec1()?;
    let mean_diff = values
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .sum::<f32>()
        / values.len() as f32;
    eprintln!("jpeg q95: mean abs diff {mean_diff}");
    assert!(mean_diff <= JPEG_MEAN_ATOL, "mean abs diff {mean_diff}");
    Ok(())
}

fn expect_image_error(result: sightline::Result<sightline::PreprocessedImage>, needle: &str) {
    match result {
        Err(e @ Error::Image { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(needle), "{msg:?} lacks {needle:?}")
        }
        Err(other) => panic!("expected an image error mentioning {needle:?}, got {other}"),
        Ok(pre) => panic!(
            "expected an image error mentioning {needle:?}, got grid {:?}",
            pre.grid_thw
        ),
    }
}

#[test]
fn corrupt_truncated_and_unknown_bytes_are_image_errors() -> Result<()> {
    let cfg = PreprocessConfig::default();
    let png = std::fs::read(fixtures().join("screens/ui_exact.png"))?;
    expect_image_error(preprocess_bytes(&png[..png.len() / 2], &cfg), "");
    expect_image_error(preprocess_bytes(&png[..20], &cfg), "");
    let mut corrupt = png.clone();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for _ in 0..64 {
        let i = rng.random_range(60..corrupt.len() - 16);
        corrupt[i] ^= 0x5a;
    }
    expect_image_error(preprocess_bytes(&corrupt, &cfg), "");
    expect_image_error(preprocess_bytes(b"", &cfg), "unrecognized");
    // Random damage to PNG and JPEG data: an image error or (when the damage misses
    // anything checked) a well-formed result, never a panic.
    let jpeg = {
        let mut out = Cursor::new(Vec::new());
        image::load_from_memory(&png)?.write_to(&mut out, ImageFormat::Jpeg)?;
        out.into_inner()
    };
    for (seed, original) in (0..120u64).zip([&png, &jpeg].into_iter().cycle()) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut bytes = original.clone();
        bytes.truncate(rng.random_range(8..=bytes.len()));
        for _ in 0..rng.random_range(0..8) {
            let i = rng.random_range(0..bytes.len());
            bytes[i] = rng.random();
        }
        match preprocess_bytes(&bytes, &cfg) {
            Ok(pre) => assert_eq!(pre.grid_thw[0], 1),
            Err(Error::Image { .. }) => {}
            Err(other) => panic!("seed {seed}: expected an image error, got {other}"),
        }
    }
    expect_image_error(
        preprocess_bytes(b"hello, this is not an image", &cfg),
        "unrecognized",
    );
    expect_image_error(
        preprocess_bytes(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;", &cfg),
        "unsupported",
    );
    Ok(())
}

/// A PNG claiming `width × height` with a tiny IDAT: what a decompression bomb looks
/// like to the decoder before its first pixel row is inflated.
fn png_header(width: u32, height: u32) -> Vec<u8> {
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    // An empty zlib stream stands in for the compressed pixels.
    for (kind, data) in [
        (&b"IHDR"[..], &ihdr[..]),
        (b"IDAT", b"\x78\x9c\x03\x00\x00\x00\x00\x01"),
        (b"IEND", b""),
    ] {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut chunk = kind.to_vec();
        chunk.extend_from_slice(data);
        out.extend_from_slice(&chunk);
        out.extend_from_slice(&crc32(&chunk).to_be_bytes());
    }
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn oversized_headers_are_refused_before_decoding() -> Result<()> {
    let cfg = PreprocessConfig::default();
    // 40000 × 40000 (1.6 gigapixels, 4.8 GB of RGB): refused from the header alone.
    expect_image_error(preprocess_bytes(&png_header(40_000, 40_000), &cfg), "limit");
    // 20000 × 20000: both sides within 32768, but 400 megapixels.
    expect_image_error(preprocess_bytes(&png_header(20_000, 20_000), &cfg), "limit");
    // Zero width is refused by the PNG decoder itself or by our check.
    expect_image_error(preprocess_bytes(&png_header(0, 10), &cfg), "");
    // Custom, tighter limits apply to decoded images too.
    let tight = cfg
        .clone()
        .with_min_tokens(1)
        .with_max_tokens(4)
        .with_input_limits(InputLimits {
            max_side: 100,
            max_pixels: 10_000,
        });
    let png = std::fs::read(fixtures().join("screens/ui_exact.png"))?;
    expect_image_error(preprocess_bytes(&png, &tight), "limit");
    let img = image::load_from_memory(&png)?;
    expect_image_error(preprocess_image(&img, &tight), "limit");
    Ok(())
}

#[test]
fn zero_sized_and_too_elongated_images_are_image_errors() -> Result<()> {
    let cfg = PreprocessConfig::default();
    expect_image_error(
        preprocess_image(&DynamicImage::new_rgb8(0, 0), &cfg),
        "at least one pixel",
    );
    expect_image_error(
        preprocess_rgb(&RgbImage::new(5, 0), &cfg),
        "at least one pixel",
    );
    expect_image_error(
        preprocess_rgb(&RgbImage::new(2010, 10), &cfg),
        "aspect ratio",
    );
    expect_image_error(preprocess_rgb(&RgbImage::new(1, 201), &cfg), "aspect ratio");
    // Exactly 200 is allowed, as in the reference.
    let pre = preprocess_rgb(&RgbImage::new(2000, 10), &cfg)?;
    assert_eq!(pre.grid_thw[0], 1);
    Ok(())
}

#[test]
fn preprocessor_json_with_size_edges_is_read() -> Result<()> {
    let cfg = PreprocessConfig::from_preprocessor_json(
        fixtures().join("tiny-a/preprocessor_config.json"),
    )?;
    assert_eq!(cfg.min_pixels, 65_536);
    assert_eq!(cfg.max_pixels, 16_777_216);
    assert_eq!(
        (cfg.patch_size, cfg.temporal_patch_size, cfg.merge_size),
        (16, 2, 2)
    );
    assert_eq!(cfg.image_mean, [0.5; 3]);
    assert_eq!(cfg.image_std, [0.5; 3]);
    // The caller's override wins: 1,280 tokens of 32 × 32 pixels.
    let cfg = cfg.with_max_tokens(1280);
    assert_eq!(cfg.max_pixels, 1280 * 32 * 32);
    assert_eq!(cfg.target_size(1920, 1080)?, (1504, 832));
    assert_eq!(
        PreprocessConfig::for_model_dir(fixtures().join("tiny-a"))?.min_pixels,
        65_536
    );
    Ok(())
}

#[test]
fn legacy_preprocessor_json_with_min_max_pixels_is_read() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("preprocessor_config.json");
    // Qwen2.5-VL's layout: top-level min/max_pixels (they win over `size`), patch 14, CLIP stats.
    std::fs::write(
        &path,
        r#"{"min_pixels": 3136, "max_pixels": 12845056, "size": {"min_pixels": 1, "max_pixels": 2},
            "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "image_processor_type": "Qwen2VLImageProcessor"}"#,
    )?;
    let cfg = PreprocessConfig::from_preprocessor_json(&path)?;
    assert_eq!((cfg.min_pixels, cfg.max_pixels), (3136, 12_845_056));
    assert_eq!(cfg.factor(), 28);
    assert_eq!(cfg.image_mean, [0.481_454_66, 0.457_827_5, 0.408_210_73]);
    // `size` with legacy keys alone.
    std::fs::write(
        &path,
        r#"{"size": {"min_pixels": 4096, "max_pixels": 8192}}"#,
    )?;
    let cfg = PreprocessConfig::from_preprocessor_json(&path)?;
    assert_eq!((cfg.min_pixels, cfg.max_pixels), (4096, 8192));
    // No budget at all: Sightline's defaults.
    std::fs::write(&path, r#"{"patch_size": 16}"#)?;
    let cfg = PreprocessConfig::from_preprocessor_json(&path)?;
    assert_eq!(cfg, PreprocessConfig::default());
    Ok(())
}

#[test]
fn bad_preprocessor_json_is_an_error_naming_the_file() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("preprocessor_config.json");
    for (text, needle) in [
        ("{not json", "not a preprocessor config"),
        (r#"{"patch_size": "sixteen"}"#, "not a preprocessor config"),
        (r#"{"image_mean": [0.5, 0.5]}"#, "image_mean"),
        (r#"{"image_mean": [0.5]}"#, "image_mean"),
        (r#"{"image_std": [0.5]}"#, "image_std"),
        (r#"{"image_std": [0.5, 0.0, 0.5]}"#, "image_std"),
        (r#"{"merge_size": 0}"#, "merge_size"),
        (r#"{"min_pixels": 9000, "max_pixels": 4096}"#, "min_pixels"),
        (r#"{"do_resize": false}"#, "do_resize"),
    ] {
        std::fs::write(&path, text)?;
        let Err(err) = PreprocessConfig::from_preprocessor_json(&path) else {
            bail!("{text}: loaded");
        };
        let msg = err.to_string();
        assert!(
            msg.contains("preprocessor_config.json") && msg.contains(needle),
            "{text}: {msg}"
        );
    }
    assert!(matches!(
        PreprocessConfig::from_preprocessor_json(dir.path().join("missing.json")),
        Err(Error::Io { .. })
    ));
    Ok(())
}

#[test]
fn sightline_default_budget_holds_a_1080p_screenshot_in_1222_tokens() -> Result<()> {
    let cfg = PreprocessConfig::default();
    assert_eq!(cfg.target_size(1920, 1080)?, (1504, 832));
    assert_eq!(cfg.n_tokens_for(1920, 1080)?, 1222);
    // A small icon is upscaled to the 64-token minimum.
    assert_eq!(cfg.n_tokens_for(48, 48)?, 64);
    Ok(())
}
