//! IQ4_NL · Q8_0 and IQ4_XS · Q8_K on AVX2 and AVX-512 VNNI.
//!
//! A 32-value block's codes are split into nibbles (low nibbles are elements 0..16, high ones
//! 16..32) and looked up in the 16-entry table `kvalues_iq4nl` with one byte shuffle
//! (`vpshufb`, the table in each 128-bit lane), which gives the weights as int8 in element
//! order; from there it is the Q8_0 product path: |x| · (y with x's sign) through
//! `vpmaddubsw` + `vpmaddwd` on AVX2 (a pair of products is at most 2 · 127 · 127, inside
//! i16), `vpdpbusd` on AVX-512, either way 8 exact i32 lanes of four consecutive products per
//! block.
//!
//! Rounding:
//! - IQ4_NL: the kernels of [`super::table4`] (shared with MXFP4) over `kvalues_iq4nl` and
//!   f16 scales: llama.cpp's AVX2 `ggml_vec_dot_iq4_nl_q8_0` bits on both ISAs, pinned by
//!   `kernels::tests::iq4`.
//! - IQ4_XS: a super-block's integer sum `Σ (ls - 32) · Σ w · q8` is exact in the lanes and
//!   rounded once as the scalar oracle rounds it (`quant::iq4::xs`): the oracle's bits.

use core::arch::x86_64::*;

use super::avx2::{f16, hsum_epi32, ld128, ld256, nibbles_32};
use super::avx512::{dot_i8, join};
use super::table4::{self, tiles};
use crate::quant::iq4::nl::BlockIq4Nl;
use crate::quant::iq4::xs::BlockIq4Xs;
use crate::quant::iq4::KVALUES;
use crate::quant::kquants::q8_k;
use crate::quant::legacy::blocks;

/// The table of code values in each 128-bit lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn table_256() -> __m256i {
    // SAFETY: KVALUES is 16 bytes.
    _mm256_broadcastsi128_si256(unsafe { ld128(KVALUES.as_ptr()) })
}

/// A 32-value block's weights as int8 in element order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn codes_256(qs: &[u8; 16], table: __m256i) -> __m256i {
    _mm256_shuffle_epi8(table, nibbles_32(qs))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_iq4_nl_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    table4::dot_avx2::<BlockIq4Nl>(w, a)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_iq4_nl_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    table4::dot_avx512::<BlockIq4Nl>(w, a)
}

/// `d · d8 · isum`, added as the scalar oracle adds it (`quant::iq4::xs::vec_dot_iq4_xs_q8_k`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn xs_block(sum: f32, x: &BlockIq4Xs, d8: f32, isum: i32) -> f32 {
    sum + f16(x.d) * d8 * isum as f32
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_iq4_xs_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let table = table_256();
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockIq4Xs>(w).iter().zip(q8_k::blocks(a)) {
        let ls = x.scales();
        let mut sumi = _mm256_setzero_si256();
        for (ib, &l) in ls.iter().enumerate() {
            let q = codes_256(x.block_qs(ib), table);
            // SAFETY: ib < 8: y.qs[32ib..32ib+32] is in bounds.
            let qy = unsafe { ld256(y.qs.as_ptr().add(32 * ib)) };
            let p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(qy, q));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16(l as i16)));
        }
        sum = xs_block(sum, x, y.d(), hsum_epi32(sumi));
    }
    sum
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_iq4_xs_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: KVALUES is 16 bytes.
    let table = _mm512_broadcast_i32x4(unsafe { ld128(KVALUES.as_ptr()) });
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockIq4Xs>(w).iter().zip(q8_k::blocks(a)) {
        let ls = x.scales();
        let mut sumi = _mm512_setzero_si512();
        for j in 0..4 {
            let (b0, b1) = (2 * j, 2 * j + 1);
            let nib = join(nibbles_32(x.block_qs(b0)), nibbles_32(x.block_qs(b1)));
            let q = _mm512_shuffle_epi8(table, nib);
            // SAFETY: j < 4: y.qs[64j..64j+64] is in bounds.
            let qy = unsafe {
                join(
                    ld256(y.qs.as_ptr().add(64 * j)),
                    ld256(y.qs.as_ptr().add(64 * j + 32)),
                )
            };
            let l = join(_mm256_set1_epi32(ls[b0]), _mm256_set1_epi32(ls[b1]));
            sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(dot_i8(q, qy), l));
        }
        sum = xs_block(sum, x, y.d(), _mm512_reduce_add_epi32(sumi));
    }
    sum
}

/// Several IQ4_NL rows against several tokens (`crate::quant::VecDotRowsFn`): `out[r · n + t]`
/// is [`dot_iq4_nl_avx2`] of row `r` and token `t`, bit for bit, each weight block taken apart
/// once for four tokens (prompt processing; these weights keep ggml's row layout).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn rows_iq4_nl_avx2(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]) {
    table4::rows_avx2::<BlockIq4Nl>(cols, w, a, n, out)
}

/// One IQ4_XS row against `T` tokens, each value [`dot_iq4_xs_avx2`]'s (and the oracle's)
/// bit for bit: a super-block's codes are looked up once for all `T` tokens.
///
/// Every `ys[t]` must hold at least `xs.len()` blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn xs_tokens<const T: usize>(xs: &[BlockIq4Xs], ys: [&[q8_k::BlockQ8K]; T], out: &mut [f32]) {
    let table = table_256();
    let mut sum = [0.0f32; T];
    for (i, x) in xs.iter().enumerate() {
        let ls = x.scales();
        let q: [__m256i; 8] = core::array::from_fn(|ib| codes_256(x.block_qs(ib), table));
        let aq: [__m256i; 8] = core::array::from_fn(|ib| _mm256_sign_epi8(q[ib], q[ib]));
        let l: [__m256i; 8] = core::array::from_fn(|ib| _mm256_set1_epi16(ls[ib] as i16));
        for (s, token) in sum.iter_mut().zip(&ys) {
            let y = &token[i];
            let mut sumi = _mm256_setzero_si256();
            for ib in 0..8 {
                // SAFETY: ib < 8: y.qs[32ib..32ib+32] is in bounds.
                let qy = unsafe { ld256(y.qs.as_ptr().add(32 * ib)) };
                let p16 = _mm256_maddubs_epi16(aq[ib], _mm256_sign_epi8(qy, q[ib]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, l[ib]));
            }
            *s = xs_block(*s, x, y.d(), hsum_epi32(sumi));
        }
    }
    out[..T].copy_from_slice(&sum);
}

/// Several IQ4_XS rows against several tokens (`crate::quant::VecDotRowsFn`), as
/// [`rows_iq4_nl_avx2`]: each value is [`dot_iq4_xs_avx2`]'s, the scalar oracle's bits.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn rows_iq4_xs_avx2(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]) {
    let nb = cols / 256;
    let (rb, ab) = (nb * 136, nb * 292);
    if n == 0 || nb == 0 {
        out.fill(0.0);
        return;
    }
    if n == 1 {
        for (x, o) in w.chunks_exact(rb).zip(out.iter_mut()) {
            *o = dot_iq4_xs_avx2(cols, x, &a[..ab]);
        }
        return;
    }
    for (x, o) in w.chunks_exact(rb).zip(out.chunks_exact_mut(n)) {
        tiles!(
            xs_tokens[],
            blocks::<BlockIq4Xs>(x),
            a,
            ab,
            n,
            o,
            q8_k::BlockQ8K
        );
    }
}
