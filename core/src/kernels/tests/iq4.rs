//! IQ4_NL's and IQ4_XS's kernels bit for bit. IQ4_NL: on x86 against llama.cpp's AVX2
//! arithmetic (emulated here in scalar code, as `tests::mxfp4` does for MXFP4: two
//! accumulators of 8 lanes, FMAs, its horizontal sum, a last odd block added with one FMA), on
//! NEON and simd128 against the scalar oracle. IQ4_XS: the oracle's bits on every ISA (also
//! asserted by `parity`, which checks every Q8_K format that way).

use alloc::vec::Vec;

use super::*;
use crate::quant::iq4::nl::{self, BlockIq4Nl};
use crate::quant::iq4::unpack32;
use crate::quant::legacy::{blocks, BlockQ8_0};

/// llama.cpp's AVX2 `ggml_vec_dot_iq4_nl_q8_0`, one lane at a time.
fn ggml_avx2(w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<BlockIq4Nl>(w), blocks::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    let mut acc = [[0.0f32; 8]; 2];
    let mut i = 0;
    while i + 1 < nb {
        for (j, acc) in acc.iter_mut().enumerate() {
            let (x, y) = (&xs[i + j], &ys[i + j]);
            let (q, d) = (unpack32(&x.qs), nl::scale(x, y));
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
        let (d, p) = (nl::scale(&xs[i], &ys[i]), nl::isum(&xs[i], &ys[i]));
        sum = libm::fmaf(d, p as f32, sum);
    }
    sum
}

fn oracle(ty: GgmlType) -> impl Fn(&[u8], &[u8]) -> f32 {
    let f = quant::vec_dot_ref(ty).unwrap();
    move |w, a| f(0, w, a)
}

/// Rows of every kind: quantized from each fill, and raw bytes.
fn rows(rng: &mut Rng, ty: GgmlType, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let scalar = Kernels::scalar();
    let at = quant::vec_dot_type(ty).unwrap();
    let mut out = Vec::new();
    for fill in [
        Fill::Normal,
        Fill::Zero,
        Fill::Huge,
        Fill::Tiny,
        Fill::Outlier,
    ] {
        let w = quantized(&scalar, ty, &values(rng, n, fill));
        let a = quantized(&scalar, at, &values(rng, n, Fill::Normal));
        out.push((w, a));
    }
    for _ in 0..4 {
        out.push((raw_row(rng, ty, n), raw_row(rng, at, n)));
    }
    out
}

fn check_bits(isa: Isa, ty: GgmlType, want: impl Fn(&[u8], &[u8]) -> f32) {
    let Some(k) = table_or_skip(isa) else { return };
    let dot = k.vec_dot(ty).unwrap();
    let mut rng = Rng::new(0x1a4_0000 + isa as u64 + ty.id() as u64);
    for nb in BLOCK_COUNTS {
        let n = ty.block_len() * nb;
        for (case, (w, a)) in rows(&mut rng, ty, n).iter().enumerate() {
            let (got, want) = (dot(n, w, a), want(w, a));
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{} {ty} case {case} n={n}: got {got}, want {want}",
                isa.name()
            );
        }
    }
}

#[test]
fn the_emulation_is_close_to_the_oracle() {
    // the emulation itself must be a dot product within the parity tolerance of the oracle,
    // and its order must show (else the x86 tests could not tell it from the oracle's)
    let mut rng = Rng::new(0x1a4);
    let mut differ = 0;
    for nb in BLOCK_COUNTS {
        let n = 32 * nb;
        for (w, a) in rows(&mut rng, GgmlType::IQ4_NL, n) {
            let (e, o) = (ggml_avx2(&w, &a), nl::vec_dot_iq4_nl_q8_0(n, &w, &a));
            let tol = 2e-5 * magnitude(GgmlType::IQ4_NL, &w, GgmlType::Q8_0, &a, n) + 1e-30;
            assert!(((e - o) as f64).abs() <= tol, "n={n}: {e} vs {o}");
            differ += (e.to_bits() != o.to_bits()) as usize;
        }
    }
    assert!(differ > 0, "the emulated AVX2 order never changed a result");
}

#[test]
fn iq4_nl_avx2_is_llama_cpp_bit_for_bit() {
    check_bits(Isa::Avx2, GgmlType::IQ4_NL, ggml_avx2);
}

#[test]
fn iq4_nl_avx512_is_llama_cpp_bit_for_bit() {
    check_bits(Isa::Avx512, GgmlType::IQ4_NL, ggml_avx2);
}

#[test]
fn iq4_nl_neon_and_simd128_are_the_oracle_bit_for_bit() {
    check_bits(Isa::Neon, GgmlType::IQ4_NL, oracle(GgmlType::IQ4_NL));
    check_bits(Isa::Simd128, GgmlType::IQ4_NL, oracle(GgmlType::IQ4_NL));
}

#[test]
fn iq4_xs_is_the_oracle_bit_for_bit_on_every_isa() {
    for isa in [
        Isa::Avx2,
        Isa::AvxVnni,
        Isa::Avx512,
        Isa::Neon,
        Isa::Simd128,
    ] {
        check_bits(isa, GgmlType::IQ4_XS, oracle(GgmlType::IQ4_XS));
    }
}
