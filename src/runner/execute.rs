//! Running a batch: each step through the safety gate (and, when it refuses, the approval
//! callback or the `--confirm` prompt), then executed with the input device, with retries,
//! pauses and the between-step checks.

use std::time::Duration;

use cel_contracts::{EffectExpectation, PlannedAction, PlanningView, Step, StepResult};
use serde_json::Value;

use super::*;

impl Runner {
    pub(super) fn run_batch(
        &mut self,
        input: &TurnInput<'_>,
        observer: &mut dyn RunObserver,
        state: &mut RunState,
        record: &mut TurnRecord,
        purpose: &str,
        steps: &[Step],
    ) -> TurnEnd {
        // The goal is not read here: the gate judges steps, never the goal's wording.
        let TurnInput {
            view,
            geometry,
            elements,
            ..
        } = *input;
        observer.on_batch(state.turns, purpose, steps);
        if steps.is_empty() {
            if let Some(end) = self.max_steps_check(state, purpose, "empty batch") {
                return end;
            }
            state.history.push(AttemptRecord {
                step_purpose: purpose.to_string(),
                action: PlannedAction::Batch { actions: vec![] },
                succeeded: false,
                error: Some("the batch had no steps; nothing was done".into()),
                data: Value::Null,
                next_action_hint: None,
            });
            state.steps_used += 1;
            return TurnEnd::Continue;
        }
        let mut any_input = false;
        // How long the application may take to react to this batch (the most any step needs).
        let mut settle_kind = SettleKind::Edit;
        let max_attempts = self.options.limits.max_step_retries.max(1);
        for (index, step) in steps.iter().enumerate() {
            if let Some(end) = self.between_steps_check(state, purpose, &step.purpose) {
                return end;
            }
            if let Some(end) = self.max_steps_check(state, purpose, &step.purpose) {
                return end;
            }
            let seen = self.seen_targets(&step.action, elements, &geometry);
            let seen_of = |id: &str| seen.iter().find(|f| f.0 == id).map(|f| f.1.clone());
            let ctx = safety::GateContext {
                view,
                batch_purpose: purpose,
                seen: &seen_of,
                host: &safety::LocalHost,
            };
            let checked = state.gate.check(step, index, &ctx);
            if let Some(refusal) = checked.refusal().cloned() {
                let asked = self.approval_asked();
                match self.approve(&refusal) {
                    Ok(true) => {}
                    Ok(false) => {
                        let message = refusal.to_string();
                        observer.on_refusal(step, &message);
                        record.steps.push(trace::StepRecord {
                            index,
                            attempt: 1,
                            purpose: step.purpose.clone(),
                            action: step.action.clone(),
                            result: StepResult::Err {
                                message: message.clone(),
                                recoverable: false,
                            },
                            duration_ms: 0,
                            dry_run: self.options.dry_run,
                            refused: Some(message.clone()),
                        });
                        state.history.push(AttemptRecord {
                            step_purpose: step.purpose.clone(),
                            action: step.action.clone(),
                            succeeded: false,
                            error: Some(message.clone()),
                            data: json!({
                                "refused": refusal.kinds(),
                                "allow": refusal.allow_flags(),
                            }),
                            next_action_hint: None,
                        });
                        // The user said no to this very step: the run ends there.
                        if asked {
                            return TurnEnd::Finish(
                                GoalOutcome::Refused { summary: message },
                                EndReason::Declined,
                            );
                        }
                        return self.end_failed_batch(
                            state,
                            record,
                            any_input.then_some(settle_kind),
                            BatchFailure::Refused { message },
                        );
                    }
                    Err(e) => {
                        let report =
                            failure(purpose, "approve the step", &state.history, e.to_string());
                        return TurnEnd::Finish(GoalOutcome::Failed(report), EndReason::StepFailed);
                    }
                }
            }
            state.gate.commit(checked);
            state.steps_used += 1;
            let role = seen.first().map(|(_, facts)| facts.role.as_str());
            settle_kind = settle_kind.max(settle::settle_kind(&step.action, role));
            let mut errors: Vec<String> = Vec::new();
            for attempt in 1..=max_attempts {
                if attempt > 1 {
                    if let Some(end) = self.between_steps_check(state, purpose, &step.purpose) {
                        return end;
                    }
                }
                let t0 = Instant::now();
                let result = if self.options.dry_run {
                    StepResult::Ok {
                        data: json!({ "dry_run": true, "would": describe_action(&step.action) }),
                        discovered_sub_goal: None,
                    }
                } else {
                    any_input = true;
                    let scene = Scene {
                        view,
                        geometry: &geometry,
                        elements,
                    };
                    match self.execute(&step.action, &scene, state) {
                        Ok(data) => StepResult::Ok {
                            data,
                            discovered_sub_goal: None,
                        },
                        Err(e) => StepResult::Err {
                            message: e.message,
                            recoverable: e.recoverable,
                        },
                    }
                };
                observer.on_step(step, attempt, &result);
                record.steps.push(trace::StepRecord {
                    index,
                    attempt,
                    purpose: step.purpose.clone(),
                    action: step.action.clone(),
                    result: result.clone(),
                    duration_ms: t0.elapsed().as_millis() as u64,
                    dry_run: self.options.dry_run,
                    refused: None,
                });
                match result {
                    StepResult::Ok { data, .. } => {
                        state.history.push(AttemptRecord {
                            step_purpose: step.purpose.clone(),
                            action: step.action.clone(),
                            succeeded: true,
                            error: None,
                            data,
                            next_action_hint: None,
                        });
                        break;
                    }
                    StepResult::Err {
                        message,
                        recoverable,
                    } => {
                        state.history.push(AttemptRecord {
                            step_purpose: step.purpose.clone(),
                            action: step.action.clone(),
                            succeeded: false,
                            error: Some(message.clone()),
                            data: Value::Null,
                            next_action_hint: None,
                        });
                        errors.push(message);
                        // A step the plan got wrong (a stale id, an unmet expectation) cannot
                        // succeed by trying again; a transient input error may, up to the
                        // retry budget. Either way the batch ends there and the planner reads
                        // the error on its next turn (ARCHITECTURE.md, decision 16).
                        if !recoverable || attempt == max_attempts {
                            if recoverable {
                                errors.push(format!(
                                    "{max_attempts} attempts of this step failed \
                                     (max_step_retries)"
                                ));
                            }
                            return self.end_failed_batch(
                                state,
                                record,
                                any_input.then_some(settle_kind),
                                BatchFailure::Step(FailureReport {
                                    failing_sub_goal: purpose.to_string(),
                                    failing_step: step.purpose.clone(),
                                    attempts: errors,
                                }),
                            );
                        }
                        self.pause(self.options.step_pause_ms, state);
                    }
                }
            }
            if index + 1 < steps.len() && !self.options.dry_run {
                self.pause(self.options.step_pause_ms, state);
            }
        }
        state.failed_batches = 0;
        if any_input {
            self.settle_after(state, record, settle_kind);
        }
        TurnEnd::Continue
    }

    /// Whether a refused step is put to someone: the approval callback, or the `--confirm`
    /// prompt (never in a dry run, which executes nothing).
    fn approval_asked(&self) -> bool {
        !self.options.dry_run && (self.approver.is_some() || self.options.confirm)
    }

    /// Asks the approval callback, else (under `--confirm`) the prompt, whether a refused
    /// step may run this once.
    fn approve(&mut self, refusal: &safety::Refusal) -> Result<bool> {
        if self.options.dry_run {
            return Ok(false);
        }
        if let Some(approver) = self.approver.as_mut() {
            return approver.approve(refusal);
        }
        if self.options.confirm {
            return self.prompt.confirm(&safety::question(refusal));
        }
        Ok(false)
    }

    /// A batch ended on a failed or refused step: the steps before it stay done, the screen
    /// settles after any input they gave, and the run goes on to the next turn, where the
    /// planner reads the failure in its history. Only when the failure budget
    /// ([`RunOptions::max_failures`] batches in a row) is spent does the run end: as refused
    /// when the last failure was a refusal (the run cannot go on without a permission the user
    /// has not given), else as failed. `input`: the batch gave input before it failed, and how
    /// long its effect may take to show.
    fn end_failed_batch(
        &mut self,
        state: &mut RunState,
        record: &mut TurnRecord,
        input: Option<SettleKind>,
        failure: BatchFailure,
    ) -> TurnEnd {
        state.failed_batches += 1;
        if let Some(kind) = input {
            self.settle_after(state, record, kind);
        }
        let max = self.options.max_failures.max(1);
        if state.failed_batches < max {
            return TurnEnd::Continue;
        }
        match failure {
            BatchFailure::Refused { message } => TurnEnd::Finish(
                GoalOutcome::Refused { summary: message },
                EndReason::EndedOnRefusal,
            ),
            BatchFailure::Step(mut report) => {
                report.attempts.push(format!(
                    "budget exhausted: {max} batches in a row ended on a failed step \
                     (max_failures)"
                ));
                TurnEnd::Finish(
                    GoalOutcome::Failed(report),
                    EndReason::BudgetExhausted {
                        budget: Budget::Failures,
                    },
                )
            }
        }
    }

    /// Waits for the application to react to the batch's input ([`settle`](Self::settle)) and
    /// keeps the last frame as the next observation.
    fn settle_after(&mut self, state: &mut RunState, record: &mut TurnRecord, kind: SettleKind) {
        let t0 = Instant::now();
        state.pending_capture = self.settle(state, kind);
        record.settle_ms = t0.elapsed().as_millis() as u64;
    }

    /// What the screen says each target of `action` is (the element of an id, the element under
    /// an `xy:` point), for the gate.
    fn seen_targets(
        &mut self,
        action: &PlannedAction,
        elements: Option<&ElementTable>,
        geometry: &ScreenGeometry,
    ) -> Vec<(String, ElementFacts)> {
        let Some(table) = elements else {
            return Vec::new();
        };
        let mut ids = Vec::new();
        target_ids(action, &mut ids);
        ids.into_iter()
            .filter_map(|id| {
                let source = self.desktop.elements();
                element_facts(&id, table, source, geometry).map(|f| (id, f))
            })
            .collect()
    }

    /// Resolves a target id: an element of this turn's capture (re-read now), else through the
    /// runner's [`TargetResolver`] (`xy:` points, a caller's own ids).
    pub(super) fn resolve_target(
        &mut self,
        target_id: &str,
        scene: &Scene<'_>,
    ) -> Result<(InputPoint, Option<ElementTarget>)> {
        if let Some(table) = scene.elements.filter(|t| t.get(target_id).is_some()) {
            let click = self.options.element_click;
            let source = self.desktop.elements().ok_or_else(|| {
                Error::runner(format!(
                    "element {target_id:?}: the accessibility tree is no longer reachable"
                ))
            })?;
            let mut resolver = ElementResolver {
                table,
                source,
                geometry: scene.geometry,
                click,
            };
            if let Some(target) = resolver.resolve(target_id)? {
                return Ok((target.point, Some(target)));
            }
        }
        let p = self
            .resolver
            .resolve(target_id, scene.view, scene.geometry)?;
        Ok((p, None))
    }

    /// Executes one action. `Ok` carries the step's data; `Err` is the step's error result.
    fn execute(
        &mut self,
        action: &PlannedAction,
        scene: &Scene<'_>,
        state: &mut RunState,
    ) -> std::result::Result<Value, StepError> {
        let geometry = scene.geometry;
        // Errors from resolving or parsing are the plan's fault: retrying the same step cannot
        // help. Errors from the input backend may be transient.
        let plan_err = |e: Error| StepError {
            message: e.to_string(),
            recoverable: false,
        };
        let input_err = |e: Error| StepError {
            message: e.to_string(),
            recoverable: true,
        };
        match action {
            PlannedAction::Click {
                target_id,
                expect_after,
            } => {
                let (p, element) = self.resolve_target(target_id, scene).map_err(plan_err)?;
                // `expect_after: dom_changed` is checked on the screen itself: the frame
                // before the click against frames after it, until the timeout.
                let before = match expect_after {
                    Some(EffectExpectation::DomChanged { .. }) => self.desktop.capture().ok(),
                    _ => None,
                };
                let mut data = match element {
                    Some(target) => self.click_element(&target, state)?,
                    None => {
                        self.click_at(p, state).map_err(input_err)?;
                        json!({ "clicked": [p.x, p.y] })
                    }
                };
                match (expect_after, before) {
                    (Some(EffectExpectation::DomChanged { timeout_ms }), Some(before)) => {
                        self.expect_screen_change(&before.image, *timeout_ms, state)?;
                        data["expect_after"] = json!("the screen changed");
                    }
                    (Some(_), _) => {
                        data["expect_after"] = json!(
                            "not checked: the desktop runner observes the screen, not page selectors"
                        );
                    }
                    (None, _) => {}
                }
                Ok(data)
            }
            PlannedAction::Type { target_id, text } => {
                let mut data = json!({ "typed_chars": text.chars().count() });
                if let Some(id) = target_id {
                    // Focus the target first, as a user's click would: an element by the way
                    // a click reaches it (a text field is focused, never activated), a point
                    // by the pointer.
                    let (p, element) = self.resolve_target(id, scene).map_err(plan_err)?;
                    data["focus"] = match element {
                        Some(target) => self.click_element(&target, state)?,
                        None => {
                            self.click_at(p, state).map_err(input_err)?;
                            json!({ "clicked": [p.x, p.y] })
                        }
                    };
                    std::thread::sleep(Duration::from_millis(self.options.step_pause_ms));
                }
                self.desktop.input().text(text).map_err(input_err)?;
                Ok(data)
            }
            PlannedAction::SetValue {
                target_id, value, ..
            } => self.set_element_value(target_id, value, scene, state),
            PlannedAction::Key { key } => {
                let keys = input::parse_key_chord(key).map_err(plan_err)?;
                input::press_chord(self.desktop.input(), &keys).map_err(input_err)?;
                Ok(json!({ "pressed": key }))
            }
            PlannedAction::KeyCombo { keys } => {
                let parsed = input::parse_key_combo(keys).map_err(plan_err)?;
                input::press_chord(self.desktop.input(), &parsed).map_err(input_err)?;
                Ok(json!({ "pressed": keys.join("+") }))
            }
            PlannedAction::Scroll { dx, dy } => {
                let (nx, ny) = (scroll_notches(*dx), scroll_notches(*dy));
                if ny != 0 {
                    self.desktop.input().scroll(ny, false).map_err(input_err)?;
                }
                if nx != 0 {
                    self.desktop.input().scroll(nx, true).map_err(input_err)?;
                }
                Ok(json!({ "scrolled_notches": [nx, ny] }))
            }
            PlannedAction::Drag {
                from_target_id,
                to_target_id,
            } => {
                let (from, _) = self
                    .resolve_target(from_target_id, scene)
                    .map_err(plan_err)?;
                let (to, _) = self.resolve_target(to_target_id, scene).map_err(plan_err)?;
                self.drag(from, to, state).map_err(input_err)?;
                Ok(json!({ "dragged": [[from.x, from.y], [to.x, to.y]] }))
            }
            PlannedAction::Select {
                from_x,
                from_y,
                to_x,
                to_y,
            } => {
                // Select's coordinates follow the same 0–1000 convention as xy: targets.
                let rel_from = crate::moves::RelativePoint::new((*from_x).into(), (*from_y).into())
                    .map_err(plan_err)?;
                let rel_to = crate::moves::RelativePoint::new((*to_x).into(), (*to_y).into())
                    .map_err(plan_err)?;
                let from = geometry.to_input(rel_from).map_err(plan_err)?;
                let to = geometry.to_input(rel_to).map_err(plan_err)?;
                self.drag(from, to, state).map_err(input_err)?;
                Ok(json!({ "selected": [[from.x, from.y], [to.x, to.y]] }))
            }
            PlannedAction::Wait { ms } => {
                let ms = u64::from(*ms).min(MAX_WAIT_MS);
                self.pause(ms, state);
                Ok(json!({ "waited_ms": ms }))
            }
            PlannedAction::Extract { goal, data } => {
                let key = if goal.trim().is_empty() {
                    format!("extract_{}", state.history.len() + 1)
                } else {
                    goal.trim().to_string()
                };
                if let Value::Object(map) = &mut state.memory {
                    map.insert(key.clone(), Value::String(data.clone()));
                }
                Ok(json!({ key: data }))
            }
            PlannedAction::Batch { actions } => {
                let mut results = Vec::with_capacity(actions.len());
                for a in actions {
                    results.push(self.execute(a, scene, state)?);
                    std::thread::sleep(Duration::from_millis(self.options.step_pause_ms));
                }
                Ok(Value::Array(results))
            }
            other => Err(StepError {
                message: unsupported_action_message(other),
                recoverable: false,
            }),
        }
    }

    /// Wait up to `timeout_ms` (at most [`MAX_EXPECT_MS`]) for a frame that differs from
    /// `before`; a screen that stays the same fails the step, so the planner's history
    /// shows the expectation was not met.
    ///
    /// [`MAX_EXPECT_MS`]: crate::moves::MAX_EXPECT_MS
    fn expect_screen_change(
        &mut self,
        before: &image::RgbaImage,
        timeout_ms: u64,
        state: &RunState,
    ) -> std::result::Result<(), StepError> {
        const POLL_MS: u64 = 100;
        let timeout_ms = timeout_ms.min(u64::from(crate::moves::MAX_EXPECT_MS));
        let started = std::time::Instant::now();
        loop {
            self.pause(POLL_MS.min(timeout_ms), state);
            if let Ok(now) = self.desktop.capture() {
                if now.image.as_raw() != before.as_raw() {
                    return Ok(());
                }
            }
            if started.elapsed() >= Duration::from_millis(timeout_ms)
                || self.stop.is_stop_requested()
            {
                return Err(StepError {
                    message: format!(
                        "expect_after not met: the screen did not change within {timeout_ms} ms"
                    ),
                    recoverable: false,
                });
            }
        }
    }

    pub(super) fn click_at(&mut self, p: InputPoint, state: &mut RunState) -> Result<()> {
        let input = self.desktop.input();
        input.move_pointer(p)?;
        state.runner_pointer = Some(p);
        // Give the application a motion event before the press, as a hand would.
        std::thread::sleep(Duration::from_millis(20));
        input.left_button(ButtonAction::Click)
    }

    fn drag(&mut self, from: InputPoint, to: InputPoint, state: &mut RunState) -> Result<()> {
        let input = self.desktop.input();
        input.move_pointer(from)?;
        std::thread::sleep(Duration::from_millis(20));
        input.left_button(ButtonAction::Press)?;
        let mut result = Ok(());
        for i in 1..=DRAG_MOTION_STEPS {
            let p = InputPoint {
                x: from.x + (to.x - from.x) * i / DRAG_MOTION_STEPS,
                y: from.y + (to.y - from.y) * i / DRAG_MOTION_STEPS,
            };
            if let Err(e) = input.move_pointer(p) {
                result = Err(e);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Release even after a failed move, so the button is never left held.
        let released = input.left_button(ButtonAction::Release);
        state.runner_pointer = input.pointer().ok();
        result.and(released)
    }
}

/// How a batch that did not finish failed.
pub(super) enum BatchFailure {
    /// The gate refused a step; `message` says what and how the user can allow it.
    Refused {
        /// The refusal, as the history and the outcome give it.
        message: String,
    },
    /// A step failed (a plan error, or every retry of an input error).
    Step(FailureReport),
}

/// What an action is executed against: the view the planner saw, its screenshot's geometry
/// and the elements of that capture.
pub(super) struct Scene<'a> {
    pub view: &'a PlanningView,
    pub geometry: &'a ScreenGeometry,
    pub elements: Option<&'a ElementTable>,
}

/// The target ids an action names, nested batches included.
fn target_ids(action: &PlannedAction, out: &mut Vec<String>) {
    match action {
        PlannedAction::Click { target_id, .. } => out.push(target_id.clone()),
        PlannedAction::Type {
            target_id: Some(t), ..
        } => out.push(t.clone()),
        PlannedAction::SetValue { target_id, .. } => out.push(target_id.clone()),
        PlannedAction::Drag {
            from_target_id,
            to_target_id,
        } => out.extend([from_target_id.clone(), to_target_id.clone()]),
        PlannedAction::Batch { actions } => actions.iter().for_each(|a| target_ids(a, out)),
        _ => {}
    }
}

/// Converts a scroll amount to wheel notches (see [`MAX_SCROLL_NOTCHES`]).
fn scroll_notches(v: i32) -> i32 {
    if v.abs() <= MAX_SCROLL_NOTCHES {
        v
    } else {
        let n = (v as f64 / f64::from(SCROLL_PIXELS_PER_NOTCH)).round() as i32;
        n.clamp(-MAX_SCROLL_NOTCHES, MAX_SCROLL_NOTCHES)
    }
}

/// Why an action cannot run on the desktop runner, naming the action and what would be needed.
fn unsupported_action_message(action: &PlannedAction) -> String {
    let name = action_type(action);
    let needs = match action {
        PlannedAction::CdpEval { .. }
        | PlannedAction::Navigate { .. }
        | PlannedAction::ExtractWithFallback { .. } => "a browser bound over CDP",
        PlannedAction::AxAction { .. } => "an accessibility backend",
        PlannedAction::ActivateApp { .. }
        | PlannedAction::LaunchApp { .. }
        | PlannedAction::QuitApp { .. }
        | PlannedAction::Window { .. }
        | PlannedAction::Dialog { .. }
        | PlannedAction::Dock { .. }
        | PlannedAction::MenuExtra { .. } => "an app/window-management backend",
        PlannedAction::WriteCells { .. } | PlannedAction::ReadCells { .. } => {
            "a spreadsheet adapter"
        }
        PlannedAction::Custom { .. } => "the named adapter",
        PlannedAction::Done { .. } | PlannedAction::Fail { .. } => {
            "to be a move (kind done/fail), not a step"
        }
        _ => "a backend this runner does not have",
    };
    format!(
        "cannot execute `{name}`: it needs {needs}; Sightline's desktop runner executes only \
         native input (click, type, key, key_combo, scroll, drag, wait, select, extract) and \
         set_value on element ids"
    )
}
