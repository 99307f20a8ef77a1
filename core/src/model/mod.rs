//! Models: a configuration read from GGUF metadata, borrowed weights, per-session state and
//! one forward pass for the whole llama family.

mod arch;
mod attend;
mod batch;
mod config;
mod kv_cache;
mod kv_centre;
mod state;
mod transformer;
mod weights;

pub use arch::{Activation, Arch};
pub use batch::{forward_batch, Batch, Logits};
pub use config::Config;
pub use kv_cache::KvCache;
pub use state::State;
pub use transformer::forward;
pub use weights::{Layer, Weights};
