//! Where a top-level window is on the X screen, for toolkits whose accessible extents are
//! relative to their window (GTK 4 on X11 reports its window at 0,0 and every widget from
//! there, whatever coordinate type is asked).
//!
//! The window is the X server's: a top-level window (a child of the root, or under a window
//! manager the client inside the frame it made) whose `_NET_WM_PID` is the application's
//! process and whose title is the accessible window's name, preferring one of the same size.
//! Its origin, translated to root coordinates, is added to the window's extents.

use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, MapState, Window};
use x11rb::rust_connection::RustConnection;

/// Longest window title read, in bytes.
const MAX_TITLE_BYTES: u32 = 1024;
/// How far the X window's size may differ from the accessible window's (a border, a shadow).
const SIZE_SLACK_PX: i32 = 64;

/// A lazily opened connection to the X server of `$DISPLAY`.
#[derive(Default)]
pub(super) struct XWindows {
    conn: Option<(RustConnection, Window)>,
}

struct TopLevel {
    title: String,
    pid: Option<u32>,
    origin: (i32, i32),
    size: (i32, i32),
}

impl XWindows {
    /// The screen origin of the top-level window titled `title` of process `pid` (any
    /// process when unknown), preferring one of `size`; `None` when there is no such window or
    /// no X server.
    pub fn origin_of(
        &mut self,
        title: &str,
        pid: Option<u32>,
        size: (i32, i32),
    ) -> Option<(i32, i32)> {
        if self.conn.is_none() {
            match x11rb::connect(None) {
                Ok((conn, screen)) => {
                    let root = conn.setup().roots.get(screen)?.root;
                    self.conn = Some((conn, root));
                }
                Err(e) => {
                    tracing::debug!("no X connection for window origins: {e}");
                    return None;
                }
            }
        }
        let (conn, root) = self.conn.as_ref()?;
        let windows = top_levels(conn, *root).ok()?;
        let candidates: Vec<&TopLevel> = windows
            .iter()
            .filter(|w| w.title == title && (pid.is_none() || w.pid.is_none() || w.pid == pid))
            .collect();
        let close = |w: &&&TopLevel| {
            (w.size.0 - size.0).abs() <= SIZE_SLACK_PX && (w.size.1 - size.1).abs() <= SIZE_SLACK_PX
        };
        candidates
            .iter()
            .find(close)
            .or(candidates.first())
            .map(|w| w.origin)
    }
}

/// The viewable windows with a title among the root's children and, under a window manager,
/// their children (the clients inside the frames).
fn top_levels(
    conn: &RustConnection,
    root: Window,
) -> Result<Vec<TopLevel>, x11rb::errors::ReplyError> {
    let net_wm_name = intern(conn, b"_NET_WM_NAME")?;
    let utf8 = intern(conn, b"UTF8_STRING")?;
    let net_wm_pid = intern(conn, b"_NET_WM_PID")?;
    let mut out = Vec::new();
    for frame in conn.query_tree(root)?.reply()?.children {
        let viewable = conn
            .get_window_attributes(frame)?
            .reply()
            .is_ok_and(|a| a.map_state == MapState::VIEWABLE);
        if !viewable {
            continue;
        }
        let mut candidates = vec![frame];
        if let Ok(tree) = conn.query_tree(frame)?.reply() {
            candidates.extend(tree.children);
        }
        for w in candidates {
            let title = window_title(conn, w, net_wm_name, utf8).unwrap_or_default();
            if title.is_empty() {
                continue;
            }
            let Ok(geometry) = conn.get_geometry(w)?.reply() else {
                continue;
            };
            let Ok(at) = conn.translate_coordinates(w, root, 0, 0)?.reply() else {
                continue;
            };
            let pid = conn
                .get_property(false, w, net_wm_pid, AtomEnum::CARDINAL, 0, 1)?
                .reply()
                .ok()
                .and_then(|p| p.value32().and_then(|mut v| v.next()));
            out.push(TopLevel {
                title,
                pid,
                origin: (i32::from(at.dst_x), i32::from(at.dst_y)),
                size: (i32::from(geometry.width), i32::from(geometry.height)),
            });
        }
    }
    Ok(out)
}

fn intern(conn: &RustConnection, name: &[u8]) -> Result<u32, x11rb::errors::ReplyError> {
    Ok(conn.intern_atom(false, name)?.reply()?.atom)
}

fn window_title(conn: &RustConnection, w: Window, net_wm_name: u32, utf8: u32) -> Option<String> {
    let read = |atom: u32, kind: u32| -> Option<String> {
        let reply = conn
            .get_property(false, w, atom, kind, 0, MAX_TITLE_BYTES / 4)
            .ok()?
            .reply()
            .ok()?;
        let text = String::from_utf8_lossy(&reply.value).into_owned();
        (!text.is_empty()).then_some(text)
    };
    read(net_wm_name, utf8).or_else(|| read(AtomEnum::WM_NAME.into(), AtomEnum::STRING.into()))
}
