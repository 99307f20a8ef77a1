//! Interleaved weight layouts: eight rows' blocks stored side by side ("x8"), made once at
//! load time from ggml's row-major blocks.
//!
//! A matrix × vector product over row-major blocks reduces every row to one float with a
//! horizontal sum and converts one scale per row and block. With eight rows interleaved in
//! 4-byte chunks, one 256-bit load holds the same four elements of eight rows, the eight
//! rows' scales are contiguous (one conversion), and each vector lane accumulates one output
//! row: no horizontal sums, and a broadcast of four activation bytes serves eight rows.
//!
//! The layouts have exactly the bytes of the rows they hold (same bandwidth per token), and
//! the kernels over them round like the scalar row kernels (`quant::vec_dot_ref`): per row,
//! `sum += isum as f32 * (dx * dy)`, block after block (k-quants: `sum += d * d8 * isum as
//! f32 - dmin * d8 * msum as f32` per super-block, `quant::kquants::dot_q8_k`), so the
//! results are bit-identical. [`unpack`] restores the original rows (used by the tests and
//! for dequantizing).
//!
//! | format | block of 8 rows | layout |
//! | --- | --- | --- |
//! | Q8_0 | 272 bytes | `d[8]` f16, then `qs[c][r][4]` for chunks `c < 8` |
//! | Q4_0 | 144 bytes | `d[8]` f16, then `qs[c][r][4]` for chunks `c < 4` (byte `k`: elements `k`, `k+16`) |
//! | Q5_0 | 176 bytes | `d[8]`, `qh[c][r]` (bits 0-3: elements `4c..4c+4`, bits 4-7: `16+4c..`), Q4_0's `qs` |
//! | Q4_K | 1152 bytes | `d[8]`, `dmin[8]` f16, `scales[i][r][4]` (`i < 3`: the packed 12 bytes), `qs[c][r][4]` for `c < 32` |
//! | Q5_K | 1408 bytes | Q4_K's 1152 (its low nibbles), then `qh[c][r][4]` for `c < 8` (bit `J` of byte `i`: the fifth bit of sub-block `J`'s element `4c + i`) |
//! | Q6_K | 1680 bytes | `d[8]` f16, `scales[p][r][2]` (scales `2p`, `2p+1`), then per triple `t < 16` `x[r][4]`, `y[r][4]`, `z[r][4]`: three 6-bit quants (elements `128n+l`, `+32`, `+64` for `t = 8n + l/4`) in the low bits, element `128n+96+l` in the top two of each |
//! | MXFP4 | 136 bytes | `e[8]` (E8M0 bytes), then `qs[c][r][4]` for chunks `c < 4` (byte `k`: elements `k`, `k+16`) |

pub(crate) mod mxfp4;
pub(crate) mod q4_0;
pub(crate) mod q4_k;
pub(crate) mod q5_0;
pub(crate) mod q5_k;
pub(crate) mod q6_k;
pub(crate) mod q8_0;

#[cfg(test)]
mod tests;

use alloc::vec;
use alloc::vec::Vec;

use super::legacy::{blocks, BlockQ8_0};
use super::GgmlType;
use crate::error::{Error, Result};

/// Rows per interleaved group.
pub const ROWS: usize = 8;

/// `out[8g + r] = row r of group g · a`, for every group in `w` (whole groups of `cols`
/// columns). `a` is the activation in the format's `vec_dot_type` and `sums` its per-block
/// integer sums ([`block_sums`]; unused by formats that do not need them).
pub type GemvX8Fn = fn(cols: usize, w: &[u8], a: &[u8], sums: &[i32], out: &mut [f32]);

/// Tokens the AVX2 batch kernels multiply with one group's weights at a time (their register
/// tile; the AVX-512 ones run four per quad of groups, eight per pair). `ops::matmul` cuts
/// its L2-sized blocks of tokens in multiples of it.
pub const GEMM_TOKENS: usize = 4;

/// `out[g · n + t][r] = row r of group g of w · acts[t]` for the whole groups in `w` (`cols`
/// columns each) and the `n = acts.len()` tokens (`out.len() == groups · n`). The kernel
/// takes each group's weights apart once and runs all the tokens over them, a register tile
/// of tokens (and, on wide vectors, of groups) at a time; per token the result is the
/// [`GemvX8Fn`]'s, bit for bit.
pub type GemmX8Fn = fn(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]);

/// Stores a batch kernel's output tile into the token-major result: `tile[g · n + t]`
/// (group `g` of `tile.len() / n`, token `t < n`) goes to the 8 floats at
/// `dst + t · stride + 8g`. The per-ISA versions write with streaming stores (the result is
/// many times the core's cache and each line is written once, so reading it for ownership
/// first only costs time) and end with a store fence.
///
/// # Safety
/// For every `t < n`, the `8 · groups` floats at `dst + t · stride` must be valid for writes
/// and touched by no other thread until the caller's parallel step ends.
pub type StoreTileFn = unsafe fn(tile: &[[f32; ROWS]], n: usize, dst: *mut f32, stride: usize);

/// The scalar [`StoreTileFn`] (plain stores).
///
/// # Safety
/// As [`StoreTileFn`].
pub unsafe fn store_tile(tile: &[[f32; ROWS]], n: usize, dst: *mut f32, stride: usize) {
    if n == 0 {
        return;
    }
    for (g, rows) in tile.chunks_exact(n).enumerate() {
        for (t, o) in rows.iter().enumerate() {
            // SAFETY: group g of token t lies in token t's writable run (the contract).
            unsafe {
                dst.add(t * stride + g * ROWS)
                    .cast::<[f32; ROWS]>()
                    .write_unaligned(*o)
            };
        }
    }
}

/// The quantized activations of a batch of tokens as the batch kernels read them: token
/// `t`'s row of bytes in the dot product's format and, for Q8_0 rows, each block's integer
/// sum ([`block_sums`]), its Q4_0 offset ([`q4_0_offset`]) and its scale as f32 (converted
/// once per token instead of once per weight group).
#[derive(Debug, Clone, Copy)]
pub struct BatchRows<'a> {
    n: usize,
    bytes: &'a [u8],
    sums: &'a [i32],
    offsets: &'a [i32],
    scales: &'a [f32],
    /// Per row: bytes, sums (and offsets) and scales.
    row_len: (usize, usize, usize),
}

impl<'a> BatchRows<'a> {
    /// `n` rows: `bytes`, `sums`, `offsets` and `scales` each hold `n` equal rows back to
    /// back (`sums`, `offsets` and `scales` may be empty when the format needs none; `offsets`
    /// is empty or as long as `sums`).
    pub fn new(
        n: usize,
        bytes: &'a [u8],
        sums: &'a [i32],
        offsets: &'a [i32],
        scales: &'a [f32],
    ) -> Self {
        assert!(
            n > 0
                && bytes.len().is_multiple_of(n)
                && sums.len().is_multiple_of(n)
                && (offsets.is_empty() || offsets.len() == sums.len())
                && scales.len().is_multiple_of(n),
            "a batch is n whole rows"
        );
        BatchRows {
            n,
            bytes,
            sums,
            offsets,
            scales,
            row_len: (bytes.len() / n, sums.len() / n, scales.len() / n),
        }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Token `t`'s quantized bytes.
    #[inline]
    pub fn bytes(&self, t: usize) -> &'a [u8] {
        let len = self.row_len.0;
        &self.bytes[t * len..(t + 1) * len]
    }

    /// Token `t`'s block sums (empty when not stored).
    #[inline]
    pub fn sums(&self, t: usize) -> &'a [i32] {
        let len = self.row_len.1;
        &self.sums[t * len..(t + 1) * len]
    }

    /// Token `t`'s block offsets for Q4_0 ([`q4_0_offset`]; empty when not stored).
    #[inline]
    pub fn offsets(&self, t: usize) -> &'a [i32] {
        let len = if self.offsets.is_empty() {
            0
        } else {
            self.row_len.1
        };
        &self.offsets[t * len..(t + 1) * len]
    }

    /// Token `t`'s block scales (empty when not stored).
    #[inline]
    pub fn scales(&self, t: usize) -> &'a [f32] {
        let len = self.row_len.2;
        &self.scales[t * len..(t + 1) * len]
    }

    /// Tokens `[start, end)` (`start < end <= len()`).
    #[inline]
    pub fn slice(&self, start: usize, end: usize) -> BatchRows<'a> {
        assert!(
            start < end && end <= self.n,
            "a non-empty range of the batch"
        );
        let (b, s, c) = self.row_len;
        BatchRows {
            n: end - start,
            bytes: &self.bytes[start * b..end * b],
            sums: &self.sums[start * s..end * s],
            offsets: if self.offsets.is_empty() {
                &[]
            } else {
                &self.offsets[start * s..end * s]
            },
            scales: &self.scales[start * c..end * c],
            row_len: self.row_len,
        }
    }
}

/// How a matrix's bytes are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// ggml's: row after row of blocks.
    Rows,
    /// Groups of [`ROWS`] rows interleaved as this module describes.
    X8,
}

/// The formats with an interleaved layout.
pub fn supported(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0
            | GgmlType::Q5_0
            | GgmlType::Q8_0
            | GgmlType::Q4_K
            | GgmlType::Q5_K
            | GgmlType::Q6_K
            | GgmlType::MXFP4
    )
}

type GroupFn = fn(src: &[u8], dst: &mut [u8], row_bytes: usize);

fn group_fns(ty: GgmlType) -> Option<(GroupFn, GroupFn)> {
    Some(match ty {
        GgmlType::Q4_0 => (q4_0::repack, q4_0::unpack),
        GgmlType::Q5_0 => (q5_0::repack, q5_0::unpack),
        GgmlType::Q8_0 => (q8_0::repack, q8_0::unpack),
        GgmlType::Q4_K => (q4_k::repack, q4_k::unpack),
        GgmlType::Q5_K => (q5_k::repack, q5_k::unpack),
        GgmlType::Q6_K => (q6_k::repack, q6_k::unpack),
        GgmlType::MXFP4 => (mxfp4::repack, mxfp4::unpack),
        _ => return None,
    })
}

fn check(ty: GgmlType, rows: usize, cols: usize, len: usize) -> Result<(usize, GroupFn, GroupFn)> {
    let fns = group_fns(ty)
        .ok_or_else(|| Error::InvalidArgument(alloc::format!("{ty} has no interleaved layout")))?;
    let row_bytes = ty.bytes_for(cols as u64).ok_or_else(|| {
        Error::InvalidArgument(alloc::format!("{cols} columns is not whole {ty} blocks"))
    })? as usize;
    if !rows.is_multiple_of(ROWS) || row_bytes.checked_mul(rows) != Some(len) {
        return Err(Error::InvalidArgument(alloc::format!(
            "cannot interleave a {rows}x{cols} {ty} matrix of {len} bytes"
        )));
    }
    Ok((row_bytes, fns.0, fns.1))
}

/// Row-major `rows × cols` blocks of `ty` to the interleaved layout (`rows % 8 == 0`).
pub fn repack(ty: GgmlType, rows: usize, cols: usize, src: &[u8]) -> Result<Vec<u8>> {
    let mut dst = vec![0u8; src.len()];
    repack_into(ty, rows, cols, src, &mut dst)?;
    Ok(dst)
}

/// [`repack`] into `dst` (as long as `src`), memory the caller chose.
pub fn repack_into(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    src: &[u8],
    dst: &mut [u8],
) -> Result<()> {
    let (row_bytes, repack_group, _) = check(ty, rows, cols, src.len())?;
    if dst.len() != src.len() {
        return Err(Error::InvalidArgument(alloc::format!(
            "repacking {} bytes into {}",
            src.len(),
            dst.len()
        )));
    }
    let group = ROWS * row_bytes;
    for (s, d) in src.chunks_exact(group).zip(dst.chunks_exact_mut(group)) {
        repack_group(s, d, row_bytes);
    }
    Ok(())
}

/// The inverse of [`repack`].
pub fn unpack(ty: GgmlType, rows: usize, cols: usize, src: &[u8]) -> Result<Vec<u8>> {
    let (row_bytes, _, unpack_group) = check(ty, rows, cols, src.len())?;
    let mut dst = vec![0u8; src.len()];
    let group = ROWS * row_bytes;
    for (s, d) in src.chunks_exact(group).zip(dst.chunks_exact_mut(group)) {
        unpack_group(s, d, row_bytes);
    }
    Ok(dst)
}

/// Row `r` of an interleaved matrix in ggml's row layout (`out` is one row's bytes).
pub fn unpack_row(ty: GgmlType, cols: usize, src: &[u8], r: usize, out: &mut [u8]) -> Result<()> {
    let row_bytes = out.len();
    let group = ROWS * row_bytes;
    let g = r / ROWS;
    let (_, _, unpack_group) = check(ty, ROWS, cols, group)?;
    let s = src
        .get(g * group..(g + 1) * group)
        .ok_or_else(|| Error::InvalidArgument(alloc::format!("row {r} is outside the matrix")))?;
    let mut rows = vec![0u8; group];
    unpack_group(s, &mut rows, row_bytes);
    out.copy_from_slice(&rows[(r % ROWS) * row_bytes..][..row_bytes]);
    Ok(())
}

/// Integer sum of each Q8_0 block's quants (what the 4- and 5-bit kernels subtract their
/// offset with). Writes `blocks(a).len()` values to the front of `out`.
pub fn block_sums(a: &[u8], out: &mut [i32]) {
    for (s, b) in out.iter_mut().zip(blocks::<BlockQ8_0>(a)) {
        *s = b.qs.iter().map(|&q| q as i32).sum();
    }
}

/// The Q4_0 offset of a Q8_0 block whose quants sum to `sum`: `-4 · sum` in both i16 halves
/// of an i32. The AVX2 Q4_0 kernels start their i16 sums of nibble × activation pairs from
/// it, so the two halves together carry the block's `-8 · Σy` and no per-token correction
/// is left once they are added (see `q4_0_block` in `kernels/x86/avx2_x8.rs`).
#[inline]
pub fn q4_0_offset(sum: i32) -> i32 {
    let half = (-4 * sum) as i16 as u16 as u32;
    (half | half << 16) as i32
}

/// Quantizes a row of activations to Q8_0 (`bytes`) and writes what the batch kernels read
/// beside it, per block: its quant sum ([`block_sums`]), its Q4_0 offset ([`q4_0_offsets`])
/// and its scale as f32 ([`block_scales`]), all in one pass.
pub type BatchQ8_0Fn =
    fn(x: &[f32], bytes: &mut [u8], sums: &mut [i32], offsets: &mut [i32], scales: &mut [f32]);

/// [`q4_0_offset`] of every block sum in `sums`, into the front of `out`.
pub fn q4_0_offsets(sums: &[i32], out: &mut [i32]) {
    for (o, &s) in out.iter_mut().zip(sums) {
        *o = q4_0_offset(s);
    }
}

/// Each Q8_0 block's f16 scale as f32 (exact), for [`BatchRows`]. Writes `blocks(a).len()`
/// values to the front of `out`.
pub fn block_scales(a: &[u8], out: &mut [f32]) {
    for (s, b) in out.iter_mut().zip(blocks::<BlockQ8_0>(a)) {
        *s = half::f16::from_le_bytes(b.d).to_f32();
    }
}

/// Whether the activation of `ty` needs [`block_sums`] (the k-quants' Q8_K activations carry
/// their own sums, `bsums`; the VNNI kernels read Q8_0 weights with their sign bit flipped,
/// so Q8_0 needs them too; the AVX2 MXFP4 kernels multiply `w + 12`, unsigned, and take
/// `12 · Σy` off).
pub fn needs_sums(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::MXFP4
    )
}

/// Scalar reference: unpacks each group and runs the row kernel on every row.
pub fn gemv_ref(ty: GgmlType, cols: usize, w: &[u8], a: &[u8], out: &mut [f32]) -> Result<()> {
    let dot = super::vec_dot_ref(ty)
        .ok_or_else(|| Error::InvalidArgument(alloc::format!("no reference kernel for {ty}")))?;
    let rows = out.len();
    let rows_bytes = unpack(ty, rows, cols, w)?;
    let row_bytes = rows_bytes.len() / rows.max(1);
    for (o, r) in out.iter_mut().zip(rows_bytes.chunks_exact(row_bytes)) {
        *o = dot(cols, r, a);
    }
    Ok(())
}

/// Repacks blocks of `block` bytes made of an f16 scale and `chunks` 4-byte quant chunks
/// (Q4_0, Q8_0): per block the eight scales, then each chunk of the eight rows.
fn repack_scale_chunks(src: &[u8], dst: &mut [u8], row_bytes: usize, block: usize, chunks: usize) {
    for (b, out) in dst.chunks_exact_mut(ROWS * block).enumerate() {
        let at = b * block;
        for r in 0..ROWS {
            out[2 * r..2 * r + 2].copy_from_slice(&src[r * row_bytes + at..][..2]);
        }
        for c in 0..chunks {
            gather_chunk(
                src,
                row_bytes,
                at + 2 + 4 * c,
                &mut out[16 + 32 * c..][..32],
            );
        }
    }
}

/// The inverse of [`repack_scale_chunks`].
fn unpack_scale_chunks(src: &[u8], dst: &mut [u8], row_bytes: usize, block: usize, chunks: usize) {
    for (b, g) in src.chunks_exact(ROWS * block).enumerate() {
        let at = b * block;
        for r in 0..ROWS {
            dst[r * row_bytes + at..][..2].copy_from_slice(&g[2 * r..2 * r + 2]);
        }
        for c in 0..chunks {
            scatter_chunk(&g[16 + 32 * c..][..32], row_bytes, at + 2 + 4 * c, dst);
        }
    }
}

/// Copies 4-byte chunk `c` of each of eight rows: `dst[4r..4r+4] = rows[r][at + 4c..]`.
#[inline]
fn gather_chunk(src: &[u8], row_bytes: usize, at: usize, dst: &mut [u8]) {
    for (r, d) in dst.chunks_exact_mut(4).enumerate() {
        d.copy_from_slice(&src[r * row_bytes + at..][..4]);
    }
}

/// The inverse of [`gather_chunk`].
#[inline]
fn scatter_chunk(src: &[u8], row_bytes: usize, at: usize, dst: &mut [u8]) {
    for (r, s) in src.chunks_exact(4).enumerate() {
        dst[r * row_bytes + at..][..4].copy_from_slice(s);
    }
}
