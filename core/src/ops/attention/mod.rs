//! Attention over the KV cache (F32, F16 or Q8_0): the cache's element types and layout
//! ([`KvView`], [`HeadRows`]), the flash kernel ([`flash`]: tiles of query rows, online
//! softmax, no score matrix, grouped-query heads reading their shared K/V rows in place)
//! and the quantized caches' Hadamard rotation ([`rotation`]).

pub mod flash;
mod kv;
pub mod rotation;

pub use kv::{HeadRows, KvType, KvView, BLOCK};

/// Shapes of one attention layer.
#[derive(Debug, Clone, Copy)]
pub struct AttnShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
}

impl AttnShape {
    pub fn k_row(&self) -> usize {
        self.n_head_kv * self.head_dim_k
    }
    pub fn v_row(&self) -> usize {
        self.n_head_kv * self.head_dim_v
    }
}

/// One layer's cache as attention reads it.
#[derive(Clone, Copy)]
pub struct KvLayer<'a> {
    pub k: KvView<'a>,
    pub v: KvView<'a>,
}

#[cfg(test)]
mod tests;
