//! Models: a configuration read from GGUF metadata, borrowed weights, the paged KV cache
//! shared by all sequences ([`KvPool`]), the working memory of a pass ([`Scratch`]) and one
//! forward pass for the whole llama family over a [`Step`] of mixed prompt chunks and decode
//! tokens ([`forward`]).

mod arch;
mod attend;
mod config;
mod encoder;
mod ffn;
mod forward;
pub mod kv_pool;
pub mod lora;
pub mod moe;
mod rope_scaling;
mod scratch;
mod step;
mod token;
mod weights;

pub use arch::{Activation, Arch, SUPPORTED as SUPPORTED_ARCHS};
pub use config::Config;
pub use encoder::{EncoderInput, LayerNorm, Pooling, SeqFfn};
pub use forward::forward;
pub use kv_pool::{KvPool, PoolOptions, PoolStats, SeqId};
pub use scratch::Scratch;
pub use step::{Entry, Logits, Span, Step};
pub use weights::{DenseFfn, Ffn, Layer, Weights};
