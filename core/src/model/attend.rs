//! A layer's attention for every run of a step (a sequence's prompt chunk or its one decode
//! token) through the flash kernel (`ops::attention::flash`), each run against its own
//! sequence's blocks of the paged cache. A tile holds the query heads that share one KV head
//! for consecutive tokens of one run, so every cached key and value row is converted once per
//! tile, not once per query head. The tiles of all runs are spread over the workers in one
//! dispatch; when there are fewer of them than workers (a decode step of a model with few KV
//! heads), a KV head's query heads are split between tiles. A row's arithmetic does not
//! depend on the tile it sits in nor on the other runs, so none of this changes a result.

use super::config::Config;
use super::kv_pool::KvPool;
use super::step::Span;
use super::token::attn_window;
use crate::error::Result;
use crate::kernels::Kernels;
use crate::ops::attention::flash::{tile_tokens, FlashScratch, Tile};
use crate::ops::attention::HeadRows;
use crate::parallel::{DisjointSlice, Parallel};

/// Attention of layer `il` for `runs` (spans of the pass: rows `first..first + n` of `q` and
/// `out`, at positions `pos0..`, each against its own sequence's blocks of `pool`), on as
/// many workers as there are `scratch` buffers (every token's keys and values are already in
/// the cache): `q` holds `n_head` rows of `head_dim_k` per token, `out` receives `n_head`
/// rows of `head_dim_v`. `sinks`: the layer's attention sinks, one logit per query head.
#[allow(clippy::too_many_arguments)]
pub(super) fn attend(
    k: &Kernels,
    c: &Config,
    il: usize,
    pool: &KvPool,
    scratch: &mut [FlashScratch],
    par: &dyn Parallel,
    q: &[f32],
    out: &mut [f32],
    runs: &[Span],
    sinks: Option<&[f32]>,
) -> Result<()> {
    for r in runs {
        pool.seq_blocks(r.seq)?;
    }
    let kv = pool.layer(il);
    let (dk, dv) = (c.head_dim_k, c.head_dim_v);
    let n_kv = c.n_head_kv.max(1);
    let group = (c.n_head / n_kv).max(1);
    let (q_row, o_row) = (c.n_head * dk, c.n_head * dv);
    let (k_row, v_row) = c.kv_row();
    let tokens = tile_tokens(group);
    let tiles: usize = runs.iter().map(|r| r.n.div_ceil(tokens) * n_kv).sum();
    // split each group's heads when the tiles would not keep every worker busy
    let parts = scratch.len().div_ceil(tiles.max(1)).clamp(1, group);
    let tasks = tiles * parts;
    let workers = scratch.len().clamp(1, tasks.max(1));
    let scratch = DisjointSlice::new(&mut scratch[..workers]);
    let outs = DisjointSlice::new(out);
    let (kernel, ops) = (k.flash(), k.f16_ops());
    par.for_each(workers, &|i| {
        // SAFETY: worker i owns scratch i.
        let s = unsafe { &mut scratch.piece(i, 1)[0] };
        // tasks interleaved over the workers: later tokens see more positions
        let (mut run, mut run_first_task) = (0, 0);
        for task in (i..tasks).step_by(workers) {
            // the run holding this task (tasks are numbered run after run)
            while task >= run_first_task + runs[run].n.div_ceil(tokens) * n_kv * parts {
                run_first_task += runs[run].n.div_ceil(tokens) * n_kv * parts;
                run += 1;
            }
            let r = runs[run];
            let blocks = pool.seq_blocks(r.seq).expect("checked before the dispatch");
            let local = task - run_first_task;
            let (part, g, t0) = (
                local % parts,
                local / parts % n_kv,
                local / (parts * n_kv) * tokens,
            );
            let heads = g * group + part * group / parts..g * group + (part + 1) * group / parts;
            let rows = || {
                let heads = heads.clone();
                (t0..(t0 + tokens).min(r.n)).flat_map(move |t| heads.clone().map(move |h| (t, h)))
            };
            let mut n_rows = 0;
            for (row, (t, h)) in rows().enumerate() {
                let (qr, window) = s.query(row);
                qr.copy_from_slice(&q[(r.first + t) * q_row + h * dk..][..dk]);
                *window = attn_window(c, il, r.pos0 + t, r.pos0 + r.n);
                n_rows = row + 1;
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
                // the rows cycle through `heads` token after token
                sinks: sinks.map(|s| &s[heads.clone()]),
                blocks: Some(blocks),
            };
            kernel(ops, &tile, s);
            for (row, (t, h)) in rows().enumerate() {
                // SAFETY: head h of token t is written by this task only.
                let o = unsafe { outs.piece((r.first + t) * o_row + h * dv, dv) };
                o.copy_from_slice(s.output(row));
            }
        }
    });
    Ok(())
}
