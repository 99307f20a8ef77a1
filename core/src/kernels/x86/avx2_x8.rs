//! AVX2 kernels over the interleaved layouts of `quant::interleaved`: each 256-bit vector
//! holds the same four elements of eight rows, one broadcast of four activation bytes
//! serves all eight, and lane `r` accumulates row `r`. Per row and block the arithmetic is
//! the scalar kernel's, `sum += isum as f32 * (dx * dy)` (k-quants: `sum += d * d8 * isum -
//! dmin * d8 * msum` per super-block, with exact integer sums), so results are bit-identical
//! to it.

use core::arch::x86_64::*;

use super::avx2::{f16, ld128, ld256};
use crate::quant::interleaved::{q4_0, q4_k, q5_0, q6_k, q8_0, ROWS};
use crate::quant::kquants::q8_k::{self, BlockQ8K};
use crate::quant::kquants::QK_K;
use crate::quant::legacy::{blocks, BlockQ8_0, QK};

/// Four activation bytes at `p`, broadcast to every 32-bit lane.
///
/// # Safety
/// `p` must be valid for reading 4 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bcast4<T>(p: *const T) -> __m256i {
    // SAFETY: the caller guarantees 4 readable bytes.
    _mm256_set1_epi32(unsafe { p.cast::<i32>().read_unaligned() })
}

/// `acc + isum * (dx * dy)` with `dx` the eight f16 scales at `d` and `dy` broadcast.
///
/// # Safety
/// `d` must be valid for reading 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn accumulate(acc: __m256, isum: __m256i, d: *const u8, dy: __m256) -> __m256 {
    // SAFETY: the caller guarantees the 8 scales.
    let dx = _mm256_cvtph_ps(unsafe { ld128(d) });
    _mm256_add_ps(
        acc,
        _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dx, dy)),
    )
}

/// Runs a block function (the integer part of one block for `G` groups at once: pointers to
/// each group's block, the activation block and its quant sum) over every block of every
/// group, two groups at a time (`two`, sharing the activation broadcasts and scale) with a
/// last odd group on its own (`one`), and stores the eight sums of each group.
///
/// # Safety
/// `one` and `two` must only read their groups' `group_block` bytes per block.
#[inline]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn for_groups(
    cols: usize,
    w: &[u8],
    a: &[u8],
    sums: &[i32],
    out: &mut [f32],
    group_block: usize,
    one: impl Fn([*const u8; 1], &BlockQ8_0, i32) -> [__m256i; 1],
    two: impl Fn([*const u8; 2], &BlockQ8_0, i32) -> [__m256i; 2],
) {
    let nb = cols / QK;
    let ys = &blocks::<BlockQ8_0>(a)[..nb];
    let sums = |b: usize| sums.get(b).copied().unwrap_or(0);
    let group_bytes = nb * group_block;
    let mut pairs = w.chunks_exact(2 * group_bytes);
    let mut outs = out.chunks_exact_mut(2 * ROWS);
    for (g, o) in (&mut pairs).zip(&mut outs) {
        // SAFETY (all blocks below): `g` holds two groups of nb blocks of `group_block`
        // bytes; `o` is 16 floats.
        unsafe {
            let mut acc = [_mm256_setzero_ps(); 2];
            for (b, y) in ys.iter().enumerate() {
                let p0 = g.as_ptr().add(b * group_block);
                let p1 = p0.add(group_bytes);
                let dy = _mm256_set1_ps(f16(y.d));
                let [i0, i1] = two([p0, p1], y, sums(b));
                acc[0] = accumulate(acc[0], i0, p0, dy);
                acc[1] = accumulate(acc[1], i1, p1, dy);
            }
            _mm256_storeu_ps(o.as_mut_ptr(), acc[0]);
            _mm256_storeu_ps(o.as_mut_ptr().add(ROWS), acc[1]);
        }
    }
    let (g, o) = (pairs.remainder(), outs.into_remainder());
    if g.len() == group_bytes && o.len() == ROWS {
        // SAFETY: as above, for the one group left.
        unsafe {
            let mut acc = _mm256_setzero_ps();
            for (b, y) in ys.iter().enumerate() {
                let p = g.as_ptr().add(b * group_block);
                let [i] = one([p], y, sums(b));
                acc = accumulate(acc, i, p, _mm256_set1_ps(f16(y.d)));
            }
            _mm256_storeu_ps(o.as_mut_ptr(), acc);
        }
    }
}

/// # Safety
/// Each `ps[g]` must point at a Q8_0 × 8 group block (272 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_block<const G: usize>(ps: [*const u8; G], y: &BlockQ8_0, _sum: i32) -> [__m256i; G] {
    let ones = _mm256_set1_epi16(1);
    let mut isum = [_mm256_setzero_si256(); G];
    for c in 0..8 {
        // SAFETY: 4 activation bytes at 4c < 32.
        let yv = unsafe { bcast4(y.qs.as_ptr().add(4 * c)) };
        for g in 0..G {
            // SAFETY: chunk c of the block's 256 quant bytes (the caller's contract).
            let x = unsafe { ld256(ps[g].add(16 + 32 * c)) };
            let prod = _mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(yv, x));
            isum[g] = _mm256_add_epi32(isum[g], _mm256_madd_epi16(prod, ones));
        }
    }
    isum
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemv_q8_0(cols: usize, w: &[u8], a: &[u8], sums: &[i32], out: &mut [f32]) {
    // SAFETY: the block functions read one Q8_0 × 8 block per group pointer.
    unsafe {
        for_groups(
            cols,
            w,
            a,
            sums,
            out,
            q8_0::GROUP_BLOCK,
            |p, y, s| q8_0_block(p, y, s),
            |p, y, s| q8_0_block(p, y, s),
        )
    }
}

/// # Safety
/// Each `ps[g]` must point at a Q4_0 × 8 group block (144 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_block<const G: usize>(ps: [*const u8; G], y: &BlockQ8_0, sum: i32) -> [__m256i; G] {
    let ones = _mm256_set1_epi16(1);
    let low4 = _mm256_set1_epi8(0x0F);
    // unsigned nibbles × y, summed in i16 (8 × 2·15·127 < 2^15), minus 8·Σy
    let mut s16 = [_mm256_setzero_si256(); G];
    for c in 0..4 {
        // SAFETY: activation bytes 4c and 16 + 4c.
        let (y0, y1) = unsafe {
            (
                bcast4(y.qs.as_ptr().add(4 * c)),
                bcast4(y.qs.as_ptr().add(16 + 4 * c)),
            )
        };
        for g in 0..G {
            // SAFETY: chunk c of the block's 128 quant bytes (the caller's contract).
            let x = unsafe { ld256(ps[g].add(16 + 32 * c)) };
            let lo = _mm256_and_si256(x, low4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
            s16[g] = _mm256_add_epi16(s16[g], _mm256_maddubs_epi16(lo, y0));
            s16[g] = _mm256_add_epi16(s16[g], _mm256_maddubs_epi16(hi, y1));
        }
    }
    let offset = _mm256_set1_epi32(8 * sum);
    s16.map(|s| _mm256_sub_epi32(_mm256_madd_epi16(s, ones), offset))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemv_q4_0(cols: usize, w: &[u8], a: &[u8], sums: &[i32], out: &mut [f32]) {
    // SAFETY: the block functions read one Q4_0 × 8 block per group pointer.
    unsafe {
        for_groups(
            cols,
            w,
            a,
            sums,
            out,
            q4_0::GROUP_BLOCK,
            |p, y, s| q4_0_block(p, y, s),
            |p, y, s| q4_0_block(p, y, s),
        )
    }
}

/// Lane `r` (4 bytes) takes row `r`'s bit byte of a Q5_0 × 8 chunk.
const Q5_SPREAD: [i8; 32] = [
    0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7,
];

/// # Safety
/// Each `ps[g]` must point at a Q5_0 × 8 group block (176 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_block<const G: usize>(ps: [*const u8; G], y: &BlockQ8_0, sum: i32) -> [__m256i; G] {
    let ones = _mm256_set1_epi16(1);
    let low4 = _mm256_set1_epi8(0x0F);
    let sixteen = _mm256_set1_epi8(0x10);
    // SAFETY: the table is 32 bytes.
    let spread = unsafe { ld256(Q5_SPREAD.as_ptr()) };
    // byte j of a lane tests bit j (low elements) or bit 4 + j (high elements)
    let lo_bit = _mm256_set1_epi32(0x0804_0201);
    let hi_bit = _mm256_set1_epi32(0x8040_2010_u32 as i32);
    let fifth = |bits: __m256i, probe: __m256i| {
        _mm256_and_si256(
            _mm256_cmpeq_epi8(_mm256_and_si256(bits, probe), probe),
            sixteen,
        )
    };
    // unsigned 5-bit values × y: at most 4 products per i16 (4 × 2·31·127 < 2^15)
    let mut isum = [_mm256_set1_epi32(-16 * sum); G];
    for half in 0..2 {
        let mut s16 = [_mm256_setzero_si256(); G];
        for c in 2 * half..2 * half + 2 {
            // SAFETY: activation bytes 4c and 16 + 4c.
            let (y0, y1) = unsafe {
                (
                    bcast4(y.qs.as_ptr().add(4 * c)),
                    bcast4(y.qs.as_ptr().add(16 + 4 * c)),
                )
            };
            for g in 0..G {
                // SAFETY: chunk c's 8 bit bytes and 32 quant bytes (the caller's contract).
                let (h8, x) = unsafe {
                    (
                        ps[g].add(16 + 8 * c).cast::<i64>().read_unaligned(),
                        ld256(ps[g].add(48 + 32 * c)),
                    )
                };
                let bits = _mm256_shuffle_epi8(_mm256_set1_epi64x(h8), spread);
                let lo = _mm256_or_si256(_mm256_and_si256(x, low4), fifth(bits, lo_bit));
                let hi = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(x, 4), low4),
                    fifth(bits, hi_bit),
                );
                s16[g] = _mm256_add_epi16(s16[g], _mm256_maddubs_epi16(lo, y0));
                s16[g] = _mm256_add_epi16(s16[g], _mm256_maddubs_epi16(hi, y1));
            }
        }
        for g in 0..G {
            isum[g] = _mm256_add_epi32(isum[g], _mm256_madd_epi16(s16[g], ones));
        }
    }
    isum
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemv_q5_0(cols: usize, w: &[u8], a: &[u8], sums: &[i32], out: &mut [f32]) {
    // SAFETY: the block functions read one Q5_0 × 8 block per group pointer.
    unsafe {
        for_groups(
            cols,
            w,
            a,
            sums,
            out,
            q5_0::GROUP_BLOCK,
            |p, y, s| q5_0_block(p, y, s),
            |p, y, s| q5_0_block(p, y, s),
        )
    }
}

/// Runs `block(group_block_ptr, y)` over every super-block of every group, adding the eight
/// float terms it returns to the group's accumulators (`sum += term`, as the scalar kernel
/// adds each super-block's), and stores the eight sums of each group.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn for_super_blocks(
    cols: usize,
    w: &[u8],
    a: &[u8],
    out: &mut [f32],
    group_block: usize,
    mut block: impl FnMut(*const u8, &BlockQ8K) -> __m256,
) {
    let nb = cols / QK_K;
    if nb == 0 {
        out.fill(0.0);
        return;
    }
    let ys = &q8_k::blocks(a)[..nb];
    for (g, o) in w
        .chunks_exact(nb * group_block)
        .zip(out.chunks_exact_mut(ROWS))
    {
        let mut acc = _mm256_setzero_ps();
        for (b, y) in ys.iter().enumerate() {
            // SAFETY: `g` holds nb group blocks of `group_block` bytes.
            let p = unsafe { g.as_ptr().add(b * group_block) };
            acc = _mm256_add_ps(acc, block(p, y));
        }
        // SAFETY: `o` is 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), acc) };
    }
}

/// A `vpshufb` control applying `pat` (byte indices within a 32-bit lane, -1 for zero) to
/// every 32-bit lane.
const fn per_lane(pat: [i8; 4]) -> [i8; 32] {
    let mut t = [0i8; 32];
    let mut i = 0;
    while i < 32 {
        let v = pat[i % 4];
        t[i] = if v < 0 {
            -1
        } else {
            v + (i % 16 / 4 * 4) as i8
        };
        i += 1;
    }
    t
}

/// Byte `j` of each lane, zero-extended to both of its i16 halves.
const DUP_BYTE: [[i8; 32]; 4] = [
    per_lane([0, -1, 0, -1]),
    per_lane([1, -1, 1, -1]),
    per_lane([2, -1, 2, -1]),
    per_lane([3, -1, 3, -1]),
];
/// Bytes 0, 1 (and 2, 3) of each lane, zero-extended to its two i16 halves.
const BYTE_PAIRS: [[i8; 32]; 2] = [per_lane([0, -1, 1, -1]), per_lane([2, -1, 3, -1])];
/// I16 half 0 (and 1) of each lane copied to both halves.
const DUP_I16: [[i8; 32]; 2] = [per_lane([0, 1, 0, 1]), per_lane([2, 3, 2, 3])];

/// `vpshufb` of `v` by one of the tables above.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn shuffle(v: __m256i, table: &[i8; 32]) -> __m256i {
    // SAFETY: the table is 32 bytes.
    _mm256_shuffle_epi8(v, unsafe { ld256(table.as_ptr()) })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemv_q4_k(cols: usize, w: &[u8], a: &[u8], _sums: &[i32], out: &mut [f32]) {
    let low4 = _mm256_set1_epi8(0x0F);
    let low6 = _mm256_set1_epi8(0x3F);
    let bits45 = _mm256_set1_epi8(0x30);
    let ones = _mm256_set1_epi16(1);
    for_super_blocks(cols, w, a, out, q4_k::GROUP_BLOCK, |p, y| {
        // lane r of v_i is bytes 4i..4i+4 of row r's packed scales (`scale_min_k4`)
        // SAFETY: the group block's three scale vectors.
        let (v0, v1, v2) = unsafe {
            (
                ld256(p.add(q4_k::SCALES)),
                ld256(p.add(q4_k::SCALES + 32)),
                ld256(p.add(q4_k::SCALES + 64)),
            )
        };
        // bytes j of each lane: scale j (sc_lo) and j + 4 (sc_hi), min j and j + 4
        let sc_lo = _mm256_and_si256(v0, low6);
        let sc_hi = _mm256_or_si256(
            _mm256_and_si256(v2, low4),
            _mm256_and_si256(_mm256_srli_epi32(v0, 2), bits45),
        );
        let mn_lo = _mm256_and_si256(v1, low6);
        let mn_hi = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi32(v2, 4), low4),
            _mm256_and_si256(_mm256_srli_epi32(v1, 2), bits45),
        );

        // msum = Σ_j min_j · (bsum[2j] + bsum[2j+1]): i16 pairs of mins against broadcast
        // i16 pairs of the 32-element sums (dwords 0, 1 | 4, 5 after the pack)
        // SAFETY: bsums is 32 bytes.
        let bsums = unsafe { ld256(y.bsums.as_ptr()) };
        let bs = _mm256_madd_epi16(bsums, ones);
        let bs = _mm256_packs_epi32(bs, bs);
        let mins = |m: __m256i, pair: usize, dword: i32| {
            let b = _mm256_permutevar8x32_epi32(bs, _mm256_set1_epi32(dword));
            _mm256_madd_epi16(shuffle(m, &BYTE_PAIRS[pair]), b)
        };
        let msum = _mm256_add_epi32(
            _mm256_add_epi32(mins(mn_lo, 0, 0), mins(mn_lo, 1, 1)),
            _mm256_add_epi32(mins(mn_hi, 0, 4), mins(mn_hi, 1, 5)),
        );

        // isum = Σ_j scale_j · Σ q·y over sub-blocks j (32 elements): chunks 8k..8k+8 hold
        // sub-block 2k in their low nibbles and 2k + 1 in their high ones; unsigned
        // nibbles × y summed in i16 (8 × 2·15·127 < 2^15), then scaled with `vpmaddwd`
        let mut isum = _mm256_setzero_si256();
        for k in 0..4 {
            let (mut s0, mut s1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            for c in 8 * k..8 * k + 8 {
                let l = 64 * k + 4 * (c % 8);
                // SAFETY: chunk c of the 32 quant chunks; activation bytes l..l+4 and
                // l+32..l+36 of the 256.
                let (x, y0, y1) = unsafe {
                    (
                        ld256(p.add(q4_k::QS + 32 * c)),
                        bcast4(y.qs.as_ptr().add(l)),
                        bcast4(y.qs.as_ptr().add(l + 32)),
                    )
                };
                let lo = _mm256_and_si256(x, low4);
                let hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
                s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(lo, y0));
                s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(hi, y1));
            }
            let sc = if k < 2 { sc_lo } else { sc_hi };
            let p0 = _mm256_madd_epi16(s0, shuffle(sc, &DUP_BYTE[2 * k % 4]));
            let p1 = _mm256_madd_epi16(s1, shuffle(sc, &DUP_BYTE[(2 * k + 1) % 4]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
        }

        // d * d8 * isum - dmin * d8 * msum, rounded as the scalar kernel rounds it
        // SAFETY: the eight f16 d and dmin.
        let (d, dmin) = unsafe {
            (
                _mm256_cvtph_ps(ld128(p.add(q4_k::D))),
                _mm256_cvtph_ps(ld128(p.add(q4_k::DMIN))),
            )
        };
        let d8 = _mm256_set1_ps(y.d());
        _mm256_sub_ps(
            _mm256_mul_ps(_mm256_mul_ps(d, d8), _mm256_cvtepi32_ps(isum)),
            _mm256_mul_ps(_mm256_mul_ps(dmin, d8), _mm256_cvtepi32_ps(msum)),
        )
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemv_q6_k(cols: usize, w: &[u8], a: &[u8], _sums: &[i32], out: &mut [f32]) {
    let low6 = _mm256_set1_epi8(0x3F);
    let top2 = _mm256_set1_epi8(0xC0u8 as i8);
    for_super_blocks(cols, w, a, out, q6_k::GROUP_BLOCK, |p, y| {
        // The quants are stored +32: isum = Σ_g scale_g · Σ q·y - 32 · Σ_g scale_g · bsum_g.
        let (mut isum, mut offset) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for n in 0..2 {
            // i16 pairs (scale 2p, scale 2p + 1) per row for p = 4n + k: the scales of
            // groups 8n + 2k and 8n + 2k + 1
            let mut pairs = [_mm256_setzero_si256(); 4];
            for (k, pair) in pairs.iter_mut().enumerate() {
                // SAFETY: scale pair 4n + k, 16 of the 128 scale bytes.
                let v = unsafe { ld128(p.add(q6_k::SCALES + 16 * (4 * n + k))) };
                *pair = _mm256_cvtepi8_epi16(v);
            }
            for (k, &pair) in pairs.iter().enumerate() {
                // SAFETY: bsums 2p, 2p + 1 are 4 of the 32 bytes.
                let b = unsafe { bcast4(y.bsums.as_ptr().add(4 * (4 * n + k))) };
                offset = _mm256_add_epi32(offset, _mm256_madd_epi16(pair, b));
            }
            // triple c holds elements 128n + 32k + 4c..+4 (k < 4): groups 8n + 2k + c/4;
            // two triples at a time (unsigned 6-bit × y in i16: 2 × 2·63·127 < 2^15)
            for c0 in (0..8).step_by(2) {
                let mut s = [_mm256_setzero_si256(); 4];
                for c in c0..c0 + 2 {
                    let t = q6_k::QS + 96 * (8 * n + c);
                    // SAFETY: the three chunk vectors of triple 8n + c.
                    let (x0, x1, x2) =
                        unsafe { (ld256(p.add(t)), ld256(p.add(t + 32)), ld256(p.add(t + 64))) };
                    // the fourth quant's 2-bit fields moved from bits 6-7 of x0, x1, x2 to
                    // bits 0-1, 2-3, 4-5 (only zero bits cross bytes in the 16-bit shifts)
                    let f = _mm256_or_si256(
                        _mm256_srli_epi16(_mm256_and_si256(x0, top2), 2),
                        _mm256_and_si256(x1, top2),
                    );
                    let f = _mm256_or_si256(_mm256_srli_epi16(f, 2), _mm256_and_si256(x2, top2));
                    let q = [
                        _mm256_and_si256(x0, low6),
                        _mm256_and_si256(x1, low6),
                        _mm256_and_si256(x2, low6),
                        _mm256_srli_epi16(f, 2),
                    ];
                    for (k, (s, q)) in s.iter_mut().zip(q).enumerate() {
                        // SAFETY: activation bytes 128n + 32k + 4c + 0..4 of the 256.
                        let yk = unsafe { bcast4(y.qs.as_ptr().add(128 * n + 32 * k + 4 * c)) };
                        *s = _mm256_add_epi16(*s, _mm256_maddubs_epi16(q, yk));
                    }
                }
                let dup = &DUP_I16[c0 / 4];
                for (s, &pair) in s.into_iter().zip(&pairs) {
                    let scaled = _mm256_madd_epi16(s, shuffle(pair, dup));
                    isum = _mm256_add_epi32(isum, scaled);
                }
            }
        }
        let isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(offset, 5));

        // d * d8 * isum, rounded as the scalar kernel rounds it. Its `- dmin * d8 * msum`
        // term is ±0 for Q6_K (dmin = 0, msum = 0), which changes no sum: it only turns a
        // -0 term into +0, and the running sum, starting at +0, is never -0.
        // SAFETY: the eight f16 d.
        let d = unsafe { _mm256_cvtph_ps(ld128(p.add(q6_k::D))) };
        let d8 = _mm256_set1_ps(y.d());
        _mm256_mul_ps(_mm256_mul_ps(d, d8), _mm256_cvtepi32_ps(isum))
    })
}
