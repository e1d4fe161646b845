//! Screenshots of one monitor with xcap, and the focused window's app name and title.

use std::io::Cursor;

use image::RgbaImage;
use xcap::{Monitor, Window};

use super::coords::ScreenGeometry;
use crate::error::{Error, Result};

/// One observation of the screen.
#[derive(Debug, Clone)]
pub struct Capture {
    /// The captured monitor, in physical pixels.
    pub image: RgbaImage,
    /// Where the image lies in input coordinates.
    pub geometry: ScreenGeometry,
    /// The focused window's application (WM class on X11), empty when unknown.
    pub active_app: String,
    /// The focused window's title, empty when unknown.
    pub window_title: String,
}

impl Capture {
    /// The screenshot as PNG bytes, as planners receive it.
    pub fn png(&self) -> Result<Vec<u8>> {
        encode_png(&self.image)
    }
}

/// Encodes an RGBA image as PNG, favouring speed over size: the PNG is handed to a local
/// planner (and written to traces), never sent over a network, and encoding sits on every turn's
/// path.
pub fn encode_png(image: &RgbaImage) -> Result<Vec<u8>> {
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    use image::ImageEncoder;
    let mut out = Cursor::new(Vec::new());
    PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Sub)
        .write_image(
            image.as_raw(),
            image.width(),
            image.height(),
            image::ExtendedColorType::Rgba8,
        )
        .map_err(|e| Error::image_caused("encoding the screenshot as PNG", e))?;
    Ok(out.into_inner())
}

/// A monitor as listed for `--monitor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorInfo {
    /// Index to pass as `--monitor`.
    pub index: usize,
    /// The output's name (`HDMI-1`, `screen` on Xvfb).
    pub name: String,
    /// Whether the system marks it primary.
    pub primary: bool,
    /// Left edge in logical coordinates as xcap reports them.
    pub x: i32,
    /// Top edge in logical coordinates as xcap reports them.
    pub y: i32,
    /// Logical width as xcap reports it (the capture may be larger on scaled X11 screens).
    pub width: u32,
    /// Logical height as xcap reports it.
    pub height: u32,
}

/// Checks that a display server is reachable by name before touching xcap or enigo, so the
/// most common setup mistake gets the clearest message.
pub fn check_display_env() -> Result<()> {
    #[cfg(all(unix, not(target_os = "macos")))]
    {
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
        if !set("DISPLAY") && !set("WAYLAND_DISPLAY") {
            return Err(Error::runner(
                "no display: neither DISPLAY nor WAYLAND_DISPLAY is set; run inside a desktop \
                 session, or start a virtual one (e.g. `Xvfb :99 -screen 0 1920x1080x24 &` and \
                 `DISPLAY=:99`)",
            ));
        }
    }
    Ok(())
}

fn on_wayland() -> bool {
    let var = |k: &str| std::env::var(k).unwrap_or_default().to_lowercase();
    var("XDG_SESSION_TYPE") == "wayland" || var("WAYLAND_DISPLAY").contains("wayland")
}

fn all_monitors() -> Result<Vec<Monitor>> {
    check_display_env()?;
    let monitors = Monitor::all().map_err(|e| {
        let display = std::env::var("DISPLAY").unwrap_or_default();
        Error::runner_caused(format!("cannot list monitors on display {display:?}"), e)
    })?;
    if monitors.is_empty() {
        return Err(Error::runner(
            "no monitor found: the display server reports no active output",
        ));
    }
    Ok(monitors)
}

/// Lists the monitors `--monitor` can choose from.
pub fn list_monitors() -> Result<Vec<MonitorInfo>> {
    all_monitors()?
        .iter()
        .enumerate()
        .map(|(index, m)| monitor_info(index, m))
        .collect()
}

fn monitor_info(index: usize, m: &Monitor) -> Result<MonitorInfo> {
    let err = |what: &str, e: xcap::XCapError| {
        Error::runner_caused(format!("monitor {index}: {what}"), e)
    };
    Ok(MonitorInfo {
        index,
        name: m.name().map_err(|e| err("name", e))?,
        primary: m.is_primary().unwrap_or(false),
        x: m.x().map_err(|e| err("x", e))?,
        y: m.y().map_err(|e| err("y", e))?,
        width: m.width().map_err(|e| err("width", e))?,
        height: m.height().map_err(|e| err("height", e))?,
    })
}

/// Captures one monitor.
#[derive(Debug, Clone)]
pub struct ScreenCapturer {
    monitor: Monitor,
    info: MonitorInfo,
}

impl ScreenCapturer {
    /// Opens monitor `index`, or the primary monitor (else the first) when `None`.
    pub fn open(index: Option<usize>) -> Result<Self> {
        let monitors = all_monitors()?;
        let count = monitors.len();
        let index = match index {
            Some(i) if i < count => i,
            Some(i) => {
                return Err(Error::runner(format!(
                    "monitor {i} does not exist: this display has {count} monitor(s), \
                     indices 0..{}",
                    count - 1
                )))
            }
            None => monitors
                .iter()
                .position(|m| m.is_primary().unwrap_or(false))
                .unwrap_or(0),
        };
        let monitor = monitors[index].clone();
        let info = monitor_info(index, &monitor)?;
        Ok(Self { monitor, info })
    }

    /// The chosen monitor.
    pub fn monitor(&self) -> &MonitorInfo {
        &self.info
    }

    /// Takes a screenshot and reads the focused window.
    pub fn capture(&mut self) -> Result<Capture> {
        let image = self.monitor.capture_image().map_err(|e| {
            if on_wayland() {
                Error::runner_caused(
                    "screen capture denied or unavailable (Wayland screencast portal; allow \
                     screen sharing when the portal asks, or run in an X11 session)",
                    e,
                )
            } else {
                Error::runner_caused(
                    format!(
                        "screen capture of monitor {} ({}) failed",
                        self.info.index, self.info.name
                    ),
                    e,
                )
            }
        })?;
        if image.width() == 0 || image.height() == 0 {
            return Err(Error::runner(format!(
                "screen capture of monitor {} returned an empty image",
                self.info.index
            )));
        }
        let geometry = self.geometry(image.width(), image.height());
        let (active_app, window_title) = focused_window();
        Ok(Capture {
            image,
            geometry,
            active_app,
            window_title,
        })
    }

    fn geometry(&self, image_width: u32, image_height: u32) -> ScreenGeometry {
        let scale = f64::from(self.monitor.scale_factor().unwrap_or(1.0));
        let scale = if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            1.0
        };
        if cfg!(target_os = "macos") {
            // macOS input events are in points: xcap's origin is already logical, and one image
            // pixel is 1/scale points.
            ScreenGeometry {
                origin_x: self.info.x,
                origin_y: self.info.y,
                image_width,
                image_height,
                input_units_per_pixel: 1.0 / scale,
            }
        } else {
            // On X11 xcap divides the monitor origin by the scale factor; XTest wants physical
            // root-window pixels, so multiply back (exact at scale 1, within a pixel otherwise).
            ScreenGeometry::physical(
                (f64::from(self.info.x) * scale).round() as i32,
                (f64::from(self.info.y) * scale).round() as i32,
                image_width,
                image_height,
            )
        }
    }
}

/// The window manager's client windows, as (id, focused), in stacking order; empty where
/// there is no window manager. For the runner's settle check.
pub fn window_list() -> Vec<(u32, bool)> {
    Window::all()
        .map(|windows| {
            windows
                .iter()
                .map(|w| (w.id().unwrap_or(0), w.is_focused().unwrap_or(false)))
                .collect()
        })
        .unwrap_or_default()
}

/// The focused window's app name and title, best effort: without a window manager (Xvfb) or
/// without `_NET_ACTIVE_WINDOW` there is no focused window to report.
fn focused_window() -> (String, String) {
    let Ok(windows) = Window::all() else {
        return (String::new(), String::new());
    };
    windows
        .iter()
        .find(|w| w.is_focused().unwrap_or(false))
        .map(|w| {
            (
                w.app_name().unwrap_or_default(),
                w.title().unwrap_or_default(),
            )
        })
        .unwrap_or_default()
}
