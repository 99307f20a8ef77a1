//! A request's constraint in the scheduler: the plan is made by the API crate's
//! [`superinfer_api::plan`] (one function for the server and the npm package: the output
//! format or the tools' call grammar, compiled by the model's `Grammars`, a grammar error
//! a 400 with its code), and attached here to the scheduler's request.

use superinfer_api::Factory;
use superinfer_runtime::core::generate::MaskStats;
use superinfer_runtime::scheduler::{Completion, ConstraintFactory, Request};

/// `request` with its constraint.
pub fn attach(mut request: Request, constraint: Option<Factory>) -> Request {
    request.constraint = constraint.map(ConstraintFactory::new);
    request
}

/// The cost of a completion's masks, when it had a constraint.
pub fn mask_of(c: &Completion) -> Option<&MaskStats> {
    c.mask.as_ref()
}
