//! The feed-forward half of a layer: the pre-norm, a dense gated FFN or a mixture of experts
//! (`moe::block`), the optional post-norm, the residual add.

use super::arch::Activation;
use super::encoder::residual_layernorm;
use super::forward::{norm_rows, project, project_many, residual};
use super::lora::{add_lora, LoraScratch, Proj, StepLora};
use super::moe;
use super::scratch::Scratch;
use super::weights::{DenseFfn, Ffn, Layer, Weights};
use crate::error::Result;
use crate::kernels::Kernels;
use crate::ops::matmul::{glu_fusable, matmul_glu, matvec_f32, matvec_many, ActBuf, BatchAct};
use crate::parallel::{for_each_range, DisjointSlice, Parallel};

/// The gated activation of the architecture: `gate = glu(gate, up)` element by element.
pub(super) type Glu = fn(&mut [f32], &[f32]);

pub(super) fn glu(k: &Kernels, a: Activation) -> Glu {
    match a {
        Activation::Silu => k.swiglu(),
        Activation::Gelu => k.geglu(),
        Activation::SwigluOai => k.swiglu_oai(),
        // not gated: `SeqFfn` applies it alone (the value here is never called)
        Activation::GeluErf => k.geglu(),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn ffn_block(
    w: &Weights<'_>,
    s: &mut Scratch,
    k: &Kernels,
    par: &dyn Parallel,
    il: usize,
    l: &Layer<'_>,
    n: usize,
    lora: &StepLora<'_>,
) -> Result<()> {
    let c = &w.config;
    let d = c.n_embd;
    norm_rows(par, &mut s.xb, &s.x, l.ffn_norm.as_deref(), c.rms_eps, d, n);
    let glu = glu(k, c.activation);
    match &l.ffn {
        Ffn::Dense(f) => {
            let bufs = Hidden {
                act: &mut s.act,
                act1: &mut s.act1,
                hb: &mut s.hb,
                hb2: &mut s.hb2,
            };
            match lora.sets.is_empty() {
                true => dense(k, par, bufs, f, glu, &s.xb, n, &mut s.xb2)?,
                false => {
                    let l = LayerLora {
                        step: lora,
                        buf: &mut s.lora,
                        il,
                    };
                    dense_lora(k, par, bufs, f, glu, &s.xb, n, &mut s.xb2, l)?
                }
            }
        }
        Ffn::Moe(m) => moe::block(c, s, k, par, il, m, glu, n)?,
        Ffn::Seq(f) => {
            let bufs = Hidden {
                act: &mut s.act,
                act1: &mut s.act1,
                hb: &mut s.hb,
                hb2: &mut s.hb2,
            };
            f.run(k, par, bufs, &s.xb, n, &mut s.xb2)?
        }
    }
    match &l.layer_out_norm {
        Some(ln) => residual_layernorm(par, &mut s.x, &s.xb2, ln, c.rms_eps, d, n),
        None => residual(par, &mut s.x, &mut s.xb2, l.post_ffn_norm.as_deref(), c, n),
    }
    Ok(())
}

/// The working buffers of a dense FFN: quantized activations and the hidden rows.
pub(super) struct Hidden<'s> {
    pub act: &'s mut BatchAct,
    pub act1: &'s mut ActBuf,
    pub hb: &'s mut [f32],
    pub hb2: &'s mut [f32],
}

/// `out[t] = down(glu(gate · x[t], up · x[t]))` for the first `n` rows of `x`.
#[allow(clippy::too_many_arguments)]
pub(super) fn dense(
    k: &Kernels,
    par: &dyn Parallel,
    h: Hidden<'_>,
    f: &DenseFfn<'_>,
    glu: Glu,
    x: &[f32],
    n: usize,
    out: &mut [f32],
) -> Result<()> {
    let d = f.gate.cols;
    let n_ff = f.up.rows;
    if n == 1 {
        // one token: gate and up in one matrix × vector dispatch
        let (hb, hb2) = (&mut h.hb[..n_ff], &mut h.hb2[..n_ff]);
        matvec_many(k, par, [&f.gate, &f.up], &x[..d], h.act1, [hb, hb2])?;
        glu(&mut h.hb[..n_ff], &h.hb2[..n_ff]);
        return matvec_f32(k, par, &f.down, &h.hb[..n_ff], h.act1, &mut out[..d]);
    }
    if glu_fusable(k, &f.gate, &f.up) {
        // gate and up in one pass that stores only glu(gate, up)
        h.act.quantize(k, par, f.gate.act_type(), &x[..n * d], n)?;
        let hb = &mut h.hb[..n * n_ff];
        matmul_glu(k, par, &f.gate, &f.up, glu, h.act, n, hb)?;
    } else {
        let outs = [&mut h.hb[..], &mut h.hb2[..]];
        project_many(k, par, h.act, [&f.gate, &f.up], x, n, outs)?;
        glu_rows(par, glu, h.hb, h.hb2, n_ff, n);
    }
    project(k, par, h.act, &f.down, h.hb, n, out)
}

/// A layer's adapters in a step, for [`dense_lora`].
pub(super) struct LayerLora<'s, 'l> {
    step: &'s StepLora<'l>,
    buf: &'s mut LoraScratch,
    il: usize,
}

/// [`dense`] with each row's adapters: gate and up computed apart (their adapters come before
/// the activation), `Σ scale · B (A x)` added to each product's rows. Bit for bit what
/// [`dense`] gives a row without adapters (the fused and the separate paths agree).
#[allow(clippy::too_many_arguments)]
fn dense_lora(
    k: &Kernels,
    par: &dyn Parallel,
    h: Hidden<'_>,
    f: &DenseFfn<'_>,
    glu: Glu,
    x: &[f32],
    n: usize,
    out: &mut [f32],
    l: LayerLora<'_, '_>,
) -> Result<()> {
    let (gate, up) = (
        l.step.touches(l.il, Proj::Gate),
        l.step.touches(l.il, Proj::Up),
    );
    let down = l.step.touches(l.il, Proj::Down);
    if !gate && !up && !down {
        return dense(k, par, h, f, glu, x, n, out);
    }
    let d = f.gate.cols;
    let n_ff = f.up.rows;
    if n == 1 {
        let (hb, hb2) = (&mut h.hb[..n_ff], &mut h.hb2[..n_ff]);
        matvec_many(k, par, [&f.gate, &f.up], &x[..d], h.act1, [hb, hb2])?;
    } else if !gate && !up && glu_fusable(k, &f.gate, &f.up) {
        h.act.quantize(k, par, f.gate.act_type(), &x[..n * d], n)?;
        let hb = &mut h.hb[..n * n_ff];
        matmul_glu(k, par, &f.gate, &f.up, glu, h.act, n, hb)?;
    } else {
        let outs = [&mut h.hb[..], &mut h.hb2[..]];
        project_many(k, par, h.act, [&f.gate, &f.up], x, n, outs)?;
    }
    let fused = n > 1 && !gate && !up && glu_fusable(k, &f.gate, &f.up);
    if !fused {
        add_lora(par, l.step, l.buf, l.il, Proj::Gate, x, n, h.hb);
        add_lora(par, l.step, l.buf, l.il, Proj::Up, x, n, h.hb2);
        match n {
            1 => glu(&mut h.hb[..n_ff], &h.hb2[..n_ff]),
            _ => glu_rows(par, glu, h.hb, h.hb2, n_ff, n),
        }
    }
    if n == 1 {
        matvec_f32(k, par, &f.down, &h.hb[..n_ff], h.act1, &mut out[..d])?;
    } else {
        project(k, par, h.act, &f.down, h.hb, n, out)?;
    }
    add_lora(par, l.step, l.buf, l.il, Proj::Down, h.hb, n, out);
    Ok(())
}

/// `glu` row by row, as the single-token pass calls it (same vector / tail split), the rows
/// spread over the threads.
pub(super) fn glu_rows(
    par: &dyn Parallel,
    glu: Glu,
    gates: &mut [f32],
    ups: &[f32],
    width: usize,
    n: usize,
) {
    let gates = DisjointSlice::new(gates);
    for_each_range(par, n, 4, &|start, end| {
        for t in start..end {
            // SAFETY: row t belongs to this range only.
            let hb = unsafe { gates.piece(t * width, width) };
            glu(hb, &ups[t * width..(t + 1) * width]);
        }
    });
}
