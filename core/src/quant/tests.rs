//! Format tests: dequantization against the `gguf` Python package's reference (vectors made
//! by scripts/gen-quant-vectors.py), round-trip error bounds, and dot products against
//! dequantized f64 arithmetic.

use alloc::vec;
use alloc::vec::Vec;

use super::*;

const VECTORS: &[u8] = include_bytes!("../../testdata/quant/vectors.bin");
/// IQ4_NL / IQ4_XS rows quantized by ggml itself (scripts/gen-iq4-quant-vectors.py).
const IQ4_QUANTIZED: &[u8] = include_bytes!("../../testdata/quant/iq4-quantize.bin");

struct Record<'a> {
    kind: u8,
    ty: GgmlType,
    n: usize,
    a: &'a [u8],
    b: &'a [u8],
}

fn records() -> Vec<Record<'static>> {
    records_of(VECTORS)
}

fn records_of(vectors: &'static [u8]) -> Vec<Record<'static>> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < vectors.len() {
        assert_eq!(&vectors[p..p + 2], b"QV");
        let kind = vectors[p + 2];
        let rd =
            |o: usize| u32::from_le_bytes(vectors[p + o..p + o + 4].try_into().unwrap()) as usize;
        let (ty, n, nb) = (GgmlType::from_id(rd(3) as u32).unwrap(), rd(7), rd(11));
        p += 15;
        let (la, lb) = if kind == 0 { (nb, 4 * n) } else { (4 * n, nb) };
        out.push(Record {
            kind,
            ty,
            n,
            a: &vectors[p..p + la],
            b: &vectors[p + la..p + la + lb],
        });
        p += la + lb;
    }
    out
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn dequantize_matches_gguf_py() {
    let mut seen = Vec::new();
    for r in records().iter().filter(|r| r.kind == 0) {
        let want = f32s(r.b);
        let mut got = vec![0.0f32; r.n];
        dequantize_row(r.ty, r.a, &mut got).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // numpy computes some formats in f32 with a different operation order; allow
            // one rounding step relative to the value's magnitude
            let tol = w.abs() * 2e-7 + 1e-30;
            assert!(
                (g - w).abs() <= tol || (g.is_nan() && w.is_nan()),
                "{} element {i}: ours {g} gguf-py {w}",
                r.ty
            );
        }
        seen.push(r.ty);
    }
    for ty in [
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
    ] {
        assert!(seen.contains(&ty), "no vectors for {ty}");
    }
}

#[test]
fn quantize_matches_gguf_py() {
    let mut n = 0;
    for r in records().iter().filter(|r| r.kind == 1) {
        let x = f32s(r.a);
        let mut got = vec![0u8; r.b.len()];
        quantize_row(r.ty, &x, &mut got).unwrap();
        let differ = got.iter().zip(r.b).filter(|(a, b)| a != b).count();
        // rounding ties (x.5 exactly) may go either way between numpy and C's roundf
        assert!(
            differ <= got.len() / 200,
            "{}: {differ} of {} bytes differ",
            r.ty,
            got.len()
        );
        n += 1;
    }
    assert!(n >= 5);
    assert!(
        records()
            .iter()
            .any(|r| r.kind == 1 && r.ty == GgmlType::MXFP4),
        "no MXFP4 quantization vectors"
    );
}

/// Our IQ4_NL / IQ4_XS quantizers write the bytes ggml's own `ggml_quantize_chunk` writes
/// (random, tiny, huge, outlier and all-zero rows).
#[test]
fn iq4_quantize_matches_ggml() {
    let mut seen = Vec::new();
    for r in records_of(IQ4_QUANTIZED) {
        assert_eq!(r.kind, 1);
        let x = f32s(r.a);
        let mut got = vec![0u8; r.b.len()];
        quantize_row(r.ty, &x, &mut got).unwrap();
        let differ = got.iter().zip(r.b).filter(|(a, b)| a != b).count();
        assert_eq!(
            differ,
            0,
            "{}: {differ} of {} bytes differ",
            r.ty,
            got.len()
        );
        seen.push(r.ty);
    }
    assert!(seen.contains(&GgmlType::IQ4_NL) && seen.contains(&GgmlType::IQ4_XS));
}

fn gaussian(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut u = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let (a, b) = (u(), u());
            (libm::sqrt(-2.0 * libm::log(a)) * libm::cos(2.0 * core::f64::consts::PI * b)) as f32
        })
        .collect()
}

fn round_trip(ty: GgmlType, x: &[f32]) -> Vec<f32> {
    let mut q = vec![0u8; ty.bytes_for(x.len() as u64).unwrap() as usize];
    quantize_row(ty, x, &mut q).unwrap();
    let mut y = vec![0.0; x.len()];
    dequantize_row(ty, &q, &mut y).unwrap();
    y
}

fn rel_rmse(x: &[f32], y: &[f32]) -> f64 {
    let err: f64 = x.iter().zip(y).map(|(a, b)| ((a - b) as f64).powi(2)).sum();
    let sig: f64 = x.iter().map(|a| (*a as f64).powi(2)).sum();
    libm::sqrt(err / sig)
}

#[test]
fn round_trip_error_bounds() {
    use GgmlType::*;
    // bounds on gaussian data, a little above what each format's bit budget achieves
    let cases = [
        (F32, 0.0),
        (F16, 0.001),
        (BF16, 0.005),
        (Q8_0, 0.01),
        (Q8_1, 0.01),
        (Q8_K, 0.01),
        (Q6_K, 0.05),
        (Q5_0, 0.06),
        (Q5_1, 0.06),
        (Q5_K, 0.06),
        (Q4_0, 0.12),
        (Q4_1, 0.12),
        (Q4_K, 0.12),
        (MXFP4, 0.14),
        (IQ4_NL, 0.11),
        (IQ4_XS, 0.11),
        (Q3_K, 0.25),
        (Q2_K, 0.45),
    ];
    for (ty, bound) in cases {
        for seed in 0..3 {
            let mut x = gaussian(4096, seed);
            if seed == 2 {
                // uneven magnitudes across blocks
                x.iter_mut()
                    .enumerate()
                    .for_each(|(i, v)| *v *= 1.0 + (i / 256) as f32 * 3.0);
            }
            let e = rel_rmse(&x, &round_trip(ty, &x));
            assert!(e <= bound, "{ty}: relative RMSE {e} > {bound}");
            if ty == F32 {
                assert_eq!(e, 0.0);
            }
        }
        // all-zero input stays zero
        assert!(
            round_trip(ty, &[0.0; 512]).iter().all(|&v| v == 0.0),
            "{ty} zero"
        );
    }
}

#[test]
fn vec_dot_matches_dequantized_arithmetic() {
    for ty in GgmlType::ALL {
        let (Some(dot), Some(act)) = (vec_dot_ref(ty), vec_dot_type(ty)) else {
            continue;
        };
        for (seed, n) in [(1u64, 256usize), (2, 512), (3, 2816)] {
            let w = gaussian(n, seed);
            let a = gaussian(n, seed + 100);
            let mut wq = vec![0u8; ty.bytes_for(n as u64).unwrap() as usize];
            quantize_row(ty, &w, &mut wq).unwrap();
            let mut aq = vec![0u8; act.bytes_for(n as u64).unwrap() as usize];
            quantize_row(act, &a, &mut aq).unwrap();
            let (mut wd, mut ad) = (vec![0.0; n], vec![0.0; n]);
            dequantize_row(ty, &wq, &mut wd).unwrap();
            dequantize_row(act, &aq, &mut ad).unwrap();
            let exact: f64 = wd.iter().zip(&ad).map(|(&x, &y)| x as f64 * y as f64).sum();
            let got = dot(n, &wq, &aq) as f64;
            let scale: f64 = wd
                .iter()
                .zip(&ad)
                .map(|(&x, &y)| (x as f64 * y as f64).abs())
                .sum();
            // Q8_1's precomputed block sum `s` is stored as f16, so those pairs carry its rounding
            let rel = if act == GgmlType::Q8_1 { 2e-3 } else { 1e-5 };
            assert!(
                (got - exact).abs() <= rel * scale + 1e-6,
                "{ty} n={n}: dot {got} vs dequantized {exact}"
            );
            // and close to the unquantized product, within the formats' error
            let plain: f64 = w.iter().zip(&a).map(|(&x, &y)| x as f64 * y as f64).sum();
            // the error of a dot of unit gaussians is about rel_rmse * sqrt(n): allow 4 sigma
            let sigma = (rel_rmse(&w, &wd) + rel_rmse(&a, &ad)) * libm::sqrt(n as f64);
            assert!(
                (got - plain).abs() <= 4.0 * sigma + 1e-3,
                "{ty}: {got} vs plain {plain} (sigma {sigma})"
            );
        }
    }
}

#[test]
fn wrong_lengths_are_errors() {
    let mut out = vec![0.0f32; 31];
    assert!(dequantize_row(GgmlType::Q4_0, &[0u8; 18], &mut out).is_err());
    let mut out = vec![0.0f32; 32];
    assert!(dequantize_row(GgmlType::Q4_0, &[0u8; 17], &mut out).is_err());
    assert!(quantize_row(GgmlType::Q4_K, &[0.0; 255], &mut [0u8; 144]).is_err());
    assert!(quantize_row(GgmlType::IQ2_XXS, &[0.0; 256], &mut [0u8; 66]).is_err());
    assert!(dequantize_row(GgmlType::IQ3_S, &[0u8; 110], &mut [0.0; 256]).is_err());
    assert!(dequantize_row(GgmlType::IQ4_XS, &[0u8; 136], &mut [0.0; 255]).is_err());
}

#[test]
fn q8_k_matches_ggml_rounding() {
    // nearest_int rounds half to even, like ggml's magic-number trick
    use kquants::nearest_int;
    assert_eq!(
        [
            nearest_int(0.5),
            nearest_int(1.5),
            nearest_int(2.5),
            nearest_int(-0.5),
            nearest_int(-1.5)
        ],
        [0, 2, 2, 0, -2]
    );
    assert_eq!(nearest_int(126.6), 127);
    let mut x = vec![0.0f32; 256];
    x[3] = -2.0;
    x[7] = 1.0;
    let mut q = vec![0u8; 292];
    quantize_row(GgmlType::Q8_K, &x, &mut q).unwrap();
    let b = &kquants::q8_k::blocks(&q)[0];
    // iscale = -127 / max with the signed extreme max = -2: x = -2 maps to -127, and
    // x = 1 to 63.5, a tie rounded to even
    assert_eq!(b.qs[3], -127);
    assert_eq!(b.qs[7], 64);
    assert_eq!(
        b.bsums()[0],
        b.qs[..16].iter().map(|&v| v as i16).sum::<i16>()
    );
    assert!((b.d() - (2.0 / 127.0)).abs() < 1e-7);
}

#[test]
fn mxfp4_scales_and_edge_blocks_match_ggml() {
    use mxfp4::{e8m0_half, exponent, BlockMxfp4};
    // 2^(e - 128) for every e, the two smallest subnormal
    for e in 0..=255u8 {
        assert_eq!(e8m0_half(e), libm::ldexpf(1.0, e as i32 - 128), "e = {e}");
    }
    assert_eq!(exponent(0.0), 0);
    // amax in [2^k, 2^(k+1)) gives e = k + 125: the largest doubled value, 12 · 2^(e - 128),
    // is 1.5 · 2^k
    assert_eq!(exponent(1.0), 125);
    assert_eq!(exponent(1.99), 125);
    assert_eq!(exponent(6.0), 127);
    // log2f rounds up to k just below 2^k for k >= 4 (f32 has no float between k and its
    // correctly rounded log2 there), so the exponent is not the float's own
    assert_eq!(exponent(f32::from_bits(16.0f32.to_bits() - 1)), 129);
    assert_eq!(exponent(f32::from_bits(2.0f32.to_bits() - 1)), 125);
    // out of uint8_t's range: what ggml built for x86-64 stores (checked against its C)
    assert_eq!(exponent(f32::from_bits(1)), 232);
    assert_eq!(exponent(f32::INFINITY), 0);
    // log2f(f32::MAX) rounds to 128
    assert_eq!(exponent(f32::MAX), 253);

    let mut x = [0.5f32; 32];
    x[0] = f32::NAN;
    x[1] = 2.0;
    x[16] = -0.375; // halfway between -0.25 (code 9) and -0.5 (code 10): the first wins
    x[17] = 0.0;
    let mut q = [0u8; 17];
    quantize_row(GgmlType::MXFP4, &x, &mut q).unwrap();
    let b: &BlockMxfp4 = bytemuck::from_bytes(&q);
    // amax 2 (the NaN does not count): e = 126, d = 0.25, so 0.5 is code 2 and 2 is code 6
    assert_eq!(b.e, 126);
    assert_eq!(b.qs[0], 9 << 4); // NaN -> code 0, -0.375 -> code 9
    assert_eq!(b.qs[1], 6); // 2.0 = 8 · 0.25 -> code 6, 0 -> code 0
    assert!(b.qs[2..].iter().all(|&c| c == 0x22));
    let mut y = [0.0f32; 32];
    dequantize_row(GgmlType::MXFP4, &q, &mut y).unwrap();
    assert_eq!(
        (y[0], y[1], y[2], y[16], y[17]),
        (0.0, 2.0, 0.5, -0.25, 0.0)
    );
}

/// `mxfp4::exponent` takes `floorf(log2f(x))` from libm's `log2f`; ggml takes it from the C
/// library's. Near every power of two (where the floor changes) they must agree.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn mxfp4_exponent_matches_the_c_library() {
    extern "C" {
        fn log2f(x: f32) -> f32;
    }
    let mut checked = 0;
    for k in -149i32..128 {
        let p = libm::ldexpf(1.0, k).to_bits();
        for bits in p.saturating_sub(300)..=p.saturating_add(300).min(0x7f7f_ffff) {
            let x = f32::from_bits(bits);
            if x <= 0.0 {
                continue;
            }
            // SAFETY: log2f is a pure C function of one float.
            let c = libm::floorf(unsafe { log2f(x) }) - 2.0 + 127.0;
            assert_eq!(
                mxfp4::exponent(x),
                c as i32 as u8,
                "amax {x:e} (bits {bits:#x})"
            );
            checked += 1;
        }
    }
    assert!(checked > 100_000);
}
