//! Q4_K: 4-bit quants, 6-bit scale and min per 32 elements, f16 super-scales.

use bytemuck::{Pod, Zeroable};

use super::{
    affine_params, inv, nearest_int, pack_scale_min_k4, scale_min_k4, Unpacked, GROUPS, QK_K,
};
use crate::quant::legacy::{h, to_h};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4K {
    pub d: [u8; 2],
    pub dmin: [u8; 2],
    pub scales: [u8; 12],
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(core::mem::size_of::<BlockQ4K>() == 144);

/// Element `e = 64j + k`: low nibble of `qs[32j + k]` for k < 32, else the high nibble of
/// `qs[32j + k - 32]`; scale/min pair `e / 32`.
pub fn unpack(b: &BlockQ4K) -> Unpacked {
    let mut q = [0i8; QK_K];
    for (e, q) in q.iter_mut().enumerate() {
        let (j, k) = (e / 64, e % 64);
        *q = if k < 32 {
            b.qs[32 * j + k] & 0x0F
        } else {
            b.qs[32 * j + k - 32] >> 4
        } as i8;
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

/// Expands the eight 32-element (scale, min) pairs to the 16-element groups.
pub(super) fn sub32_scales(s: &[u8; 12]) -> ([i32; GROUPS], [i32; GROUPS]) {
    let mut scale = [0i32; GROUPS];
    let mut min = [0i32; GROUPS];
    for g in 0..GROUPS {
        let (sc, m) = scale_min_k4(g / 2, s);
        scale[g] = sc as i32;
        min[g] = m as i32;
    }
    (scale, min)
}

/// Chooses 6-bit scales and mins per 32 elements for quants in `[0, nmax]`; returns the
/// packed scales, the f16 super-scales and the integer quants.
pub(super) fn quantize_sub32(x: &[f32], nmax: f32) -> ([u8; 12], [u8; 2], [u8; 2], [u8; QK_K]) {
    let params: [(f32, f32); 8] =
        core::array::from_fn(|s| affine_params(&x[s * 32..(s + 1) * 32], nmax));
    let max_scale = params.iter().fold(0.0f32, |m, p| m.max(p.0));
    let max_min = params.iter().fold(0.0f32, |m, p| m.max(p.1));
    let (dh, dminh) = (to_h(max_scale / 63.0), to_h(max_min / 63.0));
    let (d, dmin) = (h(dh), h(dminh));
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    let mut q = [0u8; QK_K];
    for s in 0..8 {
        sc[s] = nearest_int(params[s].0 * inv(d)).clamp(0, 63) as u8;
        mn[s] = nearest_int(params[s].1 * inv(dmin)).clamp(0, 63) as u8;
        let (dl, ml) = (d * sc[s] as f32, dmin * mn[s] as f32);
        for l in 0..32 {
            q[s * 32 + l] = nearest_int((x[s * 32 + l] + ml) * inv(dl)).clamp(0, nmax as i32) as u8;
        }
    }
    (pack_scale_min_k4(&sc, &mn), dh, dminh, q)
}

pub fn quantize(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src
        .chunks_exact(QK_K)
        .zip(bytemuck::cast_slice_mut::<u8, BlockQ4K>(dst))
    {
        let (scales, d, dmin, q) = quantize_sub32(x, 15.0);
        b.scales = scales;
        b.d = d;
        b.dmin = dmin;
        for j in 0..4 {
            for k in 0..32 {
                b.qs[32 * j + k] = q[64 * j + k] | (q[64 * j + 32 + k] << 4);
            }
        }
    }
}
