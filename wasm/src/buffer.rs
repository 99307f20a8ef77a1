//! The model file's bytes: one allocation in linear memory, which the JavaScript side fills
//! chunk by chunk as the download (or `Blob`) streams, and which the zero-copy GGUF reader
//! then borrows for the engine's lifetime. There is no other copy of the weights, on either
//! side.
//!
//! The model may come in parts, placed one after the other as they stream ([`ModelBuffer::place`]):
//! the byte ranges of one file, back to back, or the shards of a model split with llama.cpp's
//! `gguf-split` (each a whole GGUF file), each starting at a multiple of [`ALIGN`] so that its
//! tensors are aligned as in a file of its own. Which of the two is decided before the
//! second part is placed: the probe of the first part's header finds the split keys
//! ([`ModelBuffer::set_shards`]), or the parts are byte ranges. The allocation keeps room for that
//! alignment padding (less than [`ALIGN`] bytes a part).

use std::alloc::{alloc_zeroed, dealloc, Layout as AllocLayout};

use crate::errors::{Failure, Result};

/// Alignment of the allocation and of each shard in it: GGUF's default tensor alignment is
/// 32; 64 keeps every row a cache-line multiple when the file's alignment is.
pub const ALIGN: usize = 64;

/// How the parts of a model lie in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Not known yet (before the second part is placed).
    Undecided,
    /// One file, cut into byte ranges (or a single part): back to back.
    Ranges,
    /// The shards of a split model: each a GGUF file, at a multiple of [`ALIGN`].
    Shards,
}

pub struct ModelBuffer {
    ptr: *mut u8,
    len: usize,
    /// The sizes of the parts, and where the ones placed so far start.
    sizes: Vec<usize>,
    offsets: Vec<usize>,
    layout: Layout,
}

impl ModelBuffer {
    /// Allocates `len` zeroed bytes, or fails with `too_large` when linear memory cannot grow
    /// that far.
    pub fn new(len: usize) -> Result<ModelBuffer> {
        Self::with_parts(&[len])
    }

    /// A buffer for a model in parts of these sizes (room for each shard's alignment
    /// included).
    pub fn with_parts(sizes: &[usize]) -> Result<ModelBuffer> {
        if sizes.is_empty() {
            return Err(Failure::new("invalid_argument", "a model of no parts"));
        }
        let total = sizes
            .iter()
            .try_fold(0usize, |a, &s| a.checked_add(s))
            .and_then(|t| t.checked_add((sizes.len() - 1) * ALIGN))
            .ok_or_else(|| {
                let sum = sizes.iter().map(|&s| s as u64).sum();
                too_large(sum, "the size overflows the address space")
            })?;
        let mut b = Self::alloc(total)?;
        b.sizes = sizes.to_vec();
        b.layout = if sizes.len() == 1 {
            Layout::Ranges
        } else {
            Layout::Undecided
        };
        Ok(b)
    }

    fn alloc(len: usize) -> Result<ModelBuffer> {
        let layout = AllocLayout::from_size_align(len.max(1), ALIGN)
            .map_err(|_| too_large(len as u64, "the size overflows the address space"))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(too_large(
                len as u64,
                "linear memory could not grow that far",
            ));
        }
        Ok(ModelBuffer {
            ptr,
            len,
            sizes: Vec::new(),
            offsets: Vec::new(),
            layout: Layout::Ranges,
        })
    }

    /// Where part `i` goes, the parts being placed in order (the first at 0; a byte range
    /// right after the previous part, a shard at the next multiple of [`ALIGN`]). Placing the
    /// second part before the layout is known makes the parts byte ranges.
    pub fn place(&mut self, i: usize) -> Result<usize> {
        if i != self.offsets.len() || i >= self.sizes.len() {
            return Err(Failure::new(
                "invalid_argument",
                format!(
                    "part {} placed after {} of {}",
                    i + 1,
                    self.offsets.len(),
                    self.sizes.len()
                ),
            ));
        }
        if i > 0 && self.layout == Layout::Undecided {
            self.layout = Layout::Ranges;
        }
        let at = match self.offsets.last() {
            None => 0,
            Some(&o) => {
                let end = o + self.sizes[i - 1];
                match self.layout {
                    Layout::Shards => end.next_multiple_of(ALIGN),
                    _ => end,
                }
            }
        };
        self.offsets.push(at);
        Ok(at)
    }

    /// The first part's header says it is the first shard of a split model: the parts are
    /// shards (an error once the parts were placed as byte ranges).
    pub fn set_shards(&mut self) -> Result<()> {
        match self.layout {
            Layout::Undecided | Layout::Shards => {
                self.layout = Layout::Shards;
                Ok(())
            }
            Layout::Ranges => Err(Failure::new(
                "invalid_argument",
                "the first part is a shard of a split model (gguf-split), but the parts were \
                 taken as byte ranges of one file",
            )),
        }
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The parts' sizes.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// The model's bytes: every part's.
    pub fn file_size(&self) -> usize {
        self.sizes.iter().sum()
    }

    /// The files as `(offset, length)` in the buffer: the whole file (byte ranges joined, or
    /// the parts not placed yet taken as ranges), or each shard. Shards not placed yet are
    /// where they will go.
    pub fn files(&self) -> Vec<(usize, usize)> {
        if self.layout != Layout::Shards {
            return vec![(0, self.file_size())];
        }
        let mut at = 0;
        self.sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                let o = self.offsets.get(i).copied().unwrap_or(at);
                at = (o + len).next_multiple_of(ALIGN);
                (o, len)
            })
            .collect()
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes (the ones not written yet are zero).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is a live, initialized (zeroed) allocation of `len` bytes, written
        // only through `ptr` by the JavaScript side between calls, never while borrowed.
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes for the rest of the program: the buffer is never freed (a model's
    /// `'static` borrows point into it), until [`Self::free_leaked`].
    pub fn leak(self) -> &'static [u8] {
        let me = core::mem::ManuallyDrop::new(self);
        // SAFETY: as in `bytes`; ManuallyDrop keeps the allocation alive.
        unsafe { core::slice::from_raw_parts(me.ptr, me.len) }
    }

    /// Frees a buffer returned by [`Self::leak`].
    ///
    /// # Safety
    /// `bytes` came from `leak`, and nothing borrows it any more.
    pub unsafe fn free_leaked(bytes: &'static [u8]) {
        drop(ModelBuffer {
            ptr: bytes.as_ptr() as *mut u8,
            len: bytes.len(),
            sizes: Vec::new(),
            offsets: Vec::new(),
            layout: Layout::Ranges,
        });
    }
}

impl Drop for ModelBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe {
            dealloc(
                self.ptr,
                AllocLayout::from_size_align_unchecked(self.len.max(1), ALIGN),
            )
        }
    }
}

/// `too_large`: how much was asked for and what wasm32 allows.
pub fn too_large(bytes: u64, why: &str) -> Failure {
    Failure::new(
        "too_large",
        format!(
            "the model needs {} of memory and {why}; wasm32 allows 4 GB at most (pick a smaller \
             quantization or model, or a smaller nCtx)",
            gb(bytes)
        ),
    )
}

/// `5.1 GB`
pub fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_is_aligned_zeroed_and_freed() {
        let b = ModelBuffer::new(1000).unwrap();
        assert_eq!(b.ptr() as usize % ALIGN, 0);
        assert!(b.bytes().iter().all(|&x| x == 0));
        let s = b.leak();
        assert_eq!(s.len(), 1000);
        // SAFETY: nothing else borrows it
        unsafe { ModelBuffer::free_leaked(s) };
    }

    #[test]
    fn parts_are_byte_ranges_or_aligned_shards() {
        // byte ranges: back to back, whatever their sizes
        let mut b = ModelBuffer::with_parts(&[100, 30, 7]).unwrap();
        assert_eq!(b.len(), 137 + 2 * ALIGN);
        assert_eq!(b.layout(), Layout::Undecided);
        assert_eq!(b.place(0).unwrap(), 0);
        assert_eq!(b.place(1).unwrap(), 100);
        assert_eq!(b.layout(), Layout::Ranges);
        assert!(b.set_shards().is_err());
        assert_eq!(b.place(2).unwrap(), 130);
        assert_eq!(b.files(), [(0, 137)]);
        assert!(b.place(3).is_err());
        // shards: each at a multiple of ALIGN
        let mut b = ModelBuffer::with_parts(&[100, 30, 7]).unwrap();
        assert_eq!(b.place(0).unwrap(), 0);
        b.set_shards().unwrap();
        assert_eq!(b.files(), [(0, 100), (128, 30), (192, 7)]);
        assert_eq!(b.place(1).unwrap(), 128);
        assert_eq!(b.place(2).unwrap(), 192);
        assert_eq!(b.files(), [(0, 100), (128, 30), (192, 7)]);
        assert!(192 + 7 <= b.len());
        assert_eq!(b.file_size(), 137);
        // out of order, or no parts
        let mut b = ModelBuffer::with_parts(&[10, 10]).unwrap();
        assert!(b.place(1).is_err());
        assert!(ModelBuffer::with_parts(&[]).is_err());
        assert_eq!(ModelBuffer::new(5).unwrap().layout(), Layout::Ranges);
    }

    #[test]
    fn impossible_sizes_are_too_large() {
        assert_eq!(
            ModelBuffer::new(usize::MAX - 10).err().unwrap().code,
            "too_large"
        );
    }
}
