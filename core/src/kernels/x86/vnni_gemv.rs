//! VNNI matrix × vector kernels on 256-bit vectors, one source for two ISAs: [`vnni_gemv!`]
//! compiles them with the `#[target_feature]` list and the `vpdpbusd` intrinsic it is given,
//! for AVX-512 VNNI with VL (`_mm256_dpbusd_epi32`: module `avx512_gemv`) and for AVX-VNNI
//! (its VEX encoding, `_mm256_dpbusd_avx_epi32`: module `avx_vnni_gemv`). Both are the same
//! instruction on 256-bit registers, so the kernels are the same code.
//!
//! The legacy interleaved layouts (Q4_0, Q5_0, Q8_0 × 8): the AVX2 kernels' loop
//! (`avx2_x8::for_groups`, two groups per pass sharing the activation broadcasts) with each chunk's
//! products summed by one `vpdpbusd` (`u8 × i8`, four products per i32 lane) instead of AVX2's
//! `vpmaddubsw` / `vpmaddwd` / add (and, for Q8_0, `vpsign` / `vpabs`). The weights go in unsigned
//! with an offset, as in the VNNI batch kernels: Q4_0 nibbles (+8), Q5_0 5-bit values (+16) and
//! Q8_0 quants with the sign bit flipped (+128); each block's sum starts at `-offset · Σy`. The
//! integer sums are the AVX2 kernels' exactly and the float accumulation is theirs, so the results
//! are the same bits (and the batch kernels', so a prompt in a batch still equals token-by-token
//! decoding).
//!
//! Q4_K the same way: per 32-element sub-block one `vpdpbusd` chain per row group into an
//! i32 sum (nibbles × y, nothing saturates), scaled by the sub-block's 6-bit scale with one
//! `vpmulld` (AVX2: `vpmaddubsw` into i16, `vpmaddwd` with the scale); the mins and the float
//! term are the AVX2 kernel's (`avx2_x8_k::q4_k_terms`). Q6_K alike: per pair of quant
//! triples (one 16-element scale group) and quant vector one `vpdpbusd` chain, scaled by
//! `vpmulld` with the group's signed scale; the `+32` offset and the float term are the
//! AVX2 kernel's (`avx2_x8_k::q6_k_terms`).

/// Defines the matrix × vector kernels (`gemv_q4_0`, `gemv_q5_0`, `gemv_q8_0`, `gemv_q4_k`,
/// `gemv_q6_k`) and the legacy block functions the few-token kernels share (`q5_0_block`),
/// compiled with the target features `$features` around the intrinsic `$dpbusd`
/// (`vpdpbusd` on 256-bit vectors). Expand it in a direct child module of `x86`.
macro_rules! vnni_gemv {
    ($features:tt, $dpbusd:ident) => {
        use core::arch::x86_64::*;

        use super::avx2::ld256;
        use super::avx2_x8::{arr, bcast4, bcast_pair, for_groups, legacy_gemv, q5_0_chunk};
        use super::avx2_x8_k::{
            kquant_gemv, q4_k_scale_i32, q4_k_scales, q4_k_terms, q6_k_pair, q6_k_terms,
            super_blocks,
        };
        use super::vnni_tiles::{add_scaled, q6_k_fourth};
        use crate::quant::interleaved::{q4_0, q4_k, q5_0, q6_k, q8_0, ROWS};
        use crate::quant::kquants::q8_k::BlockQ8K;
        use crate::quant::kquants::QK_K;
        use crate::quant::legacy::BlockQ8_0;

        /// # Safety
        /// Each `ps[g]` must point at a Q8_0 × 8 group block (272 bytes).
        #[inline]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn q8_0_block<const G: usize, const T: usize>(
            ps: [*const u8; G],
            ys: [&BlockQ8_0; T],
            sums: [i32; T],
        ) -> [[__m256i; T]; G] {
            let flip = _mm256_set1_epi8(i8::MIN);
            // two chains per group (even and odd chunks), joined at the end: half the dependent
            // `vpdpbusd` latency per block, so more blocks overlap
            let mut even: [[__m256i; T]; G] = [arr(|t| _mm256_set1_epi32(-128 * sums[t])); G];
            let mut odd = [[_mm256_setzero_si256(); T]; G];
            for c in 0..8 {
                for (g, p) in ps.iter().enumerate() {
                    // SAFETY: chunk c of the block's 256 quant bytes (the caller's contract).
                    let x = _mm256_xor_si256(unsafe { ld256(p.add(16 + 32 * c)) }, flip);
                    let isum = if c % 2 == 0 {
                        &mut even[g]
                    } else {
                        &mut odd[g]
                    };
                    for (isum, y) in isum.iter_mut().zip(&ys) {
                        // SAFETY: activation bytes 4c..4c + 4 of 32.
                        let y = unsafe { bcast4(y.qs.as_ptr().add(4 * c)) };
                        *isum = $dpbusd(*isum, x, y);
                    }
                }
            }
            join_chains(even, odd)
        }

        /// `a + b`, chain by chain.
        #[inline]
        #[target_feature(enable = "avx2")]
        fn join_chains<const G: usize, const T: usize>(
            a: [[__m256i; T]; G],
            b: [[__m256i; T]; G],
        ) -> [[__m256i; T]; G] {
            arr(|g| arr(|t| _mm256_add_epi32(a[g][t], b[g][t])))
        }

        /// # Safety
        /// Each `ps[g]` must point at a Q4_0 × 8 group block (144 bytes).
        #[inline]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn q4_0_block<const G: usize, const T: usize>(
            ps: [*const u8; G],
            ys: [&BlockQ8_0; T],
            sums: [i32; T],
        ) -> [[__m256i; T]; G] {
            let low4 = _mm256_set1_epi8(0x0F);
            // low and high nibbles in two chains, joined at the end
            let mut lo_sum: [[__m256i; T]; G] = [arr(|t| _mm256_set1_epi32(-8 * sums[t])); G];
            let mut hi_sum = [[_mm256_setzero_si256(); T]; G];
            for c in 0..4 {
                for (g, p) in ps.iter().enumerate() {
                    // SAFETY: chunk c of the block's 128 quant bytes (the caller's contract).
                    let x = unsafe { ld256(p.add(16 + 32 * c)) };
                    let lo = _mm256_and_si256(x, low4);
                    let hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
                    for ((ls, hs), y) in lo_sum[g].iter_mut().zip(hi_sum[g].iter_mut()).zip(&ys) {
                        // SAFETY: activation bytes 4c and 16 + 4c.
                        let (y0, y1) = unsafe { bcast_pair(y, c) };
                        *ls = $dpbusd(*ls, lo, y0);
                        *hs = $dpbusd(*hs, hi, y1);
                    }
                }
            }
            join_chains(lo_sum, hi_sum)
        }

        /// # Safety
        /// Each `ps[g]` must point at a Q5_0 × 8 group block (176 bytes).
        #[inline]
        #[target_feature(enable = $features)]
        pub(super) unsafe fn q5_0_block<const G: usize, const T: usize>(
            ps: [*const u8; G],
            ys: [&BlockQ8_0; T],
            sums: [i32; T],
        ) -> [[__m256i; T]; G] {
            let mut isum: [[__m256i; T]; G] = [arr(|t| _mm256_set1_epi32(-16 * sums[t])); G];
            for c in 0..4 {
                for (p, isum) in ps.iter().zip(&mut isum) {
                    // SAFETY: chunk c < 4 of the group block (the caller's contract).
                    let (lo, hi) = unsafe { q5_0_chunk(*p, c) };
                    for (isum, y) in isum.iter_mut().zip(&ys) {
                        // SAFETY: activation bytes 4c and 16 + 4c.
                        let (y0, y1) = unsafe { bcast_pair(y, c) };
                        *isum = $dpbusd(*isum, lo, y0);
                        *isum = $dpbusd(*isum, hi, y1);
                    }
                }
            }
            isum
        }

        legacy_gemv!($features: gemv_q8_0, q8_0_block, q8_0::GROUP_BLOCK);
        legacy_gemv!($features: gemv_q4_0, q4_0_block, q4_0::GROUP_BLOCK);
        legacy_gemv!($features: gemv_q5_0, q5_0_block, q5_0::GROUP_BLOCK);

        /// # Safety
        /// `p` must point at a Q4_K × 8 group block (1152 bytes).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn q4_k_block(p: *const u8, [y]: [&BlockQ8K; 1]) -> [__m256; 1] {
            let low4 = _mm256_set1_epi8(0x0F);
            // SAFETY: the caller's contract.
            let scales = unsafe { q4_k_scales(p) };
            // chunks 8k..8k+8 hold sub-block 2k in their low nibbles and 2k + 1 in their
            // high ones
            let mut isum = _mm256_setzero_si256();
            for k in 0..4 {
                let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                for c in 8 * k..8 * k + 8 {
                    let l = 64 * k + 4 * (c % 8);
                    // SAFETY: chunk c of the 32 quant chunks; activation bytes l..l+4 and
                    // l+32..l+36 of the 256.
                    let (x, y0, y1) = unsafe {
                        (
                            ld256(p.add(q4_k::QS + 32 * c)),
                            bcast4(y.qs.as_ptr().add(l)),
                            bcast4(y.qs.as_ptr().add(l + 32)),
                        )
                    };
                    lo = $dpbusd(lo, _mm256_and_si256(x, low4), y0);
                    hi = $dpbusd(hi, _mm256_and_si256(_mm256_srli_epi16(x, 4), low4), y1);
                }
                let sl = q4_k_scale_i32(&scales, 2 * k);
                let sh = q4_k_scale_i32(&scales, 2 * k + 1);
                isum = add_scaled(isum, [lo, hi], [sl, sh]);
            }
            // SAFETY: the caller's contract.
            unsafe { q4_k_terms(p, [y], [isum]) }
        }

        /// # Safety
        /// `p` must point at a Q6_K × 8 group block (1680 bytes).
        #[inline]
        #[target_feature(enable = $features)]
        unsafe fn q6_k_block(p: *const u8, [y]: [&BlockQ8K; 1]) -> [__m256; 1] {
            let low6 = _mm256_set1_epi8(0x3F);
            let mut isum = _mm256_setzero_si256();
            for n in 0..2 {
                // triple c holds elements 128n + 32k + 4c..+4 for k < 4 (group 8n + 2k + c/4):
                // quant vectors x0, x1, x2 (low six bits: k = 0, 1, 2) and their top bits (k = 3)
                for c0 in (0..8).step_by(4) {
                    let mut s = [_mm256_setzero_si256(); 4];
                    for c in c0..c0 + 4 {
                        let at = q6_k::QS + 96 * (8 * n + c);
                        // SAFETY: the three chunk vectors of triple 8n + c.
                        let x = |i: usize| unsafe { ld256(p.add(at + 32 * i)) };
                        let (x0, x1, x2) = (x(0), x(1), x(2));
                        let q = [
                            _mm256_and_si256(x0, low6),
                            _mm256_and_si256(x1, low6),
                            _mm256_and_si256(x2, low6),
                            q6_k_fourth(x0, x1, x2),
                        ];
                        for (k, (s, q)) in s.iter_mut().zip(q).enumerate() {
                            // SAFETY: activation bytes 128n + 32k + 4c + 0..4 of the 256.
                            let yk = unsafe { bcast4(y.qs.as_ptr().add(128 * n + 32 * k + 4 * c)) };
                            *s = $dpbusd(*s, q, yk);
                        }
                    }
                    for (k, s) in s.into_iter().enumerate() {
                        // group 8n + 2k + c0/4: scale 2p or 2p + 1 of pair p = 4n + k
                        // SAFETY: 4n + k < 8.
                        let pair = unsafe { q6_k_pair(p, 4 * n + k) };
                        let scale = if c0 == 0 {
                            _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16)
                        } else {
                            _mm256_srai_epi32(pair, 16)
                        };
                        isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(s, scale));
                    }
                }
            }
            // SAFETY: the caller's contract.
            unsafe { q6_k_terms(p, [y], [isum]) }
        }

        kquant_gemv!($features: gemv_q4_k, q4_k_block, q4_k::GROUP_BLOCK);
        kquant_gemv!($features: gemv_q6_k, q6_k_block, q6_k::GROUP_BLOCK);
    };
}
pub(super) use vnni_gemv;
