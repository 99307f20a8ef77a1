//! The firmware's heap: embedded-alloc's linked-list allocator behind a counting wrapper, so
//! the firmware can report its high-water mark and prove that generation allocates nothing
//! per token.

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use embedded_alloc::LlffHeap;

/// A global allocator that counts: allocations (a `realloc` counts as one), bytes in use,
/// and the high-water mark of both the bytes asked for and the bytes the allocator holds
/// (its own rounding included).
pub struct CountingHeap {
    heap: LlffHeap,
    size: AtomicUsize,
    allocations: AtomicUsize,
    in_use: AtomicUsize,
    high_water: AtomicUsize,
    held_high_water: AtomicUsize,
}

/// A snapshot of the heap's counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeapStats {
    /// Bytes given to the allocator by `init`.
    pub size: usize,
    /// Successful allocations so far (`alloc`, `alloc_zeroed`, `realloc`).
    pub allocations: usize,
    /// Bytes asked for and not freed yet.
    pub in_use: usize,
    /// The most bytes asked for and not freed at any moment.
    pub high_water: usize,
    /// The most bytes the allocator held at any moment (its block rounding included).
    pub held_high_water: usize,
}

impl CountingHeap {
    pub const fn empty() -> CountingHeap {
        CountingHeap {
            heap: LlffHeap::empty(),
            size: AtomicUsize::new(0),
            allocations: AtomicUsize::new(0),
            in_use: AtomicUsize::new(0),
            high_water: AtomicUsize::new(0),
            held_high_water: AtomicUsize::new(0),
        }
    }

    /// Gives the allocator `size` bytes at `start`.
    ///
    /// # Safety
    /// Call once, before the first allocation; the memory must be valid, unused by anything
    /// else and live for the rest of the program.
    pub unsafe fn init(&self, start: usize, size: usize) {
        // SAFETY: the caller's contract is the allocator's.
        unsafe { self.heap.init(start, size) };
        self.size.store(size, Relaxed);
    }

    pub fn stats(&self) -> HeapStats {
        HeapStats {
            size: self.size.load(Relaxed),
            allocations: self.allocations.load(Relaxed),
            in_use: self.in_use.load(Relaxed),
            high_water: self.high_water.load(Relaxed),
            held_high_water: self.held_high_water.load(Relaxed),
        }
    }

    fn counted(&self, p: *mut u8, size: usize) -> *mut u8 {
        if !p.is_null() {
            self.allocations.fetch_add(1, Relaxed);
            let now = self.in_use.fetch_add(size, Relaxed) + size;
            self.high_water.fetch_max(now, Relaxed);
            self.held_high_water.fetch_max(self.heap.used(), Relaxed);
        }
        p
    }
}

impl Default for CountingHeap {
    fn default() -> Self {
        Self::empty()
    }
}

// SAFETY: every call is forwarded to `LlffHeap` (a correct allocator behind a critical
// section); the wrapper only updates counters.
unsafe impl GlobalAlloc for CountingHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { self.heap.alloc(layout) };
        self.counted(p, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { self.heap.alloc_zeroed(layout) };
        self.counted(p, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.in_use.fetch_sub(layout.size(), Relaxed);
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract).
        unsafe { self.heap.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's pointer and layouts.
        let p = unsafe { self.heap.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            self.in_use.fetch_sub(layout.size(), Relaxed);
        }
        self.counted(p, new_size)
    }
}
