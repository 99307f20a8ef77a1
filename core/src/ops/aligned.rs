//! `f32` buffers whose start is aligned to a cache line (64 bytes), for the batch activations:
//! the batch kernels store each token's 16 output rows of a pair of groups as one 64-byte
//! vector, which then covers exactly one line instead of straddling two.

use alloc::vec;
use alloc::vec::Vec;
use core::ops::{Deref, DerefMut};

/// One cache line of floats.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

// SAFETY: 16 f32 fill the 64-byte alignment exactly (no padding); any bits are valid.
unsafe impl bytemuck::Zeroable for Line {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Line {}

/// A zeroed run of `len` floats starting on a 64-byte boundary.
#[derive(Clone, Default)]
pub struct AlignedF32 {
    lines: Vec<Line>,
    len: usize,
}

impl AlignedF32 {
    pub fn zeroed(len: usize) -> Self {
        AlignedF32 {
            lines: vec![Line([0.0; 16]); len.div_ceil(16)],
            len,
        }
    }

    /// Bytes [`Self::zeroed`] allocates for `len` floats.
    pub fn bytes_for(len: usize) -> usize {
        len.div_ceil(16) * size_of::<Line>()
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        self.lines.capacity() * size_of::<Line>()
    }
}

impl Deref for AlignedF32 {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &bytemuck::cast_slice::<Line, f32>(&self.lines)[..self.len]
    }
}

impl DerefMut for AlignedF32 {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut bytemuck::cast_slice_mut::<Line, f32>(&mut self.lines)[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::AlignedF32;

    #[test]
    fn starts_on_a_cache_line_and_has_its_length() {
        for len in [0, 1, 15, 16, 17, 1000] {
            let mut a = AlignedF32::zeroed(len);
            assert_eq!(a.len(), len);
            assert_eq!(a.as_ptr() as usize % 64, 0);
            assert!(a.iter().all(|&v| v == 0.0));
            if len > 0 {
                a[len - 1] = 1.0;
                assert_eq!(a[len - 1], 1.0);
            }
        }
    }
}
