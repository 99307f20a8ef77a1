//! AVX-512 VNNI batch kernels over the legacy interleaved layouts (Q4_0, Q5_0, Q8_0 × 8),
//! on 256-bit vectors (AVX-512 VL: 32 registers, and `vpdpbusd` takes its broadcast
//! activation bytes straight from memory).
//!
//! Each group is decoded once per `DECODE_BLOCKS` blocks into unsigned bytes with an
//! offset (`Decoded`, as the AVX2 Q5_0 kernel does): Q4_0 nibbles (offset 8), Q5_0 5-bit
//! values (16) and Q8_0 quants with their sign bit flipped (`x ^ 0x80 = x + 128`, offset
//! 128). Per block and token one `vpdpbusd` per vector then sums four `u8 × i8` products into
//! each row's i32 lane (no i16 stage, so nothing saturates), and the offset comes off with
//! the token's block sum: `Σ (q - o)·y = Σ q·y - o·Σ y`. The integer sums are exact and the
//! float accumulation is the scalar kernel's, `sum += isum as f32 * (dx * dy)`, so the
//! results are the AVX2 kernels' and the scalar kernel's, bit for bit.
//!
//! A tile runs [`TILE`] tokens: with 32 registers their eight i32 chains and eight float
//! sums stay in registers, and eight independent `vpdpbusd` chains cover its latency.

use core::arch::x86_64::*;

use super::avx2::ld256;
use super::avx2_x8::{accumulate, bcast4, gemm_decoded, q5_0_decode, scales8, Decoded};
use crate::quant::interleaved::{q4_0, q5_0, q8_0, BatchRows, ROWS};
use crate::quant::legacy::{blocks, BlockQ8_0, QK};

/// Tokens a tile runs together.
const TILE: usize = 8;

/// Each token's activation blocks, f32 scales and block sums for blocks `b0..b0 + m` (plain
/// loops: closures passed to `from_fn` would not inline into these `target_feature` callers).
#[inline(always)]
#[allow(clippy::type_complexity)]
fn token_rows<const T: usize>(
    acts: BatchRows<'_>,
    b0: usize,
    m: usize,
) -> ([&[BlockQ8_0]; T], [&[f32]; T], [&[i32]; T]) {
    let (mut ys, mut dys, mut sums): ([&[BlockQ8_0]; T], [&[f32]; T], [&[i32]; T]) =
        ([&[]; T], [&[]; T], [&[]; T]);
    for t in 0..T {
        ys[t] = &blocks::<BlockQ8_0>(acts.bytes(t))[b0..b0 + m];
        dys[t] = &acts.scales(t)[b0..b0 + m];
        let s = acts.sums(t);
        assert!(!s.is_empty(), "the batch carries its block sums");
        sums[t] = &s[b0..b0 + m];
    }
    (ys, dys, sums)
}

/// `T` tokens over decoded blocks `b0..b0 + dec.len()` whose values carry `+ (1 << shift)`:
/// each token's float sum, carried in `out`, takes `(Σ q·y - Σy << shift) · (dx · dy)` per
/// block.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn vnni_tile<const T: usize>(
    dec: &[Decoded],
    b0: usize,
    acts: BatchRows<'_>,
    shift: i32,
    out: &mut [[f32; ROWS]],
) {
    let m = dec.len();
    assert!(acts.len() == T && out.len() == T, "a tile of {T} tokens");
    let (ys, dys, sums) = token_rows::<T>(acts, b0, m);
    let shift = _mm_cvtsi32_si128(shift);
    // SAFETY: `out[t]` is 8 floats.
    let mut acc = [_mm256_setzero_ps(); T];
    for (acc, o) in acc.iter_mut().zip(out.iter()) {
        // SAFETY: `o` is 8 floats.
        *acc = unsafe { _mm256_loadu_ps(o.as_ptr()) };
    }
    for (i, blk) in dec.iter().enumerate() {
        // SAFETY (the reads below): i < m, the length of every token's slices.
        let mut isum = [_mm256_setzero_si256(); T];
        for (isum, sums) in isum.iter_mut().zip(&sums) {
            let s = _mm256_set1_epi32(unsafe { *sums.as_ptr().add(i) });
            *isum = _mm256_sub_epi32(*isum, _mm256_sll_epi32(s, shift));
        }
        for (j, &q) in blk.q.iter().enumerate() {
            for (isum, y) in isum.iter_mut().zip(&ys) {
                // SAFETY: activation bytes 4j..4j + 4 of block i's 32.
                let y = unsafe { bcast4((*y.as_ptr().add(i)).qs.as_ptr().add(4 * j)) };
                *isum = _mm256_dpbusd_epi32(*isum, q, y);
            }
        }
        for t in 0..T {
            // SAFETY: as above.
            let dy = unsafe { _mm256_broadcast_ss(&*dys[t].as_ptr().add(i)) };
            acc[t] = accumulate(acc[t], isum[t], blk.d, dy);
        }
    }
    for (o, acc) in out.iter_mut().zip(acc) {
        // SAFETY: `o` is 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), acc) };
    }
}

/// Calls `vnni_tile::<T>` with `T` the tile's token count (1 ..= [`TILE`]).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn tile_any(dec: &[Decoded], b0: usize, acts: BatchRows<'_>, shift: i32, o: &mut [[f32; ROWS]]) {
    match acts.len() {
        0 => {}
        1 => vnni_tile::<1>(dec, b0, acts, shift, o),
        2 => vnni_tile::<2>(dec, b0, acts, shift, o),
        3 => vnni_tile::<3>(dec, b0, acts, shift, o),
        4 => vnni_tile::<4>(dec, b0, acts, shift, o),
        5 => vnni_tile::<5>(dec, b0, acts, shift, o),
        6 => vnni_tile::<6>(dec, b0, acts, shift, o),
        7 => vnni_tile::<7>(dec, b0, acts, shift, o),
        _ => vnni_tile::<8>(dec, b0, acts, shift, o),
    }
}

/// # Safety
/// `p` must point at a Q8_0 × 8 group block (272 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q8_0_decode(p: *const u8) -> Decoded {
    let flip = _mm256_set1_epi8(i8::MIN);
    let mut q = [_mm256_setzero_si256(); 8];
    for (c, q) in q.iter_mut().enumerate() {
        // SAFETY: chunk c of the block's 8 chunks of 32 quant bytes (the caller's contract).
        *q = _mm256_xor_si256(unsafe { ld256(p.add(16 + 32 * c)) }, flip);
    }
    // SAFETY: the block's scales.
    Decoded {
        q,
        d: unsafe { scales8(p) },
    }
}

/// # Safety
/// `p` must point at a Q4_0 × 8 group block (144 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn q4_0_decode(p: *const u8) -> Decoded {
    let low4 = _mm256_set1_epi8(0x0F);
    // SAFETY: the block's 4 chunks of 32 quant bytes (the caller's contract).
    let mut q = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        // SAFETY: chunk c of the block's 4 chunks of 32 quant bytes (the caller's contract).
        let x = unsafe { ld256(p.add(16 + 32 * c)) };
        // byte k of chunk c: element 4c + k (low nibble) and 16 + 4c + k (high nibble)
        q[c] = _mm256_and_si256(x, low4);
        q[4 + c] = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
    }
    // SAFETY: the block's scales.
    Decoded {
        q,
        d: unsafe { scales8(p) },
    }
}

/// Two groups' decoded block side by side: lanes 0-7 (of the i32 / f32 lanes) hold the
/// first group's rows, lanes 8-15 the second's.
#[derive(Clone, Copy)]
struct Decoded2 {
    q: [__m512i; 8],
    d: __m512,
}

/// Blocks of a pair of groups decoded at a time (9 KB, beside a tile's activations in L1).
const PAIR_BLOCKS: usize = 16;

/// `[lo, hi]` as one 512-bit vector.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)
}

/// `[lo, hi]` as one 512-bit float vector.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn join_ps(lo: __m256, hi: __m256) -> __m512 {
    _mm512_castsi512_ps(join(_mm256_castps_si256(lo), _mm256_castps_si256(hi)))
}

/// `T` tokens over decoded block pairs `b0..b0 + dec.len()` (see [`vnni_tile`]): the first
/// group's sums are carried in `out0`, the second's in `out1` (from block 0 they are
/// written, not read).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn pair_tile<const T: usize>(
    dec: &[Decoded2],
    b0: usize,
    acts: BatchRows<'_>,
    shift: i32,
    out0: &mut [[f32; ROWS]],
    out1: &mut [[f32; ROWS]],
) {
    let m = dec.len();
    assert!(
        acts.len() == T && out0.len() == T && out1.len() == T,
        "a tile of {T} tokens"
    );
    let (ys, dys, sums) = token_rows::<T>(acts, b0, m);
    let shift = _mm_cvtsi32_si128(shift);
    // the first blocks start the sums; later ones carry them in `out0` / `out1`
    let mut acc = [_mm512_setzero_ps(); T];
    for t in (0..T).filter(|_| b0 > 0) {
        // SAFETY: `out0[t]` and `out1[t]` are 8 floats each.
        acc[t] = unsafe {
            join_ps(
                _mm256_loadu_ps(out0[t].as_ptr()),
                _mm256_loadu_ps(out1[t].as_ptr()),
            )
        };
    }
    for (i, blk) in dec.iter().enumerate() {
        // SAFETY (the reads below): i < m, the length of every token's slices.
        let mut isum = [_mm512_setzero_si512(); T];
        for (isum, sums) in isum.iter_mut().zip(&sums) {
            let s = _mm512_set1_epi32(unsafe { *sums.as_ptr().add(i) });
            *isum = _mm512_sub_epi32(*isum, _mm512_sll_epi32(s, shift));
        }
        for (j, &q) in blk.q.iter().enumerate() {
            for (isum, y) in isum.iter_mut().zip(&ys) {
                // SAFETY: activation bytes 4j..4j + 4 of block i's 32.
                let y = unsafe {
                    (*y.as_ptr().add(i))
                        .qs
                        .as_ptr()
                        .add(4 * j)
                        .cast::<i32>()
                        .read_unaligned()
                };
                *isum = _mm512_dpbusd_epi32(*isum, q, _mm512_set1_epi32(y));
            }
        }
        for t in 0..T {
            // SAFETY: as above.
            let dy = unsafe { _mm512_set1_ps(*dys[t].as_ptr().add(i)) };
            // the scalar kernel's rounding: acc + isum · (dx · dy), no fused multiply-add
            let term = _mm512_mul_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(blk.d, dy));
            acc[t] = _mm512_add_ps(acc[t], term);
        }
    }
    for (t, acc) in acc.into_iter().enumerate() {
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
        // SAFETY: `out0[t]` and `out1[t]` are 8 floats each.
        unsafe {
            _mm256_storeu_ps(out0[t].as_mut_ptr(), _mm512_castps512_ps256(acc));
            _mm256_storeu_ps(out1[t].as_mut_ptr(), hi);
        }
    }
}

/// Calls `pair_tile::<T>` with `T` the tile's token count (1 ..= [`TILE`]).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn pair_tile_any(
    dec: &[Decoded2],
    b0: usize,
    acts: BatchRows<'_>,
    shift: i32,
    o0: &mut [[f32; ROWS]],
    o1: &mut [[f32; ROWS]],
) {
    match acts.len() {
        0 => {}
        1 => pair_tile::<1>(dec, b0, acts, shift, o0, o1),
        2 => pair_tile::<2>(dec, b0, acts, shift, o0, o1),
        3 => pair_tile::<3>(dec, b0, acts, shift, o0, o1),
        4 => pair_tile::<4>(dec, b0, acts, shift, o0, o1),
        5 => pair_tile::<5>(dec, b0, acts, shift, o0, o1),
        6 => pair_tile::<6>(dec, b0, acts, shift, o0, o1),
        7 => pair_tile::<7>(dec, b0, acts, shift, o0, o1),
        _ => pair_tile::<8>(dec, b0, acts, shift, o0, o1),
    }
}

/// A batch kernel over any number of whole groups (`GemmX8Fn`): pairs of groups run on
/// 512-bit vectors ([`pair_tile`]), a last odd group on 256-bit ones ([`vnni_tile`]). Each
/// pair is decoded [`PAIR_BLOCKS`] blocks at a time, every tile of tokens running over them
/// with its float sums carried in `out` (exact: f32 stores).
///
/// # Safety
/// `decode` must only read the `group_block` bytes at its pointer.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn gemm_groups(
    cols: usize,
    w: &[u8],
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    group_block: usize,
    shift: i32,
    decode: impl Fn(*const u8) -> Decoded,
) {
    let n = acts.len();
    let nb = cols / QK;
    let group_bytes = nb * group_block;
    let groups = out.len() / n;
    assert!(
        out.len() == groups * n && w.len() == groups * group_bytes,
        "whole groups of {cols} columns, one output per group and token"
    );
    if group_bytes == 0 {
        out.fill([0.0; ROWS]);
        return;
    }
    let zero = Decoded2 {
        q: [_mm512_setzero_si512(); 8],
        d: _mm512_setzero_ps(),
    };
    let mut dec = [zero; PAIR_BLOCKS];
    let mut pairs = w.chunks_exact(2 * group_bytes);
    let mut outs = out.chunks_exact_mut(2 * n);
    for (wp, op) in (&mut pairs).zip(&mut outs) {
        let (o0, o1) = op.split_at_mut(n);
        for b0 in (0..nb).step_by(PAIR_BLOCKS) {
            let m = PAIR_BLOCKS.min(nb - b0);
            for (i, d) in dec[..m].iter_mut().enumerate() {
                // SAFETY: block b0 + i < nb of both groups of the pair.
                let (lo, hi) = unsafe {
                    let p = wp.as_ptr().add((b0 + i) * group_block);
                    (decode(p), decode(p.add(group_bytes)))
                };
                for (q, (lo, hi)) in d.q.iter_mut().zip(lo.q.iter().zip(&hi.q)) {
                    *q = join(*lo, *hi);
                }
                d.d = join_ps(lo.d, hi.d);
            }
            for t0 in (0..n).step_by(TILE) {
                let t1 = (t0 + TILE).min(n);
                let a = acts.slice(t0, t1);
                pair_tile_any(&dec[..m], b0, a, shift, &mut o0[t0..t1], &mut o1[t0..t1]);
            }
        }
    }
    let (wg, og) = (pairs.remainder(), outs.into_remainder());
    if !wg.is_empty() {
        // SAFETY: the decoder reads one group block (the caller's contract).
        unsafe {
            gemm_decoded(
                cols,
                wg,
                acts,
                og,
                group_block,
                TILE,
                decode,
                |d, b0, a, o| tile_any(d, b0, a, shift, o),
            )
        }
    }
}

/// Defines a batch kernel `$gemm` over a decoder whose values carry `+ 1 << $shift`.
macro_rules! vnni_gemm {
    ($gemm:ident, $decode:ident, $group_block:expr, $shift:expr) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub(super) fn $gemm(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
            // SAFETY: the decoder reads one group block.
            unsafe { gemm_groups(cols, w, acts, out, $group_block, $shift, |p| $decode(p)) }
        }
    };
}

vnni_gemm!(gemm_q8_0, q8_0_decode, q8_0::GROUP_BLOCK, 7);
vnni_gemm!(gemm_q4_0, q4_0_decode, q4_0::GROUP_BLOCK, 3);
vnni_gemm!(gemm_q5_0, q5_0_decode, q5_0::GROUP_BLOCK, 4);
