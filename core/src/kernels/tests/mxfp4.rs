//! MXFP4's kernels bit for bit: on x86 against llama.cpp's AVX2 arithmetic (emulated here in
//! scalar code: two accumulators of 8 lanes, FMAs, its horizontal sum, a last odd block added
//! with one FMA), on NEON and simd128 against the scalar oracle. The parity
//! test (`parity`) covers them all with the general tolerance; these pin the rounding.

use alloc::vec::Vec;

use super::*;
use crate::quant::legacy::{blocks, BlockQ8_0};
use crate::quant::mxfp4::{self, BlockMxfp4};

/// llama.cpp's AVX2 `ggml_vec_dot_mxfp4_q8_0`, one lane at a time.
fn ggml_avx2(w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<BlockMxfp4>(w), blocks::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    let mut acc = [[0.0f32; 8]; 2];
    let mut i = 0;
    while i + 1 < nb {
        for (j, acc) in acc.iter_mut().enumerate() {
            let (x, y) = (&xs[i + j], &ys[i + j]);
            let (q, d) = (mxfp4::unpack(x), mxfp4::scale(x, y));
            for (k, lane) in acc.iter_mut().enumerate() {
                let p: i32 = (4 * k..4 * k + 4)
                    .map(|e| q[e] as i32 * y.qs[e] as i32)
                    .sum();
                *lane = libm::fmaf(d, p as f32, *lane);
            }
        }
        i += 2;
    }
    let v: [f32; 8] = core::array::from_fn(|k| acc[0][k] + acc[1][k]);
    let s: [f32; 4] = core::array::from_fn(|k| v[k] + v[k + 4]);
    let mut sum = (s[0] + s[2]) + (s[1] + s[3]);
    if i < nb {
        // `sumf += d * sumi`, contracted to an FMA by the C compiler
        let (d, p) = (mxfp4::scale(&xs[i], &ys[i]), mxfp4::isum(&xs[i], &ys[i]));
        sum = libm::fmaf(d, p as f32, sum);
    }
    sum
}

/// Rows of every kind: quantized from each fill, and raw bytes (any code, any exponent in the
/// range `raw_row` gives).
fn rows(rng: &mut Rng, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let scalar = Kernels::scalar();
    let mut out = Vec::new();
    for fill in [
        Fill::Normal,
        Fill::Zero,
        Fill::Huge,
        Fill::Tiny,
        Fill::Outlier,
    ] {
        let w = quantized(&scalar, GgmlType::MXFP4, &values(rng, n, fill));
        let a = quantized(&scalar, GgmlType::Q8_0, &values(rng, n, Fill::Normal));
        out.push((w, a));
    }
    for _ in 0..4 {
        out.push((
            raw_row(rng, GgmlType::MXFP4, n),
            raw_row(rng, GgmlType::Q8_0, n),
        ));
    }
    out
}

fn check_bits(isa: Isa, want: fn(&[u8], &[u8]) -> f32) {
    let Some(k) = table_or_skip(isa) else { return };
    let dot = k.vec_dot(GgmlType::MXFP4).unwrap();
    let mut rng = Rng::new(0x3f_0000 + isa as u64);
    for nb in BLOCK_COUNTS {
        let n = 32 * nb;
        for (case, (w, a)) in rows(&mut rng, n).iter().enumerate() {
            let (got, want) = (dot(n, w, a), want(w, a));
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{} MXFP4 case {case} n={n}: got {got}, want {want}",
                isa.name()
            );
        }
    }
}

#[test]
fn the_emulation_is_close_to_the_oracle() {
    // the emulation itself must be a dot product: within the parity tolerance of the oracle,
    // and its order must show (else the x86 tests could not tell it from the oracle's)
    let mut rng = Rng::new(0x3f);
    let mut differ = 0;
    for nb in BLOCK_COUNTS {
        let n = 32 * nb;
        for (w, a) in rows(&mut rng, n) {
            let (e, o) = (ggml_avx2(&w, &a), mxfp4::vec_dot_mxfp4_q8_0(n, &w, &a));
            let tol = 2e-5 * magnitude(GgmlType::MXFP4, &w, GgmlType::Q8_0, &a, n) + 1e-30;
            assert!(((e - o) as f64).abs() <= tol, "n={n}: {e} vs {o}");
            differ += (e.to_bits() != o.to_bits()) as usize;
        }
    }
    assert!(differ > 0, "the emulated AVX2 order never changed a result");
}

#[test]
fn mxfp4_avx2_is_llama_cpp_bit_for_bit() {
    check_bits(Isa::Avx2, ggml_avx2);
}

#[test]
fn mxfp4_avx512_is_llama_cpp_bit_for_bit() {
    check_bits(Isa::Avx512, ggml_avx2);
}

#[test]
fn mxfp4_neon_is_the_oracle_bit_for_bit() {
    check_bits(Isa::Neon, |w, a| mxfp4::vec_dot_mxfp4_q8_0(0, w, a));
}

#[test]
fn mxfp4_simd128_is_the_oracle_bit_for_bit() {
    check_bits(Isa::Simd128, |w, a| mxfp4::vec_dot_mxfp4_q8_0(0, w, a));
}
