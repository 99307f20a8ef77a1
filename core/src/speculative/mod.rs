//! Speculative decoding: guess several tokens cheaply, then let the target model check them
//! all in one batched step (which reads its weights once, however many tokens it checks).
//!
//! - [`lookup`]: drafts without a second model, by finding the text's last n-gram earlier in
//!   the prompt or the output and proposing what followed it (prompt lookup decoding).
//! - [`verify()`]: the acceptance rule. Greedy: a drafted token stays when it is the target's
//!   argmax. Sampling: speculative sampling (Leviathan et al., Chen et al.): keep drafted `x`
//!   with probability `min(1, p(x) / q(x))`, else draw from `max(0, p - q)` renormalized, so
//!   every emitted token is distributed exactly as the target's sampler would draw it.
//!
//! The loop that drives a target and a drafter is [`crate::generate`]'s decode loop (a
//! [`crate::generate::Drafter`] proposes); the runtime's draft model is a second `Session`.

pub mod lookup;
pub mod verify;

#[cfg(test)]
mod tests;

pub use lookup::Lookup;
pub use verify::{verify, Verdict};
