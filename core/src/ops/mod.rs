//! The forward pass's operations, written once over the [`Kernels`](crate::kernels::Kernels)
//! table and the [`Parallel`](crate::parallel::Parallel) executor.

pub mod activation;
pub mod aligned;
pub mod attention;
pub mod exp;
pub mod expf;
pub mod matmul;
mod matvec;
pub mod norm;
pub mod rope;
pub mod softcap;

pub use matmul::{matvec, QMatrix};
