//! The vector exponential of the SIMD kernels, one lane at a time: the scalar reference of
//! `kernels::x86::avx2_math::exp_ps` (and of its 16-lane twin), the same operations in the
//! same order with the same roundings, so the portable flash tile computes what the SIMD
//! ones compute, bit for bit.

/// `e^x`, within 2 ulp for normal results: `x = n·ln2 + r` with `|r| <= ln2/2` (ln2 split in
/// two parts so `r` is exact), a degree-6 Taylor polynomial for `e^r` by fused multiply-adds,
/// and `2^n` put into the exponent bits (as two factors, both normal). Inputs are clamped to
/// [-87.3, 88.7] (a NaN becomes -87.3, as `maxps` makes it).
#[allow(clippy::manual_clamp)] // `clamp` keeps a NaN; `maxps` (and `max`) turn it into -87.3
pub fn exp_poly(x: f32) -> f32 {
    let x = x.max(-87.3).min(88.7);
    // round half to even, as `vroundps` with `_MM_FROUND_TO_NEAREST_INT`
    let n = libm::rintf(x * core::f32::consts::LOG2_E);
    let r = libm::fmaf(-n, 0.693_145_75, x);
    let r = libm::fmaf(-n, 1.428_606_8e-6, r);
    let mut p = 1.0f32 / 720.0;
    for c in [1.0f32 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = libm::fmaf(p, r, c);
    }
    // n in [-126, 128]: exact as an integer
    let ni = n as i32;
    let half = ni >> 1;
    let pow2 = |e: i32| f32::from_bits(((e + 127) << 23) as u32);
    p * pow2(half) * pow2(ni - half)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_poly_is_close_to_libm() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let (got, want) = (exp_poly(x) as f64, libm::exp(x as f64));
            worst = worst.max((got - want).abs() / want);
            x += 0.0137;
        }
        assert!(worst < 3e-7, "relative error {worst}");
        assert_eq!(exp_poly(0.0), 1.0);
        assert_eq!(exp_poly(f32::NAN), exp_poly(-87.3));
        assert_eq!(exp_poly(200.0), exp_poly(88.7));
    }
}
