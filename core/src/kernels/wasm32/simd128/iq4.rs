//! IQ4_NL · Q8_0 and IQ4_XS · Q8_K on simd128: the codes through the table `kvalues_iq4nl`
//! (`i8x16_swizzle`) into int8, then [`super::dot32`]'s exact integer sums. Both round as the
//! scalar oracle (`quant::iq4`): IQ4_NL adds `d · isum` block after block, IQ4_XS reduces a
//! super-block to one exact integer `Σ (ls - 32) · isum` and adds `d · d8 · isum` — the
//! oracle's bits.

use core::arch::wasm32::*;

use super::{blocks, dot32, hi4, hsum_i32, ld, lo4};
use crate::quant::iq4::nl::BlockIq4Nl;
use crate::quant::iq4::xs::BlockIq4Xs;
use crate::quant::iq4::KVALUES;
use crate::quant::kquants::q8_k::BlockQ8K;
use crate::quant::legacy::{h, BlockQ8_0};

/// The 32 values of a block's 16 code bytes, as int8 in element order.
#[target_feature(enable = "simd128")]
#[inline]
fn codes(qs: &[u8; 16], table: v128) -> [v128; 2] {
    // SAFETY: qs is 16 bytes.
    let v = unsafe { ld(&qs[..]) };
    [i8x16_swizzle(table, lo4(v)), i8x16_swizzle(table, hi4(v))]
}

/// # Safety
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(in crate::kernels::wasm32) unsafe fn dot_iq4_nl(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: KVALUES is 16 bytes.
    let table = unsafe { ld(&KVALUES[..]) };
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockIq4Nl>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        // SAFETY: loads at 0 / 16 of the 32 activations.
        let q8 = unsafe { [ld(&y.qs[..]), ld(&y.qs[16..])] };
        let p = dot32(codes(&x.qs, table), q8);
        sum += h(y.d) * h(x.d) * hsum_i32(p) as f32;
    }
    sum
}

/// # Safety
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(in crate::kernels::wasm32) unsafe fn dot_iq4_xs(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: KVALUES is 16 bytes.
    let table = unsafe { ld(&KVALUES[..]) };
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockIq4Xs>(w).iter().zip(blocks::<BlockQ8K>(a)) {
        let mut acc = i32x4_splat(0);
        for (ib, &ls) in x.scales().iter().enumerate() {
            let q8 = &y.qs[32 * ib..32 * ib + 32];
            // SAFETY: loads at 0 / 16 of the block's 32 activations.
            let q8 = unsafe { [ld(q8), ld(&q8[16..])] };
            let p = dot32(codes(x.block_qs(ib), table), q8);
            acc = i32x4_add(acc, i32x4_mul(p, i32x4_splat(ls)));
        }
        sum += h(x.d) * y.d() * hsum_i32(acc) as f32;
    }
    sum
}
