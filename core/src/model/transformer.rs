//! The one decoder forward pass for the llama family. Every architecture difference is a
//! switch in [`Config`](super::Config) or the presence of an optional tensor:
//!
//! ```text
//! x = embed(token) * embed_scale
//! for each layer:
//!     h = rmsnorm(x) ; q,k,v = Wq h (+bq), Wk h (+bk), Wv h (+bv)
//!     q,k = per-head rmsnorm (qk-norm) ; rope(q, k) ; append k,v to the cache
//!     a = attention(q, cache[window]) ; a = Wo a ; a = rmsnorm(a) (post-norm)
//!     x = x + a
//!     h = rmsnorm(x) ; f = down(act(gate h) * up h) ; f = rmsnorm(f) (post-norm)
//!     x = x + f
//! logits = output(rmsnorm(x)) (softcapped)
//! ```

use core::ops::Range;

use super::arch::Activation;
use super::attend::{attend, Run};
use super::config::Config;
use super::kv_cache::KvCache;
use super::state::State;
use super::weights::{Layer, Weights};
use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::ops::attention::rotation;
use crate::ops::matmul::{matvec_f32, matvec_many};
use crate::ops::norm::{rmsnorm, rmsnorm_inplace};
use crate::ops::rope;
use crate::parallel::Parallel;

/// Context length from which a decode step's attention tiles are spread over the threads
/// (below it the whole attention costs less than waking the workers).
const PARALLEL_ATTN_MIN: usize = 128;

/// Runs one token at position `pos` (the cache must hold positions `0..pos`). When `want_logits` is false the LM head
/// is skipped (prompt tokens before the last).
#[allow(clippy::too_many_arguments)]
pub fn forward(
    w: &Weights<'_>,
    st: &mut State,
    k: &Kernels,
    par: &dyn Parallel,
    token: u32,
    pos: usize,
    want_logits: bool,
) -> Result<()> {
    let c = &w.config;
    if token as usize >= c.n_vocab {
        return Err(Error::InvalidArgument(alloc::format!(
            "token id {token} is outside the vocabulary ({})",
            c.n_vocab
        )));
    }
    if pos >= st.n_ctx() {
        return Err(Error::ContextOverflow {
            needed: pos + 1,
            capacity: st.n_ctx(),
        });
    }

    w.token_embd.dequantize_row(token as usize, &mut st.x)?;
    if c.embed_scale != 1.0 {
        st.x.iter_mut().for_each(|v| *v *= c.embed_scale);
    }

    for (il, layer) in w.layers.iter().enumerate() {
        attention_block(w, st, k, par, il, layer, pos)?;
        ffn_block(w, st, k, par, layer)?;
    }

    if want_logits {
        rmsnorm(&mut st.xb, &st.x, &w.output_norm, c.rms_eps);
        matvec_f32(k, par, &w.output, &st.xb, &mut st.act, &mut st.logits)?;
        if let Some(cap) = c.final_softcap {
            st.logits
                .iter_mut()
                .for_each(|l| *l = cap * libm::tanhf(*l / cap));
        }
    }
    Ok(())
}

pub(super) fn add_bias(x: &mut [f32], b: &Option<alloc::borrow::Cow<'_, [f32]>>) {
    if let Some(b) = b {
        x.iter_mut().zip(b.iter()).for_each(|(x, b)| *x += b);
    }
}

#[allow(clippy::too_many_arguments)]
fn attention_block(
    w: &Weights<'_>,
    st: &mut State,
    k: &Kernels,
    par: &dyn Parallel,
    il: usize,
    l: &Layer<'_>,
    pos: usize,
) -> Result<()> {
    let c = &w.config;
    rmsnorm(&mut st.xb, &st.x, &l.attn_norm, c.rms_eps);
    matvec_many(
        k,
        par,
        [&l.wq, &l.wk, &l.wv],
        &st.xb,
        &mut st.act,
        [&mut st.q, &mut st.k, &mut st.v],
    )?;
    let s = &mut *st;
    prepare_token(
        k,
        w,
        il,
        l,
        [&mut s.q, &mut s.k, &mut s.v],
        pos,
        [&mut s.rope_cos, &mut s.rope_sin],
        &mut s.kv,
    );
    attend_token(k, par, c, il, st, pos);
    st.kv.finish_output(il, &mut st.attn);

    matvec_f32(k, par, &l.wo, &st.attn, &mut st.act, &mut st.xb2)?;
    add_bias(&mut st.xb2, &l.bo);
    if let Some(n) = &l.post_attn_norm {
        rmsnorm_inplace(&mut st.xb2, n, c.rms_eps);
    }
    st.x.iter_mut().zip(&st.xb2).for_each(|(x, a)| *x += a);
    Ok(())
}

/// One token's projected q, k, v (at position `pos`) made ready for attention: biases,
/// per-head norms, RoPE, and its k / v rows written to layer `il` of the cache.
#[allow(clippy::too_many_arguments)]
pub(super) fn prepare_token(
    kern: &Kernels,
    w: &Weights<'_>,
    il: usize,
    l: &Layer<'_>,
    [q, k, v]: [&mut [f32]; 3],
    pos: usize,
    rope: [&mut [f32]; 2],
    kv: &mut KvCache,
) {
    let rotations = [kv.key_rotation(), kv.value_rotation()];
    let [cos, sin] = rope;
    rope_angles(w, il, pos, cos, sin);
    let table = rope::RopeTable { cos, sin };
    ready_token(w, l, [q, k, &mut *v], &table, rotations);
    kv.store(kern, il, pos, k, v);
}

/// [`prepare_token`] without the cache write: biases, per-head norms, RoPE (`rope`: the
/// token's angles in this layer, [`rope_angles`]) and, for a quantized cache, the key / value
/// `rotations` ([`KvCache::key_rotation`], [`KvCache::value_rotation`]). Touches only the
/// token's own rows, so a batch's tokens run on any thread.
pub(super) fn ready_token(
    w: &Weights<'_>,
    l: &Layer<'_>,
    [q, k, v]: [&mut [f32]; 3],
    rope: &rope::RopeTable<'_>,
    [key_rotation, value_rotation]: [Option<usize>; 2],
) {
    let c = &w.config;
    add_bias(q, &l.bq);
    add_bias(k, &l.bk);
    add_bias(v, &l.bv);
    if let Some(n) = &l.q_norm {
        q.chunks_exact_mut(c.head_dim_k)
            .for_each(|h| rmsnorm_inplace(h, n, c.rms_eps));
    }
    if let Some(n) = &l.k_norm {
        k.chunks_exact_mut(c.head_dim_k)
            .for_each(|h| rmsnorm_inplace(h, n, c.rms_eps));
    }

    rope::apply(q, c.head_dim_k, c.rope_style, rope);
    rope::apply(k, c.head_dim_k, c.rope_style, rope);

    // quantized caches: rotate the heads so outlier dimensions do not dominate a block
    if let Some(n) = key_rotation {
        rotation::hadamard(q, n);
        rotation::hadamard(k, n);
    }
    if let Some(n) = value_rotation {
        rotation::hadamard(v, n);
    }
}

/// Layer `il`'s RoPE angles for position `pos` (`n_rot / 2` each): the layer's base and
/// scale (sliding-window layers may have their own), the model's frequency factors.
pub(super) fn rope_angles(
    w: &Weights<'_>,
    il: usize,
    pos: usize,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    let c = &w.config;
    let (base, freq_scale) = c.layer_rope(il);
    let freqs = w.rope_freqs.as_deref();
    rope::rope_cache(pos, c.n_rot, base, freq_scale, freqs, cos, sin);
}

/// The positions the token at `pos` sees in layer `il`: a sliding-window layer the last
/// `sliding_window` (llama.cpp: masked when pos - p >= n_swa), the others all.
pub(super) fn attn_window(c: &Config, il: usize, pos: usize) -> Range<usize> {
    let start = if c.swa_layers[il] && c.sliding_window > 0 {
        (pos + 1).saturating_sub(c.sliding_window)
    } else {
        0
    };
    start..pos + 1
}

/// A decode step's attention (`st.q` into `st.attn`), its query heads in tiles per KV head
/// ([`attend`]); from [`PARALLEL_ATTN_MIN`] positions on, the tiles are spread over the
/// threads.
fn attend_token(
    k: &Kernels,
    par: &dyn Parallel,
    c: &Config,
    il: usize,
    st: &mut State,
    pos: usize,
) {
    let workers = if pos + 1 >= PARALLEL_ATTN_MIN {
        par.threads().max(1)
    } else {
        1
    };
    st.attn_scratch(c.attn_shape(), workers);
    let run = Run {
        q: &st.q,
        out: &mut st.attn,
        n: 1,
        pos0: pos,
    };
    let kv = st.kv.layer(il);
    attend(k, c, il, kv, &mut st.attn_scratch[..workers], par, run);
}

fn ffn_block(
    w: &Weights<'_>,
    st: &mut State,
    k: &Kernels,
    par: &dyn Parallel,
    l: &Layer<'_>,
) -> Result<()> {
    let c = &w.config;
    let n_ff = l.up.rows;
    rmsnorm(&mut st.xb, &st.x, &l.ffn_norm, c.rms_eps);
    let (hb, hb2) = (&mut st.hb[..n_ff], &mut st.hb2[..n_ff]);
    matvec_many(k, par, [&l.gate, &l.up], &st.xb, &mut st.act, [hb, hb2])?;
    match c.activation {
        Activation::Silu => (k.swiglu())(hb, hb2),
        Activation::Gelu => (k.geglu())(hb, hb2),
    }
    matvec_f32(k, par, &l.down, hb, &mut st.act, &mut st.xb2)?;
    if let Some(n) = &l.post_ffn_norm {
        rmsnorm_inplace(&mut st.xb2, n, c.rms_eps);
    }
    st.x.iter_mut().zip(&st.xb2).for_each(|(x, f)| *x += f);
    Ok(())
}
