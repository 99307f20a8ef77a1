//! AVX2 elementwise math: a vector `exp` and the SiLU-gated activation built on it, and the
//! GELU-gated activation through ggml's f16 table.

use core::arch::x86_64::*;

/// `e^x` per lane, within 2 ulp for normal results: `x = n·ln2 + r` with `|r| <= ln2/2`
/// (ln2 split in two parts so `r` is exact), a degree-6 Taylor polynomial for `e^r`, and
/// `2^n` put into the exponent bits. Inputs are clamped to [-87.3, 88.7] (results between
/// 1.2e-38 and 3.3e38: no infinities or subnormals). `ops::exp::exp_poly` is this, one lane
/// at a time (the same bits).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn exp_ps(x: __m256) -> __m256 {
    let x = _mm256_min_ps(
        _mm256_max_ps(x, _mm256_set1_ps(-87.3)),
        _mm256_set1_ps(88.7),
    );
    let n = _mm256_round_ps(
        _mm256_mul_ps(x, _mm256_set1_ps(core::f32::consts::LOG2_E)),
        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
    );
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_145_75), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428_606_8e-6), r);
    let c = |v: f32| _mm256_set1_ps(v);
    let mut p = c(1.0 / 720.0);
    p = _mm256_fmadd_ps(p, r, c(1.0 / 120.0));
    p = _mm256_fmadd_ps(p, r, c(1.0 / 24.0));
    p = _mm256_fmadd_ps(p, r, c(1.0 / 6.0));
    p = _mm256_fmadd_ps(p, r, c(0.5));
    p = _mm256_fmadd_ps(p, r, c(1.0));
    p = _mm256_fmadd_ps(p, r, c(1.0));
    // n in [-126, 128]: 2^n split as 2^(n/2)·2^(n - n/2) keeps both factors normal
    let ni = _mm256_cvtps_epi32(n);
    let half = _mm256_srai_epi32(ni, 1);
    let pow2 = |e: __m256i| {
        _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_add_epi32(e, _mm256_set1_epi32(127)),
            23,
        ))
    };
    _mm256_mul_ps(
        _mm256_mul_ps(p, pow2(half)),
        pow2(_mm256_sub_epi32(ni, half)),
    )
}

/// `gate[i] = silu(gate[i]) · up[i]`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn swiglu(gate: &mut [f32], up: &[f32]) {
    let n = gate.len().min(up.len());
    let one = _mm256_set1_ps(1.0);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n elements of both rows.
        unsafe {
            let p = gate.as_mut_ptr().add(i);
            let g = _mm256_loadu_ps(p);
            let e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
            let s = _mm256_div_ps(g, _mm256_add_ps(one, e));
            _mm256_storeu_ps(p, _mm256_mul_ps(s, _mm256_loadu_ps(up.as_ptr().add(i))));
        }
        i += 8;
    }
    crate::ops::activation::swiglu(&mut gate[i..n], &up[i..n]);
}

/// `gate[i] = gelu(gate[i]) · up[i]` as `activation::geglu` computes it (the input rounded
/// to f16, its GELU looked up in the f16 table, 0 / identity past ±10): bit-identical.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn geglu(gate: &mut [f32], up: &[f32]) {
    use crate::ops::activation::{gelu_table, GELU_IDENTITY, GELU_ZERO};
    let table = gelu_table();
    let n = gate.len().min(up.len());
    let (lo, hi) = (_mm256_set1_ps(GELU_ZERO), _mm256_set1_ps(GELU_IDENTITY));
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n elements of both rows; the gather reads 4 bytes at entry
        // `idx < 65536` of a table of 65537 u16.
        unsafe {
            let p = gate.as_mut_ptr().add(i);
            let x = _mm256_loadu_ps(p);
            let idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
            let words = _mm256_i32gather_epi32::<2>(table.as_ptr().cast(), idx);
            // low halves of the eight lanes, in order, as eight f16
            let packed = _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(
                _mm256_and_si256(words, _mm256_set1_epi32(0xFFFF)),
                _mm256_setzero_si256(),
            ));
            let g = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
            let g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
            let g = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LE_OQ), g);
            _mm256_storeu_ps(p, _mm256_mul_ps(g, _mm256_loadu_ps(up.as_ptr().add(i))));
        }
        i += 8;
    }
    crate::ops::activation::geglu(&mut gate[i..n], &up[i..n]);
}
