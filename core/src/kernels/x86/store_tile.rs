//! Streaming stores of the batch kernels' output tiles (`interleaved::StoreTileFn`): each
//! token's run of groups is written with non-temporal stores, whole 64-byte lines where the
//! destination allows (AVX-512: a pair of groups is one line when it starts on one), and a
//! store fence ends the call so the stores are visible before the caller's parallel step
//! completes. The values are copied unchanged: the scalar `interleaved::store_tile` gives
//! the same memory.

use core::arch::x86_64::*;

use crate::quant::interleaved::ROWS;

/// Group `g` of token `t`: `[f32; 8]` at `dst + t · stride + 8g` (32-byte runs: stream
/// them when aligned).
///
/// # Safety
/// `p` must be valid for 8 float writes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn put8(p: *mut f32, v: __m256) {
    // SAFETY: 8 writable floats at p (the caller's contract), aligned where streamed.
    unsafe {
        if (p as usize).is_multiple_of(32) {
            _mm256_stream_ps(p, v);
        } else {
            _mm256_storeu_ps(p, v);
        }
    }
}

/// # Safety
/// As `interleaved::StoreTileFn`; the CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn store_tile_avx2(tile: &[[f32; ROWS]], n: usize, dst: *mut f32, stride: usize) {
    if n == 0 {
        return;
    }
    let groups = tile.len() / n;
    for t in 0..n {
        for g in 0..groups {
            // SAFETY: tile[g · n + t] is in bounds; group g of token t is in token t's
            // writable run (the contract).
            unsafe {
                let v = _mm256_loadu_ps(tile[g * n + t].as_ptr());
                put8(dst.add(t * stride + g * ROWS), v);
            }
        }
    }
    _mm_sfence();
}

/// # Safety
/// As `interleaved::StoreTileFn`; the CPU must support AVX-512 F and AVX2.
#[target_feature(enable = "avx512f,avx2")]
pub(super) unsafe fn store_tile_avx512(
    tile: &[[f32; ROWS]],
    n: usize,
    dst: *mut f32,
    stride: usize,
) {
    if n == 0 {
        return;
    }
    let groups = tile.len() / n;
    for t in 0..n {
        // SAFETY: `t < n`: token t's run (groups 0..groups) starts here (the contract).
        let row = unsafe { dst.add(t * stride) };
        let mut g = 0;
        while g < groups {
            // SAFETY: group g < groups of token t's run.
            let p = unsafe { row.add(g * ROWS) };
            // SAFETY: `tile[g · n + t]` is an `[f32; 8]` (indexed, so in bounds).
            let lo = unsafe { _mm256_loadu_ps(tile[g * n + t].as_ptr()) };
            if g + 1 < groups && (p as usize).is_multiple_of(64) {
                // SAFETY: `tile[(g + 1) · n + t]` is in bounds too (g + 1 < groups).
                let hi = unsafe { _mm256_loadu_ps(tile[(g + 1) * n + t].as_ptr()) };
                let line = _mm512_insertf64x4(
                    _mm512_castpd256_pd512(_mm256_castps_pd(lo)),
                    _mm256_castps_pd(hi),
                    1,
                );
                // SAFETY: groups g and g + 1 (16 floats) are in token t's run, and `p` is
                // 64-byte aligned (checked), as the streaming store needs.
                unsafe { _mm512_stream_ps(p, _mm512_castpd_ps(line)) };
                g += 2;
            } else {
                // SAFETY: group g (8 floats) is in token t's run.
                unsafe { put8(p, lo) };
                g += 1;
            }
        }
    }
    _mm_sfence();
}
