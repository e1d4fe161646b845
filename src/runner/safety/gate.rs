//! The destructive-step gate. It judges each step by what the step does — the control it
//! presses (by the element's real name), the chord, the drag, and the command line that typed
//! text and keys make in a terminal — and allows it only when the user's [`Grants`] cover
//! every need. The goal's text is not an input: no wording of it changes a decision.
//!
//! The gate keeps state through a run: the line a terminal holds (text typed in one batch is
//! joined with keys pressed in the next) and where keys go (a field the accessibility tree
//! shows, or possibly a terminal). [`Gate::check`] judges a step without changing that state;
//! [`Gate::commit`] records it once the step has run (or was approved).

use cel_contracts::{PlannedAction, PlanningView, Step};

use super::grants::Grants;
use super::host::{HostFacts, LocalHost};
use super::presses::{click_needs, drag_needs, key_effect, seen_target, Focus};
use super::refusal::{Need, Refusal};
use super::typed::{Edit, TypedLine};
use crate::runner::describe::describe_action;
use crate::runner::elements::ElementFacts;

/// What a step is judged against besides the step itself.
pub struct GateContext<'a> {
    /// The view the planner saw.
    pub view: &'a PlanningView,
    /// The batch's purpose, which describes a point click whose step has none.
    pub batch_purpose: &'a str,
    /// What the accessibility tree says a target is (an element id, or the element under an
    /// `xy:` point).
    pub seen: &'a dyn Fn(&str) -> Option<ElementFacts>,
    /// The machine: files, `PATH`, the shells at a prompt.
    pub host: &'a dyn HostFacts,
}

/// The gate through one run.
#[derive(Debug, Clone)]
pub struct Gate {
    grants: Grants,
    line: TypedLine,
    focus: Focus,
}

/// A step judged, not yet run: its refusal if the grants do not cover it, and the gate's
/// state after it for [`Gate::commit`].
#[derive(Debug, Clone)]
pub struct Checked {
    needs: Vec<Need>,
    refusal: Option<Refusal>,
    line: Option<TypedLine>,
    line_needs: Vec<Need>,
    focus: Focus,
}

impl Checked {
    /// The refusal, when the step needs what no grant covers.
    pub fn refusal(&self) -> Option<&Refusal> {
        self.refusal.as_ref()
    }

    /// Everything the step needs (covered or not).
    pub fn needs(&self) -> &[Need] {
        &self.needs
    }
}

impl Gate {
    /// A gate with these grants, an empty terminal line and an unknown focus.
    pub fn new(grants: Grants) -> Self {
        Self {
            grants,
            line: TypedLine::default(),
            focus: Focus::MaybeTerminal,
        }
    }

    /// The grants it applies.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// A new turn: where keys go is read again from the view (a window may have opened).
    pub fn start_turn(&mut self, view: &PlanningView) {
        self.focus = Focus::of_view(view);
    }

    /// Judges step `index` of a batch. Changes nothing; see [`Gate::commit`].
    pub fn check(&self, step: &Step, index: usize, ctx: &GateContext<'_>) -> Checked {
        let mut judge = Judge {
            ctx,
            purpose: &step.purpose,
            focus: self.focus,
            needs: Vec::new(),
            edits: Vec::new(),
            unjudgeable: None,
        };
        judge.action(&step.action);
        let Judge {
            mut needs,
            edits,
            unjudgeable,
            focus,
            ..
        } = judge;
        let (line, line_needs) = if edits.is_empty() {
            (None, Vec::new())
        } else {
            let (line, found) = self.line.apply(&edits, ctx.host);
            (Some(line), found)
        };
        for n in &line_needs {
            if !self.line.allowed.contains(n) && !needs.contains(n) {
                needs.push(n.clone());
            }
        }
        let missing: Vec<Need> = needs
            .iter()
            .filter(|n| !self.grants.allows(n.kind, &n.target))
            .cloned()
            .collect();
        let refusal = (unjudgeable.is_some() || !missing.is_empty()).then(|| Refusal {
            step_index: index,
            purpose: step.purpose.clone(),
            action: describe_action(&step.action),
            missing,
            unjudgeable,
        });
        Checked {
            needs,
            refusal,
            line,
            line_needs,
            focus,
        }
    }

    /// Records a step that ran (or was approved): the terminal line and the focus after it.
    pub fn commit(&mut self, checked: Checked) {
        self.focus = checked.focus;
        if let Some(mut line) = checked.line {
            if line.is_empty() {
                line.allowed.clear();
            } else {
                for n in checked.line_needs {
                    if !line.allowed.contains(&n) {
                        line.allowed.push(n);
                    }
                }
            }
            self.line = line;
        }
    }

    /// Judges a batch step by step, committing each allowed one: the first refusal.
    pub fn check_batch(&mut self, steps: &[Step], ctx: &GateContext<'_>) -> Result<(), Refusal> {
        for (index, step) in steps.iter().enumerate() {
            let checked = self.check(step, index, ctx);
            if let Some(r) = checked.refusal {
                return Err(r);
            }
            self.commit(checked);
        }
        Ok(())
    }

    /// The text a terminal may hold that was typed but not submitted.
    pub fn pending_line(&self) -> &str {
        self.line.pending()
    }
}

/// Judges one batch with `grants` on a fresh gate (unknown focus, empty terminal line), on
/// this machine: the first refusal. For callers that judge plans without running them.
pub fn check_batch(
    grants: &Grants,
    batch_purpose: &str,
    steps: &[Step],
    view: &PlanningView,
    seen: &dyn Fn(&str) -> Option<ElementFacts>,
) -> Result<(), Refusal> {
    let ctx = GateContext {
        view,
        batch_purpose,
        seen,
        host: &LocalHost,
    };
    let mut gate = Gate::new(grants.clone());
    gate.start_turn(view);
    gate.check_batch(steps, &ctx)
}

/// Walks a step's actions in order, following where keys go.
struct Judge<'a, 'c> {
    ctx: &'a GateContext<'c>,
    purpose: &'a str,
    focus: Focus,
    needs: Vec<Need>,
    edits: Vec<Edit>,
    unjudgeable: Option<String>,
}

impl Judge<'_, '_> {
    fn add(&mut self, needs: Vec<Need>) {
        for n in needs {
            if !self.needs.contains(&n) {
                self.needs.push(n);
            }
        }
    }

    /// A click (or the click before typing into an element) moves the focus to its target.
    fn click(&mut self, target_id: &str) {
        let ctx = self.ctx;
        match click_needs(
            target_id,
            self.purpose,
            ctx.batch_purpose,
            ctx.view,
            ctx.seen,
        ) {
            Ok(needs) => self.add(needs),
            Err(why) => self.unjudgeable = Some(why),
        }
        let target = seen_target(target_id, ctx.view, ctx.seen);
        self.focus = Focus::of_element(target.role.as_deref(), &target.names, ctx.view);
    }

    fn action(&mut self, action: &PlannedAction) {
        let ctx = self.ctx;
        match action {
            PlannedAction::Click { target_id, .. } => self.click(target_id),
            PlannedAction::Type { target_id, text } => {
                if let Some(id) = target_id {
                    self.click(id);
                }
                if self.focus == Focus::MaybeTerminal {
                    self.edits.push(Edit::Text(text.clone()));
                }
            }
            PlannedAction::Key { key } => self.keys(std::slice::from_ref(key)),
            PlannedAction::KeyCombo { keys } => self.keys(keys),
            PlannedAction::Drag {
                from_target_id,
                to_target_id,
            } => {
                let needs = drag_needs(
                    from_target_id,
                    to_target_id,
                    self.purpose,
                    ctx.view,
                    ctx.seen,
                );
                self.add(needs);
            }
            PlannedAction::Batch { actions } => {
                for a in actions {
                    self.action(a);
                }
            }
            _ => {}
        }
    }

    fn keys(&mut self, keys: &[String]) {
        let fx = key_effect(keys, self.focus, self.ctx.view);
        self.add(fx.needs);
        if self.focus == Focus::MaybeTerminal {
            self.edits.extend(fx.edits);
        }
        if fx.focus_unknown {
            self.focus = Focus::MaybeTerminal;
        }
    }
}
