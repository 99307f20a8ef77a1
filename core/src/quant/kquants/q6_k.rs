//! Q6_K: 6-bit signed quants (4 low bits + 2 high bits), int8 scale per 16 elements.

use bytemuck::{Pod, Zeroable};

use super::{inv, nearest_int, symmetric_scale, Unpacked, GROUPS, QK_K};
use crate::quant::legacy::{h, signed_absmax, to_h};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: [u8; 2],
}

const _: () = assert!(core::mem::size_of::<BlockQ6K>() == 210);

/// Where element `e` lives: (index into ql, nibble shift, index into qh, 2-bit shift).
#[inline]
fn place(e: usize) -> (usize, u32, usize, u32) {
    let (n, r) = (e / 128, e % 128);
    let (quarter, l) = (r / 32, r % 32);
    // quarters: 0 -> ql[l] low, 1 -> ql[l+32] low, 2 -> ql[l] high, 3 -> ql[l+32] high
    let ql = 64 * n + l + if quarter % 2 == 1 { 32 } else { 0 };
    let nib = if quarter >= 2 { 4 } else { 0 };
    (ql, nib, 32 * n + l, 2 * quarter as u32)
}

pub fn unpack(b: &BlockQ6K) -> Unpacked {
    let mut q = [0i8; QK_K];
    for (e, q) in q.iter_mut().enumerate() {
        let (ql, nib, qh, hs) = place(e);
        let v = ((b.ql[ql] >> nib) & 0x0F) | (((b.qh[qh] >> hs) & 3) << 4);
        *q = v as i8 - 32;
    }
    let scale = core::array::from_fn(|g| b.scales[g] as i32);
    Unpacked {
        q,
        scale,
        min: [0; GROUPS],
        d: h(b.d),
        dmin: 0.0,
    }
}

pub fn quantize(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src
        .chunks_exact(QK_K)
        .zip(bytemuck::cast_slice_mut::<u8, BlockQ6K>(dst))
    {
        let scales: [f32; GROUPS] =
            core::array::from_fn(|g| symmetric_scale(&x[g * 16..(g + 1) * 16], 32.0));
        let max = signed_absmax(&scales);
        let iscale = if max != 0.0 { -128.0 / max } else { 0.0 };
        b.d = to_h(inv(iscale));
        let d = h(b.d);
        b.ql = [0; QK_K / 2];
        b.qh = [0; QK_K / 4];
        for (g, &group_scale) in scales.iter().enumerate() {
            let sc = nearest_int(iscale * group_scale).clamp(-128, 127);
            b.scales[g] = sc as i8;
            let dl = d * sc as f32;
            for l in 0..16 {
                let e = g * 16 + l;
                let v = (nearest_int(x[e] * inv(dl)).clamp(-32, 31) + 32) as u8;
                let (ql, nib, qh, hs) = place(e);
                b.ql[ql] |= (v & 0x0F) << nib;
                b.qh[qh] |= (v >> 4) << hs;
            }
        }
    }
}
