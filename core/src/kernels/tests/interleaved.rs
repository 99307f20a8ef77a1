//! The interleaved (8-row) kernels against the scalar row kernel, and the batch kernels
//! against the matrix × vector ones, on every ISA this host runs.

use alloc::vec;
use alloc::vec::Vec;

use super::*;

/// Interleaved kernels against the scalar row kernel on the original rows: the same bits
/// for every row (they round per row and block exactly as the scalar kernel does).
/// The largest token tile of any ISA's batch kernels (AVX-512's): the parity tests run two
/// whole tiles and a partial one.
const GEMM_TILE_MAX: usize = 8;

pub(crate) fn interleaved_parity(isa: Isa) {
    use crate::quant::interleaved;
    let Some(k) = table_or_skip(isa) else { return };
    let scalar = Kernels::scalar();
    let mut rng = Rng::new(0x8_0000 + isa as u64);
    let mut covered = 0;
    for ty in WEIGHT_TYPES {
        let Some(gemv) = k.gemv_x8(ty) else { continue };
        covered += 1;
        let at = quant::vec_dot_type(ty).unwrap();
        let qk = ty.block_len().max(at.block_len());
        for nb in BLOCK_COUNTS {
            let n = qk * nb;
            // 7 groups: a quad, a pair and a single one for the AVX-512 batch kernels
            for groups in [1, 3, 7] {
                let rows = groups * interleaved::ROWS;
                // case 6: Q8_0 or Q8_K activations of only -127 and 127 (the quantizer's
                // range), the bounds of the kernels' i16 sums (the AVX2 Q4_0 offsets,
                // `interleaved::q4_0_offset`; Q5_K's 5-bit products)
                let cases = if at == GgmlType::Q8_0 || at == GgmlType::Q8_K {
                    7
                } else {
                    6
                };
                for case in 0..cases {
                    let mut w = Vec::new();
                    for r in 0..rows {
                        w.extend(match case {
                            0 | 6 => raw_row(&mut rng, ty, n),
                            1 => quantized(&scalar, ty, &vec![0.0; n]),
                            _ => {
                                let fills = [Fill::Normal, Fill::Huge, Fill::Tiny, Fill::Outlier];
                                let f = fills[(case + r) % 4];
                                quantized(&scalar, ty, &values(&mut rng, n, f))
                            }
                        });
                    }
                    let mut act = || {
                        let a = if case == 0 {
                            raw_row(&mut rng, at, n)
                        } else if case == 6 {
                            let mut a = raw_row(&mut rng, at, n);
                            let bias = rng.next_u64();
                            let q8_k = at == GgmlType::Q8_K;
                            let qs = if q8_k { 4..260 } else { 2..34 };
                            for blk in a.chunks_exact_mut(at.block_bytes()) {
                                for q in &mut blk[qs.clone()] {
                                    let low = rng.next_u64() % 4 < 1 + bias % 3;
                                    *q = if low { 0x81 } else { 0x7F };
                                }
                                if q8_k {
                                    super::q8_k_bsums(blk);
                                }
                            }
                            a
                        } else {
                            quantized(&scalar, at, &values(&mut rng, n, Fill::Normal))
                        };
                        let mut sums = vec![0i32; n / 32];
                        if at == GgmlType::Q8_0 {
                            interleaved::block_sums(&a, &mut sums);
                        }
                        (a, sums)
                    };
                    // past 16 tokens: the AVX-512 kernels' few-token and wide paths both
                    let tokens: Vec<_> = (0..2 * GEMM_TILE_MAX + 11).map(|_| act()).collect();
                    let (a, sums) = &tokens[0];
                    let (a, sums) = (a.clone(), sums.clone());
                    let packed = interleaved::repack(ty, rows, n, &w).unwrap();
                    let mut got = vec![f32::NAN; rows];
                    gemv(n, &packed, &a, &sums, &mut got);
                    let dot = scalar.vec_dot(ty).unwrap();
                    let rb = w.len() / rows;
                    for (r, g) in got.iter().enumerate() {
                        let want = dot(n, &w[r * rb..(r + 1) * rb], &a);
                        assert_eq!(
                            g.to_bits(),
                            want.to_bits(),
                            "{} x8 {ty} case {case} n={n} row {r}: got {g}, scalar {want}",
                            isa.name()
                        );
                    }
                    if let Some(gemm) = k.gemm_x8(ty) {
                        let q8_0 = at == GgmlType::Q8_0;
                        gemm_matches_gemv(gemm, gemv, n, groups, &packed, &tokens, q8_0);
                    }
                }
            }
        }
    }
    eprintln!("{}: {covered} interleaved kernels checked", isa.name());
}

/// The batch kernel over every group against the matrix × vector kernel per token, for
/// every count of tokens up to `tokens.len()` (whole tiles of `GEMM_TOKENS` and the rest):
/// the same bits. `q8_0`: the activations are Q8_0 (the batch carries their sums and scales).
fn gemm_matches_gemv(
    gemm: crate::quant::interleaved::GemmX8Fn,
    gemv: crate::quant::interleaved::GemvX8Fn,
    n: usize,
    groups: usize,
    packed: &[u8],
    tokens: &[(Vec<u8>, Vec<i32>)],
    q8_0: bool,
) {
    use crate::quant::interleaved::{self, BatchRows, ROWS};
    let want: Vec<Vec<f32>> = tokens
        .iter()
        .map(|(a, s)| {
            let mut o = vec![f32::NAN; groups * ROWS];
            gemv(n, packed, a, s, &mut o);
            o
        })
        .collect();
    let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.0.iter().copied()).collect();
    let (mut sums, mut scales) = (Vec::new(), Vec::new());
    if q8_0 {
        for (a, s) in tokens {
            sums.extend_from_slice(s);
            let mut d = vec![0f32; s.len()];
            interleaved::block_scales(a, &mut d);
            scales.extend(d);
        }
    }
    let mut offsets = vec![0; sums.len()];
    interleaved::q4_0_offsets(&sums, &mut offsets);
    let all = BatchRows::new(tokens.len(), &bytes, &sums, &offsets, &scales);
    let group = packed.len() / groups;
    for m in 1..=tokens.len() {
        let acts = all.slice(0, m);
        // every group on its own, then all of them in one call (pairs and an odd one)
        let calls = packed
            .chunks_exact(group)
            .enumerate()
            .map(|(g, wg)| (g, 1, wg))
            .chain([(0, groups, packed)]);
        for (g0, count, wg) in calls {
            let mut got = vec![[f32::NAN; ROWS]; count * m];
            gemm(n, wg, acts, &mut got);
            for (i, got) in got.iter().enumerate() {
                let (g, t) = (g0 + i / m, i % m);
                for (r, x) in got.iter().enumerate() {
                    let y = want[t][g * ROWS + r];
                    assert_eq!(
                        x.to_bits(),
                        y.to_bits(),
                        "gemm of {count} groups x {m} tokens, n={n}, group {g}, token {t}, \
                         row {r}: {x} vs {y}"
                    );
                }
            }
        }
    }
}

#[test]
fn interleaved_parity_avx2() {
    interleaved_parity(Isa::Avx2);
}

/// AVX-VNNI's interleaved kernels (`vpdpbusd` on 256-bit vectors, four-token tiles) for 1 to
/// 27 tokens: one tile, several, and a partial one.
#[test]
fn interleaved_parity_avx_vnni() {
    interleaved_parity(Isa::AvxVnni);
}

#[test]
fn interleaved_parity_avx512() {
    interleaved_parity(Isa::Avx512);
}

/// NEON's interleaved kernels are SDOT kernels: with dotprod the table has them for every
/// interleaved format (checked here, then their parity); without it (e.g. qemu's
/// `cortex-a53`) it has none, so weights keep the row layout, and the test says it skipped.
#[test]
fn interleaved_parity_neon() {
    let Some(k) = table_or_skip(Isa::Neon) else {
        return;
    };
    let x8_types = WEIGHT_TYPES
        .into_iter()
        // MXFP4's interleaved kernels are x86's only: on NEON it keeps the row layout
        .filter(|&ty| quant::interleaved::supported(ty) && ty != GgmlType::MXFP4);
    if !host_features().has(Feature::Dotprod) {
        assert!(
            !required("dotprod"),
            "SUPERINFER_REQUIRE_ISAS requires dotprod, which this CPU lacks"
        );
        for ty in x8_types {
            assert!(
                k.gemv_x8(ty).is_none() && k.gemm_x8(ty).is_none(),
                "neon without dotprod has an interleaved {ty} kernel"
            );
        }
        eprintln!(
            "SKIPPED interleaved neon kernel parity: this CPU has no dotprod (SDOT), so the \
             NEON table has no interleaved kernels and weights keep the row layout"
        );
        return;
    }
    for ty in x8_types {
        assert!(
            k.gemv_x8(ty).is_some() && k.gemm_x8(ty).is_some(),
            "neon with dotprod lacks an interleaved {ty} kernel"
        );
    }
    interleaved_parity(Isa::Neon);
}
