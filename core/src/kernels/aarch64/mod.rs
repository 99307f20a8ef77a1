//! AArch64 kernels: NEON (every ARMv8-A CPU), with SDOT builds of the integer kernels for
//! CPUs that have the dot-product extension (`dotprod`, ARMv8.2+).
//!
//! As on x86, every kernel is an `unsafe fn` compiled with `#[target_feature]`; the table holds
//! safe wrappers, and [`fill_neon`] that installs them is `unsafe` with one contract: only call
//! it when the CPU has the features (checked by `CpuFeatures::available`).

mod neon;

use super::{CpuFeatures, Kernels};
use crate::quant::GgmlType;

/// Wraps `unsafe fn(usize, &[u8], &[u8]) -> f32` kernels of `neon` in safe `fn`s of the same
/// name.
macro_rules! safe_dots {
    ($($name:ident),* $(,)?) => {
        $(
            fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
                // SAFETY: installed only by `fill_neon`, whose caller guarantees NEON, and
                // (for the `_sdot` kernels) only when the features report dotprod.
                unsafe { neon::$name(n, w, a) }
            }
        )*
    };
}

safe_dots!(
    dot_f32,
    dot_f16,
    dot_bf16,
    dot_q4_0,
    dot_q4_1,
    dot_q5_0,
    dot_q5_1,
    dot_q8_0,
    dot_q2_k,
    dot_q3_k,
    dot_q4_k,
    dot_q5_k,
    dot_q6_k,
    dot_q4_0_sdot,
    dot_q4_1_sdot,
    dot_q5_0_sdot,
    dot_q5_1_sdot,
    dot_q8_0_sdot,
    dot_q2_k_sdot,
    dot_q3_k_sdot,
    dot_q4_k_sdot,
    dot_q5_k_sdot,
    dot_q6_k_sdot,
);

/// # Safety
/// The CPU must support NEON; the SDOT kernels are installed only when `f.dotprod` says the
/// CPU has the dot-product extension.
pub(super) unsafe fn fill_neon(k: &mut Kernels, f: &CpuFeatures) {
    use GgmlType::*;
    // the kernels read little-endian fields through byte-vector reinterpretation
    if cfg!(target_endian = "big") {
        return;
    }
    k.set_vec_dot(F32, dot_f32);
    k.set_vec_dot(F16, dot_f16);
    k.set_vec_dot(BF16, dot_bf16);
    if f.dotprod {
        k.set_vec_dot(Q4_0, dot_q4_0_sdot);
        k.set_vec_dot(Q4_1, dot_q4_1_sdot);
        k.set_vec_dot(Q5_0, dot_q5_0_sdot);
        k.set_vec_dot(Q5_1, dot_q5_1_sdot);
        k.set_vec_dot(Q8_0, dot_q8_0_sdot);
        k.set_vec_dot(Q2_K, dot_q2_k_sdot);
        k.set_vec_dot(Q3_K, dot_q3_k_sdot);
        k.set_vec_dot(Q4_K, dot_q4_k_sdot);
        k.set_vec_dot(Q5_K, dot_q5_k_sdot);
        k.set_vec_dot(Q6_K, dot_q6_k_sdot);
    } else {
        k.set_vec_dot(Q4_0, dot_q4_0);
        k.set_vec_dot(Q4_1, dot_q4_1);
        k.set_vec_dot(Q5_0, dot_q5_0);
        k.set_vec_dot(Q5_1, dot_q5_1);
        k.set_vec_dot(Q8_0, dot_q8_0);
        k.set_vec_dot(Q2_K, dot_q2_k);
        k.set_vec_dot(Q3_K, dot_q3_k);
        k.set_vec_dot(Q4_K, dot_q4_k);
        k.set_vec_dot(Q5_K, dot_q5_k);
        k.set_vec_dot(Q6_K, dot_q6_k);
    }
}
