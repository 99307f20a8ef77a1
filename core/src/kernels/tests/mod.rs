//! Parity of every ISA's kernels with the scalar oracle, on random and edge-case rows.
//!
//! Each ISA has its own test; on a CPU (or target) that cannot run it, the test prints
//! `SKIPPED` with the reason instead of passing silently on scalar code, or fails when
//! `SUPERINFER_REQUIRE_ISAS` names the ISA (CI: see [`required`]).

use alloc::vec;
use alloc::vec::Vec;
use std::eprintln;

use super::*;
use crate::quant::{self, GgmlType};
use crate::sampler::rng::Rng;

mod interleaved;
mod iq4;
mod mxfp4;
mod rows;

/// The CPU features of the machine running the tests.
pub(crate) fn host_features() -> CpuFeatures {
    CpuFeatures::detect()
}

/// Whether `SUPERINFER_REQUIRE_ISAS` (a comma list of ISA or feature names, e.g.
/// `avx2,avx512` or `neon,dotprod`: what CI's machine must have) names `name`: a test of it
/// then fails where it would say SKIPPED.
pub(crate) fn required(name: &str) -> bool {
    std::env::var("SUPERINFER_REQUIRE_ISAS")
        .is_ok_and(|list| list.split(',').any(|n| n.trim() == name))
}

/// The table for `isa` on this host, or `None` (after printing why) when it cannot run here;
/// a panic instead when `SUPERINFER_REQUIRE_ISAS` requires it.
pub(crate) fn table_or_skip(isa: Isa) -> Option<Kernels> {
    match select(&host_features(), Some(isa)) {
        Ok(k) => Some(k),
        Err(e) if required(isa.name()) => {
            panic!("SUPERINFER_REQUIRE_ISAS requires {}: {e}", isa.name())
        }
        Err(e) => {
            eprintln!("SKIPPED {} kernel parity: {e}", isa.name());
            None
        }
    }
}

/// Weight formats every ISA's table must cover.
pub(crate) const WEIGHT_TYPES: [GgmlType; 16] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::MXFP4,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// Row shapes: `(values, kind)` where kind picks the value distribution.
#[derive(Clone, Copy, Debug)]
enum Fill {
    Normal,
    Zero,
    /// Magnitudes near the top of f16's range, so scales are extreme.
    Huge,
    /// Tiny magnitudes (subnormal f16 scales).
    Tiny,
    /// One large outlier in otherwise small values.
    Outlier,
}

fn values(rng: &mut Rng, n: usize, fill: Fill) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let g = ((rng.next_f64() as f32) - 0.5) * 2.0;
            match fill {
                Fill::Normal => g,
                Fill::Zero => 0.0,
                Fill::Huge => g * 4.0e3,
                Fill::Tiny => g * 1.0e-6,
                Fill::Outlier => {
                    if i % 97 == 5 {
                        50.0
                    } else {
                        g * 0.01
                    }
                }
            }
        })
        .collect()
}

fn quantized(k: &Kernels, ty: GgmlType, x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; ty.bytes_for(x.len() as u64).unwrap() as usize];
    (k.quantize_row(ty).unwrap())(x, &mut out);
    out
}

/// Random bytes with every f16 scale field made finite: exercises quant patterns the
/// quantizers never produce (e.g. Q8_K activations at -128, all scale bits set).
fn raw_row(rng: &mut Rng, ty: GgmlType, n: usize) -> Vec<u8> {
    let mut b: Vec<u8> = (0..ty.bytes_for(n as u64).unwrap())
        .map(|_| (rng.next_u64() >> 56) as u8)
        .collect();
    let bs = ty.block_bytes();
    let scale_fields: &[usize] = match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::IQ4_NL | GgmlType::IQ4_XS => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q8_1 => &[0, 2],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        // float rows: regenerate as finite values below
        _ => &[],
    };
    for blk in b.chunks_exact_mut(bs) {
        for &o in scale_fields {
            let v = half::f16::from_f32(((rng.next_f64() as f32) - 0.5) * 0.02);
            blk[o..o + 2].copy_from_slice(&v.to_le_bytes());
        }
        if ty == GgmlType::MXFP4 {
            // an E8M0 exponent giving scales 2^-28 .. 2^3 (with the doubled E2M1 values and
            // an f16 activation scale, far from f32's limits)
            blk[0] = 100 + (rng.next_u64() % 32) as u8;
        }
    }
    // int8 activations never hold -128 (the quantizers clamp to [-127, 127]); the SIMD
    // sign tricks rely on it, as ggml's do
    let qs_range: Option<(usize, usize)> = match ty {
        GgmlType::Q8_0 => Some((2, 34)),
        GgmlType::Q8_1 => Some((4, 36)),
        GgmlType::Q8_K => Some((4, 260)),
        _ => None,
    };
    if let Some((lo, hi)) = qs_range {
        for blk in b.chunks_exact_mut(bs) {
            for q in &mut blk[lo..hi] {
                if *q == 0x80 {
                    *q = 0x81;
                }
            }
            if ty == GgmlType::Q8_K {
                q8_k_bsums(blk);
                let d = (rng.next_f64() as f32 - 0.5) * 0.02;
                blk[0..4].copy_from_slice(&d.to_le_bytes());
            }
        }
    }
    if matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
        let x = values(rng, n, Fill::Normal);
        b = quantized(&Kernels::scalar(), ty, &x);
    }
    b
}

/// A Q8_K block's bsums made the true group sums of its quants, as the quantizer writes them.
fn q8_k_bsums(blk: &mut [u8]) {
    for g in 0..16 {
        let s: i32 = blk[4 + 16 * g..4 + 16 * (g + 1)]
            .iter()
            .map(|&q| q as i8 as i32)
            .sum();
        blk[260 + 2 * g..262 + 2 * g].copy_from_slice(&(s as i16).to_le_bytes());
    }
}

/// Scale of the terms summed, for a tolerance relative to the accumulation's magnitude.
fn magnitude(ty: GgmlType, w: &[u8], at: GgmlType, a: &[u8], n: usize) -> f64 {
    let mut wf = vec![0.0f32; n];
    let mut af = vec![0.0f32; n];
    quant::dequantize_row(ty, w, &mut wf).unwrap();
    quant::dequantize_row(at, a, &mut af).unwrap();
    let mut m: f64 = wf
        .iter()
        .zip(&af)
        .map(|(x, y)| (*x as f64 * *y as f64).abs())
        .sum();
    // the Q4_1/Q5_1 min term and the k-quant mins enter as separate products
    m += wf.iter().map(|x| (*x as f64).abs()).sum::<f64>() * 1e-3;
    m
}

fn check(isa_k: &Kernels, ty: GgmlType, w: &[u8], a: &[u8], n: usize, what: &str) {
    let scalar = Kernels::scalar();
    let at = quant::vec_dot_type(ty).unwrap();
    let want = (scalar.vec_dot(ty).unwrap())(n, w, a);
    let got = (isa_k.vec_dot(ty).unwrap())(n, w, a);
    if at == GgmlType::Q8_K {
        // k-quant kernels reduce each super-block to exact integers and round like the
        // scalar oracle: the same bits on every ISA
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{} {ty} {what} n={n}: got {got}, scalar {want} (must be bit-identical)",
            isa_k.isa().name()
        );
        return;
    }
    let tol = 2e-5 * magnitude(ty, w, at, a, n) + 1e-30;
    assert!(
        ((got - want) as f64).abs() <= tol && got.is_finite() == want.is_finite(),
        "{} {ty} {what} n={n}: got {got}, scalar {want} (tol {tol:e})",
        isa_k.isa().name()
    );
}

/// Row lengths in blocks: single, odd, and long enough for every unrolled loop's tail.
const BLOCK_COUNTS: [usize; 8] = [1, 2, 3, 5, 8, 17, 40, 83];

pub(crate) fn parity(isa: Isa) {
    let Some(k) = table_or_skip(isa) else { return };
    assert_eq!(k.isa(), isa);
    let mut rng = Rng::new(0x5eed_0000 + isa as u64);
    for ty in WEIGHT_TYPES {
        let at = quant::vec_dot_type(ty).unwrap();
        let qk = ty.block_len().max(at.block_len());
        for nb in BLOCK_COUNTS {
            let n = qk * nb;
            for fill in [
                Fill::Normal,
                Fill::Zero,
                Fill::Huge,
                Fill::Tiny,
                Fill::Outlier,
            ] {
                let w = quantized(&Kernels::scalar(), ty, &values(&mut rng, n, fill));
                let x = values(
                    &mut rng,
                    n,
                    if matches!(fill, Fill::Zero) {
                        Fill::Normal
                    } else {
                        fill
                    },
                );
                // activations through the ISA's own quantizer must match the scalar bytes
                let a = quantized(&Kernels::scalar(), at, &x);
                assert_eq!(
                    quantized(&k, at, &x),
                    a,
                    "{} quantize_row {at} differs from scalar ({fill:?}, n={n})",
                    isa.name()
                );
                check(&k, ty, &w, &a, n, &alloc::format!("{fill:?}"));
            }
            for _ in 0..4 {
                let w = raw_row(&mut rng, ty, n);
                let a = if matches!(at, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
                    quantized(&Kernels::scalar(), at, &values(&mut rng, n, Fill::Normal))
                } else {
                    raw_row(&mut rng, at, n)
                };
                check(&k, ty, &w, &a, n, "raw bytes");
            }
        }
    }
}

#[test]
fn scalar_table_covers_every_weight_type() {
    let k = Kernels::scalar();
    for ty in WEIGHT_TYPES {
        assert!(k.vec_dot(ty).is_some(), "{ty}");
        assert!(
            k.quantize_row(quant::vec_dot_type(ty).unwrap()).is_some(),
            "{ty}"
        );
    }
}

#[test]
fn every_isa_table_covers_every_weight_type() {
    for isa in host_features().available() {
        let k = select(&host_features(), Some(isa)).unwrap();
        for ty in WEIGHT_TYPES {
            assert!(k.vec_dot(ty).is_some(), "{} {ty}", isa.name());
        }
    }
}

/// Detection claims only features of the target it runs on, and `available` lists an ISA
/// only with every feature its kernels are compiled for.
#[test]
fn detected_features_belong_to_this_target() {
    use Feature::*;
    let f = CpuFeatures::detect();
    let own: &[Feature] = if cfg!(target_arch = "x86_64") {
        &[
            Avx2, Fma, F16c, Avx512f, Avx512bw, Avx512vl, Avx512vnni, AvxVnni,
        ]
    } else if cfg!(target_arch = "aarch64") {
        &[Neon, Dotprod]
    } else if cfg!(target_arch = "wasm32") {
        &[Simd128]
    } else {
        &[]
    };
    for feature in Feature::ALL {
        assert!(
            !f.has(feature) || own.contains(&feature),
            "{} detected on another target",
            feature.name()
        );
    }
    let needs: &[(Isa, &[Feature])] = &[
        (Isa::Avx2, &[Avx2, Fma, F16c]),
        (Isa::AvxVnni, &[AvxVnni, Avx2, Fma, F16c]),
        (Isa::Avx512, &[Avx512f, Avx512bw, Avx512vl, Avx2, Fma, F16c]),
        (Isa::Neon, &[Neon]),
        (Isa::Simd128, &[Simd128]),
    ];
    for &(isa, features) in needs {
        if f.available().contains(&isa) {
            assert!(features.iter().all(|&x| f.has(x)), "{}", isa.name());
        }
    }
    assert_eq!(f.available().last(), Some(&Isa::Scalar));
}

#[test]
fn unavailable_isa_is_an_error() {
    let none = CpuFeatures::default();
    assert_eq!(none.available(), vec![Isa::Scalar]);
    for isa in Isa::ALL.into_iter().filter(|&i| i != Isa::Scalar) {
        assert!(select(&none, Some(isa)).is_err(), "{}", isa.name());
    }
}

#[test]
fn parity_avx2() {
    parity(Isa::Avx2);
}

#[test]
fn parity_avx_vnni() {
    parity(Isa::AvxVnni);
}

#[test]
fn parity_avx512() {
    parity(Isa::Avx512);
}

#[test]
fn parity_neon() {
    parity(Isa::Neon);
}

#[test]
fn parity_simd128() {
    parity(Isa::Simd128);
}

/// The AVX-512 kernels keep the AVX2 kernels' rounding order: same bits, every format.
#[test]
fn avx512_equals_avx2_bit_for_bit() {
    let (Some(k2), Some(k5)) = (table_or_skip(Isa::Avx2), table_or_skip(Isa::Avx512)) else {
        return;
    };
    let mut rng = Rng::new(77);
    for ty in WEIGHT_TYPES {
        let at = quant::vec_dot_type(ty).unwrap();
        let qk = ty.block_len().max(at.block_len());
        for nb in BLOCK_COUNTS {
            let n = qk * nb;
            for fill in [Fill::Normal, Fill::Huge, Fill::Outlier] {
                let w = quantized(&Kernels::scalar(), ty, &values(&mut rng, n, fill));
                let a = quantized(&Kernels::scalar(), at, &values(&mut rng, n, fill));
                let (x, y) = (
                    (k2.vec_dot(ty).unwrap())(n, &w, &a),
                    (k5.vec_dot(ty).unwrap())(n, &w, &a),
                );
                assert_eq!(
                    x.to_bits(),
                    y.to_bits(),
                    "{ty} {fill:?} n={n}: avx2 {x}, avx512 {y}"
                );
            }
        }
    }
}

/// Every activation quantizer of `isa` against the scalar one, bit for bit: random, zero,
/// extreme, tiny and outlier rows, ties for the largest magnitude of either sign, NaN and
/// infinities.
pub(crate) fn quantize_parity(isa: Isa) {
    let Some(k) = table_or_skip(isa) else { return };
    let scalar = Kernels::scalar();
    let mut rng = Rng::new(0x9_0000 + isa as u64);
    let mut checked = 0;
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        let (Some(got_q), Some(want_q)) = (k.quantize_row(ty), scalar.quantize_row(ty)) else {
            continue;
        };
        checked += 1;
        let n = 4 * 256;
        let fills = [
            Fill::Normal,
            Fill::Zero,
            Fill::Huge,
            Fill::Tiny,
            Fill::Outlier,
        ];
        let mut rows: Vec<Vec<f32>> = fills.iter().map(|&f| values(&mut rng, n, f)).collect();
        let mut ties = values(&mut rng, n, Fill::Normal);
        for (i, x) in ties.iter_mut().enumerate() {
            if i % 37 == 3 {
                *x = if i % 2 == 0 { 2.0 } else { -2.0 };
            }
        }
        rows.push(ties);
        let mut odd = values(&mut rng, n, Fill::Normal);
        odd[7] = f32::NAN;
        odd[300] = f32::INFINITY;
        odd[600] = f32::NEG_INFINITY;
        odd[900] = -0.0;
        rows.push(odd);
        for x in rows {
            let bytes = ty.bytes_for(n as u64).unwrap() as usize;
            let (mut got, mut want) = (vec![0u8; bytes], vec![0u8; bytes]);
            got_q(&x, &mut got);
            want_q(&x, &mut want);
            assert_eq!(
                got,
                want,
                "{} {ty} quantizer differs from scalar",
                isa.name()
            );
            if let (GgmlType::Q8_0, Some(fused)) = (ty, k.batch_q8_0()) {
                use crate::quant::interleaved;
                let nb = n / 32;
                let mut want = (vec![0i32; nb], vec![0i32; nb], vec![0f32; nb]);
                interleaved::block_sums(&got, &mut want.0);
                interleaved::q4_0_offsets(&want.0, &mut want.1);
                interleaved::block_scales(&got, &mut want.2);
                let mut bytes = vec![0u8; got.len()];
                let mut sums = (vec![0i32; nb], vec![0i32; nb], vec![0f32; nb]);
                fused(&x, &mut bytes, &mut sums.0, &mut sums.1, &mut sums.2);
                assert_eq!(bytes, got, "{} fused Q8_0 quants", isa.name());
                assert_eq!(sums.0, want.0, "{} fused Q8_0 block sums", isa.name());
                assert_eq!(sums.1, want.1, "{} fused Q8_0 offsets", isa.name());
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&sums.2), bits(&want.2), "{} fused scales", isa.name());
            }
        }
    }
    eprintln!("{}: {checked} activation quantizers checked", isa.name());
}

#[test]
fn quantize_parity_avx2() {
    quantize_parity(Isa::Avx2);
}

#[test]
fn quantize_parity_avx_vnni() {
    quantize_parity(Isa::AvxVnni);
}

#[test]
fn quantize_parity_avx512() {
    quantize_parity(Isa::Avx512);
}

/// The f16 row conversion against the scalar one, on lengths around every vector width and
/// every kind of half (normals, subnormals, infinities, NaN): bit for bit.
pub(crate) fn f16_ops_parity(isa: Isa) {
    use half::f16;
    let Some(k) = table_or_skip(isa) else { return };
    let (ops, refs) = (k.f16_ops(), crate::kernels::generic::f16::OPS);
    let mut rng = Rng::new(0xf16 + isa as u64);
    for n in [0usize, 1, 7, 8, 9, 31, 32, 33, 64, 100, 256] {
        let src: Vec<f16> = (0..n)
            .map(|_| f16::from_bits((rng.next_u64() >> 48) as u16))
            .collect();
        let (mut got, mut want) = (vec![0f32; n], vec![1f32; n]);
        (ops.to_f32)(&src, &mut got);
        (refs.to_f32)(&src, &mut want);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{} to_f32 n={n} [{i}]",
                isa.name()
            );
        }
        // f32 → f16: any bits (NaN, infinities, overflow, subnormal results), halves' exact
        // values and the ties between neighbouring halves (rounded to even)
        let specials = [
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::INFINITY,
            f32::NEG_INFINITY,
            65520.0,
            -1e-8,
            -0.0,
        ];
        let src: Vec<f32> = (0..n)
            .map(|i| match i % 3 {
                _ if i < specials.len() && n > 8 => specials[i],
                0 => f32::from_bits(rng.next_u64() as u32),
                1 => f16::from_bits((rng.next_u64() >> 48) as u16).to_f32(),
                _ => {
                    let h = f16::from_bits((rng.next_u64() >> 49) as u16);
                    let next = f16::from_bits(h.to_bits() + 1);
                    (h.to_f32() + next.to_f32()) / 2.0
                }
            })
            .collect();
        let (mut got, mut want) = (vec![f16::ZERO; n], vec![f16::ONE; n]);
        (ops.from_f32)(&src, &mut got);
        (refs.from_f32)(&src, &mut want);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{} from_f32 n={n} [{i}] of {:e}",
                isa.name(),
                src[i]
            );
        }
    }
}

#[test]
fn f16_ops_parity_avx2() {
    f16_ops_parity(Isa::Avx2);
}

#[test]
fn f16_ops_parity_simd128() {
    f16_ops_parity(Isa::Simd128);
}

#[test]
fn f16_ops_parity_avx_vnni() {
    f16_ops_parity(Isa::AvxVnni);
}

#[test]
fn f16_ops_parity_avx512() {
    f16_ops_parity(Isa::Avx512);
}

/// The ISA's SiLU-gated activation against the scalar one (libm `expf`).
pub(crate) fn swiglu_parity(isa: Isa) {
    let Some(k) = table_or_skip(isa) else { return };
    let mut rng = Rng::new(0x5111 + isa as u64);
    for n in [1usize, 7, 8, 9, 64, 100] {
        for range in [1.0f32, 12.0, 100.0, 1e-4] {
            let g: Vec<f32> = values(&mut rng, n, Fill::Normal)
                .iter()
                .map(|x| x * range)
                .collect();
            let u = values(&mut rng, n, Fill::Normal);
            let (mut got, mut want) = (g.clone(), g.clone());
            (k.swiglu())(&mut got, &u);
            crate::ops::activation::swiglu(&mut want, &u);
            for i in 0..n {
                let tol = 4.0 * f32::EPSILON * want[i].abs() + 1e-30;
                assert!(
                    (got[i] - want[i]).abs() <= tol,
                    "{} swiglu({}) * {}: {} vs {}",
                    isa.name(),
                    g[i],
                    u[i],
                    got[i],
                    want[i]
                );
            }
        }
    }
    // the ends of the range: silu(x) -> x and -> 0 without NaN
    let mut g = vec![-1e4f32, -100.0, -88.0, 88.0, 100.0, 1e4, 0.0, -0.0];
    (k.swiglu())(&mut g, &[1.0; 8]);
    assert!(g.iter().all(|v| v.is_finite()), "{g:?}");
    assert_eq!(&g[3..6], &[88.0, 100.0, 1e4]);
}

/// The ISA's GELU-gated activation against the scalar one: bit for bit, over normal inputs,
/// the ±10 bounds, f16 overflow, zeros and odd lengths.
pub(crate) fn geglu_parity(isa: Isa) {
    let Some(k) = table_or_skip(isa) else { return };
    let mut rng = Rng::new(0x6e1 + isa as u64);
    for n in [1usize, 7, 8, 9, 64, 100] {
        for range in [1.0f32, 4.0, 12.0, 1e5] {
            let mut g: Vec<f32> = values(&mut rng, n, Fill::Normal)
                .iter()
                .map(|x| x * range)
                .collect();
            let specials = [-10.0f32, 10.0, -9.999, 9.999, 0.0, -0.0, 65504.0, -7e4];
            for (x, s) in g.iter_mut().zip(specials) {
                *x = s;
            }
            let u = values(&mut rng, n, Fill::Normal);
            let (mut got, mut want) = (g.clone(), g.clone());
            (k.geglu())(&mut got, &u);
            crate::ops::activation::geglu(&mut want, &u);
            for i in 0..n {
                assert_eq!(
                    got[i].to_bits(),
                    want[i].to_bits(),
                    "{} geglu({}) * {}: {} vs {}",
                    isa.name(),
                    g[i],
                    u[i],
                    got[i],
                    want[i]
                );
            }
        }
    }
}

#[test]
fn geglu_parity_avx2() {
    geglu_parity(Isa::Avx2);
}

#[test]
fn swiglu_parity_avx2() {
    swiglu_parity(Isa::Avx2);
}

/// Every ISA's tile store writes what the scalar one writes: odd and even group counts,
/// destinations on and off cache lines and 32-byte boundaries, strides that are not
/// multiples of a line, and nothing outside each token's run.
#[test]
fn store_tile_parity() {
    let mut rng = Rng::new(0x5707e);
    for isa in host_features().available() {
        let k = table_or_skip(isa).expect("an available ISA has a table");
        for (groups, n, stride, offset) in [
            (1, 1, 8, 0),
            (2, 5, 16, 0),
            (3, 7, 40, 8),
            (4, 9, 36, 4),
            (5, 3, 64, 16),
            (6, 12, 56, 2),
            (2, 4, 16, 24),
        ] {
            let tile: Vec<[f32; 8]> = (0..groups * n)
                .map(|_| core::array::from_fn(|_| rng.next_f64() as f32 - 0.5))
                .collect();
            let len = (n - 1) * stride + groups * 8 + 32;
            let (mut want, mut got) = (
                vec![f32::NAN; len + 16 + offset],
                vec![f32::NAN; len + 16 + offset],
            );
            // each buffer's first 64-byte aligned float, then `offset` floats past it
            let skip = |v: &[f32]| (64 - v.as_ptr() as usize % 64) % 64 / 4 + offset;
            let (sw, sg) = (skip(&want), skip(&got));
            // SAFETY: each token's run of 8 · groups floats lies inside the buffer (16 spare
            // floats cover the alignment skip).
            unsafe {
                let store = crate::quant::interleaved::store_tile;
                store(&tile, n, want.as_mut_ptr().add(sw), stride);
                (k.store_tile())(&tile, n, got.as_mut_ptr().add(sg), stride);
            }
            let (want, got) = (&want[sw..sw + len], &got[sg..sg + len]);
            let same = want
                .iter()
                .zip(got)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{} store_tile: {groups} groups × {n} tokens, stride {stride}, offset {offset}",
                isa.name()
            );
            let written = want.iter().filter(|v| !v.is_nan()).count();
            assert_eq!(
                written,
                groups * n * 8,
                "the scalar store writes each value once"
            );
        }
    }
}
