//! Threads for the multi-threaded build (`superinfer-threads.wasm`: atomics, bulk memory, one
//! shared memory imported from JS): core's [`Parallel`] over workers that share the engine's
//! linear memory.
//!
//! The engine's worker (the caller, thread 0) and `n - 1` helper workers (Web Workers, or
//! Node `worker_threads`, all started from the package's `worker.js`) each instantiate the same
//! module with the same memory. A helper runs no code of its own before the JS side has given
//! it a stack and thread-local storage (below), then enters [`si_worker_loop`] and stays
//! there: it sleeps on `memory.atomic.wait32` until a job is published, takes items from an
//! atomic counter until none are left, and sleeps again. The caller publishes a job, runs
//! items itself, closes the job to newcomers, then waits only for the helpers that joined it.
//! A helper that is slow to wake (descheduled, or still starting) therefore never stalls a
//! job: the caller and whoever did wake take every item; a helper that wakes after the job is
//! closed finds it closed and goes back to sleep.
//!
//! Stacks and thread-local storage. `wasm-ld` gives every instance its own mutable
//! `__stack_pointer` global, initialised to the top of the one 1 MiB stack the linker laid
//! out, and a `__tls_base` that only the instance that initialised memory points at the
//! static TLS block. Every other instance must be moved to a stack and a TLS block of its own
//! before it runs any Rust code. What the known implementations do, and what we took from
//! them (no code): wasm-bindgen's threads transform (used by wasm-bindgen-rayon and
//! wasm_thread) rewrites the module's start function so that each thread after the first
//! allocates its stack through the module's allocator, sets `__stack_pointer` and calls the
//! linker's `__wasm_init_tls` with a block of `__tls_size` bytes aligned to `__tls_align`;
//! emscripten's pthreads allocate the stack and TLS when the thread is created on the
//! creating thread, and the new worker sets the stack (`emscripten_stack_set_limits`,
//! assembly) and calls `__wasm_init_tls` on it before running user code; wasi-libc's
//! `wasi_thread_start` does the same two `global.set`s in assembly. Without a module rewrite
//! and without assembly, we follow emscripten's split: the caller allocates both blocks in
//! Rust ([`si_thread_prepare`], on its own stack), and the helper's JS sets the exported
//! `__stack_pointer` global (the build exports it; `+mutable-globals`) and calls the
//! exported `__wasm_init_tls` before its first call into Rust. The linker's start function
//! (`__wasm_init_memory`) copies the data segments only once, guarded by an atomic flag, so
//! instantiating more instances over the live memory leaves it alone.
//!
//! A helper that traps (a bug: panics abort) is reported by its JS ([`si_worker_trapped`]):
//! it leaves the job it was in, and the caller's next join panics, which the engine's worker
//! reports as an `internal` error (the engine is then unusable, as after any trap).

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8, AtomicUsize, Ordering};

use superinfer_core::parallel::{JobGate, Parallel, Sequential};

type JobFn = dyn Fn(usize) + Sync;

/// Helpers at most (the `in_job` table).
pub const MAX_HELPERS: usize = 63;
/// Each helper's stack (the linker's default for the first thread, too).
pub const STACK_BYTES: usize = 1 << 20;
/// Loads of a word a waiting thread makes before it sleeps on it (a few tens of
/// microseconds: the next product of a forward pass usually comes sooner than a wake-up
/// from `memory.atomic.wait32` would).
const SPINS: u32 = 1 << 15;

pub struct Pool {
    /// Bumped after each job is published, and at shutdown; sleeping helpers wait on it.
    gen: AtomicU32,
    /// `OPEN` | participants: a helper joins with a compare-exchange while `OPEN` is set, so
    /// none can enter a job after the caller closed it.
    join: JobGate,
    /// The caller's `&JobFn` (a thin pointer to the fat one, on the caller's stack), valid
    /// while the job has participants or is open.
    job: AtomicPtr<&'static JobFn>,
    n_items: AtomicUsize,
    next: AtomicUsize,
    /// Helpers asleep on `gen` (the caller notifies only when there are some).
    sleepers: AtomicU32,
    /// Helpers inside `worker_loop`.
    started: AtomicU32,
    /// What `threads()` reports: 1 + the helpers the JS side saw start.
    threads: AtomicUsize,
    /// A job runs (a second `for_each`, nested or from elsewhere, runs on its own thread).
    busy: AtomicBool,
    shutdown: AtomicBool,
    /// A helper trapped: the next join fails.
    poisoned: AtomicBool,
    /// Per helper: 1 while it counts in `join`.
    in_job: [AtomicU8; MAX_HELPERS + 1],
}

/// The pool of the threaded build (statics live in the shared memory).
pub static POOL: Pool = Pool::new();

/// The [`Parallel`] the engine runs on: the pool in the threaded build, else one thread.
pub fn parallel() -> &'static dyn Parallel {
    static SEQUENTIAL: Sequential = Sequential;
    if cfg!(target_feature = "atomics") {
        &POOL
    } else {
        &SEQUENTIAL
    }
}

impl Default for Pool {
    fn default() -> Self {
        Self::new()
    }
}

impl Pool {
    #[allow(clippy::declare_interior_mutable_const)]
    pub const fn new() -> Pool {
        const ZERO: AtomicU8 = AtomicU8::new(0);
        Pool {
            gen: AtomicU32::new(0),
            join: JobGate::new(),
            job: AtomicPtr::new(core::ptr::null_mut()),
            n_items: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            sleepers: AtomicU32::new(0),
            started: AtomicU32::new(0),
            threads: AtomicUsize::new(1),
            busy: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            in_job: [ZERO; MAX_HELPERS + 1],
        }
    }

    /// Sets what `threads()` reports (1 + the helpers that started), which sizes the work's
    /// chunks and the attention scratch; set before a model is loaded.
    pub fn set_threads(&self, n: usize) {
        self.threads.store(n.max(1), Ordering::Relaxed);
    }

    /// Helpers inside [`Self::worker_loop`] now.
    pub fn started(&self) -> usize {
        self.started.load(Ordering::Acquire) as usize
    }

    /// A helper's life: joins every job it finds open until [`Self::stop`]. `index` in
    /// `1..=MAX_HELPERS`.
    pub fn worker_loop(&self, index: usize) {
        let index = index.min(MAX_HELPERS);
        self.started.fetch_add(1, Ordering::AcqRel);
        loop {
            let seen = self.gen.load(Ordering::Acquire);
            if self.shutdown.load(Ordering::Acquire) {
                break;
            }
            self.try_join(index);
            self.wait_gen(seen);
        }
        self.started.fetch_sub(1, Ordering::AcqRel);
    }

    /// Spins, then sleeps, until `gen` moves from `seen`.
    fn wait_gen(&self, seen: u32) {
        for _ in 0..SPINS {
            if self.gen.load(Ordering::Acquire) != seen {
                return;
            }
            core::hint::spin_loop();
        }
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while self.gen.load(Ordering::SeqCst) == seen {
            wait(&self.gen, seen, -1);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    fn try_join(&self, index: usize) {
        if !self.join.try_join() {
            return;
        }
        self.in_job[index].store(1, Ordering::Relaxed);
        // the Acquire above read the caller's Release store of OPEN (or a later increment of
        // the same release sequence): the job's fields below are visible
        let job = self.job.load(Ordering::Relaxed);
        let n = self.n_items.load(Ordering::Relaxed);
        if !job.is_null() {
            // SAFETY: the caller keeps the closure, and the reference `job` points to, alive
            // until every participant has left (`join`'s count is 0), which is after this.
            let f: &JobFn = unsafe { *job };
            self.run_items(f, n);
        }
        self.leave(index);
    }

    fn leave(&self, index: usize) {
        if self.in_job[index].swap(0, Ordering::Relaxed) == 0 {
            return;
        }
        if self.join.leave() {
            // the last one out of a closed job wakes the caller
            notify(self.join.word(), 1);
        }
    }

    fn run_items(&self, f: &(dyn Fn(usize) + Sync + '_), n: usize) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            f(i);
        }
    }

    /// Ends every helper's `worker_loop` (they return to their JS, which closes them).
    pub fn stop(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.gen.fetch_add(1, Ordering::SeqCst);
        notify(&self.gen, u32::MAX);
    }

    /// A helper trapped: it leaves the job it was in (its items may be unfinished), it no
    /// longer counts as started, and the caller's next join fails.
    pub fn trapped(&self, index: usize) {
        self.poisoned.store(true, Ordering::SeqCst);
        self.started.fetch_sub(1, Ordering::AcqRel);
        self.leave(index.min(MAX_HELPERS));
    }
}

// SAFETY: as the std pool: every call of `f` comes from `run_items`, which claims each index
// of `0..n` once from the counter `next`, on the caller or on a helper inside the job's gate;
// the caller exhausts the counter, closes the gate and waits until no helper is inside before
// it returns or unwinds (`EndJob`); the small-job and busy paths run `0..n` in a plain loop.
// A helper that traps mid-item stops running (its instance is dead) and is taken out of the
// gate by `trapped`; the caller then panics (an abort in wasm) instead of returning with
// that item unfinished.
unsafe impl Parallel for Pool {
    fn for_each(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        // (`busy` is taken last: when the swap finds it free, it is ours, released below)
        if n <= 1
            || self.started.load(Ordering::Acquire) == 0
            || self.busy.swap(true, Ordering::Acquire)
        {
            (0..n).for_each(f);
            return;
        }
        // SAFETY: (lifetime erasure) this function returns only after every participant has
        // left the job, so `f` and `fref` outlive every use through `job`.
        let fref: &'static JobFn =
            unsafe { core::mem::transmute::<&(dyn Fn(usize) + Sync), &'static JobFn>(f) };
        self.job
            .store(&fref as *const &JobFn as *mut &JobFn, Ordering::Relaxed);
        self.n_items.store(n, Ordering::Relaxed);
        self.next.store(0, Ordering::Relaxed);
        // publishes the fields above to the helpers that join
        self.join.open();
        self.gen.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            notify(&self.gen, u32::MAX);
        }
        // ends the job (below, or while `f`'s panic unwinds where panics unwind: the host's
        // tests) only after every participant has left, so no helper runs `f` after this
        let end = EndJob(self);
        self.run_items(f, n);
        drop(end);
        if self.poisoned.load(Ordering::SeqCst) {
            panic!("a worker thread trapped during a parallel job; reload the engine");
        }
    }

    fn threads(&self) -> usize {
        self.threads.load(Ordering::Relaxed)
    }
}

/// Ends the caller's job when dropped: no newcomers from then on, and it waits for the
/// participants (each finishes at most the item it holds once the counter is exhausted).
struct EndJob<'a>(&'a Pool);

impl Drop for EndJob<'_> {
    fn drop(&mut self) {
        let pool = self.0;
        pool.join.close();
        let mut spins = 0;
        loop {
            let j = pool.join.word().load(Ordering::Acquire);
            if pool.join.inside() == 0 {
                break;
            }
            if spins < SPINS {
                spins += 1;
                core::hint::spin_loop();
            } else {
                // a timeout, so that no lost notification can hang it
                wait(pool.join.word(), j, 1_000_000);
            }
        }
        pool.job.store(core::ptr::null_mut(), Ordering::Relaxed);
        pool.busy.store(false, Ordering::Release);
    }
}

/// Sleeps while `*a == expected`, at most `timeout_ns` (-1: no limit), or until notified.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
fn wait(a: &AtomicU32, expected: u32, timeout_ns: i64) {
    // SAFETY: `a` is a live, aligned i32 in linear memory.
    unsafe {
        core::arch::wasm32::memory_atomic_wait32(
            a.as_ptr() as *mut i32,
            expected as i32,
            timeout_ns,
        );
    }
}

/// Wakes up to `count` threads sleeping on `a`.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
fn notify(a: &AtomicU32, count: u32) {
    // SAFETY: as in `wait`.
    unsafe {
        core::arch::wasm32::memory_atomic_notify(a.as_ptr() as *mut i32, count);
    }
}

/// On the host (unit tests, with std threads) a wait yields.
#[cfg(not(target_arch = "wasm32"))]
fn wait(a: &AtomicU32, expected: u32, timeout_ns: i64) {
    let start = std::time::Instant::now();
    while a.load(Ordering::SeqCst) == expected
        && (timeout_ns < 0 || start.elapsed().as_nanos() < timeout_ns as u128)
    {
        std::thread::yield_now();
    }
}

/// The single-thread build has no helpers, so it never waits.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
fn wait(_: &AtomicU32, _: u32, _: i64) {}

#[cfg(not(all(target_arch = "wasm32", target_feature = "atomics")))]
fn notify(_: &AtomicU32, _: u32) {}

/// Allocates a helper's stack and thread-local storage in one block and returns the address
/// between them: the helper's `__stack_pointer` (the stack, [`STACK_BYTES`], grows down from
/// it) and the argument of its `__wasm_init_tls` (the TLS block, `tls_size` bytes, lies above
/// it). 0 when memory is exhausted. Never freed: a helper lives as long as its engine's worker.
#[no_mangle]
pub extern "C" fn si_thread_prepare(tls_size: usize, tls_align: usize) -> usize {
    let align = tls_align.max(16);
    // STACK_BYTES is then a multiple of the alignment, so the returned address is aligned
    if !align.is_power_of_two() || align > STACK_BYTES {
        return 0;
    }
    let Ok(layout) = std::alloc::Layout::from_size_align(STACK_BYTES + tls_size.max(1), align)
    else {
        return 0;
    };
    // SAFETY: a non-zero size.
    let base = unsafe { std::alloc::alloc_zeroed(layout) };
    if base.is_null() {
        return 0;
    }
    base as usize + STACK_BYTES
}

/// A helper's life (called by its JS once its stack and TLS are set): runs its share of every
/// job until [`si_threads_stop`]. `index` in `1..=63`.
#[no_mangle]
pub extern "C" fn si_worker_loop(index: usize) {
    POOL.worker_loop(index);
}

/// Helpers inside their loop now.
#[no_mangle]
pub extern "C" fn si_threads_started() -> usize {
    POOL.started()
}

/// The thread count the engine sizes its work for (1 + the helpers that started); before
/// loading a model.
#[no_mangle]
pub extern "C" fn si_threads_set(n: usize) {
    POOL.set_threads(n);
}

/// Ends the helpers' loops (the engine's worker is being disposed of).
#[no_mangle]
pub extern "C" fn si_threads_stop() {
    POOL.stop();
}

/// A helper's JS caught a trap in it.
#[no_mangle]
pub extern "C" fn si_worker_trapped(index: usize) {
    POOL.trapped(index);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A pool with `helpers` std threads in its loop, for the duration of `body`.
    fn with_helpers(helpers: usize, body: impl FnOnce(&Pool)) {
        let pool = Pool::new();
        std::thread::scope(|s| {
            for i in 1..=helpers {
                let p = &pool;
                s.spawn(move || p.worker_loop(i));
            }
            while pool.started() < helpers {
                std::thread::yield_now();
            }
            pool.set_threads(helpers + 1);
            // a failing body still stops the helpers (the scope waits for them)
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&pool)));
            pool.stop();
            if let Err(p) = r {
                std::panic::resume_unwind(p);
            }
        });
        assert_eq!(pool.started(), 0);
    }

    fn check_once(pool: &Pool, n: usize) {
        let hits: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        pool.for_each(n, &|i| {
            hits[i].fetch_add(1, Ordering::Relaxed);
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "n={n}");
    }

    #[test]
    fn every_index_runs_exactly_once() {
        for helpers in [0, 1, 3] {
            with_helpers(helpers, |pool| {
                assert_eq!(pool.threads(), helpers + 1);
                for round in 0..300 {
                    check_once(pool, [0, 1, 2, 7, 64, 1000][round % 6]);
                }
                // long enough for the helpers to sleep on `gen`, then more jobs
                std::thread::sleep(std::time::Duration::from_millis(30));
                check_once(pool, 100);
            });
        }
    }

    #[test]
    fn helpers_share_the_work() {
        with_helpers(1, |pool| {
            let caller = std::thread::current().id();
            let by_helper = AtomicU64::new(0);
            pool.for_each(40, &|_| {
                std::thread::sleep(std::time::Duration::from_millis(2));
                if std::thread::current().id() != caller {
                    by_helper.fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(by_helper.load(Ordering::Relaxed) > 0);
        });
    }

    #[test]
    fn a_helper_that_never_wakes_does_not_stall_the_caller() {
        // counted as started, but it never joins (descheduled for good, or still loading)
        let pool = Pool::new();
        pool.started.fetch_add(1, Ordering::SeqCst);
        pool.set_threads(2);
        check_once(&pool, 50);
        // and one that is awake finds the next job as usual
        std::thread::scope(|s| {
            s.spawn(|| pool.worker_loop(1));
            while pool.started() < 2 {
                std::thread::yield_now();
            }
            check_once(&pool, 50);
            pool.stop();
        });
    }

    /// Where panics unwind (here, natively), a panic in the caller's item still waits for the
    /// helpers inside the job: no call of `f` outlives `for_each` (`Parallel`'s contract).
    #[test]
    fn a_panicking_caller_waits_for_the_helpers() {
        with_helpers(2, |pool| {
            let caller = std::thread::current().id();
            let running = AtomicU64::new(0);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // each helper holds at most one item (they take long), so the caller gets one
                pool.for_each(3, &|_| {
                    if std::thread::current().id() == caller {
                        // fail once a helper is inside an item
                        let start = std::time::Instant::now();
                        while running.load(Ordering::SeqCst) == 0
                            && start.elapsed() < std::time::Duration::from_secs(1)
                        {
                            std::thread::yield_now();
                        }
                        panic!("the caller's item failed");
                    }
                    running.fetch_add(1, Ordering::SeqCst);
                    // (longer than the caller's panic takes to unwind, backtrace included)
                    std::thread::sleep(std::time::Duration::from_millis(500));
                    running.fetch_sub(1, Ordering::SeqCst);
                })
            }));
            assert!(r.is_err());
            assert_eq!(
                running.load(Ordering::SeqCst),
                0,
                "a helper still ran an item"
            );
            // and the pool takes the next job
            check_once(pool, 100);
        });
    }

    #[test]
    fn a_trapped_helper_fails_the_job_instead_of_hanging_it() {
        let pool = Pool::new();
        let caller = std::thread::current().id();
        let result = std::thread::scope(|s| {
            let p = &pool;
            s.spawn(move || {
                // a trap in wasm ends the helper; its JS then reports it
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.worker_loop(1)));
                if r.is_err() {
                    p.trapped(1);
                }
            });
            while pool.started() < 1 {
                std::thread::yield_now();
            }
            pool.set_threads(2);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.for_each(40, &|_| {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    if std::thread::current().id() != caller {
                        panic!("a helper's item failed");
                    }
                })
            }));
            pool.stop();
            r
        });
        assert!(result.is_err());
        assert_eq!(pool.started(), 0);
    }
}
