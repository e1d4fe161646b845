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

thread_local! {
    /// The work offered on this thread, until a product takes it.
    static OFFERED: Cell<Option<*mut (dyn FnMut() + 'static)>> = const { Cell::new(None) };
}

/// Run `pass` with `work` offered to its products (see the module). Returns what `pass`
/// returned and whether `work` ran inside it; where it did not (no product of the pass
/// took it: a pass on other kernels, or a pool with no other thread), it has not run.
pub fn during<R>(work: &mut dyn FnMut(), pass: impl FnOnce() -> R) -> (R, bool) {
    let work: *mut (dyn FnMut() + '_) = work;
    // SAFETY: the pointer lives only in this thread's slot, and `Withdraw` empties the slot
    // before `during` returns (or unwinds), while `work`'s borrow is still held: it is never
    // called after `work`'s lifetime ends. Only the lifetime bound is erased.
    let work = unsafe {
        std::mem::transmute::<*mut (dyn FnMut() + '_), *mut (dyn FnMut() + 'static)>(work)
    };
    OFFERED.with(|slot| slot.set(Some(work)));
    struct Withdraw;
    impl Drop for Withdraw {
        fn drop(&mut self) {
            OFFERED.with(|slot| slot.set(None));
        }
    }
    let withdraw = Withdraw;
    let out = pass();
    let ran = OFFERED.with(|slot| slot.get().is_none());
    drop(withdraw);
    (out, ran)
}

/// Run the work offered on this thread, if any (taken first, so it runs once).
fn run_offered() {
    if let Some(work) = OFFERED.with(Cell::take) {
        // SAFETY: `during` put it there and is still running on this thread (it empties
        // the slot before returning), so the closure it points to is alive and borrowed
        // by nothing else; taking it from the slot makes this the only call.
        unsafe { (*work)() };
    }
}

/// `f` over `0..n_items` in ranges on candle's barrier pool, as its `execute_chunked`
/// does; where work is offered on this thread and the pool has other threads, this thread
/// runs that work first and then takes ranges like the others, so they take its share.
pub(crate) fn execute_chunked<F: Fn(Range<usize>) + Sync>(n_items: usize, f: F) {
    let pool = candle_core::utils::barrier_pool();
    let offered = OFFERED.with(|slot| slot.get().is_some());
    if !offered || pool.n_workers() == 0 || n_items == 0 {
        pool.execute_chunked(n_items, f);
        return;
    }
    // The offering thread is never one of the pool's (they offer nothing), so this is not
    // a nested call. Chunks as candle's: about eight grabs per thread.
    let chunk = n_items.div_ceil((pool.n_workers() + 1) * 8).max(1);
    let cursor = AtomicUsize::new(0);
    pool.execute(|_| {
        // A no-op on the pool's threads: the slot is this thread's.
        run_offered();
        loop {
            let start = cursor.fetch_add(chunk, Ordering::Relaxed);
            if start >= n_items {
                break;
            }
            f(start..n_items.min(start + chunk));
        }
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
        let (_, ran) = during(&mut || runs.push(std::thread::current().id()), || {
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
        let ((), ran) = during(&mut || count += 1, || ());
        assert!(!ran);
        execute_chunked(64, |_| {});
        assert_eq!(count, 0);
    }
}
