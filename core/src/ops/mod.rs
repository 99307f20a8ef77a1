//! Ops.
