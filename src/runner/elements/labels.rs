//! Names for fields that have none of their own: the label beside or above them.
//!
//! Many dialogs lay a form out as a grid of labels and fields without relating them for
//! accessibility (a `zenity --forms` dialog's entries have no name and no `labelled-by`
//! relation): a sighted user reads the label on the left, or above. This pass does the same
//! for every field still nameless after the source tried its own name, the `labelled-by`
//! relation, the description and the placeholder: the label in the **same container** that
//! is on the **same row** and nearest on its left (the rows overlap by half the smaller
//! height), else the one nearest **above** it that overlaps it horizontally. Each label
//! names one field at most, nearest pairs first, and a label that became a field's name is
//! not listed again as an element of its own.

use std::collections::HashSet;

use super::{NameSource, PixelRect, RawElement};

/// Roles of fields a label beside them names.
const FIELD_ROLES: &[&str] = &[
    "text", "spin", "combobox", "slider", "calendar", "terminal", "checkbox",
];
/// Farthest a label on the left may be from its field, in pixels.
const MAX_LEFT_GAP_PX: i32 = 320;
/// Farthest a label above may be from its field, in pixels.
const MAX_ABOVE_GAP_PX: i32 = 48;
/// How far a label may overlap its field's edge and still be beside it (toolkit rounding,
/// labels whose extents include padding).
const EDGE_SLACK_PX: i32 = 4;

/// An element as a source found it, with the container it sits in.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The element.
    pub raw: RawElement,
    /// The handle of the container it is a child of (only elements of one container name
    /// each other).
    pub container: String,
    /// Handles of the labels the element names itself by (`labelled-by`): those are not
    /// listed again.
    pub labelled_by: Vec<String>,
}

/// Names nameless fields by the label beside or above them (see the module docs) and drops
/// the labels that became names, or that a field's `labelled-by` points at.
pub fn name_fields_by_labels(found: Vec<Found>) -> Vec<RawElement> {
    let mut pairs: Vec<(u8, i32, usize, usize)> = Vec::new();
    for (fi, field) in found.iter().enumerate() {
        if field.raw.name_from != NameSource::None
            || !FIELD_ROLES.contains(&field.raw.role.as_str())
        {
            continue;
        }
        for (li, label) in found.iter().enumerate() {
            if label.raw.role != "label"
                || label.raw.name.is_empty()
                || label.container != field.container
            {
                continue;
            }
            if let Some((kind, gap)) = placement(&label.raw.bounds, &field.raw.bounds) {
                pairs.push((kind, gap, fi, li));
            }
        }
    }
    // Same row before above, then nearest; ties in the order found.
    pairs.sort();
    let mut used_fields = HashSet::new();
    let mut used_labels = HashSet::new();
    let mut names: Vec<Option<String>> = vec![None; found.len()];
    for (_, _, fi, li) in pairs {
        if used_fields.contains(&fi) || used_labels.contains(&li) {
            continue;
        }
        used_fields.insert(fi);
        used_labels.insert(li);
        names[fi] = Some(found[li].raw.name.clone());
    }
    let related: HashSet<&str> = found
        .iter()
        .flat_map(|f| f.labelled_by.iter().map(String::as_str))
        .collect();
    let dropped: HashSet<usize> = found
        .iter()
        .enumerate()
        .filter(|(i, f)| {
            used_labels.contains(i)
                || (f.raw.role == "label"
                    && (related.contains(f.raw.handle.as_str()) || names_a_field(f, &found)))
        })
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::with_capacity(found.len());
    for (i, (f, name)) in found.into_iter().zip(names).enumerate() {
        if dropped.contains(&i) {
            continue;
        }
        let mut raw = f.raw;
        if let Some(name) = name {
            raw.name = name;
            raw.name_from = NameSource::Beside;
        }
        out.push(raw);
    }
    out
}

/// Whether a field beside or below `label`, in its container, bears its text as its name
/// already (a toolkit that names fields by their buddy labels, as Qt's form layouts do).
fn names_a_field(label: &Found, found: &[Found]) -> bool {
    found.iter().any(|f| {
        FIELD_ROLES.contains(&f.raw.role.as_str())
            && f.container == label.container
            && f.raw.name == label.raw.name
            && placement(&label.raw.bounds, &f.raw.bounds).is_some()
    })
}

/// Where `label` lies relative to `field`: `(0, gap)` on the same row to its left, `(1, gap)`
/// above it, `None` neither.
fn placement(label: &PixelRect, field: &PixelRect) -> Option<(u8, i32)> {
    let overlap_y = (label.y + label.height).min(field.y + field.height) - label.y.max(field.y);
    let same_row = overlap_y * 2 >= label.height.min(field.height) && overlap_y > 0;
    let left_gap = field.x - (label.x + label.width);
    if same_row && (-EDGE_SLACK_PX..=MAX_LEFT_GAP_PX).contains(&left_gap) {
        return Some((0, left_gap.max(0)));
    }
    let overlap_x = (label.x + label.width).min(field.x + field.width) - label.x.max(field.x);
    let above_gap = field.y - (label.y + label.height);
    if overlap_x > 0 && (-EDGE_SLACK_PX..=MAX_ABOVE_GAP_PX).contains(&above_gap) {
        return Some((1, above_gap.max(0)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::{ClickVia, ElementState};
    use super::*;

    fn found(role: &str, name: &str, rect: (i32, i32, i32, i32), container: &str) -> Found {
        let (x, y, width, height) = rect;
        Found {
            raw: RawElement {
                role: role.into(),
                name: name.into(),
                value: None,
                state: ElementState::default(),
                clickable: role != "label",
                editable: role == "text",
                actions: vec![],
                bounds: PixelRect {
                    x,
                    y,
                    width,
                    height,
                },
                handle: format!("{role}@{x},{y}"),
                click: ClickVia::Pointer,
                settable: false,
                options: vec![],
                name_from: if name.is_empty() {
                    NameSource::None
                } else {
                    NameSource::Own
                },
            },
            container: container.into(),
            labelled_by: vec![],
        }
    }

    fn names(out: &[RawElement]) -> Vec<(String, String)> {
        out.iter()
            .map(|r| (r.role.clone(), r.name.clone()))
            .collect()
    }

    /// The layout of a `zenity --forms` dialog: labels in the first column of a grid, the
    /// entries in the second, all children of one container.
    #[test]
    fn grid_form_entries_take_the_label_on_their_row() {
        let out = name_fields_by_labels(vec![
            found("text", "", (580, 275, 204, 34), "grid"),
            found("label", "Last name", (501, 275, 68, 34), "grid"),
            found("text", "", (580, 235, 204, 34), "grid"),
            found("label", "First name", (501, 235, 69, 34), "grid"),
            found("combobox", "Green", (580, 517, 204, 34), "grid"),
            found("label", "Who?", (488, 205, 41, 17), "outer"),
        ]);
        assert_eq!(
            names(&out),
            [
                ("text".into(), "Last name".into()),
                ("text".into(), "First name".into()),
                ("combobox".into(), "Green".into()),
                ("label".into(), "Who?".into()),
            ]
        );
        assert!(out[..2].iter().all(|r| r.name_from == NameSource::Beside));
    }

    #[test]
    fn a_label_above_names_a_field_when_none_is_on_its_row() {
        let out = name_fields_by_labels(vec![
            found("label", "Comment", (10, 10, 80, 20), "box"),
            found("text", "", (10, 34, 300, 30), "box"),
            // Too far below to be this label's field.
            found("text", "", (10, 200, 300, 30), "box"),
        ]);
        assert_eq!(
            names(&out),
            [
                ("text".into(), "Comment".into()),
                ("text".into(), String::new())
            ]
        );
    }

    #[test]
    fn labels_of_other_containers_and_related_labels_are_handled() {
        let mut related = found("text", "Email", (100, 0, 100, 20), "form");
        related.labelled_by = vec!["label@0,0".into()];
        related.raw.name_from = NameSource::Relation;
        let out = name_fields_by_labels(vec![
            found("label", "Email", (0, 0, 60, 20), "form"),
            related,
            // Nameless, but its only neighbour label is in another container.
            found("label", "Phone", (0, 40, 60, 20), "other"),
            found("text", "", (100, 40, 100, 20), "form"),
        ]);
        assert_eq!(
            names(&out),
            [
                ("text".into(), "Email".into()),
                ("label".into(), "Phone".into()),
                ("text".into(), String::new())
            ]
        );
    }

    #[test]
    fn a_label_repeating_the_name_of_its_field_is_not_listed_again() {
        let out = name_fields_by_labels(vec![
            found("label", "Customer", (0, 0, 60, 20), "form"),
            found("text", "Customer", (80, 0, 200, 20), "form"),
            found("label", "Note", (0, 100, 60, 20), "form"),
        ]);
        assert_eq!(
            names(&out),
            [
                ("text".into(), "Customer".into()),
                ("label".into(), "Note".into())
            ]
        );
    }

    #[test]
    fn each_label_names_one_field_nearest_first() {
        let out = name_fields_by_labels(vec![
            found("label", "Name", (0, 0, 50, 20), "g"),
            found("text", "", (200, 0, 100, 20), "g"),
            found("text", "", (60, 0, 100, 20), "g"),
        ]);
        assert_eq!(
            names(&out),
            [
                ("text".into(), String::new()),
                ("text".into(), "Name".into())
            ]
        );
    }
}
