//! One road from arguments to settings: the model options every command shares.
//!
//! [`ModelArgs`] is flattened into every command that loads a model (`run`, `plan`, `verify`,
//! `generate`, `grader fit`, `bench`, `eval desktop`, `eval grounding`), so `--model`,
//! `--device`, `--quantize`, `--max-visual-tokens`, `--threads`, `--dtype`, `--dialect` and `--template` are spelled, defaulted and
//! checked the same way everywhere. Device, quantization, activation type and budget are parsed into typed
//! values while the command line is parsed: a typo is a usage error before anything is
//! resolved, downloaded or loaded. [`ModelArgs::resolve`] then turns `--model` into files
//! (downloading when needed) and [`ModelArgs::planner_options`] is the one builder of
//! [`PlannerOptions`] from arguments; `sightline eval` starts its `sightline run` children with
//! [`ModelArgs::to_cli_args`], the same flags written back.

use std::str::FromStr;

use candle_core::quantized::GgmlDType;
use candle_core::DType;

use crate::chat::Template;
use crate::error::{Error, Result};
use crate::hub::{self, ResolvedModel};
use crate::image::MAX_VISUAL_TOKENS;
use crate::model::{DeviceChoice, Quantization};
use crate::moves::Dialect;
use crate::planner::PlannerOptions;
use crate::ModelSource;

/// Most threads `--threads` accepts (a typo such as 40000 is an error, not 40,000 threads).
pub const MAX_THREADS: usize = 4096;

/// `--quantize`: a type to quantize float weights to while loading, or `none` (load them as
/// stored, where a command quantizes by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantize {
    /// Keep the stored types.
    AsStored,
    /// Quantize float matrices to this type.
    To(Quantization),
}

impl FromStr for Quantize {
    type Err = Error;

    /// `none`, or a [`Quantization`] spelling (`q8_0`, `q6k`, `q5k`, `q4k`).
    fn from_str(s: &str) -> Result<Self> {
        if s.trim().eq_ignore_ascii_case("none") {
            return Ok(Quantize::AsStored);
        }
        s.parse().map(Quantize::To)
    }
}

impl std::fmt::Display for Quantize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Quantize::AsStored => f.write_str("none"),
            Quantize::To(q) => q.fmt(f),
        }
    }
}

/// The model options every model command shares (clap-flattened).
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct ModelArgs {
    /// Model: a manifest id (`qwen3-vl-2b`, `qwen3-vl-4b:q8_0`), a Hub repo id or a local path.
    /// Default: the manifest marked default.
    #[arg(long)]
    pub model: Option<String>,
    /// Device: auto (CUDA, then Metal, then the CPU), cpu, cuda, cuda:N, metal.
    #[arg(long, default_value = "auto")]
    pub device: DeviceChoice,
    /// Quantize a safetensors model's float weights while loading: q8_0, q6k, q5k, q4k, or
    /// none (as stored; the default of every command but `bench`).
    #[arg(long)]
    pub quantize: Option<Quantize>,
    /// Most visual tokens per screenshot, 1 to 100,000 (default: the model manifest's budget).
    #[arg(long, value_parser = parse_visual_tokens)]
    pub max_visual_tokens: Option<usize>,
    /// Threads for the model and the image preprocessing (default: all cores).
    #[arg(long, value_parser = parse_threads)]
    pub threads: Option<usize>,
    /// Activation type: f32, bf16 or f16 (default: f32; on CUDA, bf16 for a model whose
    /// layers are stored in f16 or bf16).
    #[arg(long, value_parser = parse_dtype)]
    pub dtype: Option<DType>,
    /// The output language the model answers in: json (Sightline's NextMove JSON),
    /// qwen-computer-use, qwen-computer-use-action, grounding-point, grounding-answer
    /// (default: the model manifest's, else json).
    #[arg(long)]
    pub dialect: Option<Dialect>,
    /// Its chat template: qwen3-vl (Instruct) or qwen3-vl-thinking (a Thinking variant,
    /// which thinks before it answers; default: the model manifest's, else qwen3-vl).
    #[arg(long)]
    pub template: Option<Template>,
    /// Keep the system prompt's KV in memory only, not on disk under the cache directory
    /// (`$SIGHTLINE_CACHE/prefix`, else `~/.cache/sightline/prefix`; at most 8 entries and
    /// 3 GiB): every new process then prefills it again.
    #[arg(long)]
    pub no_prefix_cache: bool,
}

/// `--max-visual-tokens`: 1 to [`MAX_VISUAL_TOKENS`], so 0 and absurd values are usage
/// errors naming the flag (clap prints it and exits 2), never a wrapped budget.
pub fn parse_visual_tokens(s: &str) -> std::result::Result<usize, String> {
    parse_count(s, MAX_VISUAL_TOKENS, "visual tokens")
}

/// `--threads`: 1 to [`MAX_THREADS`].
pub fn parse_threads(s: &str) -> std::result::Result<usize, String> {
    parse_count(s, MAX_THREADS, "threads")
}

/// `--dtype`: an activation type the model runs in.
pub fn parse_dtype(s: &str) -> std::result::Result<DType, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "f32" => Ok(DType::F32),
        "bf16" => Ok(DType::BF16),
        "f16" => Ok(DType::F16),
        _ => Err("expected f32, bf16 or f16".into()),
    }
}

/// A count of `what` from 1 to `max`, or the usage error saying so.
fn parse_count(s: &str, max: usize, what: &str) -> std::result::Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("{e}"))?;
    if (1..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!("expected 1 to {max} {what}"))
    }
}

impl ModelArgs {
    /// The `--model` text this command acts on: the argument, or the id of the manifest
    /// marked default.
    pub fn spec(&self) -> Result<String> {
        match &self.model {
            Some(spec) => Ok(spec.clone()),
            None => Ok(hub::default_manifest()?.id),
        }
    }

    /// `--model` resolved through the hub (a manifest id, a Hub repo id or a local path),
    /// downloading when needed.
    pub fn resolve(&self) -> Result<ResolvedModel> {
        hub::resolve_model(&self.spec()?)
    }

    /// The quantize-at-load type: `--quantize`, else `default` (a command's own default;
    /// `none` turns it off).
    pub fn quantize_dtype(&self, default: Option<Quantization>) -> Option<GgmlDType> {
        match self.quantize {
            Some(Quantize::AsStored) => None,
            Some(Quantize::To(q)) => Some(q.dtype()),
            None => default.map(Quantization::dtype),
        }
    }

    /// Sets the thread count for candle's and rayon's pools (they size themselves from these
    /// variables on first use, so this runs before any tensor work) and returns it: `--threads`,
    /// else every core.
    pub fn apply_threads(&self) -> usize {
        let threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        if self.threads.is_some() {
            std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
            std::env::set_var("CANDLE_NUM_THREADS", threads.to_string());
        }
        threads
    }

    /// The planner options for `resolved`: the one place they are built from arguments.
    pub fn planner_options(&self, resolved: &ResolvedModel) -> Result<PlannerOptions> {
        let mut options = PlannerOptions::new(ModelSource::try_from(resolved)?);
        options.device = self.device;
        options.quantize = self.quantize_dtype(None);
        options.dtype = self.dtype;
        options.max_visual_tokens = Some(
            self.max_visual_tokens
                .unwrap_or(resolved.visual_token_budget as usize),
        );
        options.dialect = self.dialect.unwrap_or(resolved.dialect);
        options.template = self.template.unwrap_or(resolved.template);
        options.prefix_cache =
            (!self.no_prefix_cache).then(crate::planner::prefix_store::default_dir);
        Ok(options)
    }

    /// [`resolve`](Self::resolve), then [`planner_options`](Self::planner_options).
    pub fn resolve_planner_options(&self) -> Result<PlannerOptions> {
        self.planner_options(&self.resolve()?)
    }

    /// The same settings as command-line flags, for a child `sightline` process. Only what
    /// was given is written, so the child applies the same defaults.
    pub fn to_cli_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(model) = &self.model {
            args.extend(["--model".to_string(), model.clone()]);
        }
        args.extend(["--device".to_string(), self.device.to_string()]);
        if let Some(q) = self.quantize {
            args.extend(["--quantize".to_string(), q.to_string()]);
        }
        if let Some(n) = self.max_visual_tokens {
            args.extend(["--max-visual-tokens".to_string(), n.to_string()]);
        }
        if let Some(n) = self.threads {
            args.extend(["--threads".to_string(), n.to_string()]);
        }
        if let Some(d) = self.dtype {
            args.extend(["--dtype".to_string(), d.as_str().to_string()]);
        }
        if let Some(d) = self.dialect {
            args.extend(["--dialect".to_string(), d.to_string()]);
        }
        if let Some(t) = self.template {
            args.extend(["--template".to_string(), t.to_string()]);
        }
        if self.no_prefix_cache {
            args.push("--no-prefix-cache".to_string());
        }
        args
    }
}

/// The budgets of a run, as `sightline run` takes them; `sightline eval` writes each task's
/// back with [`to_cli_args`](Self::to_cli_args) for its `sightline run` child.
#[cfg(feature = "desktop")]
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct RunBudgetArgs {
    /// Step budget: the run fails when this many steps have run.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps: u32,
    /// Wall-clock budget in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Attempts of one step whose input fails before its batch ends as failed.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_step_retries: u32,
    /// Batches in a row that may end on a failed or refused step (each one a turn the planner
    /// reads) before the run ends as failed.
    #[arg(long, default_value_t = crate::runner::DEFAULT_MAX_FAILURES, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_failures: u32,
}

#[cfg(feature = "desktop")]
impl Default for RunBudgetArgs {
    fn default() -> Self {
        RunBudgetArgs {
            max_steps: 30,
            timeout: 300,
            max_step_retries: 3,
            max_failures: crate::runner::DEFAULT_MAX_FAILURES,
        }
    }
}

#[cfg(feature = "desktop")]
impl RunBudgetArgs {
    /// The contract's limits.
    pub fn limits(&self) -> cel_contracts::RunLimits {
        cel_contracts::RunLimits {
            max_steps: self.max_steps,
            timeout_ms: self.timeout.saturating_mul(1000),
            max_step_retries: self.max_step_retries,
            ..cel_contracts::RunLimits::default()
        }
    }

    /// The same budgets as `sightline run` flags.
    pub fn to_cli_args(&self) -> Vec<String> {
        vec![
            "--max-steps".into(),
            self.max_steps.to_string(),
            "--timeout".into(),
            self.timeout.to_string(),
            "--max-step-retries".into(),
            self.max_step_retries.to_string(),
            "--max-failures".into(),
            self.max_failures.to_string(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        model: ModelArgs,
    }

    fn parse(args: &[&str]) -> std::result::Result<ModelArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("sightline").chain(args.iter().copied()))
            .map(|c| c.model)
    }

    #[test]
    fn typos_in_device_quantize_budget_threads_and_dtype_are_usage_errors_at_parse_time() {
        for bad in [
            &["--device", "cuda:x"][..],
            &["--device", "gpu"],
            &["--quantize", "q3k"],
            &["--max-visual-tokens", "0"],
            &["--threads", "0"],
            &["--threads", "many"],
            &["--dialect", "tars"],
            &["--template", "chatml"],
            &["--dtype", "f64"],
        ] {
            let err = parse(bad).err();
            assert!(
                matches!(&err, Some(e) if e.kind() == clap::error::ErrorKind::ValueValidation),
                "{bad:?}: {err:?}"
            );
        }
    }

    #[test]
    fn flags_written_back_parse_to_the_same_settings() -> std::result::Result<(), clap::Error> {
        for given in [
            &[][..],
            &[
                "--model",
                "qwen3-vl-4b:q8_0",
                "--device",
                "cuda:1",
                "--quantize",
                "none",
                "--max-visual-tokens",
                "640",
                "--threads",
                "3",
                "--dtype",
                "f32",
                "--dialect",
                "qwen-computer-use-action",
                "--template",
                "qwen3-vl-thinking",
                "--no-prefix-cache",
            ],
            &["--device", "metal", "--quantize", "Q6_K", "--dtype", "BF16"],
        ] {
            let args = parse(given)?;
            let again = args.to_cli_args();
            let again: Vec<&str> = again.iter().map(String::as_str).collect();
            assert_eq!(parse(&again)?, args, "{given:?} -> {again:?}");
        }
        Ok(())
    }

    #[cfg(feature = "desktop")]
    #[test]
    fn run_budgets_written_back_parse_to_the_same_budgets() -> std::result::Result<(), clap::Error>
    {
        #[derive(Debug, Parser)]
        struct Run {
            #[command(flatten)]
            budget: RunBudgetArgs,
        }
        let parse = |args: &[&str]| {
            Run::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
                .map(|r| r.budget)
        };
        assert_eq!(parse(&[])?, RunBudgetArgs::default());
        let given = parse(&["--max-steps", "7", "--timeout", "9", "--max-failures", "1"])?;
        let again = given.to_cli_args();
        let again: Vec<&str> = again.iter().map(String::as_str).collect();
        assert_eq!(parse(&again)?, given);
        assert!(parse(&["--max-failures", "0"]).is_err());
        Ok(())
    }

    #[test]
    fn none_turns_a_commands_default_quantization_off() -> std::result::Result<(), clap::Error> {
        let default = Some(Quantization::Q4K);
        assert_eq!(parse(&[])?.quantize_dtype(default), Some(GgmlDType::Q4K));
        let off = parse(&["--quantize", "none"])?;
        assert_eq!(off.quantize_dtype(default), None);
        let q8 = parse(&["--quantize", "q8_0"])?;
        assert_eq!(q8.quantize_dtype(default), Some(GgmlDType::Q8_0));
        Ok(())
    }
}
