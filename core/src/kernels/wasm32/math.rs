//! Elementwise math of the relaxed-simd build: the SiLU-gated activation on four lanes.
//!
//! `kernels::x86::avx2_math::swiglu` computes `g / (1 + exp(0 - g)) · u` with a vector `exp`
//! (`ops::exp::exp_poly`'s operations, fused multiply-adds); the scalar table calls
//! `libm::expf` per element (on wasm a call and some thirty scalar operations: with the
//! division, 5% of a Qwen2.5-0.5B decode step). Here the same operations run on four lanes,
//! the multiply-adds through `f32x4.relaxed_madd` (one `vfmadd` on every CPU with FMA, so the
//! AVX2 kernel's bits; two roundings on one without, still within the kernel tests'
//! tolerance of `libm::expf`). The plain simd128 build keeps the scalar activation (exact
//! fused multiply-adds in simd128 cost more than `expf`).

use core::arch::wasm32::*;

/// `x · y + z` per lane (fused where the CPU has FMA).
#[inline(always)]
fn madd(x: v128, y: v128, z: v128) -> v128 {
    f32x4_relaxed_madd(x, y, z)
}

/// `ops::exp::exp_poly` on four lanes, its multiply-adds by [`madd`].
#[inline(always)]
fn exp4(x: v128) -> v128 {
    let c = f32x4_splat;
    // pmax(c, x) is c for a NaN x, as `x.max(c)` and `maxps`
    let x = f32x4_pmin(f32x4_pmax(c(-87.3), x), c(88.7));
    let n = f32x4_nearest(f32x4_mul(x, c(core::f32::consts::LOG2_E)));
    let r = madd(f32x4_neg(n), c(0.693_145_75), x);
    let r = madd(f32x4_neg(n), c(1.428_606_8e-6), r);
    let mut p = c(1.0 / 720.0);
    for k in [1.0f32 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = madd(p, r, c(k));
    }
    // n in [-126, 128]: 2^n split as 2^(n/2)·2^(n - n/2) keeps both factors normal
    let ni = i32x4_trunc_sat_f32x4(n);
    let half = i32x4_shr(ni, 1);
    let pow2 = |e: v128| i32x4_shl(i32x4_add(e, i32x4_splat(127)), 23);
    f32x4_mul(f32x4_mul(p, pow2(half)), pow2(i32x4_sub(ni, half)))
}

/// `gate[i] = silu(gate[i]) · up[i]`, four at a time (the rest as the scalar table does).
pub(super) fn swiglu(gate: &mut [f32], up: &[f32]) {
    let n = gate.len().min(up.len());
    let one = f32x4_splat(1.0);
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: i + 4 <= n elements of both rows.
        unsafe {
            let p = gate.as_mut_ptr().add(i) as *mut v128;
            let g = v128_load(p);
            let e = exp4(f32x4_sub(f32x4_splat(0.0), g));
            let s = f32x4_div(g, f32x4_add(one, e));
            let u = v128_load(up.as_ptr().add(i) as *const v128);
            v128_store(p, f32x4_mul(s, u));
        }
        i += 4;
    }
    crate::ops::activation::swiglu(&mut gate[i..n], &up[i..n]);
}

#[cfg(test)]
mod tests {
    #[test]
    fn swiglu_parity_simd128() {
        crate::kernels::tests::swiglu_parity(crate::kernels::Isa::Simd128);
    }
}
