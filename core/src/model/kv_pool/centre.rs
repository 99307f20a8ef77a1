//! Centring of quantized cache rows: a fixed vector per layer is taken from every key and
//! value before a quantized cache stores it.
//!
//! Some models' projection biases are huge next to the rest of the row (Qwen2.5-0.5B's
//! layer-0 key bias has norm 277, in RoPE pairs that barely turn), so they set every
//! Q8_0 block's step and bury the part that differs between positions. Taking a fixed
//! vector away is exact:
//! - keys: a score becomes `q · (k - c) = q · k - q · c`, the same shift for all of a
//!   query's keys, which the softmax removes (not with a score softcap, which is not
//!   shift-invariant: no key centring then);
//! - values: the weights of an output sum to one, so `Σ p (v - d) + d = Σ p v`; `d` is
//!   added back to each output.
//!
//! The key centre is the key bias's mean rotation over the context's positions (slow
//! pairs keep their bias, fast ones average out); the value centre is the value bias. Both
//! are rotated like the rows they are taken from (the quantized cache's Hadamard rotation).
//! Layers without a bias, keys with per-head norms (the bias is not what is stored) and
//! layers with attention sinks (neither identity holds) are not centred.

use alloc::vec;
use alloc::vec::Vec;

use crate::model::rope_scaling::layer_freqs;
use crate::model::weights::Weights;
use crate::ops::attention::{rotation, KvType};
use crate::ops::rope;

/// One layer's centres; empty vectors where none applies.
#[derive(Default)]
struct Layer {
    /// Taken from each key row as stored.
    key: Vec<f32>,
    /// Taken from each value row as stored (rotated as they are).
    value: Vec<f32>,
    /// The value centre per KV head as attention outputs see it (unrotated).
    value_out: Vec<f32>,
}

pub(super) struct Centres {
    /// Per layer (empty when no layer is centred).
    layers: Vec<Layer>,
    /// Values per head, and query heads per KV head.
    head_dim_v: usize,
    group: usize,
    /// A row less its centre.
    scratch: Vec<f32>,
}

impl Centres {
    /// Centres for a cache of `n_ctx` positions storing keys / values as `types`, rotated
    /// by `rotations` (sizes of the key and value Hadamard rotations). Float caches are not
    /// centred (they are stored as llama.cpp stores them).
    pub(super) fn new(
        w: &Weights<'_>,
        n_ctx: usize,
        types: [KvType; 2],
        rotations: [Option<usize>; 2],
    ) -> Centres {
        let c = &w.config;
        let half = c.n_rot / 2;
        let (mut cos, mut sin) = (vec![0.0; half], vec![0.0; half]);
        let centre_keys = types[0].block() > 1 && c.attn_softcap.is_none();
        let centre_values = types[1].block() > 1;
        let layers: Vec<Layer> = w
            .layers
            .iter()
            .enumerate()
            .map(|(il, l)| {
                let mut out = Layer::default();
                // attention sinks take a share of the softmax that no key holds: a shift of
                // the scores is not removed, the weights of the values do not sum to one
                if l.attn_sinks.is_some() {
                    return out;
                }
                if let (true, Some(bias), None) = (centre_keys, &l.bk, &l.k_norm) {
                    let freqs = layer_freqs(w, il, n_ctx);
                    rope::mean_table(n_ctx, &freqs, &mut cos, &mut sin);
                    let table = rope::RopeTable {
                        cos: &cos,
                        sin: &sin,
                    };
                    out.key = bias.to_vec();
                    rope::apply(&mut out.key, c.head_dim_k, c.rope_style, &table);
                    if let Some(n) = rotations[0] {
                        rotation::hadamard(&mut out.key, n);
                    }
                }
                if let (true, Some(bias)) = (centre_values, &l.bv) {
                    out.value_out = bias.to_vec();
                    out.value = bias.to_vec();
                    if let Some(n) = rotations[1] {
                        rotation::hadamard(&mut out.value, n);
                    }
                }
                out
            })
            .collect();
        if layers
            .iter()
            .all(|l| l.key.is_empty() && l.value.is_empty())
        {
            return Centres {
                layers: Vec::new(),
                head_dim_v: c.head_dim_v,
                group: c.n_head / c.n_head_kv,
                scratch: Vec::new(),
            };
        }
        let (k_row, v_row) = c.kv_row();
        Centres {
            layers,
            head_dim_v: c.head_dim_v,
            group: c.n_head / c.n_head_kv,
            scratch: vec![0.0; k_row + v_row],
        }
    }

    /// Passes layer `il`'s key row `k` and value row `v` to `store` as the cache keeps them.
    pub(super) fn store(
        &mut self,
        il: usize,
        k: &[f32],
        v: &[f32],
        store: impl FnOnce(&[f32], &[f32]),
    ) {
        let Some(l) = self.layers.get(il) else {
            return store(k, v);
        };
        let (ks, vs) = self.scratch.split_at_mut(k.len());
        let k = if l.key.is_empty() {
            k
        } else {
            less(ks, k, &l.key)
        };
        let v = if l.value.is_empty() {
            v
        } else {
            less(vs, v, &l.value)
        };
        store(k, v)
    }

    /// Adds layer `il`'s value centre back to an attention output (all query heads).
    pub(super) fn restore_output(&self, il: usize, out: &mut [f32]) {
        let (head_dim, group) = (self.head_dim_v, self.group);
        let Some(l) = self.layers.get(il).filter(|l| !l.value_out.is_empty()) else {
            return;
        };
        for (h, head) in out.chunks_exact_mut(head_dim).enumerate() {
            let d = &l.value_out[h / group * head_dim..][..head_dim];
            head.iter_mut().zip(d).for_each(|(o, d)| *o += d);
        }
    }
}

/// `x - c` in `buf`.
fn less<'b>(buf: &'b mut [f32], x: &[f32], c: &[f32]) -> &'b [f32] {
    let buf = &mut buf[..x.len()];
    for ((d, &x), &c) in buf.iter_mut().zip(x).zip(c) {
        *d = x - c;
    }
    buf
}
