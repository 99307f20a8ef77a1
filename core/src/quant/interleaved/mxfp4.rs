//! MXFP4 × 8 rows: per block, the eight E8M0 exponent bytes, then four 4-byte chunks of eight
//! rows' E2M1 codes (byte `k` of a row holds element `k` in its low nibble and `k + 16` in its
//! high one, as in ggml's block).

use super::{gather_chunk, scatter_chunk, ROWS};

const BLOCK: usize = 17;
const CHUNKS: usize = 4;
/// Bytes of one interleaved block group (eight rows' blocks), used by the x86 kernels.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const GROUP_BLOCK: usize = ROWS * BLOCK;

pub(super) fn repack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, out) in dst.chunks_exact_mut(GROUP_BLOCK).enumerate() {
        let at = b * BLOCK;
        for (r, e) in out[..ROWS].iter_mut().enumerate() {
            *e = src[r * row_bytes + at];
        }
        for c in 0..CHUNKS {
            gather_chunk(
                src,
                row_bytes,
                at + 1 + 4 * c,
                &mut out[ROWS + 32 * c..][..32],
            );
        }
    }
}

pub(super) fn unpack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, g) in src.chunks_exact(GROUP_BLOCK).enumerate() {
        let at = b * BLOCK;
        for (r, &e) in g[..ROWS].iter().enumerate() {
            dst[r * row_bytes + at] = e;
        }
        for c in 0..CHUNKS {
            scatter_chunk(&g[ROWS + 32 * c..][..32], row_bytes, at + 1 + 4 * c, dst);
        }
    }
}
