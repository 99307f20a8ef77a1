//! WebAssembly kernels: SIMD128 (fixed-width 128-bit SIMD, standard in every current engine).
//!
//! wasm has no runtime feature detection: a module either was built with `simd128` or was
//! not, and an engine without it rejects the whole module. As on x86, every kernel is an
//! `unsafe fn` compiled with `#[target_feature]`; the table holds safe wrappers, and
//! [`fill_simd128`] that installs them is `unsafe` with one contract: only call it when the
//! features report simd128 (checked by `CpuFeatures::available`).

mod simd128;

use super::{CpuFeatures, Kernels};
use crate::quant::GgmlType;

/// Wraps `unsafe fn(usize, &[u8], &[u8]) -> f32` kernels of `simd128` in safe `fn`s of the
/// same name.
macro_rules! safe_dots {
    ($($name:ident),* $(,)?) => {
        $(
            fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
                // SAFETY: installed only by `fill_simd128`, whose caller guarantees simd128.
                unsafe { simd128::$name(n, w, a) }
            }
        )*
    };
}

safe_dots!(
    dot_f32, dot_f16, dot_bf16, dot_q4_0, dot_q4_1, dot_q5_0, dot_q5_1, dot_q8_0, dot_q2_k,
    dot_q3_k, dot_q4_k, dot_q5_k, dot_q6_k,
);

/// # Safety
/// The engine must support simd128.
pub(super) unsafe fn fill_simd128(k: &mut Kernels, _f: &CpuFeatures) {
    use GgmlType::*;
    k.set_vec_dot(F32, dot_f32);
    k.set_vec_dot(F16, dot_f16);
    k.set_vec_dot(BF16, dot_bf16);
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
