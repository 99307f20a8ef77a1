//! Per-session mutable state: activations, scratch and the KV cache, allocated once.

use alloc::vec;
use alloc::vec::Vec;

use half::f16;

use super::config::Config;
use crate::error::{Error, Result};
use crate::ops::matmul::ActBuf;

/// Keys and values of every layer, one row per position, stored as f16 (llama.cpp's default
/// cache type).
pub struct KvCache {
    pub n_ctx: usize,
    pub k: Vec<Vec<f16>>,
    pub v: Vec<Vec<f16>>,
}

impl KvCache {
    pub fn new(c: &Config, n_ctx: usize) -> KvCache {
        let (k_row, v_row) = c.kv_row();
        KvCache {
            n_ctx,
            k: (0..c.n_layer)
                .map(|_| vec![f16::ZERO; n_ctx * k_row])
                .collect(),
            v: (0..c.n_layer)
                .map(|_| vec![f16::ZERO; n_ctx * v_row])
                .collect(),
        }
    }

    pub fn bytes(&self) -> usize {
        self.k.iter().chain(&self.v).map(|l| l.len() * 2).sum()
    }
}

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
    /// Attention scores of one head over the context.
    pub scores: Vec<f32>,
    /// f16 attention accumulator of one head (one-row kernel).
    pub attn_acc: Vec<f16>,
    pub rope_cos: Vec<f32>,
    pub rope_sin: Vec<f32>,
    pub logits: Vec<f32>,
    pub act: ActBuf,
    pub kv: KvCache,
}

impl State {
    /// State for a context of `n_ctx` tokens (at most the model's trained context).
    pub fn new(c: &Config, n_ctx: usize) -> Result<State> {
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
            scores: vec![0.0; n_ctx],
            attn_acc: vec![f16::ZERO; c.head_dim_v],
            rope_cos: vec![0.0; c.n_rot / 2],
            rope_sin: vec![0.0; c.n_rot / 2],
            logits: vec![0.0; c.n_vocab],
            act: ActBuf::default(),
            kv: KvCache::new(c, n_ctx),
        })
    }

    pub fn n_ctx(&self) -> usize {
        self.kv.n_ctx
    }
}
