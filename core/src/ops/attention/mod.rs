//! Attention of one query head over the KV cache (F32, F16 or Q8_0), with grouped-query
//! heads reading their shared K/V rows in place (no copies per head), and no score matrix:
//! one row of scores per query.

pub mod flash;
mod kv;
pub mod rotation;

pub use kv::{HeadRows, KvType, KvView};

use alloc::vec;
use alloc::vec::Vec;

use bytemuck::Zeroable;
use half::f16;

use crate::kernels::Kernels;
use crate::quant::legacy::{BlockQ8_0, QK};

/// Shapes of one attention layer.
#[derive(Debug, Clone, Copy)]
pub struct AttnShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
}

impl AttnShape {
    pub fn k_row(&self) -> usize {
        self.n_head_kv * self.head_dim_k
    }
    pub fn v_row(&self) -> usize {
        self.n_head_kv * self.head_dim_v
    }
}

/// Which of ggml's two CPU flash-attention kernels a batch takes: llama.cpp uses its tiled
/// kernel for batches of at least 64 query tokens and the one-row kernel otherwise (single
/// tokens included). Ours are [`flash`] and [`attend_head`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttnKernel {
    /// Tiles of query rows over blocks of keys ([`flash`]).
    Tiled,
    /// One query head at a time ([`attend_head`]).
    OneRow,
}

impl AttnKernel {
    /// The kernel llama.cpp would use for a batch of `n_tokens` queries.
    pub fn for_batch(n_tokens: usize) -> AttnKernel {
        if n_tokens >= 64 {
            AttnKernel::Tiled
        } else {
            AttnKernel::OneRow
        }
    }
}

/// Per-worker buffers of [`attend_head`], sized once for a context of `n_ctx` positions.
pub struct AttnScratch {
    /// The prompt (flash) kernel's buffers.
    pub flash: flash::FlashScratch,
    scores: Vec<f32>,
    acc16: Vec<f16>,
    v32: Vec<f32>,
    q8: Vec<BlockQ8_0>,
}

impl AttnScratch {
    pub fn new(shape: AttnShape, n_ctx: usize) -> AttnScratch {
        AttnScratch {
            flash: flash::FlashScratch::new(shape),
            scores: vec![0.0; n_ctx],
            acc16: vec![f16::ZERO; shape.head_dim_v],
            v32: vec![0.0; shape.head_dim_v],
            q8: vec![BlockQ8_0::zeroed(); shape.head_dim_k.div_ceil(QK)],
        }
    }
}

/// One layer's cache as attention reads it.
#[derive(Clone, Copy)]
pub struct KvLayer<'a> {
    pub k: KvView<'a>,
    pub v: KvView<'a>,
}

/// `out = softmax(scale · q·K[t] for t in window) · V` for query head `h` (`q` and `out` are
/// that head's rows), reading the cache rows of its KV head in place (grouped-query heads
/// share them, no copies), as ggml's one-row kernel does: q in the key type's dot format
/// (rounded in place to f16 for an F16 cache, quantized to Q8_0 for a Q8_0 one), scores in
/// f32, online softmax, an F16 value cache summed in f16 and the others in f32.
#[allow(clippy::too_many_arguments)]
pub fn attend_head(
    kern: &Kernels,
    out: &mut [f32],
    q: &mut [f32],
    kv: KvLayer<'_>,
    shape: AttnShape,
    h: usize,
    window: core::ops::Range<usize>,
    scale: f32,
    softcap: Option<f32>,
    s: &mut AttnScratch,
) {
    let (dk, dv) = (shape.head_dim_k, shape.head_dim_v);
    let group = (shape.n_head / shape.n_head_kv.max(1)).max(1);
    let kvh = h / group;
    let keys = kv::HeadRows {
        row: shape.k_row(),
        at: kvh * dk,
        dim: dk,
    };
    let values = kv::HeadRows {
        row: shape.v_row(),
        at: kvh * dv,
        dim: dv,
    };
    if kv.k.kv_type() == KvType::F16 {
        q.iter_mut().for_each(|x| *x = f16::from_f32(*x).to_f32());
    }
    let scores = &mut s.scores[..window.len()];
    let buf = kv::QueryBuf { q8: &mut s.q8 };
    kv::scores(kern, q, kv.k, keys, window.clone(), buf, scores);
    for x in scores.iter_mut() {
        *x *= scale;
        if let Some(c) = softcap {
            *x = c * libm::tanhf(*x / c);
        }
    }
    let ops = kern.f16_ops();
    // online softmax; an F16 value cache accumulates in f16, the others in f32
    let acc = &mut s.acc16[..dv];
    acc.fill(f16::ZERO);
    out.fill(0.0);
    let (mut m, mut sum) = (f32::NEG_INFINITY, 0.0f32);
    for (&x, t) in scores.iter().zip(window) {
        let (mut ms, mut vs) = (1.0f32, 1.0f32);
        let rescale = x > m;
        if rescale {
            ms = libm::expf(m - x);
            m = x;
        } else {
            vs = libm::expf(x - m);
        }
        if let KvView::F16(v) = kv.v {
            if rescale {
                (ops.scale_f16)(acc, ms);
            }
            let at = t * values.row + values.at;
            (ops.mad_f16)(acc, &v[at..at + dv], vs);
        } else {
            if rescale {
                out.iter_mut().for_each(|o| *o *= ms);
            }
            kv::mad_f32(kern, out, kv.v, values, t, vs, &mut s.v32);
        }
        sum = sum * ms + vs;
    }
    let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    if kv.v.kv_type() == KvType::F16 {
        out.iter_mut()
            .zip(acc.iter())
            .for_each(|(o, a)| *o = a.to_f32() * inv);
    } else {
        out.iter_mut().for_each(|o| *o *= inv);
    }
}

#[cfg(test)]
mod tests;
