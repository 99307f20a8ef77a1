//! AVX-512 VNNI batch kernels for a few tokens: the decode steps of a few sequences sharing
//! one step. The wide kernels (`avx512_x8`, `avx512_x8_k`) decode runs of blocks to memory
//! and run every tile of tokens over them, which pays with hundreds of tokens; with a handful
//! the decoding is most of the work. Here pairs of groups run on 512-bit vectors
//! (`avx512_few_pairs`) and a last odd group against tiles of up to eight tokens with every
//! block taken apart in registers once per tile, on 256-bit vectors (`legacy_group` of
//! `avx512_tiles`, the `vnni_tiles` kernels compiled for AVX-512); the k-quants run
//! `avx512_tiles`'s 8-token tiles, which work the same way. The integer sums and the float
//! accumulation are the other kernels', so the results are the same bits (asserted by the
//! interleaved parity tests, which cover both sides of [`FEW_TOKENS`] and
//! [`FEW_KQUANT_TOKENS`]).

use super::avx512_few_pairs;
use super::avx512_tiles::{legacy_group, FEW_TILE};
use super::vnni_tiles::{per_group, Legacy};
use crate::quant::interleaved::{BatchRows, ROWS};
use crate::quant::legacy::QK;

/// Most tokens for which the AVX-512 batch kernels take this path (Zen 4, one thread,
/// Qwen2.5-0.5B shipped, aggregate decode t/s of n sequences: n = 5 wide 99, these 116;
/// n = 16 wide 177, these 145).
pub(super) const FEW_TOKENS: usize = 11;

/// The same for the k-quants (`avx512_tiles`, eight tokens a tile).
pub(super) const FEW_KQUANT_TOKENS: usize = 16;

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

/// Defines `$gemm`, a batch kernel of the legacy format `$f` ([`Legacy`]): pairs of groups
/// on 512-bit vectors through `$pair` (`avx512_few_pairs`), a last odd group through
/// `legacy_group` (256-bit vectors).
macro_rules! few_legacy {
    ($gemm:ident, $pair_t:ident, $pair:ident, $f:expr) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub(super) fn $gemm(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
            let group_bytes = cols / QK * Legacy::group_block($f);
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
                legacy_group::<{ $f }, true>(cols, w, acts, out)
            });
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        fn $pair_t<const T: usize>(
            cols: usize,
            w: [&[u8]; 2],
            acts: BatchRows<'_>,
            out: [&mut [[f32; ROWS]]; 2],
        ) {
            let group_block = Legacy::group_block($f);
            // SAFETY: the block function reads one group block per group pointer.
            unsafe {
                avx512_few_pairs::gemm_pair::<T>(cols, w, acts, out, group_block, |p, y, s| {
                    avx512_few_pairs::$pair::<T>(p, y, s)
                })
            }
        }
    };
}

few_legacy!(gemm_few_q8_0, gemm_pair_q8_0_t, q8_0_pair, Legacy::Q8_0);
few_legacy!(gemm_few_q4_0, gemm_pair_q4_0_t, q4_0_pair, Legacy::Q4_0);
few_legacy!(gemm_few_q5_0, gemm_pair_q5_0_t, q5_0_pair, Legacy::Q5_0);
