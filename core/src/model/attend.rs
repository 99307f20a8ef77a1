//! A layer's attention for a run of tokens, a prompt batch or one decode step alike, through
//! the flash kernel (`ops::attention::flash`). A tile holds the query heads that share one KV
//! head for a run of consecutive tokens, so every cached key and value row is converted once
//! per tile, not once per query head. The tiles are spread over the workers; when there are
//! fewer of them than workers (a decode step of a model with few KV heads), a KV head's query
//! heads are split between tiles. A row's arithmetic does not depend on the tile it sits in,
//! so none of this changes a result.

use super::config::Config;
use super::transformer::attn_window;
use crate::kernels::Kernels;
use crate::ops::attention::flash::{tile_tokens, FlashScratch, Tile};
use crate::ops::attention::{HeadRows, KvLayer};
use crate::parallel::{DisjointSlice, Parallel};

/// The queries of a run of `n` tokens at positions `pos0..pos0 + n` (`n_head` rows of
/// `head_dim_k` each per token), and where their outputs go (`n_head` rows of `head_dim_v`).
pub(super) struct Run<'a> {
    pub q: &'a [f32],
    pub out: &'a mut [f32],
    pub n: usize,
    pub pos0: usize,
}

/// Attention of layer `il` for `run`, on as many workers as there are `scratch` buffers
/// (every token's keys and values are already in the cache).
pub(super) fn attend(
    k: &Kernels,
    c: &Config,
    il: usize,
    kv: KvLayer<'_>,
    scratch: &mut [FlashScratch],
    par: &dyn Parallel,
    run: Run<'_>,
) {
    let (dk, dv) = (c.head_dim_k, c.head_dim_v);
    let n_kv = c.n_head_kv.max(1);
    let group = (c.n_head / n_kv).max(1);
    let (q_row, o_row) = (c.n_head * dk, c.n_head * dv);
    let (k_row, v_row) = c.kv_row();
    let Run { q, out, n, pos0 } = run;
    let tokens = tile_tokens(group);
    let runs = n.div_ceil(tokens);
    // split each group's heads when the tiles would not keep every worker busy
    let parts = scratch.len().div_ceil((runs * n_kv).max(1)).clamp(1, group);
    let tasks = runs * n_kv * parts;
    let workers = scratch.len().clamp(1, tasks.max(1));
    let scratch = DisjointSlice::new(&mut scratch[..workers]);
    let outs = DisjointSlice::new(out);
    let (kernel, ops) = (k.flash(), k.f16_ops());
    par.for_each(workers, &|i| {
        // SAFETY: worker i owns scratch i.
        let s = unsafe { &mut scratch.piece(i, 1)[0] };
        // tasks interleaved over the workers: later tokens see more positions
        for task in (i..tasks).step_by(workers) {
            let (part, g, t0) = (
                task % parts,
                task / parts % n_kv,
                task / (parts * n_kv) * tokens,
            );
            let heads = g * group + part * group / parts..g * group + (part + 1) * group / parts;
            let rows = || {
                let heads = heads.clone();
                (t0..(t0 + tokens).min(n)).flat_map(move |t| heads.clone().map(move |h| (t, h)))
            };
            let mut n_rows = 0;
            for (r, (t, h)) in rows().enumerate() {
                let (qr, window) = s.query(r);
                qr.copy_from_slice(&q[t * q_row + h * dk..][..dk]);
                *window = attn_window(c, il, pos0 + t);
                n_rows = r + 1;
            }
            let tile = Tile {
                keys: kv.k,
                k_head: HeadRows {
                    row: k_row,
                    at: g * dk,
                    dim: dk,
                },
                values: kv.v,
                v_head: HeadRows {
                    row: v_row,
                    at: g * dv,
                    dim: dv,
                },
                scale: c.attn_scale,
                softcap: c.attn_softcap,
                n_rows,
            };
            kernel(ops, &tile, s);
            for (r, (t, h)) in rows().enumerate() {
                // SAFETY: head h of token t is written by this task only.
                let o = unsafe { outs.piece(t * o_row + h * dv, dv) };
                o.copy_from_slice(s.output(r));
            }
        }
    });
}
