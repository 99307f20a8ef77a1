//! Our weight quantizers against the bytes ggml's `ggml_quantize_chunk` writes
//! (core/testdata/quant/weights-quantize.bin, made by
//! scripts/quantize/gen-weight-quant-vectors.py from the pinned llama.cpp's libggml-base).

use alloc::vec;
use alloc::vec::Vec;

use super::*;

const VECTORS: &[u8] = include_bytes!("../../../testdata/quant/weights-quantize.bin");

#[test]
fn weight_quantizers_write_ggml_bytes() {
    let mut seen = Vec::new();
    let mut p = 0;
    while p < VECTORS.len() {
        assert_eq!(&VECTORS[p..p + 3], b"QV\x01");
        let rd = |o: usize| u32::from_le_bytes(VECTORS[p + o..p + o + 4].try_into().unwrap());
        let ty = GgmlType::from_id(rd(3)).unwrap();
        let (n, nb) = (rd(7) as usize, rd(11) as usize);
        p += 15;
        let x: Vec<f32> = VECTORS[p..p + 4 * n]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let want = &VECTORS[p + 4 * n..p + 4 * n + nb];
        p += 4 * n + nb;
        let mut got = vec![0u8; nb];
        quantize(ty, &x, &mut got).unwrap();
        let first = got.iter().zip(want).position(|(a, b)| a != b);
        assert_eq!(first, None, "{ty}: first differing byte of {nb}");
        seen.push(ty);
    }
    for ty in SUPPORTED {
        assert!(seen.contains(&ty), "no vectors for {ty}");
    }
}

#[test]
fn unsupported_types_are_errors() {
    assert!(quantize(GgmlType::IQ2_XXS, &[0.0; 256], &mut [0u8; 66]).is_err());
    assert!(quantize(GgmlType::Q4_K, &[0.0; 255], &mut [0u8; 144]).is_err());
}

const WITH_IMATRIX: &[u8] = include_bytes!("../../../testdata/quant/weights-imatrix.bin");

/// With an importance matrix: the bytes of `ggml_quantize_chunk(type, …, imatrix)`.
#[test]
fn weighted_quantizers_write_ggml_bytes() {
    let mut seen = Vec::new();
    let mut p = 0;
    let f32s = |b: &[u8]| -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    while p < WITH_IMATRIX.len() {
        let v = &WITH_IMATRIX[p..];
        assert_eq!(&v[..3], b"QV\x02");
        let rd = |o: usize| u32::from_le_bytes(v[o..o + 4].try_into().unwrap()) as usize;
        let ty = GgmlType::from_id(rd(3) as u32).unwrap();
        let (n, nb, npr) = (rd(7), rd(11), rd(15));
        let mut o = 19;
        let x = f32s(&v[o..o + 4 * n]);
        o += 4 * n;
        let qw = f32s(&v[o..o + 4 * npr]);
        o += 4 * npr;
        let want = &v[o..o + nb];
        p += o + nb;
        let mut got = vec![0u8; nb];
        quantize_rows(ty, &x, &mut got, npr, Some(&qw)).unwrap();
        let first = got.iter().zip(want).position(|(a, b)| a != b);
        assert_eq!(first, None, "{ty}: first differing byte of {nb}");
        seen.push(ty);
    }
    assert_eq!(seen.len(), 8 * 7);
    assert!(quantize_rows(
        GgmlType::IQ4_XS,
        &[0.0; 256],
        &mut [0u8; 136],
        256,
        Some(&[1.0; 256])
    )
    .is_err());
}
