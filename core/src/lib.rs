//! superinfer-core: everything needed to run a GGUF language model, with no I/O and no
//! threads. Frontends (std-runtime, wasm) bring bytes and threads; the core detects the CPU's
//! features itself (`kernels::CpuFeatures::detect`: safe code cannot claim one it lacks).
//!
//! Data flow: bytes -> [`gguf::GgufFile`] (zero-copy views) -> [`model::Weights`] -> a
//! [`model::Step`] over a [`model::KvPool`] (the KV cache) and a [`model::Scratch`] ->
//! [`model::forward`] (through [`kernels::Kernels`]) -> logits -> [`sampler`] -> token ->
//! [`tokenizer`] -> text. [`generate`] drives it for one conversation.
#![no_std]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;
#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod embed;
pub mod error;
pub mod generate;
pub mod gguf;
pub mod kernels;
pub mod model;
pub mod ops;
pub mod parallel;
pub mod quant;
pub mod sampler;
pub mod speculative;
pub mod tokenizer;

pub use error::{Error, Result};
