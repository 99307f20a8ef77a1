//! Kernels.
