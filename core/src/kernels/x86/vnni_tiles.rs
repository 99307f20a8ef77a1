//! VNNI batch kernels for a few tokens on 256-bit vectors, one source for two ISAs (as
//! `vnni_gemv`): [`vnni_tiles!`] compiles them for AVX-512 VNNI with VL (module `avx512_tiles`,
//! tiles of eight tokens in its 32 registers) and for AVX-VNNI (module `avx_vnni_tiles`, tiles
//! of four in its sixteen).
//!
//! The k-quants (Q4_K × 8, Q6_K × 8): each group (eight rows, one 256-bit vector) runs
//! against tiles of tokens; every chunk of quants is taken apart once per tile, in registers,
//! and each token's part is one 256-bit `vpdpbusd` per chunk and nibble half (AVX2's kernel
//! needs `vpmaddubsw` and an add). A sub-block's exact i32 sum is scaled with `vpmulld` by
//! its scale: the same integers as AVX2's i16 sums scaled with `vpmaddwd`, and the same
//! float term per super-block (`avx2_x8_k::q4_k_terms`, `q6_k_terms`), so the results are
//! the same bits (the interleaved parity tests compare them with the matrix × vector
//! kernels for 1 to 27 tokens).
//!
//! The legacy formats (Q4_0, Q5_0, Q8_0 × 8): each group against tiles of tokens through
//! AVX2's tile loop (`avx2_x8::gemm_group`), every block taken apart in registers once per
//! tile by the matrix × vector kernels' block functions (`vnni_gemv`) or their one-chain
//! variants here.

use core::arch::x86_64::*;

use super::avx2::ld256;
use super::avx2_x8::{scales8, Decoded};
use crate::quant::interleaved::{q4_0, q5_0, q8_0, BatchRows, ROWS};
use crate::quant::legacy::{blocks, BlockQ8_0};

/// The legacy formats' numbers for the `F` parameter of the generated `legacy_group`.
pub(super) struct Legacy;

impl Legacy {
    pub(super) const Q8_0: u8 = 0;
    pub(super) const Q4_0: u8 = 1;
    pub(super) const Q5_0: u8 = 2;

    /// Bytes of one group block of format `f`.
    pub(super) const fn group_block(f: u8) -> usize {
        match f {
            Legacy::Q8_0 => q8_0::GROUP_BLOCK,
            Legacy::Q4_0 => q4_0::GROUP_BLOCK,
            _ => q5_0::GROUP_BLOCK,
        }
    }
}

/// The fourth 6-bit quant of a Q6_K × 8 triple of quant vectors: bits 6-7 of `x0`, `x1`,
/// `x2` moved to bits 0-1, 2-3, 4-5 (only zero bits cross bytes in the shifts).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn q6_k_fourth(x0: __m256i, x1: __m256i, x2: __m256i) -> __m256i {
    let top2 = _mm256_set1_epi8(0xC0u8 as i8);
    let f = _mm256_or_si256(
        _mm256_srli_epi16(_mm256_and_si256(x0, top2), 2),
        _mm256_and_si256(x1, top2),
    );
    let f = _mm256_or_si256(_mm256_srli_epi16(f, 2), _mm256_and_si256(x2, top2));
    _mm256_srli_epi16(f, 2)
}

/// `isum + lo · sl + hi · sh` per 32-bit lane: two sub-blocks' sums scaled into a
/// super-block's.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn add_scaled(isum: __m256i, [lo, hi]: [__m256i; 2], [sl, sh]: [__m256i; 2]) -> __m256i {
    let scaled = _mm256_add_epi32(_mm256_mullo_epi32(lo, sl), _mm256_mullo_epi32(hi, sh));
    _mm256_add_epi32(isum, scaled)
}

/// Runs `group(w, out)` over each whole group of `w` (`group_bytes` each) with its `n`
/// outputs.
#[inline]
pub(super) fn per_group(
    w: &[u8],
    group_bytes: usize,
    n: usize,
    out: &mut [[f32; ROWS]],
    mut group: impl FnMut(&[u8], &mut [[f32; ROWS]]),
) {
    if group_bytes == 0 || n == 0 {
        out.fill([0.0; ROWS]);
        return;
    }
    for (w, out) in w.chunks_exact(group_bytes).zip(out.chunks_exact_mut(n)) {
        group(w, out);
    }
}

/// Each token's activation blocks, f32 scales and block sums for blocks `b0..b0 + m` (plain
/// loops: closures passed to `from_fn` would not inline into these `target_feature` callers).
#[inline(always)]
#[allow(clippy::type_complexity)]
pub(super) fn token_rows<const T: usize>(
    acts: BatchRows<'_>,
    b0: usize,
    m: usize,
) -> ([&[BlockQ8_0]; T], [&[f32]; T], [&[i32]; T]) {
    let (mut ys, mut dys, mut sums): ([&[BlockQ8_0]; T], [&[f32]; T], [&[i32]; T]) =
        ([&[]; T], [&[]; T], [&[]; T]);
    for t in 0..T {
        ys[t] = &blocks::<BlockQ8_0>(acts.bytes(t))[b0..b0 + m];
        dys[t] = &acts.scales(t)[b0..b0 + m];
        let s = acts.sums(t);
        assert!(!s.is_empty(), "the batch carries its block sums");
        sums[t] = &s[b0..b0 + m];
    }
    (ys, dys, sums)
}

/// # Safety
/// `p` must point at a Q8_0 × 8 group block (272 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q8_0_decode(p: *const u8) -> Decoded {
    let flip = _mm256_set1_epi8(i8::MIN);
    let mut q = [_mm256_setzero_si256(); 8];
    for (c, q) in q.iter_mut().enumerate() {
        // SAFETY: chunk c of the block's 8 chunks of 32 quant bytes (the caller's contract).
        *q = _mm256_xor_si256(unsafe { ld256(p.add(16 + 32 * c)) }, flip);
    }
    // SAFETY: the block's eight f16 scales, its first 16 bytes (the caller's contract).
    let d = unsafe { scales8(p) };
    Decoded { q, d }
}

/// # Safety
/// `p` must point at a Q4_0 × 8 group block (144 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q4_0_decode(p: *const u8) -> Decoded {
    let low4 = _mm256_set1_epi8(0x0F);
    let mut q = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        // SAFETY: chunk c of the block's 4 chunks of 32 quant bytes (the caller's contract).
        let x = unsafe { ld256(p.add(16 + 32 * c)) };
        // byte k of chunk c: element 4c + k (low nibble) and 16 + 4c + k (high nibble)
        q[c] = _mm256_and_si256(x, low4);
        q[4 + c] = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
    }
    // SAFETY: the block's eight f16 scales, its first 16 bytes (the caller's contract).
    let d = unsafe { scales8(p) };
    Decoded { q, d }
}

/// Defines the few-token batch kernels (`gemm_few_q4_k`, `gemm_few_q6_k` over any number
/// of groups; `legacy_group::<F, PREFETCH>` over one group of a legacy format), compiled with
/// the target features `$features` around the intrinsic `$dpbusd` (`vpdpbusd` on 256-bit
/// vectors), in tiles of up to `$tile` tokens (`$n`: every count from 1 to `$tile`), with the
/// Q5_0 block function of the module `$gemv` (a `vnni_gemv!` of the same ISA). Expand it in a
/// direct child module of `x86`.
macro_rules! vnni_tiles {
    ($features:tt, $dpbusd:ident, $gemv:ident, $tile:literal, [$($n:literal),*]) => {
        use core::arch::x86_64::*;

        use super::$gemv::q5_0_block;
        use super::avx2::ld256;
        use super::avx2_x8::{accumulate, arr, bcast4, bcast_pair, prefetch_far};
        use super::avx2_x8::{gemm_group, tiles_of, Decoded, SUMS};
        use super::avx2_x8_k::{q4_k_scale_i32, q4_k_scales, q4_k_terms, q6_k_pair, q6_k_terms};
        use super::vnni_tiles::{add_scaled, per_group, q6_k_fourth, token_rows, Legacy};
        use crate::quant::interleaved::{q4_0, q4_k, q5_0, q6_k, q8_0, BatchRows, ROWS};
        use crate::quant::kquants::q8_k::{self, BlockQ8K};
        use crate::quant::kquants::QK_K;
        use crate::quant::legacy::BlockQ8_0;

        /// Tokens per tile.
        pub(super) const FEW_TILE: usize = $tile;
        const _: () = assert!(
            [$($n),*].len() == FEW_TILE,
            "one tile kernel per token count"
        );

        /// One Q4_K × 8 super-block against `T` tokens: each token's eight float terms.
        ///
        /// # Safety
        /// `p` must point at a Q4_K × 8 group block (1152 bytes).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn q4_k_block<const T: usize>(p: *const u8, ys: [&BlockQ8K; T]) -> [__m256; T] {
            let low4 = _mm256_set1_epi8(0x0F);
            // SAFETY: the caller's contract.
            let scales = unsafe { q4_k_scales(p) };
            let mut isum = [_mm256_setzero_si256(); T];
            // chunks 8k..8k + 8 hold sub-block 2k in their low nibbles and 2k + 1 in their
            // high ones
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
                        lo[t] = $dpbusd(lo[t], ql, y0);
                        hi[t] = $dpbusd(hi[t], qh, y1);
                    }
                }
                let (sl, sh) = (
                    q4_k_scale_i32(&scales, 2 * k),
                    q4_k_scale_i32(&scales, 2 * k + 1),
                );
                for t in 0..T {
                    isum[t] = add_scaled(isum[t], [lo[t], hi[t]], [sl, sh]);
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
        #[target_feature(enable = $features)]
        unsafe fn q6_k_block<const T: usize>(p: *const u8, ys: [&BlockQ8K; T]) -> [__m256; T] {
            let low6 = _mm256_set1_epi8(0x3F);
            // The quants are stored +32 (`q6_k_terms` takes 32 · Σ scale · bsum off).
            // Triple c of half n holds elements 128n + 32k + 4c..+4 of quant k < 4 (k < 3:
            // the low six bits of vector k; k = 3: their top two bits): scale group
            // 8n + 2k + c / 4, whose scale is half c / 4 of the i16 pair 4n + k.
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
                            q6_k_fourth(x(0), x(1), x(2))
                        };
                        let s = if c < 4 { &mut lo } else { &mut hi };
                        for (s, y) in s.iter_mut().zip(&ys) {
                            // SAFETY: activation bytes 128n + 32k + 4c + 0..4 of the 256.
                            let y = unsafe { bcast4(y.qs.as_ptr().add(128 * n + 32 * k + 4 * c)) };
                            *s = $dpbusd(*s, q, y);
                        }
                    }
                    // SAFETY: pair 4n + k < 8.
                    let pair = unsafe { q6_k_pair(p, 4 * n + k) };
                    // the pair's halves, sign-extended to the lane
                    let sl = _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16);
                    let sh = _mm256_srai_epi32(pair, 16);
                    for t in 0..T {
                        isum[t] = add_scaled(isum[t], [lo[t], hi[t]], [sl, sh]);
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
        #[target_feature(enable = $features)]
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

        /// `q8_0_block` (`vnni_gemv`) with one chain of sums per token (the matrix × vector kernel
        /// splits its one token's chain in two to overlap `vpdpbusd` latency; a tile's tokens are
        /// independent chains already, and one chain each leaves registers for eight of them). The
        /// integer sums are the same.
        ///
        /// # Safety
        /// `p` must point at a Q8_0 × 8 group block (272 bytes).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn q8_0_chain<const G: usize, const T: usize>(
            [p]: [*const u8; 1],
            ys: [&BlockQ8_0; T],
            sums: [i32; T],
        ) -> [[__m256i; T]; 1] {
            let flip = _mm256_set1_epi8(i8::MIN);
            let mut isum: [__m256i; T] = arr(|t| _mm256_set1_epi32(-128 * sums[t]));
            for c in 0..8 {
                // SAFETY: chunk c of the block's 256 quant bytes (the caller's contract).
                let x = _mm256_xor_si256(unsafe { ld256(p.add(16 + 32 * c)) }, flip);
                for (isum, y) in isum.iter_mut().zip(&ys) {
                    // SAFETY: activation bytes 4c..4c + 4 of 32.
                    let y = unsafe { bcast4(y.qs.as_ptr().add(4 * c)) };
                    *isum = $dpbusd(*isum, x, y);
                }
            }
            [isum]
        }

        /// `q4_0_block` (`vnni_gemv`) with one chain of sums per token (see [`q8_0_chain`]).
        ///
        /// # Safety
        /// `p` must point at a Q4_0 × 8 group block (144 bytes).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn q4_0_chain<const G: usize, const T: usize>(
            [p]: [*const u8; 1],
            ys: [&BlockQ8_0; T],
            sums: [i32; T],
        ) -> [[__m256i; T]; 1] {
            let low4 = _mm256_set1_epi8(0x0F);
            let mut isum: [__m256i; T] = arr(|t| _mm256_set1_epi32(-8 * sums[t]));
            for c in 0..4 {
                // SAFETY: chunk c of the block's 128 quant bytes (the caller's contract).
                let x = unsafe { ld256(p.add(16 + 32 * c)) };
                let lo = _mm256_and_si256(x, low4);
                let hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
                for (isum, y) in isum.iter_mut().zip(&ys) {
                    // SAFETY: activation bytes 4c and 16 + 4c.
                    let (y0, y1) = unsafe { bcast_pair(y, c) };
                    *isum = $dpbusd(*isum, lo, y0);
                    *isum = $dpbusd(*isum, hi, y1);
                }
            }
            [isum]
        }

        /// One group against a tile of `T` tokens (`T` ≤ [`FEW_TILE`]) of the k-quant format
        /// `Q6` says (Q6_K, or Q4_K).
        #[target_feature(enable = $features)]
        fn kquant_tile<const T: usize, const Q6: bool>(
            cols: usize,
            w: &[u8],
            acts: BatchRows<'_>,
            out: &mut [[f32; ROWS]],
        ) {
            // SAFETY: the block functions read one group block.
            unsafe {
                if Q6 {
                    tile::<T>(cols, w, acts, out, q6_k::GROUP_BLOCK, |p, y| {
                        q6_k_block::<T>(p, y)
                    })
                } else {
                    tile::<T>(cols, w, acts, out, q4_k::GROUP_BLOCK, |p, y| {
                        q4_k_block::<T>(p, y)
                    })
                }
            }
        }

        /// A k-quant batch kernel over any number of whole groups: each group against tiles of up
        /// to [`FEW_TILE`] tokens.
        #[inline]
        #[target_feature(enable = $features)]
        fn kquant_gemm<const Q6: bool>(
            cols: usize,
            w: &[u8],
            acts: BatchRows<'_>,
            out: &mut [[f32; ROWS]],
        ) {
            let group_block = if Q6 {
                q6_k::GROUP_BLOCK
            } else {
                q4_k::GROUP_BLOCK
            };
            per_group(w, cols / QK_K * group_block, acts.len(), out, |w, out| {
                tiles_of(FEW_TILE, acts, out, |a, o| match a.len() {
                    $($n => kquant_tile::<$n, Q6>(cols, w, a, o),)*
                    n => assert_eq!(n, 0, "a tile of at most {FEW_TILE} tokens"),
                })
            });
        }

        /// Q4_K × 8 against a few tokens (see [`kquant_gemm`]).
        #[target_feature(enable = $features)]
        pub(super) fn gemm_few_q4_k(
            cols: usize,
            w: &[u8],
            acts: BatchRows<'_>,
            out: &mut [[f32; ROWS]],
        ) {
            kquant_gemm::<false>(cols, w, acts, out)
        }

        /// Q6_K × 8 against a few tokens (see [`kquant_gemm`]).
        #[target_feature(enable = $features)]
        pub(super) fn gemm_few_q6_k(
            cols: usize,
            w: &[u8],
            acts: BatchRows<'_>,
            out: &mut [[f32; ROWS]],
        ) {
            kquant_gemm::<true>(cols, w, acts, out)
        }

        /// One group of the legacy format `F` ([`Legacy`]) against a tile of `T` tokens through
        /// AVX2's tile loop (`gemm_group`, prefetching as `PREFETCH` says), the blocks taken apart
        /// in registers by [`q8_0_chain`], [`q4_0_chain`] or `q5_0_block`.
        #[target_feature(enable = $features)]
        fn legacy_tile<const F: u8, const T: usize, const PREFETCH: bool>(
            cols: usize,
            w: &[u8],
            acts: BatchRows<'_>,
            out: &mut [[f32; ROWS]],
        ) {
            let (o, a) = (out, acts);
            // SAFETY: the block functions read one group block per group pointer.
            unsafe {
                match F {
                    Legacy::Q8_0 => gemm_group::<T, SUMS, PREFETCH>(
                        cols,
                        w,
                        a,
                        o,
                        q8_0::GROUP_BLOCK,
                        |p, y, s| q8_0_chain::<1, T>(p, y, s),
                    ),
                    Legacy::Q4_0 => gemm_group::<T, SUMS, PREFETCH>(
                        cols,
                        w,
                        a,
                        o,
                        q4_0::GROUP_BLOCK,
                        |p, y, s| q4_0_chain::<1, T>(p, y, s),
                    ),
                    _ => gemm_group::<T, SUMS, PREFETCH>(
                        cols,
                        w,
                        a,
                        o,
                        q5_0::GROUP_BLOCK,
                        |p, y, s| q5_0_block::<1, T>(p, y, s),
                    ),
                }
            }
        }

        /// One group of the legacy format `F` ([`Legacy`]) against every token of `acts`,
        /// [`FEW_TILE`] at a time (see [`legacy_tile`]).
        #[target_feature(enable = $features)]
        pub(super) fn legacy_group<const F: u8, const PREFETCH: bool>(
            cols: usize,
            w: &[u8],
            acts: BatchRows<'_>,
            out: &mut [[f32; ROWS]],
        ) {
            tiles_of(FEW_TILE, acts, out, |a, o| match a.len() {
                $($n => legacy_tile::<F, $n, PREFETCH>(cols, w, a, o),)*
                n => assert_eq!(n, 0, "a tile of at most {FEW_TILE} tokens"),
            })
        }

        /// `T` tokens over decoded blocks `b0..b0 + dec.len()` whose values carry `+ (1 << shift)`:
        /// each token's float sum, carried in `out`, takes `(Σ q·y - Σy << shift) · (dx · dy)` per
        /// block.
        #[inline]
        #[target_feature(enable = $features)]
        pub(super) fn vnni_tile<const T: usize>(
            dec: &[Decoded],
            b0: usize,
            acts: BatchRows<'_>,
            shift: i32,
            out: &mut [[f32; ROWS]],
        ) {
            let m = dec.len();
            assert!(acts.len() == T && out.len() == T, "a tile of {T} tokens");
            let (ys, dys, sums) = token_rows::<T>(acts, b0, m);
            let shift = _mm_cvtsi32_si128(shift);
            let mut acc = [_mm256_setzero_ps(); T];
            for (acc, o) in acc.iter_mut().zip(out.iter()) {
                // SAFETY: `o` is 8 floats.
                *acc = unsafe { _mm256_loadu_ps(o.as_ptr()) };
            }
            for (i, blk) in dec.iter().enumerate() {
                // the reads below: i < m, the length of every token's slices (`token_rows`)
                let mut isum = [_mm256_setzero_si256(); T];
                for (isum, sums) in isum.iter_mut().zip(&sums) {
                    // SAFETY: `sums` has m values and i < m.
                    let s = _mm256_set1_epi32(unsafe { *sums.as_ptr().add(i) });
                    *isum = _mm256_sub_epi32(*isum, _mm256_sll_epi32(s, shift));
                }
                for (j, &q) in blk.q.iter().enumerate() {
                    for (isum, y) in isum.iter_mut().zip(&ys) {
                        // SAFETY: activation bytes 4j..4j + 4 of block i's 32.
                        let y = unsafe { bcast4((*y.as_ptr().add(i)).qs.as_ptr().add(4 * j)) };
                        *isum = $dpbusd(*isum, q, y);
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

        /// Calls [`vnni_tile`] with `T` the tile's token count (1 ..= [`FEW_TILE`]).
        #[inline]
        #[target_feature(enable = $features)]
        pub(super) fn tile_any(
            dec: &[Decoded],
            b0: usize,
            acts: BatchRows<'_>,
            shift: i32,
            o: &mut [[f32; ROWS]],
        ) {
            match acts.len() {
                $($n => vnni_tile::<$n>(dec, b0, acts, shift, o),)*
                n => assert_eq!(n, 0, "a tile of at most {FEW_TILE} tokens"),
            }
        }
    };
}
pub(super) use vnni_tiles;
