//! Speculative decoding's drafters: who proposes the tokens the target then verifies in one
//! step (`Session::generate_with`).
//!
//! - [`LookupDrafter`]: prompt lookup, no second model (`--lookup-ngram N`).
//! - [`DraftModel`]: a smaller model of the same family with its own `Session`
//!   (`--model-draft FILE`), checked at load to share the target's vocabulary.

mod costs;
mod draft_model;
mod lookup;

pub use draft_model::{check_vocab, DraftModel, DraftOptions};
pub use lookup::LookupDrafter;

use crate::Error;

pub use superinfer_core::generate::{Draft, Drafter};

/// A drafter as the session's decode loop takes it.
pub type DynDrafter<'d> = dyn Drafter<Error = Error> + 'd;
