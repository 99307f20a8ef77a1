//! A persistent thread pool for the core's [`Parallel`] trait: `threads - 1` workers plus the
//! calling thread. Work items are claimed from an atomic counter; between jobs the workers
//! spin briefly (the next matmul is usually microseconds away) and then park on a condvar.
//! No thread is spawned and nothing is allocated per job.
//!
//! A worker takes part in a job only by joining it through the job's [`JobGate`]; the caller
//! waits only for the workers that joined, so a worker the OS has not scheduled holds nobody
//! up.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use superinfer_core::parallel::{JobGate, Parallel};

type JobFn = dyn Fn(usize) + Sync;

struct Shared {
    /// Bumped (Release) after a job is published; workers wait for it to move.
    generation: AtomicUsize,
    /// Who is inside the current job, and whether it takes more.
    gate: JobGate,
    /// Address of the caller's `&JobFn` (a thin pointer to the fat one), valid while the
    /// job is open or has workers inside.
    job: AtomicPtr<&'static JobFn>,
    n_items: AtomicUsize,
    next: AtomicUsize,
    /// Parking: workers that spun too long sleep on `wake` under `lock`.
    lock: Mutex<()>,
    sleepers: AtomicUsize,
    wake: Condvar,
    shutdown: AtomicBool,
    panicked: AtomicBool,
}

pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    threads: usize,
    /// Serialises concurrent `for_each` calls from different threads on one pool.
    submit: Mutex<()>,
}

/// Iterations a worker spins waiting for the next job before it parks.
const SPIN_LIMIT: usize = 1 << 16;

impl ThreadPool {
    /// A pool running jobs on exactly `threads` threads (the caller counts as one).
    pub fn new(threads: usize) -> ThreadPool {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            generation: AtomicUsize::new(0),
            gate: JobGate::new(),
            job: AtomicPtr::new(std::ptr::null_mut()),
            n_items: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            lock: Mutex::new(()),
            sleepers: AtomicUsize::new(0),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
        });
        let workers = (1..threads)
            .map(|i| {
                let s = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("superinfer-{i}"))
                    .spawn(move || worker(&s))
                    .expect("failed to spawn a worker thread")
            })
            .collect();
        ThreadPool {
            shared,
            workers,
            threads,
            submit: Mutex::new(()),
        }
    }
}

fn run_items(s: &Shared, f: &(dyn Fn(usize) + Sync + '_), n: usize) {
    loop {
        let i = s.next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        f(i);
    }
}

fn worker(s: &Shared) {
    let mut seen = 0usize;
    loop {
        // spin, then park until the generation moves
        let mut spins = 0;
        loop {
            if s.shutdown.load(Ordering::Acquire) {
                return;
            }
            let g = s.generation.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            if spins < SPIN_LIMIT {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            let guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.sleepers.fetch_add(1, Ordering::SeqCst);
            let guard = s
                .wake
                .wait_while(guard, |_| {
                    s.generation.load(Ordering::SeqCst) == seen
                        && !s.shutdown.load(Ordering::SeqCst)
                })
                .unwrap_or_else(|e| e.into_inner());
            s.sleepers.fetch_sub(1, Ordering::SeqCst);
            drop(guard);
        }
        if !s.gate.try_join() {
            // closed already: the caller (or the other workers) ran every item
            continue;
        }
        // joining (Acquire) made the job's fields visible; the caller waits for this worker
        // to leave before the job (and the closure) go away
        let job = s.job.load(Ordering::Relaxed);
        let n = s.n_items.load(Ordering::Relaxed);
        if !job.is_null() {
            // SAFETY: the job is kept alive until every worker inside it has left, which
            // happens only after this call returns.
            let f: &JobFn = unsafe { *job };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_items(s, f, n)))
                .is_err()
            {
                s.panicked.store(true, Ordering::SeqCst);
            }
        }
        s.gate.leave();
    }
}

// SAFETY: every call of `f` comes from `run_items`, which claims each index of `0..n` once
// from the shared counter `next` (`fetch_add`: no index twice, none past `n`), on the caller
// or on a worker inside the job's gate. The caller runs `run_items` until the counter is
// exhausted, so every index is claimed when it closes the gate; it then waits until no worker
// is inside (a worker leaves only after its `run_items` returned) before it returns or
// resumes a panic, so no call runs after. A worker that joins later finds the gate closed
// and runs nothing. When no call panicked, every index was claimed and run exactly once.
unsafe impl Parallel for ThreadPool {
    fn for_each(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        if self.workers.is_empty() || n <= 1 {
            (0..n).for_each(f);
            return;
        }
        let _one_at_a_time = self.submit.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY: (lifetime erasure) we wait below until every worker that joined the job has
        // left it, and close it first so no other can join, so the borrow of `f` (and of
        // `fref`, which `job` points to) outlives all uses.
        let fref: &'static JobFn =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static JobFn>(f) };
        s.job
            .store(&fref as *const &JobFn as *mut &JobFn, Ordering::Relaxed);
        s.n_items.store(n, Ordering::Relaxed);
        s.next.store(0, Ordering::Relaxed);
        // publishes everything above to the workers that join
        s.gate.open();
        s.generation.fetch_add(1, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            // taking the lock orders this notify after a parking worker's check
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let caller = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_items(s, f, n)));
        // every item is claimed: close the job, then wait for the workers inside it
        let mut inside = s.gate.close();
        let mut spins = 0u32;
        while inside != 0 {
            spins += 1;
            if spins < 1 << 16 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            inside = s.gate.inside();
        }
        s.job.store(std::ptr::null_mut(), Ordering::Relaxed);
        if let Err(p) = caller {
            std::panic::resume_unwind(p);
        }
        if s.panicked.swap(false, Ordering::SeqCst) {
            panic!("a worker thread panicked while running a parallel job");
        }
    }

    fn threads(&self) -> usize {
        self.threads
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        {
            let _g = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.shutdown.store(true, Ordering::SeqCst);
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_index_runs_exactly_once() {
        for threads in [1, 2, 3, 5] {
            let pool = ThreadPool::new(threads);
            for n in [0usize, 1, 2, 7, 100, 1000] {
                let hits: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
                pool.for_each(n, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(
                    hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                    "threads={threads} n={n}"
                );
            }
        }
    }

    #[test]
    fn many_small_jobs_and_parking() {
        let pool = ThreadPool::new(2);
        let total = AtomicU64::new(0);
        for round in 0..2000u64 {
            pool.for_each(4, &|i| {
                total.fetch_add(i as u64 + round, Ordering::Relaxed);
            });
            if round == 1000 {
                // long enough for the worker to park
                std::thread::sleep(std::time::Duration::from_millis(30));
            }
        }
        let want: u64 = (0..2000u64).map(|r| 6 + 4 * r).sum();
        assert_eq!(total.load(Ordering::Relaxed), want);
    }

    #[test]
    fn a_panicking_job_is_reported_not_hung() {
        let pool = ThreadPool::new(2);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.for_each(64, &|i| {
                if i == 63 {
                    panic!("boom");
                }
            })
        }));
        assert!(r.is_err());
        // the pool still works afterwards
        let n = AtomicU64::new(0);
        pool.for_each(10, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 10);
    }
}
