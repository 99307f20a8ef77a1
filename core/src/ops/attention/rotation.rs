//! Walsh-Hadamard rotation of the heads before they enter a quantized cache (llama.cpp's
//! `attn_rot_k` / `attn_rot_v`). Attention keys carry a few large outlier dimensions that
//! dominate a Q8_0 block's scale and wash out the others; an orthonormal rotation spreads
//! every dimension over all of them, so a block quantizes with a far smaller error, and the
//! attention result is unchanged in exact arithmetic: `(Hq)·(Hk) = q·k` and, with values
//! rotated, the output `Σ p·Hv = H(Σ p·v)` is rotated back by `H` (`H·H = I`).

use super::KvType;

/// Rotation size for a quantized cache's keys: the largest power of two from 64 up that
/// divides the head dimension (llama.cpp's choice); `None` for float caches or heads that
/// are not a multiple of 64.
pub fn key_rotation(ty: KvType, head_dim: usize) -> Option<usize> {
    if ty.block() == 1 || head_dim == 0 || !head_dim.is_multiple_of(64) {
        return None;
    }
    Some(1 << head_dim.trailing_zeros())
}

/// Rotation size for a quantized cache's values: 64 (smaller rotations work better for V,
/// as llama.cpp found), under the same conditions as [`key_rotation`].
pub fn value_rotation(ty: KvType, head_dim: usize) -> Option<usize> {
    key_rotation(ty, head_dim).map(|_| 64)
}

/// Multiplies every `n` consecutive values of `x` by the orthonormal Sylvester-Hadamard
/// matrix of size `n` (a power of two): the fast transform's butterflies, then `1/√n`.
pub fn hadamard(x: &mut [f32], n: usize) {
    debug_assert!(n.is_power_of_two() && x.len().is_multiple_of(n));
    let scale = 1.0 / libm::sqrtf(n as f32);
    for chunk in x.chunks_exact_mut(n) {
        let mut s = 1;
        while s < n {
            for block in chunk.chunks_exact_mut(2 * s) {
                let (a, b) = block.split_at_mut(s);
                for (a, b) in a.iter_mut().zip(b) {
                    (*a, *b) = (*a + *b, *a - *b);
                }
            }
            s *= 2;
        }
        chunk.iter_mut().for_each(|v| *v *= scale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    /// Against the matrix llama.cpp builds (`H_2n = [[H, H], [H, -H]] / √2` from `[1/√n]`),
    /// and the properties the attention relies on: dot products kept, `H·H = I`.
    #[test]
    fn matches_the_sylvester_matrix_and_is_its_own_inverse() {
        let n = 64;
        let mut h = alloc::vec![0.0f64; n * n];
        h[0] = 1.0 / (n as f64).sqrt();
        let mut s = 1;
        while s < n {
            for i in 0..s {
                for j in 0..s {
                    let v = h[i * n + j];
                    h[(i + s) * n + j] = v;
                    h[i * n + j + s] = v;
                    h[(i + s) * n + j + s] = -v;
                }
            }
            s *= 2;
        }
        let x: Vec<f32> = (0..2 * n)
            .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.3)
            .collect();
        let y: Vec<f32> = (0..2 * n)
            .map(|i| ((i * 13 % 7) as f32 - 3.0) * 1.7)
            .collect();
        let mut hx = x.clone();
        hadamard(&mut hx, n);
        for c in 0..2 {
            for i in 0..n {
                let want: f64 = (0..n).map(|j| h[i * n + j] * x[c * n + j] as f64).sum();
                assert!((hx[c * n + i] as f64 - want).abs() < 1e-5, "row {i}");
            }
        }
        let mut hy = y.clone();
        hadamard(&mut hy, n);
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f32>();
        assert!((dot(&hx, &hy) - dot(&x, &y)).abs() < 1e-3);
        let mut back = hx.clone();
        hadamard(&mut back, n);
        for (a, b) in back.iter().zip(&x) {
            assert!((a - b).abs() < 1e-5);
        }
    }

    #[test]
    fn rotation_sizes_follow_llama_cpp() {
        assert_eq!(key_rotation(KvType::Q8_0, 64), Some(64));
        assert_eq!(key_rotation(KvType::Q8_0, 128), Some(128));
        assert_eq!(key_rotation(KvType::Q8_0, 256), Some(256));
        assert_eq!(key_rotation(KvType::Q8_0, 192), Some(64));
        assert_eq!(key_rotation(KvType::Q8_0, 96), None);
        assert_eq!(key_rotation(KvType::F16, 128), None);
        assert_eq!(value_rotation(KvType::Q8_0, 256), Some(64));
        assert_eq!(value_rotation(KvType::F32, 256), None);
    }
}
