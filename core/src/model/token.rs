//! What the forward pass does to one token's rows on their own: biases, per-head norms,
//! RoPE, the quantized caches' rotation, and which positions it attends to. Each touches only
//! the token's own rows, so a step's tokens run on any thread in any order.

use core::ops::Range;

use super::config::Config;
use super::rope_scaling::layer_freqs;
use super::weights::{Layer, Weights};
use crate::ops::attention::rotation;
use crate::ops::norm::rmsnorm_inplace;
use crate::ops::rope;

/// `x += b` where the layer has the bias.
pub(super) fn add_bias(x: &mut [f32], b: &Option<alloc::borrow::Cow<'_, [f32]>>) {
    if let Some(b) = b {
        x.iter_mut().zip(b.iter()).for_each(|(x, b)| *x += b);
    }
}

/// One token's projected q, k, v made ready for attention and the cache: biases, per-head
/// norms, RoPE (`rope`: the token's angles in this layer, [`rope_angles`]) and, for a
/// quantized cache, the key / value `rotations` (`KvPool::key_rotation`,
/// `KvPool::value_rotation`).
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
    // per head, or over the whole projection when the norm is as long as it (OLMo 2)
    for (x, norm) in [(&mut *q, &l.q_norm), (&mut *k, &l.k_norm)] {
        if let Some(n) = norm {
            x.chunks_exact_mut(n.len())
                .for_each(|h| rmsnorm_inplace(h, n, c.rms_eps));
        }
    }

    // encoders have absolute position embeddings instead
    if !c.arch.is_encoder() {
        rope::apply(q, c.head_dim_k, c.rope_style, rope);
        rope::apply(k, c.head_dim_k, c.rope_style, rope);
    }

    // quantized caches: rotate the heads so outlier dimensions do not dominate a block
    if let Some(n) = key_rotation {
        rotation::hadamard(q, n);
        rotation::hadamard(k, n);
    }
    if let Some(n) = value_rotation {
        rotation::hadamard(v, n);
    }
}

/// Layer `il`'s RoPE angles for position `pos` (`n_rot / 2` each) in a context of `n_ctx`
/// positions per sequence: the layer's base and scale (sliding-window layers may have their
/// own), the model's frequency factors (LongRoPE's depend on `n_ctx`), YaRN.
pub(super) fn rope_angles(
    w: &Weights<'_>,
    il: usize,
    n_ctx: usize,
    pos: usize,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    rope::rope_cache(pos, &layer_freqs(w, il, n_ctx), cos, sin);
}

/// The positions the token at `pos` sees in layer `il`: a sliding-window layer the last
/// `sliding_window` (llama.cpp: masked when pos - p >= n_swa), the others all.
///
/// `end` is the end of the token's run in the step: a bidirectional (encoder) model's token
/// sees its whole sequence, which comes whole in one step.
pub(super) fn attn_window(c: &Config, il: usize, pos: usize, end: usize) -> Range<usize> {
    if !c.causal {
        return 0..end;
    }
    let start = if c.swa_layers[il] && c.sliding_window > 0 {
        (pos + 1).saturating_sub(c.sliding_window)
    } else {
        0
    };
    start..pos + 1
}
