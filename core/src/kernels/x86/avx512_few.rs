//! AVX-512 VNNI batch kernels for a few tokens: the decode steps of a few sequences sharing
//! one step. The wide kernels (`avx512_x8`, `avx512_x8_k`) decode runs of blocks to memory
//! and run every tile of tokens over them, which pays with hundreds of tokens; with a handful
//! the decoding is most of the work. Here each group runs against tiles of up to four tokens
//! with every block taken apart in registers once per tile, by the matrix × vector kernels'
//! block functions (`avx512_gemv`, `vpdpbusd` on 256-bit vectors) through AVX2's tile loop
//! (`avx2_x8::gemm_group`); the k-quants run `avx512_few_k`'s 8-token tiles, which work the
//! same way. The integer sums and the float accumulation are the other kernels', so the results are
//! the same bits (asserted by the interleaved parity tests, which cover both sides of
//! [`FEW_TOKENS`] and [`FEW_KQUANT_TOKENS`]).

use super::avx2_x8::{gemm_group, tiles_of, SUMS};
use super::avx512_few_k;
use super::avx512_few_pairs;
use core::arch::x86_64::*;

use super::avx2::ld256;
use super::avx2_x8::{arr, bcast4, bcast_pair};
use super::avx512_gemv::q5_0_block;
use crate::quant::interleaved::{q4_0, q4_k, q5_0, q6_k, q8_0, BatchRows, ROWS};
use crate::quant::kquants::QK_K;
use crate::quant::legacy::{BlockQ8_0, QK};

/// Most tokens for which the AVX-512 batch kernels take this path (Zen 4, one thread,
/// Qwen2.5-0.5B shipped, aggregate decode t/s of n sequences: n = 5 wide 99, these 116;
/// n = 16 wide 177, these 145).
pub(super) const FEW_TOKENS: usize = 11;

/// The same for the k-quants (`avx512_few_k`, eight tokens a tile).
pub(super) const FEW_KQUANT_TOKENS: usize = 16;

/// Tokens per tile: 32 vector registers hold eight tokens' two sum chains and eight float
/// sums (AVX2's sixteen hold four).
const FEW_TILE: usize = 8;

/// Calls `$f::<T>(args)` with `T = $n` (1 ..= 8) known at compile time.
macro_rules! by_count8 {
    ($n:expr, $f:ident($($arg:expr),*)) => {
        match $n {
            0 => {}
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            5 => $f::<5>($($arg),*),
            6 => $f::<6>($($arg),*),
            7 => $f::<7>($($arg),*),
            _ => $f::<8>($($arg),*),
        }
    };
}

/// Runs `group(w, out)` over each whole group of `w` (`group_bytes` each) with its `n`
/// outputs.
#[inline]
fn per_group(
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

/// Defines `$gemm`, a batch kernel: pairs of groups on 512-bit vectors through `$pair`
/// (`avx512_few_pairs`), a last odd group through the 256-bit block function `$block` (which
/// takes each token's block quant sums).
macro_rules! few_legacy {
    ($gemm:ident, $gemm_t:ident, $pair_t:ident, $block:ident, $pair:ident, $group_block:expr) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub(super) fn $gemm(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
            let group_bytes = cols / QK * $group_block;
            let n = acts.len();
            if group_bytes == 0 || n == 0 {
                out.fill([0.0; ROWS]);
                return;
            }
            let groups = (w.len() / group_bytes).min(out.len() / n);
            let (w, w_odd) = w.split_at(groups / 2 * 2 * group_bytes);
            let (out, out_odd) = out.split_at_mut(groups / 2 * 2 * n);
            for (w, out) in w
                .chunks_exact(2 * group_bytes)
                .zip(out.chunks_exact_mut(2 * n))
            {
                let (wa, wb) = w.split_at(group_bytes);
                let (oa, ob) = out.split_at_mut(n);
                for t0 in (0..n).step_by(FEW_TILE) {
                    let t1 = (t0 + FEW_TILE).min(n);
                    let (a, oa, ob) = (acts.slice(t0, t1), &mut oa[t0..t1], &mut ob[t0..t1]);
                    by_count8!(t1 - t0, $pair_t(cols, [wa, wb], a, [oa, ob]))
                }
            }
            per_group(w_odd, group_bytes, n, out_odd, |w, out| {
                tiles_of(FEW_TILE, acts, out, |a, o| {
                    by_count8!(a.len(), $gemm_t(cols, w, a, o))
                })
            });
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        fn $pair_t<const T: usize>(
            cols: usize,
            w: [&[u8]; 2],
            acts: BatchRows<'_>,
            out: [&mut [[f32; ROWS]]; 2],
        ) {
            // SAFETY: the block function reads one group block per group pointer.
            unsafe {
                avx512_few_pairs::gemm_pair::<T>(cols, w, acts, out, $group_block, |p, y, s| {
                    avx512_few_pairs::$pair::<T>(p, y, s)
                })
            }
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        fn $gemm_t<const T: usize>(
            cols: usize,
            w: &[u8],
            acts: BatchRows<'_>,
            out: &mut [[f32; ROWS]],
        ) {
            // SAFETY: the block function reads one group block per group pointer.
            unsafe {
                gemm_group::<T, SUMS, true>(cols, w, acts, out, $group_block, |p, y, s| {
                    $block::<1, T>(p, y, s)
                })
            }
        }
    };
}

few_legacy!(
    gemm_few_q8_0,
    gemm_few_q8_0_t,
    gemm_pair_q8_0_t,
    q8_0_chain,
    q8_0_pair,
    q8_0::GROUP_BLOCK
);
few_legacy!(
    gemm_few_q4_0,
    gemm_few_q4_0_t,
    gemm_pair_q4_0_t,
    q4_0_chain,
    q4_0_pair,
    q4_0::GROUP_BLOCK
);
few_legacy!(
    gemm_few_q5_0,
    gemm_few_q5_0_t,
    gemm_pair_q5_0_t,
    q5_0_block,
    q5_0_pair,
    q5_0::GROUP_BLOCK
);

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn gemm_few_q4_k(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    per_group(
        w,
        cols / QK_K * q4_k::GROUP_BLOCK,
        acts.len(),
        out,
        |w, out| {
            tiles_of(FEW_TILE, acts, out, |a, o| {
                avx512_few_k::q4_k_group(cols, w, a, o)
            })
        },
    );
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn gemm_few_q6_k(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    per_group(
        w,
        cols / QK_K * q6_k::GROUP_BLOCK,
        acts.len(),
        out,
        |w, out| {
            tiles_of(FEW_TILE, acts, out, |a, o| {
                avx512_few_k::q6_k_group(cols, w, a, o)
            })
        },
    );
}

/// `avx512_gemv::q8_0_block` with one chain of sums per token (the matrix × vector kernel
/// splits its one token's chain in two to overlap `vpdpbusd` latency; a tile's tokens are
/// independent chains already, and one chain each leaves registers for eight of them). The
/// integer sums are the same.
///
/// # Safety
/// `p` must point at a Q8_0 × 8 group block (272 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
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
            *isum = _mm256_dpbusd_epi32(*isum, x, y);
        }
    }
    [isum]
}

/// `avx512_gemv::q4_0_block` with one chain of sums per token (see [`q8_0_chain`]).
///
/// # Safety
/// `p` must point at a Q4_0 × 8 group block (144 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
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
            *isum = _mm256_dpbusd_epi32(*isum, lo, y0);
            *isum = _mm256_dpbusd_epi32(*isum, hi, y1);
        }
    }
    [isum]
}
