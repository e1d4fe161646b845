//! Work the calling thread does inside a CPU forward pass, while the pool's other threads
//! carry the pass on.
//!
//! A CPU decode step's pass is synchronous and keeps every core given to it busy, so a
//! thread of its own for the grammar's next step only runs once a core frees up (on a
//! 2-core VM with 2 threads: after waits of 0.1–10 ms). Inside the pass there is a place
//! where that work fits: every large product splits its rows among the pool's threads
//! through a shared cursor, and the calling thread is one of them. [`during`] offers a
//! piece of work to the pass; the first product that starts on the offering thread runs
//! it there before taking rows, and the other threads take the rows it does not: the pass
//! grows by about the work's time divided by the thread count instead of the whole of it.
//!
//! The offered work must not use the pool itself (it runs while the calling thread holds
//! the pool's call lock): the grammar's work is llguidance's alone.

use std::cell::Cell;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// When offered work is called within a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// In the pass's first large product, before the calling thread takes rows.
    Start,
    /// At the end of the pass's last product ([`last_product`]), on the calling thread,
    /// once it has no rows left to take while the other threads finish theirs: a wait it
    /// would spend idle. The pass has streamed the weights through the caches, so what
    /// the step after the pass is about to touch is best read in here (see the decoder's
    /// rehearsals). Only after `Start` ran inside the same pass.
    End,
}

/// The work offered on this thread, and how far it has run.
#[derive(Clone, Copy)]
struct Offer {
    work: *mut (dyn FnMut(Moment) + 'static),
    started: bool,
    ended: bool,
}

thread_local! {
    /// The work offered on this thread, while `during` runs.
    static OFFERED: Cell<Option<Offer>> = const { Cell::new(None) };
    /// Whether the product running on this thread is the pass's last ([`last_product`]).
    static LAST: Cell<bool> = const { Cell::new(false) };
}

/// Run `pass` with `work` offered to its products (see the module): called with
/// [`Moment::Start`] by the first product that starts on this thread, and with
/// [`Moment::End`] at the end of the product marked [`last_product`], if any. Returns what
/// `pass` returned and whether `work` ran (its `Start`) inside it; where it did not (no
/// product of the pass took it: a pass on other kernels, or a pool with no other thread),
/// it has not run at all.
pub fn during<R>(work: &mut dyn FnMut(Moment), pass: impl FnOnce() -> R) -> (R, bool) {
    let work: *mut (dyn FnMut(Moment) + '_) = work;
    // SAFETY: the pointer lives only in this thread's slot, and `Withdraw` empties the slot
    // before `during` returns (or unwinds), while `work`'s borrow is still held: it is never
    // called after `work`'s lifetime ends. Only the lifetime bound is erased.
    let work = unsafe {
        std::mem::transmute::<*mut (dyn FnMut(Moment) + '_), *mut (dyn FnMut(Moment) + 'static)>(
            work,
        )
    };
    OFFERED.with(|slot| {
        slot.set(Some(Offer {
            work,
            started: false,
            ended: false,
        }))
    });
    struct Withdraw;
    impl Drop for Withdraw {
        fn drop(&mut self) {
            OFFERED.with(|slot| slot.set(None));
        }
    }
    let withdraw = Withdraw;
    let out = pass();
    let ran = OFFERED.with(|slot| slot.get().is_some_and(|offer| offer.started));
    drop(withdraw);
    (out, ran)
}

/// Run `product` as the pass's last product: offered work gets its [`Moment::End`] there.
pub fn last_product<R>(product: impl FnOnce() -> R) -> R {
    struct Unmark;
    impl Drop for Unmark {
        fn drop(&mut self) {
            LAST.with(|last| last.set(false));
        }
    }
    LAST.with(|last| last.set(true));
    let _unmark = Unmark;
    product()
}

impl Offer {
    /// Whether the work is due at `moment` (each moment once; `End` only after `Start`, in
    /// the last product).
    fn due(&self, moment: Moment) -> bool {
        match moment {
            Moment::Start => !self.started,
            Moment::End => self.started && !self.ended && LAST.with(Cell::get),
        }
    }
}

/// Call the work offered on this thread at `moment`, if it is due there.
fn run_offered(moment: Moment) {
    let Some(mut offer) = OFFERED.with(Cell::get).filter(|offer| offer.due(moment)) else {
        return;
    };
    match moment {
        Moment::Start => offer.started = true,
        Moment::End => offer.ended = true,
    }
    // Marked before the call, so a product inside the work (none is expected) runs nothing.
    OFFERED.with(|slot| slot.set(Some(offer)));
    // SAFETY: `during` put it there and is still running on this thread (it empties the
    // slot before returning), so the closure it points to is alive and borrowed by nothing
    // else; each moment is marked as run before the call, so neither runs twice.
    unsafe { (*offer.work)(moment) };
}

/// Whether offered work is due in a product starting on this thread.
fn work_due() -> bool {
    OFFERED
        .with(Cell::get)
        .is_some_and(|offer| offer.due(Moment::Start) || offer.due(Moment::End))
}

/// `f` over `0..n_items` in ranges on candle's barrier pool, as its `execute_chunked`
/// does; where work is offered on this thread and the pool has other threads, this thread
/// runs that work first and then takes ranges like the others, so they take its share (and
/// in the last product, runs its end once no range is left).
pub(crate) fn execute_chunked<F: Fn(Range<usize>) + Sync>(n_items: usize, f: F) {
    let pool = candle_core::utils::barrier_pool();
    if !work_due() || pool.n_workers() == 0 || n_items == 0 {
        pool.execute_chunked(n_items, f);
        return;
    }
    // The offering thread is never one of the pool's (they offer nothing), so this is not
    // a nested call. Chunks as candle's: about eight grabs per thread.
    let chunk = n_items.div_ceil((pool.n_workers() + 1) * 8).max(1);
    let cursor = AtomicUsize::new(0);
    pool.execute(|_| {
        // No-ops on the pool's threads: the slot is this thread's.
        run_offered(Moment::Start);
        loop {
            let start = cursor.fetch_add(chunk, Ordering::Relaxed);
            if start >= n_items {
                break;
            }
            f(start..n_items.min(start + chunk));
        }
        run_offered(Moment::End);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// Offered work runs once, on the offering thread, inside the first product; every
    /// item of every product is computed once.
    #[test]
    fn offered_work_runs_once_inside_the_first_product() {
        let caller = std::thread::current().id();
        let mut runs = Vec::new();
        let sums: Vec<AtomicU64> = (0..3).map(|_| AtomicU64::new(0)).collect();
        let (_, ran) = during(&mut |_| runs.push(std::thread::current().id()), || {
            for sum in &sums {
                execute_chunked(1000, |range| {
                    for i in range {
                        sum.fetch_add(i as u64, Ordering::Relaxed);
                    }
                });
            }
        });
        let expected = (0..1000u64).sum::<u64>();
        assert!(sums.iter().all(|s| s.load(Ordering::Relaxed) == expected));
        if candle_core::utils::barrier_pool().n_workers() > 0 {
            assert!(ran);
            assert_eq!(runs, vec![caller]);
        } else {
            // No other thread to carry the product on: the work is left to the caller.
            assert!(!ran);
            assert!(runs.is_empty());
        }
    }

    /// A pass with no product leaves the work not run, and the offer ends with `during`:
    /// a later product on the same thread runs nothing.
    #[test]
    fn work_no_product_took_is_withdrawn() {
        let mut count = 0;
        let ((), ran) = during(&mut |_| count += 1, || ());
        assert!(!ran);
        execute_chunked(64, |_| {});
        assert_eq!(count, 0);
    }

    /// The end moment comes once, on the offering thread, in the product marked last and
    /// after every range of it was taken; a pass with no product marked last has none.
    #[test]
    fn the_end_moment_comes_once_in_the_last_product_after_its_ranges() {
        if candle_core::utils::barrier_pool().n_workers() == 0 {
            return;
        }
        let caller = std::thread::current().id();
        let taken = AtomicU64::new(0);
        let mut seen = Vec::new();
        let product = |n: u64| {
            execute_chunked(n as usize, |range| {
                taken.fetch_add(range.len() as u64, Ordering::Relaxed);
            })
        };
        let (_, ran) = during(
            &mut |moment| {
                seen.push((
                    moment,
                    std::thread::current().id(),
                    taken.load(Ordering::Relaxed),
                ))
            },
            || {
                product(100);
                product(100);
                last_product(|| product(1000));
                product(100);
            },
        );
        assert!(ran);
        assert_eq!(seen.len(), 2, "{seen:?}");
        // (the other threads may take ranges of the first product before it starts)
        assert_eq!((seen[0].0, seen[0].1), (Moment::Start, caller));
        assert!(seen[0].2 <= 100, "{seen:?}");
        let (moment, thread, at) = seen[1];
        assert_eq!((moment, thread), (Moment::End, caller));
        // Every range of the last product is taken by then (the other threads may still be
        // computing theirs): at least what the two products before it and its own
        // calling-thread ranges made, at most all of them.
        assert!((200..=1200).contains(&at), "{at}");
        let mut moments = Vec::new();
        let _ = during(&mut |m| moments.push(m), || product(100));
        assert_eq!(moments, vec![Moment::Start]);
    }
}
