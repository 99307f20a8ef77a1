//! Generation with nothing but `alloc`: a [`Model`] borrowed from the file's bytes, a
//! [`Context`] (one conversation: its KV cache, scratch and logits, allocated when it is
//! made) and the decode loop ([`Context::generate`]), plain or speculative. Every frontend
//! decodes through it: std-runtime's `Session` (timing it), the browser package and the
//! firmware of `edge/` (with the sequential [`crate::parallel::Sequential`]).
//!
//! ```no_run
//! # fn main() -> superinfer_core::Result<()> {
//! use core::ops::ControlFlow;
//! use superinfer_core::generate::{Context, ContextOptions, MemoryPlan, Model};
//! use superinfer_core::kernels::Kernels;
//! use superinfer_core::parallel::Sequential;
//! use superinfer_core::sampler::Sampler;
//!
//! # let bytes: &[u8] = &[];
//! // `bytes`: the whole GGUF file, 32-byte aligned (flash, or memory a loader filled)
//! let model = Model::from_gguf(bytes, Kernels::scalar())?;
//! let opts = ContextOptions { n_ctx: 256, n_batch: 1, ..Default::default() };
//! let plan = MemoryPlan::new(&model, &opts)?; // what `Context::new` will allocate
//! assert!(plan.total() < 512 << 10, "over the RAM budget");
//! let mut ctx = Context::new(&model, &Sequential, &opts)?;
//! let prompt = model.tokenizer().encode("Once upon a time", true, false)?;
//! let mut sampler = Sampler::greedy();
//! let out = ctx.generate(&prompt, 32, &mut sampler, |t| {
//!     // t.id, t.text (the text this token completes)
//!     ControlFlow::Continue(())
//! })?;
//! # let _ = out;
//! # Ok(()) }
//! ```

mod constraint;
mod context;
mod decode;
mod draft;
mod generation;
mod logprobs;
mod memory;
mod model;
mod stop;

pub use constraint::{Constraint, MaskStats};
pub use context::{Context, ContextOptions, DEFAULT_BATCH};
pub use decode::{common_prefix, NoDrafter, Outcome, StopReason, Token};
pub use draft::{Draft, Drafter};
pub use generation::{Emitted, GenerateParams, Generation};
pub use logprobs::{log_softmax_top, TokenLogprob, MAX_TOP_LOGPROBS};
pub use memory::MemoryPlan;
pub use model::Model;
pub use stop::StopStrings;
