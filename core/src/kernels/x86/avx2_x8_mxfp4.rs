//! AVX2 kernels over MXFP4 × 8 (`quant::interleaved::mxfp4`): the Q4_0 × 8 kernels' scheme
//! (one 256-bit load holds four codes of eight rows, a broadcast of four activation bytes
//! serves all eight, lane `r` accumulates row `r`) with two changes.
//!
//! - The codes go through a byte shuffle (`vpshufb`) with the table of doubled E2M1 values
//!   plus 12 (`KVALUES[code] + 12`, 0..=24): unsigned, so `vpmaddubsw(w + 12, y)` takes them
//!   as they are (no sign trick), and `12 · Σy` (the activation's block sum,
//!   `interleaved::block_sums`) is taken off each block's integer sum. A pair of products is
//!   at most 2 · 24 · 128 in size, so the i16 sums take two chunks (four pairs per lane) and
//!   are widened twice per block.
//! - A block's scale is ggml's half E8M0 scale, `2^(e - 128)`, made from the eight exponent
//!   bytes with integer operations (exact, subnormals included: `quant::mxfp4::e8m0_half`).
//!
//! Per row and block the arithmetic is the scalar kernel's (`quant::mxfp4::vec_dot_mxfp4_q8_0`,
//! ggml's generic one): the exact integer sum, then `sum += isum as f32 * (e · dy)`, block
//! after block, so the results are bit-identical to it (not to llama.cpp's AVX2 kernel, which
//! sums the blocks in two interleaved accumulators; the row layout's kernels in `mxfp4.rs`
//! follow that one). The batch kernel takes each block's codes apart once per tile of
//! [`GEMM_TOKENS`] tokens and gives every token the matrix × vector kernel's bits.

use core::arch::x86_64::*;

use super::avx2::{f16, ld128, ld256};
use super::avx2_x8::{accumulate, arr, bcast_pair, by_token_count, prefetch_ahead, token_tiles};
use crate::quant::interleaved::{mxfp4::GROUP_BLOCK, BatchRows, GEMM_TOKENS, ROWS};
use crate::quant::legacy::{blocks, BlockQ8_0, QK};
use crate::quant::mxfp4::KVALUES;

/// What the shuffle table adds to every doubled E2M1 value to make it unsigned.
const OFFSET: i32 = 12;

/// `KVALUES[code] + OFFSET` by code.
const TABLE: [i8; 16] = {
    let mut t = [0i8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = KVALUES[i] + OFFSET as i8;
        i += 1;
    }
    t
};

/// The eight rows' block scales, `2^(e - 128)` for the exponent bytes at `p`, exactly as
/// `quant::mxfp4::e8m0_half` makes them.
///
/// For `e` in 1..=254, `e << 23` as float bits is `2^(e - 127)`, and halving it is exact
/// (2^-127 is a subnormal, exact too): three vector operations. A group block with an `e` of 0
/// (2^-128, which those bits would make 0) or 255 (2^127, not infinity) — rare, an all-zero
/// block or an overflowed one — takes the exact integer construction instead (`(e - 1) << 23`
/// from `e = 2` on, the subnormals `0x0020_0000 << e` below); a scalar test of the eight
/// bytes, off the vector ports, picks the path.
///
/// # Safety
/// `p` must be valid for reading 8 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scales8(p: *const u8) -> __m256 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOPS: u64 = 0x8080_8080_8080_8080;
    let has_zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & TOPS != 0;
    // SAFETY: the caller guarantees 8 readable bytes.
    let bytes = unsafe { p.cast::<u64>().read_unaligned() };
    let e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes as i64));
    if !has_zero_byte(bytes) && !has_zero_byte(!bytes) {
        let pow = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e));
        return _mm256_mul_ps(pow, _mm256_set1_ps(0.5));
    }
    let normal = _mm256_slli_epi32::<23>(_mm256_sub_epi32(e, _mm256_set1_epi32(1)));
    let subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x0020_0000), e);
    let is_normal = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(1));
    _mm256_castsi256_ps(_mm256_blendv_epi8(subnormal, normal, is_normal))
}

/// The integer sums `Σ KVALUES[code] · y` of an MXFP4 × 8 block against `T` tokens, given
/// each token's block sum: `Σ (w + 12) · y` from unsigned × signed pairs (`vpmaddubsw`, at
/// most 2 · 24 · 128 = 6144 each), summed in i16 over two chunks (four pairs per i16 lane,
/// at most 24576: exact) and widened to i32, starting from `-12 · Σy`.
///
/// # Safety
/// `p` must point at an MXFP4 × 8 group block (136 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn block<const T: usize>(p: *const u8, ys: [&BlockQ8_0; T], sums: [i32; T]) -> [__m256i; T] {
    let ones = _mm256_set1_epi16(1);
    let low4 = _mm256_set1_epi8(0x0F);
    // SAFETY: the table is 16 bytes.
    let table = _mm256_broadcastsi128_si256(unsafe { ld128(TABLE.as_ptr()) });
    let mut isum: [__m256i; T] = arr(|t| _mm256_set1_epi32(-OFFSET * sums[t]));
    for half in 0..2 {
        let mut s16 = [_mm256_setzero_si256(); T];
        for c in 2 * half..2 * half + 2 {
            // SAFETY: chunk c < 4 of the block's 128 code bytes, after its 8 exponent bytes
            // (the caller's contract).
            let x = unsafe { ld256(p.add(ROWS + 32 * c)) };
            let lo = _mm256_shuffle_epi8(table, _mm256_and_si256(x, low4));
            let hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(x, 4), low4));
            for (s16, y) in s16.iter_mut().zip(&ys) {
                // SAFETY: activation bytes 4c and 16 + 4c, c < 4.
                let (y0, y1) = unsafe { bcast_pair(y, c) };
                *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(lo, y0));
                *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(hi, y1));
            }
        }
        for (isum, &s16) in isum.iter_mut().zip(&s16) {
            *isum = _mm256_add_epi32(*isum, _mm256_madd_epi16(s16, ones));
        }
    }
    isum
}

/// `interleaved::GemvX8Fn` for MXFP4 × 8: group after group (one weight stream), each block
/// prefetched ahead as the legacy kernels do. `sums` must hold the activation's block sums.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemv_mxfp4(cols: usize, w: &[u8], a: &[u8], sums: &[i32], out: &mut [f32]) {
    let nb = cols / QK;
    let group_bytes = nb * GROUP_BLOCK;
    if group_bytes == 0 {
        out.fill(0.0);
        return;
    }
    let (ys, sums) = (&blocks::<BlockQ8_0>(a)[..nb], &sums[..nb]);
    for (g, o) in w.chunks_exact(group_bytes).zip(out.chunks_exact_mut(ROWS)) {
        let mut acc = _mm256_setzero_ps();
        for (b, (y, &s)) in ys.iter().zip(sums).enumerate() {
            // SAFETY: `g` holds the group's nb blocks of GROUP_BLOCK bytes (`chunks_exact`)
            // and b < nb.
            let p = unsafe { g.as_ptr().add(b * GROUP_BLOCK) };
            prefetch_ahead(p, GROUP_BLOCK);
            // SAFETY: p is block b of the group: 136 bytes, the first 8 its exponents.
            let (i, dx) = unsafe { (block::<1>(p, [y], [s])[0], scales8(p)) };
            acc = accumulate(acc, i, dx, _mm256_set1_ps(f16(y.d)));
        }
        // SAFETY: `o` is 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), acc) };
    }
}

/// The batch kernel for one group (`GemmX8Fn`'s contract for one group; the `safe_gemms`
/// wrapper runs it group after group): the tokens [`GEMM_TOKENS`] at a time.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemm_mxfp4(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    // one tile of tokens (an expert chosen by a few of a step's tokens) streams the group from
    // memory once: prefetched as the matrix × vector kernel does
    // (a flag, not a const parameter: two instantiations per token count made LLVM call
    // `block` out of line)
    let prefetch = acts.len() <= GEMM_TOKENS;
    token_tiles(acts, out, |a, o| {
        by_token_count!(a.len(), gemm_t(cols, w, a, o, prefetch))
    });
}

/// One group against `T` tokens: each block's codes taken apart once for the `T`, each
/// token's float sum the matrix × vector kernel's (the batch carries the tokens' block sums
/// and their scales as f32, exact).
#[target_feature(enable = "avx2,fma,f16c")]
fn gemm_t<const T: usize>(
    cols: usize,
    w: &[u8],
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    prefetch: bool,
) {
    let nb = cols / QK;
    assert!(
        w.len() >= nb * GROUP_BLOCK,
        "a whole group of {cols} columns"
    );
    let ys: [&[BlockQ8_0]; T] = arr(|t| &blocks::<BlockQ8_0>(acts.bytes(t))[..nb]);
    let dys: [&[f32]; T] = arr(|t| &acts.scales(t)[..nb]);
    let sums: [&[i32]; T] = arr(|t| &acts.sums(t)[..nb]);
    let mut acc = [_mm256_setzero_ps(); T];
    for b in 0..nb {
        // SAFETY: block b < nb starts inside the group's nb · GROUP_BLOCK bytes (asserted).
        let p = unsafe { w.as_ptr().add(b * GROUP_BLOCK) };
        if prefetch {
            prefetch_ahead(p, GROUP_BLOCK);
        }
        let yb: [&BlockQ8_0; T] = arr(|t| &ys[t][b]);
        let sb: [i32; T] = arr(|t| sums[t][b]);
        // SAFETY: p is block b of the group: 136 bytes, the first 8 its exponents.
        let (isum, dx) = unsafe { (block::<T>(p, yb, sb), scales8(p)) };
        for (t, acc) in acc.iter_mut().enumerate() {
            *acc = accumulate(*acc, isum[t], dx, _mm256_set1_ps(dys[t][b]));
        }
    }
    for (o, acc) in out.iter_mut().zip(acc) {
        // SAFETY: `o` is 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), acc) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests::table_or_skip;
    use crate::kernels::Isa;
    use crate::quant::mxfp4::e8m0_half;

    /// Every exponent byte in every lane, in groups with and without the bytes the fast path
    /// misses (0 and 255), against `e8m0_half` bit for bit.
    #[test]
    fn block_scales_are_e8m0_half() {
        if table_or_skip(Isa::Avx2).is_none() {
            return;
        }
        let mut groups: alloc::vec::Vec<[u8; 8]> = (0..256)
            .map(|i| core::array::from_fn(|r| (i + 37 * r) as u8))
            .collect();
        // groups of normal exponents only: the fast path
        groups.extend((0..254).map(|i| core::array::from_fn(|r| 1 + ((i + 29 * r) % 254) as u8)));
        for g in groups {
            // SAFETY: AVX2, FMA and F16C are present (the table exists); `g` is 8 bytes.
            let got = unsafe { scales8(g.as_ptr()) };
            let mut lanes = [0f32; 8];
            // SAFETY: 8 floats.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), got) };
            for (e, x) in g.iter().zip(lanes) {
                assert_eq!(x.to_bits(), e8m0_half(*e).to_bits(), "e = {e} in {g:?}");
            }
        }
    }
}
