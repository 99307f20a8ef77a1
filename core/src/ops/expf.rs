//! `e^x` in f32 as glibc computes it (`expf` since glibc 2.27, the ARM optimized-routines
//! algorithm; musl and LLVM's libc share it), so that an op ggml-cpu evaluates with the C
//! library's scalar `expf` (`ggml_swiglu_oai`) gives the same bits here. The `libm` crate's
//! `expf` is FreeBSD's, a different algorithm: about one result in thirty differs by an ulp.
//!
//! `x·32/ln2 = k + r` (k rounded to nearest by adding 1.5·2^52), `e^x = 2^(k/32) · 2^(r/32)`:
//! the first factor from a table of 2^(i/32) with `k / 32` added to its exponent, the second
//! a degree-3 polynomial, all in f64, rounded once to f32. The table holds the nearest f64
//! to 2^(i/32) less `i << 47` (computed for this file at 60 digits). Over all 2^32 inputs it
//! gives glibc 2.36's bits on an x86-64 with FMA but for two (x ≈ 32.56 and x ≈ -63.1,
//! one ulp each): glibc picks a build of the same code there whose polynomial is fused.

/// 2^(i/32) as f64 bits, less `i << 47` (so that adding `k << 47` puts `k / 32` in the
/// exponent).
const TABLE: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

const N: f64 = 32.0;
/// 32 / ln 2.
const INV_LN2_N: f64 = f64::from_bits(0x3ff71547652b82fe) * N;
/// 1.5·2^52: adding it rounds to an integer (ties to even).
const SHIFT: f64 = f64::from_bits(0x4338000000000000);
/// The polynomial of 2^(r/32) − 1 in r, highest degree first.
const C: [f64; 3] = [
    f64::from_bits(0x3fac6af84b912394) / (N * N * N),
    f64::from_bits(0x3fcebfce50fac4f3) / (N * N),
    f64::from_bits(0x3fe62e42ff0c52d6) / N,
];

/// `e^x` rounded as glibc's `expf` rounds it: ∞ above ln(2^128), 0 below ln(2^-150), NaN
/// for NaN.
pub fn expf(x: f32) -> f32 {
    let abstop = (x.to_bits() >> 20) & 0x7ff;
    if abstop >= 88.0f32.to_bits() >> 20 {
        // |x| >= 88, or NaN
        if x == f32::NEG_INFINITY {
            return 0.0;
        }
        if abstop >= f32::INFINITY.to_bits() >> 20 {
            return x + x;
        }
        if x > f32::from_bits(0x42b17217) {
            return f32::INFINITY;
        }
        if x < -f32::from_bits(0x42cff1b4) {
            return 0.0;
        }
    }
    let z = INV_LN2_N * x as f64;
    let kd = z + SHIFT;
    let ki = kd.to_bits();
    let kd = kd - SHIFT;
    let r = z - kd;
    let t = TABLE[(ki % 32) as usize].wrapping_add(ki << 47);
    let s = f64::from_bits(t);
    let z = C[0] * r + C[1];
    let r2 = r * r;
    let y = C[2] * r + 1.0;
    let y = z * r2 + y;
    (y * s) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the C library's `expf` (glibc's on x86-64 Linux, where `f32::exp` calls it)
    /// over every 61st f32 from below the underflow to past the overflow, the limits and
    /// special values included.
    #[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
    #[test]
    fn matches_glibc_expf() {
        let mut mismatches = 0usize;
        let mut tested = 0usize;
        let check = |x: f32, mismatches: &mut usize| {
            let (got, want) = (expf(x), std::hint::black_box(x).exp());
            if got.to_bits() != want.to_bits() && !(got.is_nan() && want.is_nan()) {
                *mismatches += 1;
            }
        };
        // positive: 0 .. 89; negative: -0 .. -104
        for (lo, hi) in [
            (0u32, 89.0f32.to_bits()),
            (0x8000_0000, (-104.0f32).to_bits()),
        ] {
            let mut b = lo;
            while b <= hi {
                check(f32::from_bits(b), &mut mismatches);
                tested += 1;
                b += 61;
            }
        }
        for x in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            88.72283,
            88.72284,
            -103.97207,
            -103.97208,
            -87.33655,
            f32::MIN_POSITIVE,
            -0.0,
            1.0,
        ] {
            check(x, &mut mismatches);
        }
        assert_eq!(
            mismatches, 0,
            "{mismatches} of {tested} differ from glibc's expf"
        );
        assert_eq!(expf(0.0), 1.0);
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert!(expf(f32::NAN).is_nan());
    }

    /// Everywhere: within half an ulp and a little of e^x in f64.
    #[test]
    fn is_close_to_exp() {
        let mut x = -103.0f32;
        while x < 88.5 {
            let (got, want) = (expf(x) as f64, libm::exp(x as f64));
            let ulp = f32::from_bits((want as f32).to_bits() + 1) as f64 - (want as f32) as f64;
            assert!(
                (got - want).abs() <= 0.51 * ulp.max(f64::from(f32::from_bits(1))),
                "{x}"
            );
            x += 0.0173;
        }
    }
}
