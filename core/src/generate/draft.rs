//! What speculative decoding's drafters hand the decode loop ([`super::Context::decode`]).

use alloc::vec::Vec;

use crate::sampler::Candidate;

/// Proposed tokens, and for each the distribution it was drawn from when drawn at random
/// (speculative sampling needs it; a deterministic proposal has none).
#[derive(Debug, Default, Clone)]
pub struct Draft {
    pub tokens: Vec<u32>,
    dists: Vec<Vec<Candidate>>,
}

impl Draft {
    pub fn clear(&mut self) {
        self.tokens.clear();
        self.dists.clear();
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn truncate(&mut self, n: usize) {
        self.tokens.truncate(n);
        self.dists.truncate(n);
    }

    /// Adds a token chosen deterministically (it cannot follow a randomly drawn one).
    pub fn push(&mut self, id: u32) {
        debug_assert!(self.dists.is_empty());
        self.tokens.push(id);
    }

    /// Adds a token drawn from `q`.
    pub fn push_drawn(&mut self, id: u32, q: Vec<Candidate>) {
        debug_assert_eq!(self.dists.len(), self.tokens.len());
        self.tokens.push(id);
        self.dists.push(q);
    }

    /// The distribution token `i` was drawn from (`None`: chosen deterministically).
    pub fn dist(&self, i: usize) -> Option<&[Candidate]> {
        self.dists.get(i).map(Vec::as_slice)
    }
}

/// Something that proposes what comes next: prompt lookup, a draft model.
pub trait Drafter {
    /// What drafting can fail with (a draft model's own errors); the decode loop's errors
    /// convert into it.
    type Error: From<crate::Error>;

    /// The target has just evaluated `tokens` (the prompt, after whatever the conversation
    /// held before): a draft model evaluates them too, so drafting starts at once.
    fn prefill(&mut self, _tokens: &[u32]) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Appends to `out` up to `limit` tokens to follow `history` (prompt and output so far;
    /// its last token is not yet in the target's cache).
    fn draft(&mut self, history: &[u32], limit: usize, out: &mut Draft) -> Result<(), Self::Error>;
}
