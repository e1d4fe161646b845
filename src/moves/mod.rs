//! The move vocabulary: what a move may say and how it is spelled, in one place for every
//! layer that speaks about moves (ARCHITECTURE.md, "Layers").
//!
//! The grammar (`decode`) constrains decoding to it, the prompt (`planner`) explains it, the
//! runner executes it, and `eval` scores it; each imports it from here and none reaches into
//! another for it:
//!
//! - [`target`]: `target_id` syntax, element ids or `xy:X,Y` points, with the one parser
//!   ([`parse_target`]) and the grammar's pattern ([`coordinate_regex`]);
//! - [`ActionKind`]: the action types by their `type` tag, and what each needs from the
//!   runtime;
//! - [`keys`]: the key names the grammar offers and the runner presses;
//! - [`capabilities`]: the capability ids a view announces and what they switch on;
//! - [`MoveLimits`] and the other bounds: steps, string lengths, waits, scrolls;
//! - [`MoveLanguage`]: the move language explained to the model, from the same description;
//! - [`Dialect`]: the output languages of model families trained on their own format (Qwen's
//!   `computer_use` tool call, grounding points), their prompts and their translation into
//!   moves ([`dialect`]);
//! - [`selected_elements`]: the elements a turn shows and accepts, and [`bounds_fact`], how
//!   the runner tells the planner where they are;
//! - [`GraderExample`]: the record of a judged done claim that runs write and `grader fit`
//!   reads.

mod action;
pub mod capabilities;
pub mod dialect;
mod elements;
mod grader_example;
pub mod keys;
mod language;
mod limits;
pub mod target;

pub use action::{ActionKind, Field, FieldKind};
pub use capabilities::{
    Capabilities, CAPABILITY_CDP_PREFIX, CAPABILITY_NATIVE_INPUT, CAPABILITY_VISION,
};
pub use dialect::Dialect;
pub use elements::{
    bounds_fact, element_bounds, is_bounds_fact, selected_elements, RelativeBox, MAX_ELEMENTS,
    MAX_ID_CHARS,
};
pub use grader_example::GraderExample;
pub use keys::{KEY_ALIASES, KEY_NAMES};
pub use language::{example, MoveLanguage, PROMPT_CHARS_PER_TOKEN};
pub use limits::{MoveLimits, MAX_EXPECT_MS};
pub use target::{
    coordinate_regex, parse_point, parse_target, RelativePoint, Target, COORDINATE_MAX, XY_PREFIX,
};
