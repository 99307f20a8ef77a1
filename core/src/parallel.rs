//! How threads enter the core: the frontends implement [`Parallel`] over their own pool.

/// Runs `f(i)` for every `i` in `0..n`, possibly on several threads, and returns when all
/// calls have finished. Implementations must call `f` exactly once per index.
pub trait Parallel: Sync {
    fn for_each(&self, n: usize, f: &(dyn Fn(usize) + Sync));
    /// Number of workers (used to size work chunks).
    fn threads(&self) -> usize {
        1
    }
}

/// Runs everything on the calling thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sequential;

impl Parallel for Sequential {
    fn for_each(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        for i in 0..n {
            f(i);
        }
    }
}
