//! Warming a new grammar on a thread of its own while the prompt is fed.
//!
//! Two kinds of grammar work are done once per grammar and shared by every matcher
//! cloned from it: llguidance builds its lexer's states as a decode first reaches them,
//! and the token environment memoizes the tokenization of each forced run. A decode on
//! a freshly compiled grammar pays both in its steps: on the 2B bench its slowest steps
//! took two to three times as long as the same steps of a second decode on the same
//! grammar.
//!
//! So when a turn compiles a grammar, decodes of it against seeded random logits (biased
//! toward tokens holding a closing quote or brace and toward the end, so they finish;
//! each under the decoder's own string bounds) run beside the prompt's prefill, and are
//! stopped when the prefill ends. They reach the same kinds of states the real decode will
//! (the keys, the forced runs after each choice, the closing of strings); the choices
//! differ from walk to walk. The prefill takes seconds on a CPU and the walks
//! milliseconds each, and the decode waits for at most the step a walk is in when it
//! is stopped. What the walks build is what a decode would have built: the output of a
//! grammar is a pure function of its spec, the tokens and the logits, so nothing but
//! time changes.
//!
//! The walks' model holds two rows of the vocabulary's width and a list of the boosted
//! ids (about 2 MB for Qwen), not the vocabulary's bytes: the walks run during the
//! turn's peak of memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};

use super::decoder::{decode, DecodeOptions};
use super::grammar::Grammar;
use crate::error::{Error, Result};
use crate::model::scripted::{noise_table, splitmix, NOISE_SLACK};
use crate::model::{EncodedImage, PreprocessedImage, VisionLanguageModel};

/// Most walks one warm-up takes: beyond a few, new walks find few new states (the
/// choices that matter, such as the kind of action, have a handful of values).
pub const MAX_WALKS: usize = 8;

/// Walks through a grammar running on a thread of their own; see the module docs.
/// Dropping it stops them too.
pub struct WarmUp {
    stop: Arc<AtomicBool>,
    worker: Option<JoinHandle<WarmUpStats>>,
}

/// What a warm-up did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WarmUpStats {
    /// Walks that reached the grammar's end.
    pub walks: usize,
    /// Tokens the walks fed to their model, those of a stopped walk included.
    pub tokens: usize,
    /// Time on the walks' thread.
    pub time: Duration,
}

impl WarmUp {
    /// Start at most `walks` walks through `grammar` on a new thread.
    pub fn start(grammar: &Grammar, walks: usize) -> Result<WarmUp> {
        let stop = Arc::new(AtomicBool::new(false));
        let grammar = grammar.clone();
        let flag = Arc::clone(&stop);
        let worker = std::thread::Builder::new()
            .name("grammar-warm-up".into())
            .spawn(move || walk(&grammar, walks, flag))
            .map_err(|e| Error::internal_caused("starting the grammar's warm-up thread", e))?;
        Ok(WarmUp {
            stop,
            worker: Some(worker),
        })
    }

    /// Whether every walk has ended (then [`finish`](Self::finish) does not wait).
    pub fn is_done(&self) -> bool {
        self.worker.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stop the walks and wait for their thread: at most the step it is in.
    pub fn finish(mut self) -> WarmUpStats {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> WarmUpStats {
        self.stop.store(true, Ordering::Relaxed);
        // A walk that panicked warmed less; the decode after it is the same.
        self.worker
            .take()
            .and_then(|w| w.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for WarmUp {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The walks: walk `i` decodes against random logits seeded with `i`.
fn walk(grammar: &Grammar, walks: usize, stop: Arc<AtomicBool>) -> WarmUpStats {
    let start = Instant::now();
    let mut stats = WarmUpStats::default();
    let mut model = Walker::new(grammar, stop);
    for seed in 0..walks as u64 {
        if model.stopped() {
            break;
        }
        model.restart(seed);
        let ended = model
            .logits()
            .and_then(|logits| decode(&mut model, &logits, grammar, &DecodeOptions::default()));
        stats.tokens += model.position;
        match ended {
            Ok(_) => stats.walks += 1,
            // Stopped (or a walk the decoder refused, which a real decode would meet
            // with its own error): nothing more to warm.
            Err(_) => break,
        }
    }
    stats.time = start.elapsed();
    stats
}

/// The walks' model: each position's logits are a window of the scripted model's table of
/// noise at an offset drawn from the seed and the position (as its random script does), plus a boost for the ids that hold a `"`
/// or a `}` and for the end of sequence.
struct Walker {
    noise: Vec<f32>,
    boosted: Vec<u32>,
    eos: u32,
    n_vocab: usize,
    seed: u64,
    /// Tokens fed since the walk began.
    position: usize,
    stop: Arc<AtomicBool>,
    device: Device,
}

impl Walker {
    fn new(grammar: &Grammar, stop: Arc<AtomicBool>) -> Self {
        let env = grammar.env();
        let n_vocab = env.n_vocab();
        let noise = noise_table(n_vocab + NOISE_SLACK);
        let boosted = (0..n_vocab as u32)
            .filter(|&t| {
                let bytes = env.token_bytes_of(t);
                bytes.contains(&b'"') || bytes.contains(&b'}')
            })
            .collect();
        Walker {
            noise,
            boosted,
            eos: env.eos(),
            n_vocab,
            seed: 0,
            position: 0,
            stop,
            device: Device::Cpu,
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn restart(&mut self, seed: u64) {
        self.seed = seed;
        self.position = 0;
    }

    fn logits(&self) -> Result<Tensor> {
        let draw = splitmix(self.seed ^ splitmix(self.position as u64));
        let offset = (draw % NOISE_SLACK as u64) as usize;
        let mut row = self.noise[offset..offset + self.n_vocab].to_vec();
        for &id in &self.boosted {
            row[id as usize] += 0.9;
        }
        row[self.eos as usize] += 2.0;
        Ok(Tensor::from_vec(row, self.n_vocab, &self.device)?)
    }
}

impl VisionLanguageModel for Walker {
    fn vocab_size(&self) -> usize {
        self.n_vocab
    }

    fn hidden_size(&self) -> usize {
        0
    }

    fn device(&self) -> &Device {
        &self.device
    }

    fn dtype(&self) -> DType {
        DType::F32
    }

    fn cache_len(&self) -> usize {
        self.position
    }

    fn truncate(&mut self, len: usize) -> Result<()> {
        self.position = self.position.min(len);
        Ok(())
    }

    fn encode_image(&mut self, _image: &PreprocessedImage) -> Result<EncodedImage> {
        Err(Error::internal("a grammar walk has no images"))
    }

    fn feed(&mut self, tokens: &[u32], _images: &[EncodedImage]) -> Result<Tensor> {
        if self.stopped() {
            return Err(Error::internal("the grammar's warm-up was stopped"));
        }
        self.position += tokens.len();
        self.logits()
    }

    fn last_hidden(&self) -> Result<Tensor> {
        Err(Error::internal("a grammar walk has no hidden state"))
    }

    fn lm_head_rows(&self, _ids: &[u32]) -> Result<Tensor> {
        Err(Error::internal("a grammar walk has no language-model head"))
    }
}
