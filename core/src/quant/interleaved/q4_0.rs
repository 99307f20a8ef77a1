//! Q4_0 × 8 rows: per block, the eight f16 scales, then four 4-byte chunks of eight rows
//! (byte `k` of a row holds element `k` in its low nibble and `k + 16` in its high one).

use super::{repack_scale_chunks, unpack_scale_chunks, ROWS};

const BLOCK: usize = 18;
const CHUNKS: usize = 4;
/// Bytes of one interleaved block group (eight rows' blocks), used by the x86 and aarch64
/// kernels.
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
pub(crate) const GROUP_BLOCK: usize = ROWS * BLOCK;

pub(super) fn repack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    repack_scale_chunks(src, dst, row_bytes, BLOCK, CHUNKS);
}

pub(super) fn unpack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    unpack_scale_chunks(src, dst, row_bytes, BLOCK, CHUNKS);
}
