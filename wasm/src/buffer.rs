//! The model file's bytes: one allocation of the file's size in linear memory, which the
//! JavaScript side fills chunk by chunk as the download (or `Blob`) streams, and which the
//! zero-copy GGUF reader then borrows for the engine's lifetime. There is no other copy of
//! the weights, on either side.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use crate::errors::{Failure, Result};

/// Alignment of the allocation: GGUF's default tensor alignment is 32; 64 keeps every
/// row a cache-line multiple when the file's alignment is.
const ALIGN: usize = 64;

pub struct ModelBuffer {
    ptr: *mut u8,
    len: usize,
}

impl ModelBuffer {
    /// Allocates `len` zeroed bytes, or fails with `too_large` when linear memory cannot grow
    /// that far.
    pub fn new(len: usize) -> Result<ModelBuffer> {
        let layout = Layout::from_size_align(len.max(1), ALIGN)
            .map_err(|_| too_large(len as u64, "the size overflows the address space"))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(too_large(
                len as u64,
                "linear memory could not grow that far",
            ));
        }
        Ok(ModelBuffer { ptr, len })
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
        });
    }
}

impl Drop for ModelBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe {
            dealloc(
                self.ptr,
                Layout::from_size_align_unchecked(self.len.max(1), ALIGN),
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
    fn impossible_sizes_are_too_large() {
        assert_eq!(
            ModelBuffer::new(usize::MAX - 10).err().unwrap().code,
            "too_large"
        );
    }
}
