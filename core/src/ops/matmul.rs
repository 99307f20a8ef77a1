//! Products with quantized weights: the activation is quantized once to the format the
//! weight's dot product pairs with (Q8_0 / Q8_1 / Q8_K / F16 ...), then every output row is
//! one `vec_dot` call, or, for a matrix repacked to an interleaved layout, every group of
//! eight rows one `gemv_x8` call (one token: `matvec.rs`), and a batch of tokens runs the
//! batch kernels over each worker's rows (`matmul`, `matmul_glu`, here).

use alloc::borrow::Cow;
use alloc::vec::Vec;
use core::ops::Range;

use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::parallel::{for_each_range, DisjointSlice, Parallel};
use crate::quant::interleaved::{self, Layout};
use crate::quant::{self, GgmlType};

pub use super::matvec::{matvec, matvec_all, matvec_f32, matvec_many, MAX_JOBS};

/// A 2-D weight matrix in ggml orientation: `rows` output features of `cols` input weights
/// of type `ty`, borrowed from the model file in ggml's row layout or owned after
/// [`QMatrix::interleave`]. It may be a stack of `stack` matrices of `rows / stack` rows each
/// (a 3-D tensor: the experts of a mixture), of which [`QMatrix::part`] gives one.
#[derive(Debug, Clone)]
pub struct QMatrix<'a> {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub layout: Layout,
    pub data: Cow<'a, [u8]>,
    /// Matrices stacked in `rows` (1 for a plain matrix).
    pub stack: usize,
}

impl<'a> QMatrix<'a> {
    /// A stack of `stack` matrices of `rows` rows each, one after another in `data` (a 3-D
    /// ggml tensor `[cols, rows, stack]`).
    pub fn stacked(
        ty: GgmlType,
        stack: usize,
        rows: usize,
        cols: usize,
        data: &'a [u8],
    ) -> Result<Self> {
        let total = rows.checked_mul(stack).ok_or_else(|| {
            Error::InvalidArgument(alloc::format!("{stack} matrices of {rows} rows"))
        })?;
        let mut m = Self::new(ty, total, cols, data)?;
        m.stack = stack.max(1);
        Ok(m)
    }

    /// Matrix `i` of the stack (borrowed).
    pub fn part(&self, i: usize) -> Result<QMatrix<'_>> {
        let rows = self.rows / self.stack.max(1);
        if i >= self.stack {
            return Err(Error::InvalidArgument(alloc::format!(
                "matrix {i} of a stack of {}",
                self.stack
            )));
        }
        self.rows_view(i * rows, rows)
    }

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
            stack: 1,
        })
    }

    pub fn row_bytes(&self) -> usize {
        self.data.len() / self.rows.max(1)
    }

    /// The first `rows` rows (borrowed). In the interleaved layout `rows` must be a whole
    /// number of groups ([`interleaved::ROWS`]): the groups are stored one after another.
    pub fn row_prefix(&self, rows: usize) -> Result<QMatrix<'_>> {
        self.rows_view(0, rows)
    }

    /// Rows `first..first + rows` (borrowed), a plain matrix. In the interleaved layout both
    /// must be whole numbers of groups ([`interleaved::ROWS`]).
    pub fn rows_view(&self, first: usize, rows: usize) -> Result<QMatrix<'_>> {
        let aligned = |r: usize| self.layout != Layout::X8 || r.is_multiple_of(interleaved::ROWS);
        if first.checked_add(rows).is_none_or(|end| end > self.rows)
            || !aligned(first)
            || !aligned(rows)
        {
            return Err(Error::InvalidArgument(alloc::format!(
                "rows {first}..{} of a {}-row matrix",
                first.saturating_add(rows),
                self.rows
            )));
        }
        let rb = self.row_bytes();
        Ok(QMatrix {
            ty: self.ty,
            rows,
            cols: self.cols,
            layout: self.layout,
            data: Cow::Borrowed(&self.data[first * rb..(first + rows) * rb]),
            stack: 1,
        })
    }

    /// Repacks the matrix to the interleaved layout when the kernels have a kernel for it
    /// (and the rows come in whole groups); otherwise leaves it as it is. Returns whether it
    /// repacked.
    pub fn interleave(&mut self, k: &Kernels) -> Result<bool> {
        if !self.can_interleave(k) {
            return Ok(false);
        }
        let packed = interleaved::repack(self.ty, self.rows, self.cols, &self.data)?;
        self.data = Cow::Owned(packed);
        self.layout = Layout::X8;
        Ok(true)
    }

    /// [`Self::interleave`] into `dst` (exactly [`Self::data`]'s length) instead of a new
    /// allocation, so that a frontend can place the weights where it wants (huge pages).
    pub fn interleave_into(&mut self, k: &Kernels, dst: &'a mut [u8]) -> Result<bool> {
        if !self.can_interleave(k) {
            return Ok(false);
        }
        interleaved::repack_into(self.ty, self.rows, self.cols, &self.data, dst)?;
        self.data = Cow::Borrowed(dst);
        self.layout = Layout::X8;
        Ok(true)
    }

    /// Takes `data`, this matrix already repacked to the interleaved layout (by
    /// [`interleaved::repack_into`], as [`Self::interleave_into`] does).
    pub(crate) fn adopt_interleaved(&mut self, data: &'a [u8]) {
        debug_assert_eq!(data.len(), self.data.len());
        self.data = Cow::Borrowed(data);
        self.layout = Layout::X8;
    }

    /// Whether [`Self::interleave`] repacks this matrix with kernels `k`: still in the row
    /// layout, a kernel for the interleaved one, and whole groups of rows (in each matrix of
    /// a stack, so that no group mixes two).
    pub fn can_interleave(&self, k: &Kernels) -> bool {
        self.layout == Layout::Rows
            && k.gemv_x8(self.ty).is_some()
            && (self.rows / self.stack.max(1)).is_multiple_of(interleaved::ROWS)
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
    /// Bytes a buffer holds once it has quantized rows of up to `row_bytes` bytes and
    /// `blocks` Q8_0 block sums.
    pub fn bytes_for(row_bytes: usize, blocks: usize) -> usize {
        row_bytes + blocks * size_of::<i32>()
    }

    /// Grows the buffer to hold such rows (no allocation when one comes).
    pub fn reserve(&mut self, row_bytes: usize, blocks: usize) {
        grow(&mut self.bytes, row_bytes, 0);
        grow(&mut self.sums, blocks, 0);
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        self.bytes.capacity() + self.sums.capacity() * size_of::<i32>()
    }

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

/// One matrix's product, ready to run on any range of its work units: rows in ggml's
/// layout, groups of eight rows when interleaved.
pub(super) struct Plan<'m, 'a> {
    w: &'m QMatrix<'a>,
    kernel: Kernel,
    /// The batch kernel over the same layout, if the ISA has one.
    gemm: Option<interleaved::GemmX8Fn>,
    /// The row layout's kernel of several rows and tokens at once, if the ISA has one.
    rows: Option<quant::VecDotRowsFn>,
    /// Output rows per work unit.
    pub(super) unit: usize,
    /// The core's L2 size (the batch kernels' blocks of tokens).
    l2_bytes: usize,
    /// How the batch kernel's tiles reach the output (streaming where the ISA has it).
    store_tile: interleaved::StoreTileFn,
    /// Groups per batch kernel call (`Kernels::gemm_groups`).
    groups: usize,
}

#[derive(Clone, Copy)]
enum Kernel {
    Rows(quant::VecDotFn),
    X8(interleaved::GemvX8Fn),
}

impl<'m, 'a> Plan<'m, 'a> {
    pub(super) fn new(
        k: &Kernels,
        w: &'m QMatrix<'a>,
        xq: QAct<'_>,
        out_len: usize,
    ) -> Result<Self> {
        if out_len != w.rows {
            return Err(Error::InvalidArgument(alloc::format!(
                "matvec output has {out_len} rows, matrix {}",
                w.rows
            )));
        }
        let (kernel, unit) = match w.layout {
            Layout::Rows => (
                Kernel::Rows(k.vec_dot(w.ty).ok_or_else(|| {
                    Error::UnsupportedModel(alloc::format!(
                        "no dot-product kernel for {} weights",
                        w.ty
                    ))
                })?),
                1,
            ),
            Layout::X8 => {
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
                (Kernel::X8(gemv), interleaved::ROWS)
            }
        };
        let gemm = match w.layout {
            Layout::X8 => k.gemm_x8(w.ty),
            Layout::Rows => None,
        };
        let rows = match w.layout {
            Layout::Rows => k.vec_dot_rows(w.ty),
            Layout::X8 => None,
        };
        Ok(Plan {
            w,
            kernel,
            gemm,
            rows,
            unit,
            l2_bytes: k.l2_bytes(),
            store_tile: k.store_tile(),
            groups: k.gemm_groups(),
        })
    }

    pub(super) fn units(&self) -> usize {
        self.w.rows / self.unit
    }

    /// The interleaved weights of groups `g` (units of an interleaved matrix).
    fn group_weights(&self, g: Range<usize>) -> &[u8] {
        let group_bytes = interleaved::ROWS * self.w.row_bytes();
        &self.w.data[g.start * group_bytes..g.end * group_bytes]
    }

    /// Output rows of units `[start, end)` into `out` (exactly those rows).
    pub(super) fn run(&self, xq: QAct<'_>, start: usize, end: usize, out: &mut [f32]) {
        let w = self.w;
        let unit_bytes = self.unit * w.row_bytes();
        let data = &w.data[start * unit_bytes..end * unit_bytes];
        match (self.kernel, self.rows) {
            (Kernel::Rows(_), Some(rows)) => rows(w.cols, data, xq.bytes, 1, out),
            (Kernel::Rows(dot), None) => {
                for (o, row) in out.iter_mut().zip(data.chunks_exact(unit_bytes)) {
                    *o = dot(w.cols, row, xq.bytes);
                }
            }
            (Kernel::X8(gemv), _) => gemv(w.cols, data, xq.bytes, xq.sums, out),
        }
    }

    /// Units per parallel work item: about four items per thread, at least a few rows'
    /// worth so tiny matrices are not split into slivers.
    pub(super) fn chunk(&self, threads: usize) -> usize {
        let min = (16 / self.unit).max(1);
        self.units().div_ceil(threads.max(1) * 4).max(min)
    }

    /// Runs `f(start, end)` over the units for a batch in ranges of whole runs of
    /// [`Self::groups`] (the batch kernels' quads and their output lines are not split
    /// between workers), guided: each range takes `1 / (2 · threads)` of the runs not yet
    /// handed out, so the ranges shrink towards the end and the workers, claiming them in
    /// order, finish within a small range of each other whenever one of them started late
    /// or ran slower.
    fn for_each_share(&self, par: &dyn Parallel, f: &(dyn Fn(usize, usize) + Sync)) {
        let units = self.units();
        let runs = units.div_ceil(self.groups);
        let threads = par.threads().max(1);
        if threads == 1 || runs <= 1 {
            f(0, units);
            return;
        }
        let mut at = Vec::with_capacity(4 * threads * 8);
        at.push(0);
        let mut given = 0;
        while given < runs {
            given += ((runs - given) / (2 * threads)).max(1);
            at.push(given);
        }
        let unit = |r: usize| (r * self.groups).min(units);
        par.for_each(at.len() - 1, &|i| f(unit(at[i]), unit(at[i + 1])));
    }
}

/// Quantized activations of a batch of tokens, row after row in one buffer: each token's
/// bytes and, for Q8_0, its block sums, Q4_0 offsets and f32 block scales (what the batch
/// kernels read, [`interleaved::BatchRows`]).
#[derive(Default)]
pub struct BatchAct {
    bytes: Vec<u8>,
    sums: Vec<i32>,
    offsets: Vec<i32>,
    scales: Vec<f32>,
    /// Rows quantized last, and each one's bytes and blocks (sums and scales).
    n: usize,
    row_bytes: usize,
    blocks: usize,
}

impl BatchAct {
    /// Bytes the buffers hold once they have quantized `n` rows of up to `row_bytes` bytes
    /// and `blocks` Q8_0 blocks each (each block's sum, Q4_0 offset and scale).
    pub fn bytes_for(row_bytes: usize, blocks: usize, n: usize) -> usize {
        n * row_bytes + n * blocks * (2 * size_of::<i32>() + size_of::<f32>())
    }

    /// Grows the buffers to hold such rows.
    pub fn reserve(&mut self, row_bytes: usize, blocks: usize, n: usize) {
        grow(&mut self.bytes, n * row_bytes, 0);
        grow(&mut self.sums, n * blocks, 0);
        grow(&mut self.offsets, n * blocks, 0);
        grow(&mut self.scales, n * blocks, 0.0);
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        self.bytes.capacity()
            + (self.sums.capacity() + self.offsets.capacity()) * size_of::<i32>()
            + self.scales.capacity() * size_of::<f32>()
    }

    /// Quantizes the `n` rows of `x` (each `x.len() / n` long) to `ty`, the rows spread over
    /// the workers.
    pub fn quantize(
        &mut self,
        k: &Kernels,
        par: &dyn Parallel,
        ty: GgmlType,
        x: &[f32],
        n: usize,
    ) -> Result<()> {
        if n == 0 || !x.len().is_multiple_of(n) {
            return Err(Error::InvalidArgument(alloc::format!(
                "{} values are not {n} whole rows",
                x.len()
            )));
        }
        let cols = x.len() / n;
        let row_bytes = ty.bytes_for(cols as u64).ok_or_else(|| {
            Error::InvalidArgument(alloc::format!(
                "{cols} values is not a whole number of {ty} blocks"
            ))
        })? as usize;
        let q = k.quantize_row(ty).ok_or_else(|| {
            Error::UnsupportedModel(alloc::format!("no activation quantizer for {ty}"))
        })?;
        let blocks = if ty == GgmlType::Q8_0 { cols / 32 } else { 0 };
        grow(&mut self.bytes, n * row_bytes, 0);
        grow(&mut self.sums, n * blocks, 0);
        grow(&mut self.offsets, n * blocks, 0);
        grow(&mut self.scales, n * blocks, 0.0);
        let (all_bytes, all_sums, all_offsets, all_scales) = (
            DisjointSlice::new(&mut self.bytes),
            DisjointSlice::new(&mut self.sums),
            DisjointSlice::new(&mut self.offsets),
            DisjointSlice::new(&mut self.scales),
        );
        for_each_range(par, n, QUANTIZE_ROWS, &|start, end| {
            for t in start..end {
                // SAFETY: row t's bytes, sums, offsets and scales belong to this range only.
                let bytes = unsafe { all_bytes.piece(t * row_bytes, row_bytes) };
                let row = &x[t * cols..(t + 1) * cols];
                if blocks == 0 {
                    q(row, bytes);
                    continue;
                }
                // SAFETY: as for the bytes: row t's blocks are this range's alone.
                let (sums, offsets, scales) = unsafe {
                    (
                        all_sums.piece(t * blocks, blocks),
                        all_offsets.piece(t * blocks, blocks),
                        all_scales.piece(t * blocks, blocks),
                    )
                };
                if let Some(fused) = k.batch_q8_0() {
                    fused(row, bytes, sums, offsets, scales);
                } else {
                    q(row, bytes);
                    interleaved::block_sums(bytes, sums);
                    interleaved::q4_0_offsets(sums, offsets);
                    interleaved::block_scales(bytes, scales);
                }
            }
        });
        (self.n, self.row_bytes, self.blocks) = (n, row_bytes, blocks);
        Ok(())
    }

    /// Token `t`'s row.
    pub fn row(&self, t: usize) -> QAct<'_> {
        QAct {
            bytes: &self.bytes[t * self.row_bytes..(t + 1) * self.row_bytes],
            sums: &self.sums[t * self.blocks..(t + 1) * self.blocks],
        }
    }

    /// The first `n` rows, as the batch kernels take them.
    fn rows(&self, n: usize) -> interleaved::BatchRows<'_> {
        interleaved::BatchRows::new(
            n,
            &self.bytes[..n * self.row_bytes],
            &self.sums[..n * self.blocks],
            &self.offsets[..n * self.blocks],
            &self.scales[..n * self.blocks],
        )
    }
}

/// Rows of a batch a worker quantizes at least (fewer rows run on one thread).
const QUANTIZE_ROWS: usize = 16;

/// Grows `v` to at least `len` values (never shrinks: the buffers are reused).
fn grow<T: Clone>(v: &mut Vec<T>, len: usize, fill: T) {
    if v.len() < len {
        v.resize(len, fill);
    }
}

/// `out[t] = W · x[t]` for the `n` token rows quantized in `xq` (`out` is `n × W.rows`,
/// token-major). Work is split by rows; each worker runs all tokens over its rows, so a
/// chunk of weights is read from memory once per batch instead of once per token. Every
/// token's result is the one [`matvec`] computes (same kernel, same order).
pub fn matmul(
    k: &Kernels,
    par: &dyn Parallel,
    w: &QMatrix<'_>,
    xq: &BatchAct,
    n: usize,
    out: &mut [f32],
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    if out.len() != n * w.rows || xq.n < n {
        return Err(Error::InvalidArgument(alloc::format!(
            "matmul of {} rows over {n} tokens: output has {} values",
            w.rows,
            out.len()
        )));
    }
    let plan = Plan::new(k, w, xq.row(0), w.rows)?;
    let unit = plan.unit;
    let rows = w.rows;
    let dst = DisjointSlice::new(out);
    plan.for_each_share(par, &|start, end| match (plan.gemm, plan.rows) {
        (Some(gemm), _) if n > 1 => gemm_units(&plan, gemm, xq, n, start, end, &dst),
        (_, Some(f)) if n > 1 => rows_units(&plan, f, xq, n, start, end, &dst),
        _ => {
            // no batch kernel: the matrix × vector kernel for each token over pieces of the
            // range small enough to stay in L2 for the next token (weights read from
            // memory once)
            let piece = (GEMV_PIECE_BYTES / (unit * plan.w.row_bytes()).max(1)).max(1);
            for p0 in (start..end).step_by(piece) {
                let p1 = (p0 + piece).min(end);
                for t in 0..n {
                    // SAFETY: ranges are disjoint; token t's rows are [t·rows, (t+1)·rows).
                    let o = unsafe { dst.piece(t * rows + p0 * unit, (p1 - p0) * unit) };
                    plan.run(xq.row(t), p0, p1, o);
                }
            }
        }
    });
    Ok(())
}

/// Bytes of weights each token runs over before the next token does (kept in L2).
const GEMV_PIECE_BYTES: usize = 64 << 10;

/// Tokens a row-layout kernel call of several tokens gets at most.
const ROWS_TOKENS: usize = 64;

/// Floats of the row-major tile a row-layout kernel call writes (on the stack: no allocation
/// per call; 64 rows for 64 tokens).
const ROWS_TILE: usize = 4096;

/// Rows `[start, end)` of a row-layout matrix against the `n` tokens through the ISA's kernel
/// of several rows and tokens ([`quant::VecDotRowsFn`]): pieces of the range small enough to
/// stay in L2 while blocks of tokens pass over them, each call's row-major tile moved to the
/// token-major output.
fn rows_units(
    plan: &Plan<'_, '_>,
    f: quant::VecDotRowsFn,
    xq: &BatchAct,
    n: usize,
    start: usize,
    end: usize,
    dst: &DisjointSlice<'_, f32>,
) {
    let w = plan.w;
    let (rb, ab) = (w.row_bytes(), xq.row_bytes);
    let piece = (GEMV_PIECE_BYTES / rb.max(1)).max(1);
    let mut tile = [0f32; ROWS_TILE];
    for p0 in (start..end).step_by(piece) {
        let p1 = (p0 + piece).min(end);
        for t0 in (0..n).step_by(ROWS_TOKENS) {
            let t1 = (t0 + ROWS_TOKENS).min(n);
            let m = t1 - t0;
            // as many rows of the piece per call as the tile holds for these tokens
            for r0 in (p0..p1).step_by(ROWS_TILE / m) {
                let r1 = (r0 + ROWS_TILE / m).min(p1);
                let tile = &mut tile[..(r1 - r0) * m];
                f(
                    w.cols,
                    &w.data[r0 * rb..r1 * rb],
                    &xq.bytes[t0 * ab..t1 * ab],
                    m,
                    tile,
                );
                for t in 0..m {
                    // SAFETY: ranges are disjoint; token t's rows are [t·rows, (t+1)·rows).
                    let o = unsafe { dst.piece((t0 + t) * w.rows + r0, r1 - r0) };
                    for (r, o) in o.iter_mut().enumerate() {
                        *o = tile[r * m + t];
                    }
                }
            }
        }
    }
}

/// Groups `[start, end)` of an interleaved matrix against the `n` tokens: one kernel call
/// per `Kernels::gemm_groups` groups and block of tokens takes the groups' weights apart
/// once for all of them. The tokens come in blocks whose activations fill the core's L2
/// (`Kernels::l2_bytes`) while every group passes over them: each group's kernel call reads
/// them from L2 rather than L3, and the weights, read once per block of tokens, stream from
/// L3 or memory. (pp512 on a 1 MB-L2 Zen 5, Qwen2.5-1.5B Q4_K: blocks of a quarter of L2
/// 323 t/s, half 336, all 340, four times 317.)
fn gemm_units(
    plan: &Plan<'_, '_>,
    gemm: interleaved::GemmX8Fn,
    xq: &BatchAct,
    n: usize,
    start: usize,
    end: usize,
    dst: &DisjointSlice<'_, f32>,
) {
    let cols = plan.w.cols;
    for_tiles(plan, xq, n, start, end, dst, |g, tokens, tile| {
        gemm(cols, plan.group_weights(g), tokens, tile)
    });
}

/// Runs `tile(groups, tokens, out)` over the groups `[start, end)` in runs of
/// `Kernels::gemm_groups` and the `n` tokens in blocks that fill the core's L2 (see
/// [`gemm_units`]), and stores each tile it fills (`[group][token][row]`) into `dst`, the
/// token-major output of `plan`'s rows.
#[allow(clippy::too_many_arguments)]
fn for_tiles(
    plan: &Plan<'_, '_>,
    xq: &BatchAct,
    n: usize,
    start: usize,
    end: usize,
    dst: &DisjointSlice<'_, f32>,
    mut tile: impl FnMut(Range<usize>, interleaved::BatchRows<'_>, &mut [[f32; interleaved::ROWS]]),
) {
    const T: usize = interleaved::GEMM_TOKENS;
    let g_run = plan.groups;
    let rows = plan.w.rows;
    let acts = xq.rows(n);
    let block = (plan.l2_bytes / xq.row_bytes.max(1) / T * T).max(T);
    // a result larger than the core's L2 streams past the caches to memory; a smaller one
    // is read back soon from L2, where plain stores leave it
    let store = if n * rows * size_of::<f32>() >= plan.l2_bytes {
        plan.store_tile
    } else {
        interleaved::store_tile
    };
    let mut buf = alloc::vec![[0.0f32; interleaved::ROWS]; g_run * block.min(n)];
    for t0 in (0..n).step_by(block) {
        let t1 = (t0 + block).min(n);
        for g0 in (start..end).step_by(g_run) {
            let g1 = (g0 + g_run).min(end);
            let out = &mut buf[..(g1 - g0) * (t1 - t0)];
            tile(g0..g1, acts.slice(t0, t1), out);
            assert!((t1 - 1) * rows + g1 * interleaved::ROWS <= dst.len());
            // SAFETY: groups g0..g1 of tokens t0..t1 are inside this worker's row range of
            // the output (asserted in bounds above), which no other worker touches.
            unsafe {
                store(
                    out,
                    t1 - t0,
                    dst.as_mut_ptr().add(t0 * rows + g0 * interleaved::ROWS),
                    rows,
                )
            };
        }
    }
}

/// Whether [`matmul_glu`] can run `gate` and `up` with kernels `k`: one shape, one activation
/// type, both interleaved and with batch kernels.
pub fn glu_fusable(k: &Kernels, gate: &QMatrix<'_>, up: &QMatrix<'_>) -> bool {
    let batched = |m: &QMatrix<'_>| m.layout == Layout::X8 && k.gemm_x8(m.ty).is_some();
    gate.rows == up.rows
        && gate.cols == up.cols
        && gate.act_type() == up.act_type()
        && batched(gate)
        && batched(up)
}

/// A gated linear unit over one input: `out[t] = glu(G · x[t], U · x[t])` for the `n` token
/// rows quantized in `xq` (`out` is `n × G.rows`), where `glu(gate, up)` overwrites `gate`
/// element by element (`Kernels::swiglu` / `geglu`). Both products of a run of groups are
/// combined while they are in cache and only the result is stored: half the output traffic
/// of two [`matmul`]s, and no separate pass of the activation over them. Each value is the
/// one the two products and `glu` give separately. The matrices must be
/// [`glu_fusable`].
#[allow(clippy::too_many_arguments)]
pub fn matmul_glu(
    k: &Kernels,
    par: &dyn Parallel,
    gate: &QMatrix<'_>,
    up: &QMatrix<'_>,
    glu: fn(&mut [f32], &[f32]),
    xq: &BatchAct,
    n: usize,
    out: &mut [f32],
) -> Result<()> {
    if out.len() != n * gate.rows || xq.n < n {
        return Err(Error::InvalidArgument(alloc::format!(
            "gated product of {} rows over {n} tokens: output has {} values",
            gate.rows,
            out.len()
        )));
    }
    let (pg, pu) = (
        Plan::new(k, gate, xq.row(0), gate.rows)?,
        Plan::new(k, up, xq.row(0), up.rows)?,
    );
    let (true, Some(gg), Some(gu)) = (glu_fusable(k, gate, up), pg.gemm, pu.gemm) else {
        return Err(Error::InvalidArgument(
            "gate and up cannot run as one gated product with these kernels".into(),
        ));
    };
    let dst = DisjointSlice::new(out);
    pg.for_each_share(par, &|start, end| {
        let mut tu = Vec::new();
        for_tiles(&pg, xq, n, start, end, &dst, |g, tokens, tg| {
            tu.resize(tg.len(), [0.0; interleaved::ROWS]);
            gg(gate.cols, pg.group_weights(g.clone()), tokens, tg);
            gu(up.cols, pu.group_weights(g), tokens, &mut tu);
            glu(tg.as_flattened_mut(), tu.as_flattened());
        });
    });
    Ok(())
}
