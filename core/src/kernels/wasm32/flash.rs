//! The flash-attention tile (`ops::attention::flash`) on simd128's four f32 lanes, and the
//! f16 → f32 rows it reads the KV cache through.
//!
//! The tile's sums are fused multiply-adds (`Simd::mad`), as on x86 and in the portable
//! instance (`libm::fmaf`, software on wasm: a call and some thirty scalar operations per
//! product, most of a decode step's attention). simd128 has no fused multiply-add, so
//! [`fma4`] computes one exactly the way `libm::fmaf` does, four lanes at once: the product
//! of two f32 is exact in f64, the f64 sum rounds once, and rounding that to f32 gives the
//! correctly rounded result unless the f64 sum lies exactly halfway between two f32s (a
//! double rounding) or below f32's normal range; lanes in those rare cases go through
//! `libm::fmaf` itself. So the tile gives the portable instance's bits (asserted by the
//! attention tests on every ISA). The exponential is `ops::exp::exp_poly`'s operations on
//! four lanes, its multiply-adds through [`fma4`] too.
//!
//! With relaxed-simd (`-C target-feature=+relaxed-simd`), the tile's multiply-adds are
//! `f32x4.relaxed_madd` instead: one `vfmadd` where the CPU has FMA (every x86 since 2013,
//! every ARMv8), which rounds as `fma4` does; a CPU without FMA would multiply and add with
//! two roundings (within the attention tests' tolerance of f64 attention, not the same bits).

use core::arch::wasm32::*;

use super::common::{exp_poly4, f16_to_f32, ld};
use crate::kernels::F16Ops;
use crate::ops::attention::flash::{self, FlashScratch, Simd, Tile};

/// The flash tile on simd128.
pub(super) fn flash_simd128(ops: &F16Ops, t: &Tile<'_>, s: &mut FlashScratch) {
    flash::tile_sized::<Wasm>(ops, t, s)
}

/// `dst[i] = f32(src[i])`, exactly (eight at a time, the rest one by one).
pub(super) fn f16_to_f32_row(src: &[half::f16], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let whole = n / 8 * 8;
    let (src, dst) = (&src[..n], &mut dst[..n]);
    let (head, tail) = dst.split_at_mut(whole);
    for (s, d) in src.chunks_exact(8).zip(head.chunks_exact_mut(8)) {
        // SAFETY: 8 f16 are 16 readable bytes; 8 f32 are 32 writable bytes.
        unsafe {
            let v = ld(s.as_ptr() as *const u8);
            let p = d.as_mut_ptr() as *mut v128;
            v128_store(p, f16_to_f32(u32x4_extend_low_u16x8(v)));
            v128_store(p.add(1), f16_to_f32(u32x4_extend_high_u16x8(v)));
        }
    }
    for (s, d) in src[whole..].iter().zip(tail) {
        *d = s.to_f32();
    }
}

/// `x · y + z` per f32 lane, rounded once, bit for bit as `libm::fmaf` (see the module).
#[inline(always)]
pub(super) fn fma4(x: v128, y: v128, z: v128) -> v128 {
    let high = |v: v128| i32x4_shuffle::<2, 3, 2, 3>(v, v);
    let (lo, slow_lo) = fma2(
        f64x2_promote_low_f32x4(x),
        f64x2_promote_low_f32x4(y),
        f64x2_promote_low_f32x4(z),
    );
    let (hi, slow_hi) = fma2(
        f64x2_promote_low_f32x4(high(x)),
        f64x2_promote_low_f32x4(high(y)),
        f64x2_promote_low_f32x4(high(z)),
    );
    if v128_any_true(v128_or(slow_lo, slow_hi)) {
        return fma4_libm(x, y, z);
    }
    i64x2_shuffle::<0, 2>(f32x4_demote_f64x2_zero(lo), f32x4_demote_f64x2_zero(hi))
}

/// The f64 sum `x · y + z` of two lanes (the product exact), and which lanes' rounding to f32
/// could differ from a single rounding: an f32 halfway case (the 29 bits below f32's
/// precision `1000…0`), or a nonzero sum below f32's normal range.
#[inline(always)]
fn fma2(x: v128, y: v128, z: v128) -> (v128, v128) {
    let s = f64x2_add(f64x2_mul(x, y), z);
    let tie = i64x2_eq(
        v128_and(s, i64x2_splat(0x1FFF_FFFF)),
        i64x2_splat(0x1000_0000),
    );
    let tiny = v128_and(
        f64x2_lt(f64x2_abs(s), f64x2_splat(f32::MIN_POSITIVE as f64)),
        f64x2_ne(s, f64x2_splat(0.0)),
    );
    (s, v128_or(tie, tiny))
}

/// [`fma4`] lane by lane through `libm::fmaf` (its rare cases).
#[cold]
#[inline(never)]
fn fma4_libm(x: v128, y: v128, z: v128) -> v128 {
    let (mut a, mut b, mut c) = ([0f32; 4], [0f32; 4], [0f32; 4]);
    // SAFETY: 16-byte stores into 16-byte arrays.
    unsafe {
        v128_store(a.as_mut_ptr() as *mut v128, x);
        v128_store(b.as_mut_ptr() as *mut v128, y);
        v128_store(c.as_mut_ptr() as *mut v128, z);
    }
    let r: [f32; 4] = core::array::from_fn(|l| libm::fmaf(a[l], b[l], c[l]));
    f32x4(r[0], r[1], r[2], r[3])
}

/// Four f32 lanes of simd128.
struct Wasm;

impl Simd for Wasm {
    const LANES: usize = 4;
    type V = v128;
    #[inline(always)]
    fn splat(x: f32) -> v128 {
        f32x4_splat(x)
    }
    #[inline(always)]
    fn load(s: &[f32]) -> v128 {
        let s = &s[..4];
        // SAFETY: four floats.
        unsafe { v128_load(s.as_ptr() as *const v128) }
    }
    #[inline(always)]
    fn store(v: v128, s: &mut [f32]) {
        let s = &mut s[..4];
        // SAFETY: four floats.
        unsafe { v128_store(s.as_mut_ptr() as *mut v128, v) }
    }
    #[inline(always)]
    fn add(a: v128, b: v128) -> v128 {
        f32x4_add(a, b)
    }
    #[inline(always)]
    fn mul(a: v128, b: v128) -> v128 {
        f32x4_mul(a, b)
    }
    #[inline(always)]
    fn max(a: v128, b: v128) -> v128 {
        // the larger of two numbers (the tile's values are never NaN)
        f32x4_pmax(a, b)
    }
    #[inline(always)]
    fn sub(a: v128, b: v128) -> v128 {
        f32x4_sub(a, b)
    }
    #[inline(always)]
    fn mad(a: v128, x: f32, b: v128) -> v128 {
        #[cfg(target_feature = "relaxed-simd")]
        {
            f32x4_relaxed_madd(f32x4_splat(x), b, a)
        }
        #[cfg(not(target_feature = "relaxed-simd"))]
        {
            fma4(f32x4_splat(x), b, a)
        }
    }
    #[inline(always)]
    fn mask(s: v128, pos: f32, start: v128, end: v128) -> v128 {
        let p = f32x4_splat(pos);
        let inside = v128_and(f32x4_le(start, p), f32x4_lt(p, end));
        v128_or(
            v128_and(inside, s),
            v128_andnot(f32x4_splat(f32::NEG_INFINITY), inside),
        )
    }
    #[inline(always)]
    fn diff(a: v128, b: v128) -> v128 {
        v128_andnot(f32x4_sub(a, b), f32x4_eq(a, b))
    }
    #[inline(always)]
    fn exp(x: v128) -> v128 {
        v128_and(exp_poly4(x, fma4), f32x4_ge(x, f32x4_splat(-87.3)))
    }
}
