//! AVX-512 VNNI batch kernels over the interleaved k-quant layouts (Q4_K × 8, Q5_K × 8,
//! Q6_K × 8). Q5_K is decoded as Q4_K with each nibble's fifth bit ORed in.
//!
//! Pairs of groups run on 512-bit vectors (lanes 0-7: the first group's rows, 8-15: the
//! second's), and Q4_K's quads of groups on two of them, so each activation broadcast feeds
//! two `vpdpbusd`, as the legacy VNNI kernels do (`avx512_x8.rs`). Each super-block of a pair is
//! decoded once ([`SuperPair`]) into 64 vectors of unsigned quants in element order (vector
//! `j`: elements `4j..4j + 4` of the 16 rows; Q6_K keeps its `+32` offset), each scale group's
//! scale as an i32 per row, and i16 pairs for the correction term. Then every tile of tokens
//! runs over the decoded super-blocks: per scale group one `vpdpbusd` per vector into a fresh
//! i32 sum (`u8 × i8`, four products per lane, nothing saturates), scaled into the super-
//! block's sum with one `vpmulld`; the correction (Q4_K's mins against the 32-element sums,
//! Q6_K's `32 · Σ scale · bsum`) is `vpdpwssd` over i16 pairs of scales and of the token's
//! group sums. The integer sums are the scalar kernel's, exactly, and the float term per
//! super-block is rounded as `quant::kquants::dot_q8_k` (and the AVX2 kernels) round it, so
//! the results are the same bits.

use core::arch::x86_64::*;

use super::avx2::ld256;
use super::avx2_x8::scales8;
use super::avx512_x8::{by_tile_count, join, join_ps, load_sums, store_sums};
use super::{avx512_few, avx512_tiles};
use crate::quant::interleaved::{q4_k, q5_k, q6_k, BatchRows, ROWS};
use crate::quant::kquants::q8_k::{self, BlockQ8K};
use crate::quant::kquants::QK_K;

/// Tokens a pair's tile runs together: their group and super-block sums (16 registers) stay
/// in registers beside the weight vector and the broadcasts.
const TILE: usize = 8;

/// Tokens a quad's tile runs together: 4 tokens × 2 vectors of group, super-block and float
/// sums (24 registers).
const QUAD_TILE: usize = 4;

/// Super-blocks of a pair decoded at a time (about 46 KB): longer runs spread each tile's
/// setup and carried sums over more work (`matmul` bench, down 4864 × 896 × 512 tokens, one
/// Zen 5 core: Q4_K 7.87 ms with 2, 7.45 with 4, 7.40 with 8; Q6_K 7.50, 7.19, 7.11).
const PAIR_SUPERS: usize = 8;

/// One super-block of a pair of groups, decoded.
#[derive(Clone, Copy)]
struct SuperPair {
    /// Vector `j`: the unsigned quants of elements `4j..4j + 4` of the 16 rows.
    q: [__m512i; 64],
    /// Each scale group's scale, an i32 per row (Q4_K: 8 groups of 32, Q6_K: 16 of 16).
    sc: [__m512i; 16],
    /// i16 pairs per row for the correction: Q4_K its mins `(m[2p], m[2p+1])` (`p < 4`),
    /// Q6_K its scales `(s[2p], s[2p+1])` (`p < 8`).
    pairs: [__m512i; 8],
    d: __m512,
    dmin: __m512,
}

/// What the kernels need of a k-quant format.
trait Format {
    /// Bytes of one group's super-block.
    const GROUP_BLOCK: usize;
    /// Quant vectors per scale group (8: groups of 32 elements; 4: of 16).
    const GROUP_VECTORS: usize;
    /// Correction pairs per super-block.
    const PAIRS: usize;
    /// Whether quads of groups run on two vectors (Q4_K: `matmul` bench, down 4864 × 896 ×
    /// 512 tokens, one Zen 5 core, 7.37 → 6.77 ms). Q6_K stays on pairs (7.07 → 7.23 ms as
    /// quads: its 16 scale groups and 8 correction pairs per super-block are per-token work
    /// a quad's tile of four tokens spreads over half as many).
    const QUADS: bool;

    /// Decodes super-block `p0` of the first group and `p1` of the second.
    ///
    /// # Safety
    /// `p0` and `p1` must each point at a whole group super-block of this format; the CPU
    /// must have AVX-512 F/BW/VL and VNNI.
    unsafe fn decode(p0: *const u8, p1: *const u8, out: &mut SuperPair);

    /// Token `y`'s i16 pair `p` of the correction (four bytes, as an i32).
    fn bsum_pair(y: &BlockQ8K, p: usize) -> i32;

    /// The float term of one super-block, from the exact integer sums, as the scalar kernel
    /// rounds it.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F.
    unsafe fn term(d: &SuperPair, d8: f32, isum: __m512i, corr: __m512i) -> __m512;
}

/// Both groups' 32 bytes at offset `at` as one vector.
///
/// # Safety
/// `p0 + at` and `p1 + at` must be valid for reading 32 bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn ld_pair(p0: *const u8, p1: *const u8, at: usize) -> __m512i {
    // SAFETY: the caller's contract.
    unsafe { join(ld256(p0.add(at)), ld256(p1.add(at))) }
}

/// Both groups' eight f16 scales at offset `at`, as f32.
///
/// # Safety
/// `p0 + at` and `p1 + at` must be valid for reading 16 bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn scales_pair(p0: *const u8, p1: *const u8, at: usize) -> __m512 {
    // SAFETY: the caller's contract.
    unsafe { join_ps(scales8(p0.add(at)), scales8(p1.add(at))) }
}

/// Byte `k` of each 32-bit lane, zero-extended.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn byte(v: __m512i, k: u32) -> __m512i {
    _mm512_and_si512(
        _mm512_srlv_epi32(v, _mm512_set1_epi32(8 * k as i32)),
        _mm512_set1_epi32(0xFF),
    )
}

/// Bytes `2h` and `2h + 1` of each 32-bit lane as its two i16 halves.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn byte_pair(v: __m512i, h: u32) -> __m512i {
    let v = _mm512_srlv_epi32(v, _mm512_set1_epi32(16 * h as i32));
    _mm512_or_si512(
        _mm512_and_si512(v, _mm512_set1_epi32(0xFF)),
        _mm512_and_si512(_mm512_slli_epi32(v, 8), _mm512_set1_epi32(0xFF_0000)),
    )
}

/// Bit `j` of each byte of `qh` as 16 or 0 (the 16-bit shifts bring no set bit across a
/// byte into bit 4: only bit 4 is kept).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn fifth_bit(qh: __m512i, j: usize) -> __m512i {
    let moved = if j < 4 {
        _mm512_sll_epi16(qh, _mm_cvtsi32_si128(4 - j as i32))
    } else {
        _mm512_srl_epi16(qh, _mm_cvtsi32_si128(j as i32 - 4))
    };
    _mm512_and_si512(moved, _mm512_set1_epi8(0x10))
}

/// Q4_K × 8, or with `Q5` Q5_K × 8 (the same bytes, and the fifth bits after them).
struct Q4K<const Q5: bool = false>;
type Q5K = Q4K<true>;

impl<const Q5: bool> Format for Q4K<Q5> {
    const GROUP_BLOCK: usize = if Q5 {
        q5_k::GROUP_BLOCK
    } else {
        q4_k::GROUP_BLOCK
    };
    const GROUP_VECTORS: usize = 8;
    const PAIRS: usize = 4;
    const QUADS: bool = true;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn decode(p0: *const u8, p1: *const u8, out: &mut SuperPair) {
        let low4 = _mm512_set1_epi8(0x0F);
        // chunk c (< 32), byte k: element 64(c/8) + 4(c%8) + k in the low nibble, 32 more in
        // the high one, i.e. vectors 16(c/8) + c%8 and 16(c/8) + 8 + c%8
        for c in 0..32 {
            // SAFETY: chunk c of both groups' quants (the caller's contract).
            let x = unsafe { ld_pair(p0, p1, q4_k::QS + 32 * c) };
            let j = 16 * (c / 8) + c % 8;
            out.q[j] = _mm512_and_si512(x, low4);
            out.q[j + 8] = _mm512_and_si512(_mm512_srli_epi16(x, 4), low4);
            if Q5 {
                // sub-blocks 2(c/8) and 2(c/8) + 1: bits 2(c/8), 2(c/8) + 1 of qh chunk c % 8
                // SAFETY: qh chunk c % 8 of both groups (the caller's contract: Q5_K blocks).
                let qh = unsafe { ld_pair(p0, p1, q5_k::QH + 32 * (c % 8)) };
                out.q[j] = _mm512_or_si512(out.q[j], fifth_bit(qh, 2 * (c / 8)));
                out.q[j + 8] = _mm512_or_si512(out.q[j + 8], fifth_bit(qh, 2 * (c / 8) + 1));
            }
        }
        // lane r of v_i: bytes 4i..4i+4 of row r's packed scales (`scale_min_k4`)
        // SAFETY: the three scale vectors of both groups.
        let v = |i: usize| unsafe { ld_pair(p0, p1, q4_k::SCALES + 32 * i) };
        let (v0, v1, v2) = (v(0), v(1), v(2));
        let low6 = _mm512_set1_epi8(0x3F);
        let bits45 = _mm512_set1_epi8(0x30);
        let lo4 = _mm512_set1_epi8(0x0F);
        // byte j of each lane: scale j (sc_lo) and j + 4 (sc_hi); the mins alike
        let sc_lo = _mm512_and_si512(v0, low6);
        let sc_hi = _mm512_or_si512(
            _mm512_and_si512(v2, lo4),
            _mm512_and_si512(_mm512_srli_epi32(v0, 2), bits45),
        );
        let mn_lo = _mm512_and_si512(v1, low6);
        let mn_hi = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi32(v2, 4), lo4),
            _mm512_and_si512(_mm512_srli_epi32(v1, 2), bits45),
        );
        for k in 0..4 {
            out.sc[k] = byte(sc_lo, k as u32);
            out.sc[4 + k] = byte(sc_hi, k as u32);
        }
        out.pairs[0] = byte_pair(mn_lo, 0);
        out.pairs[1] = byte_pair(mn_lo, 1);
        out.pairs[2] = byte_pair(mn_hi, 0);
        out.pairs[3] = byte_pair(mn_hi, 1);
        // SAFETY: both groups' d and dmin.
        unsafe {
            out.d = scales_pair(p0, p1, q4_k::D);
            out.dmin = scales_pair(p0, p1, q4_k::DMIN);
        }
    }

    #[inline(always)]
    fn bsum_pair(y: &BlockQ8K, p: usize) -> i32 {
        // the 32-element sums of sub-blocks 2p and 2p + 1 (each two 16-element sums)
        let s = |g: usize| i16::from_le_bytes([y.bsums[2 * g], y.bsums[2 * g + 1]]) as i32;
        let lo = s(4 * p) + s(4 * p + 1);
        let hi = s(4 * p + 2) + s(4 * p + 3);
        (lo & 0xFFFF) | (hi << 16)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn term(d: &SuperPair, d8: f32, isum: __m512i, msum: __m512i) -> __m512 {
        let d8 = _mm512_set1_ps(d8);
        _mm512_sub_ps(
            _mm512_mul_ps(_mm512_mul_ps(d.d, d8), _mm512_cvtepi32_ps(isum)),
            _mm512_mul_ps(_mm512_mul_ps(d.dmin, d8), _mm512_cvtepi32_ps(msum)),
        )
    }
}

struct Q6K;

impl Format for Q6K {
    const GROUP_BLOCK: usize = q6_k::GROUP_BLOCK;
    const GROUP_VECTORS: usize = 4;
    const PAIRS: usize = 8;
    const QUADS: bool = false;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn decode(p0: *const u8, p1: *const u8, out: &mut SuperPair) {
        let low6 = _mm512_set1_epi8(0x3F);
        // triple t = 8n + c: x, y, z hold (low six bits) elements 128n + 4c + 32k + 0..4 for
        // k = 0, 1, 2 and (top two bits each) the fourth, k = 3: vectors 32n + 8k + c
        for t in 0..16 {
            let (n, c) = (t / 8, t % 8);
            let at = q6_k::QS + 96 * t;
            // SAFETY: triple t's three vectors of both groups (the caller's contract).
            let (x, y, z) = unsafe {
                (
                    ld_pair(p0, p1, at),
                    ld_pair(p0, p1, at + 32),
                    ld_pair(p0, p1, at + 64),
                )
            };
            let j = 32 * n + c;
            out.q[j] = _mm512_and_si512(x, low6);
            out.q[j + 8] = _mm512_and_si512(y, low6);
            out.q[j + 16] = _mm512_and_si512(z, low6);
            // bits 6-7 of x, y, z to bits 0-1, 2-3, 4-5 (the masks drop what the 16-bit
            // shifts bring over from the neighbouring byte)
            let f = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(x, 6), _mm512_set1_epi8(0x03)),
                _mm512_and_si512(_mm512_srli_epi16(y, 4), _mm512_set1_epi8(0x0C)),
            );
            out.q[j + 24] = _mm512_or_si512(
                f,
                _mm512_and_si512(_mm512_srli_epi16(z, 2), _mm512_set1_epi8(0x30)),
            );
        }
        for p in 0..8 {
            // scales 2p, 2p + 1 of the rows: 16 bytes per group, sign-extended to i16 pairs
            // SAFETY: scale pair p of both groups.
            let s = unsafe {
                let at = q6_k::SCALES + 16 * p;
                _mm256_inserti128_si256(
                    _mm256_castsi128_si256(_mm_loadu_si128(p0.add(at).cast())),
                    _mm_loadu_si128(p1.add(at).cast()),
                    1,
                )
            };
            let pair = _mm512_cvtepi8_epi16(s);
            out.pairs[p] = pair;
            out.sc[2 * p] = _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16);
            out.sc[2 * p + 1] = _mm512_srai_epi32(pair, 16);
        }
        // SAFETY: both groups' d.
        out.d = unsafe { scales_pair(p0, p1, q6_k::D) };
        out.dmin = _mm512_setzero_ps();
    }

    #[inline(always)]
    fn bsum_pair(y: &BlockQ8K, p: usize) -> i32 {
        i32::from_le_bytes([
            y.bsums[4 * p],
            y.bsums[4 * p + 1],
            y.bsums[4 * p + 2],
            y.bsums[4 * p + 3],
        ])
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn term(d: &SuperPair, d8: f32, isum: __m512i, corr: __m512i) -> __m512 {
        // the stored quants are q + 32: isum - 32 · Σ scale · bsum. The scalar kernel's
        // `- dmin * d8 * msum` is ±0 here, which changes no sum (see the AVX2 kernel).
        let isum = _mm512_sub_epi32(isum, _mm512_slli_epi32(corr, 5));
        _mm512_mul_ps(
            _mm512_mul_ps(d.d, _mm512_set1_ps(d8)),
            _mm512_cvtepi32_ps(isum),
        )
    }
}

/// `T` tokens over decoded super-blocks `s0..s0 + dec.len()` of `2V` groups (`dec[i][v]`:
/// groups `2v` and `2v + 1`). `out` holds the groups' float sums group after group, `n`
/// tokens each; the tile's are tokens `t0..t0 + T`, carried there from one run of
/// super-blocks to the next (from super-block 0 they are written, not read). Each activation
/// broadcast serves `V` vectors: with two, a quad of groups loads half as many activation
/// words per multiply-add as a pair.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn tile<F: Format, const T: usize, const V: usize>(
    dec: &[[SuperPair; V]],
    s0: usize,
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    (n, t0): (usize, usize),
) {
    let m = dec.len();
    assert!(
        acts.len() == T && t0 + T <= n && out.len() == 2 * V * n,
        "a tile of {T} tokens of {} groups",
        2 * V
    );
    let mut ys: [&[BlockQ8K]; T] = [&[]; T];
    for (t, y) in ys.iter_mut().enumerate() {
        *y = &q8_k::blocks(acts.bytes(t))[s0..s0 + m];
    }
    let mut acc = [[_mm512_setzero_ps(); V]; T];
    if s0 > 0 {
        for (t, acc) in acc.iter_mut().enumerate() {
            *acc = load_sums(out, n, t0 + t);
        }
    }
    for (i, blk) in dec.iter().enumerate() {
        let mut yb: [&BlockQ8K; T] = [&ys[0][0]; T];
        for (t, y) in yb.iter_mut().enumerate() {
            // SAFETY: i < m, the length of every token's slice.
            *y = unsafe { &*ys[t].as_ptr().add(i) };
        }
        let mut isum = [[_mm512_setzero_si512(); V]; T];
        for g in 0..64 / F::GROUP_VECTORS {
            let mut s = [[_mm512_setzero_si512(); V]; T];
            for j in g * F::GROUP_VECTORS..(g + 1) * F::GROUP_VECTORS {
                for (s, y) in s.iter_mut().zip(&yb) {
                    // SAFETY: activation bytes 4j..4j + 4 of the 256.
                    let y4 = unsafe { y.qs.as_ptr().add(4 * j).cast::<i32>().read_unaligned() };
                    let y4 = _mm512_set1_epi32(y4);
                    for (s, half) in s.iter_mut().zip(blk) {
                        *s = _mm512_dpbusd_epi32(*s, half.q[j], y4);
                    }
                }
            }
            for (isum, s) in isum.iter_mut().zip(s) {
                for ((isum, s), half) in isum.iter_mut().zip(s).zip(blk) {
                    *isum = _mm512_add_epi32(*isum, _mm512_mullo_epi32(s, half.sc[g]));
                }
            }
        }
        for t in 0..T {
            let mut corr = [_mm512_setzero_si512(); V];
            for p in 0..F::PAIRS {
                let b = _mm512_set1_epi32(F::bsum_pair(yb[t], p));
                for (corr, half) in corr.iter_mut().zip(blk) {
                    *corr = _mm512_dpwssd_epi32(*corr, half.pairs[p], b);
                }
            }
            for v in 0..V {
                // SAFETY: the CPU has AVX-512 (this function's features).
                let term = unsafe { F::term(&blk[v], yb[t].d(), isum[t][v], corr[v]) };
                acc[t][v] = _mm512_add_ps(acc[t][v], term);
            }
        }
    }
    for (t, acc) in acc.into_iter().enumerate() {
        store_sums(acc, out, n, t0 + t);
    }
}

/// Runs [`tile`] over the `n` tokens of `acts`, `TILE` at a time (the last tile with what is
/// left).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn tiles<F: Format, const V: usize, const TILE: usize>(
    dec: &[[SuperPair; V]],
    s0: usize,
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
) {
    let n = acts.len();
    for t0 in (0..n).step_by(TILE) {
        let t1 = (t0 + TILE).min(n);
        let (a, at) = (acts.slice(t0, t1), (n, t0));
        by_tile_count!(t1 - t0, T => tile::<F, T, V>(dec, s0, a, out, at));
    }
}

/// `2V` groups against every token: `groups[v]` are the groups decoded into vector `v`
/// (groups `2v`, `2v + 1`; a single group names itself twice), decoded into `scratch`
/// `PAIR_SUPERS / V` super-blocks at a time (a quad's 4 are as many bytes as a pair's 8),
/// every tile of `TILE` tokens running over them. `out` holds the `2V` groups' sums, `n`
/// tokens each.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn run<F: Format, const V: usize, const TILE: usize>(
    nb: usize,
    groups: [[&[u8]; 2]; V],
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    scratch: &mut [SuperPair; PAIR_SUPERS],
) {
    assert!(
        groups
            .iter()
            .flatten()
            .all(|g| g.len() == nb * F::GROUP_BLOCK)
            && out.len() == 2 * V * acts.len(),
        "whole groups, one output per group and token"
    );
    let (dec, _) = scratch.as_chunks_mut::<V>();
    let run = dec.len();
    for s0 in (0..nb).step_by(run) {
        let m = run.min(nb - s0);
        for (i, d) in dec[..m].iter_mut().enumerate() {
            let at = (s0 + i) * F::GROUP_BLOCK;
            for (d, [g0, g1]) in d.iter_mut().zip(&groups) {
                // SAFETY: super-block s0 + i < nb of both groups (whole groups, asserted
                // above); the CPU has this function's features.
                unsafe { F::decode(g0.as_ptr().add(at), g1.as_ptr().add(at), d) };
            }
        }
        tiles::<F, V, TILE>(&dec[..m], s0, acts, out);
    }
}

/// A batch kernel over any number of whole groups (`GemmX8Fn`): quads of groups on two
/// vectors ([`QUAD_TILE`] tokens per tile) where the format runs them ([`Format::QUADS`]),
/// pairs on one ([`TILE`] tokens), and a last odd group decoded beside itself, the copy's
/// sums dropped.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn gemm_groups<F: Format>(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    let n = acts.len();
    let nb = cols / QK_K;
    let group_bytes = nb * F::GROUP_BLOCK;
    let groups = out.len() / n;
    assert!(
        out.len() == groups * n && w.len() == groups * group_bytes,
        "whole groups of {cols} columns, one output per group and token"
    );
    if group_bytes == 0 {
        out.fill([0.0; ROWS]);
        return;
    }
    let zero = SuperPair {
        q: [_mm512_setzero_si512(); 64],
        sc: [_mm512_setzero_si512(); 16],
        pairs: [_mm512_setzero_si512(); 8],
        d: _mm512_setzero_ps(),
        dmin: _mm512_setzero_ps(),
    };
    let mut dec = [zero; PAIR_SUPERS];
    let group = |g: usize| &w[g * group_bytes..(g + 1) * group_bytes];
    let mut g = 0;
    while F::QUADS && g + 4 <= groups {
        let groups = [[group(g), group(g + 1)], [group(g + 2), group(g + 3)]];
        let out = &mut out[g * n..(g + 4) * n];
        run::<F, 2, QUAD_TILE>(nb, groups, acts, out, &mut dec);
        g += 4;
    }
    while g + 2 <= groups {
        let groups = [[group(g), group(g + 1)]];
        run::<F, 1, TILE>(nb, groups, acts, &mut out[g * n..(g + 2) * n], &mut dec);
        g += 2;
    }
    if g < groups {
        let mut both = alloc::vec![[0.0f32; ROWS]; 2 * n];
        run::<F, 1, TILE>(nb, [[group(g), group(g)]], acts, &mut both, &mut dec);
        out[g * n..].copy_from_slice(&both[..n]);
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn gemm_q4_k(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    if acts.len() <= avx512_few::FEW_KQUANT_TOKENS {
        return avx512_tiles::gemm_few_q4_k(cols, w, acts, out);
    }
    gemm_groups::<Q4K>(cols, w, acts, out)
}

/// Q5_K: a few tokens run the AVX2 kernel (no AVX-512 one of a few tokens yet; the same bits).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn gemm_q5_k(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    if acts.len() <= avx512_few::FEW_KQUANT_TOKENS {
        // AVX-512 comes with the AVX2 set here (`fill_avx512`'s contract)
        return super::avx2_x8_safe::gemm_q5_k(cols, w, acts, out);
    }
    gemm_groups::<Q5K>(cols, w, acts, out)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn gemm_q6_k(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    if acts.len() <= avx512_few::FEW_KQUANT_TOKENS {
        return avx512_tiles::gemm_few_q6_k(cols, w, acts, out);
    }
    gemm_groups::<Q6K>(cols, w, acts, out)
}
