//! The row-layout kernels of several rows and tokens (`Kernels::vec_dot_rows`) against the
//! ISA's own one-row kernel, and where that is the scalar oracle's bit for bit (wasm) against
//! the scalar row kernel too, on every ISA this host runs that has them: every (row, token)
//! value the same bits.

use alloc::vec;
use alloc::vec::Vec;

use super::*;

/// Row counts: fewer than a quad, quads and a partial one.
const ROW_COUNTS: [usize; 6] = [1, 2, 3, 4, 7, 9];
/// Token counts: one (decode), tiles of four and the rest one at a time.
const TOKEN_COUNTS: [usize; 6] = [1, 2, 4, 5, 8, 11];

/// `a` and `b` are the same float: the same bits, or both NaN (payloads may differ).
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

pub(crate) fn rows_parity(isa: Isa) {
    let Some(k) = table_or_skip(isa) else { return };
    let scalar = Kernels::scalar();
    let mut rng = Rng::new(0x7_0000 + isa as u64);
    let mut covered = 0;
    for ty in WEIGHT_TYPES {
        let Some(rows_fn) = k.vec_dot_rows(ty) else {
            continue;
        };
        covered += 1;
        let at = quant::vec_dot_type(ty).unwrap();
        let qk = ty.block_len().max(at.block_len());
        let (dot, reference) = (k.vec_dot(ty).unwrap(), scalar.vec_dot(ty).unwrap());
        // the x86 one-row kernels sum the blocks in llama.cpp's AVX2 order, not the oracle's
        // (MXFP4's rounding is pinned in `tests::mxfp4`); the wasm ones are the oracle's
        let one_row_is_oracle = !matches!(isa, Isa::Avx2 | Isa::AvxVnni | Isa::Avx512);
        // block counts past the kernels' chunks of prepared activations (256 legacy blocks or
        // 32 super-blocks for one token, a quarter for four)
        let counts: &[usize] = if qk == 256 {
            &[1, 3, 9, 33]
        } else {
            &[1, 5, 17, 83, 300]
        };
        for &nb in counts {
            let cols = qk * nb;
            for (i, &rows) in ROW_COUNTS.iter().enumerate() {
                let n = TOKEN_COUNTS[(i + nb) % TOKEN_COUNTS.len()];
                for case in 0..4 {
                    let mut w = Vec::new();
                    for r in 0..rows {
                        let mut row = match case {
                            0 => raw_row(&mut rng, ty, cols),
                            1 => quantized(&scalar, ty, &vec![0.0; cols]),
                            _ => {
                                let fills = [Fill::Normal, Fill::Huge, Fill::Tiny, Fill::Outlier];
                                quantized(
                                    &scalar,
                                    ty,
                                    &values(&mut rng, cols, fills[(case + r) % 4]),
                                )
                            }
                        };
                        // case 3: an infinite or NaN scale in one block of the second row
                        if case == 3 && r == 1 {
                            let blk = (rng.next_u64() as usize) % nb;
                            let at = blk * ty.block_bytes() + scale_offset(ty);
                            let odd = rng.next_u64().is_multiple_of(2);
                            if ty == GgmlType::MXFP4 {
                                // the largest E8M0 exponents: infinite values, products
                                // infinite or NaN
                                row[at] = if odd { 255 } else { 254 };
                            } else {
                                let v = if odd { 0x7C00u16 } else { 0xFE01 };
                                row[at..at + 2].copy_from_slice(&v.to_le_bytes());
                            }
                        }
                        w.extend(row);
                    }
                    let mut a = Vec::new();
                    for _ in 0..n {
                        a.extend(if case == 0 {
                            raw_row(&mut rng, at, cols)
                        } else {
                            quantized(&scalar, at, &values(&mut rng, cols, Fill::Normal))
                        });
                    }
                    let (rb, ab) = (w.len() / rows, a.len() / n);
                    let mut out = vec![f32::NAN; rows * n];
                    rows_fn(cols, &w, &a, n, &mut out);
                    for r in 0..rows {
                        for t in 0..n {
                            let (row, act) = (&w[r * rb..(r + 1) * rb], &a[t * ab..(t + 1) * ab]);
                            let (want, one) = (reference(cols, row, act), dot(cols, row, act));
                            let got = out[r * n + t];
                            assert!(
                                same(got, one) && (!one_row_is_oracle || same(one, want)),
                                "{} {ty} case {case} cols={cols} rows={rows} n={n} row {r} token {t}: \
                                 rows kernel {got}, one-row kernel {one}, scalar {want}",
                                isa.name()
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(covered > 0, "{} has no kernels of several rows", isa.name());
}

/// Where a block's (first) f16 scale is.
fn scale_offset(ty: GgmlType) -> usize {
    match ty {
        GgmlType::Q6_K => 208,
        _ => 0,
    }
}

#[test]
fn rows_parity_avx2() {
    rows_parity(Isa::Avx2);
}

#[test]
fn rows_parity_avx_vnni() {
    rows_parity(Isa::AvxVnni);
}

#[test]
fn rows_parity_simd128() {
    rows_parity(Isa::Simd128);
}
