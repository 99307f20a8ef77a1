//! Q8_K: the activation format paired with the k-quants (f32 scale, 256 int8, 16 group sums).

use bytemuck::{Pod, Zeroable};

use super::{nearest_int, GROUPS, QK_K};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ8K {
    pub d: [u8; 4],
    pub qs: [i8; QK_K],
    /// Sums of each group of 16 quants (i16 little-endian).
    pub bsums: [u8; 2 * GROUPS],
}

const _: () = assert!(core::mem::size_of::<BlockQ8K>() == 292);

impl BlockQ8K {
    #[inline]
    pub fn d(&self) -> f32 {
        f32::from_le_bytes(self.d)
    }

    #[inline]
    pub fn bsums(&self) -> [i16; GROUPS] {
        let mut s = [0i16; GROUPS];
        for (g, s) in s.iter_mut().enumerate() {
            *s = i16::from_le_bytes([self.bsums[2 * g], self.bsums[2 * g + 1]]);
        }
        s
    }
}

pub fn blocks(bytes: &[u8]) -> &[BlockQ8K] {
    bytemuck::cast_slice(bytes)
}

/// ggml's quantize_row_q8_K_ref: scale from the signed value of largest magnitude,
/// `iscale = -127/max`, round to nearest-even, clamp at 127.
pub fn quantize(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src
        .chunks_exact(QK_K)
        .zip(bytemuck::cast_slice_mut::<u8, BlockQ8K>(dst))
    {
        let max = crate::quant::legacy::signed_absmax(x);
        if max == 0.0 {
            *b = BlockQ8K::zeroed();
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for g in 0..GROUPS {
            let s: i32 = b.qs[g * 16..(g + 1) * 16].iter().map(|&q| q as i32).sum();
            b.bsums[2 * g..2 * g + 2].copy_from_slice(&(s as i16).to_le_bytes());
        }
        b.d = (1.0 / iscale).to_le_bytes();
    }
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks(src).iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = b.d();
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = d * q as f32;
        }
    }
}
