use super::*;
use crate::quant::{quantize_row_ref, vec_dot_ref};

fn random_rows(ty: GgmlType, rows: usize, cols: usize, seed: u32) -> Vec<u8> {
    let mut s = seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        (s >> 8) as f32 / (1 << 24) as f32 * 2.0 - 1.0
    };
    let q = quantize_row_ref(ty).unwrap();
    let rb = ty.bytes_for(cols as u64).unwrap() as usize;
    let mut out = vec![0u8; rows * rb];
    for row in out.chunks_exact_mut(rb) {
        let x: Vec<f32> = (0..cols).map(|_| next() * 3.0).collect();
        q(&x, row);
    }
    out
}

/// Every format with a layout.
const TYPES: [GgmlType; 7] = [
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::MXFP4,
];

#[test]
fn supported_formats_have_layouts() {
    for ty in TYPES {
        assert!(supported(ty) && group_fns(ty).is_some(), "{ty}");
    }
}

#[test]
fn repack_round_trips_any_bytes() {
    for ty in TYPES {
        for (rows, blocks) in [(8, 1), (16, 3), (24, 8)] {
            let cols = blocks * ty.block_len();
            let rb = ty.bytes_for(cols as u64).unwrap() as usize;
            let src: Vec<u8> = (0..rows * rb).map(|i| (i * 131 + i / 7) as u8).collect();
            let packed = repack(ty, rows, cols, &src).unwrap();
            assert_ne!(packed, src, "{ty}: the layout changes the bytes");
            assert_eq!(
                unpack(ty, rows, cols, &packed).unwrap(),
                src,
                "{ty} {rows}x{cols}"
            );
            let mut row = vec![0u8; rb];
            for r in 0..rows {
                unpack_row(ty, cols, &packed, r, &mut row).unwrap();
                assert_eq!(row, src[r * rb..(r + 1) * rb], "{ty} row {r}");
            }
        }
    }
}

/// Groups repack independently: a matrix repacked in pieces of whole groups (as
/// `Weights::interleave_into` spreads it over threads) is the matrix repacked at once.
#[test]
fn repack_in_pieces_of_groups_is_the_whole_repack() {
    for ty in TYPES {
        let (rows, cols) = (5 * ROWS, 3 * ty.block_len());
        let rb = ty.bytes_for(cols as u64).unwrap() as usize;
        let src = random_rows(ty, rows, cols, 17);
        let whole = repack(ty, rows, cols, &src).unwrap();
        let mut pieces = vec![0u8; src.len()];
        let group = ROWS * rb;
        for (g0, g1) in [(0, 2), (2, 3), (3, 5)] {
            let (s, d) = (g0 * group..g1 * group, g0 * group..g1 * group);
            repack_into(ty, (g1 - g0) * ROWS, cols, &src[s], &mut pieces[d]).unwrap();
        }
        assert_eq!(pieces, whole, "{ty}");
    }
}

#[test]
fn repack_rejects_bad_shapes() {
    let rb = GgmlType::Q8_0.bytes_for(64).unwrap() as usize;
    assert!(repack(GgmlType::Q8_0, 4, 64, &vec![0; 4 * rb]).is_err());
    assert!(repack(GgmlType::Q8_0, 8, 64, &vec![0; 8 * rb - 1]).is_err());
    assert!(repack(GgmlType::Q8_0, 8, 48, &vec![0; 8 * rb]).is_err());
    assert!(repack(GgmlType::Q5_K, 8, 256, &vec![0; 8 * 176 - 1]).is_err());
    assert!(repack(GgmlType::Q3_K, 8, 256, &vec![0; 8 * 110]).is_err());
    assert!(repack(GgmlType::Q4_K, 8, 128, &vec![0; 8 * 72]).is_err());
}

#[test]
fn reference_matches_row_kernel() {
    for ty in TYPES {
        let (rows, cols) = (16, 4 * ty.block_len());
        let w = random_rows(ty, rows, cols, 7);
        let a = random_rows(crate::quant::vec_dot_type(ty).unwrap(), 1, cols, 9);
        let packed = repack(ty, rows, cols, &w).unwrap();
        let mut out = vec![0f32; rows];
        gemv_ref(ty, cols, &packed, &a, &mut out).unwrap();
        let rb = w.len() / rows;
        let dot = vec_dot_ref(ty).unwrap();
        for r in 0..rows {
            assert_eq!(
                out[r].to_bits(),
                dot(cols, &w[r * rb..(r + 1) * rb], &a).to_bits()
            );
        }
    }
}

#[test]
fn block_sums_are_integer_sums() {
    let a = random_rows(GgmlType::Q8_0, 1, 96, 3);
    let mut s = [0i32; 3];
    block_sums(&a, &mut s);
    for (b, s) in a.chunks_exact(34).zip(s) {
        assert_eq!(s, b[2..].iter().map(|&q| q as i8 as i32).sum::<i32>());
    }
}
