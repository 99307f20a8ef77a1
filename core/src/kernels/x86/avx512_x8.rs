//! AVX-512 VNNI batch kernels over the legacy interleaved layouts (Q4_0, Q5_0, Q8_0 × 8),
//! on 256-bit vectors (AVX-512 VL: 32 registers, and `vpdpbusd` takes its broadcast
//! activation bytes straight from memory).
//!
//! Each group is decoded once per `DECODE_BLOCKS` blocks into unsigned bytes with an
//! offset (`Decoded`, as the AVX2 Q5_0 kernel does): Q4_0 nibbles (offset 8), Q5_0 5-bit
//! values (16) and Q8_0 quants with their sign bit flipped (`x ^ 0x80 = x + 128`, offset
//! 128). Per block and token one `vpdpbusd` per vector then sums four `u8 × i8` products into
//! each row's i32 lane (no i16 stage, so nothing saturates), and the offset comes off with
//! the token's block sum: `Σ (q - o)·y = Σ q·y - o·Σ y`. The integer sums are exact and the
//! float accumulation is the scalar kernel's, `sum += isum as f32 * (dx * dy)`, so the
//! results are the AVX2 kernels' and the scalar kernel's, bit for bit.
//!
//! A tile runs [`TILE`] tokens: with 32 registers their eight i32 chains and eight float
//! sums stay in registers, and eight independent `vpdpbusd` chains cover its latency.

use core::arch::x86_64::*;
use core::array::from_fn;

use super::avx2::ld256;
use super::avx2_x8::{
    accumulate, bcast4, gemm_decoded, q5_0_decode, scales8, Decoded,
};
use crate::quant::interleaved::{q4_0, q5_0, q8_0, BatchRows, ROWS};
use crate::quant::legacy::{blocks, BlockQ8_0};

/// Tokens a tile runs together.
const TILE: usize = 8;

/// `T` tokens over decoded blocks `b0..b0 + dec.len()` whose values carry `+ (1 << shift)`:
/// each token's float sum, carried in `out`, takes `(Σ q·y - Σy << shift) · (dx · dy)` per
/// block.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn vnni_tile<const T: usize>(
    dec: &[Decoded],
    b0: usize,
    acts: BatchRows<'_>,
    shift: i32,
    out: &mut [[f32; ROWS]],
) {
    let m = dec.len();
    assert!(acts.len() == T && out.len() == T, "a tile of {T} tokens");
    let ys: [&[BlockQ8_0]; T] = from_fn(|t| &blocks::<BlockQ8_0>(acts.bytes(t))[b0..b0 + m]);
    let dys: [&[f32]; T] = from_fn(|t| &acts.scales(t)[b0..b0 + m]);
    let sums: [&[i32]; T] = from_fn(|t| {
        let s = acts.sums(t);
        assert!(!s.is_empty(), "the batch carries its block sums");
        &s[b0..b0 + m]
    });
    let shift = _mm_cvtsi32_si128(shift);
    // SAFETY: `out[t]` is 8 floats.
    let mut acc: [__m256; T] = from_fn(|t| unsafe { _mm256_loadu_ps(out[t].as_ptr()) });
    for (i, blk) in dec.iter().enumerate() {
        // SAFETY (the reads below): i < m, the length of every token's slices.
        let mut isum: [__m256i; T] = from_fn(|t| unsafe {
            let s = _mm256_set1_epi32(*sums[t].as_ptr().add(i));
            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_sll_epi32(s, shift))
        });
        for (j, &q) in blk.q.iter().enumerate() {
            for (isum, y) in isum.iter_mut().zip(&ys) {
                // SAFETY: activation bytes 4j..4j + 4 of block i's 32.
                let y = unsafe { bcast4((*y.as_ptr().add(i)).qs.as_ptr().add(4 * j)) };
                *isum = _mm256_dpbusd_epi32(*isum, q, y);
            }
        }
        for t in 0..T {
            // SAFETY: as above.
            let dy = unsafe { _mm256_broadcast_ss(&*dys[t].as_ptr().add(i)) };
            acc[t] = accumulate(acc[t], isum[t], blk.d, dy);
        }
    }
    for (o, acc) in out.iter_mut().zip(acc) {
        // SAFETY: `o` is 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), acc) };
    }
}

/// Calls `vnni_tile::<T>` with `T` the tile's token count (1 ..= [`TILE`]).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn tile_any(dec: &[Decoded], b0: usize, acts: BatchRows<'_>, shift: i32, o: &mut [[f32; ROWS]]) {
    match acts.len() {
        0 => {}
        1 => vnni_tile::<1>(dec, b0, acts, shift, o),
        2 => vnni_tile::<2>(dec, b0, acts, shift, o),
        3 => vnni_tile::<3>(dec, b0, acts, shift, o),
        4 => vnni_tile::<4>(dec, b0, acts, shift, o),
        5 => vnni_tile::<5>(dec, b0, acts, shift, o),
        6 => vnni_tile::<6>(dec, b0, acts, shift, o),
        7 => vnni_tile::<7>(dec, b0, acts, shift, o),
        _ => vnni_tile::<8>(dec, b0, acts, shift, o),
    }
}

/// # Safety
/// `p` must point at a Q8_0 × 8 group block (272 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q8_0_decode(p: *const u8) -> Decoded {
    let flip = _mm256_set1_epi8(i8::MIN);
    // SAFETY: the block's scales and 8 chunks of 32 quant bytes (the caller's contract).
    unsafe {
        Decoded {
            q: from_fn(|c| _mm256_xor_si256(ld256(p.add(16 + 32 * c)), flip)),
            d: scales8(p),
        }
    }
}

/// # Safety
/// `p` must point at a Q4_0 × 8 group block (144 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q4_0_decode(p: *const u8) -> Decoded {
    let low4 = _mm256_set1_epi8(0x0F);
    // SAFETY: the block's 4 chunks of 32 quant bytes (the caller's contract).
    let x: [__m256i; 4] = from_fn(|c| unsafe { ld256(p.add(16 + 32 * c)) });
    Decoded {
        // byte k of chunk c: element 4c + k (low nibble) and 16 + 4c + k (high nibble)
        q: from_fn(|j| {
            let c = x[j % 4];
            let c = if j < 4 { c } else { _mm256_srli_epi16(c, 4) };
            _mm256_and_si256(c, low4)
        }),
        // SAFETY: the block's scales.
        d: unsafe { scales8(p) },
    }
}

/// Defines a batch kernel `$gemm` over a decoder whose values carry `+ 1 << $shift`.
macro_rules! vnni_gemm {
    ($gemm:ident, $decode:ident, $group_block:expr, $shift:expr) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub(super) fn $gemm(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
            // SAFETY: the decoder reads one group block.
            unsafe {
                gemm_decoded(
                    cols,
                    w,
                    acts,
                    out,
                    $group_block,
                    TILE,
                    |p| $decode(p),
                    |d, b0, a, o| tile_any(d, b0, a, $shift, o),
                )
            }
        }
    };
}

vnni_gemm!(gemm_q8_0, q8_0_decode, q8_0::GROUP_BLOCK, 7);
vnni_gemm!(gemm_q4_0, q4_0_decode, q4_0::GROUP_BLOCK, 3);
vnni_gemm!(gemm_q5_0, q5_0_decode, q5_0::GROUP_BLOCK, 4);
