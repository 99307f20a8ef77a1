//! What an encoder (BERT) adds to the one forward pass, each a switch of it: the input
//! embeddings (token + token type 0 + absolute position, then a LayerNorm), the LayerNorm
//! after each residual add (post-norm), the ungated GELU feed-forward with biases, and the
//! pooling that turns a sequence's token states into one embedding (done by the caller,
//! `crate::embed`). Attention is the same flash kernel, every row's window the whole
//! sequence (`Config::causal` false).

use alloc::borrow::Cow;

use super::ffn::Hidden;
use super::forward::project;
use super::scratch::{Scratch, ROW_CHUNK as ROWS};
use super::weights::{Binder, Weights};
use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::ops::activation::gelu_erf;
use crate::ops::norm::layernorm_inplace;
use crate::ops::QMatrix;
use crate::parallel::{for_each_range, DisjointSlice, Parallel};

/// How a sequence's token states become one embedding: llama.cpp's `pooling_type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// No pooling: every token's state (0).
    None,
    /// The mean over the sequence's tokens (1; sentence-transformers' default).
    Mean,
    /// The first token's state (`[CLS]`, 2).
    Cls,
    /// The last token's state (3).
    Last,
}

impl Pooling {
    pub fn from_id(id: u64) -> Result<Pooling> {
        Ok(match id {
            0 => Pooling::None,
            1 => Pooling::Mean,
            2 => Pooling::Cls,
            3 => Pooling::Last,
            other => {
                return Err(Error::UnsupportedModel(alloc::format!(
                    "pooling_type {other} is not supported (supported: 0 none, 1 mean, 2 cls, \
                     3 last)"
                )))
            }
        })
    }

    pub fn id(self) -> u32 {
        match self {
            Pooling::None => 0,
            Pooling::Mean => 1,
            Pooling::Cls => 2,
            Pooling::Last => 3,
        }
    }
}

/// A LayerNorm's weight and bias.
pub struct LayerNorm<'a> {
    pub weight: Cow<'a, [f32]>,
    pub bias: Cow<'a, [f32]>,
}

impl<'a> LayerNorm<'a> {
    /// `{name}.weight` and `{name}.bias`, `len` values each.
    pub(super) fn bind(b: &Binder<'_, 'a>, name: &str, len: usize) -> Result<LayerNorm<'a>> {
        Ok(LayerNorm {
            weight: b.vector(&alloc::format!("{name}.weight"), len)?,
            bias: b.vector(&alloc::format!("{name}.bias"), len)?,
        })
    }
}

/// An encoder's input tables: `position_embd` (a row per position), row 0 of
/// `token_types` (every token is of "sentence A", as llama.cpp has it) and the LayerNorm of
/// their sum with the token embedding (`token_embd_norm`).
pub struct EncoderInput<'a> {
    pub positions: QMatrix<'a>,
    pub token_type: Option<alloc::vec::Vec<f32>>,
    pub norm: LayerNorm<'a>,
}

impl<'a> EncoderInput<'a> {
    pub(super) fn bind(
        b: &Binder<'_, 'a>,
        n_embd: usize,
        n_ctx: usize,
    ) -> Result<EncoderInput<'a>> {
        let token_type = match b.f.tensor("token_types.weight") {
            Some(t) => {
                let n_types = t.dims.get(1).copied().unwrap_or(1) as usize;
                let m = b.matrix("token_types.weight", n_types, n_embd, false)?;
                let mut row = alloc::vec![0.0; n_embd];
                m.dequantize_row(0, &mut row)?;
                Some(row)
            }
            None => None,
        };
        Ok(EncoderInput {
            positions: b.matrix("position_embd.weight", n_ctx, n_embd, false)?,
            token_type,
            norm: LayerNorm::bind(b, "token_embd_norm", n_embd)?,
        })
    }
}

/// `down(gelu(up · x + b_up)) + b_down`: BERT's feed-forward block.
pub struct SeqFfn<'a> {
    pub up: QMatrix<'a>,
    pub up_b: Option<Cow<'a, [f32]>>,
    pub down: QMatrix<'a>,
    pub down_b: Option<Cow<'a, [f32]>>,
}

impl<'a> SeqFfn<'a> {
    pub(super) fn bind(b: &Binder<'_, 'a>, il: usize, n_embd: usize) -> Result<SeqFfn<'a>> {
        let n = |s: &str| alloc::format!("blk.{il}.{s}");
        let up_name = n("ffn_up.weight");
        let n_ff = b.require(&up_name)?.dims.get(1).copied().unwrap_or(0) as usize;
        Ok(SeqFfn {
            up: b.matrix(&up_name, n_ff, n_embd, true)?,
            up_b: b.opt_vector(&n("ffn_up.bias"), n_ff)?,
            down: b.matrix(&n("ffn_down.weight"), n_embd, n_ff, true)?,
            down_b: b.opt_vector(&n("ffn_down.bias"), n_embd)?,
        })
    }

    pub fn matrices(&self) -> impl Iterator<Item = &QMatrix<'a>> {
        [&self.up, &self.down].into_iter()
    }

    pub(super) fn matrices_mut(&mut self) -> impl Iterator<Item = &mut QMatrix<'a>> {
        [&mut self.up, &mut self.down].into_iter()
    }

    /// `out[t]` for the first `n` rows of `x`.
    pub(super) fn run(
        &self,
        k: &Kernels,
        par: &dyn Parallel,
        h: Hidden<'_>,
        x: &[f32],
        n: usize,
        out: &mut [f32],
    ) -> Result<()> {
        let (d, n_ff) = (self.up.cols, self.up.rows);
        project(k, par, h.act, &self.up, x, n, h.hb)?;
        let hb = DisjointSlice::new(&mut h.hb[..n * n_ff]);
        let up_b = self.up_b.as_deref();
        for_each_range(par, n, 4, &|start, end| {
            for t in start..end {
                // SAFETY: row t belongs to this range only.
                let row = unsafe { hb.piece(t * n_ff, n_ff) };
                if let Some(b) = up_b {
                    row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
                }
                gelu_erf(row);
            }
        });
        project(k, par, h.act, &self.down, h.hb, n, out)?;
        if let Some(b) = self.down_b.as_deref() {
            for row in out.chunks_exact_mut(d).take(n) {
                row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
            }
        }
        Ok(())
    }
}

/// The encoder's input rows: `x[t] += token_type + positions[pos[t]]`, then the LayerNorm.
pub(super) fn finish_inputs(
    w: &Weights<'_>,
    input: &EncoderInput<'_>,
    s: &mut Scratch,
    par: &dyn Parallel,
    n: usize,
) -> Result<()> {
    let c = &w.config;
    let d = c.n_embd;
    if let Some(&p) = s
        .positions
        .iter()
        .take(n)
        .find(|&&p| p >= input.positions.rows)
    {
        return Err(Error::InvalidArgument(alloc::format!(
            "position {p} is beyond the encoder's {} position embeddings",
            input.positions.rows
        )));
    }
    let xs = DisjointSlice::new(&mut s.x);
    let positions = &s.positions;
    let failed = spin::Mutex::new(None);
    for_each_range(par, n, ROWS, &|start, end| {
        let mut pos = alloc::vec![0.0f32; d];
        for (t, &p) in positions.iter().enumerate().take(end).skip(start) {
            // SAFETY: row t belongs to this range only.
            let x = unsafe { xs.piece(t * d, d) };
            if let Err(e) = input.positions.dequantize_row(p, &mut pos) {
                failed.lock().get_or_insert(e);
                return;
            }
            if let Some(tt) = &input.token_type {
                x.iter_mut().zip(tt).for_each(|(x, t)| *x += t);
            }
            x.iter_mut().zip(&pos).for_each(|(x, p)| *x += p);
            layernorm_inplace(x, &input.norm.weight, &input.norm.bias, c.rms_eps);
        }
    });
    match failed.into_inner() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// `x = LayerNorm(x + y)` row by row (the post-norm residual of an encoder layer).
pub(super) fn residual_layernorm(
    par: &dyn Parallel,
    x: &mut [f32],
    y: &[f32],
    ln: &LayerNorm<'_>,
    eps: f32,
    dim: usize,
    n: usize,
) {
    let xs = DisjointSlice::new(x);
    for_each_range(par, n, ROWS, &|start, end| {
        for t in start..end {
            // SAFETY: row t belongs to this range only.
            let x = unsafe { xs.piece(t * dim, dim) };
            x.iter_mut()
                .zip(&y[t * dim..(t + 1) * dim])
                .for_each(|(x, y)| *x += y);
            layernorm_inplace(x, &ln.weight, &ln.bias, eps);
        }
    });
}
