//! AVX2 activation quantizers (Q8_0, Q8_K): the scalar quantizers' arithmetic on eight lanes,
//! bit for bit. The block maximum is exact in any order; each quant is the same single
//! multiply and the same round-to-nearest-even through the `1.5 · 2^23` trick as
//! `kquants::nearest_int` (NaN and all), truncated to its low byte as `as i8` does.

use core::arch::x86_64::*;

use crate::quant::interleaved::q4_0_offset;
use crate::quant::kquants::q8_k::BlockQ8K;
use crate::quant::kquants::{GROUPS, QK_K};
use crate::quant::legacy::{blocks_mut, BlockQ8_0, QK};

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

/// The low bytes of four vectors of i32 lanes, in order, stored at `dst` (32 bytes) and
/// returned.
///
/// # Safety
/// `dst` must be valid for writing 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn store_low_bytes(q: [__m256i; 4], dst: *mut i8) -> __m256i {
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
    x
}

/// One Q8_0 block of ggml's quantizer: `d = amax / 127`, `q = nearest_int(x · 127 / amax)`;
/// returns the 32 quants as stored.
///
/// # Safety
/// `x` must hold 32 values, and the CPU must support AVX2, FMA and F16C (it is always
/// inlined into the quantizers below, which are compiled with them).
#[inline(always)]
unsafe fn q8_0_block(x: &[f32], b: &mut BlockQ8_0) -> __m256i {
    // SAFETY: the CPU features and the 32 values the loads read are the caller's contract.
    unsafe {
        let amax = absmax(&x[..QK]);
        let d = amax / 127.0;
        let id = _mm256_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
        // `legacy::to_h(d)` through F16C: the same round-to-nearest-even (`amax` is never NaN)
        let h = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(d));
        b.d = (_mm_cvtsi128_si32(h) as u16).to_le_bytes();
        let p = x.as_ptr();
        let q = [
            nearest(_mm256_loadu_ps(p), id),
            nearest(_mm256_loadu_ps(p.add(8)), id),
            nearest(_mm256_loadu_ps(p.add(16)), id),
            nearest(_mm256_loadu_ps(p.add(24)), id),
        ];
        store_low_bytes(q, b.qs.as_mut_ptr())
    }
}

/// ggml's SIMD Q8_0 quantizer (`legacy::quantize_q8_0`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn quantize_q8_0(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(blocks_mut::<BlockQ8_0>(dst)) {
        // SAFETY: 32 values.
        unsafe { q8_0_block(x, b) };
    }
}

/// [`quantize_q8_0`] of a batch row, with in the same pass what the batch kernels read
/// beside the quants (`interleaved::BatchRows`): each block's quant sum, its Q4_0 offset
/// and its f16 scale as f32, as `interleaved::block_sums`, `q4_0_offsets` and
/// `block_scales` give them.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn quantize_q8_0_batch(
    src: &[f32],
    dst: &mut [u8],
    sums: &mut [i32],
    offsets: &mut [i32],
    scales: &mut [f32],
) {
    let flip = _mm256_set1_epi8(-128);
    let blocks = src
        .chunks_exact(QK)
        .zip(blocks_mut::<BlockQ8_0>(dst))
        .zip(sums.iter_mut().zip(offsets).zip(scales));
    for ((x, b), ((sum, offset), scale)) in blocks {
        // SAFETY: 32 values.
        let q = unsafe { q8_0_block(x, b) };
        // Σ of the 32 i8 quants: as unsigned bytes (+128 each) summed by vpsadbw
        let s = _mm256_sad_epu8(_mm256_xor_si256(q, flip), _mm256_setzero_si256());
        let s = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        let s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
        *sum = _mm_cvtsi128_si32(s) - 128 * QK as i32;
        *offset = q4_0_offset(*sum);
        // the f16 scale widened by F16C (exact, as any widening)
        let h = _mm_cvtsi32_si128(u16::from_le_bytes(b.d) as i32);
        *scale = _mm_cvtss_f32(_mm_cvtph_ps(h));
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
        // the first value whose magnitude is the maximum (the scalar scan keeps the first),
        // eight lanes at a time
        // (a plain loop: a closure given to an iterator adapter would not inline here)
        let target = _mm256_set1_ps(amax);
        let mut max = 0.0;
        for (c, v) in x.chunks_exact(8).enumerate() {
            // SAFETY: eight values.
            let v = abs(unsafe { _mm256_loadu_ps(v.as_ptr()) });
            let hit = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(v, target));
            if hit != 0 {
                max = x[8 * c + hit.trailing_zeros() as usize];
                break;
            }
        }
        if max == 0.0 {
            *b = bytemuck::Zeroable::zeroed();
            continue;
        }
        let iscale = -127.0 / max;
        let s = _mm256_set1_ps(iscale);
        let top = _mm256_set1_epi32(127);
        let flip = _mm256_set1_epi8(-128);
        // two groups of 16 quants per chunk of 32
        const _: () = assert!(QK_K / GROUPS == 16);
        for (c, x) in x.chunks_exact(32).enumerate() {
            let at = |k: usize| {
                // SAFETY: values 8k..8k + 8 of the chunk's 32.
                let v = unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * k)) };
                _mm256_min_epi32(nearest(v, s), top)
            };
            // SAFETY: quants 32c..32c + 32 of the 256.
            let q = unsafe {
                store_low_bytes([at(0), at(1), at(2), at(3)], b.qs.as_mut_ptr().add(32 * c))
            };
            // each group's sum of i8 quants: as unsigned bytes (+128 each) summed by vpsadbw
            let sad = _mm256_sad_epu8(_mm256_xor_si256(q, flip), _mm256_setzero_si256());
            let group = |v: __m128i| _mm_cvtsi128_si32(_mm_add_epi64(v, _mm_unpackhi_epi64(v, v)));
            let sums = [
                group(_mm256_castsi256_si128(sad)),
                group(_mm256_extracti128_si256(sad, 1)),
            ];
            for (g, sum) in sums.into_iter().enumerate() {
                let sum = (sum - 128 * 16) as i16;
                b.bsums[4 * c + 2 * g..][..2].copy_from_slice(&sum.to_le_bytes());
            }
        }
        b.d = (1.0 / iscale).to_le_bytes();
    }
}
