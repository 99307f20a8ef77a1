//! Per-session mutable state: activations, scratch and the KV cache, allocated once.

use alloc::vec;
use alloc::vec::Vec;

use super::kv_cache::KvCache;
use super::weights::Weights;
use crate::error::{Error, Result};
use crate::ops::attention::flash::FlashScratch;
use crate::ops::attention::{AttnShape, KvType};
use crate::ops::matmul::ActBuf;

pub struct State {
    /// Residual stream.
    pub x: Vec<f32>,
    pub xb: Vec<f32>,
    pub xb2: Vec<f32>,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub attn: Vec<f32>,
    pub hb: Vec<f32>,
    pub hb2: Vec<f32>,
    /// Attention buffers, one per worker that attends (grown to the thread count once).
    pub attn_scratch: Vec<FlashScratch>,
    pub rope_cos: Vec<f32>,
    pub rope_sin: Vec<f32>,
    pub logits: Vec<f32>,
    pub act: ActBuf,
    pub kv: KvCache,
}

impl State {
    /// State for a context of `n_ctx` tokens (at most the model's trained context) with
    /// keys cached as `k_type` and values as `v_type`.
    pub fn new(w: &Weights<'_>, n_ctx: usize, k_type: KvType, v_type: KvType) -> Result<State> {
        let c = &w.config;
        if n_ctx == 0 || n_ctx > c.n_ctx_train {
            return Err(Error::InvalidArgument(alloc::format!(
                "context size {n_ctx} must be between 1 and the model's trained context {}",
                c.n_ctx_train
            )));
        }
        let (k_row, v_row) = c.kv_row();
        Ok(State {
            x: vec![0.0; c.n_embd],
            xb: vec![0.0; c.n_embd],
            xb2: vec![0.0; c.n_embd],
            q: vec![0.0; c.n_head * c.head_dim_k],
            k: vec![0.0; k_row],
            v: vec![0.0; v_row],
            attn: vec![0.0; c.n_head * c.head_dim_v],
            hb: vec![0.0; c.n_ff],
            hb2: vec![0.0; c.n_ff],
            attn_scratch: vec![FlashScratch::new(c.attn_shape())],
            rope_cos: vec![0.0; c.n_rot / 2],
            rope_sin: vec![0.0; c.n_rot / 2],
            logits: vec![0.0; c.n_vocab],
            act: ActBuf::default(),
            kv: KvCache::new(w, n_ctx, k_type, v_type)?,
        })
    }

    pub fn n_ctx(&self) -> usize {
        self.kv.n_ctx()
    }

    /// Makes sure there are `n` attention scratch buffers (allocates only the first time).
    pub fn attn_scratch(&mut self, shape: AttnShape, n: usize) -> &mut [FlashScratch] {
        while self.attn_scratch.len() < n {
            self.attn_scratch.push(FlashScratch::new(shape));
        }
        &mut self.attn_scratch[..n]
    }
}
