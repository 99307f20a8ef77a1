//! AVX-VNNI batch kernels over the legacy interleaved layouts (Q4_0, Q5_0, Q8_0 × 8): one
//! group at a time against tiles of four tokens (AVX-VNNI has AVX2's sixteen vector
//! registers), every block taken apart in registers once per tile and each chunk's products
//! summed by one `vpdpbusd` (`avx_vnni_few::legacy_group`, the `vnni_few` kernels compiled for
//! AVX-VNNI). A call of one tile streams its group from memory once, as the matrix × vector
//! kernel does, and prefetches like it; more tiles find it in cache after the first (as
//! AVX2's `avx2_x8::legacy_gemm`). The k-quants' batch kernels are `avx_vnni_few`'s, for
//! every count of tokens.

use super::avx_vnni_few::{legacy_group, FEW_TILE};
use super::vnni_few::Legacy;
use crate::quant::interleaved::{BatchRows, ROWS};

/// Defines `$gemm`, the batch kernel of one group of the legacy format `$f` ([`Legacy`]).
macro_rules! gemm {
    ($gemm:ident, $f:expr) => {
        #[target_feature(enable = "avxvnni,avx2,fma,f16c")]
        pub(super) fn $gemm(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
            if acts.len() <= FEW_TILE {
                legacy_group::<{ $f }, true>(cols, w, acts, out)
            } else {
                legacy_group::<{ $f }, false>(cols, w, acts, out)
            }
        }
    };
}

gemm!(gemm_q8_0, Legacy::Q8_0);
gemm!(gemm_q4_0, Legacy::Q4_0);
gemm!(gemm_q5_0, Legacy::Q5_0);
