//! Q4_0, Q5_0 and Q8_0 rows against Q8_0 activations, several rows or tokens a call.
//!
//! A weight block becomes four int16 vectors in "split" order: the even elements of its
//! first 16, the odd ones, the even ones of the last 16, the odd ones. That is the order the
//! nibbles come out of 16 packed bytes read as int16 lanes (`v & 0xF`, `v >> 8 & 0xF`,
//! `v >> 4 & 0xF`, `v >> 12`: six operations for 32 quants, no widening), and the
//! activations are prepared once per call in the same order (`split_i8`), so a block's dot
//! product is four `i32x4.dot_i16x8_s`. Q4_0 and Q5_0 keep their quants unsigned
//! (0..15, 0..31) and take the offset off the block's exact sum with the activation block's
//! sum (`Σ (q - 8)·y = Σ q·y - 8·Σ y`).
//!
//! Per (row, token) the float arithmetic is the scalar oracle's, `sum += isum as f32 · (dx ·
//! dy)` block after block, in a vector lane: four rows' block sums are reduced to one vector
//! (`reduce4`) and scaled by the four rows' f16 scales at once (their bits moved into place,
//! the rebias folded into the prepared activation scale), so the result is the oracle's bit
//! for bit.

use core::arch::wasm32::*;
use core::marker::PhantomData;

#[cfg(not(target_feature = "relaxed-simd"))]
use super::common::nibbles;
use super::common::{
    dot4, f16_bits, f16_bits4, f16_special, fence, hsum_i32, ld, rd16, reduce4, split_i8, Prep,
    RowKernel, F16_REBIAS, PREP_SCALARS, PREP_VECTORS,
};
use crate::quant::legacy::h;

/// A 32-element weight format whose blocks start with an f16 scale and dot with Q8_0: how a
/// block's quants are taken apart and multiplied with a prepared activation block (int16
/// vectors in split order here; the relaxed-simd build's Q4_0 and Q5_0 use int8 bytes,
/// `relaxed.rs`).
pub(super) trait Legacy {
    /// Bytes per block.
    const BYTES: usize;
    /// `log2` of the offset the unsigned quants carry (0: signed quants, none).
    const SHIFT: u32;
    /// Vectors of a prepared activation block.
    const PREP: usize;
    /// A block's quants, taken apart.
    type W: Copy;
    /// Constants the decoding uses, made once per kernel call (see `relaxed.rs`).
    type C: Copy;

    /// [`Self::C`].
    fn consts() -> Self::C;

    /// The quants of the block at `x`.
    ///
    /// # Safety
    /// `x` must point to a whole block.
    unsafe fn weights(x: *const u8, c: Self::C) -> Self::W;

    /// `Σ q · y` of a block's quants and a prepared activation block at `a`, in i32 lanes.
    ///
    /// # Safety
    /// `a` must point to [`Self::PREP`] vectors.
    unsafe fn dot(w: Self::W, a: *const v128, c: Self::C) -> v128;

    /// The four blocks' sums `[Σ p[0], Σ p[1], Σ p[2], Σ p[3]]` of four [`Self::dot`]s, in
    /// i32 lanes (the relaxed-simd build's dots leave int16 lanes, widened here).
    #[inline(always)]
    fn reduce4(p: [v128; 4], _c: Self::C) -> v128 {
        reduce4(p)
    }

    /// Prepares the quants of the Q8_0 block at `y` into [`Self::PREP`] vectors at `dst`.
    ///
    /// # Safety
    /// `y` a whole Q8_0 block, `dst` writable.
    unsafe fn prep(y: *const u8, dst: *mut v128);
}

pub(super) struct Q4_0;
pub(super) struct Q5_0;
pub(super) struct Q8_0;

/// A Q8_0 activation block's 32 quants as four int16 vectors in split order.
///
/// # Safety
/// As [`Legacy::prep`] with four vectors.
#[inline(always)]
unsafe fn prep_split(y: *const u8, dst: *mut v128) {
    // SAFETY: the caller's contract.
    unsafe {
        let [e0, o0] = split_i8(ld(y.add(2)));
        let [e1, o1] = split_i8(ld(y.add(18)));
        *dst = e0;
        *dst.add(1) = o0;
        *dst.add(2) = e1;
        *dst.add(3) = o1;
    }
}

#[cfg(not(target_feature = "relaxed-simd"))]
impl Legacy for Q4_0 {
    const BYTES: usize = 18;
    const SHIFT: u32 = 3;
    const PREP: usize = 4;
    type W = [v128; 4];
    type C = ();

    #[inline(always)]
    fn consts() {}

    #[inline(always)]
    unsafe fn weights(x: *const u8, _: ()) -> [v128; 4] {
        // SAFETY: the 16 quant bytes follow the scale.
        nibbles(unsafe { ld(x.add(2)) })
    }

    #[inline(always)]
    unsafe fn dot(w: [v128; 4], a: *const v128, _: ()) -> v128 {
        // SAFETY: the caller's contract.
        unsafe { dot4(w, a) }
    }

    #[inline(always)]
    unsafe fn prep(y: *const u8, dst: *mut v128) {
        // SAFETY: the caller's contract.
        unsafe { prep_split(y, dst) }
    }
}

#[cfg(not(target_feature = "relaxed-simd"))]
impl Legacy for Q5_0 {
    const BYTES: usize = 22;
    const SHIFT: u32 = 0;
    const PREP: usize = 4;
    type W = [v128; 4];
    type C = ();

    #[inline(always)]
    fn consts() {}

    /// Signed quants: `nibble - 16` where the fifth bit is clear, tested in int16 lanes
    /// against the low or high half of `qh` (element `2j` of a half: bit `2j`, odd `2j + 1`).
    #[inline(always)]
    unsafe fn weights(x: *const u8, _: ()) -> [v128; 4] {
        // SAFETY: qh at 2..6 and the 16 quant bytes at 6..22 of the block.
        let (lo, hi, v) = unsafe {
            (
                v128_load16_splat(x.add(2) as *const u16),
                v128_load16_splat(x.add(4) as *const u16),
                ld(x.add(6)),
            )
        };
        let even = i16x8(1, 4, 16, 64, 256, 1024, 4096, 16384);
        let odd = i16x8(2, 8, 32, 128, 512, 2048, 8192, -32768);
        let minus16 = i16x8_splat(-16);
        // -16 in lanes whose bit is clear
        let off = |h: v128, m: v128| v128_and(i16x8_eq(v128_and(h, m), i16x8_splat(0)), minus16);
        let [n0, n1, n2, n3] = nibbles(v);
        [
            i16x8_add(n0, off(lo, even)),
            i16x8_add(n1, off(lo, odd)),
            i16x8_add(n2, off(hi, even)),
            i16x8_add(n3, off(hi, odd)),
        ]
    }

    #[inline(always)]
    unsafe fn dot(w: [v128; 4], a: *const v128, _: ()) -> v128 {
        // SAFETY: the caller's contract.
        unsafe { dot4(w, a) }
    }

    #[inline(always)]
    unsafe fn prep(y: *const u8, dst: *mut v128) {
        // SAFETY: the caller's contract.
        unsafe { prep_split(y, dst) }
    }
}

impl Legacy for Q8_0 {
    const BYTES: usize = 34;
    const SHIFT: u32 = 0;
    const PREP: usize = 4;
    type W = [v128; 4];
    type C = ();

    #[inline(always)]
    fn consts() {}

    #[inline(always)]
    unsafe fn weights(x: *const u8, _: ()) -> [v128; 4] {
        // SAFETY: the 32 quant bytes follow the scale.
        let (v0, v1) = unsafe { (ld(x.add(2)), ld(x.add(18))) };
        let [e0, o0] = split_i8(v0);
        let [e1, o1] = split_i8(v1);
        [e0, o0, e1, o1]
    }

    #[inline(always)]
    unsafe fn dot(w: [v128; 4], a: *const v128, _: ()) -> v128 {
        // SAFETY: the caller's contract.
        unsafe { dot4(w, a) }
    }

    #[inline(always)]
    unsafe fn prep(y: *const u8, dst: *mut v128) {
        // SAFETY: the caller's contract.
        unsafe { prep_split(y, dst) }
    }
}

/// The row kernels of format `F` ([`RowKernel`] for `common::drive`).
pub(super) struct Rows<F>(PhantomData<F>);

/// Bytes of a Q8_0 activation block.
const Q8_0_BYTES: usize = 34;

impl<F: Legacy> RowKernel for Rows<F> {
    const QK: usize = 32;
    const BYTES: usize = F::BYTES;
    const ACT_BYTES: usize = Q8_0_BYTES;
    const PREP_BLOCKS: usize = if PREP_VECTORS / F::PREP < PREP_SCALARS {
        PREP_VECTORS / F::PREP
    } else {
        PREP_SCALARS
    };

    #[inline(always)]
    unsafe fn prepare(p: &mut Prep, a: *const u8, a_row: usize, t: usize, b0: usize, b1: usize) {
        let (q, sums, scales) = (p.q(), p.sums(), p.scales());
        for b in b0..b1 {
            for tk in 0..t {
                let i = (b - b0) * t + tk;
                // SAFETY: token tk's block b is inside `a` and slot i inside the buffer (the
                // caller's contract).
                unsafe {
                    let y = a.add(tk * a_row + b * Q8_0_BYTES);
                    F::prep(y, q.add(F::PREP * i));
                    let s16 = i16x8_add(
                        i16x8_extadd_pairwise_i8x16(ld(y.add(2))),
                        i16x8_extadd_pairwise_i8x16(ld(y.add(18))),
                    );
                    *sums.add(i) = hsum_i32(i32x4_extadd_pairwise_i16x8(s16)) << F::SHIFT;
                    *scales.add(i) = h([*y, *y.add(1)]) * F16_REBIAS;
                }
            }
        }
    }

    #[inline(always)]
    unsafe fn rows4(
        w: *const u8,
        stride: usize,
        p: &mut Prep,
        b0: usize,
        b1: usize,
        mut acc: v128,
    ) -> (v128, bool) {
        let (q, sums, scales) = (p.q(), p.sums(), p.scales());
        let c = F::consts();
        let mut flag = i16x8_splat(0);
        let mut slot = i16x8_splat(0);
        // block b's four integer sums (lane r: row r)
        let block = |b: usize, slot: &mut v128| {
            let i = b - b0;
            // SAFETY: block b of each row and slot i of the buffer (the caller's contract).
            unsafe {
                let x0 = w.add(b * F::BYTES);
                let x: [*const u8; 4] = core::array::from_fn(|i| x0.add(i * stride));
                let a = q.add(F::PREP * i);
                let isum = F::reduce4(
                    [
                        fence(slot, F::dot(F::weights(x[0], c), a, c)),
                        fence(slot, F::dot(F::weights(x[1], c), a, c)),
                        fence(slot, F::dot(F::weights(x[2], c), a, c)),
                        fence(slot, F::dot(F::weights(x[3], c), a, c)),
                    ],
                    c,
                );
                if F::SHIFT > 0 {
                    i32x4_sub(isum, i32x4_splat(*sums.add(i)))
                } else {
                    isum
                }
            }
        };
        // the rows' f16 scales of block b in lanes 0..4, of block b + 1 (when `two`) in 4..8
        let row_scales = |b: usize, two: bool| -> v128 {
            // SAFETY: the scales of each row's blocks b (and b + 1 when `two`).
            unsafe {
                let x0 = w.add(b * F::BYTES);
                let (x1, x2, x3) = (x0.add(stride), x0.add(2 * stride), x0.add(3 * stride));
                let raw = i16x8_splat(0);
                let raw = v128_load16_lane::<0>(raw, x0 as *const u16);
                let raw = v128_load16_lane::<1>(raw, x1 as *const u16);
                let raw = v128_load16_lane::<2>(raw, x2 as *const u16);
                let raw = v128_load16_lane::<3>(raw, x3 as *const u16);
                if !two {
                    return raw;
                }
                let raw = v128_load16_lane::<4>(raw, x0.add(F::BYTES) as *const u16);
                let raw = v128_load16_lane::<5>(raw, x1.add(F::BYTES) as *const u16);
                let raw = v128_load16_lane::<6>(raw, x2.add(F::BYTES) as *const u16);
                v128_load16_lane::<7>(raw, x3.add(F::BYTES) as *const u16)
            }
        };
        // `acc + isum · (dx · dy)` per lane, the scalar oracle's step
        let step = |acc: v128, isum: v128, dx: v128, b: usize| {
            // SAFETY: slot b - b0 of the buffer.
            let dy = unsafe { f32x4_splat(*scales.add(b - b0)) };
            f32x4_add(
                acc,
                f32x4_mul(f32x4_convert_i32x4(isum), f32x4_mul(f16_bits4(dx), dy)),
            )
        };
        // two blocks a loop (their scales in one vector), then a last odd one
        let mut b = b0;
        while b + 2 <= b1 {
            let (s0, s1) = (block(b, &mut slot), block(b + 1, &mut slot));
            let raw = row_scales(b, true);
            flag = u16x8_max(flag, i16x8_shl(raw, 1));
            acc = step(acc, s0, i32x4_extend_low_i16x8(raw), b);
            acc = step(acc, s1, i32x4_extend_high_i16x8(raw), b + 1);
            b += 2;
        }
        if b < b1 {
            let s0 = block(b, &mut slot);
            let raw = row_scales(b, false);
            flag = u16x8_max(flag, i16x8_shl(raw, 1));
            acc = step(acc, s0, i32x4_extend_low_i16x8(raw), b);
        }
        // an f16 with an all-ones exponent: (bits << 1) >= 0xF800
        (acc, v128_any_true(u16x8_ge(flag, u16x8_splat(0xF800))))
    }

    #[inline(always)]
    unsafe fn tokens<const H: usize>(
        w: *const u8,
        p: &mut Prep,
        b0: usize,
        b1: usize,
        mut acc: [v128; H],
    ) -> ([v128; H], bool) {
        let (q, sums, scales) = (p.q(), p.sums(), p.scales());
        let c = F::consts();
        let mut special = false;
        let mut slot = i32x4_splat(0);
        for b in b0..b1 {
            // the block's first prepared token (4H a block)
            let i = (b - b0) * 4 * H;
            // SAFETY: block b of the row and slots i .. i + 4H of the buffer (the caller's
            // contract).
            unsafe {
                let x = w.add(b * F::BYTES);
                let wv = F::weights(x, c);
                let dx = rd16(x);
                special |= f16_special(dx);
                let dx = f32x4_splat(f16_bits(dx));
                for (h, acc) in acc.iter_mut().enumerate() {
                    let (i, a) = (i + 4 * h, q.add(F::PREP * (i + 4 * h)));
                    let mut isum = F::reduce4(
                        [
                            F::dot(wv, a, c),
                            F::dot(wv, a.add(F::PREP), c),
                            F::dot(wv, a.add(2 * F::PREP), c),
                            F::dot(wv, a.add(3 * F::PREP), c),
                        ],
                        c,
                    );
                    if F::SHIFT > 0 {
                        isum = i32x4_sub(isum, v128_load(sums.add(i) as *const v128));
                    }
                    let d = f32x4_mul(dx, v128_load(scales.add(i) as *const v128));
                    *acc = fence(
                        &mut slot,
                        f32x4_add(*acc, f32x4_mul(f32x4_convert_i32x4(isum), d)),
                    );
                }
            }
        }
        (acc, special)
    }

    fn has_special(block: &[u8]) -> bool {
        f16_special(u16::from_le_bytes([block[0], block[1]]))
    }
}
