//! AVX2 kernels over the interleaved Q5_K layout (Q5_K × 8): Q4_K × 8's kernels
//! (`avx2_x8_k::q4_k_block` with `Q5`) with each nibble's fifth bit ORed in from the
//! high-bit plane. The scales, mins and float terms are Q4_K's (the same bytes at the same
//! offsets), so the results round as `quant::kquants::dot_q8_k` does, bit for bit.

use core::arch::x86_64::*;

use super::avx2::ld256;
use super::avx2_x8::{arr, by_token_count8, tiles_of};
use super::avx2_x8_k::{kquant_gemm, kquant_gemv, q4_k_block, super_blocks, KQUANT_TILE};
use crate::quant::interleaved::{q5_k, BatchRows, ROWS};
use crate::quant::kquants::q8_k::BlockQ8K;
use crate::quant::kquants::QK_K;

/// The fifth bits of sub-block `J` in quant chunk `8(J / 2) + c` of a Q5_K × 8 group block,
/// as 16 (bit 4) or 0 per byte: bit `J` of qh chunk `c`, moved to bit 4 (the 16-bit shifts
/// move no set bit across a byte into bit 4: only bit 4 is kept).
///
/// # Safety
/// `p` must point at a Q5_K × 8 group block (1408 bytes); `c < 8`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn fifth_bits<const J: usize>(p: *const u8, c: usize) -> __m256i {
    // SAFETY: qh chunk c < 8 of the group block (the caller's contract).
    let qh = unsafe { ld256(p.add(q5_k::QH + 32 * c)) };
    let moved = if J < 4 {
        _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - J as i32))
    } else {
        _mm256_srl_epi16(qh, _mm_cvtsi32_si128(J as i32 - 4))
    };
    _mm256_and_si256(moved, _mm256_set1_epi8(0x10))
}

/// [`q4_k_block`] of Q5_K.
///
/// # Safety
/// `p` must point at a Q5_K × 8 group block (1408 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_k_block<const T: usize>(p: *const u8, ys: [&BlockQ8K; T]) -> [__m256; T] {
    // SAFETY: the caller's contract.
    unsafe { q4_k_block::<T, true>(p, ys) }
}

kquant_gemv!("avx2,fma,f16c": gemv_q5_k, q5_k_block::<1>, q5_k::GROUP_BLOCK);
kquant_gemm!(gemm_q5_k, gemm_q5_k_t, q5_k_block, q5_k::GROUP_BLOCK);
