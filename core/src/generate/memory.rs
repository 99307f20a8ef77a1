//! `MemoryPlan`: what a [`super::Context`] allocates, known before it is made, so firmware
//! can check its RAM budget first (and a browser its wasm memory).
//!
//! With `n_ctx` rounded up to whole blocks of 16 positions (`BLOCK`), `L` layers, KV rows
//! of `k_row` and `v_row` values per position (KV heads × head dimension) and `b(ty)` bytes
//! per cached value (F32 4, F16 2, Q8_0 34/32):
//!
//! - KV cache = `L · n_ctx · (k_row · b(k_type) + v_row · b(v_type))`
//! - scratch = activations of `n_batch` tokens (`4 · n_batch · (3·n_embd + q + k_row + v_row +
//!   attn + 2·n_ff)` bytes, each buffer rounded up to 64 bytes) + one token's quantized
//!   activation (+ `n_batch` of them when `n_batch > 1`) + one attention worker's tile
//!   buffers + RoPE tables + logits rows (1 row, or up to 16 when `n_batch > 1`, of
//!   `4 · n_vocab` bytes)
//! - logits = `4 · n_vocab` (the last token's, kept)
//! - tokens = `2 · 4 · (n_ctx + 1)` (the sequence and the decode loop's history)
//!
//! plus a few hundred bytes per KV block of bookkeeping ([`MemoryPlan::bookkeeping`]). The
//! weights are the file's bytes, wherever they are (flash, a mapped file, wasm memory);
//! the model's own tables (tokenizer vocabulary, tensor descriptors) were allocated when it
//! was parsed.

use super::{ContextOptions, Model};
use crate::error::Result;
use crate::model::{KvPool, Scratch};

/// Bytes a [`super::Context`] will allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Context and batch the options resolve to.
    pub n_ctx: usize,
    pub n_batch: usize,
    /// Keys and values of every layer for `n_ctx` positions.
    pub kv_cache: usize,
    /// The forward pass's working memory for steps of up to `n_batch` tokens.
    pub scratch: usize,
    /// The last token's logits.
    pub logits: usize,
    /// The sequence's tokens and the decode loop's history.
    pub tokens: usize,
    /// Block tables and the like (an upper bound).
    pub bookkeeping: usize,
}

impl MemoryPlan {
    /// The plan for a context of `model` with options `opts` on one thread (the attention
    /// keeps one set of tile buffers per worker: see [`Self::with_workers`]).
    pub fn new(model: &Model<'_>, opts: &ContextOptions) -> Result<MemoryPlan> {
        Self::with_workers(model, opts, 1)
    }

    /// The plan for `workers` threads.
    pub fn with_workers(
        model: &Model<'_>,
        opts: &ContextOptions,
        workers: usize,
    ) -> Result<MemoryPlan> {
        let o = opts.resolve(model)?;
        let w = model.weights();
        let blocks = o.n_ctx.div_ceil(crate::ops::attention::BLOCK);
        Ok(MemoryPlan {
            n_ctx: o.n_ctx,
            n_batch: o.n_batch,
            kv_cache: KvPool::bytes_for(w, &o.pool()),
            scratch: Scratch::bytes_for(w, o.n_batch, workers),
            logits: model.config().n_vocab * size_of::<f32>(),
            tokens: 2 * (o.n_ctx + 1) * size_of::<u32>(),
            // per block: its state, address, parent, tokens, free-list entry and the
            // sequence's table and address entries
            bookkeeping: blocks * (64 + crate::ops::attention::BLOCK * size_of::<u32>()) + 1024,
        })
    }

    /// Everything together.
    pub fn total(&self) -> usize {
        self.kv_cache + self.scratch + self.logits + self.tokens + self.bookkeeping
    }
}
