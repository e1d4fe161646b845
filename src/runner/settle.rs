//! Waiting for the application after a batch's input, before the next observation.
//!
//! Two frames alike are not enough: an application may show nothing for a second after a click
//! and then map a window (a dialog after a computation, a program starting). So how long the
//! runner watches depends on what the batch did ([`SettleKind`]):
//!
//! - **Edit** (typing, arrow keys, scrolling, a click on a text field or a check box): the
//!   application answers at once; settled when the screen has been still for `quiet_ms`.
//! - **Commit** (a click on a button, menu item or link, Enter, a key combination, a drag): it
//!   may open or close a window later. Settled when the screen has been still for `quiet_ms`
//!   *and* either the set of top-level windows changed (the reaction came: a window opened,
//!   closed or took focus) or `react_ms` passed without one.
//!
//! Every wait ends at `max_ms`, at the run's deadline and at Ctrl-C. The window set is read
//! where the desktop can tell (the accessibility tree's top-level windows, the window
//! manager's client list); a desktop that cannot tell still gets the frame checks and the
//! `react_ms` watch. [`Settler`] is the decision alone, over a clock the caller supplies, so it
//! is tested without a screen.

use cel_contracts::PlannedAction;

use super::options::SettleOptions;

/// How long a batch's effect may take to show (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SettleKind {
    /// The effect shows at once.
    Edit,
    /// The effect may be a window that opens or closes later.
    Commit,
}

/// Roles (as the element table names them) whose click edits in place: focusing a field,
/// toggling a box, moving a slider, selecting a row.
const EDIT_ROLES: &[&str] = &[
    "text",
    "spin",
    "slider",
    "checkbox",
    "radio",
    "toggle",
    "listitem",
    "treeitem",
    "cell",
    "label",
    "heading",
    "paragraph",
];

/// The settle kind of one executed action; `role` is the clicked element's role when the
/// runner knows it (an element id, or the element under an `xy:` point).
pub fn settle_kind(action: &PlannedAction, role: Option<&str>) -> SettleKind {
    match action {
        PlannedAction::Click { .. } => match role {
            Some(r) if EDIT_ROLES.contains(&normalize_role(r).as_str()) => SettleKind::Edit,
            _ => SettleKind::Commit,
        },
        PlannedAction::Key { key } => {
            let key = key.trim().to_ascii_lowercase();
            if matches!(
                key.as_str(),
                "enter" | "return" | "kp_enter" | "escape" | "esc"
            ) || key.contains('+')
            {
                SettleKind::Commit
            } else {
                SettleKind::Edit
            }
        }
        PlannedAction::KeyCombo { .. } | PlannedAction::Drag { .. } => SettleKind::Commit,
        PlannedAction::Batch { actions } => actions
            .iter()
            .map(|a| settle_kind(a, None))
            .max()
            .unwrap_or(SettleKind::Edit),
        _ => SettleKind::Edit,
    }
}

fn normalize_role(role: &str) -> String {
    role.trim()
        .to_ascii_lowercase()
        .replace([' ', '-', '_'], "")
}

/// The settle decision for one batch, fed one observation per poll.
#[derive(Debug, Clone)]
pub struct Settler {
    options: SettleOptions,
    kind: SettleKind,
    /// Milliseconds since the input when the screen or the window set last changed.
    last_change_ms: u64,
    /// Whether the window set changed since the input.
    reacted: bool,
}

/// What [`Settler::observe`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleStep {
    /// Look again after `poll_ms`.
    Wait,
    /// The application has settled.
    Settled,
    /// `max_ms` passed first.
    TimedOut,
}

impl Settler {
    /// A settler for a batch of `kind`, its clock at 0 at the end of the input.
    pub fn new(options: SettleOptions, kind: SettleKind) -> Self {
        Settler {
            options,
            kind,
            last_change_ms: 0,
            reacted: false,
        }
    }

    /// One observation at `now_ms` after the input: whether the frame differs from the last
    /// one, and whether the window set does.
    pub fn observe(
        &mut self,
        now_ms: u64,
        frame_changed: bool,
        windows_changed: bool,
    ) -> SettleStep {
        if frame_changed || windows_changed {
            self.last_change_ms = now_ms;
        }
        self.reacted |= windows_changed;
        let quiet = now_ms.saturating_sub(self.last_change_ms) >= self.options.quiet_ms;
        let watched = match self.kind {
            SettleKind::Edit => true,
            SettleKind::Commit => self.reacted || now_ms >= self.options.react_ms,
        };
        if quiet && watched {
            SettleStep::Settled
        } else if now_ms >= self.options.max_ms {
            SettleStep::TimedOut
        } else {
            SettleStep::Wait
        }
    }

    /// Whether the window set changed since the input.
    pub fn reacted(&self) -> bool {
        self.reacted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds a timeline of (ms, frame changed, windows changed) polls; returns when and how
    /// it ended.
    fn run(kind: SettleKind, polls: &[(u64, bool, bool)]) -> (u64, SettleStep) {
        let mut s = Settler::new(SettleOptions::default(), kind);
        for &(t, f, w) in polls {
            match s.observe(t, f, w) {
                SettleStep::Wait => continue,
                done => return (t, done),
            }
        }
        (u64::MAX, SettleStep::Wait)
    }

    /// Polls every 100 ms up to `until`, with a frame change at the given times and a window
    /// change at the others given.
    fn timeline(until: u64, frames: &[u64], windows: &[u64]) -> Vec<(u64, bool, bool)> {
        (1..=until / 100)
            .map(|i| i * 100)
            .map(|t| (t, frames.contains(&t), windows.contains(&t)))
            .collect()
    }

    #[test]
    fn typing_settles_as_soon_as_the_screen_is_still() {
        let (t, step) = run(SettleKind::Edit, &timeline(10_000, &[100], &[]));
        assert_eq!(step, SettleStep::Settled);
        assert_eq!(t, 100 + SettleOptions::default().quiet_ms);
    }

    #[test]
    fn a_click_waits_for_a_window_that_maps_late_then_for_it_to_be_still() {
        // The button's pressed look at once, nothing for 1.4 s, then a window maps and
        // draws for 300 ms.
        let polls = timeline(10_000, &[100, 1500, 1600, 1700], &[1500]);
        let (t, step) = run(SettleKind::Commit, &polls);
        assert_eq!(step, SettleStep::Settled);
        assert_eq!(t, 1700 + SettleOptions::default().quiet_ms);
    }

    #[test]
    fn a_click_with_no_reaction_is_watched_for_react_ms() {
        let (t, step) = run(SettleKind::Commit, &timeline(10_000, &[100], &[]));
        assert_eq!(step, SettleStep::Settled);
        assert_eq!(t, SettleOptions::default().react_ms);
    }

    #[test]
    fn a_window_change_ends_the_watch_early() {
        let (t, step) = run(SettleKind::Commit, &timeline(10_000, &[200], &[200]));
        assert_eq!(step, SettleStep::Settled);
        assert!(t < SettleOptions::default().react_ms, "{t}");
    }

    #[test]
    fn a_screen_that_never_stops_changing_times_out_at_max_ms() {
        let frames: Vec<u64> = (1..=200).map(|i| i * 100).collect();
        let (t, step) = run(SettleKind::Edit, &timeline(20_000, &frames, &[]));
        assert_eq!(step, SettleStep::TimedOut);
        assert_eq!(t, SettleOptions::default().max_ms);
    }

    #[test]
    fn clicks_on_fields_and_boxes_are_edits_and_on_buttons_commits() {
        let click = PlannedAction::Click {
            target_id: "x".into(),
            expect_after: None,
        };
        assert_eq!(settle_kind(&click, Some("text")), SettleKind::Edit);
        assert_eq!(settle_kind(&click, Some("check_box")), SettleKind::Edit);
        assert_eq!(settle_kind(&click, Some("button")), SettleKind::Commit);
        assert_eq!(settle_kind(&click, Some("menuitem")), SettleKind::Commit);
        assert_eq!(settle_kind(&click, None), SettleKind::Commit);
        let key = |k: &str| PlannedAction::Key { key: k.into() };
        assert_eq!(settle_kind(&key("Return"), None), SettleKind::Commit);
        assert_eq!(settle_kind(&key("down"), None), SettleKind::Edit);
        let typing = PlannedAction::Type {
            target_id: None,
            text: "hi".into(),
        };
        assert_eq!(settle_kind(&typing, None), SettleKind::Edit);
    }
}
