//! The hook through which something outside the model shapes a sequence's output token by
//! token: a grammar, a JSON schema, a tool-call format. It sees every token the sequence
//! takes, masks the logits of each position before sampling, and may force the next tokens
//! outright (those are then verified in one step, like a draft, instead of one step each).

use alloc::vec::Vec;

/// A per-sequence constraint on generated tokens ([`super::Generation::with_constraint`]).
///
/// The generation calls [`mask`](Self::mask) on each position's logits before sampling (or
/// before verifying a drafted or forced token there), then [`commit`](Self::commit) with the
/// token the position took. Tokens handed out by [`forced`](Self::forced) are fed as the
/// next step's draft: each is checked against [`mask`](Self::mask) at its position like any
/// drafted token, so a constraint that forces a token must allow exactly that token there.
///
/// A constraint may compute the next mask elsewhere (another thread) from the moment a
/// token is committed, so that the work overlaps the next forward pass:
/// [`ready`](Self::ready) tells a frontend that batches sequences whether
/// [`mask`](Self::mask) would wait, so it can set this sequence's row aside and serve the
/// others first.
pub trait Constraint: Send {
    /// Sets the logits of the tokens not allowed after the tokens committed so far to -∞.
    /// Returns false when it allows none (the constraint is complete, or cannot go on):
    /// the sequence then ends there, as at an end-of-generation token.
    fn mask(&mut self, logits: &mut [f32]) -> bool;

    /// The sequence took `id` at the position last masked.
    fn commit(&mut self, id: u32);

    /// Appends the tokens that must follow what was committed, if any (no choice is left
    /// for them): they are verified together in the next step.
    fn forced(&mut self, _out: &mut Vec<u32>) {}

    /// Is the next mask computed (would [`mask`](Self::mask) return without waiting)?
    fn ready(&self) -> bool {
        true
    }

    /// What computing the masks cost so far, when the constraint measures it.
    fn stats(&self) -> Option<MaskStats> {
        None
    }
}

/// The cost of a constraint's masks (microseconds): what the server reports with a
/// completion and `mask_speed` measures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaskStats {
    /// Masks computed.
    pub masks: usize,
    pub median_us: u32,
    pub p99_us: u32,
    pub max_us: u32,
    /// The first mask (computed while the prompt is evaluated).
    pub first_mask_us: u32,
    /// Compiling the grammar (0 when it came from a cache).
    pub compile_us: u32,
}
