//! Matrix × vector over quantized weights: the activation is quantized once to the format
//! the weight's dot product pairs with (Q8_0 / Q8_1 / Q8_K / F16 ...), then every output row
//! is one `vec_dot` call. Rows are split across workers in contiguous chunks.

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::parallel::{for_each_range, DisjointSlice, Parallel};
use crate::quant::{self, GgmlType};

/// A borrowed 2-D weight matrix in ggml orientation: `rows` output features, each a
/// contiguous row of `cols` input weights of type `ty`.
#[derive(Debug, Clone, Copy)]
pub struct QMatrix<'a> {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub data: &'a [u8],
}

impl<'a> QMatrix<'a> {
    pub fn new(ty: GgmlType, rows: usize, cols: usize, data: &'a [u8]) -> Result<Self> {
        let row_bytes = ty.bytes_for(cols as u64).ok_or_else(|| {
            Error::InvalidArgument(alloc::format!(
                "{cols} columns is not a whole number of {ty} blocks"
            ))
        })?;
        if (row_bytes as usize).checked_mul(rows) != Some(data.len()) {
            return Err(Error::InvalidArgument(alloc::format!(
                "{ty} matrix {rows}x{cols} needs {} bytes, has {}",
                row_bytes as usize * rows,
                data.len()
            )));
        }
        Ok(QMatrix {
            ty,
            rows,
            cols,
            data,
        })
    }

    pub fn row_bytes(&self) -> usize {
        self.data.len() / self.rows.max(1)
    }

    pub fn row(&self, r: usize) -> &'a [u8] {
        let rb = self.row_bytes();
        &self.data[r * rb..(r + 1) * rb]
    }

    /// The activation format this matrix's dot product consumes.
    pub fn act_type(&self) -> GgmlType {
        quant::vec_dot_type(self.ty).unwrap_or(GgmlType::F32)
    }

    /// Dequantizes row `r` into `out` (`out.len() == cols`).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) -> Result<()> {
        quant::dequantize_row(self.ty, self.row(r), out)
    }
}

/// Scratch for a quantized activation row, reused across calls (no allocation per token once
/// it has grown to the largest row).
#[derive(Default)]
pub struct ActBuf {
    bytes: Vec<u8>,
}

impl ActBuf {
    /// Quantizes `x` to `ty` and returns the bytes.
    pub fn quantize(&mut self, k: &Kernels, ty: GgmlType, x: &[f32]) -> Result<&[u8]> {
        let n = ty.bytes_for(x.len() as u64).ok_or_else(|| {
            Error::InvalidArgument(alloc::format!(
                "{} values is not a whole number of {ty} blocks",
                x.len()
            ))
        })? as usize;
        if self.bytes.len() < n {
            self.bytes.resize(n, 0);
        }
        let q = k.quantize_row(ty).ok_or_else(|| {
            Error::UnsupportedModel(alloc::format!("no activation quantizer for {ty}"))
        })?;
        q(x, &mut self.bytes[..n]);
        Ok(&self.bytes[..n])
    }
}

/// `out[r] = W[r] · x` for every row, where `xq` is `x` quantized to `w.act_type()`.
pub fn matvec(
    k: &Kernels,
    par: &dyn Parallel,
    w: &QMatrix<'_>,
    xq: &[u8],
    out: &mut [f32],
) -> Result<()> {
    let dot = k.vec_dot(w.ty).ok_or_else(|| {
        Error::UnsupportedModel(alloc::format!("no dot-product kernel for {} weights", w.ty))
    })?;
    if out.len() != w.rows {
        return Err(Error::InvalidArgument(alloc::format!(
            "matvec output has {} rows, matrix {}",
            out.len(),
            w.rows
        )));
    }
    let rb = w.row_bytes();
    let cols = w.cols;
    let dst = DisjointSlice::new(out);
    for_each_range(par, w.rows, 16, &|start, end| {
        // SAFETY: for_each_range hands out disjoint [start, end) ranges.
        let o = unsafe { dst.piece(start, end - start) };
        for (i, r) in (start..end).enumerate() {
            o[i] = dot(cols, &w.data[r * rb..(r + 1) * rb], xq);
        }
    });
    Ok(())
}

/// Quantizes `x` for `w` and computes `out = W x` (convenience for one-off products).
pub fn matvec_f32(
    k: &Kernels,
    par: &dyn Parallel,
    w: &QMatrix<'_>,
    x: &[f32],
    act: &mut ActBuf,
    out: &mut [f32],
) -> Result<()> {
    let xq = act.quantize(k, w.act_type(), x)?;
    matvec(k, par, w, xq, out)
}
