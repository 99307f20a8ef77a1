//! AVX2 kernels over the interleaved layouts of `quant::interleaved`: each 256-bit vector
//! holds the same four elements of eight rows, one broadcast of four activation bytes
//! serves all eight, and lane `r` accumulates row `r`. Per row and block the arithmetic is
//! the scalar kernel's, `sum += isum as f32 * (dx * dy)`, so results are bit-identical to it.

use core::arch::x86_64::*;

use super::avx2::{f16, ld128, ld256};
use crate::quant::interleaved::{q4_0, q5_0, q8_0, ROWS};
use crate::quant::legacy::{blocks, BlockQ8_0, QK};

/// Four activation bytes at `p`, broadcast to every 32-bit lane.
///
/// # Safety
/// `p` must be valid for reading 4 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bcast4<T>(p: *const T) -> __m256i {
    // SAFETY: the caller guarantees 4 readable bytes.
    _mm256_set1_epi32(unsafe { p.cast::<i32>().read_unaligned() })
}

/// Adds one block's eight row sums to the eight accumulators: `acc += isum * (dx * dy)`
/// with `dx` the eight f16 scales at `d`.
///
/// # Safety
/// `d` must be valid for reading 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn accumulate(acc: __m256, isum: __m256i, d: *const u8, y: &BlockQ8_0) -> __m256 {
    // SAFETY: the caller guarantees the 8 scales.
    let dx = _mm256_cvtph_ps(unsafe { ld128(d) });
    let s = _mm256_mul_ps(dx, _mm256_set1_ps(f16(y.d)));
    _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s))
}

/// Runs `block(group_block_ptr, y, b)` over every block of every group and stores the
/// eight sums of each group.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn for_groups(
    cols: usize,
    w: &[u8],
    a: &[u8],
    out: &mut [f32],
    group_block: usize,
    mut block: impl FnMut(*const u8, &BlockQ8_0, usize) -> __m256i,
) {
    let nb = cols / QK;
    let ys = &blocks::<BlockQ8_0>(a)[..nb];
    for (g, o) in w
        .chunks_exact(nb * group_block)
        .zip(out.chunks_exact_mut(ROWS))
    {
        // SAFETY (all blocks below): `g` holds nb group blocks of `group_block` bytes.
        unsafe {
            let mut acc = _mm256_setzero_ps();
            for (b, y) in ys.iter().enumerate() {
                let p = g.as_ptr().add(b * group_block);
                acc = accumulate(acc, block(p, y, b), p, y);
            }
            _mm256_storeu_ps(o.as_mut_ptr(), acc);
        }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemv_q8_0(cols: usize, w: &[u8], a: &[u8], _sums: &[i32], out: &mut [f32]) {
    let ones = _mm256_set1_epi16(1);
    for_groups(cols, w, a, out, q8_0::GROUP_BLOCK, |p, y, _| {
        let mut isum = _mm256_setzero_si256();
        for c in 0..8 {
            // SAFETY: chunk c of the block's 256 quant bytes; 4 activation bytes at 4c.
            let (x, yv) = unsafe { (ld256(p.add(16 + 32 * c)), bcast4(y.qs.as_ptr().add(4 * c))) };
            let prod = _mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(yv, x));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(prod, ones));
        }
        isum
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemv_q4_0(cols: usize, w: &[u8], a: &[u8], sums: &[i32], out: &mut [f32]) {
    let ones = _mm256_set1_epi16(1);
    let low4 = _mm256_set1_epi8(0x0F);
    for_groups(cols, w, a, out, q4_0::GROUP_BLOCK, |p, y, b| {
        // unsigned nibbles × y, summed in i16 (8 × 2·15·127 < 2^15), minus 8·Σy
        let mut s16 = _mm256_setzero_si256();
        for c in 0..4 {
            // SAFETY: chunk c of the block's 128 quant bytes; activation bytes 4c and 16+4c.
            let (x, y0, y1) = unsafe {
                (
                    ld256(p.add(16 + 32 * c)),
                    bcast4(y.qs.as_ptr().add(4 * c)),
                    bcast4(y.qs.as_ptr().add(16 + 4 * c)),
                )
            };
            let lo = _mm256_and_si256(x, low4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(lo, y0));
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(hi, y1));
        }
        _mm256_sub_epi32(_mm256_madd_epi16(s16, ones), _mm256_set1_epi32(8 * sums[b]))
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemv_q5_0(cols: usize, w: &[u8], a: &[u8], sums: &[i32], out: &mut [f32]) {
    let ones = _mm256_set1_epi16(1);
    let low4 = _mm256_set1_epi8(0x0F);
    let sixteen = _mm256_set1_epi8(0x10);
    // lane r (4 bytes) takes row r's bit byte; byte j of a lane tests bit j (low elements)
    // or bit 4 + j (high elements)
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7,
        7, 7,
    );
    let lo_bit = _mm256_set1_epi32(0x0804_0201);
    let hi_bit = _mm256_set1_epi32(0x8040_2010_u32 as i32);
    let fifth = |bits: __m256i, probe: __m256i| {
        _mm256_and_si256(
            _mm256_cmpeq_epi8(_mm256_and_si256(bits, probe), probe),
            sixteen,
        )
    };
    for_groups(cols, w, a, out, q5_0::GROUP_BLOCK, |p, y, b| {
        // unsigned 5-bit values × y: at most 4 products per i16 (4 × 2·31·127 < 2^15)
        let mut isum = _mm256_set1_epi32(-16 * sums[b]);
        for half in 0..2 {
            let mut s16 = _mm256_setzero_si256();
            for c in 2 * half..2 * half + 2 {
                // SAFETY: chunk c's 8 bit bytes and 32 quant bytes; activation bytes 4c and
                // 16+4c.
                let (h8, x, y0, y1) = unsafe {
                    (
                        p.add(16 + 8 * c).cast::<i64>().read_unaligned(),
                        ld256(p.add(48 + 32 * c)),
                        bcast4(y.qs.as_ptr().add(4 * c)),
                        bcast4(y.qs.as_ptr().add(16 + 4 * c)),
                    )
                };
                let bits = _mm256_shuffle_epi8(_mm256_set1_epi64x(h8), spread);
                let lo = _mm256_or_si256(_mm256_and_si256(x, low4), fifth(bits, lo_bit));
                let hi = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(x, 4), low4),
                    fifth(bits, hi_bit),
                );
                s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(lo, y0));
                s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(hi, y1));
            }
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(s16, ones));
        }
        isum
    })
}
