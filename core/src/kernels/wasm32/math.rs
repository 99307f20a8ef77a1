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

use super::common::exp_poly4;

/// `x · y + z` per lane (fused where the CPU has FMA).
#[inline(always)]
fn madd(x: v128, y: v128, z: v128) -> v128 {
    f32x4_relaxed_madd(x, y, z)
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
            let e = exp_poly4(f32x4_sub(f32x4_splat(0.0), g), madd);
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
