//! WebAssembly kernels: SIMD128 (fixed-width 128-bit SIMD, standard in every current engine).
//!
//! wasm has no runtime feature detection: a module either was built with `simd128` or was
//! not, and an engine without it rejects the whole module. The browser package keeps the
//! weights in ggml's row layout (no repack: the file's bytes are the weights), so the kernels
//! are row kernels: Q4_0, Q5_0, Q8_0, Q4_K and Q6_K have kernels of several rows and tokens
//! per call (`legacy.rs`, `kquants.rs`, over `common.rs`'s driver: four rows share one
//! prepared activation in a decode step, four tokens share each weight block in a prompt), the
//! other formats one-row kernels (`simd128.rs`); the relaxed-simd build also has a vector
//! SiLU-gated activation (`math.rs`). The multi-row kernels are compiled only when
//! the whole build has simd128 (`-C target-feature=+simd128`, as the package is built): they
//! are made of many small always-inlined functions. The one-row kernels are `unsafe fn`s
//! compiled with `#[target_feature]`; the table holds safe wrappers, and [`fill_simd128`]
//! that installs them is `unsafe` with one contract: only call it when the features report
//! simd128 (checked by `CpuFeatures::available`).

#[cfg(target_feature = "simd128")]
mod common;
#[cfg(target_feature = "simd128")]
mod flash;
#[cfg(target_feature = "simd128")]
mod kquants;
#[cfg(target_feature = "simd128")]
mod legacy;
#[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
mod math;
#[cfg(all(target_feature = "simd128", target_feature = "relaxed-simd"))]
mod relaxed;
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
    dot_f32, dot_f16, dot_bf16, dot_q4_1, dot_q5_1, dot_q2_k, dot_q3_k, dot_q5_k, dot_mxfp4,
    dot_iq4_nl, dot_iq4_xs,
);

/// Safe [`crate::quant::VecDotRowsFn`]s over `common::drive` with a row kernel family, and
/// the one-row [`crate::quant::VecDotFn`] each gives (the same kernels on one row and token).
#[cfg(target_feature = "simd128")]
macro_rules! row_kernels {
    ($($rows:ident, $dot:ident: $kernel:ty, $reference:path;)*) => {
        $(
            fn $rows(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]) {
                // SAFETY: compiled only into builds with simd128 (the engine runs them all).
                unsafe { common::drive::<$kernel>(cols, w, a, n, out, $reference) }
            }

            fn $dot(cols: usize, w: &[u8], a: &[u8]) -> f32 {
                let mut out = [0.0];
                $rows(cols, w, a, 1, &mut out);
                out[0]
            }
        )*
    };
}

#[cfg(target_feature = "simd128")]
row_kernels!(
    rows_q4_0, dot_q4_0: legacy::Rows<legacy::Q4_0>, crate::quant::legacy::vec_dot_q4_0_q8_0;
    rows_q5_0, dot_q5_0: legacy::Rows<legacy::Q5_0>, crate::quant::legacy::vec_dot_q5_0_q8_0;
    rows_q8_0, dot_q8_0: legacy::Rows<legacy::Q8_0>, crate::quant::legacy::vec_dot_q8_0_q8_0;
    rows_q4_k, dot_q4_k: kquants::Rows<kquants::Q4K>, no_reference;
    rows_q6_k, dot_q6_k: kquants::Rows<kquants::Q6K>, no_reference;
);

/// The k-quant row kernels convert their f16 scales exactly (infinities and NaNs included):
/// they never hand a row back to the scalar oracle.
#[cfg(target_feature = "simd128")]
fn no_reference(_: usize, _: &[u8], _: &[u8]) -> f32 {
    unreachable!("the k-quant row kernels have no special scales to redo")
}

/// # Safety
/// The engine must support simd128.
pub(super) unsafe fn fill_simd128(k: &mut Kernels, _f: &CpuFeatures) {
    use GgmlType::*;
    k.set_vec_dot(F32, dot_f32);
    k.set_vec_dot(F16, dot_f16);
    k.set_vec_dot(BF16, dot_bf16);
    k.set_vec_dot(Q4_1, dot_q4_1);
    k.set_vec_dot(Q5_1, dot_q5_1);
    k.set_vec_dot(Q2_K, dot_q2_k);
    k.set_vec_dot(Q3_K, dot_q3_k);
    k.set_vec_dot(Q5_K, dot_q5_k);
    k.set_vec_dot(MXFP4, dot_mxfp4);
    k.set_vec_dot(IQ4_NL, dot_iq4_nl);
    k.set_vec_dot(IQ4_XS, dot_iq4_xs);
    #[cfg(target_feature = "simd128")]
    {
        let rows: [(GgmlType, crate::quant::VecDotFn, crate::quant::VecDotRowsFn); 5] = [
            (Q4_0, dot_q4_0, rows_q4_0),
            (Q5_0, dot_q5_0, rows_q5_0),
            (Q8_0, dot_q8_0, rows_q8_0),
            (Q4_K, dot_q4_k, rows_q4_k),
            (Q6_K, dot_q6_k, rows_q6_k),
        ];
        for (ty, dot, rows) in rows {
            k.set_vec_dot(ty, dot);
            k.set_vec_dot_rows(ty, rows);
        }
        k.set_flash(flash::flash_simd128);
        #[cfg(target_feature = "relaxed-simd")]
        k.set_swiglu(math::swiglu);
        k.set_f16_ops(super::F16Ops {
            to_f32: flash::f16_to_f32_row,
            from_f32: super::generic::f16::from_f32,
        });
    }
}
