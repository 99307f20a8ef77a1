//! Q3_K: 3-bit signed quants (2 low bits + a high-bit mask), 6-bit signed scales per 16
//! elements, f16 super-scale.

use bytemuck::{Pod, Zeroable};

use super::{inv, nearest_int, symmetric_scale, Unpacked, GROUPS, QK_K};
use crate::quant::legacy::{h, signed_absmax, to_h};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; 12],
    pub d: [u8; 2],
}

const _: () = assert!(core::mem::size_of::<BlockQ3K>() == 110);

/// The 16 six-bit scales (stored +32): low 4 bits in bytes 0..8 (two per byte), high 2 bits
/// in bytes 8..12.
fn scale6(s: &[u8; 12], i: usize) -> i32 {
    let low = if i < 8 { s[i] & 0x0F } else { s[i - 8] >> 4 };
    let high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    (low | (high << 4)) as i32
}

fn pack_scale6(v: &[u8; GROUPS]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for (i, &x) in v.iter().enumerate() {
        let low = x & 0x0F;
        if i < 8 {
            s[i] |= low;
        } else {
            s[i - 8] |= low << 4;
        }
        s[8 + i % 4] |= ((x >> 4) & 3) << (2 * (i / 4));
    }
    s
}

/// Element `e = 128n + 32j + k`: low bits `2j..2j+2` of `qs[32n + k]`, high bit `4n + j`
/// of `hmask[k]` (a clear bit subtracts 4).
pub fn unpack(b: &BlockQ3K) -> Unpacked {
    let mut q = [0i8; QK_K];
    for (e, q) in q.iter_mut().enumerate() {
        let (n, j, k) = (e / 128, (e % 128) / 32, e % 32);
        let low = ((b.qs[32 * n + k] >> (2 * j)) & 3) as i8;
        let high = b.hmask[k] & (1 << (4 * n + j)) != 0;
        *q = low - if high { 0 } else { 4 };
    }
    let scale = core::array::from_fn(|g| scale6(&b.scales, g) - 32);
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
        .zip(bytemuck::cast_slice_mut::<u8, BlockQ3K>(dst))
    {
        let scales: [f32; GROUPS] =
            core::array::from_fn(|g| symmetric_scale(&x[g * 16..(g + 1) * 16], 4.0));
        let max = signed_absmax(&scales);
        let iscale = if max != 0.0 { -32.0 / max } else { 0.0 };
        b.d = to_h(inv(iscale));
        let d = h(b.d);
        let mut stored = [0u8; GROUPS];
        let mut qs = [0u8; QK_K];
        for g in 0..GROUPS {
            let sc = nearest_int(iscale * scales[g]).clamp(-32, 31);
            stored[g] = (sc + 32) as u8;
            let dl = d * sc as f32;
            for l in 0..16 {
                qs[g * 16 + l] = (nearest_int(x[g * 16 + l] * inv(dl)).clamp(-4, 3) + 4) as u8;
            }
        }
        b.scales = pack_scale6(&stored);
        b.qs = [0; QK_K / 4];
        b.hmask = [0; QK_K / 8];
        for (e, &l) in qs.iter().enumerate() {
            let (n, j, k) = (e / 128, (e % 128) / 32, e % 32);
            b.qs[32 * n + k] |= (l & 3) << (2 * j);
            if l > 3 {
                b.hmask[k] |= 1 << (4 * n + j);
            }
        }
    }
}
