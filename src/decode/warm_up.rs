//! Warming a new grammar on a thread of its own while the prompt is fed.
//!
//! Two kinds of grammar work are done once per grammar and shared by every matcher
//! cloned from it: llguidance builds its lexer's states as a decode first reaches them,
//! and the token environment memoizes the tokenization of each forced run. A decode on
//! a freshly compiled grammar pays both in its steps: on the 2B bench its slowest steps
//! took two to three times as long as the same steps of a second decode on the same
//! grammar.
//!
//! So when a turn compiles a grammar, decodes of it against a scripted model with seeded
//! random logits (biased toward closing quotes and the end, so they finish; each under
//! the decoder's own string bounds) run beside the prompt's prefill, and are stopped
//! when the prefill ends. They reach the same kinds of states the real decode will
//! (the keys, the forced runs after each choice, the closing of strings); the choices
//! differ from walk to walk. The prefill takes seconds on a CPU and the walks
//! milliseconds each, and the decode waits for at most the step a walk is in when it
//! is stopped. What the walks build is what a decode would have built: the output of a
//! grammar is a pure function of its spec, the tokens and the logits, so nothing but
//! time changes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::decoder::{decode, DecodeOptions};
use super::grammar::Grammar;
use crate::error::{Error, Result};
use crate::model::scripted::{LogitProfile, Script, ScriptedModel};
use crate::model::VisionLanguageModel;

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
    let env = grammar.env();
    let mut stats = WarmUpStats::default();
    let script = |seed| Script::Random {
        seed,
        profile: LogitProfile::QuotesAndEos,
    };
    let model = ScriptedModel::new(Arc::new(env.token_bytes()), env.eos(), script(0));
    let Ok(model) = model else {
        return stats;
    };
    let mut model = model.stopped_by(Arc::clone(&stop));
    for seed in 0..walks as u64 {
        if stop.load(Ordering::Relaxed) || model.truncate(0).is_err() {
            break;
        }
        model.set_script(script(seed));
        let fed = model.tokens_fed();
        let ended = model
            .logits()
            .and_then(|logits| decode(&mut model, &logits, grammar, &DecodeOptions::default()));
        stats.tokens += model.tokens_fed() - fed;
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
