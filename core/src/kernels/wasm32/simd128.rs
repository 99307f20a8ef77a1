//! WebAssembly SIMD128 dot-product kernels, each the SIMD twin of a scalar kernel in
//! `crate::quant`.
//!
//! simd128 has no 8-bit multiply, so int8 dots sign-extend to int16 and use
//! `i32x4_dot_i16x8` (pairs of int16 products summed into int32: exact for any int8 input).
//! f16 has no conversion instruction either; it is widened with exact integer/float bit
//! arithmetic. Integer sums are exact; only the order of the float accumulation differs from
//! the scalar oracle.

use core::arch::wasm32::*;

use crate::quant::kquants::q2_k::BlockQ2K;
use crate::quant::kquants::q3_k::BlockQ3K;
use crate::quant::kquants::q5_k::BlockQ5K;
use crate::quant::kquants::q8_k::BlockQ8K;
use crate::quant::kquants::{scale_min_k4, GROUPS};
use crate::quant::legacy::{h, BlockQ4_1, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use crate::quant::mxfp4::{self, BlockMxfp4};

// ---- shared helpers ----

/// The whole blocks at the start of `bytes` (a trailing partial block is ignored, never read).
#[inline(always)]
fn blocks<B: bytemuck::Pod>(bytes: &[u8]) -> &[B] {
    let size = core::mem::size_of::<B>();
    // whole blocks of an alignment-1 type always cast: the fallback is never taken
    bytemuck::try_cast_slice(&bytes[..bytes.len() / size * size]).unwrap_or(&[])
}

/// Loads the first 16 bytes of `s` (as any lane type: `v128` is untyped).
///
/// # Safety
/// `s.len() >= 16` (bytes, or elements of a 1-byte type).
#[target_feature(enable = "simd128")]
#[inline]
unsafe fn ld<T: bytemuck::Pod>(s: &[T]) -> v128 {
    debug_assert!(core::mem::size_of_val(s) >= 16);
    // SAFETY: the caller guarantees 16 readable bytes; `v128_load` has no alignment
    // requirement.
    unsafe { v128_load(s.as_ptr() as *const v128) }
}

/// Sum of the four int32 lanes.
#[target_feature(enable = "simd128")]
#[inline]
fn hsum_i32(v: v128) -> i32 {
    i32x4_extract_lane::<0>(v)
        + i32x4_extract_lane::<1>(v)
        + i32x4_extract_lane::<2>(v)
        + i32x4_extract_lane::<3>(v)
}

/// Sum of the four f32 lanes.
#[target_feature(enable = "simd128")]
#[inline]
fn hsum_f32(v: v128) -> f32 {
    (f32x4_extract_lane::<0>(v) + f32x4_extract_lane::<1>(v))
        + (f32x4_extract_lane::<2>(v) + f32x4_extract_lane::<3>(v))
}

/// The 16 products `a[i] * b[i]` of int8 lanes, summed into four int32 lanes (which lane gets
/// which product is unspecified: callers only use lane sums, or lane sums times a scalar).
#[target_feature(enable = "simd128")]
#[inline]
fn dot16(a: v128, b: v128) -> v128 {
    let lo = i32x4_dot_i16x8(i16x8_extend_low_i8x16(a), i16x8_extend_low_i8x16(b));
    let hi = i32x4_dot_i16x8(i16x8_extend_high_i8x16(a), i16x8_extend_high_i8x16(b));
    i32x4_add(lo, hi)
}

/// Dot of 32 int8 pairs given as two vectors each, into int32 lanes.
#[target_feature(enable = "simd128")]
#[inline]
fn dot32(x: [v128; 2], y: [v128; 2]) -> v128 {
    i32x4_add(dot16(x[0], y[0]), dot16(x[1], y[1]))
}

/// Low nibbles of the bytes of `v`.
#[target_feature(enable = "simd128")]
#[inline]
fn lo4(v: v128) -> v128 {
    v128_and(v, u8x16_splat(0x0F))
}

/// High nibbles of the bytes of `v`.
#[target_feature(enable = "simd128")]
#[inline]
fn hi4(v: v128) -> v128 {
    u8x16_shr(v, 4)
}

/// 0x10 in each byte lane of `v` that shares a bit with `bits`, else 0.
#[target_feature(enable = "simd128")]
#[inline]
fn bit5(v: v128, bits: v128) -> v128 {
    v128_and(
        i8x16_ne(v128_and(v, bits), i8x16_splat(0)),
        u8x16_splat(0x10),
    )
}

/// Q5_0 / Q5_1 high bits: bit `e` of the little-endian `qh` as 0x10 in byte lane `e`, for
/// elements 0..16 and 16..32.
#[target_feature(enable = "simd128")]
#[inline]
fn q5_high_bits(qh: [u8; 4]) -> (v128, v128) {
    // every byte of `qh` in each 32-bit lane; lane i then takes the byte holding element i
    // and tests bit i % 8 of it
    let all = u32x4_splat(u32::from_le_bytes(qh));
    let lane_bit = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    let lo = u8x16_swizzle(all, u8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    let hi = u8x16_swizzle(all, u8x16(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    (bit5(lo, lane_bit), bit5(hi, lane_bit))
}

// ---- legacy formats (32-element blocks, Q8_0 / Q8_1 activations) ----

/// Q4_1 · Q8_1: unsigned nibbles, plus the min times the activation block's scaled sum.
///
/// # Safety
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(super) unsafe fn dot_q4_1(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = f32x4_splat(0.0);
    let mut mins = 0.0f32;
    for (x, y) in blocks::<BlockQ4_1>(w).iter().zip(blocks::<BlockQ8_1>(a)) {
        // SAFETY: as in `dot_q4_0`.
        let p = unsafe {
            let v = ld(&x.qs[..]);
            dot32([lo4(v), hi4(v)], [ld(&y.qs[..]), ld(&y.qs[16..])])
        };
        let d = f32x4_splat(h(x.d) * h(y.d));
        acc = f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(p), d));
        mins += h(x.m) * h(y.s);
    }
    hsum_f32(acc) + mins
}

/// MXFP4 · Q8_0: the codes through the table of doubled E2M1 values (`i8x16_swizzle`) into
/// int8, then each block's exact sum scaled and added as the scalar oracle does
/// (`sum += d · isum`, block after block): the oracle's bits.
///
/// # Safety
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(super) unsafe fn dot_mxfp4(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: KVALUES is 16 bytes.
    let table = unsafe { ld(&mxfp4::KVALUES[..]) };
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockMxfp4>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        // SAFETY: loads at 0 of the 16 packed bytes and 0 / 16 of the 32 activations.
        let p = unsafe {
            let v = ld(&x.qs[..]);
            let q = [i8x16_swizzle(table, lo4(v)), i8x16_swizzle(table, hi4(v))];
            dot32(q, [ld(&y.qs[..]), ld(&y.qs[16..])])
        };
        sum += mxfp4::scale(x, y) * hsum_i32(p) as f32;
    }
    sum
}

/// Q5_1 · Q8_1: unsigned 5-bit quants plus the min term.
///
/// # Safety
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(super) unsafe fn dot_q5_1(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = f32x4_splat(0.0);
    let mut mins = 0.0f32;
    for (x, y) in blocks::<BlockQ5_1>(w).iter().zip(blocks::<BlockQ8_1>(a)) {
        let (h0, h1) = q5_high_bits(x.qh);
        // SAFETY: as in `dot_q4_0`.
        let p = unsafe {
            let v = ld(&x.qs[..]);
            dot32(
                [v128_or(lo4(v), h0), v128_or(hi4(v), h1)],
                [ld(&y.qs[..]), ld(&y.qs[16..])],
            )
        };
        let d = f32x4_splat(h(x.d) * h(y.d));
        acc = f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(p), d));
        mins += h(x.m) * h(y.s);
    }
    hsum_f32(acc) + mins
}

// ---- k-quants (256-element super-blocks, Q8_K activations) ----
//
// Each kernel builds one int8 vector per 16-element group, dots it with the group's
// activations, and multiplies the int32 lanes by the group's integer scale before summing:
// the result is the scalar oracle's `isum` exactly, and the final float expression is the
// oracle's own.

/// `acc + dot16(v, y) * scale`.
#[target_feature(enable = "simd128")]
#[inline]
fn dot16_scaled(acc: v128, v: v128, y: v128, scale: i32) -> v128 {
    i32x4_add(acc, i32x4_mul(dot16(v, y), i32x4_splat(scale)))
}

/// Q2_K · Q8_K: element `128n + 32j + k` is bits `2j..2j+2` of `qs[32n + k]`.
///
/// # Safety
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(super) unsafe fn dot_q2_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let three = u8x16_splat(3);
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ2K>(w).iter().zip(blocks::<BlockQ8K>(a)) {
        // SAFETY: every load is 16 bytes at a constant offset that leaves 16 in its array.
        let (isum, msum) = unsafe {
            let mut acc = i32x4_splat(0);
            for n in 0..2 {
                let mut q0 = ld(&x.qs[32 * n..]);
                let mut q1 = ld(&x.qs[32 * n + 16..]);
                for j in 0..4 {
                    let g = 8 * n + 2 * j;
                    let e = 16 * g;
                    let sc0 = (x.scales[g] & 0x0F) as i32;
                    let sc1 = (x.scales[g + 1] & 0x0F) as i32;
                    acc = dot16_scaled(acc, v128_and(q0, three), ld(&y.qs[e..]), sc0);
                    acc = dot16_scaled(acc, v128_and(q1, three), ld(&y.qs[e + 16..]), sc1);
                    q0 = u8x16_shr(q0, 2);
                    q1 = u8x16_shr(q1, 2);
                }
            }
            // mins (high nibbles, <= 15) times the group sums
            let mins = hi4(ld(&x.scales[..]));
            let m0 = u16x8_extend_low_u8x16(mins);
            let m1 = u16x8_extend_high_u8x16(mins);
            let m = i32x4_add(
                i32x4_dot_i16x8(m0, ld(&y.bsums[..])),
                i32x4_dot_i16x8(m1, ld(&y.bsums[16..])),
            );
            (hsum_i32(acc), hsum_i32(m))
        };
        let (d, dmin, d8) = (h(x.d), h(x.dmin), f32::from_le_bytes(y.d));
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
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(super) unsafe fn dot_q3_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (three, four) = (u8x16_splat(3), u8x16_splat(4));
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ3K>(w).iter().zip(blocks::<BlockQ8K>(a)) {
        let scales = q3_k_scales(&x.scales);
        // SAFETY: as in `dot_q2_k`.
        let isum = unsafe {
            let (hm0, hm1) = (ld(&x.hmask[..]), ld(&x.hmask[16..]));
            let mut acc = i32x4_splat(0);
            for n in 0..2 {
                let mut q0 = ld(&x.qs[32 * n..]);
                let mut q1 = ld(&x.qs[32 * n + 16..]);
                for j in 0..4 {
                    let g = 8 * n + 2 * j;
                    let e = 16 * g;
                    let bit = u8x16_splat(1 << (4 * n + j));
                    // 4 where the high bit is clear, else 0
                    let sub0 = v128_andnot(four, i8x16_ne(v128_and(hm0, bit), i8x16_splat(0)));
                    let sub1 = v128_andnot(four, i8x16_ne(v128_and(hm1, bit), i8x16_splat(0)));
                    let v0 = i8x16_sub(v128_and(q0, three), sub0);
                    let v1 = i8x16_sub(v128_and(q1, three), sub1);
                    acc = dot16_scaled(acc, v0, ld(&y.qs[e..]), scales[g]);
                    acc = dot16_scaled(acc, v1, ld(&y.qs[e + 16..]), scales[g + 1]);
                    q0 = u8x16_shr(q0, 2);
                    q1 = u8x16_shr(q1, 2);
                }
            }
            hsum_i32(acc)
        };
        sum += h(x.d) * f32::from_le_bytes(y.d) * isum as f32;
    }
    sum
}

/// Q4_K / Q5_K's eight scales, and the mins each repeated twice (one per 16-element group,
/// as int16 lanes ready for `i32x4_dot_i16x8` with the group sums).
#[target_feature(enable = "simd128")]
#[inline]
fn k4_scales(s: &[u8; 12]) -> ([i32; 8], [v128; 2]) {
    let mut sc = [0i32; 8];
    let mut mn = [0i16; 16];
    for j in 0..8 {
        let (s, m) = scale_min_k4(j, s);
        sc[j] = s as i32;
        mn[2 * j] = m as i16;
        mn[2 * j + 1] = m as i16;
    }
    // SAFETY: 16-byte loads at 0 and 8 of a 16-element i16 array.
    unsafe { (sc, [ld(&mn[..]), ld(&mn[8..])]) }
}

/// Sum of `mins[g] * bsums[g]` over the 16 groups.
#[target_feature(enable = "simd128")]
#[inline]
fn mins_dot(y: &BlockQ8K, mins: [v128; 2]) -> i32 {
    // SAFETY: 16-byte loads at 0 and 16 of the 32-byte bsums.
    let (b0, b1) = unsafe { (ld(&y.bsums[..]), ld(&y.bsums[16..])) };
    hsum_i32(i32x4_add(
        i32x4_dot_i16x8(mins[0], b0),
        i32x4_dot_i16x8(mins[1], b1),
    ))
}

/// Q5_K · Q8_K: Q4_K plus a fifth bit, bit `2j` (low nibbles) or `2j + 1` (high) of
/// `qh[k % 32]`.
///
/// # Safety
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(super) unsafe fn dot_q5_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ5K>(w).iter().zip(blocks::<BlockQ8K>(a)) {
        let (sc, mn) = k4_scales(&x.scales);
        // SAFETY: as in `dot_q2_k`.
        let isum = unsafe {
            let (qh0, qh1) = (ld(&x.qh[..]), ld(&x.qh[16..]));
            let mut acc = i32x4_splat(0);
            for j in 0..4 {
                let q0 = ld(&x.qs[32 * j..]);
                let q1 = ld(&x.qs[32 * j + 16..]);
                let (bl, bh) = (u8x16_splat(1 << (2 * j)), u8x16_splat(2 << (2 * j)));
                let l0 = v128_or(lo4(q0), bit5(qh0, bl));
                let l1 = v128_or(lo4(q1), bit5(qh1, bl));
                let h0 = v128_or(hi4(q0), bit5(qh0, bh));
                let h1 = v128_or(hi4(q1), bit5(qh1, bh));
                let yq = &y.qs[64 * j..];
                let lo = dot32([l0, l1], [ld(yq), ld(&yq[16..])]);
                let hi = dot32([h0, h1], [ld(&yq[32..]), ld(&yq[48..])]);
                acc = i32x4_add(acc, i32x4_mul(lo, i32x4_splat(sc[2 * j])));
                acc = i32x4_add(acc, i32x4_mul(hi, i32x4_splat(sc[2 * j + 1])));
            }
            hsum_i32(acc)
        };
        let msum = mins_dot(y, mn);
        let (d, dmin, d8) = (h(x.d), h(x.dmin), f32::from_le_bytes(y.d));
        sum += d * d8 * isum as f32 - dmin * d8 * msum as f32;
    }
    sum
}

// ---- float formats ----

/// The first `n` elements of `w` and `a` (fewer if either is shorter), as byte slices.
#[inline(always)]
fn float_rows<'a>(n: usize, w: &'a [u8], a: &'a [u8], size: usize) -> (&'a [u8], &'a [u8]) {
    let len = n.min(w.len() / size).min(a.len() / size) * size;
    // `len` fits both rows: the fallbacks are never taken
    (w.get(..len).unwrap_or(&[]), a.get(..len).unwrap_or(&[]))
}

/// F32 · F32 with four vector accumulators (simd128 has no fused multiply-add).
///
/// # Safety
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(super) unsafe fn dot_f32(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (w, a) = float_rows(n, w, a, 4);
    let mut acc = [f32x4_splat(0.0); 4];
    let (wc, ac) = (w.chunks_exact(64), a.chunks_exact(64));
    let (wr, ar) = (wc.remainder(), ac.remainder());
    for (x, y) in wc.zip(ac) {
        for (i, acc) in acc.iter_mut().enumerate() {
            // SAFETY: 16-byte loads at 16i < 64 of 64-byte chunks.
            let (x, y) = unsafe { (ld(&x[16 * i..]), ld(&y[16 * i..])) };
            *acc = f32x4_add(*acc, f32x4_mul(x, y));
        }
    }
    let (wc, ac) = (wr.chunks_exact(16), ar.chunks_exact(16));
    let (wr, ar) = (wc.remainder(), ac.remainder());
    for (x, y) in wc.zip(ac) {
        // SAFETY: 16-byte chunks.
        let (x, y) = unsafe { (ld(x), ld(y)) };
        acc[0] = f32x4_add(acc[0], f32x4_mul(x, y));
    }
    let mut sum = hsum_f32(f32x4_add(
        f32x4_add(acc[0], acc[1]),
        f32x4_add(acc[2], acc[3]),
    ));
    for (x, y) in wr.chunks_exact(4).zip(ar.chunks_exact(4)) {
        sum += f32::from_le_bytes([x[0], x[1], x[2], x[3]])
            * f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
    }
    sum
}

/// f16 bits (the low half of each u32 lane) to f32, exactly: the exponent/mantissa bits
/// shifted into f32 position read as a float 2^112 too small (for normals and subnormals
/// alike), so one multiply rebiases them; infinities and NaNs get the all-ones exponent.
#[target_feature(enable = "simd128")]
#[inline]
fn f16_to_f32(v: v128) -> v128 {
    let abs = v128_and(v, u32x4_splat(0x7FFF));
    let sign = i32x4_shl(v128_and(v, u32x4_splat(0x8000)), 16);
    let bits = i32x4_shl(abs, 13);
    let finite = f32x4_mul(bits, f32x4_splat(f32::from_bits(0x7780_0000))); // 2^112
    let special = v128_or(bits, u32x4_splat(0x7F80_0000));
    let is_special = u32x4_ge(abs, u32x4_splat(0x7C00));
    v128_or(v128_bitselect(special, finite, is_special), sign)
}

/// bf16 bits (the low half of each u32 lane) to f32: a bf16 is the top half of an f32.
#[target_feature(enable = "simd128")]
#[inline]
fn bf16_to_f32(v: v128) -> v128 {
    i32x4_shl(v, 16)
}

/// Dot of 16-bit float rows, eight elements per vector, widened to f32 by `widen` (applied
/// to the zero-extended low and high halves), with a scalar tail. Products of two f16 or
/// two bf16 are exact in f32.
#[target_feature(enable = "simd128")]
#[inline]
fn dot_16bit(
    w: &[u8],
    a: &[u8],
    widen: impl Fn(v128) -> v128,
    scalar: impl Fn([u8; 2]) -> f32,
) -> f32 {
    let mut acc = [f32x4_splat(0.0); 2];
    let (wc, ac) = (w.chunks_exact(16), a.chunks_exact(16));
    let (wr, ar) = (wc.remainder(), ac.remainder());
    for (x, y) in wc.zip(ac) {
        // SAFETY: 16-byte chunks.
        let (x, y) = unsafe { (ld(x), ld(y)) };
        let (xl, xh) = (
            widen(u32x4_extend_low_u16x8(x)),
            widen(u32x4_extend_high_u16x8(x)),
        );
        let (yl, yh) = (
            widen(u32x4_extend_low_u16x8(y)),
            widen(u32x4_extend_high_u16x8(y)),
        );
        acc[0] = f32x4_add(acc[0], f32x4_mul(xl, yl));
        acc[1] = f32x4_add(acc[1], f32x4_mul(xh, yh));
    }
    let mut sum = hsum_f32(f32x4_add(acc[0], acc[1]));
    for (x, y) in wr.chunks_exact(2).zip(ar.chunks_exact(2)) {
        sum += scalar([x[0], x[1]]) * scalar([y[0], y[1]]);
    }
    sum
}

/// F16 · F16, accumulated in f32.
///
/// # Safety
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(super) unsafe fn dot_f16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (w, a) = float_rows(n, w, a, 2);
    dot_16bit(w, a, |v| f16_to_f32(v), h)
}

/// BF16 · BF16, accumulated in f32.
///
/// # Safety
/// The CPU must support simd128.
#[target_feature(enable = "simd128")]
pub(super) unsafe fn dot_bf16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (w, a) = float_rows(n, w, a, 2);
    dot_16bit(
        w,
        a,
        |v| bf16_to_f32(v),
        |b| f32::from_bits((u16::from_le_bytes(b) as u32) << 16),
    )
}

mod iq4;
pub(super) use iq4::{dot_iq4_nl, dot_iq4_xs};
