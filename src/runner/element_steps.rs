//! Steps on element ids, carried out as a user's would be.
//!
//! A click on an element moves the pointer to the centre of its visible part first (so the
//! next untargeted `scroll` turns the wheel there, as after a hand's click), gives the element
//! keyboard focus where it takes it (so the next untargeted `type` lands in it or its window),
//! then acts the way its source judged right ([`ClickVia`]): the accessible action, a
//! selection in its table, or for a text field the focus alone (a GTK 3 entry's only action,
//! `activate`, acts like Enter and submits its form). Where the accessible way fails, the
//! pointer clicks. `set_value` sets a field's text, a slider's number or a combo box's option
//! through the accessibility API, after the same pointer move and focus.

use serde_json::{json, Value};

use super::{
    execute::Scene, ClickVia, ElementTarget, Error, InputPoint, Result, RunState, Runner, StepError,
};

impl Runner {
    /// Clicks a resolved element as a user would (see the module docs). `Ok` carries the
    /// step's data: what was done, and why the pointer clicked where the accessible way
    /// failed.
    pub(super) fn click_element(
        &mut self,
        target: &ElementTarget,
        state: &mut RunState,
    ) -> std::result::Result<Value, StepError> {
        let input_err = |e: Error| StepError {
            message: e.to_string(),
            recoverable: true,
        };
        let p = target.point;
        let element = &target.element;
        let id = element.id.clone();
        self.move_pointer_to(p, state).map_err(input_err)?;
        let attempted: Option<(Value, Result<()>)> = match &target.click {
            ClickVia::Pointer => None,
            ClickVia::Focus => Some((
                json!({ "focused": id }),
                self.with_source(|s| s.focus(element)),
            )),
            ClickVia::Action(action) => {
                if element.raw.state.focusable {
                    // Focus first, as the press of a hand gives it: an action that closes
                    // the window or opens a popup then leaves focus where it puts it.
                    let _ = self.with_source(|s| s.focus(element));
                }
                Some((
                    json!({ "invoked": action, "element": id }),
                    self.with_source(|s| s.invoke(element, action)),
                ))
            }
            ClickVia::Select => {
                let _ = self.with_source(|s| s.focus(element));
                Some((
                    json!({ "selected": id }),
                    self.with_source(|s| s.select(element)),
                ))
            }
        };
        match attempted {
            Some((data, Ok(()))) => Ok(data),
            Some((_, Err(e))) => {
                // The element was just re-read and is on screen: where its accessible way
                // fails, the pointer still reaches it.
                self.click_at(p, state).map_err(input_err)?;
                Ok(json!({
                    "clicked": [p.x, p.y],
                    "element": id,
                    "accessible_click_failed": e.to_string(),
                }))
            }
            None => {
                self.click_at(p, state).map_err(input_err)?;
                Ok(json!({ "clicked": [p.x, p.y], "element": id }))
            }
        }
    }

    /// `set_value` on an element id: the pointer moves to it, it takes focus where it can,
    /// and its source sets the value. A point target, or an element that takes no value, is
    /// a step error saying what to do instead.
    pub(super) fn set_element_value(
        &mut self,
        target_id: &str,
        value: &str,
        scene: &Scene<'_>,
        state: &mut RunState,
    ) -> std::result::Result<Value, StepError> {
        let plan_err = |e: Error| StepError {
            message: e.to_string(),
            recoverable: false,
        };
        let (p, target) = self.resolve_target(target_id, scene).map_err(plan_err)?;
        let Some(target) = target else {
            return Err(StepError {
                message: format!(
                    "set_value needs an element id of this turn's view, and {target_id:?} is \
                     not one; click the field and type instead"
                ),
                recoverable: false,
            });
        };
        self.move_pointer_to(p, state).map_err(|e| StepError {
            message: e.to_string(),
            recoverable: true,
        })?;
        let element = &target.element;
        if element.raw.state.focusable {
            let _ = self.with_source(|s| s.focus(element));
        }
        let how = self
            .with_source(|s| s.set_value(element, value))
            .map_err(plan_err)?;
        Ok(json!({
            "set_value": how,
            "element": element.id,
            "chars": value.chars().count(),
        }))
    }

    /// Runs `f` on the desktop's element source; an error when there is none any more.
    fn with_source<T>(
        &mut self,
        f: impl FnOnce(&mut dyn super::ElementSource) -> Result<T>,
    ) -> Result<T> {
        match self.desktop.elements() {
            Some(source) => f(source),
            None => Err(Error::runner(
                "the accessibility tree is no longer reachable",
            )),
        }
    }

    /// Moves the pointer to `p` and remembers that the runner put it there.
    fn move_pointer_to(&mut self, p: InputPoint, state: &mut RunState) -> Result<()> {
        self.desktop.input().move_pointer(p)?;
        state.runner_pointer = Some(p);
        Ok(())
    }
}
