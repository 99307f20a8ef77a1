//! x86_64 kernels: AVX2 (+FMA, F16C), AVX-VNNI (AVX2 with the VEX-encoded `vpdpbusd`) and
//! AVX-512 (F/BW/VL, VNNI where present).
//!
//! Every kernel is an `unsafe fn` compiled with `#[target_feature]`; the table holds safe
//! wrappers, and the `fill_*` functions that install them are `unsafe` with one contract:
//! only call them when the CPU has the features (checked by `CpuFeatures::available`).

mod avx2;
mod avx2_f16;
mod avx2_math;
mod avx2_quant;
mod avx2_x8;
mod avx2_x8_k;
mod avx2_x8_mxfp4;
mod avx2_x8_q5k;
mod avx512;
mod avx512_few;
mod avx512_few_pairs;
mod avx512_x8;
mod avx512_x8_k;
mod avx_vnni;
mod flash_simd;
mod iq4;
mod mxfp4;
mod store_tile;
mod table4;
mod vnni_gemv;
mod vnni_tiles;

/// The 256-bit VNNI kernels (`vnni_gemv`, `vnni_tiles`) compiled for AVX-512 VNNI with VL.
mod avx512_gemv {
    super::vnni_gemv::vnni_gemv!(
        "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c",
        _mm256_dpbusd_epi32
    );
}

/// See [`avx512_gemv`]: eight tokens a tile (AVX-512's 32 registers hold them).
mod avx512_tiles {
    super::vnni_tiles::vnni_tiles!(
        "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c",
        _mm256_dpbusd_epi32,
        avx512_gemv,
        8,
        [1, 2, 3, 4, 5, 6, 7, 8]
    );
}

/// The same kernels compiled for AVX-VNNI (the VEX-encoded `vpdpbusd`, sixteen registers:
/// four tokens a tile).
mod avx_vnni_gemv {
    super::vnni_gemv::vnni_gemv!("avxvnni,avx2,fma,f16c", _mm256_dpbusd_avx_epi32);
}

/// See [`avx_vnni_gemv`].
mod avx_vnni_tiles {
    super::vnni_tiles::vnni_tiles!(
        "avxvnni,avx2,fma,f16c",
        _mm256_dpbusd_avx_epi32,
        avx_vnni_gemv,
        4,
        [1, 2, 3, 4]
    );
}

use super::{CpuFeatures, Kernels};
use crate::quant::interleaved::{GemmX8Fn, GemvX8Fn};
use crate::quant::GgmlType;

/// Wraps `unsafe fn(usize, &[u8], &[u8]) -> f32` kernels in safe `fn`s of the same name.
macro_rules! safe_dots {
    ($module:ident: $($name:ident),* $(,)?) => {
        $(
            pub(super) fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
                // SAFETY: these wrappers are installed only by the `fill_*` of their ISA,
                // whose callers guarantee the CPU supports its target features.
                unsafe { $module::$name(n, w, a) }
            }
        )*
    };
}
pub(super) use safe_dots;

mod avx2_safe {
    use super::avx2;
    super::safe_dots!(
        avx2: dot_f32, dot_f16, dot_bf16, dot_q4_0, dot_q4_1, dot_q5_0, dot_q5_1, dot_q8_0,
        dot_q2_k, dot_q3_k, dot_q4_k, dot_q5_k, dot_q6_k
    );
}

mod iq4_safe {
    use super::iq4;
    super::safe_dots!(iq4: dot_iq4_nl_avx2, dot_iq4_nl_avx512, dot_iq4_xs_avx2, dot_iq4_xs_avx512);

    pub(super) fn rows_iq4_nl_avx2(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]) {
        // SAFETY: installed only by `fill_avx2` (see `safe_dots`).
        unsafe { iq4::rows_iq4_nl_avx2(cols, w, a, n, out) }
    }

    pub(super) fn rows_iq4_xs_avx2(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]) {
        // SAFETY: installed only by `fill_avx2` (see `safe_dots`).
        unsafe { iq4::rows_iq4_xs_avx2(cols, w, a, n, out) }
    }
}

mod mxfp4_safe {
    use super::mxfp4;
    super::safe_dots!(mxfp4: dot_mxfp4_avx2, dot_mxfp4_avx512);

    pub(super) fn rows_mxfp4_avx2(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]) {
        // SAFETY: installed only by `fill_avx2` (see `safe_dots`).
        unsafe { mxfp4::rows_mxfp4_avx2(cols, w, a, n, out) }
    }
}

/// Wraps `unsafe fn(usize, &[u8], &[u8], &[i32], &mut [f32])` interleaved kernels.
macro_rules! safe_gemvs {
    ($module:ident: $($name:ident),* $(,)?) => {
        $(
            pub(super) fn $name(n: usize, w: &[u8], a: &[u8], s: &[i32], out: &mut [f32]) {
                // SAFETY: installed only by the `fill_*` of their ISA (see `safe_dots`).
                unsafe { $module::$name(n, w, a, s, out) }
            }
        )*
    };
}

/// Wraps one-group batch kernels (`GemmX8Fn`'s signature for one group) as `GemmX8Fn`s,
/// which run them group after group.
macro_rules! safe_gemms {
    ($module:ident: $($name:ident),* $(,)?) => {
        $(
            pub(super) fn $name(
                n: usize,
                w: &[u8],
                acts: crate::quant::interleaved::BatchRows<'_>,
                out: &mut [[f32; crate::quant::interleaved::ROWS]],
            ) {
                let groups = out.len() / acts.len();
                let Some(group_bytes) = w.len().checked_div(groups) else { return };
                if group_bytes == 0 {
                    out.fill([0.0; crate::quant::interleaved::ROWS]);
                    return;
                }
                for (w, out) in w.chunks_exact(group_bytes).zip(out.chunks_exact_mut(acts.len())) {
                    // SAFETY: installed only by the `fill_*` of their ISA (see `safe_dots`).
                    unsafe { $module::$name(n, w, acts, out) }
                }
            }
        )*
    };
}

/// Wraps batch kernels that take any number of groups (`GemmX8Fn`'s signature).
macro_rules! safe_gemms_multi {
    ($module:ident: $($name:ident),* $(,)?) => {
        $(
            pub(super) fn $name(
                n: usize,
                w: &[u8],
                acts: crate::quant::interleaved::BatchRows<'_>,
                out: &mut [[f32; crate::quant::interleaved::ROWS]],
            ) {
                // SAFETY: installed only by the `fill_*` of their ISA (see `safe_dots`).
                unsafe { $module::$name(n, w, acts, out) }
            }
        )*
    };
}

mod avx2_x8_safe {
    use super::{avx2_x8, avx2_x8_k, avx2_x8_mxfp4, avx2_x8_q5k};
    safe_gemvs!(avx2_x8: gemv_q4_0, gemv_q5_0, gemv_q8_0);
    safe_gemvs!(avx2_x8_k: gemv_q4_k, gemv_q6_k);
    safe_gemvs!(avx2_x8_mxfp4: gemv_mxfp4);
    safe_gemvs!(avx2_x8_q5k: gemv_q5_k);
    safe_gemms!(avx2_x8_q5k: gemm_q5_k);
    safe_gemms!(avx2_x8: gemm_q4_0, gemm_q5_0, gemm_q8_0);
    safe_gemms!(avx2_x8_k: gemm_q4_k, gemm_q6_k);
    safe_gemms!(avx2_x8_mxfp4: gemm_mxfp4);
}

mod avx_vnni_safe {
    use super::{avx_vnni, avx_vnni_gemv, avx_vnni_tiles};
    safe_gemvs!(avx_vnni_gemv: gemv_q4_0, gemv_q5_0, gemv_q8_0, gemv_q4_k, gemv_q6_k);
    safe_gemms!(avx_vnni: gemm_q4_0, gemm_q5_0, gemm_q8_0);
    safe_gemms_multi!(avx_vnni_tiles: gemm_few_q4_k, gemm_few_q6_k);
}

mod avx512_safe {
    use super::{avx512, avx512_gemv, avx512_x8, avx512_x8_k};
    super::safe_dots!(avx512: dot_q4_0, dot_q5_0, dot_q8_0, dot_q4_k, dot_q6_k);
    safe_gemvs!(avx512_gemv: gemv_q4_0, gemv_q5_0, gemv_q8_0, gemv_q4_k, gemv_q6_k);
    safe_gemms_multi!(avx512_x8: gemm_q4_0, gemm_q5_0, gemm_q8_0);
    safe_gemms_multi!(avx512_x8_k: gemm_q4_k, gemm_q5_k, gemm_q6_k);
}

/// # Safety
/// The CPU must support AVX2, FMA and F16C.
pub(super) unsafe fn fill_avx2(k: &mut Kernels, _f: &CpuFeatures) {
    k.set_f16_ops(super::F16Ops {
        to_f32: |src, dst| {
            // SAFETY: installed only here, where the caller guarantees AVX2, FMA and F16C.
            unsafe { avx2_f16::to_f32(src, dst) }
        },
        from_f32: |src, dst| {
            // SAFETY: as above.
            unsafe { avx2_f16::from_f32(src, dst) }
        },
    });
    k.set_flash(|ops, t, s| {
        // SAFETY: installed only here, where the caller guarantees AVX2, FMA and F16C.
        unsafe { flash_simd::flash_avx2(ops, t, s) }
    });
    k.set_store_tile(|tile, n, dst, stride| {
        // SAFETY: the caller keeps `StoreTileFn`'s contract; installed only here, where the
        // caller guarantees AVX2.
        unsafe { store_tile::store_tile_avx2(tile, n, dst, stride) }
    });
    k.set_swiglu(|g, u| {
        // SAFETY: installed only here, where the caller guarantees AVX2 and FMA.
        unsafe { avx2_math::swiglu(g, u) }
    });
    k.set_geglu(|g, u| {
        // SAFETY: installed only here, where the caller guarantees AVX2, FMA and F16C.
        unsafe { avx2_math::geglu(g, u) }
    });
    k.set_quantize_row(GgmlType::Q8_0, |x, q| {
        // SAFETY: installed only here, where the caller guarantees AVX2, FMA and F16C.
        unsafe { avx2_quant::quantize_q8_0(x, q) }
    });
    k.set_batch_q8_0(|x, q, sums, offsets, scales| {
        // SAFETY: as above.
        unsafe { avx2_quant::quantize_q8_0_batch(x, q, sums, offsets, scales) }
    });
    k.set_quantize_row(GgmlType::Q8_K, |x, q| {
        // SAFETY: as above.
        unsafe { avx2_quant::quantize_q8_k(x, q) }
    });
    use avx2_safe::*;
    k.set_vec_dot(GgmlType::F32, dot_f32);
    k.set_vec_dot(GgmlType::F16, dot_f16);
    k.set_vec_dot(GgmlType::BF16, dot_bf16);
    k.set_vec_dot(GgmlType::Q4_0, dot_q4_0);
    k.set_vec_dot(GgmlType::Q4_1, dot_q4_1);
    k.set_vec_dot(GgmlType::Q5_0, dot_q5_0);
    k.set_vec_dot(GgmlType::Q5_1, dot_q5_1);
    k.set_vec_dot(GgmlType::Q8_0, dot_q8_0);
    k.set_vec_dot(GgmlType::Q2_K, dot_q2_k);
    k.set_vec_dot(GgmlType::Q3_K, dot_q3_k);
    k.set_vec_dot(GgmlType::Q4_K, dot_q4_k);
    k.set_vec_dot(GgmlType::Q5_K, dot_q5_k);
    k.set_vec_dot(GgmlType::Q6_K, dot_q6_k);
    k.set_vec_dot(GgmlType::MXFP4, mxfp4_safe::dot_mxfp4_avx2);
    k.set_vec_dot_rows(GgmlType::MXFP4, mxfp4_safe::rows_mxfp4_avx2);
    k.set_vec_dot(GgmlType::IQ4_NL, iq4_safe::dot_iq4_nl_avx2);
    k.set_vec_dot(GgmlType::IQ4_XS, iq4_safe::dot_iq4_xs_avx2);
    k.set_vec_dot_rows(GgmlType::IQ4_NL, iq4_safe::rows_iq4_nl_avx2);
    k.set_vec_dot_rows(GgmlType::IQ4_XS, iq4_safe::rows_iq4_xs_avx2);
    k.set_gemv_x8(GgmlType::Q4_0, avx2_x8_safe::gemv_q4_0);
    k.set_gemv_x8(GgmlType::Q5_0, avx2_x8_safe::gemv_q5_0);
    k.set_gemv_x8(GgmlType::Q8_0, avx2_x8_safe::gemv_q8_0);
    k.set_gemv_x8(GgmlType::Q4_K, avx2_x8_safe::gemv_q4_k);
    k.set_gemv_x8(GgmlType::Q6_K, avx2_x8_safe::gemv_q6_k);
    k.set_gemm_x8(GgmlType::Q4_0, avx2_x8_safe::gemm_q4_0);
    k.set_gemm_x8(GgmlType::Q5_0, avx2_x8_safe::gemm_q5_0);
    k.set_gemm_x8(GgmlType::Q8_0, avx2_x8_safe::gemm_q8_0);
    k.set_gemm_x8(GgmlType::Q4_K, avx2_x8_safe::gemm_q4_k);
    k.set_gemm_x8(GgmlType::Q6_K, avx2_x8_safe::gemm_q6_k);
    k.set_gemv_x8(GgmlType::Q5_K, avx2_x8_safe::gemv_q5_k);
    k.set_gemm_x8(GgmlType::Q5_K, avx2_x8_safe::gemm_q5_k);
    k.set_gemv_x8(GgmlType::MXFP4, avx2_x8_safe::gemv_mxfp4);
    k.set_gemm_x8(GgmlType::MXFP4, avx2_x8_safe::gemm_mxfp4);
}

/// The AVX2 table with the interleaved kernels (matrix × vector and batch) on AVX-VNNI's
/// `vpdpbusd`; the row dot products and everything else stay AVX2's.
///
/// # Safety
/// The CPU must support AVX-VNNI, AVX2, FMA and F16C.
pub(super) unsafe fn fill_avx_vnni(k: &mut Kernels, f: &CpuFeatures) {
    // SAFETY: AVX-VNNI comes here with the AVX2 set (checked by `available`).
    unsafe { fill_avx2(k, f) };
    use avx_vnni_safe::*;
    set_vnni_x8(
        k,
        [gemv_q4_0, gemv_q5_0, gemv_q8_0, gemv_q4_k, gemv_q6_k],
        [
            gemm_q4_0,
            gemm_q5_0,
            gemm_q8_0,
            gemm_few_q4_k,
            gemm_few_q6_k,
        ],
    );
    // Q6_K's VNNI tiles of 4 tokens only tied AVX2's of 4 (one thread, 128-512 tokens), and
    // AVX2's now run 8 (its i16 sums need fewer registers than `vpdpbusd`'s i32 pairs)
    k.set_gemm_x8(GgmlType::Q6_K, avx2_x8_safe::gemm_q6_k);
}

/// Installs the interleaved kernels of the formats with VNNI ones, Q4_0, Q5_0, Q8_0, Q4_K
/// and Q6_K in that order: matrix × vector `gemv`, batch `gemm`.
fn set_vnni_x8(k: &mut Kernels, gemv: [GemvX8Fn; 5], gemm: [GemmX8Fn; 5]) {
    use GgmlType::*;
    for ((ty, gemv), gemm) in [Q4_0, Q5_0, Q8_0, Q4_K, Q6_K]
        .into_iter()
        .zip(gemv)
        .zip(gemm)
    {
        k.set_gemv_x8(ty, gemv);
        k.set_gemm_x8(ty, gemm);
    }
}

/// # Safety
/// The CPU must support AVX-512 F, BW and VL, plus AVX2, FMA and F16C; VNNI kernels are
/// installed only when `f` has `Avx512vnni`, meaning the CPU has it.
pub(super) unsafe fn fill_avx512(k: &mut Kernels, f: &CpuFeatures) {
    // SAFETY: AVX-512 implies the AVX2 set here (checked by `available`).
    unsafe { fill_avx2(k, f) };
    k.set_store_tile(|tile, n, dst, stride| {
        // SAFETY: the caller keeps `StoreTileFn`'s contract; installed only here, where the
        // caller guarantees AVX-512 F with the AVX2 set.
        unsafe { store_tile::store_tile_avx512(tile, n, dst, stride) }
    });
    k.set_flash(|ops, t, s| {
        // SAFETY: installed only here, where the caller guarantees AVX-512 F/BW/VL with the
        // AVX2 set. A tile of at most eight rows (a decode step's heads of one KV head) fills
        // eight lanes: the AVX2 instance, bit-identical, does not carry eight empty ones.
        unsafe {
            if t.n_rows <= 8 {
                flash_simd::flash_avx2(ops, t, s)
            } else {
                flash_simd::flash_avx512(ops, t, s)
            }
        }
    });
    if f.has(super::Feature::Avx512vnni) {
        use avx512_safe::*;
        k.set_vec_dot(GgmlType::Q4_0, dot_q4_0);
        k.set_vec_dot(GgmlType::Q5_0, dot_q5_0);
        k.set_vec_dot(GgmlType::Q8_0, dot_q8_0);
        k.set_vec_dot(GgmlType::Q4_K, dot_q4_k);
        k.set_vec_dot(GgmlType::Q6_K, dot_q6_k);
        k.set_vec_dot(GgmlType::MXFP4, mxfp4_safe::dot_mxfp4_avx512);
        k.set_vec_dot(GgmlType::IQ4_NL, iq4_safe::dot_iq4_nl_avx512);
        k.set_vec_dot(GgmlType::IQ4_XS, iq4_safe::dot_iq4_xs_avx512);
        // as MXFP4's: the AVX2 kernels of several tokens are not measured against these
        k.clear_vec_dot_rows(GgmlType::IQ4_NL);
        k.clear_vec_dot_rows(GgmlType::IQ4_XS);
        // the AVX2 kernel of several tokens has not been measured against this one-row
        // kernel per token on an AVX-512 machine (and would run decode on AVX2 too)
        k.clear_vec_dot_rows(GgmlType::MXFP4);
        set_vnni_x8(
            k,
            [gemv_q4_0, gemv_q5_0, gemv_q8_0, gemv_q4_k, gemv_q6_k],
            [gemm_q4_0, gemm_q5_0, gemm_q8_0, gemm_q4_k, gemm_q6_k],
        );
        // Q5_K keeps the AVX2 matrix × vector kernel
        k.set_gemm_x8(GgmlType::Q5_K, gemm_q5_k);
        // MXFP4 keeps the AVX2 interleaved kernels (no AVX-512 variant yet; the `safe_gemms`
        // wrapper runs its one-group batch kernel over any number of groups)
        // quads of groups for the legacy formats (a pair of pairs for the k-quants)
        k.set_gemm_groups(4);
    }
}
