//! Q5_K × 8 rows: per super-block, a Q4_K × 8 group block of the eight rows' `d`, `dmin`,
//! packed scales and low nibbles (the same offsets, `q4_k::D` .. `q4_k::QS`, so the Q4_K
//! kernels' code reads them), then the high-bit plane `qh` as 8 chunks of eight rows
//! (`qh[c][r][4]`: bytes `4c..4c+4` of row `r`'s 32). Byte `i` of chunk `c` holds the fifth
//! bit of element `64j + 4c + i` in bit `2j` and of element `64j + 32 + 4c + i` in bit
//! `2j + 1`, i.e. sub-block `J`'s in bit `J`: quant chunk `8k + c` (sub-blocks `2k`, `2k + 1`)
//! takes its fifth bits from qh chunk `c`, bits `2k` (low nibbles) and `2k + 1` (high ones).

use super::{gather_chunk, q4_k, scatter_chunk, ROWS};

const BLOCK: usize = 176;
pub(crate) const GROUP_BLOCK: usize = ROWS * BLOCK;
/// Offset of the high-bit chunks in a group block (after the Q4_K × 8 part).
pub(crate) const QH: usize = q4_k::GROUP_BLOCK;

/// Where a row block keeps its high bits and quants.
const ROW_QH: usize = 16;
const ROW_QS: usize = 48;

pub(super) fn repack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, out) in dst.chunks_exact_mut(GROUP_BLOCK).enumerate() {
        let at = b * BLOCK;
        q4_k::repack_block(src, out, row_bytes, at, ROW_QS);
        for c in 0..8 {
            gather_chunk(
                src,
                row_bytes,
                at + ROW_QH + 4 * c,
                &mut out[QH + 32 * c..][..32],
            );
        }
    }
}

pub(super) fn unpack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, g) in src.chunks_exact(GROUP_BLOCK).enumerate() {
        let at = b * BLOCK;
        q4_k::unpack_block(g, dst, row_bytes, at, ROW_QS);
        for c in 0..8 {
            scatter_chunk(&g[QH + 32 * c..][..32], row_bytes, at + ROW_QH + 4 * c, dst);
        }
    }
}
