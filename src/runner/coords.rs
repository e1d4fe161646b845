//! Coordinate targets (`xy:X,Y` points in the 0–1000 space of the screenshot the planner saw,
//! parsed by [`crate::moves::parse_target`]) mapped to the coordinates the input backend
//! expects.
//!
//! Qwen3-VL grounds in relative coordinates from 0 to 1000 over the image it was shown
//! (ARCHITECTURE.md, decision 5). The mapping uses the size of the *captured image* and the monitor's
//! origin, never the OS's logical monitor size: on X11 with a scale factor, xcap reports the
//! monitor's width divided by the scale while its capture has the physical size, and X11 input
//! (XTest, through enigo) is in physical root-window pixels.

use crate::error::{Error, Result};
use crate::moves::{RelativePoint, COORDINATE_MAX};

/// Where a screenshot lies on the input backend's coordinate plane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScreenGeometry {
    /// The monitor's left edge in input coordinates (physical pixels on X11 and Windows).
    pub origin_x: i32,
    /// The monitor's top edge in input coordinates.
    pub origin_y: i32,
    /// Width of the captured image in pixels.
    pub image_width: u32,
    /// Height of the captured image in pixels.
    pub image_height: u32,
    /// Input coordinate units per image pixel: 1.0 where input is in physical pixels (X11,
    /// Windows), `1 / scale_factor` on macOS, where input events are in points.
    pub input_units_per_pixel: f64,
}

/// A point in the input backend's coordinates (absolute, across all monitors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InputPoint {
    /// Horizontal input coordinate.
    pub x: i32,
    /// Vertical input coordinate.
    pub y: i32,
}

impl ScreenGeometry {
    /// A geometry with physical input coordinates (`input_units_per_pixel` = 1).
    pub fn physical(origin_x: i32, origin_y: i32, image_width: u32, image_height: u32) -> Self {
        Self {
            origin_x,
            origin_y,
            image_width,
            image_height,
            input_units_per_pixel: 1.0,
        }
    }

    /// Maps a relative point to input coordinates.
    ///
    /// The pixel is `round(v * size / 1000)`, clamped to the last pixel so that 1000 stays on
    /// the monitor (1000 names the far edge, one past the last pixel). The rounding error is at
    /// most half a pixel plus `size / 2000`, under 1 px on any monitor up to 2000 px.
    pub fn to_input(&self, point: RelativePoint) -> Result<InputPoint> {
        if self.image_width == 0 || self.image_height == 0 {
            return Err(Error::runner(format!(
                "cannot map {point:?}: the captured image is {}x{}",
                self.image_width, self.image_height
            )));
        }
        let px = scale_axis(point.x, self.image_width);
        let py = scale_axis(point.y, self.image_height);
        let x = f64::from(self.origin_x) + px * self.input_units_per_pixel;
        let y = f64::from(self.origin_y) + py * self.input_units_per_pixel;
        Ok(InputPoint {
            x: x.round() as i32,
            y: y.round() as i32,
        })
    }

    /// The inverse of [`ScreenGeometry::to_input`] for a pixel of the captured image: the
    /// relative point a planner would name for image pixel `(px, py)`.
    pub fn relative_of_pixel(&self, px: u32, py: u32) -> RelativePoint {
        let rel = |p: u32, size: u32| -> u32 {
            if size == 0 {
                return 0;
            }
            let v = (f64::from(p) * f64::from(COORDINATE_MAX) / f64::from(size)).round();
            (v as u32).min(COORDINATE_MAX)
        };
        RelativePoint {
            x: rel(px, self.image_width),
            y: rel(py, self.image_height),
        }
    }

    /// The screenshot pixel (fractional) at an input point: the inverse of the origin and
    /// scale part of [`ScreenGeometry::to_input`]. Accessibility APIs report bounds in input
    /// coordinates; this puts them in the planner's pixel space.
    pub fn pixel_of_input(&self, p: InputPoint) -> (f64, f64) {
        let units = if self.input_units_per_pixel > 0.0 {
            self.input_units_per_pixel
        } else {
            1.0
        };
        (
            f64::from(p.x - self.origin_x) / units,
            f64::from(p.y - self.origin_y) / units,
        )
    }

    /// The input point of screenshot pixel `(px, py)` (which may lie off the image).
    pub fn input_of_pixel(&self, px: i32, py: i32) -> InputPoint {
        let x = f64::from(self.origin_x) + f64::from(px) * self.input_units_per_pixel;
        let y = f64::from(self.origin_y) + f64::from(py) * self.input_units_per_pixel;
        InputPoint {
            x: x.round() as i32,
            y: y.round() as i32,
        }
    }

    /// Whether an input point lies on this monitor.
    pub fn contains(&self, p: InputPoint) -> bool {
        let w = f64::from(self.image_width) * self.input_units_per_pixel;
        let h = f64::from(self.image_height) * self.input_units_per_pixel;
        let dx = f64::from(p.x - self.origin_x);
        let dy = f64::from(p.y - self.origin_y);
        dx >= 0.0 && dy >= 0.0 && dx < w && dy < h
    }
}

/// Pixel position along one axis of `size` pixels for relative coordinate `v`.
fn scale_axis(v: u32, size: u32) -> f64 {
    let px = (f64::from(v) * f64::from(size) / f64::from(COORDINATE_MAX)).round();
    px.min(f64::from(size - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_uses_image_size_and_origin_and_clamps_far_edge() -> Result<()> {
        let g = ScreenGeometry::physical(1920, 0, 2560, 1440);
        assert_eq!(
            g.to_input(RelativePoint { x: 0, y: 0 })?,
            InputPoint { x: 1920, y: 0 }
        );
        assert_eq!(
            g.to_input(RelativePoint { x: 500, y: 500 })?,
            InputPoint {
                x: 1920 + 1280,
                y: 720
            }
        );
        assert_eq!(
            g.to_input(RelativePoint { x: 1000, y: 1000 })?,
            InputPoint {
                x: 1920 + 2559,
                y: 1439
            }
        );
        Ok(())
    }

    #[test]
    fn mapping_round_trips_every_pixel_within_one_pixel() -> Result<()> {
        for (w, h) in [(1920u32, 1080u32), (1280, 800), (3840, 2160)] {
            let g = ScreenGeometry::physical(0, 0, w, h);
            for px in (0..w).step_by(7) {
                let rel = g.relative_of_pixel(px, px % h);
                let back = g.to_input(rel)?;
                let err = (back.x - px as i32).abs();
                // 3840 px wide: 1000 steps cover ~3.84 px each, so allow half of that.
                let tol = (w as i32 + 1999) / 2000;
                assert!(err <= tol, "{w}x{h}: px {px} -> {rel:?} -> {back:?}");
            }
        }
        Ok(())
    }

    #[test]
    fn input_and_pixel_mappings_are_inverse() {
        let g = ScreenGeometry {
            origin_x: 1440,
            origin_y: 0,
            image_width: 2880,
            image_height: 1800,
            input_units_per_pixel: 0.5,
        };
        assert_eq!(
            g.pixel_of_input(InputPoint { x: 1540, y: 50 }),
            (200.0, 100.0)
        );
        assert_eq!(g.input_of_pixel(200, 100), InputPoint { x: 1540, y: 50 });
    }

    #[test]
    fn logical_input_scale_maps_into_points() -> Result<()> {
        let g = ScreenGeometry {
            origin_x: 0,
            origin_y: 0,
            image_width: 2880,
            image_height: 1800,
            input_units_per_pixel: 0.5,
        };
        assert_eq!(
            g.to_input(RelativePoint { x: 500, y: 500 })?,
            InputPoint { x: 720, y: 450 }
        );
        Ok(())
    }
}
