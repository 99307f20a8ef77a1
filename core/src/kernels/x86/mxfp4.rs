//! MXFP4 · Q8_0 on AVX2 and AVX-512 VNNI.
//!
//! A block's 32 codes are split into nibbles (low nibbles are elements 0..16, high ones
//! 16..32) and looked up in the 16-entry table of doubled E2M1 values with one byte shuffle
//! (`vpshufb`, the table in each 128-bit lane), which gives the weights as int8 in element
//! order; from there it is the Q8_0 product path: |x| · (y with x's sign) through
//! `vpmaddubsw` + `vpmaddwd` on AVX2, `vpdpbusd` on AVX-512, either way 8 exact i32 lanes of
//! four consecutive products per block.
//!
//! Rounding: llama.cpp's AVX2 `ggml_vec_dot_mxfp4_q8_0` (which its AVX-512 builds also run),
//! so for the same bytes the result is the same float as llama.cpp's on x86. It differs from
//! the scalar oracle (ggml's generic kernel) in the order of the float sums: blocks `0, 2, 4, …`
//! accumulate with one FMA each into 8 f32 lanes, blocks `1, 3, 5, …` into another 8, the two
//! are added and reduced as (hi + lo) → 4 → 2 → 1, and a last odd block is added after that
//! with one FMA (`sum += d · isum` as llama.cpp's C build contracts it). The AVX-512 kernel
//! takes blocks `i` and `i + 1` in the two halves of one vector and keeps exactly these two
//! accumulators: the two ISAs return the same bits. (Checked once against ggml's
//! `arch/x86/quants.c` compiled with `-O2 -mavx2 -mfma -mf16c`: the same bits on 1,800 rows.)

use core::arch::x86_64::*;

use super::avx2::{hsum_ps, ld128, ld256, mul_sum_i8, nibbles_32};
use super::avx512::{dot_i8, halves, join};
use crate::quant::legacy::{blocks, BlockQ8_0};
use crate::quant::mxfp4::{self, BlockMxfp4, KVALUES};

/// The table of doubled E2M1 values in each 128-bit lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn table_256() -> __m256i {
    // SAFETY: KVALUES is 16 bytes.
    _mm256_broadcastsi128_si256(unsafe { ld128(KVALUES.as_ptr()) })
}

/// A block's weights as int8 in element order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn codes_256(x: &BlockMxfp4, table: __m256i) -> __m256i {
    _mm256_shuffle_epi8(table, nibbles_32(&x.qs))
}

/// The block's float scale, as llama.cpp forms it: the f16 activation scale (F16C, exact)
/// times half the E8M0 scale.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scale(x: &BlockMxfp4, y: &BlockQ8_0) -> __m256 {
    _mm256_set1_ps(super::avx2::f16(y.d) * mxfp4::e8m0_half(x.e))
}

/// The last block of an odd count: llama.cpp's scalar loop after the vector one,
/// `sumf += d * (sumi1 + sumi2)`, which its build (C11 with GNU extensions: GCC contracts
/// `a += b * c` where the target has FMA, as clang does by default) computes as one FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tail(sum: f32, x: &BlockMxfp4, y: &BlockQ8_0) -> f32 {
    let (d, p) = (mxfp4::scale(x, y), mxfp4::isum(x, y) as f32);
    _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(d), _mm_set_ss(p), _mm_set_ss(sum)))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_mxfp4_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<BlockMxfp4>(w), blocks::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    let table = table_256();
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 1 < nb {
        let (x0, x1, y0, y1) = (&xs[i], &xs[i + 1], &ys[i], &ys[i + 1]);
        // SAFETY: qs are 32 bytes.
        let (q0, q1) = unsafe { (ld256(y0.qs.as_ptr()), ld256(y1.qs.as_ptr())) };
        let p0 = mul_sum_i8(codes_256(x0, table), q0);
        let p1 = mul_sum_i8(codes_256(x1, table), q1);
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
pub(super) fn dot_mxfp4_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<BlockMxfp4>(w), blocks::<BlockQ8_0>(a));
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

/// One row against `T` tokens, each value [`dot_mxfp4_avx2`]'s bit for bit (the same
/// products, scales, accumulators and order): a weight block is taken apart once (nibbles,
/// table, |w|) for all `T` tokens.
///
/// Every `ys[t]` must hold at least `xs.len()` blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn row_tokens<const T: usize>(xs: &[BlockMxfp4], ys: [&[BlockQ8_0]; T], out: &mut [f32]) {
    let nb = xs.len();
    let table = table_256();
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); T]; 2];
    let mut i = 0;
    while i + 1 < nb {
        for (j, acc) in acc.iter_mut().enumerate() {
            let x = &xs[i + j];
            let q = codes_256(x, table);
            let aq = _mm256_sign_epi8(q, q);
            let e = mxfp4::e8m0_half(x.e);
            for (acc, token) in acc.iter_mut().zip(&ys) {
                let y = &token[i + j];
                // SAFETY: qs is 32 bytes.
                let qy = unsafe { ld256(y.qs.as_ptr()) };
                // `mul_sum_i8(q, qy)` with |q| made once per block
                let dot = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(qy, q));
                let p = _mm256_cvtepi32_ps(_mm256_madd_epi16(dot, ones));
                *acc = _mm256_fmadd_ps(_mm256_set1_ps(super::avx2::f16(y.d) * e), p, *acc);
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

/// Several rows against several tokens (`crate::quant::VecDotRowsFn`): `out[r · n + t]` is
/// [`dot_mxfp4_avx2`] of row `r` and token `t`, bit for bit, with each weight block taken apart
/// once for four tokens (the row layout's prompt processing, where the interleaved layout
/// is not used: `--no-repack`, rows not in whole groups of eight).
///
/// `a` must hold `n` activation rows of `cols` values and `w` the `out.len() / n` weight rows.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn rows_mxfp4_avx2(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]) {
    let nb = cols / 32;
    let (rb, ab) = (nb * 17, nb * 34);
    if n == 0 || nb == 0 {
        out.fill(0.0);
        return;
    }
    if n == 1 {
        // a decode step: the one-row kernel itself, row after row
        for (x, o) in w.chunks_exact(rb).zip(out.iter_mut()) {
            *o = dot_mxfp4_avx2(cols, x, &a[..ab]);
        }
        return;
    }
    let act = |t: usize| blocks::<BlockQ8_0>(&a[t * ab..(t + 1) * ab]);
    for (x, o) in w.chunks_exact(rb).zip(out.chunks_exact_mut(n)) {
        let xs = blocks::<BlockMxfp4>(x);
        let mut t = 0;
        while t + 4 <= n {
            row_tokens::<4>(
                xs,
                [act(t), act(t + 1), act(t + 2), act(t + 3)],
                &mut o[t..],
            );
            t += 4;
        }
        match n - t {
            3 => row_tokens::<3>(xs, [act(t), act(t + 1), act(t + 2)], &mut o[t..]),
            2 => row_tokens::<2>(xs, [act(t), act(t + 1)], &mut o[t..]),
            1 => row_tokens::<1>(xs, [act(t)], &mut o[t..]),
            _ => {}
        }
    }
}
