//! AVX2 + FMA + F16C dot products.
//!
//! Rounding, the same on AVX2 and AVX-512 (tested bit for bit):
//! - 32-element formats sum integers per 4 consecutive elements into 8 i32 lanes (exact),
//!   turn each block's lanes to f32 and accumulate them with one FMA per block into 8 f32
//!   lanes, reduced at the end as (hi + lo) → 4 → 2 → 1: the arithmetic of llama.cpp's AVX2
//!   `vec_dot` for Q4_0 / Q5_0 / Q8_0, so for the same bytes the results are the same floats.
//!   Q4_1 / Q5_1 do the same and add each block's `m_x·s_y` to a separate scalar sum, added
//!   last (ggml's order; a C compiler may fuse that multiply-add, so those two can differ from
//!   llama.cpp in the last bit).
//! - k-quants reduce each super-block to exact i32 sums and round like the scalar oracle
//!   ([`kquant_block`]), so they equal the scalar kernels bit for bit.
//! - BF16 widens by shifting each value into the top half of an f32 (exact) and accumulates
//!   with FMAs in 4 × 8 f32 lanes.
//!
//! Integer formats multiply unsigned × signed bytes with `vpmaddubsw` (pairs summed to i16,
//! never saturating for these formats' ranges) and widen with `vpmaddwd`, which also applies
//! the k-quants' per-group scales. Each block's float scale is applied once with an FMA.

use core::arch::x86_64::*;

use crate::quant::kquants::q2_k::BlockQ2K;
use crate::quant::kquants::q3_k::BlockQ3K;
use crate::quant::kquants::q4_k::BlockQ4K;
use crate::quant::kquants::q5_k::BlockQ5K;
use crate::quant::kquants::q6_k::BlockQ6K;
use crate::quant::kquants::q8_k::{self, BlockQ8K};
use crate::quant::kquants::scale_min_k4;
use crate::quant::legacy::{
    blocks, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1,
};

/// One f16 (little-endian bytes) to f32 with F16C.
///
/// The bits go to the vector register with an explicit `vmovd`: left to itself LLVM folds the
/// load into `vpinsrw` merging into whatever register it likes (often the dot product's
/// accumulator), which chains every block's scale conversion behind the previous block's
/// FMA and made the legacy kernels 3× slower.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn f16(b: [u8; 2]) -> f32 {
    let v: __m128i;
    // SAFETY: a register-to-register move, no memory or flags touched.
    unsafe {
        core::arch::asm!(
            "vmovd {v}, {r:e}",
            v = out(xmm_reg) v,
            r = in(reg) u16::from_le_bytes(b) as u32,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    _mm_cvtss_f32(_mm_cvtph_ps(v))
}

/// Two consecutive f16 (little-endian bytes) to f32 lanes 0 and 1 (lanes 2 and 3 are 0),
/// moved to the vector register with an explicit `vmovd` for the reason given at [`f16`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn f16x2(b: [u8; 4]) -> __m128 {
    let v: __m128i;
    // SAFETY: a register-to-register move, no memory or flags touched.
    unsafe {
        core::arch::asm!(
            "vmovd {v}, {r:e}",
            v = out(xmm_reg) v,
            r = in(reg) u32::from_le_bytes(b),
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    _mm_cvtph_ps(v)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// 32 bytes at `p`.
///
/// # Safety
/// `p` must be valid for reading 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn ld256<T>(p: *const T) -> __m256i {
    // SAFETY: the caller guarantees 32 readable bytes.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// 16 bytes at `p`.
///
/// # Safety
/// `p` must be valid for reading 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn ld128<T>(p: *const T) -> __m128i {
    // SAFETY: the caller guarantees 16 readable bytes.
    unsafe { _mm_loadu_si128(p.cast()) }
}

/// The 32 nibbles of a legacy block in element order: low nibbles, then high nibbles.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn nibbles_32(qs: &[u8; 16]) -> __m256i {
    // SAFETY: qs is 16 bytes.
    let t = unsafe { ld128(qs.as_ptr()) };
    let v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    _mm256_and_si256(v, _mm256_set1_epi8(0x0F))
}

/// Byte `i` is 0xFF where bit `i` of `bits` is set, else 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bytes_from_bits_32(bits: u32) -> __m256i {
    let v = _mm256_set1_epi32(bits as i32);
    // byte i takes byte i/8 of `bits`...
    let spread = _mm256_shuffle_epi8(
        v,
        _mm256_setr_epi64x(
            0,
            0x0101_0101_0101_0101,
            0x0202_0202_0202_0202,
            0x0303_0303_0303_0303,
        ),
    );
    // ...then all its bits but bit i%8 are forced on: all-ones exactly when bit i%8 was set
    let probe = _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe_u64 as i64));
    _mm256_cmpeq_epi8(probe, _mm256_set1_epi8(-1))
}

/// Sum of `x[i] * y[i]` (signed bytes) in pairs, as 8 f32: |x| · (y with x's sign) keeps the
/// unsigned × signed form of `vpmaddubsw`. `y` must not hold -128.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn mul_sum_i8(x: __m256i, y: __m256i) -> __m256 {
    let dot = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    _mm256_cvtepi32_ps(_mm256_madd_epi16(dot, _mm256_set1_epi16(1)))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_q8_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (x, y) in blocks::<BlockQ8_0>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        let d = _mm256_set1_ps(f16(x.d) * f16(y.d));
        // SAFETY: qs are 32 bytes.
        let (qx, qy) = unsafe { (ld256(x.qs.as_ptr()), ld256(y.qs.as_ptr())) };
        acc = _mm256_fmadd_ps(d, mul_sum_i8(qx, qy), acc);
    }
    hsum_ps(acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_q4_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (x, y) in blocks::<BlockQ4_0>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        let d = _mm256_set1_ps(f16(x.d) * f16(y.d));
        let qx = _mm256_sub_epi8(nibbles_32(&x.qs), _mm256_set1_epi8(8));
        // SAFETY: qs is 32 bytes.
        let qy = unsafe { ld256(y.qs.as_ptr()) };
        acc = _mm256_fmadd_ps(d, mul_sum_i8(qx, qy), acc);
    }
    hsum_ps(acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_q5_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (x, y) in blocks::<BlockQ5_0>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        let d = _mm256_set1_ps(f16(x.d) * f16(y.d));
        // value = nibble + 16·bit - 16: where the bit is clear, nibble | 0xF0 is nibble - 16
        let clear = _mm256_andnot_si256(
            bytes_from_bits_32(u32::from_le_bytes(x.qh)),
            _mm256_set1_epi8(0xF0u8 as i8),
        );
        let qx = _mm256_or_si256(nibbles_32(&x.qs), clear);
        // SAFETY: qs is 32 bytes.
        let qy = unsafe { ld256(y.qs.as_ptr()) };
        acc = _mm256_fmadd_ps(d, mul_sum_i8(qx, qy), acc);
    }
    hsum_ps(acc)
}

/// Sum of `x[i] * y[i]` (`x` unsigned, `y` signed bytes) in pairs, as 8 f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn mul_sum_u8_i8(x: __m256i, y: __m256i) -> __m256 {
    let dot = _mm256_maddubs_epi16(x, y);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(dot, _mm256_set1_epi16(1)))
}

/// The first four bytes of a block.
#[inline]
fn head<B: bytemuck::Pod>(b: &B) -> [u8; 4] {
    let mut h = [0u8; 4];
    h.copy_from_slice(&bytemuck::bytes_of(b)[..4]);
    h
}

/// A Q4_1 / Q5_1 block's scales against a Q8_1 block: returns `d_x·d_y` in 8 lanes and adds
/// `m_x·s_y` to lane 1 of `mins` (lane 0 gathers the `d_x·d_y`, unused). Both blocks start
/// with their two f16 (`d, m` and `d, s`), so two conversions and one multiply give both
/// products, rounded as `f16(d_x) * f16(d_y)` and `f16(m_x) * f16(s_y)` would be.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scales_q8_1<B: bytemuck::Pod>(x: &B, y: &BlockQ8_1, mins: &mut __m128) -> __m256 {
    let p = _mm_mul_ps(f16x2(head(x)), f16x2(head(y)));
    *mins = _mm_add_ps(*mins, p);
    _mm256_broadcastss_ps(p)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_q4_1(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = _mm_setzero_ps();
    for (x, y) in blocks::<BlockQ4_1>(w).iter().zip(blocks::<BlockQ8_1>(a)) {
        let d = scales_q8_1(x, y, &mut mins);
        // SAFETY: qs is 32 bytes.
        let qy = unsafe { ld256(y.qs.as_ptr()) };
        acc = _mm256_fmadd_ps(d, mul_sum_u8_i8(nibbles_32(&x.qs), qy), acc);
    }
    hsum_ps(acc) + _mm_cvtss_f32(_mm_movehdup_ps(mins))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_q5_1(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = _mm_setzero_ps();
    for (x, y) in blocks::<BlockQ5_1>(w).iter().zip(blocks::<BlockQ8_1>(a)) {
        let d = scales_q8_1(x, y, &mut mins);
        // value = nibble + 16·bit, in [0, 31]
        let high = _mm256_and_si256(
            bytes_from_bits_32(u32::from_le_bytes(x.qh)),
            _mm256_set1_epi8(0x10),
        );
        let qx = _mm256_or_si256(nibbles_32(&x.qs), high);
        // SAFETY: qs is 32 bytes.
        let qy = unsafe { ld256(y.qs.as_ptr()) };
        acc = _mm256_fmadd_ps(d, mul_sum_u8_i8(qx, qy), acc);
    }
    hsum_ps(acc) + _mm_cvtss_f32(_mm_movehdup_ps(mins))
}

/// Σ min[j]·(bsum[2j] + bsum[2j+1]) in 4 lanes (pairs of sub-blocks), for the formats with
/// one min per 32 elements.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn mins_dot_bsums(mins: &[u8; 8], y: &BlockQ8K) -> __m128i {
    // SAFETY: bsums is 32 bytes.
    let b = unsafe { ld256(y.bsums.as_ptr()) };
    let sums = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    let m = _mm_cvtepu8_epi16(_mm_set_epi64x(0, i64::from_le_bytes(*mins)));
    _mm_madd_epi16(m, sums)
}

/// Sum of 8 i32 lanes (exact).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum_epi32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)))
}

/// Sum of 4 i32 lanes (exact).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum_epi32_4(s: __m128i) -> i32 {
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)))
}

/// One k-quant super-block's contribution, rounded exactly as the scalar oracle rounds it
/// (`quant::kquants::dot_q8_k`): the integer sums are exact, so the k-quant kernels of every
/// ISA return the scalar result bit for bit.
#[inline]
pub(super) fn kquant_block(d: f32, dmin: f32, d8: f32, isum: i32, msum: i32) -> f32 {
    d * d8 * isum as f32 - dmin * d8 * msum as f32
}

/// Q4_K's eight 6-bit (scale, min) pairs.
#[inline]
pub(super) fn q4_k_scales(s: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..8 {
        (sc[j], mn[j]) = scale_min_k4(j, s);
    }
    (sc, mn)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_q4_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    let low4 = _mm256_set1_epi8(0x0F);
    for (x, y) in bytemuck::cast_slice::<u8, BlockQ4K>(w)
        .iter()
        .zip(q8_k::blocks(a))
    {
        let (sc, mn) = q4_k_scales(&x.scales);
        let msum = hsum_epi32_4(mins_dot_bsums(&mn, y));
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            // SAFETY: j < 4: qs[32j..32j+32] and y.qs[64j..64j+64] are in bounds.
            let (q4, y0, y1) = unsafe {
                (
                    ld256(x.qs.as_ptr().add(32 * j)),
                    ld256(y.qs.as_ptr().add(64 * j)),
                    ld256(y.qs.as_ptr().add(64 * j + 32)),
                )
            };
            let lo = _mm256_and_si256(q4, low4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
            let p0 = _mm256_madd_epi16(
                _mm256_maddubs_epi16(lo, y0),
                _mm256_set1_epi16(sc[2 * j] as i16),
            );
            let p1 = _mm256_madd_epi16(
                _mm256_maddubs_epi16(hi, y1),
                _mm256_set1_epi16(sc[2 * j + 1] as i16),
            );
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        sum += kquant_block(f16(x.d), f16(x.dmin), y.d(), hsum_epi32(sumi), msum);
    }
    sum
}

/// 0xFF in each byte of `bits` that has the bit(s) of `mask` set, else 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bytes_with(bits: __m256i, mask: u8) -> __m256i {
    let m = _mm256_set1_epi8(mask as i8);
    _mm256_cmpeq_epi8(_mm256_and_si256(bits, m), m)
}

/// `vpshufb` patterns that fill the low half of a vector with its i16 lane `2i` and the high
/// half with its i16 lane `2i + 1`, both taken within each half (see [`group_scales`]).
const SCALE_PAIR_SHUFFLES: [[u8; 32]; 4] = {
    let mut t = [[0u8; 32]; 4];
    let mut i = 0;
    while i < 4 {
        let mut b = 0;
        while b < 32 {
            // i16 lane 2i (low half) or 2i + 1 (high half), low byte then high byte
            t[i][b] = (2 * (2 * i + b / 16) + b % 2) as u8;
            b += 1;
        }
        i += 1;
    }
    t
};

/// Sixteen i16 group scales (groups 0-7 in the low half of `s`, 8-15 in the high half) as
/// two vectors whose halves both hold groups 0-7 (`[0]`) or 8-15 (`[1]`), ready for
/// [`scale_pair`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn group_scales(s: __m256i) -> [__m256i; 2] {
    [
        _mm256_permute2x128_si256(s, s, 0x00),
        _mm256_permute2x128_si256(s, s, 0x11),
    ]
}

/// The scales of 16-element groups `2k` (low half, all eight i16 lanes) and `2k + 1` (high
/// half), for `vpmaddwd` against the `vpmaddubsw` pairs of elements `32k..32k + 32`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scale_pair(scales: &[__m256i; 2], k: usize) -> __m256i {
    // SAFETY: a shuffle table row is 32 bytes.
    let pat = unsafe { ld256(SCALE_PAIR_SHUFFLES[k % 4].as_ptr()) };
    _mm256_shuffle_epi8(scales[k / 4], pat)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_q2_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    let three = _mm256_set1_epi8(3);
    let low4 = _mm_set1_epi8(0x0F);
    for (x, y) in bytemuck::cast_slice::<u8, BlockQ2K>(w)
        .iter()
        .zip(q8_k::blocks(a))
    {
        // SAFETY: scales is 16 bytes, bsums 32.
        let (s, bsums) = unsafe { (ld128(x.scales.as_ptr()), ld256(y.bsums.as_ptr())) };
        // group mins (high nibbles) times the group sums: 16 i16 products, summed exactly
        let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), low4));
        let msum = hsum_epi32(_mm256_madd_epi16(mins, bsums));
        let scales = group_scales(_mm256_cvtepu8_epi16(_mm_and_si128(s, low4)));
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            // SAFETY: n < 2: qs[32n..32n+32].
            let mut q2 = unsafe { ld256(x.qs.as_ptr().add(32 * n)) };
            for j in 0..4 {
                // elements 128n + 32j + k: bits 2j..2j+2 of byte k, groups 8n + 2j and + 1
                // SAFETY: 128n + 32j + 32 <= 256.
                let qy = unsafe { ld256(y.qs.as_ptr().add(128 * n + 32 * j)) };
                let p = _mm256_maddubs_epi16(_mm256_and_si256(q2, three), qy);
                let sc = scale_pair(&scales, 4 * n + j);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(sc, p));
                q2 = _mm256_srli_epi16(q2, 2);
            }
        }
        sum += kquant_block(f16(x.d), f16(x.dmin), y.d(), hsum_epi32(sumi), msum);
    }
    sum
}

/// Q3_K's sixteen 6-bit scales, unbiased to [-32, 31], as bytes: the low nibbles come from
/// bytes 0-7 (scales 0-7 low, 8-15 high nibble), the top two bits from bytes 8-11 (bits
/// 2(i / 4) of byte 8 + i % 4).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q3_k_scales(s: &[u8; 12]) -> __m128i {
    let w = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (a0, a1, a2) = (w(0), w(1), w(2));
    let (k2, k4) = (0x0303_0303u32, 0x0F0F_0F0Fu32);
    // four scales per word: low nibbles | ((high bits of the word's four scales) << 4)
    let v = _mm_setr_epi32(
        ((a0 & k4) | ((a2 & k2) << 4)) as i32,
        ((a1 & k4) | (((a2 >> 2) & k2) << 4)) as i32,
        (((a0 >> 4) & k4) | (((a2 >> 4) & k2) << 4)) as i32,
        (((a1 >> 4) & k4) | (((a2 >> 6) & k2) << 4)) as i32,
    );
    _mm_sub_epi8(v, _mm_set1_epi8(32))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_q3_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    let three = _mm256_set1_epi8(3);
    let four = _mm256_set1_epi8(4);
    for (x, y) in bytemuck::cast_slice::<u8, BlockQ3K>(w)
        .iter()
        .zip(q8_k::blocks(a))
    {
        let scales = group_scales(_mm256_cvtepi8_epi16(q3_k_scales(&x.scales)));
        // SAFETY: hmask is 32 bytes.
        let hbits = unsafe { ld256(x.hmask.as_ptr()) };
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            // SAFETY: n < 2: qs[32n..32n+32].
            let mut q3 = unsafe { ld256(x.qs.as_ptr().add(32 * n)) };
            for j in 0..4 {
                // elements 128n + 32j + k: bits 2j..2j+2 of byte k, minus 4 unless bit
                // 4n + j of hmask[k] is set; as (low bits)·y - (4 or 0)·y, both unsigned
                // SAFETY: 128n + 32j + 32 <= 256.
                let qy = unsafe { ld256(y.qs.as_ptr().add(128 * n + 32 * j)) };
                let sub = _mm256_andnot_si256(bytes_with(hbits, 1 << (4 * n + j)), four);
                let p = _mm256_sub_epi16(
                    _mm256_maddubs_epi16(_mm256_and_si256(q3, three), qy),
                    _mm256_maddubs_epi16(sub, qy),
                );
                let sc = scale_pair(&scales, 4 * n + j);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(sc, p));
                q3 = _mm256_srli_epi16(q3, 2);
            }
        }
        sum += kquant_block(f16(x.d), 0.0, y.d(), hsum_epi32(sumi), 0);
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_q5_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    let low4 = _mm256_set1_epi8(0x0F);
    let bit4 = _mm256_set1_epi8(0x10);
    for (x, y) in bytemuck::cast_slice::<u8, BlockQ5K>(w)
        .iter()
        .zip(q8_k::blocks(a))
    {
        let (sc, mn) = q4_k_scales(&x.scales);
        let msum = hsum_epi32_4(mins_dot_bsums(&mn, y));
        // SAFETY: qh is 32 bytes.
        let qh = unsafe { ld256(x.qh.as_ptr()) };
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            // SAFETY: j < 4: qs[32j..32j+32] and y.qs[64j..64j+64] are in bounds.
            let (q5, y0, y1) = unsafe {
                (
                    ld256(x.qs.as_ptr().add(32 * j)),
                    ld256(y.qs.as_ptr().add(64 * j)),
                    ld256(y.qs.as_ptr().add(64 * j + 32)),
                )
            };
            // Q4_K's nibbles plus 16 where bit 2j (low nibbles) or 2j + 1 (high) of qh is set
            let lo = _mm256_or_si256(
                _mm256_and_si256(q5, low4),
                _mm256_and_si256(bytes_with(qh, 1 << (2 * j)), bit4),
            );
            let hi = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(q5, 4), low4),
                _mm256_and_si256(bytes_with(qh, 2 << (2 * j)), bit4),
            );
            let p0 = _mm256_madd_epi16(
                _mm256_maddubs_epi16(lo, y0),
                _mm256_set1_epi16(sc[2 * j] as i16),
            );
            let p1 = _mm256_madd_epi16(
                _mm256_maddubs_epi16(hi, y1),
                _mm256_set1_epi16(sc[2 * j + 1] as i16),
            );
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        sum += kquant_block(f16(x.d), f16(x.dmin), y.d(), hsum_epi32(sumi), msum);
    }
    sum
}

/// Shuffles that spread Q6_K scales `2k` (lanes 0-7) and `2k+1` (lanes 8-15) for
/// `vpmaddwd` after sign extension.
const Q6K_SCALE_PAIRS: [[u8; 16]; 8] = {
    let mut t = [[0u8; 16]; 8];
    let mut k = 0;
    while k < 8 {
        let mut i = 0;
        while i < 16 {
            t[k][i] = (2 * k + i / 8) as u8;
            i += 1;
        }
        k += 1;
    }
    t
};

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_q6_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    let low4 = _mm256_set1_epi8(0x0F);
    let two = _mm256_set1_epi8(3);
    let m32 = _mm256_set1_epi8(32);
    for (x, y) in bytemuck::cast_slice::<u8, BlockQ6K>(w)
        .iter()
        .zip(q8_k::blocks(a))
    {
        // SAFETY: scales is 16 bytes.
        let scales = unsafe { ld128(x.scales.as_ptr()) };
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            // SAFETY: n < 2: ql[64n..64n+64], qh[32n..32n+32].
            let (l0, l1, hb) = unsafe {
                (
                    ld256(x.ql.as_ptr().add(64 * n)),
                    ld256(x.ql.as_ptr().add(64 * n + 32)),
                    ld256(x.qh.as_ptr().add(32 * n)),
                )
            };
            let high = |h: __m256i| _mm256_slli_epi16(_mm256_and_si256(h, two), 4);
            let q = [
                _mm256_or_si256(_mm256_and_si256(l0, low4), high(hb)),
                _mm256_or_si256(_mm256_and_si256(l1, low4), high(_mm256_srli_epi16(hb, 2))),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                    high(_mm256_srli_epi16(hb, 4)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                    high(_mm256_srli_epi16(hb, 6)),
                ),
            ];
            for (k, q) in q.into_iter().enumerate() {
                // SAFETY: 32k + 32 <= 128 inside this half; the shuffle table row is 16 bytes.
                let (qy, pat) = unsafe {
                    (
                        ld256(y.qs.as_ptr().add(128 * n + 32 * k)),
                        ld128(Q6K_SCALE_PAIRS[4 * n + k].as_ptr()),
                    )
                };
                // quants are stored +32: (q - 32)·y per pair of elements, then scaled
                let p =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(q, qy), _mm256_maddubs_epi16(m32, qy));
                let sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, pat));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(sc, p));
            }
        }
        sum += kquant_block(f16(x.d), 0.0, y.d(), hsum_epi32(sumi), 0);
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_f32(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 4).min(a.len() / 4);
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (j, acc) in acc.iter_mut().enumerate() {
            // SAFETY: i + 8j + 8 <= n f32 values are in both rows.
            let (x, y) = unsafe {
                (
                    _mm256_loadu_ps(w.as_ptr().add(4 * (i + 8 * j)).cast()),
                    _mm256_loadu_ps(a.as_ptr().add(4 * (i + 8 * j)).cast()),
                )
            };
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
        i += 32;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut sum = hsum_ps(s);
    for j in i..n {
        let x = f32::from_le_bytes([w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]]);
        let y = f32::from_le_bytes([a[4 * j], a[4 * j + 1], a[4 * j + 2], a[4 * j + 3]]);
        sum += x * y;
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_f16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 2).min(a.len() / 2);
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (j, acc) in acc.iter_mut().enumerate() {
            // SAFETY: i + 8j + 8 <= n f16 values are in both rows.
            let (x, y) = unsafe {
                (
                    _mm256_cvtph_ps(ld128(w.as_ptr().add(2 * (i + 8 * j)))),
                    _mm256_cvtph_ps(ld128(a.as_ptr().add(2 * (i + 8 * j)))),
                )
            };
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
        i += 32;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut sum = hsum_ps(s);
    for j in i..n {
        sum += f16([w[2 * j], w[2 * j + 1]]) * f16([a[2 * j], a[2 * j + 1]]);
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_bf16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 2).min(a.len() / 2);
    // a bf16 is the top half of an f32: in each 32-bit lane the even element moves up, the
    // odd one is already in place (the order of the products does not matter to the sum)
    let high = _mm256_set1_epi32(0xFFFF_0000u32 as i32);
    let even = |v: __m256i| _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    let odd = |v: __m256i| _mm256_castsi256_ps(_mm256_and_si256(v, high));
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for j in 0..2 {
            // SAFETY: i + 16j + 16 <= n bf16 values are in both rows.
            let (x, y) = unsafe {
                (
                    ld256(w.as_ptr().add(2 * (i + 16 * j))),
                    ld256(a.as_ptr().add(2 * (i + 16 * j))),
                )
            };
            acc[2 * j] = _mm256_fmadd_ps(even(x), even(y), acc[2 * j]);
            acc[2 * j + 1] = _mm256_fmadd_ps(odd(x), odd(y), acc[2 * j + 1]);
        }
        i += 32;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut sum = hsum_ps(s);
    let bf = |b: &[u8], j: usize| {
        f32::from_bits((u16::from_le_bytes([b[2 * j], b[2 * j + 1]]) as u32) << 16)
    };
    for j in i..n {
        sum += bf(w, j) * bf(a, j);
    }
    sum
}
