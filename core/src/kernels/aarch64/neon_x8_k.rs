//! NEON + SDOT kernels over the interleaved k-quant layouts (Q4_K × 8, Q5_K × 8, Q6_K × 8); see
//! `neon_x8.rs` for the scheme. Per super-block and token a block function returns the eight
//! rows' float terms, `d * d8 * isum - dmin * d8 * msum` from exact integer sums, rounded as
//! `quant::kquants::dot_q8_k` rounds them, and the drivers add them up super-block after
//! super-block (`sum += term`), so the results are the scalar kernel's bit for bit.
//!
//! Q5_K × 8 is Q4_K × 8 followed by the fifth bits (`quant::interleaved::q5_k`): its kernels
//! are Q4_K's with each nibble's fifth bit ORed in (5-bit values, still non-negative int8).
//!
//! Each 32-element sub-block (Q4_K) or 16-element group (Q6_K) is summed on its own (one
//! `SDOT` chain per token and half), then multiplied by the rows' scales (`MLA`). For a tile
//! of up to [`TILE`] tokens one sub-block or group at a time keeps every token's sums in
//! registers; Q4_K's odd sub-blocks and Q6_K's fourth quants then read their chunks again
//! from L1 (through [`opaque`](super::neon_x8::opaque), so the compiler does not keep the
//! first reads live instead). The matrix × vector kernels (one token; Q4_K up to two) read
//! each chunk once and sum all the quants it holds at once. The weights are unpacked once per
//! tile either way, and the integer sums are exact, so the paths give the same bits.

use core::arch::aarch64::*;

use super::neon_x8::{
    by_tile, check_batch, dot4, ld, ld_s8, opaque, scales8, sdot_lane, store, unroll, TILE,
};
use crate::quant::interleaved::{q4_k, q5_k, q6_k, BatchRows, ROWS};
use crate::quant::kquants::q8_k::{self, BlockQ8K};
use crate::quant::kquants::QK_K;

/// A k-quant interleaved format as the kernels read one group block.
trait KQuantX8 {
    /// Bytes of a group block (eight rows' super-blocks).
    const GROUP_BLOCK: usize;

    /// The float terms of one super-block against `T` tokens' activation blocks: `[t][h]`,
    /// lane `r` row `4h + r`.
    ///
    /// # Safety
    /// `p` must point at a group block; the CPU must support dotprod.
    unsafe fn block<const T: usize>(p: *const u8, ys: [&BlockQ8K; T]) -> [[float32x4_t; 2]; T];
}

/// Byte `i` of each 32-bit lane of `v`, zero-extended (`i` is a constant after inlining).
#[inline(always)]
fn byte_of(v: uint8x16_t, i: usize) -> int32x4_t {
    // SAFETY: plain NEON, which every caller (a `neon,dotprod` kernel) enables.
    unsafe {
        let v = vreinterpretq_u32_u8(v);
        let ff = vdupq_n_u32(0xFF);
        vreinterpretq_s32_u32(match i {
            0 => vandq_u32(v, ff),
            1 => vandq_u32(vshrq_n_u32::<8>(v), ff),
            2 => vandq_u32(vshrq_n_u32::<16>(v), ff),
            _ => vshrq_n_u32::<24>(v),
        })
    }
}

/// `d * d8 * isum` per row, with separate multiplies as the scalar kernel rounds it.
#[inline(always)]
fn term(d: float32x4_t, d8: f32, isum: int32x4_t) -> float32x4_t {
    // SAFETY: plain NEON, which every caller (a `neon,dotprod` kernel) enables.
    unsafe { vmulq_f32(vmulq_n_f32(d, d8), vcvtq_f32_s32(isum)) }
}

// ---- Q4_K, Q5_K ----

/// Q4_K × 8, or with `Q5` Q5_K × 8 (the same bytes and the fifth bits after them).
struct Q4K<const Q5: bool = false>;
type Q5K = Q4K<true>;

/// With `Q5`, `q` (nibbles of sub-block `j`, half `h` of quant chunk `8(j / 2) + c`) with
/// their fifth bits: bit `j` of qh chunk `c` moved to bit 4. Without, `q`.
///
/// # Safety
/// With `Q5`, `p` must point at a Q5_K × 8 group block; `c < 8`, `h < 2`.
#[inline(always)]
unsafe fn with_fifth<const Q5: bool>(
    q: uint8x16_t,
    p: *const u8,
    j: usize,
    c: usize,
    h: usize,
) -> uint8x16_t {
    if !Q5 {
        return q;
    }
    // SAFETY: half h of qh chunk c < 8 of the group block (the caller's contract); plain
    // NEON, which every caller (a `neon,dotprod` kernel) enables.
    unsafe {
        let qh = ld(p.add(q5_k::QH + 32 * c + 16 * h));
        // a negative count shifts right
        let moved = vshlq_u8(qh, vdupq_n_s8(4 - j as i8));
        vorrq_u8(q, vandq_u8(moved, vdupq_n_u8(0x10)))
    }
}

/// Sub-block `J` of a Q4_K × 8 super-block against `T` tokens: `isum[t][h] += scale_J ·
/// Σ q·y`. Chunks `8k..8k + 8` (`k = J / 2`) hold sub-block `2k` in their low nibbles and
/// `2k + 1` in their high ones; chunk `8k + m` pairs with activation bytes `64k + 32(J % 2) +
/// 4m..+4`. `sc[h][J / 4]` holds scale `J` in byte `J % 4` of row `r`'s lane. One
/// sub-block at a time keeps a tile of [`TILE`] tokens' sums in registers; the odd sub-block
/// reads the even one's chunks again.
///
/// # Safety
/// `p` must point at a Q4_K × 8 group block (with `Q5`, a Q5_K × 8 one); the CPU must support
/// dotprod.
#[inline(always)]
unsafe fn q4_k_sub_block<const T: usize, const J: usize, const Q5: bool>(
    p: *const u8,
    ys: &[&BlockQ8K; T],
    sc: &[[uint8x16_t; 2]; 2],
    isum: &mut [[int32x4_t; 2]; T],
) {
    let k = J / 2;
    // SAFETY: 16-byte loads inside each token's 256 activation bytes and, for chunks
    // c = 8k + 4·quarter + i < 32, half h of the block's quant chunk c (the caller's
    // contract); NEON and dotprod (the caller's contract).
    unsafe {
        // the odd sub-block reads the even one's chunks again, from L1
        let p = opaque(p);
        let mut s = [[vdupq_n_s32(0); 2]; T];
        unroll!(QUARTER in [0, 1] {
            let mut y = [vdupq_n_s8(0); T];
            for (y, ys) in y.iter_mut().zip(ys) {
                *y = ld_s8(ys.qs.as_ptr().add(64 * k + 32 * (J % 2) + 16 * QUARTER));
            }
            unroll!(H in [0, 1] {
                let mut w = [vdupq_n_s8(0); 4];
                for (i, w) in w.iter_mut().enumerate() {
                    let c = 8 * k + 4 * QUARTER + i;
                    let x = ld(p.add(q4_k::QS + 32 * c + 16 * H));
                    let q = if J.is_multiple_of(2) {
                        vandq_u8(x, vdupq_n_u8(0x0F))
                    } else {
                        vshrq_n_u8::<4>(x)
                    };
                    *w = vreinterpretq_s8_u8(with_fifth::<Q5>(q, p, J, c % 8, H));
                }
                for (s, y) in s.iter_mut().zip(y) {
                    s[H] = dot4(s[H], w, y);
                }
            });
        });
        for h in 0..2 {
            let scale = byte_of(sc[h][J / 4], J % 4);
            for t in 0..T {
                isum[t][h] = vmlaq_s32(isum[t][h], s[t][h], scale);
            }
        }
    }
}

/// Chunks `8K..8K + 8` of a Q4_K × 8 super-block against `T` tokens, both nibbles at once:
/// sub-blocks `2K` (low nibbles) and `2K + 1` (high ones), `isum[t][h] += scale_2K · Σ q·y +
/// scale_2K+1 · Σ q·y`. Each chunk is loaded once; the tokens' sums take twice the registers
/// of [`q4_k_sub_block`], so this serves one or two tokens (matrix × vector above all).
///
/// # Safety
/// As [`q4_k_sub_block`].
#[inline(always)]
unsafe fn q4_k_chunks<const T: usize, const K: usize, const Q5: bool>(
    p: *const u8,
    ys: &[&BlockQ8K; T],
    sc: &[[uint8x16_t; 2]; 2],
    isum: &mut [[int32x4_t; 2]; T],
) {
    // SAFETY: 16-byte loads inside each token's 256 activation bytes and, for chunks
    // c = 8K + 4·QUARTER + I < 32, half H of the block's quant chunk c (the caller's
    // contract); NEON and dotprod (likewise).
    unsafe {
        // [t][nibble][h]
        let mut s = [[[vdupq_n_s32(0); 2]; 2]; T];
        unroll!(QUARTER in [0, 1] {
            let mut y = [[vdupq_n_s8(0); 2]; T];
            for (y, ys) in y.iter_mut().zip(ys) {
                let at = ys.qs.as_ptr().add(64 * K + 16 * QUARTER);
                *y = [ld_s8(at), ld_s8(at.add(32))];
            }
            unroll!(H in [0, 1] {
                unroll!(I in [0, 1, 2, 3] {
                    let c = 8 * K + 4 * QUARTER + I;
                    let x = ld(p.add(q4_k::QS + 32 * c + 16 * H));
                    let lo = vandq_u8(x, vdupq_n_u8(0x0F));
                    let hi = vshrq_n_u8::<4>(x);
                    let c = c % 8;
                    let lo = vreinterpretq_s8_u8(with_fifth::<Q5>(lo, p, 2 * K, c, H));
                    let hi = vreinterpretq_s8_u8(with_fifth::<Q5>(hi, p, 2 * K + 1, c, H));
                    for (s, y) in s.iter_mut().zip(y) {
                        s[0][H] = sdot_lane::<{ I as i32 }>(s[0][H], lo, y[0]);
                        s[1][H] = sdot_lane::<{ I as i32 }>(s[1][H], hi, y[1]);
                    }
                });
            });
        });
        for h in 0..2 {
            let lo = byte_of(sc[h][2 * K / 4], 2 * K % 4);
            let hi = byte_of(sc[h][(2 * K + 1) / 4], (2 * K + 1) % 4);
            for (isum, s) in isum.iter_mut().zip(s) {
                isum[h] = vmlaq_s32(vmlaq_s32(isum[h], s[0][h], lo), s[1][h], hi);
            }
        }
    }
}

impl<const Q5: bool> KQuantX8 for Q4K<Q5> {
    const GROUP_BLOCK: usize = if Q5 {
        q5_k::GROUP_BLOCK
    } else {
        q4_k::GROUP_BLOCK
    };

    #[inline(always)]
    unsafe fn block<const T: usize>(p: *const u8, ys: [&BlockQ8K; T]) -> [[float32x4_t; 2]; T] {
        // SAFETY: the block's scale vectors, d and dmin, and 16-byte loads at 0 and 16 of each
        // token's 32 bytes of bsums (on a little-endian CPU, the only kind `fill_neon` installs
        // these kernels on, the u16 lanes are the format's little-endian i16); NEON and
        // dotprod (the caller's contract).
        unsafe {
            let low6 = vdupq_n_u8(0x3F);
            // Lane r of v_i (half h) is bytes 4i..4i + 4 of row 4h + r's packed scales: byte j
            // of a lane of sc[h][0] / sc[h][1] is scale j / 4 + j, of mn[h][..] the min
            // (`scale_min_k4`, per byte).
            let mut sc = [[vdupq_n_u8(0); 2]; 2];
            let mut mn = [[vdupq_n_u8(0); 2]; 2];
            for h in 0..2 {
                let v0 = ld(p.add(q4_k::SCALES + 16 * h));
                let v1 = ld(p.add(q4_k::SCALES + 32 + 16 * h));
                let v2 = ld(p.add(q4_k::SCALES + 64 + 16 * h));
                sc[h] = [vandq_u8(v0, low6), vsliq_n_u8::<4>(v2, vshrq_n_u8::<6>(v0))];
                mn[h] = [
                    vandq_u8(v1, low6),
                    vsliq_n_u8::<4>(vshrq_n_u8::<4>(v2), vshrq_n_u8::<6>(v1)),
                ];
            }

            // isum = Σ_j scale_j · Σ q·y over the eight sub-blocks
            let mut isum = [[vdupq_n_s32(0); 2]; T];
            if T <= 2 {
                q4_k_chunks::<T, 0, Q5>(p, &ys, &sc, &mut isum);
                q4_k_chunks::<T, 1, Q5>(p, &ys, &sc, &mut isum);
                q4_k_chunks::<T, 2, Q5>(p, &ys, &sc, &mut isum);
                q4_k_chunks::<T, 3, Q5>(p, &ys, &sc, &mut isum);
            } else {
                q4_k_sub_block::<T, 0, Q5>(p, &ys, &sc, &mut isum);
                q4_k_sub_block::<T, 1, Q5>(p, &ys, &sc, &mut isum);
                q4_k_sub_block::<T, 2, Q5>(p, &ys, &sc, &mut isum);
                q4_k_sub_block::<T, 3, Q5>(p, &ys, &sc, &mut isum);
                q4_k_sub_block::<T, 4, Q5>(p, &ys, &sc, &mut isum);
                q4_k_sub_block::<T, 5, Q5>(p, &ys, &sc, &mut isum);
                q4_k_sub_block::<T, 6, Q5>(p, &ys, &sc, &mut isum);
                q4_k_sub_block::<T, 7, Q5>(p, &ys, &sc, &mut isum);
            }

            // msum = Σ_j min_j · b_j with b_j = bsum[2j] + bsum[2j + 1] (|b_j| <= 32 · 128),
            // by SDOT on the mins' bytes: b_j = 128 · (b_j >> 7) + (b_j & 127), both int8.
            let mut msum = [[vdupq_n_s32(0); 2]; T];
            for (msum, y) in msum.iter_mut().zip(&ys) {
                let b0 = vreinterpretq_s16_u8(ld(y.bsums.as_ptr()));
                let b1 = vreinterpretq_s16_u8(ld(y.bsums.as_ptr().add(16)));
                let b = vpaddq_s16(b0, b1);
                // lanes 0, 1: the low parts of b_0..4, b_4..8; lanes 2, 3: the high parts
                let parts = vcombine_s8(
                    vmovn_s16(vandq_s16(b, vdupq_n_s16(127))),
                    vmovn_s16(vshrq_n_s16::<7>(b)),
                );
                for h in 0..2 {
                    let m0 = vreinterpretq_s8_u8(mn[h][0]);
                    let m1 = vreinterpretq_s8_u8(mn[h][1]);
                    let zero = vdupq_n_s32(0);
                    let lo = sdot_lane::<1>(sdot_lane::<0>(zero, m0, parts), m1, parts);
                    let hi = sdot_lane::<3>(sdot_lane::<2>(zero, m0, parts), m1, parts);
                    msum[h] = vaddq_s32(lo, vshlq_n_s32::<7>(hi));
                }
            }

            // d * d8 * isum - dmin * d8 * msum
            let (d, dmin) = (scales8(p.add(q4_k::D)), scales8(p.add(q4_k::DMIN)));
            let mut out = [[vdupq_n_f32(0.0); 2]; T];
            for t in 0..T {
                let d8 = ys[t].d();
                for h in 0..2 {
                    out[t][h] =
                        vsubq_f32(term(d[h], d8, isum[t][h]), term(dmin[h], d8, msum[t][h]));
                }
            }
            out
        }
    }
}

// ---- Q6_K ----

struct Q6K;

/// Group `GI` (16 elements) of a Q6_K × 8 super-block against `T` tokens: `isum[t][h] +=
/// scale_GI · Σ (q - 32)·y`. The group is elements `128n + 32k + 16m..+16` (`n = GI / 8`,
/// `k = GI % 8 / 2`, `m = GI % 2`): quant `k` (x, y, z, or the fourth from their top bits)
/// of triples `8n + 4m..8n + 4m + 4`, against activation bytes `128n + 32k + 16m..+16`.
///
/// # Safety
/// `p` must point at a Q6_K × 8 group block; the CPU must support dotprod.
#[inline(always)]
unsafe fn q6_k_group<const T: usize, const GI: usize>(
    p: *const u8,
    ys: &[&BlockQ8K; T],
    isum: &mut [[int32x4_t; 2]; T],
) {
    let (n, k, m) = (GI / 8, GI % 8 / 2, GI % 2);
    // SAFETY: 16-byte loads inside each token's 256 activation bytes and inside the block's
    // triples 8n + 4m + i < 16 (half h of chunk vectors 0..3), all the caller's contract;
    // NEON and dotprod (likewise).
    unsafe {
        // the fourth quant reads the other three's chunk vectors again, from L1
        let p = opaque(p);
        let low6 = vdupq_n_u8(0x3F);
        let bias = vdupq_n_s8(32);
        let mut y = [vdupq_n_s8(0); T];
        for (y, ys) in y.iter_mut().zip(ys) {
            *y = ld_s8(ys.qs.as_ptr().add(128 * n + 32 * k + 16 * m));
        }
        let mut s = [[vdupq_n_s32(0); 2]; T];
        unroll!(H in [0, 1] {
            let mut w = [vdupq_n_s8(0); 4];
            for (i, w) in w.iter_mut().enumerate() {
                let at = q6_k::QS + 96 * (8 * n + 4 * m + i) + 16 * H;
                let x = |v: usize| ld(p.add(at + 32 * v));
                let q = if k < 3 {
                    vandq_u8(x(k), low6)
                } else {
                    // the fourth quant's 2-bit fields from bits 6-7 of x, y, z to bits 0-1,
                    // 2-3, 4-5: (y & 0xC0 | x >> 2), then (z & 0xC0 | that >> 2), then >> 2
                    let xy = vsriq_n_u8::<2>(x(1), x(0));
                    vshrq_n_u8::<2>(vsriq_n_u8::<2>(x(2), xy))
                };
                *w = vsubq_s8(vreinterpretq_s8_u8(q), bias);
            }
            for (s, y) in s.iter_mut().zip(y) {
                s[H] = dot4(s[H], w, y);
            }
        });
        let scale = q6_k_scale(p, GI);
        for h in 0..2 {
            for t in 0..T {
                isum[t][h] = vmlaq_s32(isum[t][h], s[t][h], scale[h]);
            }
        }
    }
}

/// Scale `g` of each row of a Q6_K × 8 super-block as i32 (rows 0-3, rows 4-7).
///
/// # Safety
/// `p` must point at a Q6_K × 8 group block; `g < 16`.
#[inline(always)]
unsafe fn q6_k_scale(p: *const u8, g: usize) -> [int32x4_t; 2] {
    // SAFETY: scale pair g / 2, 16 of the block's 128 scale bytes (the caller's contract);
    // plain NEON.
    unsafe {
        // scales g & !1 and g | 1 of each row, as i16 pairs
        let pair = vreinterpretq_s8_u8(ld(p.add(q6_k::SCALES + 16 * (g / 2))));
        let pairs = [vmovl_s8(vget_low_s8(pair)), vmovl_high_s8(pair)];
        // lane r: the row's two scales as i16 halves; group g's is the low or the high one
        pairs.map(|v| {
            let v = vreinterpretq_s32_s16(v);
            if g.is_multiple_of(2) {
                vshrq_n_s32::<16>(vshlq_n_s32::<16>(v))
            } else {
                vshrq_n_s32::<16>(v)
            }
        })
    }
}

/// Triples `8n + 4m..8n + 4m + 4` (`n = NM / 2`, `m = NM % 2`) of a Q6_K × 8 super-block
/// against `T` tokens, all four quants at once: groups `8n + 2k + m` for `k < 4`. Each chunk
/// vector is loaded once; the tokens' sums take four times the registers of
/// [`q6_k_group`], so this serves one token (matrix × vector).
///
/// # Safety
/// As [`q6_k_group`].
#[inline(always)]
unsafe fn q6_k_triples<const T: usize, const NM: usize>(
    p: *const u8,
    ys: &[&BlockQ8K; T],
    isum: &mut [[int32x4_t; 2]; T],
) {
    let (n, m) = (NM / 2, NM % 2);
    // SAFETY: 16-byte loads inside each token's 256 activation bytes and inside the block's
    // triples 8n + 4m + I < 16 (half H of chunk vectors 0..3), all the caller's contract;
    // NEON and dotprod (likewise).
    unsafe {
        let low6 = vdupq_n_u8(0x3F);
        let bias = vdupq_n_s8(32);
        // [t][k]
        let mut y = [[vdupq_n_s8(0); 4]; T];
        for (y, ys) in y.iter_mut().zip(ys) {
            for (k, y) in y.iter_mut().enumerate() {
                *y = ld_s8(ys.qs.as_ptr().add(128 * n + 32 * k + 16 * m));
            }
        }
        // [t][k][h]
        let mut s = [[[vdupq_n_s32(0); 2]; 4]; T];
        unroll!(H in [0, 1] {
            unroll!(I in [0, 1, 2, 3] {
                let at = p.add(q6_k::QS + 96 * (8 * n + 4 * m + I) + 16 * H);
                let (x0, x1, x2) = (ld(at), ld(at.add(32)), ld(at.add(64)));
                let q3 = vshrq_n_u8::<2>(vsriq_n_u8::<2>(x2, vsriq_n_u8::<2>(x1, x0)));
                let q = [
                    vandq_u8(x0, low6),
                    vandq_u8(x1, low6),
                    vandq_u8(x2, low6),
                    q3,
                ]
                .map(|q| vsubq_s8(vreinterpretq_s8_u8(q), bias));
                for (s, y) in s.iter_mut().zip(y) {
                    for k in 0..4 {
                        s[k][H] = sdot_lane::<{ I as i32 }>(s[k][H], q[k], y[k]);
                    }
                }
            });
        });
        for k in 0..4 {
            let scale = q6_k_scale(p, 8 * n + 2 * k + m);
            for (isum, s) in isum.iter_mut().zip(s) {
                for h in 0..2 {
                    isum[h] = vmlaq_s32(isum[h], s[k][h], scale[h]);
                }
            }
        }
    }
}

impl KQuantX8 for Q6K {
    const GROUP_BLOCK: usize = q6_k::GROUP_BLOCK;

    #[inline(always)]
    unsafe fn block<const T: usize>(p: *const u8, ys: [&BlockQ8K; T]) -> [[float32x4_t; 2]; T] {
        // SAFETY: the block's groups (see `q6_k_group`) and its eight f16 d, the caller's
        // contract; NEON and dotprod (likewise).
        unsafe {
            let mut isum = [[vdupq_n_s32(0); 2]; T];
            if T == 1 {
                q6_k_triples::<T, 0>(p, &ys, &mut isum);
                q6_k_triples::<T, 1>(p, &ys, &mut isum);
                q6_k_triples::<T, 2>(p, &ys, &mut isum);
                q6_k_triples::<T, 3>(p, &ys, &mut isum);
            } else {
                q6_k_group::<T, 0>(p, &ys, &mut isum);
                q6_k_group::<T, 1>(p, &ys, &mut isum);
                q6_k_group::<T, 2>(p, &ys, &mut isum);
                q6_k_group::<T, 3>(p, &ys, &mut isum);
                q6_k_group::<T, 4>(p, &ys, &mut isum);
                q6_k_group::<T, 5>(p, &ys, &mut isum);
                q6_k_group::<T, 6>(p, &ys, &mut isum);
                q6_k_group::<T, 7>(p, &ys, &mut isum);
                q6_k_group::<T, 8>(p, &ys, &mut isum);
                q6_k_group::<T, 9>(p, &ys, &mut isum);
                q6_k_group::<T, 10>(p, &ys, &mut isum);
                q6_k_group::<T, 11>(p, &ys, &mut isum);
                q6_k_group::<T, 12>(p, &ys, &mut isum);
                q6_k_group::<T, 13>(p, &ys, &mut isum);
                q6_k_group::<T, 14>(p, &ys, &mut isum);
                q6_k_group::<T, 15>(p, &ys, &mut isum);
            }
            // d * d8 * isum. The scalar kernel's `- dmin * d8 * msum` is ±0 for Q6_K (dmin =
            // 0, msum = 0), which changes no sum: it only turns a -0 term into +0, and the
            // running sum, starting at +0, is never -0.
            let d = scales8(p.add(q6_k::D));
            let mut out = [[vdupq_n_f32(0.0); 2]; T];
            for t in 0..T {
                let d8 = ys[t].d();
                for h in 0..2 {
                    out[t][h] = term(d[h], d8, isum[t][h]);
                }
            }
            out
        }
    }
}

// ---- drivers ----

/// One group (`nb` super-blocks at `w`) against `T` tokens (`ys`, `nb` blocks each): the sum
/// of every super-block's terms.
///
/// # Safety
/// `w` must hold the group's `nb` super-blocks; the CPU must support NEON and dotprod.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn super_blocks<F: KQuantX8, const T: usize>(
    nb: usize,
    w: &[u8],
    ys: [&[BlockQ8K]; T],
) -> [[float32x4_t; 2]; T] {
    debug_assert!(w.len() >= nb * F::GROUP_BLOCK && ys.iter().all(|y| y.len() == nb));
    let mut acc = [[vdupq_n_f32(0.0); 2]; T];
    for b in 0..nb {
        // SAFETY: super-block b < nb of the group (the caller's contract).
        let p = unsafe { w.as_ptr().add(b * F::GROUP_BLOCK) };
        let mut yb: [&BlockQ8K; T] = [&ys[0][b]; T];
        for (yb, ys) in yb.iter_mut().zip(&ys) {
            *yb = &ys[b];
        }
        // SAFETY: `p` is a group block of `F`; dotprod is enabled here.
        let terms = unsafe { F::block::<T>(p, yb) };
        for (acc, term) in acc.iter_mut().zip(terms) {
            for h in 0..2 {
                acc[h] = vaddq_f32(acc[h], term[h]);
            }
        }
    }
    acc
}

/// `out[8g + r] = row r of group g · a`.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv<F: KQuantX8>(cols: usize, w: &[u8], a: &[u8], out: &mut [f32]) {
    let nb = cols / QK_K;
    let ys = &q8_k::blocks(a)[..nb];
    let group_bytes = nb * F::GROUP_BLOCK;
    assert!(
        out.len().is_multiple_of(ROWS) && w.len() >= out.len() / ROWS * group_bytes,
        "{} rows of {cols} columns in {} bytes",
        out.len(),
        w.len()
    );
    for (g, o) in out.chunks_exact_mut(ROWS).enumerate() {
        let wg = &w[g * group_bytes..(g + 1) * group_bytes];
        // SAFETY: `wg` is the group's nb super-blocks; dotprod is enabled here.
        let [acc] = unsafe { super_blocks::<F, 1>(nb, wg, [ys]) };
        store(o.try_into().expect("eight rows"), acc);
    }
}

/// `T` tokens of `acts` against one group.
///
/// # Safety
/// `w` must hold the group's `nb` super-blocks; the CPU must support NEON and dotprod.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemm_tile<F: KQuantX8, const T: usize>(
    nb: usize,
    w: &[u8],
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
) {
    let mut ys: [&[BlockQ8K]; T] = [&[]; T];
    for (t, ys) in ys.iter_mut().enumerate() {
        *ys = &q8_k::blocks(acts.bytes(t))[..nb];
    }
    // SAFETY: the caller's contract.
    let acc = unsafe { super_blocks::<F, T>(nb, w, ys) };
    for (o, acc) in out.iter_mut().zip(acc) {
        store(o, acc);
    }
}

/// `out[g · n + t][r] = row r of group g · token t`: every group, [`TILE`] tokens at a time.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemm<F: KQuantX8>(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    let nb = cols / QK_K;
    let group_bytes = nb * F::GROUP_BLOCK;
    let n = acts.len();
    check_batch(w, group_bytes, &acts, out);
    for (g, og) in out.chunks_exact_mut(n).enumerate() {
        let wg = &w[g * group_bytes..(g + 1) * group_bytes];
        for (i, o) in og.chunks_mut(TILE).enumerate() {
            let a = acts.slice(i * TILE, i * TILE + o.len());
            // SAFETY: `wg` is the group's nb super-blocks; dotprod is enabled here.
            unsafe { by_tile!(o.len(), gemm_tile::<F, T>(nb, wg, a, o)) }
        }
    }
}

// ---- the exported kernels ----

/// Defines the matrix × vector and batch kernels of a k-quant format.
macro_rules! kquant_kernels {
    ($($f:ident => $gemv:ident, $gemm:ident;)*) => {$(
        /// # Safety
        /// The CPU must support NEON and dotprod.
        #[target_feature(enable = "neon,dotprod")]
        pub(super) unsafe fn $gemv(cols: usize, w: &[u8], a: &[u8], _sums: &[i32], out: &mut [f32]) {
            // SAFETY: the caller's contract.
            unsafe { gemv::<$f>(cols, w, a, out) }
        }

        /// # Safety
        /// The CPU must support NEON and dotprod.
        #[target_feature(enable = "neon,dotprod")]
        pub(super) unsafe fn $gemm(
            cols: usize,
            w: &[u8],
            acts: BatchRows<'_>,
            out: &mut [[f32; ROWS]],
        ) {
            // SAFETY: the caller's contract.
            unsafe { gemm::<$f>(cols, w, acts, out) }
        }
    )*};
}

kquant_kernels! {
    Q4K => gemv_q4_k, gemm_q4_k;
    Q5K => gemv_q5_k, gemm_q5_k;
    Q6K => gemv_q6_k, gemm_q6_k;
}
