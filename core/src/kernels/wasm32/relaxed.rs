//! The relaxed-simd build's quant decoding (`-C target-feature=+simd128,+relaxed-simd`):
//! `i16x8.relaxed_dot_i8x16_i7x16_s` multiplies int8 activations by weights in 0..127 and
//! sums the pairs into int16 (x86 `pmaddubsw`, ARM `sdot`-like), so Q4_0, Q5_0 (and the
//! k-quants, `kquants.rs`) keep their quants as unsigned bytes, as they are stored: no
//! widening to int16 and no split, a third of the operations of the plain build's decoding.
//! Every product stays exact (|pair sum| <= 2 · 127 · 128 < 2^15: no saturation on any
//! implementation) and the blocks' integer sums are the plain build's, so the results are the
//! same bits (the row kernels' parity test runs in both builds).

use core::arch::wasm32::*;

use super::common::{fence, ld, rd16};
use super::kquants::{mins_dot, q4_k_scales_mins, q6_scales, KQuant, BSUMS, PREP_SB, Q4K, Q6K};
use super::legacy::{Legacy, Q4_0, Q5_0};

/// `Σ w · y` of two vectors of unsigned weights (at most 31) and two of int8 activations at
/// `a`, in int16 lanes: each lane the sum of four products, `|·| <= 4 · 31 · 128 = 15872`,
/// so that two lanes still add in int16 ([`reduce4_i16`]).
///
/// # Safety
/// `a` must point to two readable vectors.
#[inline(always)]
pub(super) unsafe fn dot_u5(w: [v128; 2], a: *const v128) -> v128 {
    // SAFETY: the caller's contract.
    let (a0, a1) = unsafe { (*a, *a.add(1)) };
    i16x8_add(
        i16x8_relaxed_dot_i8x16_i7x16(a0, w[0]),
        i16x8_relaxed_dot_i8x16_i7x16(a1, w[1]),
    )
}

/// `[Σ p[0], .., Σ p[3]]` in i32 lanes of four [`dot_u5`]s (int16 lanes): two rows' lanes
/// added pairwise in int16 (at most 31744: exact), then widened by `i32x4.dot_i16x8_s` with
/// `ones` (`i16x8.splat(1)`, made once per call: as a constant LLVM would widen through
/// `i32x4.extadd_pairwise_i16x8_s`, which V8 feeds from memory through a second instruction):
/// two widenings and five shuffles for four blocks instead of four and six.
#[inline(always)]
pub(super) fn reduce4_i16(p: [v128; 4], ones: v128) -> v128 {
    let pair = |a: v128, b: v128| {
        let t = i16x8_add(
            i32x4_shuffle::<0, 4, 1, 5>(a, b),
            i32x4_shuffle::<2, 6, 3, 7>(a, b),
        );
        i32x4_dot_i16x8(t, ones)
    };
    let (u01, u23) = (pair(p[0], p[1]), pair(p[2], p[3]));
    i32x4_add(
        i32x4_shuffle::<0, 1, 4, 5>(u01, u23),
        i32x4_shuffle::<2, 3, 6, 7>(u01, u23),
    )
}

/// Reads vector `i` of a 16-byte aligned table through a volatile load: LLVM sees a value it
/// cannot fold (see [`Q5_HIGH`]), made once per kernel call.
#[inline(always)]
fn opaque(t: &Aligned, i: usize) -> v128 {
    // SAFETY: an aligned, readable vector of the table.
    unsafe { core::ptr::read_volatile((t.0.as_ptr() as *const v128).add(i)) }
}

/// A Q8_0 activation block's 32 quants as two vectors of int8, in element order.
///
/// # Safety
/// As [`Legacy::prep`] with two vectors.
#[inline(always)]
unsafe fn prep_bytes(y: *const u8, dst: *mut v128) {
    // SAFETY: the caller's contract.
    unsafe {
        *dst = ld(y.add(2));
        *dst.add(1) = ld(y.add(18));
    }
}

/// The low and high nibbles of 16 packed bytes (elements `k` and `16 + k`).
#[inline(always)]
pub(super) fn nibbles_u8(v: v128) -> [v128; 2] {
    let m = u8x16_splat(0x0F);
    [v128_and(v, m), v128_and(u16x8_shr(v, 4), m)]
}

impl Legacy for Q4_0 {
    const BYTES: usize = 18;
    const SHIFT: u32 = 3;
    const PREP: usize = 2;
    type W = [v128; 2];
    type C = v128;

    #[inline(always)]
    fn consts() -> v128 {
        opaque(&Q5_HIGH, 3)
    }

    #[inline(always)]
    unsafe fn weights(x: *const u8, _: v128) -> [v128; 2] {
        // SAFETY: the 16 quant bytes follow the scale.
        nibbles_u8(unsafe { ld(x.add(2)) })
    }

    #[inline(always)]
    unsafe fn dot(w: [v128; 2], a: *const v128, _: v128) -> v128 {
        // SAFETY: the caller's contract.
        unsafe { dot_u5(w, a) }
    }

    #[inline(always)]
    fn reduce4(p: [v128; 4], ones: v128) -> v128 {
        reduce4_i16(p, ones)
    }

    #[inline(always)]
    unsafe fn prep(y: *const u8, dst: *mut v128) {
        // SAFETY: the caller's contract.
        unsafe { prep_bytes(y, dst) }
    }
}

/// Byte `k` of `qh`'s bytes `0, 0, .., 1, 1, ..` (elements 0..16) and `2, .., 3, ..` (16..32),
/// the bit of its element in each lane, and int16 ones. Read through volatile loads
/// ([`opaque`]): as constants, LLVM would turn the bit test `(h & bit) == bit` into
/// `(h & bit) != 0`, which V8 makes three instructions (x86 has no byte "not equal").
static Q5_HIGH: Aligned = Aligned([
    [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1],
    [2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3],
    [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128],
    [1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0],
]);

/// Vectors of a table, 16-byte aligned (for volatile loads).
#[repr(C, align(16))]
struct Aligned([[u8; 16]; 4]);

impl Legacy for Q5_0 {
    const BYTES: usize = 22;
    const SHIFT: u32 = 4;
    const PREP: usize = 2;
    type W = [v128; 2];
    /// The table's four vectors.
    type C = [v128; 4];

    #[inline(always)]
    fn consts() -> [v128; 4] {
        core::array::from_fn(|i| opaque(&Q5_HIGH, i))
    }

    /// Unsigned quants 0..31: the nibbles, plus 16 where the element's bit of `qh` is set.
    #[inline(always)]
    unsafe fn weights(x: *const u8, c: [v128; 4]) -> [v128; 2] {
        let [lo_idx, hi_idx, bit, _] = c;
        // SAFETY: bytes 2..18 (qh and 12 quant bytes) and 6..22 (the quant bytes) of the
        // block.
        let (hq, v) = unsafe { (ld(x.add(2)), ld(x.add(6))) };
        let [lo, hi] = nibbles_u8(v);
        let five = u8x16_splat(0x10);
        let high = |idx: v128| {
            let h = v128_and(i8x16_relaxed_swizzle(hq, idx), bit);
            v128_and(i8x16_eq(h, bit), five)
        };
        [v128_or(lo, high(lo_idx)), v128_or(hi, high(hi_idx))]
    }

    #[inline(always)]
    unsafe fn dot(w: [v128; 2], a: *const v128, _: [v128; 4]) -> v128 {
        // SAFETY: the caller's contract.
        unsafe { dot_u5(w, a) }
    }

    #[inline(always)]
    fn reduce4(p: [v128; 4], c: [v128; 4]) -> v128 {
        reduce4_i16(p, c[3])
    }

    #[inline(always)]
    unsafe fn prep(y: *const u8, dst: *mut v128) {
        // SAFETY: the caller's contract.
        unsafe { prep_bytes(y, dst) }
    }
}

/// Lane `k` of eight int16 in all eight lanes (a broadcast load from a stack copy).
#[inline(always)]
fn splat16(v: &[i16; 8], k: usize) -> v128 {
    // SAFETY: k < 8 (callers pass constants).
    unsafe { v128_load16_splat(v.as_ptr().add(k) as *const u16) }
}

/// `Σ scale · (Σ q · y)` of one 32-element Q4_K sub-block pair: `lo` (quants of chunks `c`,
/// `c + 1`) with scale `s_lo`, `hi` (chunks `c + 2`, `c + 3`) with `s_hi`, against one
/// token's chunks at `a`. The int16 pair sums are at most 2 · 2 · 15 · 128 (they fit) and the
/// scale multiplies them into i32 lanes (`i32x4.dot_i16x8_s`).
///
/// # Safety
/// `a` must point to four readable vectors.
#[inline(always)]
unsafe fn q4_k_pair(lo: [v128; 2], hi: [v128; 2], a: *const v128, s_lo: v128, s_hi: v128) -> v128 {
    // SAFETY: the caller's contract.
    let a: [v128; 4] = unsafe { core::array::from_fn(|i| *a.add(i)) };
    let p_lo = i16x8_add(
        i16x8_relaxed_dot_i8x16_i7x16(a[0], lo[0]),
        i16x8_relaxed_dot_i8x16_i7x16(a[1], lo[1]),
    );
    let p_hi = i16x8_add(
        i16x8_relaxed_dot_i8x16_i7x16(a[2], hi[0]),
        i16x8_relaxed_dot_i8x16_i7x16(a[3], hi[1]),
    );
    i32x4_add(i32x4_dot_i16x8(p_lo, s_lo), i32x4_dot_i16x8(p_hi, s_hi))
}

/// Q4_K's eight sub-block scales as int16 (from `q4_k_scales_mins`' bytes 0..8).
#[inline(always)]
fn q4_k_scales16(sm: v128) -> [i16; 8] {
    let mut s = [0i16; 8];
    // SAFETY: 16 writable bytes.
    unsafe { v128_store(s.as_mut_ptr() as *mut v128, u16x8_extend_low_u8x16(sm)) };
    s
}

impl KQuant for Q4K {
    const BYTES: usize = 144;

    #[inline(always)]
    unsafe fn row(x: *const u8, a: *const v128) -> (v128, v128) {
        // SAFETY: a whole super-block (the caller's contract).
        let sm = unsafe { q4_k_scales_mins(x) };
        let sc = q4_k_scales16(sm);
        let mut slot = i32x4_splat(0);
        let mut acc = i32x4_splat(0);
        for j in 0..4 {
            // SAFETY: quants at 16 + 32j .. 16 + 32j + 32; prepared chunks 4j .. 4j + 4.
            unsafe {
                let [lo0, hi0] = nibbles_u8(ld(x.add(16 + 32 * j)));
                let [lo1, hi1] = nibbles_u8(ld(x.add(32 + 32 * j)));
                let (s_lo, s_hi) = (splat16(&sc, 2 * j), splat16(&sc, 2 * j + 1));
                let p = q4_k_pair([lo0, lo1], [hi0, hi1], a.add(4 * j), s_lo, s_hi);
                acc = fence(&mut slot, i32x4_add(acc, p));
            }
        }
        // SAFETY: the group sums of the prepared super-block.
        (acc, unsafe { mins_dot(sm, a.add(BSUMS)) })
    }

    #[inline(always)]
    unsafe fn tokens(x: *const u8, a: *const v128) -> ([v128; 4], [v128; 4]) {
        // SAFETY: as in `row`, for each token's prepared super-block.
        let sm = unsafe { q4_k_scales_mins(x) };
        let sc = q4_k_scales16(sm);
        let mut slot = i32x4_splat(0);
        let mut acc = [i32x4_splat(0); 4];
        for j in 0..4 {
            // SAFETY: as in `row`.
            let (w0, w1) = unsafe {
                (
                    nibbles_u8(ld(x.add(16 + 32 * j))),
                    nibbles_u8(ld(x.add(32 + 32 * j))),
                )
            };
            let (s_lo, s_hi) = (splat16(&sc, 2 * j), splat16(&sc, 2 * j + 1));
            for (t, acc) in acc.iter_mut().enumerate() {
                // SAFETY: token t's chunks 4j .. 4j + 4.
                let p = unsafe {
                    let at = a.add(t * PREP_SB + 4 * j);
                    q4_k_pair([w0[0], w1[0]], [w0[1], w1[1]], at, s_lo, s_hi)
                };
                *acc = fence(&mut slot, i32x4_add(*acc, p));
            }
        }
        // SAFETY: each token's group sums.
        let msum = unsafe { core::array::from_fn(|t| mins_dot(sm, a.add(t * PREP_SB + BSUMS))) };
        (acc, msum)
    }

    #[inline(always)]
    unsafe fn scales(x: *const u8) -> (u16, u16) {
        // SAFETY: d and dmin at 0..4.
        unsafe { (rd16(x), rd16(x.add(2))) }
    }
}

/// A Q6_K piece as unsigned bytes (0..63): elements `128n + 16h + {0, 32, 64, 96} + 0..16`
/// (groups `8n + h + {0, 2, 4, 6}`) from 16 bytes of `ql` at `64n + 16h` (`l`), at
/// `64n + 32 + 16h` (`m`) and 16 of `qh` at `32n + 16h` (`hb`). The two-bit fields of `qh`
/// land on bits 4..6 through 16-bit shifts (the mask drops what crosses a byte).
#[inline(always)]
fn q6_piece_u8(l: v128, m: v128, hb: v128) -> [v128; 4] {
    let (nib, top) = (u8x16_splat(0x0F), u8x16_splat(0x30));
    [
        v128_or(v128_and(l, nib), v128_and(i16x8_shl(hb, 4), top)),
        v128_or(v128_and(m, nib), v128_and(i16x8_shl(hb, 2), top)),
        v128_or(v128_and(u16x8_shr(l, 4), nib), v128_and(hb, top)),
        v128_or(
            v128_and(u16x8_shr(m, 4), nib),
            v128_and(u16x8_shr(hb, 2), top),
        ),
    ]
}

/// Q6_K's 16 group scales as int16, and the `-32` offset's `-32 · Σ scale · bsum` (i32 lanes).
///
/// # Safety
/// As `q6_scales`.
#[inline(always)]
unsafe fn q6_k_scales16(x: *const u8, bsums: *const v128) -> ([i16; 16], v128) {
    // SAFETY: the caller's contract.
    let (sc, off) = unsafe { q6_scales(x, bsums) };
    let mut s = [0i16; 16];
    // SAFETY: 32 writable bytes.
    unsafe {
        v128_store(s.as_mut_ptr() as *mut v128, sc[0]);
        v128_store(s.as_mut_ptr().add(8) as *mut v128, sc[1]);
    }
    (s, off)
}

/// `Σ_i scale_gi · (Σ q · y)` over a piece's four groups `g_i` (at `a + 2i` of the piece's
/// chunks: groups `8n + h + 2i`), against one token.
///
/// # Safety
/// `a` must point to seven readable vectors.
#[inline(always)]
unsafe fn q6_k_piece_dot(q: [v128; 4], a: *const v128, sc: &[i16; 16], g0: usize) -> v128 {
    let part = |i: usize| {
        // SAFETY: the caller's contract; g0 + 2i < 16.
        let (a, s) = unsafe {
            (
                *a.add(2 * i),
                v128_load16_splat(sc.as_ptr().add(g0 + 2 * i) as *const u16),
            )
        };
        // |pair sum| <= 2 · 63 · 128: int16; times the scale in i32 lanes
        i32x4_dot_i16x8(i16x8_relaxed_dot_i8x16_i7x16(a, q[i]), s)
    };
    i32x4_add(i32x4_add(part(0), part(1)), i32x4_add(part(2), part(3)))
}

impl KQuant for Q6K {
    const BYTES: usize = 210;

    #[inline(always)]
    unsafe fn row(x: *const u8, a: *const v128) -> (v128, v128) {
        // SAFETY: the group sums of the prepared super-block.
        let (sc, mut acc) = unsafe { q6_k_scales16(x, a.add(BSUMS)) };
        let mut slot = i32x4_splat(0);
        for n in 0..2 {
            for h in 0..2 {
                // SAFETY: ql, qh bytes inside the super-block; chunks 8n + h + 2i prepared.
                unsafe {
                    let q = q6_piece_u8(
                        ld(x.add(64 * n + 16 * h)),
                        ld(x.add(64 * n + 32 + 16 * h)),
                        ld(x.add(128 + 32 * n + 16 * h)),
                    );
                    let g0 = 8 * n + h;
                    acc = fence(
                        &mut slot,
                        i32x4_add(acc, q6_k_piece_dot(q, a.add(g0), &sc, g0)),
                    );
                }
            }
        }
        (acc, i32x4_splat(0))
    }

    #[inline(always)]
    unsafe fn tokens(x: *const u8, a: *const v128) -> ([v128; 4], [v128; 4]) {
        let mut acc = [i32x4_splat(0); 4];
        let mut sc = [0i16; 16];
        for (t, acc) in acc.iter_mut().enumerate() {
            // SAFETY: token t's group sums.
            (sc, *acc) = unsafe { q6_k_scales16(x, a.add(t * PREP_SB + BSUMS)) };
        }
        let mut slot = i32x4_splat(0);
        for n in 0..2 {
            for h in 0..2 {
                // SAFETY: as in `row`.
                let q = unsafe {
                    q6_piece_u8(
                        ld(x.add(64 * n + 16 * h)),
                        ld(x.add(64 * n + 32 + 16 * h)),
                        ld(x.add(128 + 32 * n + 16 * h)),
                    )
                };
                let g0 = 8 * n + h;
                for (t, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: token t's chunks 8n + h + 2i.
                    let p = unsafe { q6_k_piece_dot(q, a.add(t * PREP_SB + g0), &sc, g0) };
                    *acc = fence(&mut slot, i32x4_add(*acc, p));
                }
            }
        }
        (acc, [i32x4_splat(0); 4])
    }

    #[inline(always)]
    unsafe fn scales(x: *const u8) -> (u16, u16) {
        // SAFETY: d at 208..210.
        (unsafe { rd16(x.add(208)) }, 0)
    }
}
