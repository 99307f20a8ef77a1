//! Q6_K × 8 rows: per super-block, the eight f16 `d`, the int8 scales in pairs
//! (`scales[p][r][2]` holds scales `2p`, `2p+1` of row `r`, so one 16-byte load sign-extends
//! to one i16 pair per row), then the quants, three 6-bit values and a quarter of a fourth
//! per byte, as 16 triples of 4-byte chunks of eight rows.
//!
//! Triple `t = 8n + c` (`n` the 128-element half, `c < 8`) is three chunk vectors `x`, `y`,
//! `z`: for `l = 4c + i`, byte `i` of row `r` holds in its low six bits the stored quant
//! (value + 32) of element `128n + l` (`x`), `128n + 32 + l` (`y`) or `128n + 64 + l` (`z`),
//! and in its top two bits bits 0-1 (`x`), 2-3 (`y`) or 4-5 (`z`) of element `128n + 96 + l`.
//! The same 12 bytes per row and triple as the block's `ql`/`qh` (a permutation of their
//! bits), but three masks give three quants and the fourth takes eight operations, where the
//! nibble and 2-bit fields of `ql`/`qh` take seventeen for the four.

use super::ROWS;

const BLOCK: usize = 210;
pub(crate) const GROUP_BLOCK: usize = ROWS * BLOCK;
/// Offsets in a group block: `d`, scales, quant triples (96 bytes each).
pub(crate) const D: usize = 0;
pub(crate) const SCALES: usize = 16;
pub(crate) const QS: usize = 144;

/// Where a row block keeps its fields.
const ROW_QL: usize = 0;
const ROW_QH: usize = 128;
const ROW_SCALES: usize = 192;
const ROW_D: usize = 208;

/// Index in a group block of scale `g` of row `r`.
#[inline]
fn scale_at(g: usize, r: usize) -> usize {
    SCALES + 16 * (g / 2) + 2 * r + g % 2
}

/// Index in a group block of byte `i` of row `r` in vector `v` (x, y, z) of triple `t`.
#[inline]
fn quant_at(t: usize, v: usize, r: usize, i: usize) -> usize {
    QS + 96 * t + 32 * v + 4 * r + i
}

pub(super) fn repack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, out) in dst.chunks_exact_mut(GROUP_BLOCK).enumerate() {
        let at = b * BLOCK;
        for r in 0..ROWS {
            let row = &src[r * row_bytes + at..][..BLOCK];
            out[D + 2 * r..][..2].copy_from_slice(&row[ROW_D..][..2]);
            for g in 0..16 {
                out[scale_at(g, r)] = row[ROW_SCALES + g];
            }
            for n in 0..2 {
                for l in 0..32 {
                    let a = row[ROW_QL + 64 * n + l];
                    let b = row[ROW_QL + 64 * n + 32 + l];
                    let h = row[ROW_QH + 32 * n + l];
                    // the four stored quants of elements 128n + 32k + l
                    let q = [
                        (a & 0x0F) | (h & 3) << 4,
                        (b & 0x0F) | (h >> 2 & 3) << 4,
                        (a >> 4) | (h >> 4 & 3) << 4,
                        (b >> 4) | (h >> 6) << 4,
                    ];
                    let t = 8 * n + l / 4;
                    for v in 0..3 {
                        out[quant_at(t, v, r, l % 4)] = q[v] | (q[3] >> (2 * v) & 3) << 6;
                    }
                }
            }
        }
    }
}

pub(super) fn unpack(src: &[u8], dst: &mut [u8], row_bytes: usize) {
    for (b, g) in src.chunks_exact(GROUP_BLOCK).enumerate() {
        let at = b * BLOCK;
        for r in 0..ROWS {
            let row = &mut dst[r * row_bytes + at..][..BLOCK];
            row[ROW_D..][..2].copy_from_slice(&g[D + 2 * r..][..2]);
            for s in 0..16 {
                row[ROW_SCALES + s] = g[scale_at(s, r)];
            }
            for n in 0..2 {
                for l in 0..32 {
                    let t = 8 * n + l / 4;
                    let xyz: [u8; 3] = core::array::from_fn(|v| g[quant_at(t, v, r, l % 4)]);
                    let q3 = xyz[0] >> 6 | (xyz[1] >> 6) << 2 | (xyz[2] >> 6) << 4;
                    let [q0, q1, q2] = xyz.map(|x| x & 0x3F);
                    row[ROW_QL + 64 * n + l] = (q0 & 0x0F) | (q2 & 0x0F) << 4;
                    row[ROW_QL + 64 * n + 32 + l] = (q1 & 0x0F) | (q3 & 0x0F) << 4;
                    row[ROW_QH + 32 * n + l] =
                        q0 >> 4 | (q1 >> 4) << 2 | (q2 >> 4) << 4 | (q3 >> 4) << 6;
                }
            }
        }
    }
}
