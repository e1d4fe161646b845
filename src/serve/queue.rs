//! The model's queue: one call uses the model at a time, a bounded number wait, and every
//! call has a deadline.
//!
//! A call is admitted at once or refused at once ([`QueueError::Full`]), so a flood of
//! requests costs nothing but their refusals; an admitted call waits for the model until its
//! deadline ([`QueueError::TimedOut`]) and then works on tokio's blocking pool, holding its
//! place until the work ends, even when its client has gone (the model is not left half
//! used). The work is told to stop ([`Interrupt`]) when its client goes away or its deadline
//! passes; [`Interruptible`] makes a model's forward passes check that, so a long generation
//! stops within one token.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use tokio::sync::{Mutex, OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, Result};
use crate::model::{EncodedImage, PreprocessedImage, VisionLanguageModel};

/// Why a queued call did not give an answer.
#[derive(Debug)]
pub enum QueueError {
    /// `max_queue` calls were already waiting.
    Full {
        /// The limit.
        max_queue: usize,
    },
    /// The deadline passed while waiting for the model or while working.
    TimedOut {
        /// The deadline, from admission.
        after: Duration,
    },
    /// The work failed.
    Failed(Error),
}

impl std::fmt::Display for QueueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueError::Full { max_queue } => write!(
                f,
                "the model is busy and {max_queue} request(s) already wait for it; try again later"
            ),
            QueueError::TimedOut { after } => write!(
                f,
                "the request took longer than the server's timeout of {} s",
                after.as_secs()
            ),
            QueueError::Failed(e) => e.fmt(f),
        }
    }
}

impl From<Error> for QueueError {
    fn from(e: Error) -> Self {
        QueueError::Failed(e)
    }
}

/// When model work must stop: its client went away, or its deadline passed. Cheap to clone;
/// clones share the flag.
#[derive(Debug, Clone)]
pub struct Interrupt {
    cancelled: Arc<AtomicBool>,
    deadline: Instant,
    timeout: Duration,
}

impl Interrupt {
    /// An interrupt at `timeout` from now.
    pub fn after(timeout: Duration) -> Self {
        Self {
            cancelled: Arc::new(AtomicBool::new(false)),
            deadline: Instant::now() + timeout,
            timeout,
        }
    }

    /// Tells the work to stop.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Whether the deadline has passed.
    pub fn timed_out(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// `Ok` while the work may go on; the reason to stop otherwise.
    pub fn check(&self) -> Result<()> {
        if self.cancelled.load(Ordering::SeqCst) {
            return Err(Error::invalid_input("the request was cancelled"));
        }
        if self.timed_out() {
            return Err(Error::invalid_input(format!(
                "the request ran past the server's timeout of {} s",
                self.timeout.as_secs()
            )));
        }
        Ok(())
    }

    /// The deadline as an instant.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// `err` as the queue reports it: a timeout when the deadline is what stopped the work.
    pub fn classify(&self, err: Error) -> QueueError {
        if self.timed_out() {
            QueueError::TimedOut {
                after: self.timeout,
            }
        } else {
            QueueError::Failed(err)
        }
    }
}

/// The model's queue (see the module docs).
#[derive(Debug)]
pub struct ModelQueue {
    /// One permit per place: the running call and the waiting ones.
    places: Arc<Semaphore>,
    model: Arc<Mutex<()>>,
    max_queue: usize,
}

/// A call that has the model, until it is dropped.
#[derive(Debug)]
pub struct Admission {
    _place: OwnedSemaphorePermit,
    _model: OwnedMutexGuard<()>,
    /// Stops the work; set when the deadline passes or the client goes away.
    pub interrupt: Interrupt,
}

impl ModelQueue {
    /// A queue where `max_queue` calls may wait while one runs.
    pub fn new(max_queue: usize) -> Self {
        Self {
            places: Arc::new(Semaphore::new(max_queue.saturating_add(1))),
            model: Arc::new(Mutex::new(())),
            max_queue,
        }
    }

    /// Takes a place at once (or [`QueueError::Full`]), then waits for the model until
    /// `timeout` from now (or [`QueueError::TimedOut`]).
    pub async fn admit(&self, timeout: Duration) -> std::result::Result<Admission, QueueError> {
        let interrupt = Interrupt::after(timeout);
        let place = Arc::clone(&self.places)
            .try_acquire_owned()
            .map_err(|_| QueueError::Full {
                max_queue: self.max_queue,
            })?;
        let model = tokio::time::timeout_at(
            interrupt.deadline().into(),
            Arc::clone(&self.model).lock_owned(),
        )
        .await
        .map_err(|_| QueueError::TimedOut { after: timeout })?;
        Ok(Admission {
            _place: place,
            _model: model,
            interrupt,
        })
    }

    /// [`admit`](Self::admit), then `work` on the blocking pool; its error is a timeout when
    /// the deadline stopped it. Dropping the returned future (the client went away) tells the
    /// work to stop.
    pub async fn run<R, F>(&self, timeout: Duration, work: F) -> std::result::Result<R, QueueError>
    where
        F: FnOnce(&Interrupt) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let admission = self.admit(timeout).await?;
        let interrupt = admission.interrupt.clone();
        let _cancel_on_drop = CancelOnDrop(interrupt.clone());
        admission
            .spawn(work)
            .await
            .map_err(|e| QueueError::Failed(Error::internal(format!("model work failed: {e}"))))?
            .map_err(|e| interrupt.classify(e))
    }
}

impl Admission {
    /// Runs `work` on the blocking pool, holding the model until it ends.
    pub fn spawn<R, F>(self, work: F) -> tokio::task::JoinHandle<Result<R>>
    where
        F: FnOnce(&Interrupt) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        tokio::task::spawn_blocking(move || {
            let held = self;
            work(&held.interrupt)
        })
    }
}

/// Sets the interrupt when dropped: the future awaiting the work was dropped with it.
struct CancelOnDrop(Interrupt);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// A model whose forward passes and image encodings first check an [`Interrupt`].
pub struct Interruptible<'a> {
    /// The model.
    pub model: &'a mut dyn VisionLanguageModel,
    /// When to stop.
    pub interrupt: &'a Interrupt,
}

impl VisionLanguageModel for Interruptible<'_> {
    fn vocab_size(&self) -> usize {
        self.model.vocab_size()
    }

    fn hidden_size(&self) -> usize {
        self.model.hidden_size()
    }

    fn device(&self) -> &Device {
        self.model.device()
    }

    fn dtype(&self) -> DType {
        self.model.dtype()
    }

    fn cache_len(&self) -> usize {
        self.model.cache_len()
    }

    fn truncate(&mut self, len: usize) -> Result<()> {
        self.model.truncate(len)
    }

    fn encode_image(&mut self, image: &PreprocessedImage) -> Result<EncodedImage> {
        self.interrupt.check()?;
        self.model.encode_image(image)
    }

    fn feed(&mut self, tokens: &[u32], images: &[EncodedImage]) -> Result<Tensor> {
        self.interrupt.check()?;
        self.model.feed(tokens, images)
    }

    fn feed_beside(
        &mut self,
        tokens: &[u32],
        beside: &mut dyn FnMut(crate::model::Moment),
    ) -> Result<(Tensor, bool)> {
        self.interrupt.check()?;
        self.model.feed_beside(tokens, beside)
    }

    fn works_beside_pass(&self) -> bool {
        self.model.works_beside_pass()
    }

    fn last_hidden(&self) -> Result<Tensor> {
        self.model.last_hidden()
    }

    fn lm_head_rows(&self, ids: &[u32]) -> Result<Tensor> {
        self.model.lm_head_rows(ids)
    }

    fn kv_prefix(&self, len: usize) -> Result<Option<crate::model::KvPrefix>> {
        self.model.kv_prefix(len)
    }

    fn restore_kv_prefix(&mut self, prefix: &mut dyn crate::model::KvSource) -> Result<()> {
        self.model.restore_kv_prefix(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_queue_refuses_at_once_and_frees_its_places() -> Result<()> {
        let queue = Arc::new(ModelQueue::new(1));
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let hold = Arc::new(std::sync::Mutex::new(hold));
        let running = {
            let queue = Arc::clone(&queue);
            let hold = Arc::clone(&hold);
            tokio::spawn(async move {
                queue
                    .run(Duration::from_secs(30), move |_| {
                        let _ = hold.lock().map(|h| h.recv());
                        Ok(1)
                    })
                    .await
            })
        };
        // Wait until the first call has the model: then a second one waits, a third is refused.
        while queue.model.try_lock().is_ok() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let waiting = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.run(Duration::from_secs(30), |_| Ok(2)).await })
        };
        while queue.places.available_permits() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let refused = queue.run(Duration::from_secs(30), |_| Ok(3)).await;
        assert!(
            matches!(refused, Err(QueueError::Full { max_queue: 1 })),
            "{refused:?}"
        );
        release
            .send(())
            .map_err(|e| Error::internal(e.to_string()))?;
        let first = running.await.map_err(|e| Error::internal(e.to_string()))?;
        let second = waiting.await.map_err(|e| Error::internal(e.to_string()))?;
        assert_eq!((first.ok(), second.ok()), (Some(1), Some(2)));
        assert_eq!(
            queue.run(Duration::from_secs(30), |_| Ok(4)).await.ok(),
            Some(4)
        );
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_stopped_by_its_deadline_is_a_timeout() -> Result<()> {
        let queue = ModelQueue::new(4);
        let out = queue
            .run(Duration::from_millis(1), |interrupt| {
                while interrupt.check().is_ok() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                interrupt.check().map(|()| 0)
            })
            .await;
        assert!(matches!(out, Err(QueueError::TimedOut { .. })), "{out:?}");
        Ok(())
    }
}
