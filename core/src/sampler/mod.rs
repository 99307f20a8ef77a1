//! Samplers.
