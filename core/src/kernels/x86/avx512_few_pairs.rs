//! AVX-512 VNNI few-token kernels over the legacy interleaved layouts (Q4_0, Q5_0, Q8_0 × 8)
//! on 512-bit vectors: two neighbouring groups (16 rows) at a time, group `a` in the low
//! half of each vector and group `b` in the high half, so one broadcast of four activation
//! bytes and one `vpdpbusd` serve sixteen rows instead of eight. Each block's weights are
//! taken apart once per tile of tokens (as in `avx512_few`'s 256-bit kernels, which still run
//! a last odd group); per token and block the work is then one broadcast load and one
//! `vpdpbusd` per chunk, and one conversion, two multiplications and one addition for the
//! float sums of sixteen rows.
//!
//! The integer sums are exact and each lane's float accumulation is the 256-bit kernels'
//! (`sum += isum as f32 * (dx * dy)`, the row's own scale in its lane), so the results are
//! the same bits as every other kernel's (asserted by the interleaved parity tests, which run
//! pairs and odd groups on both sides of `FEW_TOKENS`).
//!
//! On Zen 4 a 512-bit `vpdpbusd` does twice the work of a 256-bit one at half the rate, so
//! the gain is in everything around it: half the activation broadcasts, float operations
//! and loop overhead per row.
//!
//! Each block prefetches, into L2, the same block of the next pair of groups (two groups'
//! bytes ahead): one pair's walk ahead, whatever the matrix's width. A fixed distance fits
//! one shape only. Zen 4, two threads, `superinfer bench -np 8 -p 128 -n 128`, alternated:
//! Qwen2.5-0.5B as Q4_0 decoded 302 / 368 / 366 t/s with 8 KiB ahead (the k-quant kernels'
//! `PREFETCH_FAR`), 395 / 403 / 399 with 16 KiB and 416 / 418 / 400 with one pair; as
//! shipped (Q8_0) 309 / 311 → 332 / 336. The k-quant kernels keep 8 KiB: one group ahead was
//! no faster for Gemma-3's at 8 sequences and slower for Qwen2.5-1.5B's at one.

use core::arch::x86_64::*;

use super::avx2::{ld128, ld256};
use super::avx2_x8::{arr, prefetch_l2, q5_0_chunk};
use crate::quant::interleaved::{BatchRows, ROWS};
use crate::quant::legacy::{blocks, BlockQ8_0, QK};

/// Tokens up to which each token's sums run in two chains (even and odd chunks) joined at the
/// end: fewer tokens than this leave too few independent `vpdpbusd` chains to cover its
/// latency.
const SPLIT_CHAINS: usize = 4;

/// Four activation bytes at `p` in every 32-bit lane.
///
/// # Safety
/// `p` must be valid for reading 4 bytes.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn bcast4(p: *const i8) -> __m512i {
    // SAFETY: the caller guarantees 4 readable bytes.
    _mm512_set1_epi32(unsafe { p.cast::<i32>().read_unaligned() })
}

/// The 32 bytes at `a + at` in the low half and at `b + at` in the high half.
///
/// # Safety
/// Both must be valid for reading 32 bytes at `at`.
#[inline]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn halves(a: *const u8, b: *const u8, at: usize) -> __m512i {
    // SAFETY: the caller's contract.
    let (lo, hi) = unsafe { (ld256(a.add(at)), ld256(b.add(at))) };
    join(lo, hi)
}

/// `lo` in the low half, `hi` in the high half.
#[inline]
#[target_feature(enable = "avx512f")]
fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// Each token's two chains summed (or the first, when they were not split).
#[inline]
#[target_feature(enable = "avx512f")]
fn joined<const T: usize>(a: [__m512i; T], b: [__m512i; T]) -> [__m512i; T] {
    if T <= SPLIT_CHAINS {
        arr(|t| _mm512_add_epi32(a[t], b[t]))
    } else {
        a
    }
}

/// `T` tokens (`acts`) over groups `w[0]` and `w[1]`, every block through `block` (the
/// integer sums of one block of both groups for each token, from pointers to the two group
/// blocks, the tokens' activation blocks and their quant sums); `out[g][t]` takes token `t`'s
/// eight sums of group `g`.
///
/// # Safety
/// `block` must only read `group_block` bytes at each of its pointers.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn gemm_pair<const T: usize>(
    cols: usize,
    w: [&[u8]; 2],
    acts: BatchRows<'_>,
    out: [&mut [[f32; ROWS]]; 2],
    group_block: usize,
    block: impl Fn([*const u8; 2], [&BlockQ8_0; T], [i32; T]) -> [__m512i; T],
) {
    let nb = cols / QK;
    let group_bytes = nb * group_block;
    assert!(
        w.iter().all(|w| w.len() >= group_bytes),
        "two whole groups of {cols} columns"
    );
    assert!(
        acts.len() == T && out.iter().all(|o| o.len() == T),
        "a tile of {T} tokens"
    );
    let ys: [&[BlockQ8_0]; T] = arr(|t| &blocks::<BlockQ8_0>(acts.bytes(t))[..nb]);
    let dys: [&[f32]; T] = arr(|t| &acts.scales(t)[..nb]);
    let sums: [&[i32]; T] = arr(|t| &acts.sums(t)[..nb]);
    let mut acc = [_mm512_setzero_ps(); T];
    #[allow(clippy::needless_range_loop)] // block b of every token
    for b in 0..nb {
        // The reads below: block b < nb of both groups (checked above) and of each token's
        // blocks, scales and sums (each sliced to nb above).
        // SAFETY: block b starts inside each group's `nb · group_block` bytes.
        let p = unsafe {
            [
                w[0].as_ptr().add(b * group_block),
                w[1].as_ptr().add(b * group_block),
            ]
        };
        // the same block of the next pair: one pair's walk ahead (see the module docs)
        prefetch_l2(p[0], 2 * group_bytes, group_block);
        prefetch_l2(p[1], 2 * group_bytes, group_block);
        // SAFETY: `ys[t]` has nb blocks and b < nb.
        let yb: [&BlockQ8_0; T] = arr(|t| unsafe { &*ys[t].as_ptr().add(b) });
        // SAFETY: `sums[t]` has nb values and b < nb.
        let sb: [i32; T] = arr(|t| unsafe { *sums[t].as_ptr().add(b) });
        let isum = block(p, yb, sb);
        // SAFETY: each group block starts with its eight f16 scales.
        let dx = _mm512_cvtph_ps(unsafe { _mm256_set_m128i(ld128(p[1]), ld128(p[0])) });
        for t in 0..T {
            // SAFETY: `dys[t]` has nb scales and b < nb.
            let dy = _mm512_set1_ps(unsafe { *dys[t].as_ptr().add(b) });
            acc[t] = _mm512_add_ps(
                acc[t],
                _mm512_mul_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dx, dy)),
            );
        }
    }
    let [oa, ob] = out;
    for ((a, b), acc) in oa.iter_mut().zip(ob.iter_mut()).zip(acc) {
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc)));
        // SAFETY: `a` and `b` are 8 floats each.
        unsafe {
            _mm256_storeu_ps(a.as_mut_ptr(), _mm512_castps512_ps256(acc));
            _mm256_storeu_ps(b.as_mut_ptr(), hi);
        }
    }
}

/// One Q8_0 block of two groups (quants with the sign bit flipped: `+128`).
///
/// # Safety
/// Each `p[g]` must point at a Q8_0 × 8 group block (272 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn q8_0_pair<const T: usize>(
    [a, b]: [*const u8; 2],
    ys: [&BlockQ8_0; T],
    sums: [i32; T],
) -> [__m512i; T] {
    let flip = _mm512_set1_epi8(i8::MIN);
    let mut even: [__m512i; T] = arr(|t| _mm512_set1_epi32(-128 * sums[t]));
    let mut odd = [_mm512_setzero_si512(); T];
    for c in 0..8 {
        // SAFETY: chunk c of both blocks' 256 quant bytes (the caller's contract).
        let x = _mm512_xor_si512(unsafe { halves(a, b, 16 + 32 * c) }, flip);
        let chain = if T <= SPLIT_CHAINS && c % 2 == 1 {
            &mut odd
        } else {
            &mut even
        };
        for (s, y) in chain.iter_mut().zip(&ys) {
            // SAFETY: activation bytes 4c..4c + 4 of 32.
            *s = _mm512_dpbusd_epi32(*s, x, unsafe { bcast4(y.qs.as_ptr().add(4 * c)) });
        }
    }
    joined(even, odd)
}

/// One Q4_0 block of two groups (nibbles: `+8`).
///
/// # Safety
/// Each `p[g]` must point at a Q4_0 × 8 group block (144 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn q4_0_pair<const T: usize>(
    [a, b]: [*const u8; 2],
    ys: [&BlockQ8_0; T],
    sums: [i32; T],
) -> [__m512i; T] {
    let low4 = _mm512_set1_epi8(0x0F);
    nibble_block(8, ys, sums, |c| {
        // SAFETY: chunk c of both blocks' 128 quant bytes (the caller's contract).
        let x = unsafe { halves(a, b, 16 + 32 * c) };
        (
            _mm512_and_si512(x, low4),
            _mm512_and_si512(_mm512_srli_epi16::<4>(x), low4),
        )
    })
}

/// One Q5_0 block of two groups (5-bit values: `+16`).
///
/// # Safety
/// Each `p[g]` must point at a Q5_0 × 8 group block (176 bytes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn q5_0_pair<const T: usize>(
    [a, b]: [*const u8; 2],
    ys: [&BlockQ8_0; T],
    sums: [i32; T],
) -> [__m512i; T] {
    nibble_block(16, ys, sums, |c| {
        // SAFETY: chunk c < 4 of both group blocks (the caller's contract).
        let ((la, ha), (lb, hb)) = unsafe { (q5_0_chunk(a, c), q5_0_chunk(b, c)) };
        (join(la, lb), join(ha, hb))
    })
}

/// One block of two groups whose values come apart per chunk (Q4_0, Q5_0): `chunk(c)` gives
/// chunk `c`'s low and high values of both groups (see [`nibble_pair`]), each stored `bias`
/// above its signed value, which the sums take back through the activations' quant sums.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn nibble_block<const T: usize>(
    bias: i32,
    ys: [&BlockQ8_0; T],
    sums: [i32; T],
    chunk: impl Fn(usize) -> (__m512i, __m512i),
) -> [__m512i; T] {
    let mut lo_sum: [__m512i; T] = arr(|t| _mm512_set1_epi32(-bias * sums[t]));
    let mut hi_sum = [_mm512_setzero_si512(); T];
    for c in 0..4 {
        let (lo, hi) = chunk(c);
        nibble_pair(&mut lo_sum, &mut hi_sum, lo, hi, &ys, c);
    }
    joined(lo_sum, hi_sum)
}

/// Chunk `c` of a Q4_0 / Q5_0 block pair: elements `4c..4c + 4` (`lo`) and `16 + 4c..`
/// (`hi`) of each row, into each token's chains.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn nibble_pair<const T: usize>(
    lo_sum: &mut [__m512i; T],
    hi_sum: &mut [__m512i; T],
    lo: __m512i,
    hi: __m512i,
    ys: &[&BlockQ8_0; T],
    c: usize,
) {
    for ((ls, hs), y) in lo_sum.iter_mut().zip(hi_sum.iter_mut()).zip(ys) {
        // SAFETY: activation bytes 4c..4c + 4 and 16 + 4c..20 + 4c of 32 (c < 4).
        let (y0, y1) = unsafe {
            (
                bcast4(y.qs.as_ptr().add(4 * c)),
                bcast4(y.qs.as_ptr().add(16 + 4 * c)),
            )
        };
        *ls = _mm512_dpbusd_epi32(*ls, lo, y0);
        if T <= SPLIT_CHAINS {
            *hs = _mm512_dpbusd_epi32(*hs, hi, y1);
        } else {
            *ls = _mm512_dpbusd_epi32(*ls, hi, y1);
        }
    }
}
