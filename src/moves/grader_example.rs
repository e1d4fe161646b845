//! The record of one judged done claim: what `run --trace` writes (unlabelled, with the
//! grader's own verdict) and `sightline grader fit` reads once a person has labelled it.

use std::path::PathBuf;

use cel_contracts::{NextActionHint, PlanningView};
use serde::{Deserialize, Serialize};

/// One labelled (or, as `run --trace` writes it, to-be-labelled) done claim: a line of
/// the JSONL file `grader fit` reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GraderExample {
    /// The screenshot the claim was judged on (PNG or JPEG), relative to the JSONL file.
    pub screenshot: PathBuf,
    /// The view at the time; absent: an empty desktop view.
    #[serde(default)]
    pub view: Option<PlanningView>,
    /// The user's goal.
    pub goal: String,
    /// What the agent claimed.
    pub summary: String,
    /// The label: was the goal really done? `null` until a person labels it.
    #[serde(default)]
    pub verified: Option<bool>,
    /// The label's hint when not done (`retry_last_action`, `different_action`,
    /// `different_target`, `give_up`).
    #[serde(default)]
    pub hint: Option<NextActionHint>,
    /// What the grader said at run time (written by `run --trace`; ignored by `fit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grader_verified: Option<bool>,
}
