//! AVX-VNNI batch kernels over the legacy interleaved layouts (Q4_0, Q5_0, Q8_0 × 8), one
//! group at a time. The tokens run against it in tiles of four (AVX-VNNI has AVX2's sixteen
//! vector registers), every block taken apart in registers once per tile and each chunk's
//! products summed by one `vpdpbusd` (`avx_vnni_tiles::legacy_group`, the `vnni_tiles`
//! kernels compiled for AVX-VNNI); a call of one tile streams its group from memory once, as
//! the matrix × vector kernel does, and prefetches like it (as AVX2's `avx2_x8::legacy_gemm`).
//! Q5_0, whose fifth bits take the most unpacking, decodes the group once per run of blocks
//! for more than [`Q5_0_WIDE_TOKENS`] tokens (`avx2_x8::gemm_decoded`, as AVX2's Q5_0 kernel
//! does), each tile of four then one `vpdpbusd` per vector (`avx_vnni_tiles::vnni_tile`).
//! The k-quants' batch kernels are `avx_vnni_tiles`'s, for every count of tokens.
//!
//! Decoding pays less for Q4_0 and Q8_0, whose unpacking is one or two operations per
//! vector (as on AVX2): shared 2-core box (AVX-VNNI and AVX-512 VNNI), one thread, best of
//! 12 to 20, Qwen2.5-0.5B's FFN up (4864 × 896) / down (896 × 4864), ms, in tiles / decoded:
//! - Q5_0 8 tokens 0.52 / 0.54, 16: 1.02 / 0.90, 64: 4.03 / 3.17, 512 (up) 34.1 / 26.4;
//! - Q8_0 16 tokens 0.90 / 0.96, 128: 7.7 / 7.3 (up), 7.1 / 6.2 (down), 512: 40.8 / 37.8
//!   (up), 28.8 / 31.6 (down);
//! - Q4_0 16 tokens 0.79 / 0.84, 128: 7.1 / 6.7 (up), 512: 26.6 / 32.4 (down).

use super::avx2_x8::{gemm_decoded, q5_0_decode, Decoded};
use super::avx_vnni_tiles::{legacy_group, tile_any, FEW_TILE};
use super::vnni_tiles::Legacy;
use crate::quant::interleaved::{q5_0, BatchRows, ROWS};

/// Most tokens for which the Q5_0 batch kernel takes each block apart per tile of tokens.
const Q5_0_WIDE_TOKENS: usize = 8;

/// One group of the legacy format `F` against every token in tiles (see the module's notes).
#[inline]
#[target_feature(enable = "avxvnni,avx2,fma,f16c")]
fn tiles<const F: u8>(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    if acts.len() <= FEW_TILE {
        legacy_group::<F, true>(cols, w, acts, out)
    } else {
        legacy_group::<F, false>(cols, w, acts, out)
    }
}

#[target_feature(enable = "avxvnni,avx2,fma,f16c")]
pub(super) fn gemm_q8_0(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    tiles::<{ Legacy::Q8_0 }>(cols, w, acts, out)
}

#[target_feature(enable = "avxvnni,avx2,fma,f16c")]
pub(super) fn gemm_q4_0(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    tiles::<{ Legacy::Q4_0 }>(cols, w, acts, out)
}

#[target_feature(enable = "avxvnni,avx2,fma,f16c")]
pub(super) fn gemm_q5_0(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    if acts.len() <= Q5_0_WIDE_TOKENS {
        return tiles::<{ Legacy::Q5_0 }>(cols, w, acts, out);
    }
    // SAFETY: `gemm_decoded` hands the decoder the start of one whole group block.
    let decode = |p| unsafe { q5_0_decode(p) };
    // the decoded 5-bit values carry `+16` (`1 << 4`)
    let tile =
        |d: &[Decoded], b0, a: BatchRows<'_>, o: &mut [[f32; ROWS]]| tile_any(d, b0, a, 4, o);
    let (group_block, tile_tokens) = (q5_0::GROUP_BLOCK, FEW_TILE);
    // SAFETY: the decoder reads one group block.
    unsafe { gemm_decoded(cols, w, acts, out, group_block, tile_tokens, decode, tile) }
}
