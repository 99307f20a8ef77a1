//! Speculative decoding's drafters: who proposes the tokens the target then verifies in one
//! step (`Session::generate_with`).
//!
//! - [`LookupDrafter`]: prompt lookup, no second model (`--lookup-ngram N`).
//! - [`DraftModel`]: a smaller model of the same family with its own `Session`
//!   (`--model-draft FILE`), checked at load to share the target's vocabulary.

mod costs;
mod draft_model;

use superinfer_core::speculative::Lookup;

pub use draft_model::{check_vocab, DraftModel, DraftOptions};

use crate::Error;

pub use superinfer_core::generate::{Draft, Drafter};

/// A drafter as the session's decode loop takes it.
pub type DynDrafter<'d> = dyn Drafter<Error = Error> + 'd;

/// The first draft of a lookup run: 3 tokens make a 4-token verification step, which costs
/// about 1.5 single-token steps (the batch kernels' tile sizes are 4 and 8).
const LOOKUP_START: usize = 3;

/// Prompt lookup drafting ([`Lookup`]), at most `draft_max` tokens per round, with an
/// adaptive length: a match is often wrong after a few tokens, and a verification step
/// costs more the more tokens it checks, so a run starts with [`LOOKUP_START`] tokens and
/// doubles (plus one: 3, 7, 15, 31, ...) each time the whole draft was accepted, back to the
/// start after any rejection. Long copies (an edited function given back) still go in long
/// steps, wrong guesses stay cheap.
#[derive(Debug, Clone)]
pub struct LookupDrafter {
    pub lookup: Lookup,
    pub draft_max: usize,
    /// Length of the next draft.
    next: usize,
    /// The last draft and the history length it was made at.
    last: Vec<u32>,
    last_at: usize,
}

impl LookupDrafter {
    pub fn new(ngram: usize, draft_max: usize) -> LookupDrafter {
        LookupDrafter {
            lookup: Lookup::new(ngram),
            draft_max,
            next: LOOKUP_START,
            last: Vec::new(),
            last_at: 0,
        }
    }
}

impl Drafter for LookupDrafter {
    type Error = Error;

    fn draft(&mut self, history: &[u32], limit: usize, out: &mut Draft) -> Result<(), Error> {
        // how the last draft fared: the history after it starts with its accepted part
        if !self.last.is_empty() && history.len() > self.last_at {
            let after = &history[self.last_at..];
            let accepted = self
                .last
                .iter()
                .zip(after)
                .take_while(|(a, b)| a == b)
                .count();
            self.next = if accepted == self.last.len() && after.len() > accepted {
                (self.next * 2 + 1).min(self.draft_max.max(1))
            } else {
                LOOKUP_START
            };
        }
        let n = self.next.min(self.draft_max).min(limit);
        let from = out.tokens.len();
        self.lookup.draft(history, n, &mut out.tokens);
        self.last.clear();
        self.last.extend_from_slice(&out.tokens[from..]);
        self.last_at = history.len();
        Ok(())
    }
}
