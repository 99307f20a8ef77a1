//! AVX-512 VNNI batch kernels over the legacy interleaved layouts (Q4_0, Q5_0, Q8_0 × 8):
//! quads of groups on two 512-bit vectors (two groups per vector), a last pair on one, a
//! last odd group on 256-bit vectors (32 registers with AVX-512 VL).
//!
//! Each group is decoded once per run of blocks into unsigned bytes with an
//! offset (`Decoded`, as the AVX2 Q5_0 kernel does): Q4_0 nibbles (offset 8), Q5_0 5-bit
//! values (16) and Q8_0 quants with their sign bit flipped (`x ^ 0x80 = x + 128`, offset
//! 128). Per block and token one `vpdpbusd` per vector then sums four `u8 × i8` products into
//! each row's i32 lane (no i16 stage, so nothing saturates), and the offset comes off with
//! the token's block sum: `Σ (q - o)·y = Σ q·y - o·Σ y`. The integer sums are exact and the
//! float accumulation is the scalar kernel's, `sum += isum as f32 * (dx * dy)`, so the
//! results are the AVX2 kernels' and the scalar kernel's, bit for bit.
//!
//! A quad's tile runs [`QUAD_TILE`] tokens, a pair's and a single group's [`TILE`]: their
//! i32 chains and float sums stay in the 32 registers, and eight independent `vpdpbusd`
//! chains cover its latency. Each 4-byte activation broadcast is a load; in a quad it feeds
//! two `vpdpbusd` (docs/ARCHITECTURE.md: with pairs the kernels were bound by those loads).

use core::arch::x86_64::*;
use core::mem::MaybeUninit;

use super::avx2_x8::{gemm_decoded, q5_0_decode, Decoded};
use super::avx512_few;
use super::avx512_tiles::tile_any;
use super::vnni_tiles::{q4_0_decode, q8_0_decode, token_rows};
use crate::quant::interleaved::{q4_0, q5_0, q8_0, BatchRows, ROWS};
use crate::quant::legacy::QK;

/// Tokens a pair's or a single group's tile runs together.
const TILE: usize = 8;

/// Runs `$body` with the constant `$t` set to the token count `$n` (1 ..= 8; more as 8, 0
/// not at all), so a tile's count reaches its kernel as a const generic.
macro_rules! by_tile_count {
    ($n:expr, $t:ident => $body:expr) => {
        match $n {
            0 => {}
            1 => {
                const $t: usize = 1;
                $body
            }
            2 => {
                const $t: usize = 2;
                $body
            }
            3 => {
                const $t: usize = 3;
                $body
            }
            4 => {
                const $t: usize = 4;
                $body
            }
            5 => {
                const $t: usize = 5;
                $body
            }
            6 => {
                const $t: usize = 6;
                $body
            }
            7 => {
                const $t: usize = 7;
                $body
            }
            _ => {
                const $t: usize = 8;
                $body
            }
        }
    };
}
pub(super) use by_tile_count;

/// `2V` groups' decoded block on `V` 512-bit vectors: vector `v` holds group `2v` in lanes
/// 0-7 (of the i32 / f32 lanes) and group `2v + 1` in lanes 8-15.
#[derive(Clone, Copy)]
struct Wide<const V: usize> {
    q: [[__m512i; V]; 8],
    d: [__m512; V],
}

/// Blocks of a run of groups decoded at a time (a quad's 40 blocks are 46 KB; Qwen2.5's
/// 896-column rows, 28 blocks, in one run). Long runs spread each tile's setup and the
/// loads and stores of its carried sums over more blocks: `matmul` bench, Q4_0 896 × 4864
/// × 512 tokens, one Zen 5 core, quads of four tokens: 8 blocks 7.6 ms, 16 6.9, 32 6.6, 40
/// 6.4, 64 6.7.
const WIDE_BLOCKS: usize = 40;

/// Tokens a quad's tile runs: 4 tokens × 2 vectors of integer and of float sums stay in
/// registers (the same bench: 4 tokens 6.4 ms, 5 6.5, 6 6.9).
const QUAD_TILE: usize = 4;

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

/// `T` tokens over the decoded blocks `b0..b0 + dec.len()` of `2V` groups (see
/// `vnni_tile` (`vnni_tiles`)). `out` holds the groups' sums group after group, `n` tokens each; the
/// tile's are tokens `t0..t0 + T`, carried there from one run of blocks to the next (from
/// block 0 they are written, not read). Each activation broadcast serves `V` vectors: with
/// two, a quad of groups loads half as many activation words per multiply-add as a pair.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn wide_tile<const T: usize, const V: usize>(
    dec: &[Wide<V>],
    b0: usize,
    acts: BatchRows<'_>,
    shift: i32,
    out: &mut [[f32; ROWS]],
    (n, t0): (usize, usize),
) {
    let m = dec.len();
    assert!(
        acts.len() == T && t0 + T <= n && out.len() == 2 * V * n,
        "a tile of {T} tokens of {}",
        2 * V
    );
    let (ys, dys, sums) = token_rows::<T>(acts, b0, m);
    let shift = _mm_cvtsi32_si128(shift);
    let mut acc = [[_mm512_setzero_ps(); V]; T];
    if b0 > 0 {
        for (t, acc) in acc.iter_mut().enumerate() {
            *acc = load_sums(out, n, t0 + t);
        }
    }
    for (i, blk) in dec.iter().enumerate() {
        // the reads below: i < m, the length of every token's slices (`token_rows`)
        let mut isum = [[_mm512_setzero_si512(); V]; T];
        for (isum, sums) in isum.iter_mut().zip(&sums) {
            // SAFETY: `sums` has m values and i < m.
            let s = _mm512_set1_epi32(unsafe { *sums.as_ptr().add(i) });
            *isum = [_mm512_sub_epi32(_mm512_setzero_si512(), _mm512_sll_epi32(s, shift)); V];
        }
        for (j, q) in blk.q.iter().enumerate() {
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
                let y = _mm512_set1_epi32(y);
                for (isum, &q) in isum.iter_mut().zip(q) {
                    *isum = _mm512_dpbusd_epi32(*isum, q, y);
                }
            }
        }
        for t in 0..T {
            // SAFETY: as above.
            let dy = unsafe { _mm512_set1_ps(*dys[t].as_ptr().add(i)) };
            for v in 0..V {
                // the scalar kernel's rounding: acc + isum · (dx · dy), no fused multiply-add
                let scale = _mm512_mul_ps(blk.d[v], dy);
                let term = _mm512_mul_ps(_mm512_cvtepi32_ps(isum[t][v]), scale);
                acc[t][v] = _mm512_add_ps(acc[t][v], term);
            }
        }
    }
    for (t, acc) in acc.into_iter().enumerate() {
        store_sums(acc, out, n, t0 + t);
    }
}

/// Token `t`'s float sums of `2V` groups held group after group in `out` (`n` tokens each),
/// as `V` vectors: vector `v` holds group `2v` in lanes 0-7 and group `2v + 1` in 8-15.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn load_sums<const V: usize>(out: &[[f32; ROWS]], n: usize, t: usize) -> [__m512; V] {
    let mut acc = [_mm512_setzero_ps(); V];
    for (v, acc) in acc.iter_mut().enumerate() {
        let (lo, hi) = (&out[2 * v * n + t], &out[(2 * v + 1) * n + t]);
        // SAFETY: `lo` and `hi` are 8 floats each.
        *acc = unsafe { join_ps(_mm256_loadu_ps(lo.as_ptr()), _mm256_loadu_ps(hi.as_ptr())) };
    }
    acc
}

/// Stores `acc` (as [`load_sums`] reads it) as token `t`'s float sums of the `2V` groups.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn store_sums<const V: usize>(
    acc: [__m512; V],
    out: &mut [[f32; ROWS]],
    n: usize,
    t: usize,
) {
    for (v, acc) in acc.into_iter().enumerate() {
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
        let (lo_out, hi_out) = out.split_at_mut((2 * v + 1) * n);
        // SAFETY: each is 8 floats.
        unsafe {
            _mm256_storeu_ps(
                lo_out[2 * v * n + t].as_mut_ptr(),
                _mm512_castps512_ps256(acc),
            );
            _mm256_storeu_ps(hi_out[t].as_mut_ptr(), hi);
        }
    }
}

/// Runs [`wide_tile`] over the `n` tokens of `acts`, `TILE` at a time (the last tile with
/// what is left).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn wide_tiles<const V: usize, const TILE: usize>(
    dec: &[Wide<V>],
    b0: usize,
    acts: BatchRows<'_>,
    shift: i32,
    out: &mut [[f32; ROWS]],
) {
    let n = acts.len();
    for t0 in (0..n).step_by(TILE) {
        let t1 = (t0 + TILE).min(n);
        let (a, at) = (acts.slice(t0, t1), (n, t0));
        by_tile_count!(t1 - t0, T => wide_tile::<T, V>(dec, b0, a, shift, out, at));
    }
}

/// `2V` groups (`w`: their group blocks one group after another) against every token:
/// blocks decoded [`WIDE_BLOCKS`] at a time, every tile of `TILE` tokens running over them.
///
/// # Safety
/// `decode` must only read the `group_block` bytes at its pointer.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn gemm_wide<const V: usize, const TILE: usize>(
    nb: usize,
    w: &[u8],
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    group_block: usize,
    shift: i32,
    decode: &impl Fn(*const u8) -> Decoded,
) {
    let group_bytes = nb * group_block;
    assert!(w.len() == 2 * V * group_bytes && out.len() == 2 * V * acts.len());
    let zero = Wide::<V> {
        q: [[_mm512_setzero_si512(); V]; 8],
        d: [_mm512_setzero_ps(); V],
    };
    // not zeroed: a 46 KiB memset per call was 12% of a step of two tokens
    let mut dec = [const { MaybeUninit::<Wide<V>>::uninit() }; WIDE_BLOCKS];
    for b0 in (0..nb).step_by(WIDE_BLOCKS) {
        let m = WIDE_BLOCKS.min(nb - b0);
        for (i, slot) in dec[..m].iter_mut().enumerate() {
            let mut d = zero;
            for v in 0..V {
                // SAFETY: block b0 + i < nb of groups 2v and 2v + 1.
                let (lo, hi) = unsafe {
                    let p = w.as_ptr().add(2 * v * group_bytes + (b0 + i) * group_block);
                    (decode(p), decode(p.add(group_bytes)))
                };
                for (q, (lo, hi)) in d.q.iter_mut().zip(lo.q.iter().zip(&hi.q)) {
                    q[v] = join(*lo, *hi);
                }
                d.d[v] = join_ps(lo.d, hi.d);
            }
            slot.write(d);
        }
        // SAFETY: the first m were written above; MaybeUninit<T> has T's layout.
        let dec = unsafe { &*(&dec[..m] as *const [MaybeUninit<Wide<V>>] as *const [Wide<V>]) };
        wide_tiles::<V, TILE>(dec, b0, acts, shift, out);
    }
}

/// A batch kernel over any number of whole groups (`GemmX8Fn`): quads of groups on two
/// 512-bit vectors ([`wide_tile`] with `V = 2`, [`QUAD_TILE`] tokens), then a pair on one
/// (eight tokens), then a last odd group on 256-bit vectors (`vnni_tile` (`vnni_tiles`)), each with its
/// float sums carried in `out` (exact: f32 stores).
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
    let mut quads = w.chunks_exact(4 * group_bytes);
    let mut outs = out.chunks_exact_mut(4 * n);
    for (wq, oq) in (&mut quads).zip(&mut outs) {
        // SAFETY: the decoder reads one group block (the caller's contract).
        unsafe { gemm_wide::<2, QUAD_TILE>(nb, wq, acts, oq, group_block, shift, &decode) };
    }
    let (mut w, mut out) = (quads.remainder(), outs.into_remainder());
    if w.len() >= 2 * group_bytes {
        let (wp, op) = (&w[..2 * group_bytes], &mut out[..2 * n]);
        // SAFETY: as above.
        unsafe { gemm_wide::<1, TILE>(nb, wp, acts, op, group_block, shift, &decode) };
        (w, out) = (&w[2 * group_bytes..], &mut out[2 * n..]);
    }
    if !w.is_empty() {
        // SAFETY: the decoder reads one group block (the caller's contract).
        unsafe {
            gemm_decoded(
                cols,
                w,
                acts,
                out,
                group_block,
                TILE,
                decode,
                |d, b0, a, o| tile_any(d, b0, a, shift, o),
            )
        }
    }
}

/// Defines a batch kernel `$gemm` over a decoder whose values carry `+ 1 << $shift`; calls
/// of at most `FEW_TOKENS` tokens go to `$few` (`avx512_few`).
macro_rules! vnni_gemm {
    ($gemm:ident, $decode:ident, $group_block:expr, $shift:expr, $few:ident) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub(super) fn $gemm(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
            if acts.len() <= avx512_few::FEW_TOKENS {
                return avx512_few::$few(cols, w, acts, out);
            }
            // SAFETY: the decoder reads one group block.
            unsafe { gemm_groups(cols, w, acts, out, $group_block, $shift, |p| $decode(p)) }
        }
    };
}

vnni_gemm!(gemm_q8_0, q8_0_decode, q8_0::GROUP_BLOCK, 7, gemm_few_q8_0);
vnni_gemm!(gemm_q4_0, q4_0_decode, q4_0::GROUP_BLOCK, 3, gemm_few_q4_0);
vnni_gemm!(gemm_q5_0, q5_0_decode, q5_0::GROUP_BLOCK, 4, gemm_few_q5_0);
