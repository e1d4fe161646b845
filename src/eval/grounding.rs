//! Click grounding, ScreenSpot style: a screenshot, an instruction, the target's bounding box;
//! the model is asked for one click and scores a hit when the point lies in the box.
//!
//! Records are JSON Lines (or one JSON array, as ScreenSpot-v2 ships its annotation files):
//!
//! ```json
//! {"image": "screens/s01.png", "instruction": "click OK", "bbox": [x1, y1, x2, y2],
//!  "type": "text", "platform": "desktop"}
//! ```
//!
//! `image` is relative to the data file (or to `--images DIR`); `bbox` is in image pixels,
//! corners inclusive. ScreenSpot's own field names are read too: `img_filename`, `data_type`,
//! `data_source`; its boxes are `[x, y, width, height]`, which [`BoxFormat::Xywh`] reads.
//!
//! The model sees the screenshot and the instruction as the goal, with no elements and
//! coordinate targets on, and a grammar that allows only `click` steps; its `xy:X,Y` on the
//! 0–1000 grid maps to image pixel `round(X · width / 1000)` (clamped to the last pixel), the
//! runner's own mapping.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cel_contracts::{NextMove, PlannedAction};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::report::{wilson_interval, Z_95};
use crate::error::{Error, Result};
use crate::moves::parse_point;

/// How a record's `bbox` is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BoxFormat {
    /// `[x1, y1, x2, y2]`, corners (Sightline's sample).
    #[default]
    Xyxy,
    /// `[x, y, width, height]` (ScreenSpot's files).
    Xywh,
}

impl std::str::FromStr for BoxFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "xyxy" => Ok(BoxFormat::Xyxy),
            "xywh" => Ok(BoxFormat::Xywh),
            _ => Err(Error::invalid_input(format!(
                "--bbox {s}: expected xyxy or xywh"
            ))),
        }
    }
}

/// A target box in image pixels, corners inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PixelBox {
    /// Left.
    pub x1: f64,
    /// Top.
    pub y1: f64,
    /// Right.
    pub x2: f64,
    /// Bottom.
    pub y2: f64,
}

impl PixelBox {
    /// Whether pixel `(x, y)` lies inside (edges included).
    pub fn contains(&self, x: f64, y: f64) -> bool {
        x >= self.x1 && x <= self.x2 && y >= self.y1 && y <= self.y2
    }
}

/// One grounding example.
#[derive(Debug, Clone, PartialEq)]
pub struct GroundingRecord {
    /// Line (or array index) in the data file, from 1.
    pub line: usize,
    /// The screenshot.
    pub image: PathBuf,
    /// What to click.
    pub instruction: String,
    /// Where the target is.
    pub target: PixelBox,
    /// `text`, `icon`, … (`unknown` when absent).
    pub kind: String,
    /// `desktop`, `web`, `mobile`, … (`unknown` when absent).
    pub platform: String,
}

/// Reads a data file: JSON Lines, or a JSON array. Images resolve against `images_dir` or the
/// data file's directory. A bad record is an error naming the file and line.
pub fn read_records(
    path: &Path,
    images_dir: Option<&Path>,
    format: BoxFormat,
) -> Result<Vec<GroundingRecord>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let base = images_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| path.parent().unwrap_or(Path::new(".")).to_path_buf());
    let values: Vec<(usize, Value)> = if text.trim_start().starts_with('[') {
        let array: Vec<Value> = serde_json::from_str(&text).map_err(|e| {
            Error::invalid_input_caused(format!("{}: not a JSON array", path.display()), e)
        })?;
        array
            .into_iter()
            .enumerate()
            .map(|(i, v)| (i + 1, v))
            .collect()
    } else {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v = serde_json::from_str(line).map_err(|e| {
                let at = format!("{} line {}: not JSON", path.display(), i + 1);
                Error::invalid_input_caused(at, e)
            })?;
            out.push((i + 1, v));
        }
        out
    };
    let records: Vec<GroundingRecord> = values
        .into_iter()
        .map(|(line, v)| record_of(&v, line, &base, format))
        .collect::<std::result::Result<_, String>>()
        .map_err(|e| Error::invalid_input(format!("{} {e}", path.display())))?;
    if records.is_empty() {
        return Err(Error::invalid_input(format!(
            "{}: no grounding records",
            path.display()
        )));
    }
    Ok(records)
}

fn record_of(
    v: &Value,
    line: usize,
    base: &Path,
    format: BoxFormat,
) -> std::result::Result<GroundingRecord, String> {
    let bad = |why: &str| format!("line {line}: {why}");
    let text = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| v.get(*k).and_then(Value::as_str))
            .map(str::to_string)
    };
    let image = text(&["image", "img_filename"]).ok_or_else(|| bad("no image"))?;
    let instruction = text(&["instruction"]).ok_or_else(|| bad("no instruction"))?;
    if instruction.trim().is_empty() {
        return Err(bad("the instruction is empty"));
    }
    let b: Vec<f64> = v
        .get("bbox")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .ok_or_else(|| bad("no bbox"))?;
    let [a, b2, c, d] = b[..] else {
        return Err(bad("bbox must be four numbers"));
    };
    let target = match format {
        BoxFormat::Xyxy => PixelBox {
            x1: a,
            y1: b2,
            x2: c,
            y2: d,
        },
        BoxFormat::Xywh => PixelBox {
            x1: a,
            y1: b2,
            x2: a + c,
            y2: b2 + d,
        },
    };
    if !(target.x1 <= target.x2 && target.y1 <= target.y2 && target.x1 >= 0.0 && target.y1 >= 0.0) {
        return Err(bad(&format!(
            "bbox {:?} is not a box with x1 ≤ x2, y1 ≤ y2 (for [x, y, w, h] boxes pass --bbox xywh)",
            b
        )));
    }
    Ok(GroundingRecord {
        line,
        image: base.join(image),
        instruction,
        target,
        kind: text(&["type", "data_type"]).unwrap_or_else(|| "unknown".into()),
        platform: text(&["platform", "data_source"]).unwrap_or_else(|| "unknown".into()),
    })
}

/// Maps a point of the 0–1000 grid to an image pixel, as the runner maps clicks.
pub fn grid_to_pixel(x: u32, y: u32, width: u32, height: u32) -> (f64, f64) {
    let axis = |v: u32, size: u32| {
        let px = (f64::from(v) * f64::from(size) / 1000.0).round();
        px.min(f64::from(size.saturating_sub(1)))
    };
    (axis(x, width), axis(y, height))
}

/// The click point of a move, in image pixels: the first step's `click` target. `Err` says
/// what the move was instead.
pub fn click_point(
    mv: &NextMove,
    width: u32,
    height: u32,
) -> std::result::Result<(f64, f64), String> {
    let NextMove::Batch { steps, .. } = mv else {
        let kind = serde_json::to_value(mv)
            .ok()
            .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_default();
        return Err(format!("no click: the move was {kind}"));
    };
    match steps.first().map(|s| &s.action) {
        Some(PlannedAction::Click { target_id, .. }) => parse_point(target_id)
            .map(|p| grid_to_pixel(p.x, p.y, width, height))
            .ok_or_else(|| format!("no click point: target {target_id:?} is not xy:X,Y")),
        Some(other) => Err(format!(
            "no click: the first step was {}",
            serde_json::to_value(other)
                .ok()
                .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default()
        )),
        None => Err("no click: an empty batch".into()),
    }
}

/// One record's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundingResult {
    /// The record's line.
    pub line: usize,
    /// The instruction.
    pub instruction: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its platform.
    pub platform: String,
    /// The point clicked, in image pixels, if any.
    pub point: Option<(f64, f64)>,
    /// The target box.
    pub target: PixelBox,
    /// The point lies in the box.
    pub hit: bool,
    /// Why there is no point (the model did not click), or the planner's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Time of the planner call, milliseconds.
    pub ms: f64,
}

/// Accuracy of a group of records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accuracy {
    /// Records.
    pub n: u32,
    /// Hits.
    pub hits: u32,
    /// `hits / n`.
    pub accuracy: f64,
    /// Wilson 95% interval.
    pub ci95: (f64, f64),
}

impl Accuracy {
    fn of<'a>(results: impl Iterator<Item = &'a GroundingResult>) -> Self {
        let (mut n, mut hits) = (0u32, 0u32);
        for r in results {
            n += 1;
            hits += u32::from(r.hit);
        }
        Accuracy {
            n,
            hits,
            accuracy: if n == 0 {
                0.0
            } else {
                f64::from(hits) / f64::from(n)
            },
            ci95: wilson_interval(u64::from(hits), u64::from(n), Z_95),
        }
    }
}

/// The grounding report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundingSummary {
    /// The model.
    pub model: String,
    /// All records.
    pub overall: Accuracy,
    /// By `type`.
    pub by_type: BTreeMap<String, Accuracy>,
    /// By `platform`.
    pub by_platform: BTreeMap<String, Accuracy>,
    /// Records where the model gave no click point.
    pub no_click: u32,
    /// Mean planner time per record, milliseconds.
    pub mean_ms: f64,
}

impl GroundingSummary {
    /// Summarizes results.
    pub fn of(model: &str, results: &[GroundingResult]) -> Self {
        let group = |key: fn(&GroundingResult) -> &str| {
            let mut keys: Vec<&str> = results.iter().map(key).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .map(|k| {
                    (
                        k.to_string(),
                        Accuracy::of(results.iter().filter(|r| key(r) == k)),
                    )
                })
                .collect()
        };
        GroundingSummary {
            model: model.to_string(),
            overall: Accuracy::of(results.iter()),
            by_type: group(|r| &r.kind),
            by_platform: group(|r| &r.platform),
            no_click: results.iter().filter(|r| r.point.is_none()).count() as u32,
            mean_ms: if results.is_empty() {
                0.0
            } else {
                results.iter().map(|r| r.ms).sum::<f64>() / results.len() as f64
            },
        }
    }

    /// The report as text.
    pub fn table(&self) -> String {
        let line = |name: &str, a: &Accuracy| {
            format!(
                "{name:<16} {:>4}/{:<4} {:>6.1}%  (95% CI {:.1}–{:.1}%)\n",
                a.hits,
                a.n,
                100.0 * a.accuracy,
                100.0 * a.ci95.0,
                100.0 * a.ci95.1
            )
        };
        let mut s = format!("grounding accuracy, model {}\n", self.model);
        s += &line("overall", &self.overall);
        for (k, a) in &self.by_type {
            s += &line(&format!("type {k}"), a);
        }
        for (k, a) in &self.by_platform {
            s += &line(&format!("platform {k}"), a);
        }
        s += &format!(
            "no click point: {}; mean planner time {:.0} ms per record\n",
            self.no_click, self.mean_ms
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel_contracts::{Step, StepKind};

    fn click(target: &str) -> NextMove {
        NextMove::Batch {
            purpose: "p".into(),
            steps: vec![Step {
                purpose: "c".into(),
                kind: StepKind::Deterministic,
                action: PlannedAction::Click {
                    target_id: target.into(),
                    expect_after: None,
                },
            }],
        }
    }

    #[test]
    fn grid_points_map_to_pixels_and_score_against_boxes() -> std::result::Result<(), String> {
        // 640x400 image: xy:500,500 is pixel (320, 200); 1000 clamps to the last pixel.
        assert_eq!(grid_to_pixel(500, 500, 640, 400), (320.0, 200.0));
        assert_eq!(grid_to_pixel(1000, 1000, 640, 400), (639.0, 399.0));
        assert_eq!(grid_to_pixel(0, 0, 640, 400), (0.0, 0.0));
        let b = PixelBox {
            x1: 300.0,
            y1: 180.0,
            x2: 340.0,
            y2: 220.0,
        };
        let inside = click_point(&click("xy:500,500"), 640, 400)?;
        assert!(b.contains(inside.0, inside.1));
        // Edges count: (300, 180) is the box's corner; xy:469,450 → (300.16→300, 180).
        let edge = click_point(&click("xy:469,450"), 640, 400)?;
        assert_eq!(edge, (300.0, 180.0));
        assert!(b.contains(edge.0, edge.1));
        let outside = click_point(&click("xy:600,500"), 640, 400)?;
        assert!(!b.contains(outside.0, outside.1));
        let err = click_point(&NextMove::Fail { reason: "r".into() }, 640, 400)
            .err()
            .unwrap_or_default();
        assert!(err.contains("fail"), "{err}");
        let err = click_point(&click("e3"), 640, 400)
            .err()
            .unwrap_or_default();
        assert!(err.contains("e3"), "{err}");
        Ok(())
    }

    #[test]
    fn records_read_both_formats_and_screenspot_field_names() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io(Path::new("tmp"), e))?;
        let jsonl = dir.path().join("d.jsonl");
        std::fs::write(
            &jsonl,
            "{\"image\":\"a.png\",\"instruction\":\"click OK\",\"bbox\":[1,2,3,4],\"type\":\"text\"}\n\n",
        )
        .map_err(|e| Error::io(&jsonl, e))?;
        let r = read_records(&jsonl, None, BoxFormat::Xyxy)?;
        assert_eq!(r[0].image, dir.path().join("a.png"));
        assert_eq!(
            (r[0].kind.as_str(), r[0].platform.as_str()),
            ("text", "unknown")
        );
        let array = dir.path().join("ss.json");
        std::fs::write(
            &array,
            r#"[{"img_filename":"x.png","instruction":"close","bbox":[10,20,30,40],"data_type":"icon","data_source":"ios"}]"#,
        )
        .map_err(|e| Error::io(&array, e))?;
        let r = read_records(&array, Some(Path::new("/imgs")), BoxFormat::Xywh)?;
        assert_eq!(r[0].image, Path::new("/imgs/x.png"));
        assert_eq!(
            r[0].target,
            PixelBox {
                x1: 10.0,
                y1: 20.0,
                x2: 40.0,
                y2: 60.0
            }
        );
        assert_eq!(
            (r[0].kind.as_str(), r[0].platform.as_str()),
            ("icon", "ios")
        );
        std::fs::write(
            &jsonl,
            "{\"image\":\"a.png\",\"instruction\":\"i\",\"bbox\":[5,5,1,1]}\n",
        )
        .map_err(|e| Error::io(&jsonl, e))?;
        let err = read_records(&jsonl, None, BoxFormat::Xyxy)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("d.jsonl line 1") && err.contains("xywh"),
            "{err}"
        );
        Ok(())
    }

    #[test]
    fn summary_groups_by_type_and_platform() {
        let res = |kind: &str, hit: bool| GroundingResult {
            line: 1,
            instruction: "i".into(),
            kind: kind.into(),
            platform: "desktop".into(),
            point: hit.then_some((1.0, 1.0)),
            target: PixelBox {
                x1: 0.0,
                y1: 0.0,
                x2: 2.0,
                y2: 2.0,
            },
            hit,
            error: None,
            ms: 10.0,
        };
        let s = GroundingSummary::of(
            "m",
            &[res("text", true), res("text", false), res("icon", true)],
        );
        assert_eq!((s.overall.hits, s.overall.n), (2, 3));
        assert_eq!(s.by_type["text"].hits, 1);
        assert_eq!(s.by_type["icon"].accuracy, 1.0);
        assert_eq!(s.by_platform["desktop"].n, 3);
        assert_eq!(s.no_click, 1);
        assert!(s.table().contains("overall"));
    }
}
