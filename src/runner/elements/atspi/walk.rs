//! The walk of one capture: every showing window of the focused application, depth first,
//! within the [`ElementBudget`].
//!
//! What keeps a walk short on trees of thousands of nodes (a browser page):
//!
//! - A subtree that is not `showing` is skipped whole (toolkits hide children with their
//!   parent; a browser marks what is scrolled out of view as not showing).
//! - A **clip** follows the walk down: the extents of every scrolling container (scroll
//!   panes, viewports, a browser's frame, tables and lists) narrow it, and a subtree whose
//!   extents lie wholly outside it is skipped. Popups (menus, windows, tooltips) start over
//!   with the whole screen.
//! - Tables and lists with a Table interface are read row by row, only the rows in view
//!   ([`super::table`]); a container with more than [`LONG_CHILD_LIST`] children is searched
//!   for its first child in view, and read from there until one is below it.
//! - Below a kept element, text (labels, paragraphs) is part of its name and not listed again,
//!   and the walk does not go below controls whose children are their own parts (a button's
//!   label).

use std::time::Instant;

use atspi::{Role, State};

use super::bus::Bus;
use super::read::{self, InputRect, Place, Seen};
use super::table::{self, RowLimits};
use super::{Context, Frame, Node, WindowRoot};
use crate::runner::coords::ScreenGeometry;
use crate::runner::elements::labels::Found;
use crate::runner::elements::{ClickVia, ElementBudget, ElementState, NameSource, RawElement};

/// Children of one container beyond which only those in view are looked at.
const LONG_CHILD_LIST: usize = 64;

/// One capture's walk: what it found, how many nodes it looked at, whether a budget cut it.
pub(super) struct Walk<'a> {
    pub src: &'a Bus,
    pub geometry: &'a ScreenGeometry,
    pub budget: &'a ElementBudget,
    started: Instant,
    pub found: Vec<Found>,
    pub nodes: usize,
    pub truncated: bool,
    /// A document was still loading, or a browser's frame had no document yet.
    pub loading: bool,
}

impl<'a> Walk<'a> {
    pub fn new(
        src: &'a Bus,
        geometry: &'a ScreenGeometry,
        budget: &'a ElementBudget,
        started: Instant,
    ) -> Self {
        Self {
            src,
            geometry,
            budget,
            started,
            found: Vec::new(),
            nodes: 0,
            truncated: false,
            loading: false,
        }
    }

    /// The elements found, the nodes looked at, and whether a budget cut the walk short.
    pub fn finish(self) -> (Vec<Found>, usize, bool) {
        (self.found, self.nodes, self.truncated)
    }

    /// Starts over (the screen is read again after a document finished loading).
    pub fn restart(&mut self) {
        self.found.clear();
        self.truncated = false;
        self.loading = false;
    }

    /// Whether the walk must stop: out of time, or many more elements found than can be kept
    /// (four times the budget: labels and elements off the image are dropped afterwards).
    pub fn out_of_budget(&self) -> bool {
        self.found.len() >= self.budget.max_elements.saturating_mul(4)
            || self.started.elapsed() >= self.budget.max_time()
    }

    pub fn place(&self, ctx: &Context) -> Place<'a> {
        Place {
            toolkit: ctx.toolkit,
            geometry: self.geometry,
        }
    }

    /// Walks one top-level window.
    pub fn window(&mut self, window: &WindowRoot) -> zbus::Result<()> {
        let ctx = Context {
            toolkit: window.toolkit,
            frame: window.frame,
            clip: None,
            container: String::new(),
            inside_kept: false,
            in_row: false,
            in_combobox: false,
        };
        self.visit(&window.node, 0, &ctx)
    }

    /// Visits `node` and, unless it is hidden, outside the clip or a leaf, its children.
    pub fn visit(&mut self, node: &Node, depth: usize, ctx: &Context) -> zbus::Result<()> {
        if self.out_of_budget() {
            self.truncated = true;
            return Ok(());
        }
        self.nodes += 1;
        let proxy = self.src.accessible(node)?;
        let states = proxy.get_state()?;
        let shown = states.contains(State::Showing)
            || (ctx.toolkit.trust_visible && states.contains(State::Visible));
        if !shown || states.contains(State::Defunct) {
            return Ok(());
        }
        let role = proxy.get_role()?;
        if (is_document(role) && states.contains(State::Busy))
            || (matches!(role, Role::InternalFrame | Role::Embedded)
                && proxy.child_count().unwrap_or(0) == 0)
        {
            // A browser builds a page's tree after it shows the window, and marks a document
            // that is loading busy: what is read now would be a part.
            self.loading = true;
        }
        let rect = read::extents(self.src, node, ctx.frame);
        let escapes = matches!(
            role,
            Role::Menu | Role::PopupMenu | Role::Window | Role::ToolTip
        );
        if ctx.in_combobox && rect.is_none() && !escapes {
            // A combo box's closed popup (Qt keeps it `showing`, with no size).
            return Ok(());
        }
        let mut clip = if escapes { None } else { ctx.clip };
        if let (Some(r), Some(c)) = (rect, clip) {
            if r.intersect(&c).is_none() {
                return Ok(());
            }
        }
        if clips(role) {
            if let Some(r) = rect {
                clip = Some(match clip {
                    Some(c) => c.intersect(&r).unwrap_or(InputRect {
                        width: 0,
                        height: 0,
                        ..r
                    }),
                    None => r,
                });
            }
        }
        let inner = Context {
            clip,
            container: node.handle(),
            ..ctx.clone()
        };
        if matches!(
            role,
            Role::Table | Role::TreeTable | Role::Tree | Role::List | Role::ListBox
        ) && !ctx.in_row
        {
            let seen = Seen {
                node,
                proxy: &proxy,
                role,
                states,
                rect,
            };
            let limits = RowLimits {
                deadline: self.started + self.budget.max_time(),
                max_found: self
                    .budget
                    .max_elements
                    .saturating_mul(4)
                    .saturating_sub(self.found.len()),
            };
            if let Some(rows) = table::read_rows(self.src, &seen, &inner, self.geometry, limits)? {
                self.nodes += rows.nodes;
                self.truncated |= rows.truncated;
                self.found.extend(rows.found);
                for (n, c) in &rows.visit {
                    let _ = self.visit(n, depth + 1, c);
                }
                if let Some(counts) = rows.summary {
                    self.summary(node, rect, &inner, "rows", counts);
                }
                return Ok(());
            }
        }
        let kind = read::short_role(role);
        let skip_text = (ctx.inside_kept || ctx.in_row)
            && kind.is_some_and(|k| read::is_text_kind(k) || k == "cell" || k == "header");
        let mut kept = false;
        if states.contains(State::Visible) && !skip_text {
            // An element outside the clip is scrolled out of view.
            let visible_rect = match (rect, clip) {
                (Some(r), Some(c)) => r.intersect(&c).map(|_| r),
                (r, _) => r,
            };
            let seen = Seen {
                node,
                proxy: &proxy,
                role,
                states,
                rect: visible_rect,
            };
            if let Some(found) =
                read::read_element(self.src, &seen, self.place(ctx), &ctx.container)?
            {
                kept = true;
                self.found.push(found);
            }
        }
        if kind.is_some_and(read::is_leaf_control) {
            return Ok(());
        }
        if depth >= self.budget.max_depth {
            self.truncated = true;
            return Ok(());
        }
        let inner = Context {
            inside_kept: ctx.inside_kept || kept,
            in_combobox: ctx.in_combobox || role == Role::ComboBox,
            ..inner
        };
        let children = proxy.get_children()?;
        let children: Vec<Node> = children
            .iter()
            .filter_map(|c| Node::of(c, &node.dest))
            .collect();
        if children.len() > LONG_CHILD_LIST {
            return self.visit_long_list(node, &children, depth, &inner, rect);
        }
        for child in &children {
            // A child that vanished mid-walk is not an error of the capture.
            let _ = self.visit(child, depth + 1, &inner);
        }
        Ok(())
    }

    /// Visits only the children of a long list that are in view: the first is found by a
    /// binary search on their extents (children of a list are laid out top to bottom), the
    /// walk goes on until one lies below the clip, and a summary element says how many
    /// others there are. Children without usable extents make the search give up and walk
    /// them in order, up to the budget.
    fn visit_long_list(
        &mut self,
        node: &Node,
        children: &[Node],
        depth: usize,
        ctx: &Context,
        rect: Option<InputRect>,
    ) -> zbus::Result<()> {
        let clip = ctx.clip.or(rect);
        let first = match clip {
            Some(c) => self.first_in_view(children, c, ctx.frame),
            None => None,
        };
        let Some((first, clip)) = first.zip(clip) else {
            for child in children {
                let _ = self.visit(child, depth + 1, ctx);
            }
            return Ok(());
        };
        let mut last = first;
        for (i, child) in children.iter().enumerate().skip(first) {
            if self.out_of_budget() {
                self.truncated = true;
                break;
            }
            if let Some(r) = read::extents(self.src, child, ctx.frame) {
                self.nodes += 1;
                if r.y >= clip.y + clip.height {
                    break;
                }
            }
            let _ = self.visit(child, depth + 1, ctx);
            last = i;
        }
        let shown = last + 1 - first;
        if shown < children.len() {
            self.summary(node, rect, ctx, "items", (first, last, children.len()));
        }
        Ok(())
    }

    /// The index of the first child whose bottom is below the top of `clip`, by binary
    /// search; `None` when a probed child has no usable extents.
    fn first_in_view(&mut self, children: &[Node], clip: InputRect, frame: Frame) -> Option<usize> {
        let (mut lo, mut hi) = (0, children.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            self.nodes += 1;
            let r = read::extents(self.src, &children[mid], frame)?;
            if r.y + r.height <= clip.y {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }

    /// Adds the element that says how much of a long list or table is out of view: role
    /// `list` (or `table`), its name, and as value `{what} {first}–{last} of {total} shown`.
    pub fn summary(
        &mut self,
        node: &Node,
        rect: Option<InputRect>,
        ctx: &Context,
        what: &str,
        (first, last, total): (usize, usize, usize),
    ) {
        let Some(rect) = rect.and_then(|r| match ctx.clip {
            Some(c) => r.intersect(&c),
            None => Some(r),
        }) else {
            return;
        };
        let name = self
            .src
            .accessible(node)
            .map(|p| read::own_name(&p, ctx.toolkit))
            .unwrap_or_default();
        let role = if what == "rows" { "table" } else { "list" };
        let value = if last < first {
            format!("none of {total} {what} in view")
        } else {
            format!("{what} {}–{} of {total} shown", first + 1, last + 1)
        };
        let raw = RawElement {
            role: role.to_string(),
            name_from: if name.is_empty() {
                NameSource::None
            } else {
                NameSource::Own
            },
            name,
            value: Some(value),
            state: ElementState {
                enabled: true,
                ..Default::default()
            },
            clickable: false,
            editable: false,
            actions: vec![],
            bounds: crate::runner::elements::input_rect_to_pixels(
                self.geometry,
                rect.x,
                rect.y,
                rect.width,
                rect.height,
            ),
            handle: node.handle(),
            click: ClickVia::Pointer,
            settable: false,
            options: vec![],
        };
        self.found.push(Found {
            raw,
            container: ctx.container.clone(),
            labelled_by: vec![],
        });
    }
}

/// Roles of documents (a browser page, an office document).
fn is_document(role: Role) -> bool {
    matches!(
        role,
        Role::DocumentWeb
            | Role::DocumentFrame
            | Role::DocumentText
            | Role::DocumentSpreadsheet
            | Role::DocumentPresentation
            | Role::DocumentEmail
    )
}

/// Roles that scroll their content: their extents clip what is visible below them.
fn clips(role: Role) -> bool {
    matches!(
        role,
        Role::ScrollPane
            | Role::Viewport
            | Role::InternalFrame
            | Role::DocumentWeb
            | Role::DocumentFrame
            | Role::Table
            | Role::TreeTable
            | Role::Tree
            | Role::List
            | Role::ListBox
    )
}
