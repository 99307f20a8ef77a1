//! AArch64 kernels: NEON (every ARMv8-A CPU), with SDOT builds of the integer kernels for
//! CPUs that have the dot-product extension (`dotprod`, ARMv8.2+). With dotprod the table
//! also gets the kernels over the interleaved weight layouts (`neon_x8`: Q4_0, Q5_0, Q8_0;
//! `neon_x8_k`: Q4_K, Q5_K, Q6_K), so such weights are repacked at load; without it, none (the
//! weights keep ggml's row layout and the row kernels above).
//!
//! As on x86, every kernel is an `unsafe fn` compiled with `#[target_feature]`; the table holds
//! safe wrappers, and [`fill_neon`] that installs them is `unsafe` with one contract: only call
//! it when the CPU has the features (checked by `CpuFeatures::available`).

mod neon;
mod neon_x8;
mod neon_x8_k;

use super::{CpuFeatures, Kernels};
use crate::quant::interleaved::{BatchRows, ROWS};
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
    dot_mxfp4,
    dot_mxfp4_sdot,
    dot_iq4_nl,
    dot_iq4_nl_sdot,
    dot_iq4_xs,
    dot_iq4_xs_sdot,
);

/// Wraps the `neon,dotprod` interleaved kernels of `$module` (matrix × vector and batch) in
/// safe `fn`s of the same name.
macro_rules! safe_x8 {
    ($module:ident: $($gemv:ident, $gemm:ident;)*) => {
        $(
            fn $gemv(cols: usize, w: &[u8], a: &[u8], sums: &[i32], out: &mut [f32]) {
                // SAFETY: installed only by `fill_neon`, whose caller guarantees NEON, and
                // only when the features report dotprod.
                unsafe { $module::$gemv(cols, w, a, sums, out) }
            }

            fn $gemm(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
                // SAFETY: as above.
                unsafe { $module::$gemm(cols, w, acts, out) }
            }
        )*
    };
}

safe_x8!(neon_x8:
    gemv_q4_0, gemm_q4_0;
    gemv_q5_0, gemm_q5_0;
    gemv_q8_0, gemm_q8_0;
);
safe_x8!(neon_x8_k:
    gemv_q4_k, gemm_q4_k;
    gemv_q5_k, gemm_q5_k;
    gemv_q6_k, gemm_q6_k;
);

/// # Safety
/// The CPU must support NEON; the SDOT kernels are installed only when `f` has `Dotprod`,
/// meaning the CPU has the dot-product extension.
pub(super) unsafe fn fill_neon(k: &mut Kernels, f: &CpuFeatures) {
    use GgmlType::*;
    // the kernels read little-endian fields through byte-vector reinterpretation
    if cfg!(target_endian = "big") {
        return;
    }
    k.set_vec_dot(F32, dot_f32);
    k.set_vec_dot(F16, dot_f16);
    k.set_vec_dot(BF16, dot_bf16);
    if f.has(super::Feature::Dotprod) {
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
        k.set_vec_dot(MXFP4, dot_mxfp4_sdot);
        k.set_vec_dot(IQ4_NL, dot_iq4_nl_sdot);
        k.set_vec_dot(IQ4_XS, dot_iq4_xs_sdot);
        // the interleaved kernels are SDOT only: without dotprod, `QMatrix::can_interleave`
        // sees no `gemv_x8` and the weights keep the row layout
        k.set_gemv_x8(Q4_0, gemv_q4_0);
        k.set_gemv_x8(Q5_0, gemv_q5_0);
        k.set_gemv_x8(Q8_0, gemv_q8_0);
        k.set_gemv_x8(Q4_K, gemv_q4_k);
        k.set_gemv_x8(Q6_K, gemv_q6_k);
        k.set_gemm_x8(Q4_0, gemm_q4_0);
        k.set_gemm_x8(Q5_0, gemm_q5_0);
        k.set_gemm_x8(Q8_0, gemm_q8_0);
        k.set_gemm_x8(Q4_K, gemm_q4_k);
        k.set_gemm_x8(Q6_K, gemm_q6_k);
        k.set_gemv_x8(Q5_K, gemv_q5_k);
        k.set_gemm_x8(Q5_K, gemm_q5_k);
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
        k.set_vec_dot(MXFP4, dot_mxfp4);
        k.set_vec_dot(IQ4_NL, dot_iq4_nl);
        k.set_vec_dot(IQ4_XS, dot_iq4_xs);
    }
}
