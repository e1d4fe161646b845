//! [`LocalPlanner`]: the offline [`PlanProducer`], one local model behind it.
//!
//! One turn of `decide_next`:
//!
//! 1. the clarify rule ([`clarify`](crate::planner::clarify)) may answer at once, no model;
//! 2. the system prompt's KV, computed once per planner, is kept: the cache is cut back to it;
//! 3. the screenshot is preprocessed and encoded (skipped when it is the one seen last), the
//!    screen run (image + view) is fed — or reused, when image and view are unchanged;
//! 4. the task run (goal, progress, memory, history, allowed actions) is fed;
//! 5. the grammar built from the view constrains decoding to a valid [`NextMove`].
//!
//! Steps 3–4 render through [`PromptRenderer::fit`]: every part capped, the turn fitted to
//! `view.budget.max_tokens`, and the grammar built from the view exactly as rendered.
//!
//! `verify_done` asks the grader's own question under its own system run (cached like the
//! agent's), over the same encoded screenshot: then the [`GraderHead`] reads the verdict
//! (zero-shot from the yes/no logits, or a trained head on the last hidden state).
//!
//! **Concurrency.** The model and its cache are one state: calls are served one at a time.
//! A second call made while one runs waits for it (it does not fail). The model work runs on
//! tokio's blocking pool, never on the async executor.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use candle_core::quantized::GgmlDType;
use candle_core::Tensor;
use cel_contracts::{AttemptRecord, DoneVerdict, NextMove, PlanProducer, PlanningView};
use tokenizers::Tokenizer;

use super::prefix_store::{PendingSave, PrefixStore};
use crate::chat::{self, Role, Template};
use crate::decode::{
    check_special_tokens, decode_answer, AnswerSpec, DecodeOptions, Grammar, GrammarOptions,
    MoveSpec, Sampling, TokenEnv, WarmUp, WarmUpStats, MAX_WALKS,
};
use crate::error::{Error, Result};
use crate::image::{preprocess_bytes, PreprocessConfig};
use crate::model::qwen3_vl::{check_tokenizer, Qwen3Vl, Qwen3VlConfig, WeightSource};
use crate::model::weights::{LoadOptions, ModelSource};
use crate::model::{EncodedImage, VisionLanguageModel};
use crate::moves::Dialect;
use crate::planner::cache::CachedPrompt;
use crate::planner::clarify::clarify_question;
use crate::planner::grader::{rejection as rejected, GraderHead, HeadMeta};
use crate::planner::prompt::{
    render_grader_question_for, system_prompt_in, PromptRenderer, TaskInput,
};

/// Where the model runs (it lives with the model; re-exported here for callers of the
/// planner).
pub use crate::model::DeviceChoice;

/// Everything a [`LocalPlanner`] is built from. [`PlannerOptions::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct PlannerOptions {
    /// The model's files.
    pub source: ModelSource,
    /// Where it runs. Default: [`DeviceChoice::Auto`].
    pub device: DeviceChoice,
    /// Quantize a safetensors model while loading (Q8_0, Q6K, Q5K, Q4K). Default: none.
    pub quantize: Option<GgmlDType>,
    /// The activation type. Default: the device's
    /// ([`default_activation_dtype`](crate::model::weights::default_activation_dtype)).
    pub dtype: Option<candle_core::DType>,
    /// Most visual tokens per screenshot. Default: the model's `preprocessor_config.json`,
    /// else [`crate::image::DEFAULT_MAX_TOKENS`].
    pub max_visual_tokens: Option<usize>,
    /// Sampling. Default: greedy. (A move's token budget comes from its grammar; see
    /// [`DecodeOptions::budget_tokens`].)
    pub decode: DecodeOptions,
    /// Which actions the caller's runtime executes, and whether `xy:` targets are allowed.
    pub grammar: GrammarOptions,
    /// `verify_done` accepts when the grader's probability is at least this. Default 0.5.
    pub grader_threshold: f32,
    /// A trained grader head (safetensors); default: zero-shot from the LM head.
    pub grader_head: Option<PathBuf>,
    /// The output language the model was trained to answer in (its manifest's `dialect`).
    /// Default: Sightline's `NextMove` JSON.
    pub dialect: Dialect,
    /// How its chat template opens the answer (its manifest's `template`; a Thinking
    /// variant thinks first, at most `grammar.limits.thought_tokens` tokens). Default:
    /// Instruct.
    pub template: Template,
    /// Where the system prompt's KV is kept between processes ([`PrefixStore`]); `None`
    /// (the default) keeps it only in memory. The command line's default is
    /// [`default_dir`](crate::planner::prefix_store::default_dir).
    pub prefix_cache: Option<PathBuf>,
}

impl PlannerOptions {
    /// The defaults, for the model at `source`.
    pub fn new(source: ModelSource) -> Self {
        PlannerOptions {
            source,
            device: DeviceChoice::Auto,
            quantize: None,
            dtype: None,
            max_visual_tokens: None,
            decode: DecodeOptions::default(),
            grammar: GrammarOptions::default(),
            grader_threshold: 0.5,
            grader_head: None,
            dialect: Dialect::Json,
            template: Template::Instruct,
            prefix_cache: None,
        }
    }

    /// Sample with `temperature` and nucleus `top_p`, seeded, instead of greedy decoding.
    pub fn with_sampling(mut self, temperature: f32, top_p: f32, seed: u64) -> Self {
        self.decode.sampling = Sampling::TopP {
            temperature,
            top_p,
            seed,
        };
        self
    }
}

/// What [`LocalPlanner::load`] loaded.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// The model's files and architecture, in words.
    pub model: String,
    /// Weight format: stored types, or the quantize-at-load type.
    pub quant: String,
    /// The device, in words.
    pub device: String,
    /// Wall time of the whole load.
    pub load_time: Duration,
    /// Wall time of each load stage, in the order they ran (`--stats` prints one line each).
    pub stages: Vec<(&'static str, Duration)>,
}

impl LoadReport {
    /// One line for the terminal: `loaded MODEL (QUANT) on DEVICE in S s`.
    pub fn summary(&self) -> String {
        format!(
            "loaded {} ({}) on {} in {:.1} s",
            self.model,
            self.quant,
            self.device,
            self.load_time.as_secs_f64()
        )
    }
}

/// What [`LocalPlanner::load`] builds beside the weights: the tokenizer, checked against
/// the model's configuration, and the grammar's token environment over its vocabulary,
/// each stage timed on its own thread (they overlap).
struct TextSide {
    tokenizer: Tokenizer,
    env: TokenEnv,
    stages: Vec<(&'static str, Duration)>,
}

impl TextSide {
    /// The tokenizer is built on this thread while another builds the token environment
    /// from the vocabulary read straight from the same file; the tokenizer is then checked
    /// against the model and bound to the environment. Errors in the order the sequential
    /// build gave them: the tokenizer's, the model check's, the environment's.
    fn load(source: &ModelSource, config: &Qwen3VlConfig) -> Result<Self> {
        let vocab_size = config.text.vocab_size;
        let env_source = source.clone();
        let env_side = std::thread::Builder::new()
            .name("sightline-token-env".into())
            .spawn(move || {
                let t = Instant::now();
                let env = env_source
                    .vocabulary()
                    .and_then(|v| TokenEnv::from_vocabulary(&v, vocab_size));
                (env, t.elapsed())
            })
            .map_err(|e| Error::io("a thread for the token environment", e))?;
        let t = Instant::now();
        let tokenizer = source.tokenizer();
        let tokenizer_time = t.elapsed();
        let (env, env_time) = env_side
            .join()
            .map_err(|_| Error::internal("the token environment thread panicked"))?;
        let tokenizer = tokenizer?;
        check_tokenizer(config, &tokenizer)?;
        let env = env?;
        env.bind(tokenizer.clone())?;
        Ok(TextSide {
            tokenizer,
            env,
            stages: vec![("tokenizer", tokenizer_time), ("token env", env_time)],
        })
    }
}

/// Times load stages one after the other: each [`lap`](Self::lap) records the time since
/// the previous one.
struct LoadStages(Vec<(&'static str, Duration)>, Instant);

impl Default for LoadStages {
    fn default() -> Self {
        LoadStages(Vec::new(), Instant::now())
    }
}

impl LoadStages {
    fn lap(&mut self, stage: &'static str) {
        let now = Instant::now();
        self.0.push((stage, now - self.1));
        self.1 = now;
    }
}

/// Counters and timings of one turn (`decide_next` or `verify_done`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnStats {
    /// Prompt tokens whose KV was reused from an earlier turn.
    pub prefill_reused: usize,
    /// Of those, the system prompt's read from the [`PrefixStore`] this turn.
    pub prefill_from_disk: usize,
    /// Prompt tokens fed this turn.
    pub prefill_new: usize,
    /// Tokens generated (sampled + forced).
    pub generated: usize,
    /// Generated tokens the grammar forced.
    pub forced: usize,
    /// Model forward passes this turn (prefill runs and decode steps).
    pub forward_passes: usize,
    /// Whether the vision tower ran this turn.
    pub image_encoded: bool,
    /// Screenshot decode and preprocessing.
    pub preprocess: Duration,
    /// Vision tower.
    pub vision: Duration,
    /// Prompt prefill.
    pub prefill: Duration,
    /// Decode steps in the model.
    pub decode: Duration,
    /// Grammar compile, masks and commits.
    pub grammar: Duration,
    /// Whether the last turn's compiled grammar served this one (the same elements and
    /// options: a step that left the screen's elements as they were), its lexer states
    /// already built by the last decode.
    pub grammar_reused: bool,
    /// The walks through a newly compiled grammar during the prefill (none when the
    /// grammar was reused); their time is on a thread of their own, not in `grammar`.
    pub grammar_warm_up: WarmUpStats,
    /// The whole turn.
    pub total: Duration,
    /// What the prompt clipped, summarized or left out to respect its caps and the
    /// view's token budget, one line each, and its token count (`decide_next` only).
    pub truncation: Vec<String>,
    /// The thought, when the model wrote one (a Thinking variant's, the move's `"thought"`).
    pub thought: Option<String>,
}

/// A planner call's time by stage, in milliseconds (or a sum or mean of calls').
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StageMs {
    /// Screenshot decode and preprocessing.
    pub preprocess_ms: f64,
    /// Vision tower.
    pub vision_ms: f64,
    /// Prompt prefill.
    pub prefill_ms: f64,
    /// Decode steps in the model.
    pub decode_ms: f64,
    /// Grammar compile, masks and commits.
    pub grammar_ms: f64,
    /// The whole call.
    pub total_ms: f64,
}

impl StageMs {
    /// Add `other`'s times, stage by stage.
    pub fn add(&mut self, other: &StageMs) {
        self.preprocess_ms += other.preprocess_ms;
        self.vision_ms += other.vision_ms;
        self.prefill_ms += other.prefill_ms;
        self.decode_ms += other.decode_ms;
        self.grammar_ms += other.grammar_ms;
        self.total_ms += other.total_ms;
    }

    /// Every stage divided by `n` (the mean of `n` calls whose sum this is).
    pub fn divided_by(self, n: f64) -> StageMs {
        StageMs {
            preprocess_ms: self.preprocess_ms / n,
            vision_ms: self.vision_ms / n,
            prefill_ms: self.prefill_ms / n,
            decode_ms: self.decode_ms / n,
            grammar_ms: self.grammar_ms / n,
            total_ms: self.total_ms / n,
        }
    }
}

/// A turn's stage times and counts (and its thought) as data, for traces and `sightline eval`
/// (which reads them from the trace, never from log lines).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StageTimes {
    /// The stages' times (flat in JSON: `preprocess_ms`, `vision_ms`, …).
    #[serde(flatten)]
    pub ms: StageMs,
    /// Prompt tokens fed.
    pub prefill_new: usize,
    /// Prompt tokens whose KV was reused.
    pub prefill_reused: usize,
    /// Of those, the system prompt's read from disk this turn.
    #[serde(default)]
    pub prefill_from_disk: usize,
    /// Tokens generated.
    pub generated: usize,
    /// Generated tokens the grammar forced.
    pub forced: usize,
    /// Model forward passes.
    pub forward_passes: usize,
    /// Whether the vision tower ran.
    pub image_encoded: bool,
    /// The model's thought (a Thinking variant's, the move's `"thought"`): never part of the
    /// move, kept here so a trace shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<String>,
}

impl StageTimes {
    /// The reused prompt tokens in words: `N reused`, then `(M from disk)` when the system
    /// prompt was read from the [`PrefixStore`].
    pub fn reused_words(&self) -> String {
        match self.prefill_from_disk {
            0 => format!("{} reused", self.prefill_reused),
            n => format!("{} reused ({n} from disk)", self.prefill_reused),
        }
    }
}

impl TurnStats {
    /// The stage times and counts as data.
    pub fn stage_times(&self) -> StageTimes {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        StageTimes {
            ms: StageMs {
                preprocess_ms: ms(self.preprocess),
                vision_ms: ms(self.vision),
                prefill_ms: ms(self.prefill),
                decode_ms: ms(self.decode),
                grammar_ms: ms(self.grammar),
                total_ms: ms(self.total),
            },
            prefill_new: self.prefill_new,
            prefill_reused: self.prefill_reused,
            prefill_from_disk: self.prefill_from_disk,
            generated: self.generated,
            forced: self.forced,
            forward_passes: self.forward_passes,
            image_encoded: self.image_encoded,
            thought: self.thought.clone(),
        }
    }

    /// Share of generated tokens that were forced.
    pub fn forced_share(&self) -> f64 {
        if self.generated == 0 {
            0.0
        } else {
            self.forced as f64 / self.generated as f64
        }
    }
}

/// The offline planner: a local Qwen3-VL model behind [`PlanProducer`]. A clone is another
/// handle on the same loaded model (calls are still served one at a time), e.g. to read
/// [`last_stats`](Self::last_stats) while a runner holds the planner.
#[derive(Clone)]
pub struct LocalPlanner {
    engine: Arc<Mutex<Engine>>,
    report: LoadReport,
    grader_setup: HeadMeta,
}

crate::debug_fields::debug_fields!(LocalPlanner { report });

impl LocalPlanner {
    /// Load the model, its tokenizer and preprocessing, and build the grader head.
    ///
    /// The tokenizer and the grammar's token environment need only the files and the
    /// vocabulary size, so they are built on threads of their own while the weights load
    /// (the environment from the vocabulary read straight from the file, not from the
    /// built tokenizer): the load takes the longest of the three (plus the grader), not
    /// their sum. Errors keep their order: the weights' first, then the tokenizer's.
    pub fn load(options: &PlannerOptions) -> Result<Self> {
        let start = Instant::now();
        let device = options.device.resolve()?;
        let weights = WeightSource::open(&LoadOptions {
            quantize: options.quantize,
            device: device.clone(),
            dtype: options.dtype,
            ..LoadOptions::new(options.source.clone())
        })?;
        let config = weights.config().clone();
        let source = options.source.clone();
        let text_side = std::thread::Builder::new()
            .name("sightline-tokenizer".into())
            .spawn(move || TextSide::load(&source, &config))
            .map_err(|e| Error::io("a thread for the tokenizer", e))?;
        let model = Qwen3Vl::from_weights(&weights);
        weights.release_pages();
        let weights_time = start.elapsed();
        let text_side = text_side
            .join()
            .map_err(|_| Error::internal("the tokenizer thread panicked"));
        let model = model?;
        let TextSide {
            tokenizer,
            env,
            stages: mut text_stages,
        } = text_side??;
        let preprocess = options.source.preprocess_config()?;
        let quant = match options.quantize {
            Some(q) => format!("{q:?} (quantized at load)"),
            None => "as stored".to_string(),
        };
        let text = &model.config().text;
        let model_description = format!(
            "Qwen3-VL, {} layers, hidden {}, {:?} activations: {}",
            text.num_hidden_layers,
            text.hidden_size,
            model.dtype(),
            model.source()
        );
        let mut planner = Self::assemble(Box::new(model), tokenizer, env, preprocess, options)?;
        let mut stages = vec![("weights", weights_time)];
        stages.append(&mut text_stages);
        stages.append(&mut planner.report.stages);
        planner.report = LoadReport {
            model: model_description,
            quant,
            device: format!("{device:?}"),
            load_time: start.elapsed(),
            stages,
        };
        tracing::info!(report = ?planner.report, "planner loaded");
        Ok(planner)
    }

    /// A planner over any model (a scripted test double, a model loaded elsewhere).
    pub fn from_parts(
        model: Box<dyn VisionLanguageModel>,
        tokenizer: Tokenizer,
        preprocess: PreprocessConfig,
        options: &PlannerOptions,
    ) -> Result<Self> {
        let mut stages = LoadStages::default();
        let env = TokenEnv::from_tokenizer(&tokenizer, model.vocab_size())?;
        stages.lap("token env");
        let mut planner = Self::assemble(model, tokenizer, env, preprocess, options)?;
        stages.0.append(&mut planner.report.stages);
        planner.report.stages = stages.0;
        Ok(planner)
    }

    /// The planner from its parts, the token environment built.
    fn assemble(
        model: Box<dyn VisionLanguageModel>,
        tokenizer: Tokenizer,
        env: TokenEnv,
        mut preprocess: PreprocessConfig,
        options: &PlannerOptions,
    ) -> Result<Self> {
        if let Some(tokens) = options.max_visual_tokens {
            preprocess = preprocess.with_max_tokens(tokens);
        }
        preprocess.validate()?;
        if !(0.0..=1.0).contains(&options.grader_threshold) {
            return Err(Error::invalid_input(format!(
                "grader threshold {} is not a probability",
                options.grader_threshold
            )));
        }
        let mut stages = LoadStages::default();
        // A tokenizer without the dialect's or template's tokens fails here, at load, not on
        // the first turn.
        check_special_tokens(&env, options.dialect, options.template)?;
        let renderer = PromptRenderer::new(
            tokenizer,
            system_prompt_in(&options.grammar, options.dialect),
        )?
        .with_language(options.dialect, options.template);
        let grader_setup = HeadMeta {
            model: options.source.identity(),
            hidden_size: model.hidden_size(),
            quantization: options
                .quantize
                .map_or_else(|| "as stored".to_string(), |q| format!("{q:?}")),
            visual_tokens: (preprocess.max_pixels / (preprocess.factor() as u64).pow(2)) as usize,
            prompt: prompt_fingerprint(renderer.system_text(), renderer.template()),
        };
        let grader = match &options.grader_head {
            Some(path) => GraderHead::load(path, &grader_setup, model.device())?,
            None => GraderHead::zero_shot(&renderer)?,
        };
        stages.lap("prompt and grader");
        let prefix_store = match &options.prefix_cache {
            Some(dir) => {
                let settings = format!(
                    "{:?} {:?} {:?} quantize {:?} threads {}",
                    model.device().location(),
                    model.dtype(),
                    options.device,
                    options.quantize,
                    candle_core::utils::get_num_threads()
                );
                let weights = options.source.weight_files();
                // The store only saves time: without the fingerprints it works without it.
                PrefixStore::new(dir.clone(), &weights, &settings)
                    .map_err(|e| tracing::warn!("the system prompt stays in memory only: {e}"))
                    .ok()
            }
            None => None,
        };
        let engine = Engine {
            model,
            renderer,
            env,
            preprocess,
            grader,
            decode: options.decode.clone(),
            grammar: options.grammar.clone(),
            threshold: options.grader_threshold,
            cached: CachedPrompt::default(),
            last_prompt: String::new(),
            image: None,
            last_stats: TurnStats::default(),
            prefix_store,
            system_on_disk: false,
            saving: None,
            last_grammar: None,
        };
        Ok(LocalPlanner {
            engine: Arc::new(Mutex::new(engine)),
            report: LoadReport {
                model: "caller-supplied model".into(),
                quant: "as supplied".into(),
                device: String::new(),
                load_time: Duration::ZERO,
                stages: stages.0,
            },
            grader_setup,
        })
    }

    /// What a grader head fitted on this planner's hidden states records, and what a loaded
    /// head must match: the weights, hidden size, quantization, visual budget and prompt.
    pub fn grader_setup(&self) -> &HeadMeta {
        &self.grader_setup
    }

    /// What was loaded.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// `decide_next`, blocking, with the turn's stats.
    pub fn plan(&self, turn: &Turn<'_>) -> Result<(NextMove, TurnStats)> {
        run_decide(&self.engine, turn)
    }

    /// `work` on the engine on a blocking thread (a turn holds the CPU or device for
    /// seconds): its answer without the stats, a failure as text (`PlanProducer`'s errors).
    async fn on_blocking_thread<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Mutex<Engine>) -> Result<(T, TurnStats)> + Send + 'static,
    ) -> std::result::Result<T, String> {
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || work(&engine))
            .await
            .map_err(|e| format!("planner task failed: {e}"))?
            .map(|(answer, _)| answer)
            .map_err(|e| e.to_string())
    }

    /// `verify_done`, blocking, with the turn's stats.
    pub fn verify(&self, turn: &Turn<'_>, summary: &str) -> Result<(DoneVerdict, TurnStats)> {
        run_verify(&self.engine, turn, summary)
    }

    /// The stats of the last turn served.
    pub fn last_stats(&self) -> Result<TurnStats> {
        Ok(lock(&self.engine)?.last_stats.clone())
    }

    /// The last turn's prompt as text: system, screen (the image as an `<image × N>`
    /// placeholder) and task or grader question.
    pub fn last_prompt(&self) -> Result<String> {
        Ok(lock(&self.engine)?.last_prompt.clone())
    }

    /// The grader head's input for one claim (the model's last hidden state after the
    /// grader question): what `grader fit` trains on.
    pub fn grader_features(&self, turn: &Turn<'_>, summary: &str) -> Result<Vec<f32>> {
        lock(&self.engine)?.grader_features(turn, summary)
    }

    /// Positions currently in the model's KV cache.
    pub fn cache_len(&self) -> Result<usize> {
        Ok(lock(&self.engine)?.model.cache_len())
    }

    /// Lends the loaded model, with its tokenizer, token environment and image
    /// preprocessing, to other work between turns (free generation, a decode under a
    /// caller's grammar: `sightline serve`'s chat endpoint), so one loaded model serves
    /// both. The work holds the planner's lock, so turns wait for it as they wait for each
    /// other; the KV cache is the work's afterwards, and the next turn prefills from the
    /// start (the encoded-screenshot cache stays valid).
    pub fn with_model<R>(&self, work: impl FnOnce(ModelLoan<'_>) -> Result<R>) -> Result<R> {
        let mut engine = lock(&self.engine)?;
        let engine = &mut *engine;
        engine.cached = CachedPrompt::default();
        work(ModelLoan {
            model: engine.model.as_mut(),
            tokenizer: engine.renderer.tokenizer(),
            env: &engine.env,
            preprocess: &engine.preprocess,
        })
    }
}

/// The loaded model and what works with it, lent by [`LocalPlanner::with_model`].
pub struct ModelLoan<'a> {
    /// The model; its KV cache holds whatever the last call fed.
    pub model: &'a mut dyn VisionLanguageModel,
    /// Its tokenizer.
    pub tokenizer: &'a Tokenizer,
    /// The token environment grammars are compiled against.
    pub env: &'a TokenEnv,
    /// The image preprocessing of the planner's visual budget.
    pub preprocess: &'a PreprocessConfig,
}

fn lock(engine: &Mutex<Engine>) -> Result<std::sync::MutexGuard<'_, Engine>> {
    // A panic inside a turn poisons the lock; the cache may then be half-fed, so the planner
    // refuses to go on rather than plan from a corrupt prefix.
    engine
        .lock()
        .map_err(|_| Error::internal("an earlier turn panicked; reload the planner"))
}

fn run_decide(engine: &Mutex<Engine>, turn: &Turn<'_>) -> Result<(NextMove, TurnStats)> {
    let mut engine = lock(engine)?;
    let result = engine.decide(turn);
    log_turn("decide_next", &engine.last_stats);
    result.map(|mv| (mv, engine.last_stats.clone()))
}

fn run_verify(
    engine: &Mutex<Engine>,
    turn: &Turn<'_>,
    summary: &str,
) -> Result<(DoneVerdict, TurnStats)> {
    let mut engine = lock(engine)?;
    let result = engine.verify(turn, summary);
    log_turn("verify_done", &engine.last_stats);
    result.map(|v| (v, engine.last_stats.clone()))
}

fn log_turn(kind: &str, s: &TurnStats) {
    tracing::info!(turn = kind, stages = ?s.stage_times(), "turn");
}

/// The inputs of one turn, as `PlanProducer` passes them.
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    /// The user's goal.
    pub goal: &'a str,
    /// Every earlier attempt, oldest first.
    pub history: &'a [AttemptRecord],
    /// Data the runner has accumulated.
    pub shared_memory: &'a serde_json::Value,
    /// The budgeted view of the screen.
    pub view: &'a PlanningView,
    /// The screenshot, PNG or JPEG; `None` for a text-only turn.
    pub screenshot: Option<&'a [u8]>,
}

impl Turn<'_> {
    /// The turn's inputs, copied: for work that crosses to another thread.
    pub fn owned(&self) -> OwnedTurn {
        OwnedTurn {
            goal: self.goal.to_string(),
            history: self.history.to_vec(),
            memory: self.shared_memory.clone(),
            view: self.view.clone(),
            screenshot: self.screenshot.map(<[u8]>::to_vec),
        }
    }
}

/// One turn's inputs, owned: they cross to the model's thread.
#[derive(Debug, Clone)]
pub struct OwnedTurn {
    /// The goal.
    pub goal: String,
    /// Earlier attempts, oldest first.
    pub history: Vec<AttemptRecord>,
    /// Shared memory.
    pub memory: serde_json::Value,
    /// The view.
    pub view: PlanningView,
    /// The screenshot (PNG or JPEG).
    pub screenshot: Option<Vec<u8>>,
}

impl OwnedTurn {
    /// The turn, borrowed.
    pub fn turn(&self) -> Turn<'_> {
        Turn {
            goal: &self.goal,
            history: &self.history,
            shared_memory: &self.memory,
            view: &self.view,
            screenshot: self.screenshot.as_deref(),
        }
    }
}

/// The model and what its cache holds.
struct Engine {
    model: Box<dyn VisionLanguageModel>,
    renderer: PromptRenderer,
    env: TokenEnv,
    preprocess: PreprocessConfig,
    grader: GraderHead,
    decode: DecodeOptions,
    grammar: GrammarOptions,
    threshold: f32,
    /// The prompt the model's cache starts with (the generated tokens after it are cut at
    /// the next call); empty when the cache state is unknown (a call failed midway).
    cached: CachedPrompt,
    /// The last turn's prompt as text (`--show-prompt`).
    last_prompt: String,
    /// The last screenshot encoded, by content hash.
    image: Option<(u64, EncodedImage)>,
    last_stats: TurnStats,
    /// Where the system prompt's KV is kept between processes.
    prefix_store: Option<PrefixStore>,
    /// Whether the store holds this planner's system prompt (read, written or being
    /// written).
    system_on_disk: bool,
    /// The store's write of the system prompt, when one is under way (waited for when the
    /// planner is dropped).
    saving: Option<PendingSave>,
    /// The last turn's answer grammar and its spec.
    last_grammar: Option<(AnswerSpec, Grammar)>,
}

impl Engine {
    fn decide(&mut self, turn: &Turn<'_>) -> Result<NextMove> {
        let start = Instant::now();
        self.last_stats = TurnStats::default();
        if let Some(question) = clarify_question(turn.goal, turn.view) {
            self.last_stats.total = start.elapsed();
            return Ok(NextMove::Clarify { question });
        }
        let image = match turn.screenshot {
            Some(bytes) => Some(self.encoded_image(bytes)?),
            None => None,
        };
        let system = self.renderer.system()?;
        let grammar_options = self.grammar.clone();
        let allowed = |view: &PlanningView| -> Result<Vec<&'static str>> {
            let spec = MoveSpec::new(view, &grammar_options)?;
            Ok(spec.allowed_actions().iter().map(|a| a.tag()).collect())
        };
        let fitted = self.renderer.dialect_turn(
            &TaskInput {
                goal: turn.goal,
                history: turn.history,
                shared_memory: turn.shared_memory,
                view: turn.view,
                allowed_actions: &[],
            },
            system.len(),
            image.as_ref().map(|(_, img)| img.n_tokens()),
            &allowed,
        )?;
        let t = Instant::now();
        // The grammar accepts exactly the elements the prompt shows: it is built from
        // the view as rendered.
        let spec = AnswerSpec::new(
            &fitted.view,
            &self.grammar,
            self.renderer.dialect(),
            self.renderer.template(),
        )?;
        let grammar = self.grammar_for(&spec)?;
        self.last_stats.grammar += t.elapsed();
        // A new grammar's lexer states are built while the prompt is fed (see WarmUp).
        let warm_up = (!self.last_stats.grammar_reused)
            .then(|| WarmUp::start(&grammar, MAX_WALKS))
            .transpose()
            .unwrap_or_else(|e| {
                tracing::debug!("the grammar is not warmed up: {e}");
                None
            });
        self.last_prompt = prompt_text(
            self.renderer.system_text(),
            image.as_ref().map(|(_, img)| img.n_tokens()),
            &fitted.screen_text,
            &fitted.task_text,
        );
        self.last_stats.truncation = fitted.notes;

        let prompt = self.prompt(&system, &fitted.screen, image.as_ref(), &fitted.task);
        let logits = self.feed_prompt(&prompt, system.len(), image)?;
        self.last_stats.grammar_warm_up = warm_up.map(WarmUp::finish).unwrap_or_default();
        let decoded = decode_answer(self.model.as_mut(), &logits, &spec, &grammar, &self.decode)?;
        let d = &decoded.decoded.stats;
        self.last_stats.generated = d.tokens;
        self.last_stats.forced = d.forced_tokens;
        self.last_stats.forward_passes += d.forward_calls;
        self.last_stats.decode = d.model_time;
        self.last_stats.grammar += d.grammar_time();
        // The thought (a Thinking variant's, or the JSON move's `"thought"`) is never part
        // of the move; it is kept for --stats and traces.
        self.last_stats.thought = decoded.thought;
        self.last_stats.total = start.elapsed();
        Ok(decoded.next_move)
    }

    /// The grammar of `spec`: the last turn's when the spec is the same, else compiled. A
    /// compiled grammar builds its lexer's states as decodes first reach them (the first
    /// decode's sampled tokens took two to three times as long in the grammar as a second
    /// decode's on the 2B bench), and a grammar is a pure function of its spec and the
    /// token environment, so reusing it changes nothing but the time.
    fn grammar_for(&mut self, spec: &AnswerSpec) -> Result<Grammar> {
        if let Some((last, grammar)) = &self.last_grammar {
            if last == spec {
                self.last_stats.grammar_reused = true;
                return Ok(grammar.clone());
            }
        }
        let grammar = spec.grammar(&self.env)?;
        self.last_grammar = Some((spec.clone(), grammar.clone()));
        Ok(grammar)
    }

    /// Feed the grader's prompt (the agent's system and screen runs, then the grader's
    /// question) and return the question's last logits; the model's last hidden state is
    /// then the grader head's input. When the screenshot and view are the ones the last
    /// `decide_next` saw, everything before the question is already in the cache.
    fn grader_prefill(&mut self, turn: &Turn<'_>, summary: &str) -> Result<Tensor> {
        let image = match turn.screenshot {
            Some(bytes) => Some(self.encoded_image(bytes)?),
            None => None,
        };
        let system = self.renderer.system()?;
        let image_tokens = image.as_ref().map(|(_, img)| img.n_tokens());
        // The screen exactly as `decide_next` renders it for this view (same trimming), so
        // a claim judged on the screen the agent just saw reuses its KV.
        let no_actions = |_: &PlanningView| -> Result<Vec<&'static str>> { Ok(Vec::new()) };
        let fitted = self.renderer.fit(
            &TaskInput {
                goal: turn.goal,
                history: &[],
                shared_memory: turn.shared_memory,
                view: turn.view,
                allowed_actions: &[],
            },
            system.len(),
            image_tokens,
            &no_actions,
        )?;
        let question_text =
            render_grader_question_for(turn.goal, summary, self.renderer.template());
        self.last_prompt = prompt_text(
            self.renderer.system_text(),
            image_tokens,
            &fitted.screen_text,
            &question_text,
        );
        let question = self.renderer.grader_question(turn.goal, summary)?;
        let prompt = self.prompt(&system, &fitted.screen, image.as_ref(), &question);
        self.feed_prompt(&prompt, system.len(), image)
    }

    fn verify(&mut self, turn: &Turn<'_>, summary: &str) -> Result<DoneVerdict> {
        let start = Instant::now();
        self.last_stats = TurnStats::default();
        let logits = self.grader_prefill(turn, summary)?;
        let hidden = self.model.last_hidden()?;
        let verdict = match self.grader.verdict_logit(&logits, &hidden)? {
            (p, _) if p >= self.threshold => DoneVerdict {
                verified: true,
                reason: String::new(),
                next_action_hint: None,
            },
            (p, Some(hints)) => rejected(p, hints),
            (p, None) => {
                // Zero-shot: the hint is a second, constrained one-word answer, asked
                // only now that the claim is rejected.
                let follow_up = self.renderer.hint_question()?;
                let t = Instant::now();
                let logits = self.model.feed(&follow_up, &[])?;
                self.last_stats.prefill += t.elapsed();
                self.last_stats.prefill_new += follow_up.len();
                self.last_stats.forward_passes += 1;
                rejected(p, self.grader.hint_logits(&logits)?)
            }
        };
        self.last_stats.total = start.elapsed();
        Ok(verdict)
    }

    /// The grader's input for one claim: the last hidden state after its question.
    fn grader_features(&mut self, turn: &Turn<'_>, summary: &str) -> Result<Vec<f32>> {
        self.last_stats = TurnStats::default();
        self.grader_prefill(turn, summary)?;
        Ok(self
            .model
            .last_hidden()?
            .to_dtype(candle_core::DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?)
    }

    /// A prompt of the system run, the screen run (its image pads marked with the image's
    /// hash) and the task or question run.
    fn prompt(
        &self,
        system: &[u32],
        screen: &[u32],
        image: Option<&(u64, EncodedImage)>,
        tail: &[u32],
    ) -> CachedPrompt {
        let mut prompt = CachedPrompt::default();
        prompt.push_tokens(system);
        let pad = self.renderer.special().image_pad;
        match image.and_then(|(hash, _)| {
            let start = screen.iter().position(|&t| t == pad)?;
            let len = screen[start..].iter().take_while(|&&t| t == pad).count();
            Some((*hash, start, len))
        }) {
            Some((hash, start, len)) => {
                prompt.push_tokens(&screen[..start]);
                prompt.push_image(&screen[start..start + len], hash);
                prompt.push_tokens(&screen[start + len..]);
            }
            None => prompt.push_tokens(screen),
        }
        prompt.push_tokens(tail);
        prompt
    }

    /// Leave the cache holding `prompt`, feeding only what it does not already hold
    /// ([`CachedPrompt::common_prefix`]; its first `system_len` tokens, the system prompt,
    /// may come from the [`PrefixStore`]), and return the logits of its last position.
    /// Counts reused and new tokens in the turn's stats.
    fn feed_prompt(
        &mut self,
        prompt: &CachedPrompt,
        system_len: usize,
        image: Option<(u64, EncodedImage)>,
    ) -> Result<Tensor> {
        if prompt.is_empty() || system_len >= prompt.len() {
            return Err(Error::internal(
                "a prompt with nothing after its system run",
            ));
        }
        // The prefill's time includes reading the system prompt from disk, and starting its
        // write (the copy to host memory; the write itself runs beside the decode).
        let started = Instant::now();
        let mut cached = if self.model.cache_len() >= self.cached.len() {
            self.cached.common_prefix(prompt)
        } else {
            0
        };
        if cached < system_len {
            if let Some(restored) = self.system_from_disk(&prompt.tokens[..system_len]) {
                cached = restored;
                self.last_stats.prefill_from_disk = restored;
            }
            // A restore that failed left the cache empty.
            cached = cached.min(self.model.cache_len());
        }
        // The last position is always fed: its logits are the answer's first.
        let reuse = cached.min(prompt.len() - 1);
        let reuse = prompt
            .images
            .iter()
            .find(|r| r.start < reuse && reuse < r.start + r.len)
            .map_or(reuse, |r| r.start);
        // Until the feed succeeds the cache holds an unknown state.
        self.cached = CachedPrompt::default();
        self.model.truncate(reuse)?;
        let images: Vec<EncodedImage> = match image {
            Some((hash, encoded)) if prompt.images_from(reuse).any(|r| r.hash == hash) => {
                vec![encoded]
            }
            _ => Vec::new(),
        };
        let logits = self.model.feed(&prompt.tokens[reuse..], &images)?;
        self.last_stats.prefill_reused = reuse;
        self.last_stats.prefill_new += prompt.len() - reuse;
        self.last_stats.forward_passes += 1;
        self.cached = prompt.clone();
        if reuse < system_len && !self.system_on_disk {
            self.keep_system_on_disk(system_len);
        }
        self.last_stats.prefill += started.elapsed();
        Ok(logits)
    }

    /// The system prompt's KV from the store into the model's cache: the positions now
    /// held (the cache is then the system prompt alone), or `None` on a miss (the cache is
    /// then empty if a restore failed, and as it was otherwise).
    fn system_from_disk(&mut self, system: &[u32]) -> Option<usize> {
        // This planner's own write finishes before the store is read.
        if let Some(saving) = self.saving.take() {
            saving.wait();
        }
        let store = self.prefix_store.as_ref()?;
        let mut prefix = store.load(system)?;
        self.cached = CachedPrompt::default();
        if let Err(e) = self.model.restore_kv_prefix(&mut prefix) {
            tracing::warn!(store = %store.dir().display(), "a stored system prompt does not fit the model, computing it: {e}");
            store.forget(system);
            let _ = self.model.truncate(0);
            return None;
        }
        self.cached.push_tokens(system);
        self.system_on_disk = true;
        Some(system.len())
    }

    /// Writes the system prompt's KV (the cache's first `system_len` positions) to the
    /// store, in the background: the turn goes on to decode. A failure costs the next
    /// process the prefill, nothing else: it is logged, and not tried again.
    fn keep_system_on_disk(&mut self, system_len: usize) {
        let Some(store) = &self.prefix_store else {
            return;
        };
        let saving = self.model.kv_prefix(system_len).and_then(|prefix| {
            prefix
                .map(|prefix| store.save_in_background(&self.cached.tokens[..system_len], prefix))
                .transpose()
        });
        match saving {
            Ok(saving) => {
                self.system_on_disk = saving.is_some();
                self.saving = saving;
            }
            Err(e) => {
                store.warn_not_kept(&e);
                self.system_on_disk = true;
            }
        }
    }

    /// The encoded screenshot, from the last turn when the bytes are the same.
    fn encoded_image(&mut self, bytes: &[u8]) -> Result<(u64, EncodedImage)> {
        let mut hasher = DefaultHasher::new();
        bytes.hash(&mut hasher);
        let key = hasher.finish();
        if let Some((cached, image)) = &self.image {
            if *cached == key {
                return Ok((key, image.clone()));
            }
        }
        let t = Instant::now();
        let pixels = preprocess_bytes(bytes, &self.preprocess)?;
        self.last_stats.preprocess += t.elapsed();
        let t = Instant::now();
        let image = self.model.encode_image(&pixels)?;
        self.last_stats.vision += t.elapsed();
        self.last_stats.image_encoded = true;
        self.image = Some((key, image.clone()));
        Ok((key, image))
    }
}

/// A short fingerprint of the prompt the grader's question follows: the system prompt and
/// the question's template, so a head is refused once either changes.
fn prompt_fingerprint(system: &str, template: Template) -> String {
    let mut hasher = DefaultHasher::new();
    system.hash(&mut hasher);
    render_grader_question_for("{goal}", "{summary}", template).hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// The turn as text, for `--show-prompt`: the image pads shown as one placeholder.
fn prompt_text(system: &str, image_tokens: Option<usize>, view: &str, task: &str) -> String {
    let image = image_tokens
        .map(chat::image_placeholder)
        .unwrap_or_default();
    format!(
        "{}{}{image}{view}{task}",
        chat::turn(Role::System, system),
        chat::open(Role::User)
    )
}

#[async_trait]
impl PlanProducer for LocalPlanner {
    async fn decide_next(
        &self,
        goal: &str,
        history: &[AttemptRecord],
        shared_memory: &serde_json::Value,
        view: &PlanningView,
        screenshot_png: Option<&[u8]>,
    ) -> std::result::Result<NextMove, String> {
        let turn = Turn {
            goal,
            history,
            shared_memory,
            view,
            screenshot: screenshot_png,
        }
        .owned();
        self.on_blocking_thread(move |engine| run_decide(engine, &turn.turn()))
            .await
    }

    async fn verify_done(
        &self,
        goal: &str,
        summary: &str,
        shared_memory: &serde_json::Value,
        view: &PlanningView,
        screenshot_png: Option<&[u8]>,
    ) -> std::result::Result<DoneVerdict, String> {
        let turn = Turn {
            goal,
            history: &[],
            shared_memory,
            view,
            screenshot: screenshot_png,
        }
        .owned();
        let summary = summary.to_string();
        self.on_blocking_thread(move |engine| run_verify(engine, &turn.turn(), &summary))
            .await
    }
}
