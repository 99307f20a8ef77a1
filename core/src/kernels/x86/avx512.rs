//! AVX-512 VNNI dot products (512-bit vectors, `vpdpbusd`).
//!
//! `vpdpbusd` sums four unsigned × signed byte products into each i32 lane, so 4-bit and
//! 5-bit weights are used as stored (unsigned) and their offset is taken off afterwards with
//! the activation sums (`Σ (q - o)·y = Σ q·y - o·Σ y`); Q8_0 weights use |x| and a masked
//! negation of y. Two legacy blocks fill a 512-bit vector; a k-quant block takes 2–4.
//!
//! The float arithmetic is the AVX2 kernels' (see there): the i32 lanes hold the same exact
//! integer sums, blocks are folded to 8 lanes and rounded in the same order, so the two ISAs
//! return identical results.

use core::arch::x86_64::*;

use super::avx2::{
    f16, hsum_epi32, hsum_epi32_4, hsum_ps, kquant_block, ld128, ld256, mins_dot_bsums, nibbles_32,
    q4_k_scales,
};
use crate::quant::kquants::q4_k::BlockQ4K;
use crate::quant::kquants::q6_k::BlockQ6K;
use crate::quant::kquants::q8_k;
use crate::quant::legacy::{blocks, BlockQ4_0, BlockQ5_0, BlockQ8_0};

/// `[lo, hi]` as one 512-bit vector.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)
}

/// The low and high 8 lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn halves(v: __m512) -> (__m256, __m256) {
    // (extractf32x8 would need AVX-512 DQ; the 64-bit extract moves the same bits)
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    (_mm512_castps512_ps256(v), hi)
}

/// Lane `k` + lane `k + 8`: folds two blocks' integer lanes into the AVX2 kernels' 8.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn fold(v: __m512i) -> __m256i {
    _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1))
}

/// 64 bytes at `p`.
///
/// # Safety
/// `p` must be valid for reading 64 bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn ld512<T>(p: *const T) -> __m512i {
    // SAFETY: the caller guarantees 64 readable bytes.
    unsafe { _mm512_loadu_si512(p.cast()) }
}

/// Per-lane sums of `x·y` for signed `x` and `y` (y ≠ -128).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_i8(x: __m512i, y: __m512i) -> __m512i {
    let zero = _mm512_setzero_si512();
    let y = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(x), zero, y);
    _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(x), y)
}

/// Per-lane sums of `(q - offset)·y` for unsigned `q`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn dot_u8_offset(q: __m512i, y: __m512i, offset: __m512i) -> __m512i {
    let zero = _mm512_setzero_si512();
    _mm512_sub_epi32(
        _mm512_dpbusd_epi32(zero, q, y),
        _mm512_dpbusd_epi32(zero, offset, y),
    )
}

/// Shared loop of the 32-element formats: `pair(i)` gives the weight bytes of blocks
/// `i, i+1` as a 512-bit vector and `tail(i)` those of a last odd block; `dot` combines
/// weights with activations.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn legacy_loop(
    nb: usize,
    ys: &[BlockQ8_0],
    d: impl Fn(usize) -> f32,
    pair: impl Fn(usize) -> __m512i,
    tail: impl Fn(usize) -> __m256i,
    dot: impl Fn(__m512i, __m512i) -> __m512i,
) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut i = 0;
    while i + 2 <= nb {
        // SAFETY: i + 1 < nb <= ys.len(); each qs is 32 bytes.
        let qy = unsafe { join(ld256(ys[i].qs.as_ptr()), ld256(ys[i + 1].qs.as_ptr())) };
        let p = _mm512_cvtepi32_ps(dot(pair(i), qy));
        let (lo, hi) = halves(p);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d(i) * f16(ys[i].d)), lo, acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d(i + 1) * f16(ys[i + 1].d)), hi, acc);
        i += 2;
    }
    if i < nb {
        // SAFETY: i < nb <= ys.len().
        let qy = unsafe { _mm512_zextsi256_si512(ld256(ys[i].qs.as_ptr())) };
        let qx = _mm512_zextsi256_si512(tail(i));
        let (lo, _) = halves(_mm512_cvtepi32_ps(dot(qx, qy)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d(i) * f16(ys[i].d)), lo, acc);
    }
    hsum_ps(acc)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_q8_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<BlockQ8_0>(w), blocks::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    legacy_loop(
        nb,
        ys,
        |i| f16(xs[i].d),
        |i| {
            // SAFETY: `qs` is 32 bytes, the load's width (blocks indexed: in bounds).
            unsafe { join(ld256(xs[i].qs.as_ptr()), ld256(xs[i + 1].qs.as_ptr())) }
        },
        |i| {
            // SAFETY: as above.
            unsafe { ld256(xs[i].qs.as_ptr()) }
        },
        |x, y| dot_i8(x, y),
    )
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_q4_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<BlockQ4_0>(w), blocks::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    let eight = _mm512_set1_epi8(8);
    legacy_loop(
        nb,
        ys,
        |i| f16(xs[i].d),
        |i| join(nibbles_32(&xs[i].qs), nibbles_32(&xs[i + 1].qs)),
        |i| nibbles_32(&xs[i].qs),
        |q, y| dot_u8_offset(q, y, eight),
    )
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_q5_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (blocks::<BlockQ5_0>(w), blocks::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    let sixteen = _mm512_set1_epi8(16);
    // the fifth bit of element j is bit j of qh: a byte mask, turned into 16s
    let with_high =
        |q: __m512i, bits: u64| _mm512_or_si512(q, _mm512_maskz_mov_epi8(bits, sixteen));
    legacy_loop(
        nb,
        ys,
        |i| f16(xs[i].d),
        |i| {
            let bits = u32::from_le_bytes(xs[i].qh) as u64
                | (u32::from_le_bytes(xs[i + 1].qh) as u64) << 32;
            with_high(join(nibbles_32(&xs[i].qs), nibbles_32(&xs[i + 1].qs)), bits)
        },
        |i| {
            let q = _mm512_castsi256_si512(nibbles_32(&xs[i].qs));
            _mm512_castsi512_si256(with_high(q, u32::from_le_bytes(xs[i].qh) as u64))
        },
        |q, y| dot_u8_offset(q, y, sixteen),
    )
}

/// Lane indices spreading 16 per-group i32 scales over the lanes of one `vpdpbusd` result.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn spread(idx: [u8; 16]) -> __m512i {
    // SAFETY: idx is 16 bytes.
    _mm512_cvtepu8_epi32(unsafe { ld128(idx.as_ptr()) })
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_q4_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    let low4 = _mm512_set1_epi8(0x0F);
    let zero = _mm512_setzero_si512();
    // a 64-byte load of qs holds sub-blocks 4h (low nibbles, bytes 0-31), 4h+2 (low, 32-63),
    // 4h+1 and 4h+3 (high nibbles): scale lanes for the low and the high half
    let idx: [[__m512i; 2]; 2] = core::array::from_fn(|h| {
        core::array::from_fn(|hi| {
            spread(core::array::from_fn(|l| (4 * h + hi + 2 * (l / 8)) as u8))
        })
    });
    for (x, y) in bytemuck::cast_slice::<u8, BlockQ4K>(w)
        .iter()
        .zip(q8_k::blocks(a))
    {
        let (sc, mn) = q4_k_scales(&x.scales);
        let msum = hsum_epi32_4(mins_dot_bsums(&mn, y));
        let sc = {
            let mut s = [0u8; 16];
            s[..8].copy_from_slice(&sc);
            spread(s)
        };
        let mut sumi = zero;
        for (h, idx) in idx.iter().enumerate() {
            let qy = |e: usize| {
                // SAFETY: e + 32 <= 128h + 128 <= 256.
                unsafe { ld256(y.qs.as_ptr().add(128 * h + e)) }
            };
            // SAFETY: qs[64h..64h+64] with h < 2.
            let q4 = unsafe { ld512(x.qs.as_ptr().add(64 * h)) };
            let lo = _mm512_and_si512(q4, low4);
            let hi = _mm512_and_si512(_mm512_srli_epi16(q4, 4), low4);
            let dlo = _mm512_dpbusd_epi32(zero, lo, join(qy(0), qy(64)));
            let dhi = _mm512_dpbusd_epi32(zero, hi, join(qy(32), qy(96)));
            sumi = _mm512_add_epi32(
                sumi,
                _mm512_mullo_epi32(dlo, _mm512_permutexvar_epi32(idx[0], sc)),
            );
            sumi = _mm512_add_epi32(
                sumi,
                _mm512_mullo_epi32(dhi, _mm512_permutexvar_epi32(idx[1], sc)),
            );
        }
        sum += kquant_block(f16(x.d), f16(x.dmin), y.d(), hsum_epi32(fold(sumi)), msum);
    }
    sum
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_q6_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    let low4 = _mm512_set1_epi8(0x0F);
    let three = _mm512_set1_epi8(3);
    let m32 = _mm512_set1_epi8(32);
    let zero = _mm512_setzero_si512();
    // ql[64n..64n+64] low nibbles are elements 128n+0..64, high nibbles 128n+64..128; their
    // two high bits sit in qh[32n + l] at shifts 0/2 and 4/6 (per 32-byte half)
    let shifts = [
        _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1),
        _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1),
    ];
    // scale lanes: groups of 16 elements are 4 dpbusd lanes
    let idx: [[__m512i; 2]; 2] = core::array::from_fn(|n| {
        core::array::from_fn(|hi| spread(core::array::from_fn(|l| (8 * n + 4 * hi + l / 4) as u8)))
    });
    for (x, y) in bytemuck::cast_slice::<u8, BlockQ6K>(w)
        .iter()
        .zip(q8_k::blocks(a))
    {
        // SAFETY: scales is 16 bytes.
        let sc = _mm512_cvtepi8_epi32(unsafe { ld128(x.scales.as_ptr()) });
        let mut sumi = zero;
        for (n, idx) in idx.iter().enumerate() {
            // SAFETY: n < 2: ql[64n..+64], qh[32n..+32], y.qs[128n..+128].
            let (ql, qh, y0, y1) = unsafe {
                (
                    ld512(x.ql.as_ptr().add(64 * n)),
                    _mm512_broadcast_i64x4(ld256(x.qh.as_ptr().add(32 * n))),
                    ld512(y.qs.as_ptr().add(128 * n)),
                    ld512(y.qs.as_ptr().add(128 * n + 64)),
                )
            };
            let high = |s: __m512i| {
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, s), three), 4)
            };
            let q0 = _mm512_or_si512(_mm512_and_si512(ql, low4), high(shifts[0]));
            let q1 = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                high(shifts[1]),
            );
            // quants are stored +32
            let d0 = dot_u8_offset(q0, y0, m32);
            let d1 = dot_u8_offset(q1, y1, m32);
            sumi = _mm512_add_epi32(
                sumi,
                _mm512_mullo_epi32(d0, _mm512_permutexvar_epi32(idx[0], sc)),
            );
            sumi = _mm512_add_epi32(
                sumi,
                _mm512_mullo_epi32(d1, _mm512_permutexvar_epi32(idx[1], sc)),
            );
        }
        sum += kquant_block(f16(x.d), 0.0, y.d(), hsum_epi32(fold(sumi)), 0);
    }
    sum
}
