//! The prompt of one turn, in Qwen3-VL's chat format.
//!
//! A turn is three token runs, in this order, so that each can be cached and reused:
//!
//! 1. **system** — [`system_prompt`]: the role and the move language the grammar accepts,
//!    identical every turn, so its KV is computed once per loaded planner.
//! 2. **screen** — the user turn's opening, the screenshot's `<|image_pad|>` run and the view
//!    (screen, elements, blockers, anomalies, adapter actions). `verify_done` reuses
//!    system + screen from the last `decide_next` when the screenshot is the same.
//! 3. **task** — goal, progress, memory, history, the actions allowed this turn, and the
//!    opening of the assistant turn; or, for `verify_done`, the grader question.
//!
//! Each run is tokenized on its own and ends with a newline, which Qwen's pre-tokenizer never
//! merges with the letter that follows, so the concatenation equals tokenizing the whole text.

use std::fmt::Write;

use cel_contracts::{AttemptRecord, PlanningElement, PlanningView};
use tokenizers::Tokenizer;

use crate::chat::{self, Role, Template};
use crate::decode::GrammarOptions;
use crate::error::{Error, Result};
use crate::moves::dialect::computer_use::{self, ToolLanguage};
use crate::moves::dialect::grounding;
use crate::moves::{
    element_bounds, is_bounds_fact, selected_elements, Dialect, MoveLanguage, RelativeBox,
    MAX_ID_CHARS,
};
use crate::planner::history;
use crate::tokenizer::SpecialTokens;

/// The system turn's opening: who the model is and what it sees.
const ROLE: &str = "\
You are Sightline, a computer-use agent. You see a screenshot of the user's screen and a \
description of it, and you decide the next move toward the user's goal.";

/// The system turn's closing: how to work in batches and with failures.
const DISCIPLINE: &str = "\
Keep batches short: end a batch at any step whose result you need to see before going on. A \
failed or refused step ends its batch, and the history says why. Never repeat a step that \
failed the same way. Never claim done before the screen shows it.";

/// The system prompt of a planner whose moves may contain `language`: the role, the move
/// language as the grammar accepts it ([`MoveLanguage::instructions`]), the batch
/// discipline. Identical every turn (the cached prefix); the turn lists which actions it
/// allows.
pub fn system_prompt(language: &MoveLanguage<'_>) -> String {
    format!("{ROLE}\n\n{}\n{DISCIPLINE}\n", language.instructions())
}

/// The system prompt of a planner whose grammar is built with `options`.
pub fn system_prompt_for(options: &GrammarOptions) -> String {
    system_prompt(&MoveLanguage {
        actions: &options.actions,
        coordinate_targets: options.coordinate_targets,
        limits: &options.limits,
    })
}

/// The system prompt of a planner answering in `dialect`: Sightline's own for `json`
/// ([`system_prompt_for`]), else the one the dialect's models were trained with, rendered
/// from the dialect's description ([`ToolLanguage::system_prompt`] for the `computer_use`
/// tool call, MAI-UI's grounding prompt); empty for UI-Venus's point answers, which come
/// with no system turn.
pub fn system_prompt_in(options: &GrammarOptions, dialect: Dialect) -> String {
    match dialect {
        Dialect::Json => system_prompt_for(options),
        Dialect::ComputerUse | Dialect::ComputerUseAction => ToolLanguage::new(
            &options.actions,
            options.coordinate_targets,
            options.limits.max_steps,
            dialect.has_action_line(),
        )
        .system_prompt(),
        Dialect::GroundingPoint => String::new(),
        Dialect::GroundingAnswer => grounding::ANSWER_SYSTEM_PROMPT.to_string(),
    }
}

pub use crate::moves::MAX_ELEMENTS;
/// Longest label, value or description rendered, in characters.
pub const MAX_FIELD_CHARS: usize = 120;
/// Longest rendering of the shared memory, in characters.
pub const MAX_MEMORY_CHARS: usize = 1_500;

/// The three token runs of a turn (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnTokens {
    /// Run 2: user-turn opening, image pads, view.
    pub screen: Vec<u32>,
    /// Run 3: goal, progress, memory, history, allowed actions, assistant opening.
    pub task: Vec<u32>,
}

/// What a turn's task part is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct TaskInput<'a> {
    /// The user's goal.
    pub goal: &'a str,
    /// Every earlier attempt, oldest first.
    pub history: &'a [AttemptRecord],
    /// Data the runner has accumulated.
    pub shared_memory: &'a serde_json::Value,
    /// The view (for its run progress).
    pub view: &'a PlanningView,
    /// The action types the grammar allows this turn.
    pub allowed_actions: &'a [&'a str],
}

/// A `decide_next` turn fitted to its token budget ([`PromptRenderer::fit`]).
#[derive(Debug, Clone)]
pub struct FittedTurn {
    /// The view as rendered: the grammar must be built from it.
    pub view: PlanningView,
    /// Run 2's tokens.
    pub screen: Vec<u32>,
    /// Run 2's text after the image (the view).
    pub screen_text: String,
    /// Run 3's tokens.
    pub task: Vec<u32>,
    /// Run 3's text.
    pub task_text: String,
    /// What was clipped, summarized or dropped, one line each, and the token count.
    pub notes: Vec<String>,
}

/// How much of a turn [`PromptRenderer::fit`] keeps.
#[derive(Debug, Clone, Copy)]
struct Level {
    detailed: usize,
    extras: bool,
    memory_chars: usize,
    elements: usize,
}

/// Shared memory kept after the first memory trim, in characters.
const TRIMMED_MEMORY_CHARS: usize = 300;

impl Level {
    /// The next, smaller level, and what it gives up; `None` at the smallest.
    fn next(self) -> Option<(&'static str, Level)> {
        if self.detailed > 0 {
            let detailed = match self.detailed {
                d if d > 3 => 3,
                d if d > 1 => 1,
                _ => 0,
            };
            return Some(("history detail", Level { detailed, ..self }));
        }
        if self.extras {
            return Some((
                "memories, knowledge, events, facts and evidence",
                Level {
                    extras: false,
                    ..self
                },
            ));
        }
        if self.memory_chars > TRIMMED_MEMORY_CHARS {
            return Some((
                "shared memory",
                Level {
                    memory_chars: TRIMMED_MEMORY_CHARS,
                    ..self
                },
            ));
        }
        if self.elements > 0 {
            return Some((
                "elements",
                Level {
                    elements: self.elements / 2,
                    ..self
                },
            ));
        }
        if self.memory_chars > 0 {
            return Some((
                "shared memory",
                Level {
                    memory_chars: 0,
                    ..self
                },
            ));
        }
        None
    }
}

/// One line per part a turn clipped or left out, for `--stats` and `--show-prompt`.
fn truncation_notes(
    turn: &TaskInput<'_>,
    shown: &PlanningView,
    level: Level,
    selectable: usize,
) -> Vec<String> {
    let mut notes = Vec::new();
    let goal_chars = turn.goal.trim().chars().count();
    if goal_chars > MAX_GOAL_CHARS {
        notes.push(format!(
            "goal: clipped from {goal_chars} to {MAX_GOAL_CHARS} characters"
        ));
    }
    let view = turn.view;
    let total = view.elements.len();
    if shown.elements.len() < total {
        let long_ids = view
            .elements
            .iter()
            .filter(|e| e.id.chars().nth(MAX_ID_CHARS).is_some())
            .count();
        notes.push(format!(
            "elements: {} of {total} shown ({} selectable under the view's cap of {}, {long_ids} with ids over {} characters)",
            shown.elements.len(),
            selectable,
            (view.budget.max_elements as usize).min(MAX_ELEMENTS),
            MAX_ID_CHARS
        ));
    }
    let records = turn.history.len();
    if records > level.detailed {
        notes.push(format!(
            "history: {records} records; at most the last {} steps shown in detail, older ones summarized",
            level.detailed
        ));
    }
    if !turn.shared_memory.is_null() {
        let chars = turn.shared_memory.to_string().chars().count();
        if chars > level.memory_chars {
            notes.push(format!(
                "shared memory: clipped from {chars} to {} characters",
                level.memory_chars
            ));
        }
    }
    notes
}

/// Renders turns and tokenizes them with the model's tokenizer.
#[derive(Debug, Clone)]
pub struct PromptRenderer {
    tokenizer: Tokenizer,
    special: SpecialTokens,
    system: String,
    dialect: Dialect,
    template: Template,
}

impl PromptRenderer {
    /// A renderer for `tokenizer`, which must carry the Qwen3-VL special tokens, with the
    /// system prompt `system` (see [`system_prompt`]), for Sightline's JSON moves and an
    /// Instruct template.
    pub fn new(tokenizer: Tokenizer, system: String) -> Result<Self> {
        let special = SpecialTokens::from_tokenizer(&tokenizer)?;
        Ok(PromptRenderer {
            tokenizer,
            special,
            system,
            dialect: Dialect::Json,
            template: Template::Instruct,
        })
    }

    /// The same renderer for a model answering in `dialect` (its turns are written as the
    /// dialect's models were trained: [`PromptRenderer::dialect_turn`]) with its assistant
    /// turn opened as `template` opens it.
    pub fn with_language(mut self, dialect: Dialect, template: Template) -> Self {
        self.dialect = dialect;
        self.template = template;
        self
    }

    /// The dialect turns are rendered for.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The template that opens the answers.
    pub fn template(&self) -> Template {
        self.template
    }

    /// The system prompt's text.
    pub fn system_text(&self) -> &str {
        &self.system
    }

    /// The special-token ids.
    pub fn special(&self) -> &SpecialTokens {
        &self.special
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Run 1: the system turn; none when the system prompt is empty (a dialect whose models
    /// were trained without one).
    pub fn system(&self) -> Result<Vec<u32>> {
        if self.system.is_empty() && self.dialect != Dialect::Json {
            return Ok(Vec::new());
        }
        self.encode(&chat::turn(Role::System, &self.system))
    }

    /// Runs 2 and 3 of a `decide_next` turn in the renderer's dialect: for `json`,
    /// [`fit`](Self::fit); for the other dialects, the turn as their models were trained to
    /// read it, which has no element list (they point with coordinates):
    ///
    /// - `computer_use`: the screenshot, then the instruction (the goal) and the earlier
    ///   steps' purposes as `Step N:` lines ([`computer_use::user_text`]; the last
    ///   [`MAX_PREVIOUS_ACTIONS`], a step that failed or was refused with its error);
    /// - `grounding-point`: the screenshot, then UI-Venus's instruction
    ///   ([`grounding::point_user_text`]);
    /// - `grounding-answer`: MAI-UI's instruction, then the screenshot.
    ///
    /// The goal is clipped to [`MAX_GOAL_CHARS`], each step to [`MAX_FIELD_CHARS`].
    pub fn dialect_turn(
        &self,
        turn: &TaskInput<'_>,
        system_tokens: usize,
        image_tokens: Option<usize>,
        allowed_actions: &dyn Fn(&PlanningView) -> Result<Vec<&'static str>>,
    ) -> Result<FittedTurn> {
        let goal = clip_to(turn.goal.trim(), MAX_GOAL_CHARS);
        let no_image = if image_tokens.is_none() {
            "(No screenshot this turn.)\n"
        } else {
            ""
        };
        let (before_image, after_image) = match self.dialect {
            Dialect::Json => {
                let mut fitted = self.fit(turn, system_tokens, image_tokens, allowed_actions)?;
                // The JSON task ends with an Instruct opening; a Thinking variant's prompt
                // goes on inside its opened thought, as its chat template renders it.
                if self.template.thinks() {
                    let opening = format!("{}\n", chat::THINK_OPEN);
                    fitted.task.extend(self.encode(&opening)?);
                    fitted.task_text.push_str(&opening);
                }
                return Ok(fitted);
            }
            Dialect::ComputerUse | Dialect::ComputerUseAction => {
                let (first, previous) = previous_actions(turn.history);
                (
                    String::new(),
                    format!(
                        "{no_image}{}",
                        computer_use::user_text(&goal, &previous, first)
                    ),
                )
            }
            Dialect::GroundingPoint => (
                String::new(),
                format!("{no_image}{}", grounding::point_user_text(&goal)),
            ),
            Dialect::GroundingAnswer => (
                format!("{no_image}{}", grounding::answer_user_text(&goal)),
                String::new(),
            ),
        };
        let screen = self.user_opening(&before_image, image_tokens)?;
        let task_text = format!("{after_image}{}", chat::answer_for(self.template));
        Ok(FittedTurn {
            view: turn.view.clone(),
            screen,
            screen_text: before_image,
            task: self.encode(&task_text)?,
            task_text,
            notes: Vec::new(),
        })
    }

    /// Run 2: the user turn's opening, `image_tokens` image pads (none for a text-only
    /// turn) and the view.
    pub fn screen(&self, view: &PlanningView, image_tokens: Option<usize>) -> Result<Vec<u32>> {
        self.screen_ids(&render_view(view, image_tokens.is_some()), image_tokens)
    }

    /// Run 3 of `decide_next`.
    pub fn task(&self, input: &TaskInput<'_>) -> Result<Vec<u32>> {
        self.encode(&render_task(input))
    }

    /// Runs 2 and 3 of a `decide_next` turn, fitted to the view's token budget
    /// (`view.budget.max_tokens`, counting the system run's `system_tokens` and the image
    /// pads too, never below [`MIN_TURN_TOKENS`] for runs 2 and 3).
    ///
    /// **Truncation policy.** Every part has a cap first (goal [`MAX_GOAL_CHARS`], fields
    /// [`MAX_FIELD_CHARS`], memory [`MAX_MEMORY_CHARS`], element ids [`MAX_ID_CHARS`],
    /// lists [`MAX_LIST_ENTRIES`], history [`history::DETAILED_STEPS`] detailed steps); a
    /// clipped string ends with a `…[N more chars]` marker. Then, while the turn is over
    /// budget, it gives up, in this order: history detail, oldest first (6, 3, 1, 0
    /// detailed steps); the view's memories, knowledge, events, facts and evidence; most of
    /// the shared memory; elements from the end of the selection, halving; the rest of the
    /// shared memory. `allowed_actions` gives the action tags the grammar allows for a
    /// trimmed view (the grammar is built from [`FittedTurn::view`]). Cost: a few renders
    /// and tokenizations of a text bounded by the caps, whatever the input's size.
    ///
    pub fn fit(
        &self,
        turn: &TaskInput<'_>,
        system_tokens: usize,
        image_tokens: Option<usize>,
        allowed_actions: &dyn Fn(&PlanningView) -> Result<Vec<&'static str>>,
    ) -> Result<FittedTurn> {
        let view = turn.view;
        let budget = (view.budget.max_tokens as usize)
            .saturating_sub(system_tokens)
            .saturating_sub(image_tokens.map_or(0, |n| n + 2))
            .max(MIN_TURN_TOKENS);
        let all_elements = selected_elements(view).len();
        let mut level = Level {
            detailed: history::DETAILED_STEPS,
            extras: true,
            memory_chars: MAX_MEMORY_CHARS,
            elements: all_elements,
        };
        let mut trims: Vec<&str> = Vec::new();
        let mut screen_cache: Option<((usize, bool), String, Vec<u32>)> = None;
        loop {
            let trimmed = trimmed_view(view, level.elements, level.extras);
            let key = (level.elements, level.extras);
            let (screen_text, screen) = match screen_cache.take() {
                Some((k, text, ids)) if k == key => (text, ids),
                _ => {
                    let text = render_view(&trimmed, image_tokens.is_some());
                    let ids = self.screen_ids(&text, image_tokens)?;
                    (text, ids)
                }
            };
            let allowed = allowed_actions(&trimmed)?;
            let task_text = render_task_with(
                &TaskInput {
                    view: &trimmed,
                    allowed_actions: &allowed,
                    ..*turn
                },
                level.detailed,
                level.memory_chars,
            );
            let task = self.encode(&task_text)?;
            let used = screen.len() + task.len();
            let next = level.next();
            if used <= budget || next.is_none() {
                let mut notes = truncation_notes(turn, &trimmed, level, all_elements);
                if !trims.is_empty() {
                    notes.push(format!("budget: trimmed {} to fit", trims.join(", ")));
                }
                if used > budget {
                    notes.push(format!(
                        "budget: {used} tokens over the {budget} left for view and task even fully trimmed"
                    ));
                }
                notes.push(format!(
                    "prompt: {} tokens (system {system_tokens}, image {}, view {}, task {}) of a budget of {}",
                    system_tokens + used + image_tokens.map_or(0, |n| n + 2),
                    image_tokens.unwrap_or(0),
                    screen.len(),
                    task.len(),
                    view.budget.max_tokens
                ));
                return Ok(FittedTurn {
                    view: trimmed,
                    screen,
                    screen_text,
                    task,
                    task_text,
                    notes,
                });
            }
            screen_cache = Some((key, screen_text, screen));
            if let Some((what, lower)) = next {
                if trims.last() != Some(&what) {
                    trims.push(what);
                }
                level = lower;
            }
        }
    }

    /// Run 2's tokens for an already rendered view text (from [`render_view`]).
    pub fn screen_ids(&self, view_text: &str, image_tokens: Option<usize>) -> Result<Vec<u32>> {
        let mut ids = self.user_opening("", image_tokens)?;
        ids.extend(self.encode(view_text)?);
        Ok(ids)
    }

    /// The user turn's opening and `before_image`, encoded as one text (so the tokens are
    /// those of the whole run), then `image_tokens` image pads (none for a text-only turn).
    fn user_opening(&self, before_image: &str, image_tokens: Option<usize>) -> Result<Vec<u32>> {
        let mut ids = self.encode(&format!("{}{before_image}", chat::open(Role::User)))?;
        if let Some(n) = image_tokens {
            ids.extend(chat::image_ids(&self.special, n));
        }
        Ok(ids)
    }

    /// The hint follow-up's tokens ([`render_hint_question_for`] the template).
    pub fn hint_question(&self) -> Result<Vec<u32>> {
        self.encode(&render_hint_question_for(self.template))
    }

    /// The ids of `words` that encode to exactly one token (the others are left out).
    pub fn single_token_words(&self, words: &[&str]) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        for word in words {
            let encoded = self.encode(word)?;
            if let [id] = encoded.as_slice() {
                if !ids.contains(id) {
                    ids.push(*id);
                }
            }
        }
        Ok(ids)
    }

    /// Run 3 of `verify_done`: the grader question, ending where the answer word goes
    /// ([`render_grader_question_for`] the template).
    pub fn grader_question(&self, goal: &str, summary: &str) -> Result<Vec<u32>> {
        self.encode(&render_grader_question_for(goal, summary, self.template))
    }

    /// The first token of each word, as the model would start its answer with it.
    pub fn answer_token(&self, word: &str) -> Result<u32> {
        let ids = self.encode(word)?;
        ids.first()
            .copied()
            .ok_or_else(|| Error::tokenizer(format!("{word:?} encodes to no token")))
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        crate::tokenizer::encode_ids(&self.tokenizer, text, "the prompt")
    }
}

/// Longest goal rendered, in characters (a longer one is clipped with a marker).
pub const MAX_GOAL_CHARS: usize = 2_000;
/// Most entries rendered from each of the view's lists (memories, knowledge, recent
/// events, adapter facts, evidence, blockers, anomalies, capabilities), whatever the
/// view's own budget allows.
pub const MAX_LIST_ENTRIES: usize = 12;
/// Fewest tokens the screen and task runs are given, however small the view's budget:
/// the goal and the allowed actions must fit.
pub const MIN_TURN_TOKENS: usize = 256;

/// The view as the model reads it: screen, capabilities, elements (exactly those the
/// grammar accepts: [`selected_elements`]), blockers, anomalies, and the cognition
/// layer's memories, knowledge, events, adapter facts and evidence, each list capped.
///
/// Adapter actions are not rendered: no grammar rule accepts them, and the prompt shows
/// only what the model can do (ARCHITECTURE.md, decision 4).
pub fn render_view(view: &PlanningView, has_screenshot: bool) -> String {
    let mut out = String::new();
    if !has_screenshot {
        out.push_str("(No screenshot this turn: decide from the description.)\n");
    }
    let screen = &view.screen;
    let _ = write!(out, "Screen: app {}", quoted(&screen.active_app));
    if !screen.window.is_empty() {
        let _ = write!(out, ", window {}", quoted(&screen.window));
    }
    if let Some(url) = &screen.url {
        let _ = write!(out, ", url {}", quoted(url));
    }
    out.push('\n');
    if let Some(summary) = &screen.summary {
        let _ = writeln!(out, "Summary: {}", clip(summary));
    }
    if !view.capabilities.is_empty() {
        let caps: Vec<String> = view
            .capabilities
            .iter()
            .take(MAX_LIST_ENTRIES)
            .map(|c| match &c.detail {
                Some(detail) => format!("{} ({})", clip(&c.id), clip(detail)),
                None => clip(&c.id),
            })
            .collect();
        let _ = writeln!(out, "Capabilities: {}.", caps.join(", "));
    }
    let selected = selected_elements(view);
    let shown = selected.len();
    let omitted = view.elements.len() - shown + view.omitted_counts.elements as usize;
    if selected.is_empty() {
        let _ = write!(out, "Elements: none listed");
        if omitted > 0 {
            let _ = write!(out, " ({omitted} not shown)");
        }
        out.push_str("; target points as xy:X,Y.\n");
    } else {
        let _ = write!(out, "Elements ({shown}");
        if omitted > 0 {
            let _ = write!(out, ", {omitted} more not shown");
        }
        if selected
            .iter()
            .any(|e| element_bounds(view, &e.id).is_some())
        {
            out.push_str("; at left,top-right,bottom");
        }
        out.push_str("):\n");
        for element in selected {
            render_element(&mut out, element, element_bounds(view, &element.id));
        }
    }
    for blocker in view.blockers.iter().take(MAX_LIST_ENTRIES) {
        let _ = writeln!(
            out,
            "Blocker ({}): {}",
            clip(&blocker.kind),
            clip(&blocker.description)
        );
    }
    for anomaly in view.anomalies.iter().take(MAX_LIST_ENTRIES) {
        let _ = writeln!(
            out,
            "Anomaly ({}): {}",
            clip(&anomaly.kind),
            clip(&anomaly.description)
        );
    }
    let cap = |budget: u32| (budget as usize).min(MAX_LIST_ENTRIES);
    for memory in view.memories.iter().take(cap(view.budget.max_memories)) {
        let _ = writeln!(
            out,
            "Memory ({}): {}",
            clip(&memory.kind),
            clip(&memory.summary)
        );
    }
    for k in view.knowledge.iter().take(cap(view.budget.max_knowledge)) {
        let _ = writeln!(out, "Knowledge ({}): {}", clip(&k.source), clip(&k.content));
    }
    for event in view
        .recent_events
        .iter()
        .take(cap(view.budget.max_recent_events))
    {
        let _ = writeln!(
            out,
            "Recent event ({}): {}",
            clip(&event.kind),
            clip(&event.summary)
        );
    }
    for fact in view
        .adapter_facts
        .iter()
        .filter(|f| !is_bounds_fact(f))
        .take(cap(view.budget.max_adapter_facts))
    {
        let _ = writeln!(
            out,
            "Fact ({}.{}): {}",
            clip(&fact.adapter),
            clip(&fact.kind),
            clip(&fact.payload.to_string())
        );
    }
    for evidence in view.evidence.iter().take(MAX_LIST_ENTRIES) {
        let _ = writeln!(
            out,
            "Evidence ({}): {}",
            clip(&evidence.source),
            clip(&evidence.summary)
        );
    }
    if let Some(rationale) = &view.selection_rationale {
        let _ = writeln!(out, "Why these elements: {}", clip(rationale));
    }
    out
}

/// The view a turn renders when it must fit a token budget: the first `elements` of
/// the [`selected_elements`], and the cognition lists (memories, knowledge, events,
/// facts, evidence) kept only when `extras`. The grammar is built from this same view,
/// so it accepts exactly the ids rendered.
pub fn trimmed_view(view: &PlanningView, elements: usize, extras: bool) -> PlanningView {
    let mut out = view.clone_without_elements();
    out.elements = selected_elements(view)
        .into_iter()
        .take(elements)
        .cloned()
        .collect();
    let dropped = view.elements.len() - out.elements.len();
    out.omitted_counts.elements = view.omitted_counts.elements.saturating_add(dropped as u32);
    if !extras {
        out.memories.clear();
        out.knowledge.clear();
        out.recent_events.clear();
        // The element bounds are part of the elements, not an extra.
        out.adapter_facts.retain(is_bounds_fact);
        out.evidence.clear();
    }
    out
}

/// Cloning a view without copying its (possibly huge) element list and goal.
trait CloneWithoutElements {
    fn clone_without_elements(&self) -> PlanningView;
}

impl CloneWithoutElements for PlanningView {
    fn clone_without_elements(&self) -> PlanningView {
        let cap = |v: usize| v.min(MAX_LIST_ENTRIES);
        PlanningView {
            goal: String::new(),
            budget: self.budget.clone(),
            screen: self.screen.clone(),
            elements: Vec::new(),
            // The bounds fact (kept whole, wherever it is) and the first other facts.
            adapter_facts: self
                .adapter_facts
                .iter()
                .filter(|f| is_bounds_fact(f))
                .take(1)
                .chain(
                    self.adapter_facts
                        .iter()
                        .filter(|f| !is_bounds_fact(f))
                        .take(MAX_LIST_ENTRIES),
                )
                .cloned()
                .collect(),
            adapter_actions: Vec::new(),
            capabilities: self.capabilities[..cap(self.capabilities.len())].to_vec(),
            run_progress: self.run_progress.clone(),
            memories: self.memories[..cap(self.memories.len())].to_vec(),
            knowledge: self.knowledge[..cap(self.knowledge.len())].to_vec(),
            recent_events: self.recent_events[..cap(self.recent_events.len())].to_vec(),
            blockers: self.blockers[..cap(self.blockers.len())].to_vec(),
            anomalies: self.anomalies[..cap(self.anomalies.len())].to_vec(),
            evidence: self.evidence[..cap(self.evidence.len())].to_vec(),
            selection_rationale: self.selection_rationale.clone(),
            omitted_counts: self.omitted_counts.clone(),
            adapter_actions_prompt: None,
        }
    }
}

fn render_element(out: &mut String, e: &PlanningElement, bounds: Option<RelativeBox>) {
    // Ids are never clipped (the model must copy them exactly); `selected_elements`
    // leaves out ids too long to show.
    let _ = write!(out, "- {} {}", json_string(&e.id), clip(&e.element_type));
    if let Some(label) = &e.label {
        let _ = write!(out, " {}", quoted(label));
    }
    // Where it is, in the coordinates of xy: targets.
    if let Some([left, top, right, bottom]) = bounds {
        let _ = write!(out, " at {left},{top}-{right},{bottom}");
    }
    if let Some(value) = &e.value {
        let _ = write!(out, " value={}", quoted(value));
    }
    let s = &e.state;
    let flags = [
        (s.focused, "focused"),
        (s.selected, "selected"),
        (!s.enabled, "disabled"),
        (s.checked, "checked"),
        (s.expanded, "expanded"),
    ];
    for (on, name) in flags {
        if on {
            let _ = write!(out, " [{name}]");
        }
    }
    if let Some(options) = &e.select_options {
        let _ = write!(out, " options={}", quoted(options));
    }
    out.push('\n');
}

/// The task part of a `decide_next` turn, ending with the assistant turn's opening, with
/// the history's last [`history::DETAILED_STEPS`] steps in detail.
pub fn render_task(input: &TaskInput<'_>) -> String {
    render_task_with(input, history::DETAILED_STEPS, MAX_MEMORY_CHARS)
}

/// [`render_task`] with the history's last `detailed_steps` steps in detail and the
/// shared memory clipped to `memory_chars`.
pub fn render_task_with(
    input: &TaskInput<'_>,
    detailed_steps: usize,
    memory_chars: usize,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Goal: {}", clip_to(input.goal.trim(), MAX_GOAL_CHARS));
    let progress = &input.view.run_progress;
    if progress.max_steps > 0 {
        let _ = writeln!(
            out,
            "Progress: {} of {} steps used.",
            progress.steps_used, progress.max_steps
        );
    }
    if !input.shared_memory.is_null() && memory_chars > 0 {
        let memory = input.shared_memory.to_string();
        let _ = writeln!(out, "Memory: {}", clip_to(&memory, memory_chars));
    }
    let _ = writeln!(
        out,
        "History: {}",
        defuse(&history::render_detailed(input.history, detailed_steps))
    );
    let _ = writeln!(
        out,
        "Allowed actions: {}.",
        input.allowed_actions.join(", ")
    );
    out.push_str(&chat::answer());
    out
}

/// The grader question, ending where the answer word goes. It follows the agent's own
/// system and screen runs (so a claim judged on the screen the agent last saw reuses their
/// cached KV) and asks for a judgement, not a move.
pub fn render_grader_question(goal: &str, summary: &str) -> String {
    render_grader_question_for(goal, summary, Template::Instruct)
}

/// [`render_grader_question`] for a model of `template`: a Thinking variant's thought is
/// closed empty before the answer word ([`chat::answer_without_thought`]), since the verdict is
/// read from the next token's logits.
pub fn render_grader_question_for(goal: &str, summary: &str, template: Template) -> String {
    format!(
        "Goal: {}\nThe agent claims the goal is done: {}\nDo not plan a move now: judge only by \
what the screen shows. Is the goal achieved? Answer with one word, Yes or No.{}",
        clip_to(goal.trim(), MAX_GOAL_CHARS),
        clip_to(summary.trim(), MAX_MEMORY_CHARS),
        chat::answer_without_thought(template)
    )
}

/// The follow-up after a rejection, asking for one hint word (the answer is read from
/// the four hint words' logits only: a constrained one-word answer).
pub fn render_hint_question() -> String {
    render_hint_question_for(Template::Instruct)
}

/// [`render_hint_question`] for a model of `template` (its thought closed empty).
pub fn render_hint_question_for(template: Template) -> String {
    format!(
        "No{}{}What should the agent do next? Answer with one word: Retry (the last action did \
not take effect), Switch (a different kind of action is needed), Target (a different element is \
needed) or Stop (the goal cannot be reached).{}",
        chat::END,
        chat::open(Role::User),
        chat::answer_without_thought(template)
    )
}

/// Most earlier steps a dialect turn lists (the `computer_use` dialects' "Previous actions").
pub const MAX_PREVIOUS_ACTIONS: usize = 20;

/// The earlier steps as a `computer_use` model reads them: each step's purpose (for moves
/// in that dialect, its `Action:` sentence), the same purpose in a row once (a double click's
/// two steps), a step that failed or was refused followed by its error, the last
/// [`MAX_PREVIOUS_ACTIONS`] only; with the number of the first one listed.
fn previous_actions(history: &[AttemptRecord]) -> (usize, Vec<String>) {
    let mut lines: Vec<String> = Vec::new();
    let mut last: Option<(&str, bool)> = None;
    for record in history {
        let key = (record.step_purpose.as_str(), record.succeeded);
        if last == Some(key) {
            continue;
        }
        last = Some(key);
        let purpose = clip(record.step_purpose.trim());
        lines.push(match (&record.error, record.succeeded) {
            (Some(error), false) => format!(
                "{purpose} (failed: {})",
                clip_to(error.trim(), MAX_FIELD_CHARS)
            ),
            (None, false) => format!("{purpose} (failed)"),
            _ => purpose,
        });
    }
    let skip = lines.len().saturating_sub(MAX_PREVIOUS_ACTIONS);
    (skip + 1, lines.split_off(skip))
}

fn quoted(text: &str) -> String {
    json_string(&clip(text))
}

/// JSON string syntax: ids and labels are user data and may hold quotes or newlines.
fn json_string(text: &str) -> String {
    defuse(&serde_json::Value::String(text.to_string()).to_string())
}

fn clip(text: &str) -> String {
    clip_to(text, MAX_FIELD_CHARS)
}

/// `text` cut to `max_chars` characters, with a marker saying how much was cut, and
/// defused. Costs one pass over the text.
pub(crate) fn clip_to(text: &str, max_chars: usize) -> String {
    defuse(&clip_marked(text, max_chars))
}

/// `text` cut to `max_chars` characters with a `…[N more chars]` marker; not defused.
pub(crate) fn clip_marked(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => {
            let rest = text[cut..].chars().count();
            format!("{}…[{rest} more chars]", &text[..cut])
        }
        None => text.to_string(),
    }
}

/// User text must not smuggle chat-control tokens into the prompt: the tokenizer would read
/// `<|im_end|>` in a window title as the real end of the turn, and `<tool_call>` or `</think>`
/// as the tokens a dialect's answer is made of. A zero-width space after the `<` keeps the
/// text readable and breaks the match.
pub(crate) fn defuse(text: &str) -> String {
    let mut out = text.replace("<|", "<\u{200b}|");
    for tag in TAG_TOKENS {
        if out.contains(tag) {
            out = out.replace(tag, &format!("<\u{200b}{}", &tag[1..]));
        }
    }
    out
}

/// Qwen3's added tokens spelled as tags rather than `<|…|>`.
const TAG_TOKENS: [&str; 6] = [
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
];
