//! Blocks of 32 four-bit codes looked up in a 16-entry int8 table, with one scale per block,
//! against Q8_0 on AVX2 and AVX-512 VNNI: MXFP4 (doubled E2M1 values, an E8M0 scale) and
//! IQ4_NL (`kvalues_iq4nl`, an f16 scale) share every kernel here and differ only in
//! [`TableBlock`].
//!
//! A block's codes are split into nibbles (low nibbles are elements 0..16, high ones 16..32)
//! and looked up with one byte shuffle (`vpshufb`, the table in each 128-bit lane), which
//! gives the weights as int8 in element order; from there it is the Q8_0 product path:
//! |x| · (y with x's sign) through `vpmaddubsw` + `vpmaddwd` on AVX2 (a pair of products is
//! at most 2 · 127 · 127, inside i16), `vpdpbusd` on AVX-512, either way 8 exact i32 lanes of
//! four consecutive products per block.
//!
//! Rounding: llama.cpp's AVX2 `ggml_vec_dot_mxfp4_q8_0` / `ggml_vec_dot_iq4_nl_q8_0` (which
//! its AVX-512 builds also run), so for the same bytes the result is the same float as
//! llama.cpp's on x86. It differs from the scalar oracles (ggml's generic kernels) in the
//! order of the float sums: blocks `0, 2, 4, …` accumulate with one FMA each into 8 f32
//! lanes, blocks `1, 3, 5, …` into another 8, the two are added and reduced as (hi + lo) → 4
//! → 2 → 1, and a last odd block is added after that with one FMA (`sum += d · isum` as
//! llama.cpp's C build contracts it: C11 with GNU extensions, GCC contracts `a += b * c` where
//! the target has FMA). The AVX-512 kernel takes blocks `i` and `i + 1` in the two halves of
//! one vector and keeps exactly these two accumulators: the two ISAs return the same bits.
//! (MXFP4 was checked once against ggml's `arch/x86/quants.c` compiled with `-O2 -mavx2
//! -mfma -mf16c`: the same bits on 1,800 rows.)

use core::arch::x86_64::*;

use super::avx2::{f16, hsum_ps, ld128, ld256, mul_sum_i8, nibbles_32};
use super::avx512::{dot_i8, halves, join};
use crate::quant::iq4::nl::{self, BlockIq4Nl};
use crate::quant::legacy::{blocks, BlockQ8_0};
use crate::quant::mxfp4::{self, BlockMxfp4};

/// A 32-value block of four-bit codes into a 16-entry table, with one scale.
pub(super) trait TableBlock: bytemuck::Pod {
    /// The code values.
    const TABLE: [i8; 16];
    /// The 16 code bytes.
    fn qs(&self) -> &[u8; 16];
    /// The weight scale as a float (exact).
    ///
    /// # Safety
    /// The CPU must have F16C (the kernels of this file, which call it, require it).
    unsafe fn d(&self) -> f32;
    /// The block's exact integer dot product with `y` (the scalar oracle's).
    fn isum(&self, y: &BlockQ8_0) -> i32;
}

impl TableBlock for BlockMxfp4 {
    const TABLE: [i8; 16] = mxfp4::KVALUES;
    fn qs(&self) -> &[u8; 16] {
        &self.qs
    }
    #[inline]
    unsafe fn d(&self) -> f32 {
        mxfp4::e8m0_half(self.e)
    }
    fn isum(&self, y: &BlockQ8_0) -> i32 {
        mxfp4::isum(self, y)
    }
}

impl TableBlock for BlockIq4Nl {
    const TABLE: [i8; 16] = crate::quant::iq4::KVALUES;
    fn qs(&self) -> &[u8; 16] {
        &self.qs
    }
    #[inline]
    unsafe fn d(&self) -> f32 {
        // SAFETY: the caller guarantees F16C.
        unsafe { f16(self.d) }
    }
    fn isum(&self, y: &BlockQ8_0) -> i32 {
        nl::isum(self, y)
    }
}

/// The table of code values in each 128-bit lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn table_256<B: TableBlock>() -> __m256i {
    // SAFETY: the table is 16 bytes.
    _mm256_broadcastsi128_si256(unsafe { ld128(B::TABLE.as_ptr()) })
}

/// A block's weights as int8 in element order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn codes_256<B: TableBlock>(x: &B, table: __m256i) -> __m256i {
    _mm256_shuffle_epi8(table, nibbles_32(x.qs()))
}

/// The block's float scale, as llama.cpp forms it: the f16 activation scale (F16C, exact)
/// times the weight scale.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scale<B: TableBlock>(x: &B, y: &BlockQ8_0) -> __m256 {
    // SAFETY: F16C is enabled here.
    _mm256_set1_ps(f16(y.d) * unsafe { x.d() })
}

/// The last block of an odd count: llama.cpp's scalar loop after the vector one,
/// `sumf += d * (sumi1 + sumi2)`, contracted to one FMA by its build.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tail<B: TableBlock>(sum: f32, x: &B, y: &BlockQ8_0) -> f32 {
    // SAFETY: F16C is enabled here.
    let (d, p) = (f16(y.d) * unsafe { x.d() }, x.isum(y) as f32);
    _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(d), _mm_set_ss(p), _mm_set_ss(sum)))
}

/// One row · one Q8_0 activation on AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_avx2<B: TableBlock>(w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<B>(w), blocks::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    let table = table_256::<B>();
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

/// One row · one Q8_0 activation on AVX-512 VNNI: [`dot_avx2`]'s bits.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_avx512<B: TableBlock>(w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<B>(w), blocks::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    // SAFETY: the table is 16 bytes.
    let table = _mm512_broadcast_i32x4(unsafe { ld128(B::TABLE.as_ptr()) });
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 1 < nb {
        let (x0, x1, y0, y1) = (&xs[i], &xs[i + 1], &ys[i], &ys[i + 1]);
        let q = _mm512_shuffle_epi8(table, join(nibbles_32(x0.qs()), nibbles_32(x1.qs())));
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

/// The activation blocks of token `t` in `a`, each token `ab` bytes long.
#[inline]
pub(super) fn token<B: bytemuck::Pod>(a: &[u8], ab: usize, t: usize) -> &[B] {
    blocks::<B>(&a[t * ab..(t + 1) * ab])
}

/// Runs `one::<T>` over a row's tokens in tiles of four (then three, two or one), writing
/// `out[t]` for each token `t`.
/// (`$one[G, ...]`: the tile function and its type parameters before the token count.)
macro_rules! tiles {
    ($one:ident [$($g:ty),*], $xs:expr, $a:expr, $ab:expr, $n:expr, $o:expr, $b:ty) => {{
        let act = |t: usize| $crate::kernels::x86::table4::token::<$b>($a, $ab, t);
        let mut t = 0;
        while t + 4 <= $n {
            $one::<$($g,)* 4>(
                $xs,
                [act(t), act(t + 1), act(t + 2), act(t + 3)],
                &mut $o[t..],
            );
            t += 4;
        }
        match $n - t {
            3 => $one::<$($g,)* 3>($xs, [act(t), act(t + 1), act(t + 2)], &mut $o[t..]),
            2 => $one::<$($g,)* 2>($xs, [act(t), act(t + 1)], &mut $o[t..]),
            1 => $one::<$($g,)* 1>($xs, [act(t)], &mut $o[t..]),
            _ => {}
        }
    }};
}
pub(super) use tiles;

/// One row against `T` tokens, each value [`dot_avx2`]'s bit for bit (the same products,
/// scales, accumulators and order): a weight block is taken apart once (nibbles, table, |w|)
/// for all `T` tokens.
///
/// Every `ys[t]` must hold at least `xs.len()` blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn row_tokens<B: TableBlock, const T: usize>(xs: &[B], ys: [&[BlockQ8_0]; T], out: &mut [f32]) {
    let nb = xs.len();
    let table = table_256::<B>();
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); T]; 2];
    let mut i = 0;
    while i + 1 < nb {
        for (j, acc) in acc.iter_mut().enumerate() {
            let x = &xs[i + j];
            let q = codes_256(x, table);
            let aq = _mm256_sign_epi8(q, q);
            // SAFETY: F16C is enabled here.
            let dx = unsafe { x.d() };
            for (acc, token) in acc.iter_mut().zip(&ys) {
                let y = &token[i + j];
                // SAFETY: qs is 32 bytes.
                let qy = unsafe { ld256(y.qs.as_ptr()) };
                // `mul_sum_i8(q, qy)` with |q| made once per block
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

/// Several rows against several tokens (`crate::quant::VecDotRowsFn`): `out[r · n + t]` is
/// [`dot_avx2`] of row `r` and token `t`, bit for bit, with each weight block taken apart
/// once for four tokens (prompt processing on the row layout).
///
/// `a` must hold `n` activation rows of `cols` values and `w` the `out.len() / n` weight rows.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn rows_avx2<B: TableBlock>(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]) {
    let nb = cols / 32;
    let (rb, ab) = (nb * size_of::<B>(), nb * size_of::<BlockQ8_0>());
    if n == 0 || nb == 0 {
        out.fill(0.0);
        return;
    }
    if n == 1 {
        // a decode step: the one-row kernel itself, row after row
        for (x, o) in w.chunks_exact(rb).zip(out.iter_mut()) {
            *o = dot_avx2::<B>(x, &a[..ab]);
        }
        return;
    }
    for (x, o) in w.chunks_exact(rb).zip(out.chunks_exact_mut(n)) {
        tiles!(row_tokens[B], blocks::<B>(x), a, ab, n, o, BlockQ8_0);
    }
}
