//! Prompt processing: the forward pass over a batch of consecutive tokens at once. Every
//! matrix product runs over the whole batch (`ops::matmul::matmul`: each worker takes a
//! chunk of weight rows and runs every token over it, so weights stream from memory once per
//! batch rather than once per token), and attention runs in parallel over the batch's tokens.
//! Per token the arithmetic is exactly [`forward`](super::forward)'s (same kernels, same
//! order), so a prompt fed in batches gives the same logits bit for bit.

use alloc::vec::Vec;

use super::arch::Activation;
use super::attend::{attend, Run};
use super::config::Config;
use super::state::State;
use super::transformer::{add_bias, ready_token, rope_angles};
use super::weights::{Layer, Weights};
use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::ops::aligned::AlignedF32;
use crate::ops::matmul::{glu_fusable, matmul, matmul_glu, matvec_f32, BatchAct, QMatrix};
use crate::ops::norm::{rmsnorm, rmsnorm_inplace};
use crate::ops::rope::RopeTable;
use crate::parallel::{for_each_range, DisjointSlice, Parallel};

/// Activations of up to `cap` tokens, allocated once per session.
pub struct Batch {
    cap: usize,
    x: AlignedF32,
    xb: AlignedF32,
    xb2: AlignedF32,
    q: AlignedF32,
    k: AlignedF32,
    v: AlignedF32,
    attn: AlignedF32,
    hb: AlignedF32,
    hb2: AlignedF32,
    act: BatchAct,
    /// RoPE angles of the current batch's positions, one table per distinct (base, scale)
    /// of its layers, computed by the first layer that needs it.
    rope: Vec<RopeAngles>,
    /// Logits of up to [`LOGIT_ROWS`] tokens, allocated when a batch first wants several.
    logits: Vec<f32>,
}

/// Tokens whose logits one output projection computes together: the output matrix (the
/// largest, vocabulary × embedding) is read once per this many tokens.
const LOGIT_ROWS: usize = 16;

impl Batch {
    pub fn new(c: &Config, cap: usize) -> Batch {
        let (k_row, v_row) = c.kv_row();
        Batch {
            cap,
            x: AlignedF32::zeroed(cap * c.n_embd),
            xb: AlignedF32::zeroed(cap * c.n_embd),
            xb2: AlignedF32::zeroed(cap * c.n_embd),
            q: AlignedF32::zeroed(cap * c.n_head * c.head_dim_k),
            k: AlignedF32::zeroed(cap * k_row),
            v: AlignedF32::zeroed(cap * v_row),
            attn: AlignedF32::zeroed(cap * c.n_head * c.head_dim_v),
            hb: AlignedF32::zeroed(cap * c.n_ff),
            hb2: AlignedF32::zeroed(cap * c.n_ff),
            act: BatchAct::default(),
            rope: Vec::new(),
            logits: Vec::new(),
        }
    }

    /// Tokens per batch.
    pub fn capacity(&self) -> usize {
        self.cap
    }
}

/// The RoPE angles of `n` positions from `pos0` for one (base, scale): `n_rot / 2` cosines
/// and sines per token, what [`rope_angles`] gives for each.
struct RopeAngles {
    rope: (f32, f32),
    pos0: usize,
    n: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl RopeAngles {
    /// Token `t`'s angles.
    fn table(&self, t: usize) -> RopeTable<'_> {
        let half = self.cos.len() / self.n.max(1);
        RopeTable {
            cos: &self.cos[t * half..(t + 1) * half],
            sin: &self.sin[t * half..(t + 1) * half],
        }
    }
}

/// The index in `tables` of layer `il`'s angles for positions `pos0..pos0 + n`, computed
/// (spread over the workers) into a table of another batch or a new one if none has them.
fn rope_angles_for(
    w: &Weights<'_>,
    tables: &mut Vec<RopeAngles>,
    par: &dyn Parallel,
    il: usize,
    pos0: usize,
    n: usize,
) -> usize {
    let rope = w.config.layer_rope(il);
    let key = |a: &RopeAngles| a.rope == rope && a.pos0 == pos0 && a.n == n;
    if let Some(i) = tables.iter().position(key) {
        return i;
    }
    // a table of an earlier batch is reused; one per distinct (base, scale) at most
    let i = match tables.iter().position(|a| a.rope == rope) {
        Some(i) => i,
        None => {
            tables.push(RopeAngles {
                rope,
                pos0,
                n: 0,
                cos: Vec::new(),
                sin: Vec::new(),
            });
            tables.len() - 1
        }
    };
    let half = w.config.n_rot / 2;
    let a = &mut tables[i];
    (a.pos0, a.n) = (pos0, n);
    a.cos.resize(n * half, 0.0);
    a.sin.resize(n * half, 0.0);
    let (cos, sin) = (
        DisjointSlice::new(&mut a.cos),
        DisjointSlice::new(&mut a.sin),
    );
    for_each_range(par, n, ROW_CHUNK, &|start, end| {
        for t in start..end {
            // SAFETY: token t's angles belong to this range only.
            let (c, s) = unsafe { (cos.piece(t * half, half), sin.piece(t * half, half)) };
            rope_angles(w, il, pos0 + t, c, s);
        }
    });
    i
}

/// Which tokens of a batch need logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// None (an early part of a long prompt).
    None,
    /// Only the last token (prompt processing).
    Last,
    /// The tokens from this index of the batch on: 0 for teacher forcing, the second half
    /// of a chunk for perplexity.
    From(usize),
}

impl Logits {
    fn wants(self, t: usize, n: usize) -> bool {
        match self {
            Logits::None => false,
            Logits::Last => t + 1 == n,
            Logits::From(first) => t >= first,
        }
    }
}

/// Runs `tokens` at positions `pos0..pos0 + tokens.len()` (the cache must hold positions
/// `0..pos0`) and calls `on_logits(i, logits)` for the tokens `which` asks for.
#[allow(clippy::too_many_arguments)]
pub fn forward_batch(
    w: &Weights<'_>,
    st: &mut State,
    b: &mut Batch,
    k: &Kernels,
    par: &dyn Parallel,
    tokens: &[u32],
    pos0: usize,
    which: Logits,
    mut on_logits: impl FnMut(usize, &[f32]),
) -> Result<()> {
    let c = &w.config;
    let n = tokens.len();
    if n == 0 {
        return Ok(());
    }
    if n > b.cap {
        return Err(Error::InvalidArgument(alloc::format!(
            "a batch of {n} tokens exceeds the batch capacity {}",
            b.cap
        )));
    }
    if pos0 + n > st.n_ctx() {
        return Err(Error::ContextOverflow {
            needed: pos0 + n,
            capacity: st.n_ctx(),
        });
    }
    let d = c.n_embd;
    for (t, &token) in tokens.iter().enumerate() {
        if token as usize >= c.n_vocab {
            return Err(Error::InvalidArgument(alloc::format!(
                "token id {token} is outside the vocabulary ({})",
                c.n_vocab
            )));
        }
        let x = &mut b.x[t * d..(t + 1) * d];
        w.token_embd.dequantize_row(token as usize, x)?;
        if c.embed_scale != 1.0 {
            x.iter_mut().for_each(|v| *v *= c.embed_scale);
        }
    }

    for (il, l) in w.layers.iter().enumerate() {
        attention_block(w, st, b, k, par, il, l, n, pos0)?;
        ffn_block(w, b, k, par, l, n)?;
    }

    let wanted: Vec<usize> = (0..n).filter(|&t| which.wants(t, n)).collect();
    if let [t] = wanted[..] {
        // one row (a prompt's last token): into the state's logits, as a decode step
        rmsnorm(
            &mut st.xb,
            &b.x[t * d..(t + 1) * d],
            &w.output_norm,
            c.rms_eps,
        );
        matvec_f32(k, par, &w.output, &st.xb, &mut st.act, &mut st.logits)?;
        softcap(c.final_softcap, &mut st.logits);
        on_logits(t, &st.logits);
        return Ok(());
    }
    let vocab = c.n_vocab;
    if b.logits.len() < LOGIT_ROWS * vocab && !wanted.is_empty() {
        b.logits.resize(LOGIT_ROWS * vocab, 0.0);
    }
    for rows in wanted.chunks(LOGIT_ROWS) {
        for (i, &t) in rows.iter().enumerate() {
            rmsnorm(
                &mut b.xb[i * d..(i + 1) * d],
                &b.x[t * d..(t + 1) * d],
                &w.output_norm,
                c.rms_eps,
            );
        }
        let m = rows.len();
        project(k, par, &mut b.act, &w.output, &b.xb, m, &mut b.logits)?;
        for (&t, logits) in rows.iter().zip(b.logits.chunks_exact_mut(vocab)) {
            softcap(c.final_softcap, logits);
            on_logits(t, logits);
        }
    }
    if !wanted.is_empty() {
        // the state's logits are the last computed, as after a decode step
        let i = (wanted.len() - 1) % LOGIT_ROWS;
        st.logits
            .copy_from_slice(&b.logits[i * vocab..(i + 1) * vocab]);
    }
    Ok(())
}

/// Gemma 2's final logit soft-capping, `cap · tanh(l / cap)`.
fn softcap(cap: Option<f32>, logits: &mut [f32]) {
    if let Some(cap) = cap {
        logits
            .iter_mut()
            .for_each(|l| *l = cap * libm::tanhf(*l / cap));
    }
}

/// `out = W · x` for the first `n` rows of `x`.
fn project(
    k: &Kernels,
    par: &dyn Parallel,
    act: &mut BatchAct,
    m: &QMatrix<'_>,
    x: &[f32],
    n: usize,
    out: &mut [f32],
) -> Result<()> {
    project_many(k, par, act, [m], x, n, [out])
}

/// `outs[i] = Ws[i] · x` for the first `n` rows of `x`, quantizing `x` once for each run of
/// matrices that take the same activation type (Q / K / V, gate / up).
fn project_many<const M: usize>(
    k: &Kernels,
    par: &dyn Parallel,
    act: &mut BatchAct,
    ms: [&QMatrix<'_>; M],
    x: &[f32],
    n: usize,
    outs: [&mut [f32]; M],
) -> Result<()> {
    let mut quantized = None;
    for (m, out) in ms.into_iter().zip(outs) {
        let ty = m.act_type();
        if quantized != Some((ty, m.cols)) {
            act.quantize(k, par, ty, &x[..n * m.cols], n)?;
            quantized = Some((ty, m.cols));
        }
        matmul(k, par, m, act, n, &mut out[..n * m.rows])?;
    }
    Ok(())
}

/// Rows a worker takes at least in the row-wise batch steps (norms, residual adds).
const ROW_CHUNK: usize = 16;

/// `rmsnorm` of each of the first `n` rows, spread over the workers.
#[allow(clippy::too_many_arguments)]
fn norm_rows(
    par: &dyn Parallel,
    out: &mut [f32],
    x: &[f32],
    weight: &[f32],
    eps: f32,
    dim: usize,
    n: usize,
) {
    let out = DisjointSlice::new(out);
    for_each_range(par, n, ROW_CHUNK, &|start, end| {
        for t in start..end {
            // SAFETY: row t belongs to this range only.
            let o = unsafe { out.piece(t * dim, dim) };
            rmsnorm(o, &x[t * dim..(t + 1) * dim], weight, eps);
        }
    });
}

/// `x += f(y)` row by row: the optional output norm, then the residual add; the rows
/// spread over the workers.
#[allow(clippy::too_many_arguments)]
fn residual(
    par: &dyn Parallel,
    x: &mut [f32],
    y: &mut [f32],
    norm: Option<&[f32]>,
    eps: f32,
    dim: usize,
    n: usize,
) {
    let (xs, ys) = (DisjointSlice::new(x), DisjointSlice::new(y));
    for_each_range(par, n, ROW_CHUNK, &|start, end| {
        for t in start..end {
            // SAFETY: row t of both belongs to this range only.
            let (x, y) = unsafe { (xs.piece(t * dim, dim), ys.piece(t * dim, dim)) };
            if let Some(w) = norm {
                rmsnorm_inplace(y, w, eps);
            }
            x.iter_mut().zip(&*y).for_each(|(x, a)| *x += a);
        }
    });
}

#[allow(clippy::too_many_arguments)]
fn attention_block(
    w: &Weights<'_>,
    st: &mut State,
    b: &mut Batch,
    k: &Kernels,
    par: &dyn Parallel,
    il: usize,
    l: &Layer<'_>,
    n: usize,
    pos0: usize,
) -> Result<()> {
    let c = &w.config;
    let d = c.n_embd;
    let (k_row, v_row) = c.kv_row();
    let (q_row, o_row) = (c.n_head * c.head_dim_k, c.n_head * c.head_dim_v);
    norm_rows(par, &mut b.xb, &b.x, &l.attn_norm, c.rms_eps, d, n);
    project_many(
        k,
        par,
        &mut b.act,
        [&l.wq, &l.wk, &l.wv],
        &b.xb,
        n,
        [&mut b.q, &mut b.k, &mut b.v],
    )?;
    // biases, norms and RoPE token by token on the workers, then the cache writes
    let angles = rope_angles_for(w, &mut b.rope, par, il, pos0, n);
    let angles = &b.rope[angles];
    let rotations = [st.kv.key_rotation(), st.kv.value_rotation()];
    let (qs, ks, vs) = (
        DisjointSlice::new(&mut b.q),
        DisjointSlice::new(&mut b.k),
        DisjointSlice::new(&mut b.v),
    );
    for_each_range(par, n, ROW_CHUNK, &|start, end| {
        for t in start..end {
            // SAFETY: token t's rows belong to this range only.
            let rows = unsafe {
                [
                    qs.piece(t * q_row, q_row),
                    ks.piece(t * k_row, k_row),
                    vs.piece(t * v_row, v_row),
                ]
            };
            ready_token(w, l, rows, &angles.table(t), rotations);
        }
    });
    for t in 0..n {
        st.kv.store(
            k,
            il,
            pos0 + t,
            &b.k[t * k_row..(t + 1) * k_row],
            &b.v[t * v_row..(t + 1) * v_row],
        );
    }

    // every token's k / v is in the cache
    let workers = par.threads().max(1);
    st.attn_scratch(c.attn_shape(), workers);
    let run = Run {
        q: &b.q,
        out: &mut b.attn,
        n,
        pos0,
    };
    attend(
        k,
        c,
        il,
        st.kv.layer(il),
        &mut st.attn_scratch[..workers],
        par,
        run,
    );
    for out in b.attn.chunks_exact_mut(o_row).take(n) {
        st.kv.finish_output(il, out);
    }

    project(k, par, &mut b.act, &l.wo, &b.attn, n, &mut b.xb2)?;
    for row in b.xb2.chunks_exact_mut(d).take(n) {
        add_bias(row, &l.bo);
    }
    residual(
        par,
        &mut b.x,
        &mut b.xb2,
        l.post_attn_norm.as_deref(),
        c.rms_eps,
        d,
        n,
    );
    Ok(())
}

fn ffn_block(
    w: &Weights<'_>,
    b: &mut Batch,
    k: &Kernels,
    par: &dyn Parallel,
    l: &Layer<'_>,
    n: usize,
) -> Result<()> {
    let c = &w.config;
    let d = c.n_embd;
    let n_ff = l.up.rows;
    norm_rows(par, &mut b.xb, &b.x, &l.ffn_norm, c.rms_eps, d, n);
    let glu = match c.activation {
        Activation::Silu => k.swiglu(),
        Activation::Gelu => k.geglu(),
    };
    if n > 1 && glu_fusable(k, &l.gate, &l.up) {
        // gate and up in one pass that stores only glu(gate, up)
        b.act
            .quantize(k, par, l.gate.act_type(), &b.xb[..n * d], n)?;
        matmul_glu(
            k,
            par,
            &l.gate,
            &l.up,
            glu,
            &b.act,
            n,
            &mut b.hb[..n * n_ff],
        )?;
    } else {
        project_many(
            k,
            par,
            &mut b.act,
            [&l.gate, &l.up],
            &b.xb,
            n,
            [&mut b.hb, &mut b.hb2],
        )?;
        // row by row, as the single-token pass calls them (same vector / tail split), the
        // rows spread over the threads
        let (gates, ups) = (DisjointSlice::new(&mut b.hb), &b.hb2);
        for_each_range(par, n, 4, &|start, end| {
            for t in start..end {
                // SAFETY: row t belongs to this range only.
                let hb = unsafe { gates.piece(t * n_ff, n_ff) };
                glu(hb, &ups[t * n_ff..(t + 1) * n_ff]);
            }
        });
    }
    project(k, par, &mut b.act, &l.down, &b.hb, n, &mut b.xb2)?;
    residual(
        par,
        &mut b.x,
        &mut b.xb2,
        l.post_ffn_norm.as_deref(),
        c.rms_eps,
        d,
        n,
    );
    Ok(())
}
