//! Q5_K: 5-bit quants (4 low bits + a high-bit plane), 6-bit scale and min per 32 elements.

use bytemuck::{Pod, Zeroable};

use super::q4_k::{quantize_sub32, sub32_scales};
use super::{Unpacked, QK_K};
use crate::quant::legacy::h;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5K {
    pub d: [u8; 2],
    pub dmin: [u8; 2],
    pub scales: [u8; 12],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(core::mem::size_of::<BlockQ5K>() == 176);

/// As Q4_K, plus bit `2j` (k < 32) or `2j + 1` (k >= 32) of `qh[k % 32]` worth 16.
pub fn unpack(b: &BlockQ5K) -> Unpacked {
    let mut q = [0i8; QK_K];
    for (e, q) in q.iter_mut().enumerate() {
        let (j, k) = (e / 64, e % 64);
        let (low, bit) = if k < 32 {
            (b.qs[32 * j + k] & 0x0F, 2 * j)
        } else {
            (b.qs[32 * j + k - 32] >> 4, 2 * j + 1)
        };
        let high = (b.qh[k % 32] >> bit) & 1;
        *q = (low | (high << 4)) as i8;
    }
    let (scale, min) = sub32_scales(&b.scales);
    Unpacked {
        q,
        scale,
        min,
        d: h(b.d),
        dmin: h(b.dmin),
    }
}

pub fn quantize(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src
        .chunks_exact(QK_K)
        .zip(bytemuck::cast_slice_mut::<u8, BlockQ5K>(dst))
    {
        let (scales, d, dmin, q) = quantize_sub32(x, 31.0);
        b.scales = scales;
        b.d = d;
        b.dmin = dmin;
        b.qh = [0; QK_K / 8];
        for j in 0..4 {
            for k in 0..32 {
                let (lo, hi) = (q[64 * j + k], q[64 * j + 32 + k]);
                b.qs[32 * j + k] = (lo & 0x0F) | ((hi & 0x0F) << 4);
                b.qh[k] |= ((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1));
            }
        }
    }
}
