//! KV cache element types and the per-type halves of attention: scores of a query against
//! cached keys, and accumulating cached values. As in llama.cpp's CPU flash attention, the
//! query is brought to the key type's dot format (f16 for an F16 cache, Q8_0 for a Q8_0
//! one, unchanged for F32) and quantized values are converted to f32 row by row.

use core::fmt;
use core::str::FromStr;

use half::f16;

use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::quant::legacy::{dequantize_q8_0, BlockQ8_0, QK};
use crate::quant::GgmlType;

/// How the cache stores keys or values (llama.cpp's `--cache-type-k` / `--cache-type-v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvType {
    F32,
    /// llama.cpp's default.
    #[default]
    F16,
    /// 32-value blocks with one f16 scale (8.5 bits per value): half the F16 cache's size.
    Q8_0,
}

impl KvType {
    pub const ALL: [KvType; 3] = [KvType::F32, KvType::F16, KvType::Q8_0];

    /// llama.cpp's name (`f32`, `f16`, `q8_0`).
    pub fn name(self) -> &'static str {
        match self {
            KvType::F32 => "f32",
            KvType::F16 => "f16",
            KvType::Q8_0 => "q8_0",
        }
    }

    /// Values per block: a head's row must be a whole number of them.
    pub fn block(self) -> usize {
        match self {
            KvType::Q8_0 => QK,
            _ => 1,
        }
    }

    /// Bytes of `n` values (`n` a multiple of [`block`](Self::block)).
    pub fn bytes(self, n: usize) -> usize {
        match self {
            KvType::F32 => 4 * n,
            KvType::F16 => 2 * n,
            KvType::Q8_0 => n / QK * core::mem::size_of::<BlockQ8_0>(),
        }
    }
}

impl fmt::Display for KvType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KvType {
    type Err = Error;

    fn from_str(s: &str) -> Result<KvType> {
        KvType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::InvalidArgument(alloc::format!(
                    "unknown KV cache type '{s}' (expected f32, f16 or q8_0)"
                ))
            })
    }
}

/// One layer's cached keys or values: `rows` of `row` values (all KV heads of a position).
#[derive(Clone, Copy)]
pub enum KvView<'a> {
    F32(&'a [f32]),
    F16(&'a [f16]),
    Q8_0(&'a [BlockQ8_0]),
}

impl KvView<'_> {
    pub fn kv_type(&self) -> KvType {
        match self {
            KvView::F32(_) => KvType::F32,
            KvView::F16(_) => KvType::F16,
            KvView::Q8_0(_) => KvType::Q8_0,
        }
    }
}

/// Where one head's slice of cached rows sits: value offset `t·row + at` of position `t`,
/// `dim` long.
#[derive(Clone, Copy)]
pub struct HeadRows {
    pub row: usize,
    pub at: usize,
    pub dim: usize,
}

impl HeadRows {
    pub(crate) fn start(&self, t: usize) -> usize {
        t * self.row + self.at
    }
}

/// Query-side buffers of the score loop, per head.
pub(super) struct QueryBuf<'s> {
    /// The query quantized to Q8_0 (Q8_0 keys).
    pub q8: &'s mut [BlockQ8_0],
}

/// `out[i] = q · key(window.start + i)` for the head's keys. `q` is already in the key
/// type's precision where it is a float type (rounded to f16 by the caller for an F16 cache
/// on the one-row kernel, as llama.cpp does).
pub(super) fn scores(
    kern: &Kernels,
    q: &[f32],
    keys: KvView<'_>,
    head: HeadRows,
    window: core::ops::Range<usize>,
    buf: QueryBuf<'_>,
    out: &mut [f32],
) {
    match keys {
        KvView::F16(k) => {
            (kern.f16_ops().dots_f32_f16)(q, &k[head.start(window.start)..], head.row, out)
        }
        KvView::F32(k) => {
            for (o, t) in out.iter_mut().zip(window) {
                *o = dot_f32(q, &k[head.start(t)..][..head.dim]);
            }
        }
        KvView::Q8_0(k) => {
            let q8 = &mut buf.q8[..head.dim / QK];
            let bytes = bytemuck::cast_slice_mut(q8);
            match kern.quantize_row(GgmlType::Q8_0) {
                Some(quantize) => quantize(q, bytes),
                None => crate::quant::legacy::quantize_q8_0(q, bytes),
            }
            let dot = kern
                .vec_dot(GgmlType::Q8_0)
                .unwrap_or(crate::quant::legacy::vec_dot_q8_0_q8_0);
            let q8: &[u8] = bytemuck::cast_slice(q8);
            for (o, t) in out.iter_mut().zip(window) {
                let row = &k[head.start(t) / QK..][..head.dim / QK];
                *o = dot(head.dim, bytemuck::cast_slice(row), q8);
            }
        }
    }
}

/// `acc += p · value(t)` in f32 (`v32` holds a converted Q8_0 row). The one-row kernel sums
/// F16 values in f16 instead and calls this for F32 and Q8_0 values.
pub(super) fn mad_f32(
    kern: &Kernels,
    acc: &mut [f32],
    values: KvView<'_>,
    head: HeadRows,
    t: usize,
    p: f32,
    v32: &mut [f32],
) {
    let at = head.start(t);
    match values {
        KvView::F16(v) => (kern.f16_ops().mad_f32_f16)(acc, &v[at..][..head.dim], p),
        KvView::F32(v) => axpy(acc, &v[at..][..head.dim], p),
        KvView::Q8_0(v) => {
            let v32 = &mut v32[..head.dim];
            dequantize_q8_0(bytemuck::cast_slice(&v[at / QK..][..head.dim / QK]), v32);
            axpy(acc, v32, p);
        }
    }
}

/// `Σ a[i]·b[i]` in eight lanes (the shape of a 256-bit vector loop), then summed.
pub(super) fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a8.zip(b8) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// `acc[i] += x[i]·s`.
pub(super) fn axpy(acc: &mut [f32], x: &[f32], s: f32) {
    acc.iter_mut().zip(x).for_each(|(a, &x)| *a += x * s);
}
