//! How threads enter the core: the frontends implement [`Parallel`] over their own pool.

/// Runs `f(i)` for every `i` in `0..n`, possibly on several threads, and returns when all
/// calls have finished.
///
/// # Safety
/// [`DisjointSlice`]'s users hand the piece of index `i` to `f(i)` as a `&mut`, so an
/// implementation must:
/// - call `f` at most once per index in `0..n`, and never for another index (two calls for
///   one index would hold two `&mut` to the same piece);
/// - return only after every call has finished, and call nothing after (the pieces borrow a
///   slice that the caller may use or free once this returns); the same holds when it
///   unwinds instead of returning (a call panicked);
/// - when it returns normally, have called `f` exactly once for every index in `0..n`.
pub unsafe trait Parallel: Sync {
    fn for_each(&self, n: usize, f: &(dyn Fn(usize) + Sync));
    /// Number of workers (used to size work chunks).
    fn threads(&self) -> usize {
        1
    }
}

/// Runs everything on the calling thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sequential;

// SAFETY: one loop on the calling thread: each index once, in order, every call finished
// when the loop ends (a panic unwinds out of the loop, and no call runs after it).
unsafe impl Parallel for Sequential {
    fn for_each(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        for i in 0..n {
            f(i);
        }
    }
}

/// A mutable slice that parallel workers write in disjoint pieces.
pub struct DisjointSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: core::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: a shared `DisjointSlice` only hands out pieces through the `unsafe` `piece` (and the
// raw `as_mut_ptr`), whose callers guarantee that no two live pieces overlap (one index of a
// `Parallel` job, which runs each index once), so sharing the pointer between threads is as
// safe as handing each thread its own `&mut` piece: `T: Send` is all that needs.
unsafe impl<T: Send> Sync for DisjointSlice<'_, T> {}
// SAFETY: it stands for the `&'a mut [T]` it was made from, which is `Send` when `T` is.
unsafe impl<T: Send> Send for DisjointSlice<'_, T> {}

impl<'a, T> DisjointSlice<'a, T> {
    pub fn new(s: &'a mut [T]) -> Self {
        DisjointSlice {
            ptr: s.as_mut_ptr(),
            len: s.len(),
            _borrow: core::marker::PhantomData,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start of the whole slice, for kernels that write strided pieces of it (their
    /// writes carry the same contract as [`Self::piece`]: disjoint between workers).
    pub fn as_mut_ptr(&self) -> *mut T {
        self.ptr
    }

    /// The piece `[start, start + len)` (clamped to the slice).
    ///
    /// # Safety
    /// No two live pieces handed out by this value may overlap.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn piece(&self, start: usize, len: usize) -> &mut [T] {
        let start = start.min(self.len);
        let len = len.min(self.len - start);
        // SAFETY: the range is inside the original slice, which outlives 'a; the caller
        // guarantees no overlap with another live piece.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

/// Splits `n` items into chunks of at least `min_chunk` items, about `per_thread` chunks per
/// worker, and runs `f(start, end)` for each chunk.
pub fn for_each_range(
    par: &dyn Parallel,
    n: usize,
    min_chunk: usize,
    f: &(dyn Fn(usize, usize) + Sync),
) {
    if n == 0 {
        return;
    }
    let threads = par.threads().max(1);
    let per_thread = 4;
    let chunk = n.div_ceil(threads * per_thread).max(min_chunk.max(1));
    let n_chunks = n.div_ceil(chunk);
    if n_chunks == 1 {
        f(0, n);
        return;
    }
    par.for_each(n_chunks, &|c| {
        let start = c * chunk;
        f(start, (start + chunk).min(n));
    });
}

/// The door of a thread pool's job, shared by the pools of the frontends (std threads, wasm
/// workers): one word holding whether the job takes workers and how many are inside.
///
/// The caller [`open`](Self::open)s the job after publishing its fields, runs items itself
/// until none is left, [`close`](Self::close)s it and waits until [`inside`](Self::inside) is
/// 0. A worker [`try_join`](Self::try_join)s (reading the job's fields only once inside) and
/// [`leave`](Self::leave)s after its last item. A worker that never got to run (its core busy
/// with another process) never joined, so nobody waits for it: waiting for every worker to
/// report back per job instead made each job wait for a time slice.
///
/// Joining a later job than the one a worker was woken for is harmless: it reads that job's
/// fields after joining.
#[derive(Debug, Default)]
pub struct JobGate(core::sync::atomic::AtomicU32);

impl JobGate {
    /// The job takes workers.
    const OPEN: u32 = 1 << 31;
    /// Workers inside.
    const COUNT: u32 = Self::OPEN - 1;

    pub const fn new() -> JobGate {
        JobGate(core::sync::atomic::AtomicU32::new(0))
    }

    /// Opens a job with nobody inside; its fields, stored before, are visible to whoever
    /// joins (Release).
    pub fn open(&self) {
        self.0
            .store(Self::OPEN, core::sync::atomic::Ordering::Release);
    }

    /// Enters the job if it is open: true when the caller is now inside (and sees the job's
    /// fields).
    pub fn try_join(&self) -> bool {
        use core::sync::atomic::Ordering::{AcqRel, Acquire};
        let mut cur = self.0.load(Acquire);
        while cur & Self::OPEN != 0 {
            match self.0.compare_exchange_weak(cur, cur + 1, AcqRel, Acquire) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        false
    }

    /// Leaves the job (what the worker wrote is visible to the caller once it sees the count
    /// drop). True when this was the last worker out of a closed job (a caller asleep on
    /// [`word`](Self::word) wants waking).
    pub fn leave(&self) -> bool {
        let before = self.0.fetch_sub(1, core::sync::atomic::Ordering::AcqRel);
        before & Self::OPEN == 0 && before & Self::COUNT == 1
    }

    /// Takes no more workers; returns how many are inside.
    pub fn close(&self) -> u32 {
        self.0
            .fetch_and(!Self::OPEN, core::sync::atomic::Ordering::AcqRel)
            & Self::COUNT
    }

    /// Workers inside now (Acquire: their writes are visible once it reads 0).
    pub fn inside(&self) -> u32 {
        self.0.load(core::sync::atomic::Ordering::Acquire) & Self::COUNT
    }

    /// The word itself, for a caller that sleeps on it (wasm's `memory.atomic.wait32`).
    pub fn word(&self) -> &core::sync::atomic::AtomicU32 {
        &self.0
    }
}

#[cfg(test)]
mod gate_tests {
    use super::JobGate;

    #[test]
    fn a_closed_job_takes_nobody_and_the_last_out_is_told() {
        let g = JobGate::new();
        assert!(!g.try_join(), "no job yet");
        g.open();
        assert!(g.try_join() && g.try_join());
        assert_eq!(g.inside(), 2);
        assert!(!g.leave(), "the job is still open");
        assert_eq!(g.close(), 1);
        assert!(!g.try_join(), "closed");
        assert!(g.leave(), "the last one out of a closed job");
        assert_eq!(g.inside(), 0);
        g.open();
        assert_eq!(g.close(), 0);
    }
}
