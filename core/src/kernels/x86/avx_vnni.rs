//! AVX-VNNI batch kernels over the legacy interleaved layouts (Q4_0, Q5_0, Q8_0 × 8), one
//! group at a time. A few tokens run against it in tiles of four (AVX-VNNI has AVX2's
//! sixteen vector registers), every block taken apart in registers once per tile and each
//! chunk's products summed by one `vpdpbusd` (`avx_vnni_tiles::legacy_group`, the
//! `vnni_tiles` kernels compiled for AVX-VNNI); a call of one tile streams its group from
//! memory once, as the matrix × vector kernel does, and prefetches like it (as AVX2's
//! `avx2_x8::legacy_gemm`). More than [`WIDE_TOKENS`] decode the group once per run of
//! blocks for all of them (`avx2_x8::gemm_decoded`, as AVX2's Q5_0 kernel does), each tile of
//! four then one `vpdpbusd` per vector (`avx_vnni_tiles::vnni_tile`). The k-quants' batch
//! kernels are `avx_vnni_tiles`'s, for every count of tokens.

use super::avx2_x8::{gemm_decoded, q5_0_decode};
use super::avx_vnni_tiles::{legacy_group, tile_any, FEW_TILE};
use super::vnni_tiles::{q4_0_decode, q8_0_decode, Legacy};
use crate::quant::interleaved::{BatchRows, ROWS};

/// Most tokens for which the legacy formats' batch kernels take each block apart per tile.
const WIDE_TOKENS: usize = 0;

/// Defines `$gemm`, the batch kernel of one group of the legacy format `$f` ([`Legacy`]),
/// whose decoder `$decode` gives its values `+ 1 << $shift`.
macro_rules! gemm {
    ($gemm:ident, $f:expr, $decode:ident, $shift:expr) => {
        #[target_feature(enable = "avxvnni,avx2,fma,f16c")]
        pub(super) fn $gemm(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
            let n = acts.len();
            if n > WIDE_TOKENS {
                let group_block = Legacy::group_block($f);
                // SAFETY: the decoder reads one group block.
                unsafe {
                    gemm_decoded(
                        cols,
                        w,
                        acts,
                        out,
                        group_block,
                        FEW_TILE,
                        |p| $decode(p),
                        |d, b0, a, o| tile_any(d, b0, a, $shift, o),
                    )
                }
            } else if n <= FEW_TILE {
                legacy_group::<{ $f }, true>(cols, w, acts, out)
            } else {
                legacy_group::<{ $f }, false>(cols, w, acts, out)
            }
        }
    };
}

gemm!(gemm_q8_0, Legacy::Q8_0, q8_0_decode, 7);
gemm!(gemm_q4_0, Legacy::Q4_0, q4_0_decode, 3);
gemm!(gemm_q5_0, Legacy::Q5_0, q5_0_decode, 4);
