//! Mixtures of experts: each token's feed-forward block is the weighted sum of the few
//! experts its router chooses. The configuration ([`MoeConfig`]), the tensors
//! ([`Experts`]), the router ([`route`]) and the block of the forward pass (`block.rs`).

mod block;
mod config;
mod experts;
mod route;

pub(super) use block::block;
pub use block::MoeScratch;
pub use config::{Gating, MoeConfig, MAX_EXPERTS};
pub use experts::{Expert, Experts, SharedExpert};
pub use route::{route, MAX_USED};
