//! Q4_K × 8 rows: per super-block, the eight f16 `d`, the eight f16 `dmin`, the packed
//! 6-bit scales and mins as three 4-byte chunks of eight rows (`scales[i][r][4]` is bytes
//! `4i..4i+4` of row `r`'s 12, so lane `r` of each vector is one row and the kernel decodes
//! all eight rows at once with shifts and masks), then the 128 quant bytes as 32 chunks of
//! eight rows (chunk `c`: bytes `4c..4c+4`, i.e. elements `64j + 4(c%8)..+4` in the low
//! nibbles and `64j + 32 + 4(c%8)..+4` in the high ones, `j = c/8`).

use super::{gather_chunk, scatter_chunk, ROWS};

const BLOCK: usize = 144;
pub(crate) const GROUP_BLOCK: usize = ROWS * BLOCK;
/// Offsets in a group block: `d`, `dmin`, scales, quants.
pub(crate) const D: usize = 0;
pub(crate) const DMIN: usize = 16;
pub(crate) const SCALES: usize = 32;
pub(crate) const QS: usize = 128;

/// Where a row block keeps its scales and quants.
const ROW_SCALES: usize = 4;
const ROW_QS: usize = 16;

pub(super) fn repack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, out) in dst.chunks_exact_mut(GROUP_BLOCK).enumerate() {
        repack_block(src, out, row_bytes, b * BLOCK, ROW_QS);
    }
}

pub(super) fn unpack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, g) in src.chunks_exact(GROUP_BLOCK).enumerate() {
        unpack_block(g, dst, row_bytes, b * BLOCK, ROW_QS);
    }
}

/// The eight rows' super-blocks at byte `at` of each row (their 128 quant bytes at `at +
/// row_qs`: Q4_K's blocks, or Q5_K's, which add the high bits before them) into the first
/// [`GROUP_BLOCK`] bytes of `out`.
pub(super) fn repack_block(src: &[u8], out: &mut [u8], row_bytes: usize, at: usize, row_qs: usize) {
    for r in 0..ROWS {
        let row = &src[r * row_bytes + at..][..4];
        out[D + 2 * r..][..2].copy_from_slice(&row[..2]);
        out[DMIN + 2 * r..][..2].copy_from_slice(&row[2..]);
    }
    for i in 0..3 {
        let dst = &mut out[SCALES + 32 * i..][..32];
        gather_chunk(src, row_bytes, at + ROW_SCALES + 4 * i, dst);
    }
    for c in 0..32 {
        gather_chunk(
            src,
            row_bytes,
            at + row_qs + 4 * c,
            &mut out[QS + 32 * c..][..32],
        );
    }
}

/// The inverse of [`repack_block`]: the first [`GROUP_BLOCK`] bytes of `g` back into the
/// eight rows.
pub(super) fn unpack_block(g: &[u8], dst: &mut [u8], row_bytes: usize, at: usize, row_qs: usize) {
    for r in 0..ROWS {
        let row = &mut dst[r * row_bytes + at..][..4];
        row[..2].copy_from_slice(&g[D + 2 * r..][..2]);
        row[2..].copy_from_slice(&g[DMIN + 2 * r..][..2]);
    }
    for i in 0..3 {
        scatter_chunk(
            &g[SCALES + 32 * i..][..32],
            row_bytes,
            at + ROW_SCALES + 4 * i,
            dst,
        );
    }
    for c in 0..32 {
        scatter_chunk(&g[QS + 32 * c..][..32], row_bytes, at + row_qs + 4 * c, dst);
    }
}
