//! AVX2 activation quantizers (Q8_0, Q8_K): the scalar quantizers' arithmetic on eight lanes,
//! bit for bit. The block maximum is exact in any order; each quant is the same single
//! multiply and the same round-to-nearest-even through the `1.5 · 2^23` trick as
//! `kquants::nearest_int` (NaN and all), truncated to its low byte as `as i8` does.

use core::arch::x86_64::*;

use crate::quant::kquants::q8_k::BlockQ8K;
use crate::quant::kquants::{GROUPS, QK_K};
use crate::quant::legacy::{blocks_mut, to_h, BlockQ8_0, QK};

/// `nearest_int(x · s)` on eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn nearest(x: __m256, s: __m256) -> __m256i {
    let v = _mm256_add_ps(_mm256_mul_ps(x, s), _mm256_set1_ps(12_582_912.0));
    _mm256_sub_epi32(
        _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x007F_FFFF)),
        _mm256_set1_epi32(0x0040_0000),
    )
}

/// `|x|`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn abs(x: __m256) -> __m256 {
    _mm256_andnot_ps(_mm256_set1_ps(-0.0), x)
}

/// The largest lane (the lanes hold no NaN: see [`absmax`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hmax(v: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    _mm_cvtss_f32(m)
}

/// `max |x[i]|` over whole vectors of eight, NaN lanes skipped as `f32::max` skips them
/// (`maxps` returns its second operand when either is NaN).
///
/// # Safety
/// `x.len()` must be a multiple of 8.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn absmax(x: &[f32]) -> f32 {
    let mut m = _mm256_setzero_ps();
    for c in x.chunks_exact(8) {
        // SAFETY: eight floats.
        m = _mm256_max_ps(abs(unsafe { _mm256_loadu_ps(c.as_ptr()) }), m);
    }
    hmax(m)
}

/// The low bytes of four vectors of i32 lanes, in order, stored at `dst` (32 bytes).
///
/// # Safety
/// `dst` must be valid for writing 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn store_low_bytes(q: [__m256i; 4], dst: *mut i8) {
    // per 128-bit lane: the low byte of each i32 to bytes 0-3, the rest zero
    let pick = _mm256_setr_epi8(
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1,
    );
    let b = q.map(|v| _mm256_shuffle_epi8(v, pick));
    // dword 0 and 4 of b[k] hold bytes 8k..8k+4 and 8k+4..8k+8
    let lo = _mm256_unpacklo_epi32(b[0], b[1]); // dwords: b0.0 b1.0 . . | b0.4 b1.4 . .
    let hi = _mm256_unpacklo_epi32(b[2], b[3]);
    let x = _mm256_unpacklo_epi64(lo, hi); // b0.0 b1.0 b2.0 b3.0 | b0.4 b1.4 b2.4 b3.4
    let x = _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    // SAFETY: the caller's contract.
    unsafe { _mm256_storeu_si256(dst.cast(), x) };
}

/// ggml's SIMD Q8_0 quantizer (`legacy::quantize_q8_0`): per 32 values `d = amax / 127`,
/// `q = nearest_int(x · 127 / amax)`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn quantize_q8_0(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(blocks_mut::<BlockQ8_0>(dst)) {
        // SAFETY: 32 values.
        let amax = unsafe { absmax(x) };
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
        b.d = to_h(d);
        // SAFETY: the block's 32 values, in four vectors.
        let q: [__m256i; 4] = core::array::from_fn(|k| {
            nearest(unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * k)) }, id)
        });
        // SAFETY: the block's 32 quants.
        unsafe { store_low_bytes(q, b.qs.as_mut_ptr()) };
    }
}

/// ggml's quantize_row_q8_K_ref (`kquants::q8_k::quantize`): scale from the first value of
/// largest magnitude, `iscale = -127 / max`, `q = min(nearest_int(iscale · x), 127)`, and
/// the sums of each 16 quants.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn quantize_q8_k(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src
        .chunks_exact(QK_K)
        .zip(bytemuck::cast_slice_mut::<u8, BlockQ8K>(dst))
    {
        // SAFETY: 256 values.
        let amax = unsafe { absmax(x) };
        // the first value whose magnitude is the maximum (the scalar scan keeps the first)
        let max = x
            .iter()
            .copied()
            .find(|v| libm::fabsf(*v) == amax)
            .unwrap_or(0.0);
        if max == 0.0 {
            *b = bytemuck::Zeroable::zeroed();
            continue;
        }
        let iscale = -127.0 / max;
        let s = _mm256_set1_ps(iscale);
        let top = _mm256_set1_epi32(127);
        for (x, qs) in x.chunks_exact(32).zip(b.qs.chunks_exact_mut(32)) {
            // SAFETY: 32 values in four vectors.
            let q: [__m256i; 4] = core::array::from_fn(|k| {
                let v = unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * k)) };
                _mm256_min_epi32(nearest(v, s), top)
            });
            // SAFETY: 32 quants.
            unsafe { store_low_bytes(q, qs.as_mut_ptr()) };
        }
        for g in 0..GROUPS {
            let sum: i32 = b.qs[16 * g..16 * (g + 1)].iter().map(|&q| q as i32).sum();
            b.bsums[2 * g..2 * g + 2].copy_from_slice(&(sum as i16).to_le_bytes());
        }
        b.d = (1.0 / iscale).to_le_bytes();
    }
}
