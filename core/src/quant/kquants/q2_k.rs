//! Q2_K: 2-bit quants, 4-bit scale and min per 16 elements, f16 super-scales.

use bytemuck::{Pod, Zeroable};

use super::{affine_params, inv, nearest_int, Unpacked, GROUPS, QK_K};
use crate::quant::legacy::{h, to_h};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ2K {
    /// low nibble: scale, high nibble: min
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: [u8; 2],
    pub dmin: [u8; 2],
}

const _: () = assert!(core::mem::size_of::<BlockQ2K>() == 84);

/// Element `e = 128n + 32j + k` is bits `2j..2j+2` of `qs[32n + k]`.
pub fn unpack(b: &BlockQ2K) -> Unpacked {
    let mut q = [0i8; QK_K];
    for (e, q) in q.iter_mut().enumerate() {
        let (n, j, k) = (e / 128, (e % 128) / 32, e % 32);
        *q = ((b.qs[32 * n + k] >> (2 * j)) & 3) as i8;
    }
    let mut scale = [0i32; GROUPS];
    let mut min = [0i32; GROUPS];
    for g in 0..GROUPS {
        scale[g] = (b.scales[g] & 0x0F) as i32;
        min[g] = (b.scales[g] >> 4) as i32;
    }
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
        .zip(bytemuck::cast_slice_mut::<u8, BlockQ2K>(dst))
    {
        let params: [(f32, f32); GROUPS] =
            core::array::from_fn(|g| affine_params(&x[g * 16..(g + 1) * 16], 3.0));
        let max_scale = params.iter().fold(0.0f32, |m, p| m.max(p.0));
        let max_min = params.iter().fold(0.0f32, |m, p| m.max(p.1));
        b.d = to_h(max_scale / 15.0);
        b.dmin = to_h(max_min / 15.0);
        let (d, dmin) = (h(b.d), h(b.dmin));
        let mut qs = [0u8; QK_K];
        for g in 0..GROUPS {
            let sc = nearest_int(params[g].0 * inv(d)).clamp(0, 15);
            let mn = nearest_int(params[g].1 * inv(dmin)).clamp(0, 15);
            b.scales[g] = sc as u8 | ((mn as u8) << 4);
            let (dl, ml) = (d * sc as f32, dmin * mn as f32);
            for l in 0..16 {
                qs[g * 16 + l] = nearest_int((x[g * 16 + l] + ml) * inv(dl)).clamp(0, 3) as u8;
            }
        }
        b.qs = [0; QK_K / 4];
        for (e, &q) in qs.iter().enumerate() {
            let (n, j, k) = (e / 128, (e % 128) / 32, e % 32);
            b.qs[32 * n + k] |= q << (2 * j);
        }
    }
}
