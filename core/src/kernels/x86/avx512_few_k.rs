//! AVX-512 VNNI batch kernels for a few tokens over the interleaved k-quant layouts (Q4_K × 8,
//! Q6_K × 8): the decode
//! steps of a few sequences sharing one step, and speculative decoding's verification steps
//! (a pending token and a handful of drafted ones).
//!
//! Each group (eight rows, one 256-bit vector) runs against tiles of up to eight tokens
//! (`avx512_few::FEW_TILE`); every chunk of quants is taken apart once per tile, in
//! registers, and each token's part is one 256-bit `vpdpbusd` per chunk and nibble half
//! (AVX2's kernel needs `vpmaddubsw` and an add, and holds four tokens in its sixteen
//! registers). A sub-block's exact i32 sum is scaled with `vpmulld` by its scale: the same
//! integers as AVX2's i16 sums scaled with `vpmaddwd`, and the same float term per
//! super-block (`avx2_x8_k::q4_k_terms`, `q6_k_terms`), so the results are the same bits
//! (the interleaved parity tests compare them with the matrix × vector kernels for 1 to 27
//! tokens).

use core::arch::x86_64::*;

use super::avx2::ld256;
use super::avx2_x8::{arr, bcast4, prefetch_far};
use super::avx2_x8_k::{q4_k_scale_i32, q4_k_scales, q4_k_terms, q6_k_pair, q6_k_terms};
use crate::quant::interleaved::{q4_k, q6_k, BatchRows, ROWS};
use crate::quant::kquants::q8_k::{self, BlockQ8K};
use crate::quant::kquants::QK_K;

/// One Q4_K × 8 super-block against `T` tokens: each token's eight float terms.
///
/// # Safety
/// `p` must point at a Q4_K × 8 group block (1152 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q4_k_block<const T: usize>(p: *const u8, ys: [&BlockQ8K; T]) -> [__m256; T] {
    let low4 = _mm256_set1_epi8(0x0F);
    // SAFETY: the caller's contract.
    let scales = unsafe { q4_k_scales(p) };
    let mut isum = [_mm256_setzero_si256(); T];
    // chunks 8k..8k + 8 hold sub-block 2k in their low nibbles and 2k + 1 in their high ones
    for k in 0..4 {
        let mut lo = [_mm256_setzero_si256(); T];
        let mut hi = [_mm256_setzero_si256(); T];
        for c in 0..8 {
            // SAFETY: chunk 8k + c of the 32 quant chunks.
            let x = unsafe { ld256(p.add(q4_k::QS + 32 * (8 * k + c))) };
            let ql = _mm256_and_si256(x, low4);
            let qh = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
            let at = 64 * k + 4 * c;
            for t in 0..T {
                // SAFETY: activation bytes at..at + 4 and at + 32..at + 36 of the 256.
                let (y0, y1) = unsafe {
                    (
                        bcast4(ys[t].qs.as_ptr().add(at)),
                        bcast4(ys[t].qs.as_ptr().add(at + 32)),
                    )
                };
                lo[t] = _mm256_dpbusd_epi32(lo[t], ql, y0);
                hi[t] = _mm256_dpbusd_epi32(hi[t], qh, y1);
            }
        }
        let (sl, sh) = (
            q4_k_scale_i32(&scales, 2 * k),
            q4_k_scale_i32(&scales, 2 * k + 1),
        );
        for t in 0..T {
            isum[t] = _mm256_add_epi32(
                isum[t],
                _mm256_add_epi32(_mm256_mullo_epi32(lo[t], sl), _mm256_mullo_epi32(hi[t], sh)),
            );
        }
    }
    // SAFETY: the caller's contract.
    unsafe { q4_k_terms(p, ys, isum) }
}

/// One Q6_K × 8 super-block against `T` tokens: each token's eight float terms.
///
/// # Safety
/// `p` must point at a Q6_K × 8 group block (1680 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q6_k_block<const T: usize>(p: *const u8, ys: [&BlockQ8K; T]) -> [__m256; T] {
    let low6 = _mm256_set1_epi8(0x3F);
    let top2 = _mm256_set1_epi8(0xC0u8 as i8);
    // The quants are stored +32 (`q6_k_terms` takes 32 · Σ scale · bsum off). Triple c of
    // half n holds elements 128n + 32k + 4c..+4 of quant k < 4 (k < 3: the low six bits of
    // vector k; k = 3: their top two bits): scale group 8n + 2k + c / 4, whose scale is half
    // c / 4 of the i16 pair 4n + k.
    let mut isum = [_mm256_setzero_si256(); T];
    for n in 0..2 {
        for k in 0..4 {
            let mut lo = [_mm256_setzero_si256(); T];
            let mut hi = [_mm256_setzero_si256(); T];
            for c in 0..8 {
                let at = q6_k::QS + 96 * (8 * n + c);
                // SAFETY: the three chunk vectors of triple 8n + c.
                let x = |i: usize| unsafe { ld256(p.add(at + 32 * i)) };
                let q = if k < 3 {
                    _mm256_and_si256(x(k), low6)
                } else {
                    // bits 6-7 of x0, x1, x2 to bits 0-1, 2-3, 4-5 (only zero bits cross
                    // bytes in the shifts)
                    let f = _mm256_or_si256(
                        _mm256_srli_epi16(_mm256_and_si256(x(0), top2), 2),
                        _mm256_and_si256(x(1), top2),
                    );
                    let f = _mm256_or_si256(_mm256_srli_epi16(f, 2), _mm256_and_si256(x(2), top2));
                    _mm256_srli_epi16(f, 2)
                };
                let s = if c < 4 { &mut lo } else { &mut hi };
                for (s, y) in s.iter_mut().zip(&ys) {
                    // SAFETY: activation bytes 128n + 32k + 4c + 0..4 of the 256.
                    let y = unsafe { bcast4(y.qs.as_ptr().add(128 * n + 32 * k + 4 * c)) };
                    *s = _mm256_dpbusd_epi32(*s, q, y);
                }
            }
            // SAFETY: pair 4n + k < 8.
            let pair = unsafe { q6_k_pair(p, 4 * n + k) };
            // the pair's halves, sign-extended to the lane
            let sl = _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16);
            let sh = _mm256_srai_epi32(pair, 16);
            for t in 0..T {
                isum[t] = _mm256_add_epi32(
                    isum[t],
                    _mm256_add_epi32(_mm256_mullo_epi32(lo[t], sl), _mm256_mullo_epi32(hi[t], sh)),
                );
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe { q6_k_terms(p, ys, isum) }
}

/// One group against a tile of `T` tokens through the super-block function `block` (over
/// group blocks of `group_block` bytes): each token's eight sums in `out[t]` (super-block
/// terms added in order, as the scalar kernel adds them).
///
/// # Safety
/// `block` must read only the `group_block` bytes at its pointer.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn tile<const T: usize>(
    cols: usize,
    w: &[u8],
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    group_block: usize,
    block: impl Fn(*const u8, [&BlockQ8K; T]) -> [__m256; T],
) {
    let nb = cols / QK_K;
    assert!(
        w.len() >= nb * group_block && acts.len() == T && out.len() == T,
        "a whole group of {cols} columns against {T} tokens"
    );
    let ys: [&[BlockQ8K]; T] = arr(|t| &q8_k::blocks(acts.bytes(t))[..nb]);
    let mut acc = [_mm256_setzero_ps(); T];
    #[allow(clippy::needless_range_loop)] // super-block b of every token
    for b in 0..nb {
        // SAFETY: super-block b of the group (asserted above).
        let p = unsafe { w.as_ptr().add(b * group_block) };
        // the weights stream from memory: ask for the next super-block's lines early
        prefetch_far(p, group_block);
        let terms = block(p, arr(|t| &ys[t][b]));
        for (acc, term) in acc.iter_mut().zip(terms) {
            *acc = _mm256_add_ps(*acc, term);
        }
    }
    for (o, acc) in out.iter_mut().zip(acc) {
        // SAFETY: `o` is 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), acc) };
    }
}

/// Defines `$group`: one group against up to eight tokens (`T` known at compile time) over
/// the super-block function `$block`.
macro_rules! few_group {
    ($group:ident, $tile:ident, $block:ident, $group_block:expr) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        fn $tile<const T: usize>(
            cols: usize,
            w: &[u8],
            acts: BatchRows<'_>,
            out: &mut [[f32; ROWS]],
        ) {
            // SAFETY: the block function reads one group block.
            unsafe { tile::<T>(cols, w, acts, out, $group_block, |p, y| $block::<T>(p, y)) }
        }

        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub(super) fn $group(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
            match acts.len() {
                0 => {}
                1 => $tile::<1>(cols, w, acts, out),
                2 => $tile::<2>(cols, w, acts, out),
                3 => $tile::<3>(cols, w, acts, out),
                4 => $tile::<4>(cols, w, acts, out),
                5 => $tile::<5>(cols, w, acts, out),
                6 => $tile::<6>(cols, w, acts, out),
                7 => $tile::<7>(cols, w, acts, out),
                _ => $tile::<8>(cols, w, acts, out),
            }
        }
    };
}

few_group!(q4_k_group, q4_k_tile, q4_k_block, q4_k::GROUP_BLOCK);
few_group!(q6_k_group, q6_k_tile, q6_k_block, q6_k::GROUP_BLOCK);
