//! AVX2 + F16C f16 row primitives for attention over the f16 KV cache. The element-wise
//! ones follow llama.cpp's AVX2 `ggml_vec_mad_f16` / `ggml_vec_scale_f16` (FMA in f32,
//! stored back to f16 rounded to nearest); attention scores are bit-identical to the scalar
//! ones (see `dots_f32_f16`).

use core::arch::x86_64::*;

use half::f16;

use super::avx2::ld128;
use crate::kernels::generic::f16 as scalar;

/// 8 halves at `p` as f32.
///
/// # Safety
/// `p` must be valid for reading 8 f16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn ld8(p: *const f16) -> __m256 {
    // SAFETY: the caller guarantees 16 readable bytes.
    _mm256_cvtph_ps(unsafe { ld128(p) })
}

/// Stores 8 f32 at `p` as f16 (round to nearest even).
///
/// # Safety
/// `p` must be valid for writing 8 f16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn st8(p: *mut f16, v: __m256) {
    // SAFETY: the caller guarantees 16 writable bytes.
    unsafe { _mm_storeu_si128(p.cast(), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)) }
}

/// Transposes eight rows of eight floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// Eight cache rows at a time, one per lane: rows are loaded eight elements at a time and
/// transposed, so lane `t` adds `q[i]·k_t[i]` for `i = 0, 1, 2, ...` exactly as the scalar
/// fold does (multiply, then add; no FMA).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dots_f32_f16(q: &[f32], k: &[f16], stride: usize, out: &mut [f32]) {
    let dk = q.len();
    let n = out.len();
    if n == 0 || !dk.is_multiple_of(8) || (n - 1) * stride + dk > k.len() {
        return scalar::dots_f32_f16(q, k, stride, out);
    }
    let mut t = 0;
    while t + 8 <= n {
        let mut acc = _mm256_setzero_ps();
        for i in (0..dk).step_by(8) {
            // SAFETY: row t + j < n starts at (t + j)·stride and has dk >= i + 8 elements,
            // inside `k` (checked above).
            let rows: [__m256; 8] =
                core::array::from_fn(|j| unsafe { ld8(k.as_ptr().add((t + j) * stride + i)) });
            for (d, col) in transpose8(rows).into_iter().enumerate() {
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(q[i + d]), col));
            }
        }
        // SAFETY: t + 8 <= n.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(t), acc) };
        t += 8;
    }
    if t < n {
        scalar::dots_f32_f16(q, &k[t * stride..], stride, &mut out[t..]);
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn mad_f16(acc: &mut [f16], v: &[f16], s: f32) {
    let n = acc.len().min(v.len());
    let sv = _mm256_set1_ps(s);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n elements of both rows.
        unsafe {
            let p = acc.as_mut_ptr().add(i);
            st8(p, _mm256_fmadd_ps(ld8(v.as_ptr().add(i)), sv, ld8(p)));
        }
        i += 8;
    }
    scalar::mad_f16(&mut acc[i..n], &v[i..n], s);
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn scale_f16(acc: &mut [f16], s: f32) {
    let n = acc.len();
    let sv = _mm256_set1_ps(s);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n.
        unsafe {
            let p = acc.as_mut_ptr().add(i);
            st8(p, _mm256_mul_ps(ld8(p), sv));
        }
        i += 8;
    }
    scalar::scale_f16(&mut acc[i..n], s);
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn mad_f32_f16(acc: &mut [f32], v: &[f16], s: f32) {
    let n = acc.len().min(v.len());
    let sv = _mm256_set1_ps(s);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n elements of both rows.
        unsafe {
            let p = acc.as_mut_ptr().add(i);
            let r = _mm256_fmadd_ps(ld8(v.as_ptr().add(i)), sv, _mm256_loadu_ps(p));
            _mm256_storeu_ps(p, r);
        }
        i += 8;
    }
    scalar::mad_f32_f16(&mut acc[i..n], &v[i..n], s);
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn to_f32(src: &[f16], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n elements of both rows.
        unsafe { _mm256_storeu_ps(dst.as_mut_ptr().add(i), ld8(src.as_ptr().add(i))) };
        i += 8;
    }
    scalar::to_f32(&src[i..n], &mut dst[i..n]);
}
