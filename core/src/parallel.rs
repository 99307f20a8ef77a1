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

/// A mutable slice that parallel workers write in disjoint pieces.
pub struct DisjointSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: core::marker::PhantomData<&'a mut [T]>,
}

// SAFETY: workers only ever obtain non-overlapping sub-slices (see `chunk`), so sharing the
// pointer between threads is as safe as handing each its own `&mut` piece.
unsafe impl<T: Send> Sync for DisjointSlice<'_, T> {}
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
