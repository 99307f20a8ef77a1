//! Q5_0 × 8 rows: per block, the eight f16 scales, the fifth bits regrouped per chunk
//! (`qh[c][r]`: bits 0-3 are elements `4c..4c+4`, bits 4-7 elements `16+4c..16+4c+4` of row
//! `r`), then the nibbles as in Q4_0 × 8.

use super::{gather_chunk, scatter_chunk, ROWS};

const BLOCK: usize = 22;
pub(crate) const GROUP_BLOCK: usize = ROWS * BLOCK;

pub(super) fn repack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, out) in dst.chunks_exact_mut(GROUP_BLOCK).enumerate() {
        let at = b * BLOCK;
        for r in 0..ROWS {
            let row = &src[r * row_bytes + at..][..BLOCK];
            out[2 * r..2 * r + 2].copy_from_slice(&row[..2]);
            let qh = u32::from_le_bytes([row[2], row[3], row[4], row[5]]);
            for c in 0..4 {
                let lo = (qh >> (4 * c)) & 0xF;
                let hi = (qh >> (16 + 4 * c)) & 0xF;
                out[16 + 8 * c + r] = (lo | hi << 4) as u8;
            }
        }
        for c in 0..4 {
            gather_chunk(
                src,
                row_bytes,
                at + 6 + 4 * c,
                &mut out[48 + 32 * c..][..32],
            );
        }
    }
}

pub(super) fn unpack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, g) in src.chunks_exact(GROUP_BLOCK).enumerate() {
        let at = b * BLOCK;
        for r in 0..ROWS {
            let row = &mut dst[r * row_bytes + at..][..BLOCK];
            row[..2].copy_from_slice(&g[2 * r..2 * r + 2]);
            let mut qh = 0u32;
            for c in 0..4 {
                let h = g[16 + 8 * c + r] as u32;
                qh |= (h & 0xF) << (4 * c) | (h >> 4) << (16 + 4 * c);
            }
            row[2..6].copy_from_slice(&qh.to_le_bytes());
        }
        for c in 0..4 {
            scatter_chunk(&g[48 + 32 * c..][..32], row_bytes, at + 6 + 4 * c, dst);
        }
    }
}
