//! The one forward pass of the llama family, over a [`Step`]: any mix of prompt chunks and
//! decode tokens of any sequences of a [`KvPool`]. Every architecture difference is a switch
//! in [`Config`](super::Config) or the presence of an optional tensor:
//!
//! ```text
//! x = embed(token) * embed_scale                                  (every token of the step)
//! for each layer:
//!     h = rmsnorm(x) (pre-norm, or x) ; q,k,v = Wq h (+bq), Wk h (+bk), Wv h (+bv)
//!         (one product per matrix; a fused QKV tensor is three views of its rows)
//!     q,k = rmsnorm per head or over the projection (qk-norm) ; rope(q, k) (LongRoPE's
//!         factors by context) ; k,v -> the sequence's cache blocks
//!     a = attention(q, its sequence's cache[window]) (softcapped scores) ; a = Wo a
//!     a = rmsnorm(a) (post-norm) ; x = x + a * residual_scale
//!     h = rmsnorm(x) (pre-norm, or x) ; f = down(act(gate h) * up h) ; f = rmsnorm(f)
//!         (post-norm) (a mixture: f = Σ over the token's top-k experts e of weight_e ·
//!         expert_e(h))
//!     x = x + f * residual_scale
//! logits = output(rmsnorm(x)) * logit_scale (softcapped), for the tokens that want them
//! ```
//!
//! An encoder (BERT, `model/encoder.rs`) switches: the input is LayerNorm(token + token type
//! 0 + position embedding); no pre-norms or RoPE; every row attends to its whole sequence
//! (each sequence comes whole in one pass); after each residual add `x = LayerNorm(x + a)`;
//! the FFN is `down(gelu_erf(up h + b)) + b`; the output is each wanted token's `x`.
//!
//! Every matrix product runs over all the step's tokens at once (`ops::matmul::matmul`: a
//! worker takes a range of weight rows and runs every token over it, so the weights stream
//! from memory once per step, not once per token or sequence), and attention runs every
//! sequence's tiles in one dispatch (`attend`). A step of one token takes the matrix × vector
//! kernels instead (`matvec_many`: q/k/v and gate/up in one dispatch each); they give the
//! same bits. Per token the arithmetic never depends on the other tokens of the step (the
//! kernels quantize and accumulate each token's row on its own, in the same order), so a
//! sequence's logits are bit-identical whatever shares its step and however its prompt was
//! cut into steps (**batch invariance**, asserted in `tests/tests/batch_invariance.rs`).
//! Steps longer than the scratch's capacity (llama.cpp's n_ubatch) run in passes.

use alloc::vec::Vec;

use super::attend::attend;
use super::encoder::residual_layernorm;
use super::ffn::ffn_block;
use super::kv_pool::KvPool;
use super::lora::{add_lora, Proj, StepLora};
use super::scratch::{Scratch, LOGIT_ROWS, ROW_CHUNK};
use super::step::{Span, Step};
use super::token::{add_bias, ready_token};
use super::weights::{Layer, Weights};
use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::ops::matmul::{matmul, matvec_f32, matvec_many, BatchAct, QMatrix};
use crate::ops::norm::{rmsnorm, rmsnorm_inplace};
use crate::ops::softcap::softcap;
use crate::parallel::{for_each_range, DisjointSlice, Parallel};

/// Attention work (Σ tokens × positions seen) from which a step's attention tiles are spread
/// over the threads (below it the whole attention costs less than waking the workers).
const PARALLEL_ATTN_MIN: usize = 128;

/// Runs `step` over the sequences of `pool` and calls `on_logits(i, logits)` for every entry
/// `i` that wants logits, in entry order. Each span must start at its sequence's next
/// position. The step's blocks are reserved first: when the pool or a sequence's context has
/// no room, nothing runs and the error says which (`KvPoolFull`, `ContextOverflow`).
#[allow(clippy::too_many_arguments)]
pub fn forward(
    w: &Weights<'_>,
    pool: &mut KvPool,
    s: &mut Scratch,
    k: &Kernels,
    par: &dyn Parallel,
    step: &Step,
    mut on_logits: impl FnMut(usize, &mut [f32]),
) -> Result<()> {
    let c = &w.config;
    if let Some(&t) = step.tokens().iter().find(|&&t| t as usize >= c.n_vocab) {
        return Err(Error::InvalidArgument(alloc::format!(
            "token id {t} is outside the vocabulary ({})",
            c.n_vocab
        )));
    }
    // each span continues its sequence: (sequence, next position, tokens of this step)
    let mut seqs = core::mem::take(&mut s.seqs);
    seqs.clear();
    for sp in step.spans() {
        let i = match seqs.iter().position(|&(q, ..)| q == sp.seq) {
            Some(i) => i,
            None => {
                seqs.push((sp.seq, pool.seq_len(sp.seq)?, 0));
                seqs.len() - 1
            }
        };
        let (_, next, added) = &mut seqs[i];
        if sp.pos0 != *next {
            return Err(Error::InvalidArgument(alloc::format!(
                "sequence {} continues at position {}, not {}",
                sp.seq.index(),
                next,
                sp.pos0
            )));
        }
        *next += sp.n;
        *added += sp.n;
    }
    if !c.causal {
        // an encoder's tokens see their whole sequence: each sequence must come whole, in
        // one pass
        if let Some(&(seq, next, added)) = seqs.iter().find(|&&(_, next, added)| next != added) {
            return Err(Error::InvalidArgument(alloc::format!(
                "sequence {} of a bidirectional (encoder) model must come whole in one step \
                 ({added} of its {next} positions given)",
                seq.index()
            )));
        }
        if step.len() > s.capacity() {
            return Err(Error::InvalidArgument(alloc::format!(
                "a step of a bidirectional (encoder) model holds at most {} tokens, not {}",
                s.capacity(),
                step.len()
            )));
        }
    }
    for &(seq, _, added) in &seqs {
        pool.reserve(seq, added)?;
    }
    s.seqs = seqs;

    // passes of at most the scratch's capacity, spans cut where a pass ends (a pass's spans
    // count their first entry from the pass's start)
    let cap = s.capacity();
    let mut runs = core::mem::take(&mut s.spans);
    runs.clear();
    let mut pass_start = 0;
    for sp in step.spans() {
        let mut done = 0;
        while done < sp.n {
            let at = sp.first + done - pass_start;
            if at == cap {
                run_pass(w, pool, s, k, par, step, pass_start, &runs, &mut on_logits)?;
                pass_start += cap;
                runs.clear();
                continue;
            }
            let n = (sp.n - done).min(cap - at);
            runs.push(Span {
                seq: sp.seq,
                first: at,
                n,
                pos0: sp.pos0 + done,
            });
            done += n;
        }
    }
    if !runs.is_empty() {
        run_pass(w, pool, s, k, par, step, pass_start, &runs, &mut on_logits)?;
    }
    s.spans = runs;
    Ok(())
}

/// One pass: entries `first..first + n` of `step` (`runs` in pass rows), then each run's
/// tokens committed to its sequence.
#[allow(clippy::too_many_arguments)]
fn run_pass(
    w: &Weights<'_>,
    pool: &mut KvPool,
    s: &mut Scratch,
    k: &Kernels,
    par: &dyn Parallel,
    step: &Step,
    first: usize,
    runs: &[Span],
    on_logits: &mut impl FnMut(usize, &mut [f32]),
) -> Result<()> {
    let c = &w.config;
    let n = runs.iter().map(|r| r.n).sum::<usize>();
    let tokens = &step.tokens()[first..first + n];
    s.begin_pass(c, n);
    s.positions.clear();
    for r in runs {
        s.positions.extend(r.pos0..r.pos0 + r.n);
    }
    let d = c.n_embd;
    for (t, &token) in tokens.iter().enumerate() {
        let x = &mut s.x[t * d..(t + 1) * d];
        w.token_embd.dequantize_row(token as usize, x)?;
        if c.embed_scale != 1.0 {
            x.iter_mut().for_each(|v| *v *= c.embed_scale);
        }
    }
    if let Some(input) = &w.encoder {
        super::encoder::finish_inputs(w, input, s, par, n)?;
    }

    let lora = StepLora {
        sets: step.lora_sets(),
        slots: match step.lora_sets() {
            [] => &[],
            _ => &step.slots()[first..first + n],
        },
    };
    for (il, l) in w.layers.iter().enumerate() {
        attention_block(w, pool, s, k, par, il, l, runs, n, &lora)?;
        ffn_block(w, s, k, par, il, l, n, &lora)?;
    }

    let mut wanted = core::mem::take(&mut s.wanted);
    wanted.clear();
    wanted.extend((0..n).filter(|&t| step.wants(first + t)));
    if w.encoder.is_some() {
        // an encoder's output is each wanted token's hidden state
        for &t in &wanted {
            on_logits(first + t, &mut s.x[t * d..(t + 1) * d]);
        }
        s.wanted = wanted;
        for r in runs {
            pool.commit(r.seq, &tokens[r.first..r.first + r.n])?;
        }
        return Ok(());
    }
    let vocab = c.n_vocab;
    // rows of the output scored (`Scratch::limit_logits`); the others' logits are -∞
    let scored = match s.logit_rows {
        0 => vocab,
        r => r.min(vocab),
    };
    if let [t] = wanted[..] {
        // one row (a prompt's last token, a decode step): the matrix × vector kernel
        grow(&mut s.logits, vocab);
        rmsnorm(
            &mut s.xb[..d],
            &s.x[t * d..(t + 1) * d],
            &w.output_norm,
            c.rms_eps,
        );
        let logits = &mut s.logits[..vocab];
        let (head, rest) = logits.split_at_mut(scored);
        let output = w.output.row_prefix(scored)?;
        matvec_f32(k, par, &output, &s.xb[..d], &mut s.act1, head)?;
        rest.fill(f32::NEG_INFINITY);
        finish_logits(c, head);
        on_logits(first + t, logits);
    } else if !wanted.is_empty() {
        grow(&mut s.logits, wanted.len().min(LOGIT_ROWS) * vocab);
        for rows in wanted.chunks(LOGIT_ROWS) {
            for (i, &t) in rows.iter().enumerate() {
                rmsnorm(
                    &mut s.xb[i * d..(i + 1) * d],
                    &s.x[t * d..(t + 1) * d],
                    &w.output_norm,
                    c.rms_eps,
                );
            }
            let m = rows.len();
            project(k, par, &mut s.act, &w.output, &s.xb, m, &mut s.logits)?;
            for (&t, logits) in rows.iter().zip(s.logits.chunks_exact_mut(vocab)) {
                // several rows score the whole vocabulary (a draft's steps want one row)
                logits[scored..].fill(f32::NEG_INFINITY);
                finish_logits(c, &mut logits[..scored]);
                on_logits(first + t, logits);
            }
        }
    }
    s.wanted = wanted;
    for r in runs {
        pool.commit(r.seq, &tokens[r.first..r.first + r.n])?;
    }
    Ok(())
}

fn grow(v: &mut Vec<f32>, len: usize) {
    if v.len() < len {
        v.resize(len, 0.0);
    }
}

/// The logits' last touches: Granite's scale, Gemma 2's soft-capping.
fn finish_logits(c: &super::Config, logits: &mut [f32]) {
    if c.logit_scale != 1.0 {
        logits.iter_mut().for_each(|l| *l *= c.logit_scale);
    }
    if let Some(cap) = c.final_softcap {
        softcap(logits, cap);
    }
}

/// `out = W · x` for the first `n` rows of `x`.
pub(super) fn project(
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
pub(super) fn project_many<const M: usize>(
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

/// `rmsnorm` of each of the first `n` rows, spread over the workers; without a norm
/// (OLMo 2's blocks take the residual stream as it is), a copy.
#[allow(clippy::too_many_arguments)]
pub(super) fn norm_rows(
    par: &dyn Parallel,
    out: &mut [f32],
    x: &[f32],
    weight: Option<&[f32]>,
    eps: f32,
    dim: usize,
    n: usize,
) {
    let Some(weight) = weight else {
        out[..n * dim].copy_from_slice(&x[..n * dim]);
        return;
    };
    let out = DisjointSlice::new(out);
    for_each_range(par, n, ROW_CHUNK, &|start, end| {
        for t in start..end {
            // SAFETY: row t belongs to this range only.
            let o = unsafe { out.piece(t * dim, dim) };
            rmsnorm(o, &x[t * dim..(t + 1) * dim], weight, eps);
        }
    });
}

/// `x += f(y)` row by row: the optional output norm, the residual scale (Granite's; 1
/// elsewhere), then the residual add; the rows spread over the workers.
#[allow(clippy::too_many_arguments)]
pub(super) fn residual(
    par: &dyn Parallel,
    x: &mut [f32],
    y: &mut [f32],
    norm: Option<&[f32]>,
    c: &super::Config,
    n: usize,
) {
    let (eps, dim, scale) = (c.rms_eps, c.n_embd, c.residual_scale);
    let (xs, ys) = (DisjointSlice::new(x), DisjointSlice::new(y));
    for_each_range(par, n, ROW_CHUNK, &|start, end| {
        for t in start..end {
            // SAFETY: row t of both belongs to this range only.
            let (x, y) = unsafe { (xs.piece(t * dim, dim), ys.piece(t * dim, dim)) };
            if let Some(w) = norm {
                rmsnorm_inplace(y, w, eps);
            }
            if scale != 1.0 {
                y.iter_mut().for_each(|a| *a *= scale);
            }
            x.iter_mut().zip(&*y).for_each(|(x, a)| *x += a);
        }
    });
}

#[allow(clippy::too_many_arguments)]
fn attention_block(
    w: &Weights<'_>,
    pool: &mut KvPool,
    s: &mut Scratch,
    k: &Kernels,
    par: &dyn Parallel,
    il: usize,
    l: &Layer<'_>,
    runs: &[Span],
    n: usize,
    lora: &StepLora<'_>,
) -> Result<()> {
    let c = &w.config;
    let d = c.n_embd;
    let (k_row, v_row) = c.kv_row();
    let (q_row, o_row) = (c.n_head * c.head_dim_k, c.n_head * c.head_dim_v);
    let attn_norm = l.attn_norm.as_deref();
    norm_rows(par, &mut s.xb, &s.x, attn_norm, c.rms_eps, d, n);
    let qkv = [&l.wq, &l.wk, &l.wv];
    if n == 1 {
        let outs = [&mut s.q[..q_row], &mut s.k[..k_row], &mut s.v[..v_row]];
        matvec_many(k, par, qkv, &s.xb[..d], &mut s.act1, outs)?;
    } else {
        let outs = [&mut s.q[..], &mut s.k[..], &mut s.v[..]];
        project_many(k, par, &mut s.act, qkv, &s.xb, n, outs)?;
    }
    if !lora.sets.is_empty() {
        for (p, out) in [
            (Proj::Q, &mut s.q),
            (Proj::K, &mut s.k),
            (Proj::V, &mut s.v),
        ] {
            add_lora(par, lora, &mut s.lora, il, p, &s.xb, n, out);
        }
    }
    // biases, norms and RoPE token by token on the workers, then the cache writes
    let angles = s.rope_angles(w, par, il, pool.n_ctx());
    let angles = &s.rope[angles];
    let rotations = [pool.key_rotation(), pool.value_rotation()];
    let (qs, ks, vs) = (
        DisjointSlice::new(&mut s.q),
        DisjointSlice::new(&mut s.k),
        DisjointSlice::new(&mut s.v),
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
    for r in runs {
        for t in r.first..r.first + r.n {
            let row = pool.row_of(r.seq, r.pos0 + t - r.first)?;
            let (kt, vt) = (
                &s.k[t * k_row..(t + 1) * k_row],
                &s.v[t * v_row..(t + 1) * v_row],
            );
            pool.store(k, il, row, kt, vt);
        }
    }

    // every token's k / v is in the cache: attend, each run in its own sequence's blocks
    let work: usize = runs.iter().map(|r| r.n * (r.pos0 + r.n)).sum();
    let workers = if work >= PARALLEL_ATTN_MIN {
        par.threads().max(1)
    } else {
        1
    };
    s.ensure_attn_scratch(c.attn_shape(), workers);
    let scratch = &mut s.attn_scratch[..workers];
    let sinks = l.attn_sinks.as_deref();
    attend(k, c, il, pool, scratch, par, &s.q, &mut s.attn, runs, sinks)?;
    for out in s.attn.chunks_exact_mut(o_row).take(n) {
        pool.finish_output(il, out);
    }

    if n == 1 {
        matvec_f32(
            k,
            par,
            &l.wo,
            &s.attn[..o_row],
            &mut s.act1,
            &mut s.xb2[..d],
        )?;
    } else {
        project(k, par, &mut s.act, &l.wo, &s.attn, n, &mut s.xb2)?;
    }
    if !lora.sets.is_empty() {
        add_lora(par, lora, &mut s.lora, il, Proj::O, &s.attn, n, &mut s.xb2);
    }
    for row in s.xb2.chunks_exact_mut(d).take(n) {
        add_bias(row, &l.bo);
    }
    match &l.attn_out_norm {
        Some(ln) => residual_layernorm(par, &mut s.x, &s.xb2, ln, c.rms_eps, d, n),
        None => residual(par, &mut s.x, &mut s.xb2, l.post_attn_norm.as_deref(), c, n),
    }
    Ok(())
}
