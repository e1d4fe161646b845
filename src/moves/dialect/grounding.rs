//! Grounding dialects: models trained to answer one point for an instruction ("the OK
//! button"), used here as click-only planners. Both answer on the 0–1000 grid over the
//! screenshot.
//!
//! - [`Dialect::GroundingPoint`](super::Dialect::GroundingPoint), UI-Venus-1.5's: a bare
//!   `[x,y]`, or `[-1,-1]` when the instruction does not fit the screen. Its prompt is one user
//!   turn, no system turn ([`point_user_text`]).
//! - [`Dialect::GroundingAnswer`](super::Dialect::GroundingAnswer), MAI-UI's: its reasoning in
//!   `<grounding_think>` tags, then `<answer>\n{"coordinate":[x,y]}\n</answer>`. Its prompt is
//!   a system turn ([`ANSWER_SYSTEM_PROMPT`]) and the instruction before the screenshot.
//!
//! A point becomes a batch of one click at `xy:X,Y` whose purpose is the instruction;
//! `[-1,-1]` becomes `fail`.

use cel_contracts::{NextMove, PlannedAction, Step, StepKind};

use super::{not_a_move, point_target};
use crate::error::Result;

/// UI-VENUS-1.5's answer when the instruction fits nothing on screen.
pub const NO_POINT: &str = "[-1,-1]";

/// What opens MAI-UI's reasoning.
pub const THINK_OPEN: &str = "<grounding_think>";

/// What closes it.
pub const THINK_CLOSE: &str = "</grounding_think>";

/// What opens MAI-UI's answer, up to the first coordinate.
pub const ANSWER_OPEN: &str = "<answer>\n{\"coordinate\":[";

/// What closes it, after the second coordinate.
pub const ANSWER_CLOSE: &str = "]}\n</answer>";

/// MAI-UI's grounding system prompt (`MAI_MOBILE_SYS_PROMPT_GROUNDING` in its
/// `src/prompt.py`, stripped as its agent strips it; the double space is its own).
pub const ANSWER_SYSTEM_PROMPT: &str = "You are a GUI grounding agent. \n\
## Task\n\
Given a screenshot and the user's grounding instruction. Your task is to accurately locate a UI element based on the user's instructions.\n\
First, you should carefully examine the screenshot and analyze the user's instructions,  translate the user's instruction into a effective reasoning process, and then provide the final coordinate.\n\
## Output Format\n\
Return a json object with a reasoning process in <grounding_think></grounding_think> tags, a [x,y] format coordinate within <answer></answer> XML tags:\n\
<grounding_think>...</grounding_think>\n\
<answer>\n\
{\"coordinate\": [x,y]}\n\
</answer>";

/// UI-Venus-1.5's grounding prompt for `instruction` (its `ui_venus1_5_gd.py`: the
/// instruction's trailing period dropped, then put into the template).
pub fn point_user_text(instruction: &str) -> String {
    let instruction = instruction.trim();
    let instruction = instruction.strip_suffix('.').unwrap_or(instruction);
    format!(
        "Output the center point of the position corresponding to the following instruction: \
         \n{instruction}. \n\nThe output should just be the coordinates of a point, in the \
         format [x,y]. Additionally, if the task is infeasible (e.g., the task is not related \
         to the image), the output should be {NO_POINT}."
    )
}

/// MAI-UI's user text, which comes before the screenshot: the instruction and a newline.
pub fn answer_user_text(instruction: &str) -> String {
    format!("{}\n", instruction.trim())
}

/// Translate a grounding answer (`point` form when `bare`, else MAI-UI's tags) into a click
/// at the point, with `instruction` as its purpose; UI-Venus's `[-1,-1]` into `fail`.
/// Errors ([`Error::Decode`](crate::Error::Decode) with the text): an answer not in the
/// dialect, a point off the grid.
pub fn translate(answer: &str, bare: bool, instruction: &str) -> Result<NextMove> {
    let fail = |reason: &str| not_a_move(reason, answer);
    let text = answer.trim();
    let point = if bare {
        if text == NO_POINT {
            return Ok(NextMove::Fail {
                reason: format!("nothing on the screen matches: {}", instruction.trim()),
            });
        }
        text.strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .ok_or_else(|| fail("not a point [x,y]"))?
    } else {
        let after_think = text
            .strip_prefix(THINK_OPEN)
            .and_then(|t| t.split_once(THINK_CLOSE))
            .map(|(_, rest)| rest.trim_start())
            .ok_or_else(|| fail("no <grounding_think>…</grounding_think> block"))?;
        let answer_open = ANSWER_OPEN.replace('\n', "");
        let compact: String = after_think.chars().filter(|c| *c != '\n').collect();
        // The answer's JSON is read without its newlines; `{"coordinate": [x, y]}` with
        // spaces (as MAI-UI's prompt spells it) reads the same.
        let compact = compact.replace("\": [", "\":[");
        let inner = compact
            .strip_prefix(&answer_open)
            .and_then(|t| t.strip_suffix(&ANSWER_CLOSE.replace('\n', "")))
            .ok_or_else(|| fail("no <answer>{\"coordinate\":[x,y]}</answer> block"))?;
        return click(inner, instruction, answer);
    };
    click(point, instruction, answer)
}

/// A batch of one click at the point `x,y` (or `x, y`).
fn click(point: &str, instruction: &str, answer: &str) -> Result<NextMove> {
    let fail = |reason: &str| not_a_move(reason, answer);
    let (x, y) = point
        .split_once(',')
        .ok_or_else(|| fail("not a point x,y"))?;
    let coordinate = |s: &str| {
        s.trim()
            .parse::<i64>()
            .map_err(|e| not_a_move(format!("coordinate {s:?}: {e}"), answer))
    };
    let target_id = point_target(coordinate(x)?, coordinate(y)?, answer)?;
    let purpose = match instruction.trim() {
        "" => format!("click {target_id}"),
        goal => goal.to_string(),
    };
    Ok(NextMove::Batch {
        purpose: purpose.clone(),
        steps: vec![Step {
            purpose,
            kind: StepKind::Deterministic,
            action: PlannedAction::Click {
                target_id,
                expect_after: None,
            },
        }],
    })
}
