//! The flash-attention tile (`ops::attention::flash`) on x86 vectors: its [`Simd`]
//! operations on 8 AVX2 lanes and on 16 AVX-512 lanes, with fused multiply-adds as ggml's
//! tiled kernel. Per lane both compute the same operations, so they agree bit for bit.

use core::arch::x86_64::*;

use super::avx2_math::exp_ps;
use crate::kernels::F16Ops;
use crate::ops::attention::flash::{self, FlashScratch, Simd, Tile};

/// The flash tile compiled for AVX2 + FMA.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn flash_avx2(ops: &F16Ops, t: &Tile<'_>, s: &mut FlashScratch) {
    flash::tile_sized::<Avx2>(ops, t, s)
}

/// The flash tile compiled for AVX-512 F (16 lanes).
///
/// # Safety
/// The CPU must support AVX-512 F/BW/VL, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) unsafe fn flash_avx512(ops: &F16Ops, t: &Tile<'_>, s: &mut FlashScratch) {
    flash::tile_sized::<Avx512>(ops, t, s)
}

/// Eight lanes of AVX2. Only instantiated in [`flash_avx2`] (a private type: nothing else can
/// call its methods), and every method is inlined into it, so the intrinsics run with its
/// features, which the CPU has (its caller's contract); loads and stores slice their
/// arguments to eight floats first.
struct Avx2;

impl Simd for Avx2 {
    const LANES: usize = 8;
    type V = __m256;
    #[inline(always)]
    fn splat(x: f32) -> __m256 {
        // SAFETY: AVX2/FMA register operations (see `Avx2`).
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    fn load(s: &[f32]) -> __m256 {
        let s = &s[..8];
        // SAFETY: `s` holds 8 floats (sliced above); AVX2/FMA as for every method.
        unsafe { _mm256_loadu_ps(s.as_ptr()) }
    }
    #[inline(always)]
    fn store(v: __m256, s: &mut [f32]) {
        let s = &mut s[..8];
        // SAFETY: `s` holds 8 floats (sliced above); AVX2/FMA as for every method.
        unsafe { _mm256_storeu_ps(s.as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn add(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2/FMA register operations (see `Avx2`).
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn mul(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2/FMA register operations (see `Avx2`).
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn max(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2/FMA register operations (see `Avx2`).
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    fn sub(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2/FMA register operations (see `Avx2`).
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mad(a: __m256, x: f32, b: __m256) -> __m256 {
        // SAFETY: AVX2/FMA register operations (see `Avx2`).
        unsafe { _mm256_fmadd_ps(_mm256_set1_ps(x), b, a) }
    }
    #[inline(always)]
    fn mask(s: __m256, pos: f32, start: __m256, end: __m256) -> __m256 {
        // SAFETY: AVX2/FMA register operations (see `Avx2`).
        unsafe {
            let p = _mm256_set1_ps(pos);
            let inside = _mm256_and_ps(
                _mm256_cmp_ps(start, p, _CMP_LE_OQ),
                _mm256_cmp_ps(p, end, _CMP_LT_OQ),
            );
            _mm256_blendv_ps(_mm256_set1_ps(f32::NEG_INFINITY), s, inside)
        }
    }
    #[inline(always)]
    fn diff(a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2/FMA register operations (see `Avx2`).
        unsafe { _mm256_andnot_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ), _mm256_sub_ps(a, b)) }
    }
    #[inline(always)]
    fn exp(x: __m256) -> __m256 {
        // SAFETY: AVX2/FMA register operations (see `Avx2`).
        unsafe {
            let normal = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3), _CMP_GE_OQ);
            _mm256_and_ps(exp_ps(x), normal)
        }
    }
}

/// `e^x` per lane: AVX2's [`exp_ps`] on 16 lanes, the same operations in the same order
/// (so the same bits per lane).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn exp512(x: __m512) -> __m512 {
    let c = |v: f32| _mm512_set1_ps(v);
    let x = _mm512_min_ps(_mm512_max_ps(x, c(-87.3)), c(88.7));
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(x, c(core::f32::consts::LOG2_E)),
    );
    let r = _mm512_fnmadd_ps(n, c(0.693_145_75), x);
    let r = _mm512_fnmadd_ps(n, c(1.428_606_8e-6), r);
    let mut p = c(1.0 / 720.0);
    p = _mm512_fmadd_ps(p, r, c(1.0 / 120.0));
    p = _mm512_fmadd_ps(p, r, c(1.0 / 24.0));
    p = _mm512_fmadd_ps(p, r, c(1.0 / 6.0));
    p = _mm512_fmadd_ps(p, r, c(0.5));
    p = _mm512_fmadd_ps(p, r, c(1.0));
    p = _mm512_fmadd_ps(p, r, c(1.0));
    let ni = _mm512_cvtps_epi32(n);
    let half = _mm512_srai_epi32::<1>(ni);
    let pow2 = |e: __m512i| {
        _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(
            e,
            _mm512_set1_epi32(127),
        )))
    };
    _mm512_mul_ps(
        _mm512_mul_ps(p, pow2(half)),
        pow2(_mm512_sub_epi32(ni, half)),
    )
}

/// Sixteen lanes of AVX-512. As [`Avx2`]: only instantiated in (and inlined into)
/// [`flash_avx512`], whose features the CPU has; loads and stores slice to sixteen floats.
struct Avx512;

impl Simd for Avx512 {
    const LANES: usize = 16;
    const PAIRS: bool = true;
    type V = __m512;
    #[inline(always)]
    fn splat(x: f32) -> __m512 {
        // SAFETY: AVX-512 F register operations (see `Avx512`).
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    fn load(s: &[f32]) -> __m512 {
        let s = &s[..16];
        // SAFETY: `s` holds 16 floats (sliced above); AVX-512 F as for every method.
        unsafe { _mm512_loadu_ps(s.as_ptr()) }
    }
    #[inline(always)]
    fn store(v: __m512, s: &mut [f32]) {
        let s = &mut s[..16];
        // SAFETY: `s` holds 16 floats (sliced above); AVX-512 F as for every method.
        unsafe { _mm512_storeu_ps(s.as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn add(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512 F register operations (see `Avx512`).
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    fn mul(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512 F register operations (see `Avx512`).
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    fn max(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512 F register operations (see `Avx512`).
        unsafe { _mm512_max_ps(a, b) }
    }
    #[inline(always)]
    fn sub(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512 F register operations (see `Avx512`).
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mad(a: __m512, x: f32, b: __m512) -> __m512 {
        // SAFETY: AVX-512 F register operations (see `Avx512`).
        unsafe { _mm512_fmadd_ps(_mm512_set1_ps(x), b, a) }
    }
    #[inline(always)]
    fn mask(s: __m512, pos: f32, start: __m512, end: __m512) -> __m512 {
        // SAFETY: AVX-512 F register operations (see `Avx512`).
        unsafe {
            let p = _mm512_set1_ps(pos);
            let inside = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(start, p)
                & _mm512_cmp_ps_mask::<_CMP_LT_OQ>(p, end);
            _mm512_mask_blend_ps(inside, _mm512_set1_ps(f32::NEG_INFINITY), s)
        }
    }
    #[inline(always)]
    fn diff(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512 F register operations (see `Avx512`).
        unsafe {
            let ne = !_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, b);
            _mm512_maskz_sub_ps(ne, a, b)
        }
    }
    #[inline(always)]
    fn exp(x: __m512) -> __m512 {
        // SAFETY: AVX-512 F register operations (see `Avx512`).
        unsafe {
            let normal = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(x, _mm512_set1_ps(-87.3));
            _mm512_maskz_mov_ps(normal, exp512(x))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests::table_or_skip;
    use crate::kernels::Isa;
    use crate::ops::exp::exp_poly;
    use alloc::vec::Vec;

    /// The 8- and 16-lane exponentials against their scalar reference, bit for bit: a sweep
    /// of the clamped range, its ends and beyond, zeros, infinities and NaN.
    #[test]
    fn vector_exponentials_are_exp_poly() {
        let mut xs: Vec<f32> = (0..4000).map(|i| -90.0 + i as f32 * 0.0451).collect();
        xs.extend([
            0.0,
            -0.0,
            -87.3,
            88.7,
            -87.29,
            1e-8,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ]);
        xs.resize(xs.len().next_multiple_of(16), 0.5);
        let want: Vec<u32> = xs.iter().map(|&x| exp_poly(x).to_bits()).collect();
        if table_or_skip(Isa::Avx2).is_some() {
            for (c, w) in xs.chunks_exact(8).zip(want.chunks_exact(8)) {
                let mut got = [0.0f32; 8];
                // SAFETY: the host has AVX2 and FMA (checked above); 8 floats each way.
                unsafe { avx2_exp(c, &mut got) };
                let got: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, w, "avx2 exp of {c:?}");
            }
        }
        if table_or_skip(Isa::Avx512).is_some() {
            for (c, w) in xs.chunks_exact(16).zip(want.chunks_exact(16)) {
                let mut got = [0.0f32; 16];
                // SAFETY: the host has AVX-512 F with the AVX2 set (checked above).
                unsafe { avx512_exp(c, &mut got) };
                let got: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, w, "avx512 exp of {c:?}");
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_exp(x: &[f32], out: &mut [f32; 8]) {
        // SAFETY: 8 floats each way (the caller's slices).
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), exp_ps(_mm256_loadu_ps(x.as_ptr()))) }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn avx512_exp(x: &[f32], out: &mut [f32; 16]) {
        // SAFETY: 16 floats each way (the caller's slices).
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), exp512(_mm512_loadu_ps(x.as_ptr()))) }
    }
}
