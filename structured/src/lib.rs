//! Structured output for superinfer: JSON Schema, `json_object`, regular expressions, Lark
//! and llama.cpp GBNF grammars, enforced token by token through [`llguidance`] behind
//! core's [`Constraint`] hook.
//!
//! - [`Grammars`] holds the tokenizer's token trie (built once per model) and compiles a
//!   [`Grammar`] into a [`Compiled`] one, cached by the grammar's hash, under limits (the
//!   grammar's size and nesting, llguidance's lexer and parser fuel), on a thread with a
//!   large stack.
//! - [`Compiled::constraint`] makes a sequence's constraint: the next token's mask is
//!   computed on a worker thread from the moment a token is committed, so it overlaps the
//!   forward pass; tokens the grammar forces are handed out as the next step's draft.
//! - [`Compiled::lazy`] leaves the output free until a [`Trigger`] appears (a tool-call
//!   marker), then applies the grammar to what follows it.
//!
//! ```no_run
//! # fn demo(tok: &superinfer_core::tokenizer::Tokenizer) -> Result<(), superinfer_structured::GrammarError> {
//! use superinfer_structured::{Grammar, Grammars};
//! let grammars = Grammars::new(tok);
//! let schema = serde_json::json!({"type": "object", "properties": {"a": {"type": "integer"}}});
//! let compiled = grammars.compile(&Grammar::JsonSchema(schema))?;
//! let constraint = compiled.constraint(); // Generation::with_constraint(constraint)
//! # let _ = constraint; Ok(()) }
//! ```

mod cache;
mod compiled;
mod constraint;
pub mod gbnf;
mod grammar;
mod limits;
mod tokens;

pub use cache::Grammars;
pub use compiled::{Compiled, Trigger};
pub use grammar::{Grammar, GrammarError};
pub use superinfer_core::generate::{Constraint, MaskStats};
