//! IQ4_NL · Q8_0 and IQ4_XS · Q8_K on NEON (with an SDOT build of each): the codes through
//! the table `kvalues_iq4nl` (`TBL`) into int8, then [`super::dot32`]'s exact integer sums.
//! Both round as the scalar oracle (`quant::iq4`): IQ4_NL adds `d · isum` block after block,
//! IQ4_XS reduces a super-block to one exact integer `Σ (ls - 32) · isum` and adds
//! `d · d8 · isum` — the oracle's bits.

use core::arch::aarch64::*;

use super::{blocks, dot32, fp16, hi4, ld_i8, ld_u8, lo4, I8Dot, Mull, Sdot};
use crate::quant::iq4::nl::BlockIq4Nl;
use crate::quant::iq4::xs::BlockIq4Xs;
use crate::quant::iq4::KVALUES;
use crate::quant::kquants::q8_k::BlockQ8K;
use crate::quant::legacy::BlockQ8_0;

/// The 32 values of a block's 16 code bytes, as int8 in element order.
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn codes(qs: &[u8; 16], table: int8x16_t) -> [int8x16_t; 2] {
    // SAFETY: qs is 16 bytes.
    let v = unsafe { ld_u8(&qs[..]) };
    let (lo, hi) = (vreinterpretq_u8_s8(lo4(v)), vreinterpretq_u8_s8(hi4(v)));
    [vqtbl1q_s8(table, lo), vqtbl1q_s8(table, hi)]
}

/// # Safety
/// The CPU must support NEON and `D`'s instructions.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn iq4_nl<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: KVALUES is 16 bytes.
    let table = unsafe { ld_i8(&KVALUES[..]) };
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockIq4Nl>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        // SAFETY: loads at 0 / 16 of the 32 activations; the caller's features.
        let p = unsafe { dot32::<D>(codes(&x.qs, table), [ld_i8(&y.qs[..]), ld_i8(&y.qs[16..])]) };
        sum += fp16(y.d) * fp16(x.d) * vaddvq_s32(p) as f32;
    }
    sum
}

/// # Safety
/// The CPU must support NEON and `D`'s instructions.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn iq4_xs<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: KVALUES is 16 bytes.
    let table = unsafe { ld_i8(&KVALUES[..]) };
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockIq4Xs>(w).iter().zip(blocks::<BlockQ8K>(a)) {
        let mut acc = vdupq_n_s32(0);
        for (ib, &ls) in x.scales().iter().enumerate() {
            let q8 = &y.qs[32 * ib..32 * ib + 32];
            // SAFETY: loads at 0 / 16 of the block's 32 activations; the caller's features.
            let p =
                unsafe { dot32::<D>(codes(x.block_qs(ib), table), [ld_i8(q8), ld_i8(&q8[16..])]) };
            acc = vmlaq_n_s32(acc, p, ls);
        }
        sum += fp16(x.d) * y.d() * vaddvq_s32(acc) as f32;
    }
    sum
}

/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub(in crate::kernels::aarch64) unsafe fn dot_iq4_nl(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: `Mull` needs only NEON (the caller's contract).
    unsafe { iq4_nl::<Mull>(w, a) }
}

/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub(in crate::kernels::aarch64) unsafe fn dot_iq4_nl_sdot(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: `Sdot` needs dotprod (the caller's contract).
    unsafe { iq4_nl::<Sdot>(w, a) }
}

/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub(in crate::kernels::aarch64) unsafe fn dot_iq4_xs(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: `Mull` needs only NEON (the caller's contract).
    unsafe { iq4_xs::<Mull>(w, a) }
}

/// # Safety
/// The CPU must support NEON and dotprod.
#[target_feature(enable = "neon,dotprod")]
pub(in crate::kernels::aarch64) unsafe fn dot_iq4_xs_sdot(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: `Sdot` needs dotprod (the caller's contract).
    unsafe { iq4_xs::<Sdot>(w, a) }
}
