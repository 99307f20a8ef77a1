//! Q4_0 × 8 rows: per block, the eight f16 scales, then four 4-byte chunks of eight rows
//! (byte `k` of a row holds element `k` in its low nibble and `k + 16` in its high one).

use super::{gather_chunk, scatter_chunk, ROWS};

const BLOCK: usize = 18;
pub(crate) const GROUP_BLOCK: usize = ROWS * BLOCK;

pub(super) fn repack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, out) in dst.chunks_exact_mut(GROUP_BLOCK).enumerate() {
        let at = b * BLOCK;
        for r in 0..ROWS {
            out[2 * r..2 * r + 2].copy_from_slice(&src[r * row_bytes + at..][..2]);
        }
        for c in 0..4 {
            gather_chunk(
                src,
                row_bytes,
                at + 2 + 4 * c,
                &mut out[16 + 32 * c..][..32],
            );
        }
    }
}

pub(super) fn unpack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, g) in src.chunks_exact(GROUP_BLOCK).enumerate() {
        let at = b * BLOCK;
        for r in 0..ROWS {
            dst[r * row_bytes + at..][..2].copy_from_slice(&g[2 * r..2 * r + 2]);
        }
        for c in 0..4 {
            scatter_chunk(&g[16 + 32 * c..][..32], row_bytes, at + 2 + 4 * c, dst);
        }
    }
}
