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
//! - IQ4_NL: llama.cpp's AVX2 `ggml_vec_dot_iq4_nl_q8_0` (which its AVX-512 builds also run),
//!   the scheme of MXFP4's kernels (`super::mxfp4`): blocks `0, 2, 4, …` accumulate with one
//!   FMA each into 8 f32 lanes, blocks `1, 3, 5, …` into another 8, the two are added and
//!   reduced as (hi + lo) → 4 → 2 → 1, and a last odd block is added with one FMA. The
//!   AVX-512 kernel keeps the same two accumulators: both ISAs return the same bits, pinned
//!   by `kernels::tests::iq4`.
//! - IQ4_XS: a super-block's integer sum `Σ (ls - 32) · Σ w · q8` is exact in the lanes and
//!   rounded once as the scalar oracle rounds it (`quant::iq4::xs`): the oracle's bits.

use core::arch::x86_64::*;

use super::avx2::{f16, hsum_epi32, hsum_ps, ld128, ld256, mul_sum_i8, nibbles_32};
use super::avx512::{dot_i8, halves, join};
use crate::quant::iq4::nl::{self, BlockIq4Nl};
use crate::quant::iq4::xs::BlockIq4Xs;
use crate::quant::iq4::KVALUES;
use crate::quant::kquants::q8_k;
use crate::quant::legacy::{blocks, BlockQ8_0};

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

/// The block's float scale, as llama.cpp forms it: the f16 activation scale times the f16
/// weight scale (F16C, exact conversions).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scale(x: &BlockIq4Nl, y: &BlockQ8_0) -> __m256 {
    _mm256_set1_ps(f16(y.d) * f16(x.d))
}

/// The last block of an odd count: llama.cpp's scalar loop after the vector one,
/// `sumf += d * (sumi1 + sumi2)`, contracted to one FMA by its build (as MXFP4's `tail`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tail(sum: f32, x: &BlockIq4Nl, y: &BlockQ8_0) -> f32 {
    let (d, p) = (nl::scale(x, y), nl::isum(x, y) as f32);
    _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(d), _mm_set_ss(p), _mm_set_ss(sum)))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_iq4_nl_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<BlockIq4Nl>(w), blocks::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    let table = table_256();
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 1 < nb {
        let (x0, x1, y0, y1) = (&xs[i], &xs[i + 1], &ys[i], &ys[i + 1]);
        // SAFETY: qs are 32 bytes.
        let (q0, q1) = unsafe { (ld256(y0.qs.as_ptr()), ld256(y1.qs.as_ptr())) };
        let p0 = mul_sum_i8(codes_256(&x0.qs, table), q0);
        let p1 = mul_sum_i8(codes_256(&x1.qs, table), q1);
        acc0 = _mm256_fmadd_ps(scale(x0, y0), p0, acc0);
        acc1 = _mm256_fmadd_ps(scale(x1, y1), p1, acc1);
        i += 2;
    }
    let sum = hsum_ps(_mm256_add_ps(acc0, acc1));
    if i < nb {
        tail(sum, &xs[i], &ys[i])
    } else {
        sum
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_iq4_nl_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<BlockIq4Nl>(w), blocks::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    // SAFETY: KVALUES is 16 bytes.
    let table = _mm512_broadcast_i32x4(unsafe { ld128(KVALUES.as_ptr()) });
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 1 < nb {
        let (x0, x1, y0, y1) = (&xs[i], &xs[i + 1], &ys[i], &ys[i + 1]);
        let q = _mm512_shuffle_epi8(table, join(nibbles_32(&x0.qs), nibbles_32(&x1.qs)));
        // SAFETY: qs are 32 bytes.
        let qy = unsafe { join(ld256(y0.qs.as_ptr()), ld256(y1.qs.as_ptr())) };
        let (p0, p1) = halves(_mm512_cvtepi32_ps(dot_i8(q, qy)));
        acc0 = _mm256_fmadd_ps(scale(x0, y0), p0, acc0);
        acc1 = _mm256_fmadd_ps(scale(x1, y1), p1, acc1);
        i += 2;
    }
    let sum = hsum_ps(_mm256_add_ps(acc0, acc1));
    if i < nb {
        tail(sum, &xs[i], &ys[i])
    } else {
        sum
    }
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

/// The activation blocks of token `t` of `n` in `a`, each `ab` bytes long.
#[inline]
fn token<B: bytemuck::Pod>(a: &[u8], ab: usize, t: usize) -> &[B] {
    blocks::<B>(&a[t * ab..(t + 1) * ab])
}

/// Runs `one::<T>` over a row's tokens in tiles of four (then three, two or one), writing
/// `out[t]` for each token `t`.
macro_rules! tiles {
    ($one:ident, $xs:expr, $a:expr, $ab:expr, $n:expr, $o:expr, $b:ty) => {{
        let act = |t: usize| token::<$b>($a, $ab, t);
        let mut t = 0;
        while t + 4 <= $n {
            $one::<4>(
                $xs,
                [act(t), act(t + 1), act(t + 2), act(t + 3)],
                &mut $o[t..],
            );
            t += 4;
        }
        match $n - t {
            3 => $one::<3>($xs, [act(t), act(t + 1), act(t + 2)], &mut $o[t..]),
            2 => $one::<2>($xs, [act(t), act(t + 1)], &mut $o[t..]),
            1 => $one::<1>($xs, [act(t)], &mut $o[t..]),
            _ => {}
        }
    }};
}

/// One IQ4_NL row against `T` tokens, each value [`dot_iq4_nl_avx2`]'s bit for bit (the same
/// products, scales, accumulators and order) with each weight block taken apart once.
///
/// Every `ys[t]` must hold at least `xs.len()` blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn nl_tokens<const T: usize>(xs: &[BlockIq4Nl], ys: [&[BlockQ8_0]; T], out: &mut [f32]) {
    let nb = xs.len();
    let table = table_256();
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); T]; 2];
    let mut i = 0;
    while i + 1 < nb {
        for (j, acc) in acc.iter_mut().enumerate() {
            let x = &xs[i + j];
            let q = codes_256(&x.qs, table);
            let aq = _mm256_sign_epi8(q, q);
            let dx = f16(x.d);
            for (acc, token) in acc.iter_mut().zip(&ys) {
                let y = &token[i + j];
                // SAFETY: qs is 32 bytes.
                let qy = unsafe { ld256(y.qs.as_ptr()) };
                let dot = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(qy, q));
                let p = _mm256_cvtepi32_ps(_mm256_madd_epi16(dot, ones));
                *acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(y.d) * dx), p, *acc);
            }
        }
        i += 2;
    }
    for (t, (o, token)) in out.iter_mut().zip(&ys).enumerate() {
        let sum = hsum_ps(_mm256_add_ps(acc[0][t], acc[1][t]));
        *o = if i < nb {
            tail(sum, &xs[i], &token[i])
        } else {
            sum
        };
    }
}

/// Several IQ4_NL rows against several tokens (`crate::quant::VecDotRowsFn`): `out[r · n + t]`
/// is [`dot_iq4_nl_avx2`] of row `r` and token `t`, bit for bit, each weight block taken apart
/// once for four tokens (prompt processing; these weights keep ggml's row layout).
///
/// `a` must hold `n` activation rows of `cols` values and `w` the `out.len() / n` weight rows.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn rows_iq4_nl_avx2(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]) {
    let nb = cols / 32;
    let (rb, ab) = (nb * 18, nb * 34);
    if n == 0 || nb == 0 {
        out.fill(0.0);
        return;
    }
    if n == 1 {
        // a decode step: the one-row kernel itself, row after row
        for (x, o) in w.chunks_exact(rb).zip(out.iter_mut()) {
            *o = dot_iq4_nl_avx2(cols, x, &a[..ab]);
        }
        return;
    }
    for (x, o) in w.chunks_exact(rb).zip(out.chunks_exact_mut(n)) {
        tiles!(nl_tokens, blocks::<BlockIq4Nl>(x), a, ab, n, o, BlockQ8_0);
    }
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
            xs_tokens,
            blocks::<BlockIq4Xs>(x),
            a,
            ab,
            n,
            o,
            q8_k::BlockQ8K
        );
    }
}
