//! The mixture-of-experts block of the forward pass.
//!
//! Every token's router logits are computed in one product; each token chooses its experts
//! ([`route`]); then the step's tokens are grouped by expert, and each expert that any token
//! chose runs once over all of its tokens through the batch kernels (an expert no token
//! chose is never read). A token's output is the sum of its experts' outputs, each times its
//! weight, in ascending order of expert: the same order whatever shares the step, and every
//! expert product gives a token the bits the single-token kernels give it, so a sequence's
//! logits do not depend on its neighbours (batch invariance).

use alloc::vec::Vec;

use super::super::config::Config;
use super::super::ffn::{dense, glu_rows, Glu, Hidden};
use super::super::forward::project;
use super::super::scratch::Scratch;
use super::experts::{Expert, Experts};
use super::route::{route, MAX_USED};
use crate::error::Result;
use crate::kernels::Kernels;
use crate::ops::matmul::{glu_fusable, matmul, matmul_glu, matvec_all, matvec_f32, matvec_many};
use crate::parallel::Parallel;

/// The block's working memory, grown to the largest pass and reused.
#[derive(Default)]
pub struct MoeScratch {
    /// Router logits, `n × n_expert`.
    logits: Vec<f32>,
    /// One token's probabilities (`route`'s scratch).
    probs: Vec<f32>,
    /// Each token's experts and weights, `n × k`.
    ids: Vec<u32>,
    weights: Vec<f32>,
    /// The tokens of each expert: `first[e]..first[e + 1]` index `members` (token, weight).
    first: Vec<usize>,
    members: Vec<(u32, f32)>,
    /// One expert's tokens' inputs and outputs, `m × n_embd` each.
    input: Vec<f32>,
    output: Vec<f32>,
}

impl MoeScratch {
    /// Bytes the scratch holds for passes of `cap` tokens of model `c`.
    pub fn bytes_for(c: &Config, cap: usize) -> usize {
        let Some(moe) = &c.moe else { return 0 };
        let (e, k) = (moe.n_expert, moe.max_used());
        let rows = c.ffn_rows(cap);
        let f = size_of::<f32>();
        cap * e * f
            + e * f
            + cap * k * (size_of::<u32>() + f)
            + (e + 1) * size_of::<usize>()
            + cap * k * size_of::<(u32, f32)>()
            + 2 * rows * c.n_embd * f
    }

    /// Grows the buffers to what passes of `cap` tokens need.
    pub fn reserve(&mut self, c: &Config, cap: usize) {
        let Some(moe) = &c.moe else { return };
        let (e, k) = (moe.n_expert, moe.max_used());
        let rows = c.ffn_rows(cap);
        grow(&mut self.logits, cap * e, 0.0);
        grow(&mut self.probs, e, 0.0);
        grow(&mut self.ids, cap * k, 0);
        grow(&mut self.weights, cap * k, 0.0);
        grow(&mut self.first, e + 1, 0);
        grow(&mut self.members, cap * k, (0, 0.0));
        grow(&mut self.input, rows * c.n_embd, 0.0);
        grow(&mut self.output, rows * c.n_embd, 0.0);
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        let f = size_of::<f32>();
        (self.logits.capacity()
            + self.probs.capacity()
            + self.weights.capacity()
            + self.input.capacity()
            + self.output.capacity())
            * f
            + self.ids.capacity() * size_of::<u32>()
            + self.first.capacity() * size_of::<usize>()
            + self.members.capacity() * size_of::<(u32, f32)>()
    }
}

fn grow<T: Clone>(v: &mut Vec<T>, len: usize, fill: T) {
    if v.len() < len {
        v.resize(len, fill);
    }
}

/// `s.xb2[t] = Σ_e weight · expert_e(s.xb[t])` (+ the shared expert) for the pass's first
/// `n` tokens.
#[allow(clippy::too_many_arguments)]
pub(in crate::model) fn block(
    c: &Config,
    s: &mut Scratch,
    k: &Kernels,
    par: &dyn Parallel,
    il: usize,
    m: &Experts<'_>,
    glu: Glu,
    n: usize,
) -> Result<()> {
    let Some(moe) = &c.moe else {
        return Err(crate::Error::UnsupportedModel(
            "a layer has experts but the model no mixture-of-experts configuration".into(),
        ));
    };
    let d = c.n_embd;
    let (n_expert, used) = (moe.n_expert, moe.n_used[il]);
    let ms = &mut s.moe;
    ms.reserve(c, n.max(1));

    // router logits of every token, then each token's experts
    let logits = &mut ms.logits[..n * n_expert];
    if n == 1 {
        matvec_f32(k, par, &m.router, &s.xb[..d], &mut s.act1, logits)?;
    } else {
        project(k, par, &mut s.act, &m.router, &s.xb, n, logits)?;
    }
    for t in 0..n {
        let row = &mut ms.logits[t * n_expert..(t + 1) * n_expert];
        if let Some(b) = &m.router_bias {
            row.iter_mut().zip(b.iter()).for_each(|(l, b)| *l += b);
        }
        let (ids, weights) = (
            &mut ms.ids[t * used..(t + 1) * used],
            &mut ms.weights[t * used..(t + 1) * used],
        );
        route(
            moe.gating,
            moe.norm_weights,
            row,
            &mut ms.probs[..n_expert],
            ids,
            weights,
        );
    }

    if n == 1 {
        let ids = &mut ms.ids[..used];
        let weights = &mut ms.weights[..used];
        let h = Hidden {
            act: &mut s.act,
            act1: &mut s.act1,
            hb: &mut s.hb,
            hb2: &mut s.hb2,
        };
        let x = &s.xb[..d];
        decode(
            k,
            par,
            h,
            m,
            glu,
            x,
            ids,
            weights,
            &mut ms.output,
            &mut s.xb2[..d],
        )?;
    } else {
        grouped(k, par, s, m, glu, n, used, n_expert)?;
    }
    shared(k, par, s, m, glu, n)
}

/// The step's tokens grouped by expert: each chosen expert runs once over all its tokens.
#[allow(clippy::too_many_arguments)]
fn grouped(
    k: &Kernels,
    par: &dyn Parallel,
    s: &mut Scratch,
    m: &Experts<'_>,
    glu: Glu,
    n: usize,
    used: usize,
    n_expert: usize,
) -> Result<()> {
    let d = m.gate.cols;
    let ms = &mut s.moe;
    // the tokens of each expert, in token order
    ms.first[..=n_expert].fill(0);
    for &e in &ms.ids[..n * used] {
        ms.first[e as usize + 1] += 1;
    }
    for e in 0..n_expert {
        ms.first[e + 1] += ms.first[e];
    }
    let mut next: [usize; super::config::MAX_EXPERTS] = [0; super::config::MAX_EXPERTS];
    next[..n_expert].copy_from_slice(&ms.first[..n_expert]);
    for t in 0..n {
        for j in 0..used {
            let e = ms.ids[t * used + j] as usize;
            ms.members[next[e]] = (t as u32, ms.weights[t * used + j]);
            next[e] += 1;
        }
    }

    // each chosen expert over its tokens; the outputs summed into xb2 in expert order
    s.xb2[..n * d].fill(0.0);
    for e in 0..n_expert {
        let members = &ms.members[ms.first[e]..ms.first[e + 1]];
        if members.is_empty() {
            continue;
        }
        let rows = members.len();
        for (i, &(t, _)) in members.iter().enumerate() {
            let t = t as usize;
            ms.input[i * d..(i + 1) * d].copy_from_slice(&s.xb[t * d..(t + 1) * d]);
        }
        let expert = m.expert(e)?;
        let bufs = Hidden {
            act: &mut s.act,
            act1: &mut s.act1,
            hb: &mut s.hb,
            hb2: &mut s.hb2,
        };
        run_expert(
            k,
            par,
            bufs,
            m,
            &expert,
            e,
            glu,
            &ms.input[..rows * d],
            rows,
            &mut ms.output[..rows * d],
        )?;
        for (i, &(t, weight)) in members.iter().enumerate() {
            let t = t as usize;
            add_scaled(
                &mut s.xb2[t * d..(t + 1) * d],
                &ms.output[i * d..(i + 1) * d],
                weight,
            );
        }
    }

    Ok(())
}

/// One token: the chosen experts' gate and up products in one dispatch, then their downs in
/// another; the outputs summed into `out` in ascending order of expert, as [`grouped`]
/// sums them.
#[allow(clippy::too_many_arguments)]
fn decode(
    k: &Kernels,
    par: &dyn Parallel,
    h: Hidden<'_>,
    m: &Experts<'_>,
    glu: Glu,
    x: &[f32],
    ids: &mut [u32],
    weights: &mut [f32],
    outputs: &mut [f32],
    out: &mut [f32],
) -> Result<()> {
    let (d, n_ff, used) = (m.gate.cols, m.n_ff, ids.len());
    // ascending expert order (the weights follow their experts)
    for i in 1..used {
        let mut j = i;
        while j > 0 && ids[j - 1] > ids[j] {
            ids.swap(j - 1, j);
            weights.swap(j - 1, j);
            j -= 1;
        }
    }
    let mut experts: [Option<Expert<'_>>; MAX_USED] = [const { None }; MAX_USED];
    for (slot, &e) in experts.iter_mut().zip(ids.iter()) {
        *slot = Some(m.expert(e as usize)?);
    }
    let experts = &experts[..used];
    let expert = |j: usize| experts[j].as_ref().expect("bound above");
    let same_act = (0..used).all(|j| {
        let f = expert(j);
        f.gate.act_type() == f.up.act_type() && f.gate.act_type() == expert(0).gate.act_type()
    });
    let (hb, hb2) = (&mut h.hb[..used * n_ff], &mut h.hb2[..used * n_ff]);
    if same_act {
        let xq = h.act1.quantize(k, expert(0).gate.act_type(), x)?;
        let mut jobs = [(&expert(0).gate, xq); 2 * MAX_USED];
        for j in 0..used {
            jobs[2 * j] = (&expert(j).gate, xq);
            jobs[2 * j + 1] = (&expert(j).up, xq);
        }
        let jobs = &jobs[..2 * used];
        let outs = hb
            .chunks_exact_mut(n_ff)
            .zip(hb2.chunks_exact_mut(n_ff))
            .flat_map(|(g, u)| [g, u]);
        matvec_all(k, par, jobs, outs)?;
    } else {
        for j in 0..used {
            let f = expert(j);
            let (g, u) = (
                &mut hb[j * n_ff..(j + 1) * n_ff],
                &mut hb2[j * n_ff..(j + 1) * n_ff],
            );
            matvec_many(k, par, [&f.gate, &f.up], x, h.act1, [g, u])?;
        }
    }
    for (j, &e) in ids.iter().enumerate() {
        let e = e as usize;
        let (g, u) = (
            &mut hb[j * n_ff..(j + 1) * n_ff],
            &mut hb2[j * n_ff..(j + 1) * n_ff],
        );
        add_rows(g, expert_row(&m.gate_bias, e, n_ff), n_ff);
        add_rows(u, expert_row(&m.up_bias, e, n_ff), n_ff);
        glu(g, u);
    }
    let down_act = expert(0).down.act_type();
    let outputs = &mut outputs[..used * d];
    if (0..used).all(|j| expert(j).down.act_type() == down_act) {
        h.act.quantize(k, par, down_act, hb, used)?;
        let mut jobs = [(&expert(0).down, h.act.row(0)); MAX_USED];
        for (j, job) in jobs.iter_mut().enumerate().take(used) {
            *job = (&expert(j).down, h.act.row(j));
        }
        matvec_all(k, par, &jobs[..used], outputs.chunks_exact_mut(d))?;
    } else {
        for j in 0..used {
            let f = expert(j);
            matvec_f32(
                k,
                par,
                &f.down,
                &hb[j * n_ff..(j + 1) * n_ff],
                h.act1,
                &mut outputs[j * d..(j + 1) * d],
            )?;
        }
    }
    out.fill(0.0);
    for (j, (&e, &weight)) in ids.iter().zip(weights.iter()).enumerate() {
        let y = &mut outputs[j * d..(j + 1) * d];
        add_rows(y, expert_row(&m.down_bias, e as usize, d), d);
        add_scaled(out, y, weight);
    }
    Ok(())
}

/// Every token also runs the shared expert, scaled by `sigmoid(gate_inp · x)`.
fn shared(
    k: &Kernels,
    par: &dyn Parallel,
    s: &mut Scratch,
    m: &Experts<'_>,
    glu: Glu,
    n: usize,
) -> Result<()> {
    let d = m.gate.cols;
    let ms = &mut s.moe;
    if let Some(sh) = &m.shared {
        let out = &mut ms.output[..n * d];
        let bufs = Hidden {
            act: &mut s.act,
            act1: &mut s.act1,
            hb: &mut s.hb,
            hb2: &mut s.hb2,
        };
        dense(k, par, bufs, &sh.ffn, glu, &s.xb, n, out)?;
        let gates = &mut ms.logits[..n];
        if n == 1 {
            matvec_f32(k, par, &sh.gate_inp, &s.xb[..d], &mut s.act1, gates)?;
        } else {
            project(k, par, &mut s.act, &sh.gate_inp, &s.xb, n, gates)?;
        }
        for (t, &gate) in gates.iter().enumerate() {
            let y = &ms.output[t * d..(t + 1) * d];
            add_scaled(&mut s.xb2[t * d..(t + 1) * d], y, sigmoid(gate));
        }
    }
    Ok(())
}

/// `out += y · w`: an expert's output into its tokens' sums (every path sums this way).
fn add_scaled(out: &mut [f32], y: &[f32], w: f32) {
    out.iter_mut().zip(y).for_each(|(o, y)| *o += y * w);
}

/// ggml's `silu(x) / x` of Qwen2-MoE's shared-expert gate, written as the logistic.
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + libm::expf(-x))
}

/// One expert over `rows` tokens: `out = down(glu(gate x + bg, up x + bu)) + bd`.
#[allow(clippy::too_many_arguments)]
fn run_expert(
    k: &Kernels,
    par: &dyn Parallel,
    h: Hidden<'_>,
    m: &Experts<'_>,
    f: &Expert<'_>,
    e: usize,
    glu: Glu,
    x: &[f32],
    rows: usize,
    out: &mut [f32],
) -> Result<()> {
    let (d, n_ff) = (f.gate.cols, f.up.rows);
    let biased = m.gate_bias.is_some() || m.up_bias.is_some();
    let (bg, bu, bd) = (
        expert_row(&m.gate_bias, e, n_ff),
        expert_row(&m.up_bias, e, n_ff),
        expert_row(&m.down_bias, e, d),
    );
    let (hb, hb2) = (&mut h.hb[..rows * n_ff], &mut h.hb2[..rows * n_ff]);
    if rows == 1 {
        matvec_many(k, par, [&f.gate, &f.up], &x[..d], h.act1, [hb, hb2])?;
        add_rows(hb, bg, n_ff);
        add_rows(hb2, bu, n_ff);
        glu(hb, hb2);
        matvec_f32(k, par, &f.down, hb, h.act1, &mut out[..d])?;
    } else {
        h.act.quantize(k, par, f.gate.act_type(), x, rows)?;
        if !biased && glu_fusable(k, &f.gate, &f.up) {
            matmul_glu(k, par, &f.gate, &f.up, glu, h.act, rows, hb)?;
        } else {
            matmul(k, par, &f.gate, h.act, rows, hb)?;
            if f.up.act_type() != f.gate.act_type() {
                h.act.quantize(k, par, f.up.act_type(), x, rows)?;
            }
            matmul(k, par, &f.up, h.act, rows, hb2)?;
            add_rows(hb, bg, n_ff);
            add_rows(hb2, bu, n_ff);
            glu_rows(par, glu, hb, hb2, n_ff, rows);
        }
        project(k, par, h.act, &f.down, hb, rows, out)?;
    }
    add_rows(out, bd, d);
    Ok(())
}

/// Expert `e`'s row of `len` values of a per-expert table.
fn expert_row<'b>(
    table: &'b Option<alloc::borrow::Cow<'_, [f32]>>,
    e: usize,
    len: usize,
) -> Option<&'b [f32]> {
    table.as_deref().map(|b| &b[e * len..(e + 1) * len])
}

/// `x[row] += b` for every row of `len` values, where there is a bias.
fn add_rows(x: &mut [f32], b: Option<&[f32]>, len: usize) {
    if let Some(b) = b {
        for row in x.chunks_exact_mut(len) {
            row.iter_mut().zip(b).for_each(|(x, b)| *x += b);
        }
    }
}
