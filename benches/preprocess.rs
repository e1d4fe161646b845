//! Image preprocessing, one stage of the per-turn path: a 1920×1080 screenshot PNG to
//! Qwen3-VL patches at Sightline's default 1,280-token budget (1504×832 pixels, 1,222
//! tokens). PNG decoding and preprocessing (resize, normalize, patchify) are measured
//! separately (preprocessing with the default threads and with one), then together.
//! Throughput is in input pixels.

use std::hint::black_box;

use criterion::{Criterion, Throughput};
use image::{ImageFormat, Rgb, RgbImage};
use sightline::image::{decode_rgb, preprocess_bytes, preprocess_rgb, PreprocessConfig};

const WIDTH: u32 = 1920;
const HEIGHT: u32 = 1080;

/// A synthetic desktop: flat panels, a title bar, rows of "text" (short dark runs), and a
/// photo-like gradient region, so PNG compresses it like a real screenshot (mostly flat,
/// some detail) rather than like noise or a solid colour. Deterministic.
fn synthetic_screenshot() -> RgbImage {
    let mut state = 0x2545_f491_u32;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    let mut img = RgbImage::from_pixel(WIDTH, HEIGHT, Rgb([236, 239, 244]));
    for y in 0..HEIGHT {
        for x in 0..WIDTH {
            let px = if y < 40 {
                Rgb([46, 52, 64])
            } else if x < 300 {
                Rgb([216, 222, 233])
            } else if x > 1300 && y > 500 {
                // A picture: smooth gradient with mild grain.
                let g = (next() % 9) as u8;
                Rgb([(x / 8) as u8 ^ g, (y / 5) as u8, ((x + y) / 12) as u8])
            } else {
                continue;
            };
            img.put_pixel(x, y, px);
        }
    }
    // Text lines: runs of dark "glyph" pixels on a 14-px baseline grid.
    for line in 0..70 {
        let y0 = 52 + line * 14;
        let x_start = if line % 3 == 0 { 12 } else { 320 };
        let len = 200 + (next() % 700);
        let mut x = x_start;
        while x < (x_start + len).min(WIDTH - 8) {
            let glyph_w = 3 + next() % 5;
            for gx in x..x + glyph_w {
                for gy in y0..y0 + 9 {
                    if next() % 3 != 0 && gy < HEIGHT {
                        img.put_pixel(gx, gy, Rgb([59, 66, 82]));
                    }
                }
            }
            x += glyph_w + 1 + next() % 4;
        }
    }
    img
}

/// [`synthetic_screenshot`] as PNG bytes: the input of a turn.
pub fn synthetic_png() -> Vec<u8> {
    let mut png = std::io::Cursor::new(Vec::new());
    // Invariant: encoding an in-memory RGB image to an in-memory buffer cannot fail.
    #[allow(clippy::unwrap_used)]
    synthetic_screenshot()
        .write_to(&mut png, ImageFormat::Png)
        .unwrap();
    png.into_inner()
}

/// Registers the preprocessing benches.
pub fn bench(c: &mut Criterion) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    eprintln!(
        "preprocess bench on {cpu}, {} threads available (the resize passes split rows across them)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    let rgb = synthetic_screenshot();
    let png = synthetic_png();
    let cfg = PreprocessConfig::default().with_max_tokens(1280);
    eprintln!(
        "1920×1080 PNG: {} KiB; target {:?}, {} tokens",
        png.len() / 1024,
        cfg.target_size(WIDTH, HEIGHT).ok(),
        cfg.n_tokens_for(WIDTH, HEIGHT).unwrap_or(0)
    );

    let mut group = c.benchmark_group("preprocess");
    group.throughput(Throughput::Elements(u64::from(WIDTH * HEIGHT)));
    group.sample_size(20);
    let limits = cfg.input_limits;
    group.bench_function("png_decode_1920x1080", |b| {
        b.iter(|| decode_rgb(black_box(&png), &limits))
    });
    group.bench_function("resize_normalize_patchify_1920x1080_1280tok", |b| {
        b.iter(|| preprocess_rgb(black_box(&rgb), &cfg))
    });
    let one_thread = cfg.clone().with_threads(1);
    group.bench_function("resize_normalize_patchify_1920x1080_1280tok_1thread", |b| {
        b.iter(|| preprocess_rgb(black_box(&rgb), &one_thread))
    });
    group.bench_function("png_to_patches_1920x1080_1280tok", |b| {
        b.iter(|| preprocess_bytes(black_box(&png), &cfg))
    });
    group.finish();
}
