//! AVX2 + F16C conversion of f16 rows (the KV cache's element type) to and from f32.

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

/// `dst[i] = f32(src[i])`, eight at a time (exact, as the scalar conversion).
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

/// `dst[i] = f16(src[i])`, eight at a time, rounded to nearest even (`vcvtps2ph` with
/// rounding 0): the scalar conversion's bits.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn from_f32(src: &[f32], dst: &mut [f16]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n elements of both rows.
        unsafe {
            let h =
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(src.as_ptr().add(i)));
            _mm_storeu_si128(dst.as_mut_ptr().add(i).cast(), h);
        }
        i += 8;
    }
    scalar::from_f32(&src[i..n], &mut dst[i..n]);
}
