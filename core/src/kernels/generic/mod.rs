//! Scalar kernels: portable, always compiled, and the reference for every SIMD kernel.

pub mod f16;

use super::Kernels;
use crate::quant::{self, GgmlType};

/// Fills the table with the scalar reference implementations of the `quant` module.
pub fn fill(k: &mut Kernels) {
    for ty in GgmlType::ALL {
        if let Some(f) = quant::vec_dot_ref(ty) {
            k.set_vec_dot(ty, f);
        }
        if let Some(f) = quant::quantize_row_ref(ty) {
            k.set_quantize_row(ty, f);
        }
    }
    k.set_f16_ops(f16::OPS);
}
