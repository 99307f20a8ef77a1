//! superinfer-runtime: the std frontend over `superinfer-core`. It maps model files, detects
//! the CPU, owns the thread pool and exposes an `Engine` / `Session` API that streams tokens,
//! and a `Scheduler` that runs many requests together in batched steps.

pub mod cpu;
mod embed;
mod engine;
mod error;
pub mod hf;
#[cfg(feature = "hub")]
pub mod hub;
mod load;
pub mod mem;
mod model_files;
pub mod perplexity;
pub mod pool;
pub mod quantize;
pub mod scheduler;
mod service;
mod session;
pub mod speculative;
mod tokenizer_file;

pub use engine::{EmbeddingDefaults, Engine, EngineOptions};
pub use error::{chain, Chain, Error};
pub use load::{MappedFile, OpenError};
pub use model_files::ModelFiles;
pub use perplexity::{perplexity, Perplexity, PerplexityOptions};
pub use scheduler::{Scheduler, SchedulerOptions};
pub use service::Service;
pub use session::{GenerateStats, Session, SessionOptions, StopReason, TokenEvent};
pub use superinfer_core as core;
pub use tokenizer_file::load_tokenizer;

/// A seed for a sampler that was given none: the time, the process and a per-call counter
/// (two requests in the same nanosecond still differ).
pub fn random_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    (t as u64) ^ (u64::from(std::process::id()) << 32) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}
