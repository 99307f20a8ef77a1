//! AArch64 NEON dot-product kernels, each the SIMD twin of a scalar kernel in `crate::quant`.
//!
//! The integer kernels are generic over [`I8Dot`], the step that multiplies 16 int8 pairs and
//! adds them into four int32 lanes, so each comes in two builds:
//! - `dot_*`: plain NEON widening multiplies (`vmull_s8` + `vpadalq_s16`), for every ARMv8 CPU;
//! - `dot_*_sdot`: the ARMv8.2 `SDOT` instruction, for CPUs with `dotprod`.
//!
//! `vdotq_s32` is still unstable in Rust 1.95 (`stdarch_neon_dotprod`), so [`Sdot`] issues
//! `SDOT` through `asm!`; likewise `vcvt_f32_f16` needs the unstable `f16` type, so f16 values
//! are widened with `FCVTL` / `FCVT` through `asm!`. Both are plain stable inline assembly.
//!
//! Integer sums are exact (every product and partial sum fits its lanes); only the order of
//! the float accumulation differs from the scalar oracle.

use core::arch::aarch64::*;
use core::arch::asm;

use crate::quant::kquants::q2_k::BlockQ2K;
use crate::quant::kquants::q3_k::BlockQ3K;
use crate::quant::kquants::q4_k::BlockQ4K;
use crate::quant::kquants::q5_k::BlockQ5K;
use crate::quant::kquants::q6_k::BlockQ6K;
use crate::quant::kquants::q8_k::BlockQ8K;
use crate::quant::kquants::{scale_min_k4, GROUPS};
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use crate::quant::mxfp4::{self, BlockMxfp4};

// ---- shared helpers ----

/// The whole blocks at the start of `bytes` (a trailing partial block is ignored, never read).
#[inline(always)]
fn blocks<B: bytemuck::Pod>(bytes: &[u8]) -> &[B] {
    let size = core::mem::size_of::<B>();
    // whole blocks of an alignment-1 type always cast: the fallback is never taken
    bytemuck::try_cast_slice(&bytes[..bytes.len() / size * size]).unwrap_or(&[])
}

/// f16 (little-endian bytes) to f32 with the `FCVT` instruction (exact, like `half`'s).
#[inline(always)]
pub(super) fn fp16(b: [u8; 2]) -> f32 {
    let x = u16::from_le_bytes(b);
    let y: f32;
    // SAFETY: FCVT (half to single) is part of base ARMv8 floating point; no memory access.
    unsafe {
        asm!("fcvt {y:s}, {x:h}", x = in(vreg) x, y = lateout(vreg) y,
             options(pure, nomem, nostack, preserves_flags));
    }
    y
}

/// Widens the low four f16 lanes of `v` to f32 (`FCVTL`).
#[inline(always)]
pub(super) fn f16_low(v: uint16x8_t) -> float32x4_t {
    let y: float32x4_t;
    // SAFETY: FCVTL is base ARMv8 Advanced SIMD; no memory access.
    unsafe {
        asm!("fcvtl {y:v}.4s, {v:v}.4h", v = in(vreg) v, y = lateout(vreg) y,
             options(pure, nomem, nostack, preserves_flags));
    }
    y
}

/// Widens the high four f16 lanes of `v` to f32 (`FCVTL2`).
#[inline(always)]
pub(super) fn f16_high(v: uint16x8_t) -> float32x4_t {
    let y: float32x4_t;
    // SAFETY: as `f16_low`.
    unsafe {
        asm!("fcvtl2 {y:v}.4s, {v:v}.8h", v = in(vreg) v, y = lateout(vreg) y,
             options(pure, nomem, nostack, preserves_flags));
    }
    y
}

/// Loads the first 16 bytes of `s`.
///
/// # Safety
/// `s.len() >= 16`.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn ld_u8(s: &[u8]) -> uint8x16_t {
    debug_assert!(s.len() >= 16);
    // SAFETY: the caller guarantees 16 readable bytes; LD1 has no alignment requirement.
    unsafe { vld1q_u8(s.as_ptr()) }
}

/// Loads the first 16 int8 of `s`.
///
/// # Safety
/// `s.len() >= 16`.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn ld_i8(s: &[i8]) -> int8x16_t {
    debug_assert!(s.len() >= 16);
    // SAFETY: as `ld_u8`.
    unsafe { vld1q_s8(s.as_ptr()) }
}

/// Loads eight little-endian i16 from the first 16 bytes of `s`.
///
/// # Safety
/// `s.len() >= 16`.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn ld_i16(s: &[u8]) -> int16x8_t {
    // SAFETY: as `ld_u8`. Loading bytes needs no alignment, and on a little-endian CPU (the
    // only kind `fill_neon` installs these kernels on) the reinterpreted lanes are the
    // little-endian i16 of the format.
    unsafe { vreinterpretq_s16_u8(ld_u8(s)) }
}

/// Low nibbles of `v` as int8 in [0, 15].
#[target_feature(enable = "neon")]
#[inline]
fn lo4(v: uint8x16_t) -> int8x16_t {
    vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F)))
}

/// High nibbles of `v` as int8 in [0, 15].
#[target_feature(enable = "neon")]
#[inline]
fn hi4(v: uint8x16_t) -> int8x16_t {
    vreinterpretq_s8_u8(vshrq_n_u8::<4>(v))
}

/// 0x10 in each byte lane of `v` that shares a bit with `bits`, else 0.
#[target_feature(enable = "neon")]
#[inline]
fn bit5(v: uint8x16_t, bits: uint8x16_t) -> uint8x16_t {
    vandq_u8(vtstq_u8(v, bits), vdupq_n_u8(0x10))
}

/// Q5_0 / Q5_1 high bits: bit `e` of the little-endian `qh` as 0x10 in byte lane `e`, for
/// elements 0..16 and 16..32.
#[target_feature(enable = "neon")]
#[inline]
fn q5_high_bits(qh: [u8; 4]) -> (uint8x16_t, uint8x16_t) {
    // lane i tests bit i % 8 of the byte holding element i
    let lane_bit = vcombine_u8(
        vcreate_u8(0x8040_2010_0804_0201),
        vcreate_u8(0x8040_2010_0804_0201),
    );
    let lo = vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1]));
    let hi = vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3]));
    (bit5(lo, lane_bit), bit5(hi, lane_bit))
}

/// Sum of `m[j] * (bsums[2j] + bsums[2j + 1])` over the eight 32-element sub-blocks of a
/// Q8_K block (the mins term of Q4_K / Q5_K).
#[target_feature(enable = "neon")]
#[inline]
fn mins_dot_pairs(y: &BlockQ8K, m: [i16; 8]) -> i32 {
    // SAFETY: 16-byte loads at 0 and 16 of the 32-byte bsums and the 16-byte `m`.
    let (b0, b1, m) = unsafe {
        (
            ld_i16(&y.bsums[..]),
            ld_i16(&y.bsums[16..]),
            vld1q_s16(m.as_ptr()),
        )
    };
    // pairwise sums of group sums: |b| <= 2 * 16 * 127 fits i16
    let pairs = vpaddq_s16(b0, b1);
    let prod = vmlal_high_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(m)), pairs, m);
    vaddvq_s32(prod)
}

// ---- the int8 dot step ----

/// Adds the 16 products `a[i] * b[i]` into the four int32 lanes of `acc` (which lane gets
/// which product is unspecified: callers only use lane sums, or lane sums times a scalar).
trait I8Dot {
    /// # Safety
    /// The CPU must support the instructions of the implementation.
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t;
}

/// Widening multiplies: 8 int16 products per half (|product| <= 128 * 127 fits), pairwise
/// added into the int32 lanes.
struct Mull;

impl I8Dot for Mull {
    #[inline(always)]
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        // SAFETY: plain NEON, which every caller's `#[target_feature]` enables.
        unsafe {
            let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
            let hi = vmull_high_s8(a, b);
            vpadalq_s16(vpadalq_s16(acc, lo), hi)
        }
    }
}

/// ARMv8.2 `SDOT` (dotprod): each int32 lane gets the sum of four int8 products.
struct Sdot;

impl I8Dot for Sdot {
    #[inline(always)]
    unsafe fn dot(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        // SAFETY: the caller guarantees dotprod; SDOT touches only these registers.
        unsafe {
            asm!("sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
                 acc = inout(vreg) acc, a = in(vreg) a, b = in(vreg) b,
                 options(pure, nomem, nostack, preserves_flags));
        }
        acc
    }
}

/// Dot of 32 int8 pairs given as two vectors each, into int32 lanes.
///
/// # Safety
/// As [`I8Dot::dot`].
#[inline(always)]
unsafe fn dot32<D: I8Dot>(x: [int8x16_t; 2], y: [int8x16_t; 2]) -> int32x4_t {
    // SAFETY: the caller's contract.
    unsafe { D::dot(D::dot(vdupq_n_s32(0), x[0], y[0]), x[1], y[1]) }
}

// ---- legacy formats (32-element blocks, Q8_0 / Q8_1 activations) ----

/// Q8_0 · Q8_0.
///
/// # Safety
/// The CPU must support NEON and whatever `D` needs.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn q8_0<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in blocks::<BlockQ8_0>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        // SAFETY: loads at 0 and 16 of 32-element arrays; `D` is the caller's contract.
        let p = unsafe {
            dot32::<D>(
                [ld_i8(&x.qs[..]), ld_i8(&x.qs[16..])],
                [ld_i8(&y.qs[..]), ld_i8(&y.qs[16..])],
            )
        };
        // |sum| <= 32 * 128 * 127 < 2^24: the conversion is exact
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), fp16(x.d) * fp16(y.d));
    }
    vaddvq_f32(acc)
}

/// Q4_0 · Q8_0: nibble `j` is element `j` (low) or `j + 16` (high), minus 8.
///
/// # Safety
/// As [`q8_0`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn q4_0<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    let eight = vdupq_n_s8(8);
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in blocks::<BlockQ4_0>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        // SAFETY: loads at 0 of the 16 packed bytes and 0 / 16 of the 32 activations.
        let p = unsafe {
            let v = ld_u8(&x.qs[..]);
            dot32::<D>(
                [vsubq_s8(lo4(v), eight), vsubq_s8(hi4(v), eight)],
                [ld_i8(&y.qs[..]), ld_i8(&y.qs[16..])],
            )
        };
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), fp16(x.d) * fp16(y.d));
    }
    vaddvq_f32(acc)
}

/// MXFP4 · Q8_0: the codes through the table of doubled E2M1 values (`TBL`) into int8, then
/// each block's exact sum scaled and added as the scalar oracle does (`sum += d · isum`,
/// block after block): the oracle's bits.
///
/// # Safety
/// As [`q8_0`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn mxfp4<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: KVALUES is 16 bytes.
    let table = unsafe { ld_i8(&mxfp4::KVALUES[..]) };
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockMxfp4>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        // SAFETY: as in `q4_0`.
        let p = unsafe {
            let v = ld_u8(&x.qs[..]);
            let (lo, hi) = (vreinterpretq_u8_s8(lo4(v)), vreinterpretq_u8_s8(hi4(v)));
            dot32::<D>(
                [vqtbl1q_s8(table, lo), vqtbl1q_s8(table, hi)],
                [ld_i8(&y.qs[..]), ld_i8(&y.qs[16..])],
            )
        };
        sum += fp16(y.d) * mxfp4::e8m0_half(x.e) * vaddvq_s32(p) as f32;
    }
    sum
}

/// Q4_1 · Q8_1: unsigned nibbles, plus the min times the activation block's scaled sum.
///
/// # Safety
/// As [`q8_0`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn q4_1<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    let mut acc = vdupq_n_f32(0.0);
    let mut mins = 0.0f32;
    for (x, y) in blocks::<BlockQ4_1>(w).iter().zip(blocks::<BlockQ8_1>(a)) {
        // SAFETY: as in `q4_0`.
        let p = unsafe {
            let v = ld_u8(&x.qs[..]);
            dot32::<D>([lo4(v), hi4(v)], [ld_i8(&y.qs[..]), ld_i8(&y.qs[16..])])
        };
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), fp16(x.d) * fp16(y.d));
        mins += fp16(x.m) * fp16(y.s);
    }
    vaddvq_f32(acc) + mins
}

/// Q5_0 · Q8_0: the Q4_0 nibbles plus a fifth bit from `qh`, minus 16.
///
/// # Safety
/// As [`q8_0`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn q5_0<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    let sixteen = vdupq_n_s8(16);
    let mut acc = vdupq_n_f32(0.0);
    for (x, y) in blocks::<BlockQ5_0>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        let (h0, h1) = q5_high_bits(x.qh);
        // SAFETY: as in `q4_0`.
        let p = unsafe {
            let v = ld_u8(&x.qs[..]);
            let q0 = vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), h0);
            let q1 = vorrq_u8(vshrq_n_u8::<4>(v), h1);
            dot32::<D>(
                [
                    vsubq_s8(vreinterpretq_s8_u8(q0), sixteen),
                    vsubq_s8(vreinterpretq_s8_u8(q1), sixteen),
                ],
                [ld_i8(&y.qs[..]), ld_i8(&y.qs[16..])],
            )
        };
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), fp16(x.d) * fp16(y.d));
    }
    vaddvq_f32(acc)
}

/// Q5_1 · Q8_1: unsigned 5-bit quants plus the min term.
///
/// # Safety
/// As [`q8_0`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn q5_1<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    let mut acc = vdupq_n_f32(0.0);
    let mut mins = 0.0f32;
    for (x, y) in blocks::<BlockQ5_1>(w).iter().zip(blocks::<BlockQ8_1>(a)) {
        let (h0, h1) = q5_high_bits(x.qh);
        // SAFETY: as in `q4_0`.
        let p = unsafe {
            let v = ld_u8(&x.qs[..]);
            let q0 = vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), h0);
            let q1 = vorrq_u8(vshrq_n_u8::<4>(v), h1);
            dot32::<D>(
                [vreinterpretq_s8_u8(q0), vreinterpretq_s8_u8(q1)],
                [ld_i8(&y.qs[..]), ld_i8(&y.qs[16..])],
            )
        };
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), fp16(x.d) * fp16(y.d));
        mins += fp16(x.m) * fp16(y.s);
    }
    vaddvq_f32(acc) + mins
}

// ---- k-quants (256-element super-blocks, Q8_K activations) ----
//
// Each kernel builds one int8 vector per 16-element group, dots it with the group's
// activations, and multiplies the int32 lanes by the group's integer scale before summing:
// the result is the scalar oracle's `isum` exactly, and the final float expression is the
// oracle's own.

/// Q2_K · Q8_K: element `128n + 32j + k` is bits `2j..2j+2` of `qs[32n + k]`.
///
/// # Safety
/// As [`q8_0`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn q2_k<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    let three = vdupq_n_u8(3);
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ2K>(w).iter().zip(blocks::<BlockQ8K>(a)) {
        // SAFETY: every load is 16 bytes at a constant offset that leaves 16 in its array.
        let (isum, msum) = unsafe {
            let mut acc = vdupq_n_s32(0);
            for n in 0..2 {
                let mut q0 = ld_u8(&x.qs[32 * n..]);
                let mut q1 = ld_u8(&x.qs[32 * n + 16..]);
                for j in 0..4 {
                    let g = 8 * n + 2 * j;
                    let e = 16 * g;
                    let v0 = vreinterpretq_s8_u8(vandq_u8(q0, three));
                    let v1 = vreinterpretq_s8_u8(vandq_u8(q1, three));
                    let p0 = D::dot(vdupq_n_s32(0), v0, ld_i8(&y.qs[e..]));
                    let p1 = D::dot(vdupq_n_s32(0), v1, ld_i8(&y.qs[e + 16..]));
                    acc = vmlaq_n_s32(acc, p0, (x.scales[g] & 0x0F) as i32);
                    acc = vmlaq_n_s32(acc, p1, (x.scales[g + 1] & 0x0F) as i32);
                    q0 = vshrq_n_u8::<2>(q0);
                    q1 = vshrq_n_u8::<2>(q1);
                }
            }
            // mins (high nibbles, <= 15) times the group sums
            let mins = vshrq_n_u8::<4>(ld_u8(&x.scales[..]));
            let m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
            let m1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
            let (b0, b1) = (ld_i16(&y.bsums[..]), ld_i16(&y.bsums[16..]));
            let mut m = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
            m = vmlal_high_s16(m, m0, b0);
            m = vmlal_s16(m, vget_low_s16(m1), vget_low_s16(b1));
            m = vmlal_high_s16(m, m1, b1);
            (vaddvq_s32(acc), vaddvq_s32(m))
        };
        let (d, dmin, d8) = (fp16(x.d), fp16(x.dmin), f32::from_le_bytes(y.d));
        sum += d * d8 * isum as f32 - dmin * d8 * msum as f32;
    }
    sum
}

/// The sixteen 6-bit Q3_K scales, unbiased to [-32, 31].
#[inline(always)]
fn q3_k_scales(s: &[u8; 12]) -> [i32; GROUPS] {
    core::array::from_fn(|i| {
        let low = if i < 8 { s[i] & 0x0F } else { s[i - 8] >> 4 };
        let high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        (low | (high << 4)) as i32 - 32
    })
}

/// Q3_K · Q8_K: element `128n + 32j + k` is bits `2j..2j+2` of `qs[32n + k]`, minus 4 unless
/// bit `4n + j` of `hmask[k]` is set.
///
/// # Safety
/// As [`q8_0`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn q3_k<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    let (three, four) = (vdupq_n_u8(3), vdupq_n_u8(4));
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ3K>(w).iter().zip(blocks::<BlockQ8K>(a)) {
        let scales = q3_k_scales(&x.scales);
        // SAFETY: as in `q2_k`.
        let isum = unsafe {
            let (hm0, hm1) = (ld_u8(&x.hmask[..]), ld_u8(&x.hmask[16..]));
            let mut acc = vdupq_n_s32(0);
            for n in 0..2 {
                let mut q0 = ld_u8(&x.qs[32 * n..]);
                let mut q1 = ld_u8(&x.qs[32 * n + 16..]);
                for j in 0..4 {
                    let g = 8 * n + 2 * j;
                    let e = 16 * g;
                    let bit = vdupq_n_u8(1 << (4 * n + j));
                    // 4 where the high bit is clear, else 0
                    let sub0 = vbicq_u8(four, vtstq_u8(hm0, bit));
                    let sub1 = vbicq_u8(four, vtstq_u8(hm1, bit));
                    let v0 = vsubq_s8(
                        vreinterpretq_s8_u8(vandq_u8(q0, three)),
                        vreinterpretq_s8_u8(sub0),
                    );
                    let v1 = vsubq_s8(
                        vreinterpretq_s8_u8(vandq_u8(q1, three)),
                        vreinterpretq_s8_u8(sub1),
                    );
                    let p0 = D::dot(vdupq_n_s32(0), v0, ld_i8(&y.qs[e..]));
                    let p1 = D::dot(vdupq_n_s32(0), v1, ld_i8(&y.qs[e + 16..]));
                    acc = vmlaq_n_s32(acc, p0, scales[g]);
                    acc = vmlaq_n_s32(acc, p1, scales[g + 1]);
                    q0 = vshrq_n_u8::<2>(q0);
                    q1 = vshrq_n_u8::<2>(q1);
                }
            }
            vaddvq_s32(acc)
        };
        sum += fp16(x.d) * f32::from_le_bytes(y.d) * isum as f32;
    }
    sum
}

/// Q4_K / Q5_K's eight (scale, min) pairs.
#[inline(always)]
fn k4_scales(s: &[u8; 12]) -> ([i32; 8], [i16; 8]) {
    let mut sc = [0i32; 8];
    let mut mn = [0i16; 8];
    for j in 0..8 {
        let (s, m) = scale_min_k4(j, s);
        sc[j] = s as i32;
        mn[j] = m as i16;
    }
    (sc, mn)
}

/// Q4_K · Q8_K: element `64j + k` is the low (k < 32) or high nibble of `qs[32j + k % 32]`,
/// with sub-block scale/min `2j` or `2j + 1`.
///
/// # Safety
/// As [`q8_0`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn q4_k<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ4K>(w).iter().zip(blocks::<BlockQ8K>(a)) {
        let (sc, mn) = k4_scales(&x.scales);
        // SAFETY: as in `q2_k`.
        let isum = unsafe {
            let mut acc = vdupq_n_s32(0);
            for j in 0..4 {
                let q0 = ld_u8(&x.qs[32 * j..]);
                let q1 = ld_u8(&x.qs[32 * j + 16..]);
                let yq = &y.qs[64 * j..];
                let lo = dot32::<D>([lo4(q0), lo4(q1)], [ld_i8(yq), ld_i8(&yq[16..])]);
                let hi = dot32::<D>([hi4(q0), hi4(q1)], [ld_i8(&yq[32..]), ld_i8(&yq[48..])]);
                acc = vmlaq_n_s32(acc, lo, sc[2 * j]);
                acc = vmlaq_n_s32(acc, hi, sc[2 * j + 1]);
            }
            vaddvq_s32(acc)
        };
        let msum = mins_dot_pairs(y, mn);
        let (d, dmin, d8) = (fp16(x.d), fp16(x.dmin), f32::from_le_bytes(y.d));
        sum += d * d8 * isum as f32 - dmin * d8 * msum as f32;
    }
    sum
}

/// Q5_K · Q8_K: Q4_K plus a fifth bit, bit `2j` (low nibbles) or `2j + 1` (high) of
/// `qh[k % 32]`.
///
/// # Safety
/// As [`q8_0`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn q5_k<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    let m4 = vdupq_n_u8(0x0F);
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ5K>(w).iter().zip(blocks::<BlockQ8K>(a)) {
        let (sc, mn) = k4_scales(&x.scales);
        // SAFETY: as in `q2_k`.
        let isum = unsafe {
            let (qh0, qh1) = (ld_u8(&x.qh[..]), ld_u8(&x.qh[16..]));
            let mut acc = vdupq_n_s32(0);
            for j in 0..4 {
                let q0 = ld_u8(&x.qs[32 * j..]);
                let q1 = ld_u8(&x.qs[32 * j + 16..]);
                let (bl, bh) = (vdupq_n_u8(1 << (2 * j)), vdupq_n_u8(2 << (2 * j)));
                let l0 = vorrq_u8(vandq_u8(q0, m4), bit5(qh0, bl));
                let l1 = vorrq_u8(vandq_u8(q1, m4), bit5(qh1, bl));
                let h0 = vorrq_u8(vshrq_n_u8::<4>(q0), bit5(qh0, bh));
                let h1 = vorrq_u8(vshrq_n_u8::<4>(q1), bit5(qh1, bh));
                let yq = &y.qs[64 * j..];
                let lo = dot32::<D>(
                    [vreinterpretq_s8_u8(l0), vreinterpretq_s8_u8(l1)],
                    [ld_i8(yq), ld_i8(&yq[16..])],
                );
                let hi = dot32::<D>(
                    [vreinterpretq_s8_u8(h0), vreinterpretq_s8_u8(h1)],
                    [ld_i8(&yq[32..]), ld_i8(&yq[48..])],
                );
                acc = vmlaq_n_s32(acc, lo, sc[2 * j]);
                acc = vmlaq_n_s32(acc, hi, sc[2 * j + 1]);
            }
            vaddvq_s32(acc)
        };
        let msum = mins_dot_pairs(y, mn);
        let (d, dmin, d8) = (fp16(x.d), fp16(x.dmin), f32::from_le_bytes(y.d));
        sum += d * d8 * isum as f32 - dmin * d8 * msum as f32;
    }
    sum
}

/// Q6_K · Q8_K. In each 128-element half `n`, the 16-element group `i` takes its low nibbles
/// from `ql[64n + 16(i % 4)..]` (low for i < 4, high after) and its two high bits from
/// `qh[32n + 16(i % 2)..]` at bit `2(i / 2)`; quants are biased by 32.
///
/// # Safety
/// As [`q8_0`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn q6_k<D: I8Dot>(w: &[u8], a: &[u8]) -> f32 {
    let (m4, m30) = (vdupq_n_u8(0x0F), vdupq_n_u8(0x30));
    let thirty_two = vdupq_n_s8(32);
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ6K>(w).iter().zip(blocks::<BlockQ8K>(a)) {
        // SAFETY: as in `q2_k`.
        let isum = unsafe {
            let mut acc = vdupq_n_s32(0);
            for n in 0..2 {
                let ql = &x.ql[64 * n..];
                let (l0, l1, l2, l3) = (
                    ld_u8(ql),
                    ld_u8(&ql[16..]),
                    ld_u8(&ql[32..]),
                    ld_u8(&ql[48..]),
                );
                let (h0, h1) = (ld_u8(&x.qh[32 * n..]), ld_u8(&x.qh[32 * n + 16..]));
                // (qh >> 2s & 3) << 4 for s = 0..4, as shifts landing on bits 4..6
                let q = [
                    vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8::<4>(h0), m30)),
                    vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8::<4>(h1), m30)),
                    vorrq_u8(vandq_u8(l2, m4), vandq_u8(vshlq_n_u8::<2>(h0), m30)),
                    vorrq_u8(vandq_u8(l3, m4), vandq_u8(vshlq_n_u8::<2>(h1), m30)),
                    vorrq_u8(vshrq_n_u8::<4>(l0), vandq_u8(h0, m30)),
                    vorrq_u8(vshrq_n_u8::<4>(l1), vandq_u8(h1, m30)),
                    vorrq_u8(vshrq_n_u8::<4>(l2), vandq_u8(vshrq_n_u8::<2>(h0), m30)),
                    vorrq_u8(vshrq_n_u8::<4>(l3), vandq_u8(vshrq_n_u8::<2>(h1), m30)),
                ];
                for (i, q) in q.into_iter().enumerate() {
                    let g = 8 * n + i;
                    let v = vsubq_s8(vreinterpretq_s8_u8(q), thirty_two);
                    let p = D::dot(vdupq_n_s32(0), v, ld_i8(&y.qs[16 * g..]));
                    acc = vmlaq_n_s32(acc, p, x.scales[g] as i32);
                }
            }
            vaddvq_s32(acc)
        };
        sum += fp16(x.d) * f32::from_le_bytes(y.d) * isum as f32;
    }
    sum
}

// ---- float formats ----

/// Loads four little-endian f32 from the first 16 bytes of `s`.
///
/// # Safety
/// `s.len() >= 16`.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn ld_f32(s: &[u8]) -> float32x4_t {
    // SAFETY: the caller's contract.
    unsafe { vreinterpretq_f32_u8(ld_u8(s)) }
}

/// The first `n` elements of `w` and `a` (fewer if either is shorter), as byte slices.
#[inline(always)]
fn float_rows<'a>(n: usize, w: &'a [u8], a: &'a [u8], size: usize) -> (&'a [u8], &'a [u8]) {
    let len = n.min(w.len() / size).min(a.len() / size) * size;
    // `len` fits both rows: the fallbacks are never taken
    (w.get(..len).unwrap_or(&[]), a.get(..len).unwrap_or(&[]))
}

/// F32 · F32 with four vector accumulators.
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub(super) unsafe fn dot_f32(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (w, a) = float_rows(n, w, a, 4);
    let mut acc = [vdupq_n_f32(0.0); 4];
    let (wc, ac) = (w.chunks_exact(64), a.chunks_exact(64));
    let (wr, ar) = (wc.remainder(), ac.remainder());
    for (x, y) in wc.zip(ac) {
        for (i, acc) in acc.iter_mut().enumerate() {
            // SAFETY: 16-byte loads at 16i < 64 of 64-byte chunks.
            *acc = unsafe { vfmaq_f32(*acc, ld_f32(&x[16 * i..]), ld_f32(&y[16 * i..])) };
        }
    }
    let (wc, ac) = (wr.chunks_exact(16), ar.chunks_exact(16));
    let (wr, ar) = (wc.remainder(), ac.remainder());
    for (x, y) in wc.zip(ac) {
        // SAFETY: 16-byte chunks.
        acc[0] = unsafe { vfmaq_f32(acc[0], ld_f32(x), ld_f32(y)) };
    }
    let mut sum = vaddvq_f32(vaddq_f32(
        vaddq_f32(acc[0], acc[1]),
        vaddq_f32(acc[2], acc[3]),
    ));
    for (x, y) in wr.chunks_exact(4).zip(ar.chunks_exact(4)) {
        sum += f32::from_le_bytes([x[0], x[1], x[2], x[3]])
            * f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
    }
    sum
}

/// Dot of 16-bit float rows widened to f32 by `widen` (low, high halves of eight lanes), and
/// of their scalar tails by `scalar`. Products of two f16 or two bf16 are exact in f32.
#[target_feature(enable = "neon")]
#[inline]
fn dot_16bit(
    w: &[u8],
    a: &[u8],
    widen: impl Fn(uint16x8_t) -> (float32x4_t, float32x4_t),
    scalar: impl Fn([u8; 2]) -> f32,
) -> f32 {
    let mut acc = [vdupq_n_f32(0.0); 4];
    let (wc, ac) = (w.chunks_exact(32), a.chunks_exact(32));
    let (wr, ar) = (wc.remainder(), ac.remainder());
    for (x, y) in wc.zip(ac) {
        // SAFETY: 16-byte loads at 0 and 16 of 32-byte chunks.
        let (x0, x1, y0, y1) = unsafe { (ld_u8(x), ld_u8(&x[16..]), ld_u8(y), ld_u8(&y[16..])) };
        let (x0l, x0h) = widen(vreinterpretq_u16_u8(x0));
        let (x1l, x1h) = widen(vreinterpretq_u16_u8(x1));
        let (y0l, y0h) = widen(vreinterpretq_u16_u8(y0));
        let (y1l, y1h) = widen(vreinterpretq_u16_u8(y1));
        acc[0] = vfmaq_f32(acc[0], x0l, y0l);
        acc[1] = vfmaq_f32(acc[1], x0h, y0h);
        acc[2] = vfmaq_f32(acc[2], x1l, y1l);
        acc[3] = vfmaq_f32(acc[3], x1h, y1h);
    }
    let (wc, ac) = (wr.chunks_exact(16), ar.chunks_exact(16));
    let (wr, ar) = (wc.remainder(), ac.remainder());
    for (x, y) in wc.zip(ac) {
        // SAFETY: 16-byte chunks.
        let (x, y) = unsafe { (ld_u8(x), ld_u8(y)) };
        let (xl, xh) = widen(vreinterpretq_u16_u8(x));
        let (yl, yh) = widen(vreinterpretq_u16_u8(y));
        acc[0] = vfmaq_f32(acc[0], xl, yl);
        acc[1] = vfmaq_f32(acc[1], xh, yh);
    }
    let mut sum = vaddvq_f32(vaddq_f32(
        vaddq_f32(acc[0], acc[1]),
        vaddq_f32(acc[2], acc[3]),
    ));
    for (x, y) in wr.chunks_exact(2).zip(ar.chunks_exact(2)) {
        sum += scalar([x[0], x[1]]) * scalar([y[0], y[1]]);
    }
    sum
}

/// F16 · F16 (widened with FCVTL, accumulated in f32).
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub(super) unsafe fn dot_f16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (w, a) = float_rows(n, w, a, 2);
    dot_16bit(w, a, |v| (f16_low(v), f16_high(v)), fp16)
}

/// BF16 · BF16 (a bf16 is the top half of an f32).
///
/// # Safety
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
pub(super) unsafe fn dot_bf16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (w, a) = float_rows(n, w, a, 2);
    dot_16bit(
        w,
        a,
        |v| {
            (
                vreinterpretq_f32_u32(vshll_n_u16::<16>(vget_low_u16(v))),
                vreinterpretq_f32_u32(vshll_high_n_u16::<16>(v)),
            )
        },
        |b| f32::from_bits((u16::from_le_bytes(b) as u32) << 16),
    )
}

// ---- the exported kernels: one NEON and one SDOT build of each integer kernel ----

/// Defines `$plain` (NEON) and `$sdot` (NEON + dotprod) from the generic kernel `$generic`.
macro_rules! int_kernels {
    ($($generic:ident => $plain:ident, $sdot:ident;)*) => {$(
        /// # Safety
        /// The CPU must support NEON.
        #[target_feature(enable = "neon")]
        pub(super) unsafe fn $plain(_n: usize, w: &[u8], a: &[u8]) -> f32 {
            // SAFETY: `Mull` needs only NEON (the caller's contract).
            unsafe { $generic::<Mull>(w, a) }
        }

        /// # Safety
        /// The CPU must support NEON and dotprod.
        #[target_feature(enable = "neon,dotprod")]
        pub(super) unsafe fn $sdot(_n: usize, w: &[u8], a: &[u8]) -> f32 {
            // SAFETY: `Sdot` needs dotprod (the caller's contract).
            unsafe { $generic::<Sdot>(w, a) }
        }
    )*};
}

int_kernels! {
    q8_0 => dot_q8_0, dot_q8_0_sdot;
    q4_0 => dot_q4_0, dot_q4_0_sdot;
    q4_1 => dot_q4_1, dot_q4_1_sdot;
    q5_0 => dot_q5_0, dot_q5_0_sdot;
    q5_1 => dot_q5_1, dot_q5_1_sdot;
    q2_k => dot_q2_k, dot_q2_k_sdot;
    q3_k => dot_q3_k, dot_q3_k_sdot;
    q4_k => dot_q4_k, dot_q4_k_sdot;
    q5_k => dot_q5_k, dot_q5_k_sdot;
    q6_k => dot_q6_k, dot_q6_k_sdot;
    mxfp4 => dot_mxfp4, dot_mxfp4_sdot;
}

mod iq4;
pub(super) use iq4::{dot_iq4_nl, dot_iq4_nl_sdot, dot_iq4_xs, dot_iq4_xs_sdot};
