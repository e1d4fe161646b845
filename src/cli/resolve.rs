//! One road from arguments to a model: every command resolves `--model`, `--device` and
//! `--quantize` through these functions, so one spelling works everywhere. `--model` goes
//! through [`resolve_model`] in `plan`, `verify`, `generate`, `grader fit`, `bench --model`,
//! `run` and `eval desktop`; `models download/show` name a manifest id and use the hub's own
//! resolver, which can be told to stay offline.

use anyhow::Result;
use sightline::hub::{self, ResolvedModel};
use sightline::model::{DeviceChoice, Quantization};
use sightline::planner::PlannerOptions;
use sightline::ModelSource;

/// The `--model` text a command acts on: the argument, or the id of the manifest marked
/// default. Commands that name the model before resolving it (in a label or an early error)
/// take it from here, then pass it to [`resolve_model`].
pub fn model_spec(spec: Option<&str>) -> sightline::Result<String> {
    match spec {
        Some(spec) => Ok(spec.to_string()),
        None => Ok(hub::default_manifest()?.id),
    }
}

/// `--model` (a manifest id, a Hub repo id or a local path; default: the manifest marked
/// default) resolved through the hub, downloading when needed.
pub fn resolve_model(spec: Option<&str>) -> sightline::Result<ResolvedModel> {
    hub::resolve_model(&model_spec(spec)?)
}

/// `--quantize`: `q8_0`, `q6k`, `q5k` or `q4k` (older spellings read too), or `none` where a
/// command has a default to turn off.
pub fn parse_quantize(text: &str) -> sightline::Result<Option<Quantization>> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    text.parse().map(Some)
}

/// The model settings every model command shares.
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelSettings<'a> {
    /// `--device`: auto, cpu, cuda, cuda:N, metal.
    pub device: &'a str,
    /// `--quantize`, for safetensors models.
    pub quantize: Option<&'a str>,
    /// `--max-visual-tokens`; default: the resolved model's budget.
    pub max_visual_tokens: Option<usize>,
}

/// The planner options for a resolved model: the one place they are built from arguments.
pub fn planner_options(
    resolved: &ResolvedModel,
    settings: &ModelSettings<'_>,
) -> Result<PlannerOptions> {
    let mut options = PlannerOptions::new(ModelSource::try_from(resolved)?);
    options.device = settings.device.parse::<DeviceChoice>()?;
    options.quantize = match settings.quantize {
        Some(q) => parse_quantize(q)?.map(Quantization::dtype),
        None => None,
    };
    options.max_visual_tokens = Some(
        settings
            .max_visual_tokens
            .unwrap_or(resolved.visual_token_budget as usize),
    );
    Ok(options)
}
