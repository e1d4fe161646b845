//! Helpers of the eval tests: running the binary, and the generator of the synthetic
//! grounding sample committed under `evals/grounding/sample/`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use image::{Rgb, RgbImage};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `sightline ARGS` with `envs`, in `cwd`.
pub fn sightline(args: &[&str], envs: &[(&str, &Path)], cwd: &Path) -> anyhow::Result<Output> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sightline"));
    cmd.args(args).current_dir(cwd);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    Ok(cmd.output()?)
}

/// stdout and stderr of an output, for assertion messages. The progress lines of passed
/// runs are left out, so a failure's own lines fit in the end of a CI log.
pub fn text(o: &Output) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let kept: Vec<&str> = stdout
        .lines()
        .filter(|l| !(l.starts_with('[') && l.contains(" PASS ")))
        .collect();
    format!(
        "exit {:?}\n--- stdout (passed runs left out)\n{}\n--- stderr\n{}",
        o.status.code(),
        kept.join("\n"),
        String::from_utf8_lossy(&o.stderr)
    )
}

// ─── The synthetic grounding sample ─────────────────────────────────────────

/// Width and height of each synthetic screen.
pub const SCREEN: (u32, u32) = (480, 300);
/// Pixel scale of the 5×7 bitmap font.
const FONT_SCALE: u32 = 2;

/// A 5×7 bitmap glyph: seven rows, the low five bits of each, most significant bit left.
fn glyph(c: char) -> [u8; 7] {
    match c {
        'A' => [0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        'B' => [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E],
        'C' => [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E],
        'E' => [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F],
        'H' => [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        'I' => [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E],
        'K' => [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11],
        'L' => [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F],
        'N' => [0x11, 0x19, 0x15, 0x13, 0x11, 0x11, 0x11],
        'O' => [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        'P' => [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10],
        'Q' => [0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D],
        'R' => [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11],
        'S' => [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E],
        'T' => [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
        'U' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
        'V' => [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04],
        'X' => [0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11],
        _ => [0; 7],
    }
}

fn fill(img: &mut RgbImage, x1: u32, y1: u32, x2: u32, y2: u32, color: [u8; 3]) {
    for y in y1..=y2.min(img.height() - 1) {
        for x in x1..=x2.min(img.width() - 1) {
            img.put_pixel(x, y, Rgb(color));
        }
    }
}

fn draw_text(img: &mut RgbImage, x: u32, y: u32, text: &str, color: [u8; 3]) {
    for (i, c) in text.chars().enumerate() {
        let gx = x + i as u32 * 6 * FONT_SCALE;
        for (row, bits) in glyph(c).iter().enumerate() {
            for col in 0..5u32 {
                if bits & (0x10 >> col) != 0 {
                    let px = gx + col * FONT_SCALE;
                    let py = y + row as u32 * FONT_SCALE;
                    fill(img, px, py, px + FONT_SCALE - 1, py + FONT_SCALE - 1, color);
                }
            }
        }
    }
}

/// A labelled button; returns its box `[x1, y1, x2, y2]`.
fn button(img: &mut RgbImage, x: u32, y: u32, label: &str) -> [u32; 4] {
    let w = label.len() as u32 * 6 * FONT_SCALE + 2 * 8;
    let h = 7 * FONT_SCALE + 2 * 7;
    fill(img, x, y, x + w - 1, y + h - 1, [90, 90, 90]);
    fill(img, x + 1, y + 1, x + w - 2, y + h - 2, [225, 225, 230]);
    draw_text(img, x + 8, y + 7, label, [20, 20, 20]);
    [x, y, x + w - 1, y + h - 1]
}

/// A solid square icon; returns its box.
fn icon(img: &mut RgbImage, x: u32, y: u32, color: [u8; 3]) -> [u32; 4] {
    let side = 28;
    fill(img, x, y, x + side - 1, y + side - 1, color);
    [x, y, x + side - 1, y + side - 1]
}

/// The sample: `(file name, image)` pairs and the JSONL text of its records. Layouts come
/// from a fixed table, so the output is the same on every machine.
pub fn synthetic_sample() -> (Vec<(String, RgbImage)>, String) {
    const SCREENS: [([&str; 4], [u8; 3], &str); 4] = [
        (["OK", "CANCEL", "HELP", "SAVE"], [200, 40, 40], "red"),
        (["OPEN", "CLOSE", "PRINT", "QUIT"], [40, 160, 60], "green"),
        (["NEXT", "BACK", "SAVE", "CANCEL"], [40, 80, 200], "blue"),
        (["PRINT", "HELP", "OK", "EXIT"], [230, 170, 20], "yellow"),
    ];
    // Where the four buttons and the icon go on each screen: varied, never overlapping.
    const SPOTS: [[(u32, u32); 5]; 4] = [
        [(30, 60), (250, 60), (30, 200), (250, 200), (420, 20)],
        [(300, 40), (60, 120), (300, 220), (40, 240), (200, 150)],
        [(180, 30), (20, 160), (320, 130), (180, 250), (30, 30)],
        [(40, 40), (330, 90), (150, 180), (320, 240), (420, 250)],
    ];
    let mut images = Vec::new();
    let mut jsonl = String::new();
    for (i, ((labels, icon_color, icon_name), spots)) in SCREENS.iter().zip(SPOTS).enumerate() {
        let mut img = RgbImage::from_pixel(SCREEN.0, SCREEN.1, Rgb([245, 244, 240]));
        fill(&mut img, 0, 0, SCREEN.0 - 1, 17, [60, 70, 90]);
        let boxes: Vec<[u32; 4]> = labels
            .iter()
            .zip(spots)
            .map(|(label, (x, y))| button(&mut img, x, y, label))
            .collect();
        let icon_box = icon(&mut img, spots[4].0, spots[4].1, *icon_color);
        let name = format!("screen-{}.png", i + 1);
        // Two buttons and the icon of each screen are targets.
        for (target, kind, instruction) in [
            (boxes[0], "text", format!("click the {} button", labels[0])),
            (boxes[3], "text", format!("click the {} button", labels[3])),
            (
                icon_box,
                "icon",
                format!("click the {icon_name} square icon"),
            ),
        ] {
            let record = serde_json::json!({
                "image": name,
                "instruction": instruction,
                "bbox": target,
                "type": kind,
                "platform": "desktop",
            });
            jsonl.push_str(&record.to_string());
            jsonl.push('\n');
        }
        images.push((name, img));
    }
    (images, jsonl)
}
