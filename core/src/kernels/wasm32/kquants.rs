//! Q4_K and Q6_K rows against Q8_K activations, several rows or tokens a call.
//!
//! As in `legacy.rs`, quants become int16 vectors in split order (each 16-element group:
//! its even elements, then its odd ones), which is how the nibbles come out of 16 packed bytes
//! read as int16 lanes, and the activations are prepared once per call in that order. A
//! super-block's integer sums are the scalar oracle's exactly: per 32-element sub-block (Q4_K)
//! or 16-element group (Q6_K) a chain of `i32x4.dot_i16x8_s` times the group's scale (the
//! kernel of four tokens multiplies the quants by the scale instead, once for all of them:
//! `q · scale` fits int16), the mins (Q4_K) and the `-32` offset (Q6_K) through the
//! activation's group sums. The float tail is the oracle's `sum += d·d8·isum - dmin·d8·msum`
//! in a vector lane per (row, token), with the f16 scales converted exactly (infinities and
//! NaNs included): bit for bit the oracle's result.

use core::arch::wasm32::*;
use core::marker::PhantomData;

#[cfg(not(target_feature = "relaxed-simd"))]
use super::common::nibbles;
use super::common::{
    f16_to_f32, fence, ld, rd32, reduce4, split_i8, Prep, RowKernel, PREP_VECTORS,
};

/// Bytes of a Q8_K activation block: d (f32), 256 quants, 16 group sums (i16).
const Q8_K_BYTES: usize = 292;
/// Prepared vectors per token and super-block: the 256 quants (16 groups' even and odd
/// halves as int16; as int8 bytes in the relaxed-simd build, `relaxed.rs`), then the 16
/// group sums (two vectors, at [`BSUMS`]).
#[cfg(not(target_feature = "relaxed-simd"))]
pub(super) const PREP_SB: usize = 34;
#[cfg(target_feature = "relaxed-simd")]
pub(super) const PREP_SB: usize = 18;
/// Where a prepared super-block's group sums are.
pub(super) const BSUMS: usize = PREP_SB - 2;

/// A k-quant weight format.
pub(super) trait KQuant {
    /// Bytes per super-block.
    const BYTES: usize;

    /// One row's super-block at `x` against one token's prepared super-block at `a`: the
    /// integer sum and the mins' sum (`Σ scale·q·y`, `Σ min·bsum`), in i32 lanes.
    ///
    /// # Safety
    /// `x` a whole super-block, `a` [`PREP_SB`] prepared vectors.
    unsafe fn row(x: *const u8, a: *const v128) -> (v128, v128);

    /// One row's super-block against four tokens' prepared super-blocks (`a + t · PREP_SB`):
    /// per token the integer sum and the mins' sum, in i32 lanes.
    ///
    /// # Safety
    /// As [`Self::row`], for four tokens.
    unsafe fn tokens(x: *const u8, a: *const v128) -> ([v128; 4], [v128; 4]);

    /// The f16 `d` and `dmin` of the super-block at `x` (`dmin` 0 where the format has none).
    ///
    /// # Safety
    /// `x` a whole super-block.
    unsafe fn scales(x: *const u8) -> (u16, u16);
}

pub(super) struct Q4K;
pub(super) struct Q6K;

/// Q4_K's eight 6-bit scales and eight mins, as bytes 0..8 and 8..16.
///
/// # Safety
/// `x` a whole super-block.
#[inline(always)]
pub(super) unsafe fn q4_k_scales_mins(x: *const u8) -> v128 {
    // SAFETY: the 12 scale bytes at 4..16.
    let (s0, s1, s2) = unsafe {
        let p = x.add(4) as *const u32;
        (rd32(p), rd32(p.add(1)), rd32(p.add(2)))
    };
    const M6: u32 = 0x3F3F_3F3F;
    const M4: u32 = 0x0F0F_0F0F;
    const M2: u32 = 0x0303_0303;
    u32x4(
        s0 & M6,
        (s2 & M4) | ((s0 >> 6) & M2) << 4,
        s1 & M6,
        ((s2 >> 4) & M4) | ((s1 >> 6) & M2) << 4,
    )
}

/// `w[0]·a[0] + w[1]·a[1]` in i32 lanes.
#[inline(always)]
pub(super) fn dot2(w0: v128, w1: v128, a0: v128, a1: v128) -> v128 {
    i32x4_add(i32x4_dot_i16x8(w0, a0), i32x4_dot_i16x8(w1, a1))
}

#[cfg(not(target_feature = "relaxed-simd"))]
impl KQuant for Q4K {
    const BYTES: usize = 144;

    #[inline(always)]
    unsafe fn row(x: *const u8, a: *const v128) -> (v128, v128) {
        // SAFETY: `x` is a whole super-block (the caller's contract).
        let sm = unsafe { q4_k_scales_mins(x) };
        let sc16 = u16x8_extend_low_u8x16(sm);
        let sc = [u32x4_extend_low_u16x8(sc16), u32x4_extend_high_u16x8(sc16)];
        let mut slot = i32x4_splat(0);
        let mut acc = i32x4_splat(0);
        for j in 0..4 {
            // SAFETY: quants at 16 + 32j .. 16 + 32j + 32; prepared groups 4j .. 4j + 4.
            let (w0, w1, a) = unsafe {
                (
                    nibbles(ld(x.add(16 + 32 * j))),
                    nibbles(ld(x.add(32 + 32 * j))),
                    a.add(8 * j),
                )
            };
            // SAFETY: prepared vectors 8j .. 8j + 8 (j < 4: within the caller's `PREP_SB`).
            let a: [v128; 8] = unsafe { core::array::from_fn(|i| *a.add(i)) };
            let lo = i32x4_add(
                dot2(w0[0], w0[1], a[0], a[1]),
                dot2(w1[0], w1[1], a[2], a[3]),
            );
            let hi = i32x4_add(
                dot2(w0[2], w0[3], a[4], a[5]),
                dot2(w1[2], w1[3], a[6], a[7]),
            );
            let (s_lo, s_hi) = match j {
                0 => (splat_lane::<0>(sc[0]), splat_lane::<1>(sc[0])),
                1 => (splat_lane::<2>(sc[0]), splat_lane::<3>(sc[0])),
                2 => (splat_lane::<0>(sc[1]), splat_lane::<1>(sc[1])),
                _ => (splat_lane::<2>(sc[1]), splat_lane::<3>(sc[1])),
            };
            acc = i32x4_add(acc, i32x4_add(i32x4_mul(lo, s_lo), i32x4_mul(hi, s_hi)));
            acc = fence(&mut slot, acc);
        }
        // SAFETY: the group sums follow the 32 prepared vectors.
        let msum = unsafe { mins_dot(sm, a.add(BSUMS)) };
        (acc, msum)
    }

    #[inline(always)]
    unsafe fn tokens(x: *const u8, a: *const v128) -> ([v128; 4], [v128; 4]) {
        // SAFETY: `x` is a whole super-block (the caller's contract).
        let sm = unsafe { q4_k_scales_mins(x) };
        let sc16 = u16x8_extend_low_u8x16(sm);
        let mut slot = i32x4_splat(0);
        let mut acc = [i32x4_splat(0); 4];
        for j in 0..4 {
            // SAFETY: as in `row`.
            let (w0, w1) = unsafe {
                (
                    nibbles(ld(x.add(16 + 32 * j))),
                    nibbles(ld(x.add(32 + 32 * j))),
                )
            };
            // the quants times their sub-block's scale (<= 15 · 63: int16)
            let (s_lo, s_hi) = match j {
                0 => (
                    i16x8_shuffle::<0, 0, 0, 0, 0, 0, 0, 0>(sc16, sc16),
                    i16x8_shuffle::<1, 1, 1, 1, 1, 1, 1, 1>(sc16, sc16),
                ),
                1 => (
                    i16x8_shuffle::<2, 2, 2, 2, 2, 2, 2, 2>(sc16, sc16),
                    i16x8_shuffle::<3, 3, 3, 3, 3, 3, 3, 3>(sc16, sc16),
                ),
                2 => (
                    i16x8_shuffle::<4, 4, 4, 4, 4, 4, 4, 4>(sc16, sc16),
                    i16x8_shuffle::<5, 5, 5, 5, 5, 5, 5, 5>(sc16, sc16),
                ),
                _ => (
                    i16x8_shuffle::<6, 6, 6, 6, 6, 6, 6, 6>(sc16, sc16),
                    i16x8_shuffle::<7, 7, 7, 7, 7, 7, 7, 7>(sc16, sc16),
                ),
            };
            let w = [
                i16x8_mul(w0[0], s_lo),
                i16x8_mul(w0[1], s_lo),
                i16x8_mul(w1[0], s_lo),
                i16x8_mul(w1[1], s_lo),
                i16x8_mul(w0[2], s_hi),
                i16x8_mul(w0[3], s_hi),
                i16x8_mul(w1[2], s_hi),
                i16x8_mul(w1[3], s_hi),
            ];
            for (t, acc) in acc.iter_mut().enumerate() {
                // SAFETY: token t's prepared groups 4j .. 4j + 4.
                let a: [v128; 8] =
                    unsafe { core::array::from_fn(|i| *a.add(t * PREP_SB + 8 * j + i)) };
                let s = i32x4_add(
                    i32x4_add(dot2(w[0], w[1], a[0], a[1]), dot2(w[2], w[3], a[2], a[3])),
                    i32x4_add(dot2(w[4], w[5], a[4], a[5]), dot2(w[6], w[7], a[6], a[7])),
                );
                *acc = fence(&mut slot, i32x4_add(*acc, s));
            }
        }
        // SAFETY: each token's group sums follow its 32 prepared vectors.
        let msum = unsafe { core::array::from_fn(|t| mins_dot(sm, a.add(t * PREP_SB + BSUMS))) };
        (acc, msum)
    }

    #[inline(always)]
    unsafe fn scales(x: *const u8) -> (u16, u16) {
        // SAFETY: d and dmin at 0..4.
        unsafe { (super::common::rd16(x), super::common::rd16(x.add(2))) }
    }
}

/// Lane `L` of `v` in all four lanes.
#[inline(always)]
#[cfg(not(target_feature = "relaxed-simd"))]
fn splat_lane<const L: usize>(v: v128) -> v128 {
    i32x4_shuffle::<L, L, L, L>(v, v)
}

/// `Σ min_j · (bsum[2j] + bsum[2j + 1])` in i32 lanes: the mins are bytes 8..16 of `sm`, the
/// 16 group sums two vectors at `bsums`.
///
/// # Safety
/// `bsums` two readable vectors.
#[inline(always)]
pub(super) unsafe fn mins_dot(sm: v128, bsums: *const v128) -> v128 {
    let m = u16x8_extend_high_u8x16(sm);
    let m_lo = i16x8_shuffle::<0, 0, 1, 1, 2, 2, 3, 3>(m, m);
    let m_hi = i16x8_shuffle::<4, 4, 5, 5, 6, 6, 7, 7>(m, m);
    // SAFETY: the caller's contract.
    unsafe { dot2(m_lo, m_hi, *bsums, *bsums.add(1)) }
}

/// The eight int16 vectors of a Q6_K piece: quants of elements `128n + 16h + {0, 32, 64, 96}
/// + 0..16` (groups `8n + h + {0, 2, 4, 6}`), each even then odd, from 16 bytes of `ql` at
/// `64n + 16h` (`l`), at `64n + 32 + 16h` (`m`) and 16 of `qh` at `32n + 16h` (`hb`).
#[inline(always)]
#[cfg(not(target_feature = "relaxed-simd"))]
fn q6_piece(l: v128, m: v128, hb: v128) -> [v128; 8] {
    let (nib, top) = (i16x8_splat(0x0F), i16x8_splat(0x30));
    let hi = |v: v128| v128_and(v, top);
    [
        v128_or(v128_and(l, nib), hi(i16x8_shl(hb, 4))),
        v128_or(v128_and(u16x8_shr(l, 8), nib), hi(u16x8_shr(hb, 4))),
        v128_or(v128_and(m, nib), hi(i16x8_shl(hb, 2))),
        v128_or(v128_and(u16x8_shr(m, 8), nib), hi(u16x8_shr(hb, 6))),
        v128_or(v128_and(u16x8_shr(l, 4), nib), hi(hb)),
        v128_or(u16x8_shr(l, 12), hi(u16x8_shr(hb, 8))),
        v128_or(v128_and(u16x8_shr(m, 4), nib), hi(u16x8_shr(hb, 2))),
        v128_or(u16x8_shr(m, 12), hi(u16x8_shr(hb, 10))),
    ]
}

/// Q6_K's 16 scales as int16 (two vectors) and `-32 · Σ scale · bsum` (the quants' `+32`
/// offset, taken off through the activation's group sums) in i32 lanes.
///
/// # Safety
/// `x` a whole super-block, `bsums` two readable vectors.
#[inline(always)]
pub(super) unsafe fn q6_scales(x: *const u8, bsums: *const v128) -> ([v128; 2], v128) {
    // SAFETY: the 16 scales at 192..208; the caller's contract.
    let (s, b0, b1) = unsafe { (ld(x.add(192)), *bsums, *bsums.add(1)) };
    let sc = [i16x8_extend_low_i8x16(s), i16x8_extend_high_i8x16(s)];
    let off = i32x4_shl(dot2(sc[0], sc[1], b0, b1), 5);
    (sc, i32x4_neg(off))
}

#[cfg(not(target_feature = "relaxed-simd"))]
impl KQuant for Q6K {
    const BYTES: usize = 210;

    #[inline(always)]
    unsafe fn row(x: *const u8, a: *const v128) -> (v128, v128) {
        // SAFETY: the group sums follow the 32 prepared vectors.
        let (sc, mut acc) = unsafe { q6_scales(x, a.add(BSUMS)) };
        let sc32 = [
            i32x4_extend_low_i16x8(sc[0]),
            i32x4_extend_high_i16x8(sc[0]),
            i32x4_extend_low_i16x8(sc[1]),
            i32x4_extend_high_i16x8(sc[1]),
        ];
        let mut slot = i32x4_splat(0);
        for n in 0..2 {
            for h in 0..2 {
                // SAFETY: ql, qh bytes inside the super-block; groups 8n + h + 2i prepared.
                let (q, a) = unsafe {
                    (
                        q6_piece(
                            ld(x.add(64 * n + 16 * h)),
                            ld(x.add(64 * n + 32 + 16 * h)),
                            ld(x.add(128 + 32 * n + 16 * h)),
                        ),
                        a.add(2 * (8 * n + h)),
                    )
                };
                for i in 0..4 {
                    // group 8n + h + 2i: lane (h + 2i) % 4 of scale vector 2n + (h + 2i) / 4
                    let g = h + 2 * i;
                    let s = sc32[2 * n + g / 4];
                    let s = match g % 4 {
                        0 => splat_lane::<0>(s),
                        1 => splat_lane::<1>(s),
                        2 => splat_lane::<2>(s),
                        _ => splat_lane::<3>(s),
                    };
                    // SAFETY: group 8n + h + 2i's two prepared vectors.
                    let p =
                        unsafe { dot2(q[2 * i], q[2 * i + 1], *a.add(4 * i), *a.add(4 * i + 1)) };
                    acc = i32x4_add(acc, i32x4_mul(p, s));
                }
                acc = fence(&mut slot, acc);
            }
        }
        (acc, i32x4_splat(0))
    }

    #[inline(always)]
    unsafe fn tokens(x: *const u8, a: *const v128) -> ([v128; 4], [v128; 4]) {
        let mut acc = [i32x4_splat(0); 4];
        let mut sc = [i16x8_splat(0); 2];
        for (t, acc) in acc.iter_mut().enumerate() {
            // SAFETY: token t's group sums follow its 32 prepared vectors.
            let (s, off) = unsafe { q6_scales(x, a.add(t * PREP_SB + BSUMS)) };
            (sc, *acc) = (s, off);
        }
        let mut slot = i32x4_splat(0);
        for (n, &sn) in sc.iter().enumerate() {
            for h in 0..2 {
                // SAFETY: as in `row`.
                let q = unsafe {
                    q6_piece(
                        ld(x.add(64 * n + 16 * h)),
                        ld(x.add(64 * n + 32 + 16 * h)),
                        ld(x.add(128 + 32 * n + 16 * h)),
                    )
                };
                // the quants times their group's scale (<= 63 · 128: int16)
                let q: [v128; 8] = core::array::from_fn(|k| {
                    let g = h + 2 * (k / 2);
                    let s = sn;
                    let s = match g {
                        0 => i16x8_shuffle::<0, 0, 0, 0, 0, 0, 0, 0>(s, s),
                        1 => i16x8_shuffle::<1, 1, 1, 1, 1, 1, 1, 1>(s, s),
                        2 => i16x8_shuffle::<2, 2, 2, 2, 2, 2, 2, 2>(s, s),
                        3 => i16x8_shuffle::<3, 3, 3, 3, 3, 3, 3, 3>(s, s),
                        4 => i16x8_shuffle::<4, 4, 4, 4, 4, 4, 4, 4>(s, s),
                        5 => i16x8_shuffle::<5, 5, 5, 5, 5, 5, 5, 5>(s, s),
                        6 => i16x8_shuffle::<6, 6, 6, 6, 6, 6, 6, 6>(s, s),
                        _ => i16x8_shuffle::<7, 7, 7, 7, 7, 7, 7, 7>(s, s),
                    };
                    i16x8_mul(q[k], s)
                });
                for (t, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: token t's groups 8n + h + 2i.
                    let a: [v128; 8] = unsafe {
                        let a = a.add(t * PREP_SB + 2 * (8 * n + h));
                        core::array::from_fn(|k| *a.add(4 * (k / 2) + k % 2))
                    };
                    let s = i32x4_add(
                        i32x4_add(dot2(q[0], q[1], a[0], a[1]), dot2(q[2], q[3], a[2], a[3])),
                        i32x4_add(dot2(q[4], q[5], a[4], a[5]), dot2(q[6], q[7], a[6], a[7])),
                    );
                    *acc = fence(&mut slot, i32x4_add(*acc, s));
                }
            }
        }
        (acc, [i32x4_splat(0); 4])
    }

    #[inline(always)]
    unsafe fn scales(x: *const u8) -> (u16, u16) {
        // SAFETY: d at 208..210.
        (unsafe { super::common::rd16(x.add(208)) }, 0)
    }
}

/// The row kernels of k-quant format `F` ([`RowKernel`] for `common::drive`).
pub(super) struct Rows<F>(PhantomData<F>);

impl<F: KQuant> RowKernel for Rows<F> {
    const QK: usize = 256;
    const BYTES: usize = F::BYTES;
    const ACT_BYTES: usize = Q8_K_BYTES;
    const PREP_BLOCKS: usize = PREP_VECTORS / PREP_SB;

    #[inline(always)]
    unsafe fn prepare(p: &mut Prep, a: *const u8, a_row: usize, t: usize, b0: usize, b1: usize) {
        let (q, scales) = (p.q(), p.scales());
        for b in b0..b1 {
            for tk in 0..t {
                let i = (b - b0) * t + tk;
                // SAFETY: token tk's block b is inside `a` and slot i inside the buffer (the
                // caller's contract).
                unsafe {
                    let y = a.add(tk * a_row + b * Q8_K_BYTES);
                    let dst = q.add(PREP_SB * i);
                    for g in 0..16 {
                        let v = ld(y.add(4 + 16 * g));
                        if cfg!(target_feature = "relaxed-simd") {
                            *dst.add(g) = v;
                        } else {
                            let [e, o] = split_i8(v);
                            *dst.add(2 * g) = e;
                            *dst.add(2 * g + 1) = o;
                        }
                    }
                    *dst.add(BSUMS) = ld(y.add(260));
                    *dst.add(BSUMS + 1) = ld(y.add(276));
                    *scales.add(i) = f32::from_le_bytes([*y, *y.add(1), *y.add(2), *y.add(3)]);
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
        let (q, scales) = (p.q(), p.scales());
        let mut slot = i32x4_splat(0);
        for b in b0..b1 {
            let i = b - b0;
            // SAFETY: super-block b of each row and slot i of the buffer (the caller's
            // contract).
            unsafe {
                let x0 = w.add(b * F::BYTES);
                let x: [*const u8; 4] = core::array::from_fn(|i| x0.add(i * stride));
                let a = q.add(PREP_SB * i);
                let mut is = [i32x4_splat(0); 4];
                let mut ms = [i32x4_splat(0); 4];
                for r in 0..4 {
                    let (s, m) = F::row(x[r], a);
                    is[r] = fence(&mut slot, s);
                    ms[r] = m;
                }
                let sc = x.map(|x| F::scales(x));
                let d = f16_to_f32(u32x4(
                    sc[0].0 as u32,
                    sc[1].0 as u32,
                    sc[2].0 as u32,
                    sc[3].0 as u32,
                ));
                let dmin = f16_to_f32(u32x4(
                    sc[0].1 as u32,
                    sc[1].1 as u32,
                    sc[2].1 as u32,
                    sc[3].1 as u32,
                ));
                let d8 = f32x4_splat(*scales.add(i));
                acc = tail(acc, d, dmin, d8, reduce4(is), reduce4(ms));
            }
        }
        (acc, false)
    }

    #[inline(always)]
    unsafe fn tokens<const H: usize>(
        w: *const u8,
        p: &mut Prep,
        b0: usize,
        b1: usize,
        mut acc: [v128; H],
    ) -> ([v128; H], bool) {
        let (q, scales) = (p.q(), p.scales());
        for b in b0..b1 {
            // the super-block's first prepared token (4H a super-block)
            let i = (b - b0) * 4 * H;
            // SAFETY: super-block b of the row and slots i .. i + 4H of the buffer (the
            // caller's contract).
            unsafe {
                let x = w.add(b * F::BYTES);
                let (d, dmin) = F::scales(x);
                let d = f16_to_f32(u32x4_splat(d as u32));
                let dmin = f16_to_f32(u32x4_splat(dmin as u32));
                for (h, acc) in acc.iter_mut().enumerate() {
                    let i = i + 4 * h;
                    let (is, ms) = F::tokens(x, q.add(PREP_SB * i));
                    let d8 = v128_load(scales.add(i) as *const v128);
                    *acc = tail(*acc, d, dmin, d8, reduce4(is), reduce4(ms));
                }
            }
        }
        (acc, false)
    }

    fn has_special(_block: &[u8]) -> bool {
        false
    }
}

/// The oracle's float step per lane: `acc + (d·d8·isum - dmin·d8·msum)`.
#[inline(always)]
fn tail(acc: v128, d: v128, dmin: v128, d8: v128, isum: v128, msum: v128) -> v128 {
    let x = f32x4_mul(f32x4_mul(d, d8), f32x4_convert_i32x4(isum));
    let m = f32x4_mul(f32x4_mul(dmin, d8), f32x4_convert_i32x4(msum));
    f32x4_add(acc, f32x4_sub(x, m))
}
