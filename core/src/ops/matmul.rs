//! Matrix × vector over quantized weights: the activation is quantized once to the format
//! the weight's dot product pairs with (Q8_0 / Q8_1 / Q8_K / F16 ...), then every output row
//! is one `vec_dot` call, or, for a matrix repacked to an interleaved layout, every group of
//! eight rows one `gemv_x8` call. Rows are split across workers in contiguous chunks.

use alloc::borrow::Cow;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::parallel::{for_each_range, DisjointSlice, Parallel};
use crate::quant::interleaved::{self, Layout};
use crate::quant::{self, GgmlType};

/// A 2-D weight matrix in ggml orientation: `rows` output features of `cols` input weights
/// of type `ty`, borrowed from the model file in ggml's row layout or owned after
/// [`QMatrix::interleave`].
#[derive(Debug, Clone)]
pub struct QMatrix<'a> {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub layout: Layout,
    pub data: Cow<'a, [u8]>,
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
            layout: Layout::Rows,
            data: Cow::Borrowed(data),
        })
    }

    pub fn row_bytes(&self) -> usize {
        self.data.len() / self.rows.max(1)
    }

    /// Repacks the matrix to the interleaved layout when the kernels have a kernel for it
    /// (and the rows come in whole groups); otherwise leaves it as it is. Returns whether it
    /// repacked.
    pub fn interleave(&mut self, k: &Kernels) -> Result<bool> {
        if self.layout != Layout::Rows
            || k.gemv_x8(self.ty).is_none()
            || !self.rows.is_multiple_of(interleaved::ROWS)
        {
            return Ok(false);
        }
        let packed = interleaved::repack(self.ty, self.rows, self.cols, &self.data)?;
        self.data = Cow::Owned(packed);
        self.layout = Layout::X8;
        Ok(true)
    }

    /// The activation format this matrix's dot product consumes.
    pub fn act_type(&self) -> GgmlType {
        quant::vec_dot_type(self.ty).unwrap_or(GgmlType::F32)
    }

    /// Dequantizes row `r` into `out` (`out.len() == cols`).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) -> Result<()> {
        if r >= self.rows {
            return Err(Error::InvalidArgument(alloc::format!(
                "row {r} is outside a matrix of {} rows",
                self.rows
            )));
        }
        let rb = self.row_bytes();
        match self.layout {
            Layout::Rows => quant::dequantize_row(self.ty, &self.data[r * rb..(r + 1) * rb], out),
            Layout::X8 => {
                let mut row = alloc::vec![0u8; rb];
                interleaved::unpack_row(self.ty, self.cols, &self.data, r, &mut row)?;
                quant::dequantize_row(self.ty, &row, out)
            }
        }
    }
}

/// A quantized activation row: its bytes in the dot product's format and, for Q8_0, the
/// integer sum of every block (the interleaved 4- and 5-bit kernels subtract their offset
/// with it).
#[derive(Debug, Clone, Copy)]
pub struct QAct<'b> {
    pub bytes: &'b [u8],
    pub sums: &'b [i32],
}

/// Scratch for a quantized activation row, reused across calls (no allocation per token once
/// it has grown to the largest row).
#[derive(Default)]
pub struct ActBuf {
    bytes: Vec<u8>,
    sums: Vec<i32>,
}

impl ActBuf {
    /// Quantizes `x` to `ty`.
    pub fn quantize(&mut self, k: &Kernels, ty: GgmlType, x: &[f32]) -> Result<QAct<'_>> {
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
        let nb = if ty == GgmlType::Q8_0 {
            x.len() / 32
        } else {
            0
        };
        if self.sums.len() < nb {
            self.sums.resize(nb, 0);
        }
        if nb > 0 {
            interleaved::block_sums(&self.bytes[..n], &mut self.sums[..nb]);
        }
        Ok(QAct {
            bytes: &self.bytes[..n],
            sums: &self.sums[..nb],
        })
    }
}

/// `out[r] = W[r] · x` for every row, where `xq` is `x` quantized to `w.act_type()`.
pub fn matvec(
    k: &Kernels,
    par: &dyn Parallel,
    w: &QMatrix<'_>,
    xq: QAct<'_>,
    out: &mut [f32],
) -> Result<()> {
    if out.len() != w.rows {
        return Err(Error::InvalidArgument(alloc::format!(
            "matvec output has {} rows, matrix {}",
            out.len(),
            w.rows
        )));
    }
    if w.layout == Layout::X8 {
        return matvec_x8(k, par, w, xq, out);
    }
    let dot = k.vec_dot(w.ty).ok_or_else(|| {
        Error::UnsupportedModel(alloc::format!("no dot-product kernel for {} weights", w.ty))
    })?;
    let rb = w.row_bytes();
    let cols = w.cols;
    let data = &*w.data;
    let xq = xq.bytes;
    let dst = DisjointSlice::new(out);
    for_each_range(par, w.rows, 16, &|start, end| {
        // SAFETY: for_each_range hands out disjoint [start, end) ranges.
        let o = unsafe { dst.piece(start, end - start) };
        for (i, r) in (start..end).enumerate() {
            o[i] = dot(cols, &data[r * rb..(r + 1) * rb], xq);
        }
    });
    Ok(())
}

/// [`matvec`] over an interleaved matrix: work is split in whole groups of eight rows.
fn matvec_x8(
    k: &Kernels,
    par: &dyn Parallel,
    w: &QMatrix<'_>,
    xq: QAct<'_>,
    out: &mut [f32],
) -> Result<()> {
    let gemv = k.gemv_x8(w.ty).ok_or_else(|| {
        Error::UnsupportedModel(alloc::format!(
            "{} weights are interleaved but this kernel table cannot compute with them",
            w.ty
        ))
    })?;
    if interleaved::needs_sums(w.ty) && xq.sums.len() * 32 < w.cols {
        return Err(Error::InvalidArgument(
            "the activation lacks its block sums".into(),
        ));
    }
    const G: usize = interleaved::ROWS;
    let group_bytes = G * w.row_bytes();
    let cols = w.cols;
    let data = &*w.data;
    let dst = DisjointSlice::new(out);
    for_each_range(par, w.rows / G, 2, &|start, end| {
        // SAFETY: for_each_range hands out disjoint [start, end) ranges of groups.
        let o = unsafe { dst.piece(start * G, (end - start) * G) };
        gemv(
            cols,
            &data[start * group_bytes..end * group_bytes],
            xq.bytes,
            xq.sums,
            o,
        );
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
