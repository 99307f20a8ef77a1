//! AVX2 kernels over the interleaved layouts of `quant::interleaved`: each 256-bit vector
//! holds the same four elements of eight rows, one broadcast of four activation bytes
//! serves all eight, and lane `r` accumulates row `r`. Per row and block the arithmetic is
//! the scalar kernel's, `sum += isum as f32 * (dx * dy)` (k-quants: `sum += d * d8 * isum -
//! dmin * d8 * msum` per super-block, with exact integer sums), so results are bit-identical
//! to it.
//!
//! Every block function is generic over `G` weight groups and `T` tokens: it unpacks each
//! group's quants once and multiplies them with every token's activation bytes. The matrix ×
//! vector kernels (`gemv_*`) run one group at a time against one token (one weight stream:
//! see [`for_groups`]); the batch kernels (`gemm_*`, prompt processing) run one group against every
//! token of a batch, [`GEMM_TOKENS`] at a time, so unpacking the weights costs a quarter as
//! much per token. Q5_0, whose fifth bits take the most unpacking, goes further: its batch
//! kernel decodes each group once for the whole batch ([`gemm_decoded`]). Each token's float
//! accumulation is the single-token one, so all give the same bits.
//!
//! This file has the shared drivers and the legacy formats; `avx2_x8_k.rs` the k-quants.

use core::arch::x86_64::*;
use core::mem::MaybeUninit;

use super::avx2::{f16, ld128, ld256};
use crate::quant::interleaved::{q4_0, q4_0_offset, q5_0, q8_0, BatchRows, GEMM_TOKENS, ROWS};
use crate::quant::legacy::{blocks, BlockQ8_0, QK};

/// `[f(0), f(1), ..]`, like `core::array::from_fn`, but always inlined: a closure made in a
/// `target_feature` function carries its features, and LLVM will not inline it into
/// `from_fn` (which has none), so with `from_fn` every element was a call in the kernels'
/// inner loops.
#[inline(always)]
pub(super) fn arr<R, const N: usize>(mut f: impl FnMut(usize) -> R) -> [R; N] {
    let mut out = [const { MaybeUninit::<R>::uninit() }; N];
    for (i, o) in out.iter_mut().enumerate() {
        o.write(f(i));
    }
    // SAFETY: every element was written above, and `[MaybeUninit<R>; N]` has the layout of
    // `[R; N]` (`out` itself drops nothing).
    unsafe { core::mem::transmute_copy(&out) }
}

/// Four activation bytes at `p`, broadcast to every 32-bit lane.
///
/// # Safety
/// `p` must be valid for reading 4 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn bcast4<T>(p: *const T) -> __m256i {
    // SAFETY: the caller guarantees 4 readable bytes.
    _mm256_set1_epi32(unsafe { p.cast::<i32>().read_unaligned() })
}

/// `acc + isum * (dx * dy)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn accumulate(acc: __m256, isum: __m256i, dx: __m256, dy: __m256) -> __m256 {
    _mm256_add_ps(
        acc,
        _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dx, dy)),
    )
}

/// The eight f16 scales at `d`.
///
/// # Safety
/// `d` must be valid for reading 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn scales8(d: *const u8) -> __m256 {
    // SAFETY: the caller guarantees the 8 scales.
    _mm256_cvtph_ps(unsafe { ld128(d) })
}

/// How far ahead of the block being read the matrix × vector kernels prefetch each weight
/// stream, in bytes. Token generation streams the weights from DRAM, and the kernels' work
/// per cache line fills the core's reorder window long before enough lines are in flight
/// to cover DRAM latency: on Zen 3 the prefetch takes Q8_0 × 8 from 12.8 to 18.4 GiB/s
/// at one thread and Q4_0 × 8 from 10.9 to 14.8 (`benches/benches/kernels.rs`, `dram`).
/// 512 and 4096 bytes are slower than 1024; 2048 about the same.
pub(super) const PREFETCH_AHEAD: usize = 1024;

/// Prefetches into L1 every cache line of the `len` bytes [`PREFETCH_AHEAD`] past `p` (a
/// hint: the addresses need not be valid).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn prefetch_ahead(p: *const u8, len: usize) {
    prefetch_lines::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_AHEAD), len);
}

/// `_mm_prefetch` with `HINT` of every cache line of the `len` bytes at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn prefetch_lines<const HINT: i32>(p: *const u8, len: usize) {
    let mut o = 0;
    while o < len {
        _mm_prefetch::<HINT>(p.wrapping_add(o).cast());
        o += 64;
    }
}

/// How far ahead of the block they work on the k-quant matrix × vector kernels and the
/// few-token batch kernels (the decode steps of a few sequences, a speculative verification)
/// prefetch their weights, into L2. They spend longer on each byte than the legacy matrix ×
/// vector kernels, so [`PREFETCH_AHEAD`] into L1 does not cover DRAM latency, and further
/// ahead into L1 would evict what is in use. Zen 4, one thread, `matmul` bench with
/// `SHAPES=head` (Gemma-3's 262,144 × 640 output matrix, Qwen2.5-1.5B's 151,936 × 1536):
/// - 8 tokens, Gemma's, Q8_0: 14.4 → 12.7 ms, and 10.9 ms with the 512-bit pairs
///   (`avx512_few_pairs`, which read two groups at once), where 1024, 2048 and 4096 bytes
///   into L1 gave 15.6 to 17.5 ms, 4096 into L2 15.7 and 16384 into L2 what 8192 gives;
/// - 4 and 8 tokens, Qwen's, Q6_K: 17.2 → 10.5 and 23.7 → 17.2 ms; Q4_K 9.0 → 7.8 and
///   16.9 → 15.0;
/// - one token, Qwen's, Q6_K 12.9 → 8.2 ms, Q4_K 7.0 → 6.0.
///
/// The legacy matrix × vector kernels keep [`PREFETCH_AHEAD`]: with this one, Gemma-3's
/// decode at one thread went from 102 to 94 t/s.
pub(super) const PREFETCH_FAR: usize = 8192;

/// Prefetches into L2 every cache line of the `len` bytes [`PREFETCH_FAR`] past `p` (a hint:
/// the addresses need not be valid).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn prefetch_far(p: *const u8, len: usize) {
    prefetch_l2(p, PREFETCH_FAR, len);
}

/// Prefetches into L2 every cache line of the `len` bytes `ahead` bytes past `p` (a hint:
/// the addresses need not be valid).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn prefetch_l2(p: *const u8, ahead: usize, len: usize) {
    prefetch_lines::<_MM_HINT_T1>(p.wrapping_add(ahead), len);
}

/// Runs `block` (the integer part of one block for one group and one token: from a pointer
/// to the group's block, the activation block and its quant sum) over every block of every
/// group, group after group, and stores the eight sums of each group.
///
/// One group at a time is one stream of weights: walking two groups at once (to share the
/// activation broadcasts) ran from DRAM at 13.6 GiB/s for Q4_0 × 8 on a Zen 4 core, one at a
/// time at 22.9 (`kernels` bench, `dram-1t`), for 5% less in L2.
///
/// # Safety
/// `block` must only read its group's `group_block` bytes per block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn for_groups(
    cols: usize,
    w: &[u8],
    a: &[u8],
    sums: &[i32],
    out: &mut [f32],
    group_block: usize,
    block: impl Fn([*const u8; 1], [&BlockQ8_0; 1], [i32; 1]) -> [[__m256i; 1]; 1],
) {
    let nb = cols / QK;
    let ys = &blocks::<BlockQ8_0>(a)[..nb];
    let sums = |b: usize| sums.get(b).copied().unwrap_or(0);
    let group_bytes = nb * group_block;
    if group_bytes == 0 {
        out.fill(0.0);
        return;
    }
    for (g, o) in w.chunks_exact(group_bytes).zip(out.chunks_exact_mut(ROWS)) {
        // SAFETY: `g` holds one group of nb blocks of `group_block` bytes (`chunks_exact`),
        // so block b < nb is in it; `o` is 8 floats; AVX2/FMA/F16C are this fn's features.
        unsafe {
            let mut acc = _mm256_setzero_ps();
            for (b, y) in ys.iter().enumerate() {
                let p = g.as_ptr().add(b * group_block);
                prefetch_ahead(p, group_block);
                let [[i]] = block([p], [y], [sums(b)]);
                acc = accumulate(acc, i, scales8(p), _mm256_set1_ps(f16(y.d)));
            }
            _mm256_storeu_ps(o.as_mut_ptr(), acc);
        }
    }
}

/// What [`gemm_group`] hands its block function per token and block: nothing, the Q4_0
/// offset, or the block's quant sum.
pub(super) const NONE: u8 = 0;
pub(super) const OFFSETS: u8 = 1;
pub(super) const SUMS: u8 = 2;

/// Runs `tile` over the tokens of `acts` [`GEMM_TOKENS`] at a time, each with its part of
/// `out` (one `[f32; ROWS]` per token).
pub(super) fn token_tiles(
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    tile: impl FnMut(BatchRows<'_>, &mut [[f32; ROWS]]),
) {
    tiles_of(GEMM_TOKENS, acts, out, tile)
}

/// Runs `tile` over the tokens of `acts` `size` at a time, each with its part of `out`.
pub(super) fn tiles_of(
    size: usize,
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    mut tile: impl FnMut(BatchRows<'_>, &mut [[f32; ROWS]]),
) {
    assert_eq!(out.len(), acts.len(), "one output per token");
    for (i, o) in out.chunks_mut(size).enumerate() {
        let t0 = i * size;
        tile(acts.slice(t0, t0 + o.len()), o);
    }
}

/// Calls `$f::<T>(args)` (or `$f::<T, P>(args)` for `$f::<P>(args)`) with `T = $n` (1 ..= 4)
/// known at compile time.
macro_rules! by_token_count {
    ($n:expr, $f:ident::<$p:literal>($($arg:expr),*)) => {
        match $n {
            0 => {}
            1 => $f::<1, $p>($($arg),*),
            2 => $f::<2, $p>($($arg),*),
            3 => $f::<3, $p>($($arg),*),
            _ => $f::<4, $p>($($arg),*),
        }
    };
    ($n:expr, $f:ident($($arg:expr),*)) => {
        match $n {
            0 => {}
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            _ => $f::<4>($($arg),*),
        }
    };
}
pub(super) use by_token_count;

/// [`by_token_count`] for tiles of up to 8 tokens (`T = $n`, 1 ..= 8).
macro_rules! by_token_count8 {
    ($n:expr, $f:ident::<$p:literal>($($arg:expr),*)) => {
        match $n {
            0 => {}
            1 => $f::<1, $p>($($arg),*),
            2 => $f::<2, $p>($($arg),*),
            3 => $f::<3, $p>($($arg),*),
            4 => $f::<4, $p>($($arg),*),
            5 => $f::<5, $p>($($arg),*),
            6 => $f::<6, $p>($($arg),*),
            7 => $f::<7, $p>($($arg),*),
            _ => $f::<8, $p>($($arg),*),
        }
    };
    ($n:expr, $f:ident($($arg:expr),*)) => {
        match $n {
            0 => {}
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            5 => $f::<5>($($arg),*),
            6 => $f::<6>($($arg),*),
            7 => $f::<7>($($arg),*),
            _ => $f::<8>($($arg),*),
        }
    };
}
pub(super) use by_token_count8;

/// Tokens the Q8_0 and Q4_0 batch kernels run over each block at a time: the integer sums
/// of eight tokens and the block's vectors fill the sixteen registers, their float sums
/// (touched once per block) live on the stack. Q5_0's unpacking needs more registers: it
/// keeps [`GEMM_TOKENS`].
const LEGACY_TILE: usize = 8;

/// One group against `T` tokens, taking each block's weights apart per tile of tokens: runs
/// `block` over every block and stores each token's eight sums in `out[t]`. (Q8_0 and Q4_0,
/// whose unpacking is one or two operations per vector, run faster this way than through
/// [`gemm_decoded`].) The tokens' scales come as f32 from `acts` and, as `PER_BLOCK` says,
/// each block's Q4_0 offset ([`OFFSETS`]) or quant sum ([`SUMS`]) for `block`, so the loop is
/// vector work and loads only.
///
/// # Safety
/// `block` must only read the group's `group_block` bytes per block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn gemm_group<const T: usize, const PER_BLOCK: u8, const PREFETCH: bool>(
    cols: usize,
    w: &[u8],
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    group_block: usize,
    block: impl Fn([*const u8; 1], [&BlockQ8_0; T], [i32; T]) -> [[__m256i; T]; 1],
) {
    let nb = cols / QK;
    assert!(
        w.len() >= nb * group_block,
        "a whole group of {cols} columns"
    );
    let ys: [&[BlockQ8_0]; T] = arr(|t| &blocks::<BlockQ8_0>(acts.bytes(t))[..nb]);
    let dys: [&[f32]; T] = arr(|t| &acts.scales(t)[..nb]);
    let extra: [&[i32]; T] = arr(|t| match PER_BLOCK {
        OFFSETS => &acts.offsets(t)[..nb],
        SUMS => &acts.sums(t)[..nb],
        _ => &[],
    });
    let mut acc = [_mm256_setzero_ps(); T];
    #[allow(clippy::needless_range_loop)] // block b of every token
    for b in 0..nb {
        // The reads below: block b < nb of the group (the assert above) and of each token's
        // blocks, scales and (with a `PER_BLOCK`) offsets or sums (each sliced to nb above).
        // SAFETY: block b starts inside the group's `nb · group_block` bytes.
        let p = unsafe { w.as_ptr().add(b * group_block) };
        if PREFETCH {
            prefetch_far(p, group_block);
        }
        // SAFETY: `ys[t]` has nb blocks and b < nb.
        let yb: [&BlockQ8_0; T] = arr(|t| unsafe { &*ys[t].as_ptr().add(b) });
        let sb: [i32; T] = arr(|t| {
            if PER_BLOCK == NONE {
                0
            } else {
                // SAFETY: with a `PER_BLOCK`, `extra[t]` has nb values and b < nb.
                unsafe { *extra[t].as_ptr().add(b) }
            }
        });
        let [isum] = block([p], yb, sb);
        // SAFETY: block b of the group starts at `p` with its eight f16 scales (16 of its
        // `group_block` bytes).
        let dx = unsafe { scales8(p) };
        for t in 0..T {
            // SAFETY: `dys[t]` has nb scales and b < nb.
            let dy = unsafe { _mm256_broadcast_ss(&*dys[t].as_ptr().add(b)) };
            acc[t] = accumulate(acc[t], isum[t], dx, dy);
        }
    }
    for (o, acc) in out.iter_mut().zip(acc) {
        // SAFETY: `o` is 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), acc) };
    }
}

/// Defines a batch kernel `$gemm` over a legacy block function through [`gemm_group`].
macro_rules! legacy_gemm {
    (
        $gemm:ident, $gemm_t:ident, $block:ident, $group_block:expr, $offsets:expr,
        $tile:expr, $by_count:ident
    ) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) fn $gemm(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
            // The first tile of tokens streams the group from memory, prefetched as the
            // matrix × vector kernel does; the other tiles find it in cache.
            let mut first = true;
            tiles_of($tile, acts, out, |a, o| {
                if first {
                    $by_count!(a.len(), $gemm_t::<true>(cols, w, a, o))
                } else {
                    $by_count!(a.len(), $gemm_t::<false>(cols, w, a, o))
                }
                first = false;
            });
        }

        #[target_feature(enable = "avx2,fma,f16c")]
        fn $gemm_t<const T: usize, const PREFETCH: bool>(
            cols: usize,
            w: &[u8],
            acts: BatchRows<'_>,
            out: &mut [[f32; ROWS]],
        ) {
            // SAFETY: the block function reads one group block per group pointer.
            unsafe {
                gemm_group::<T, $offsets, PREFETCH>(cols, w, acts, out, $group_block, |p, y, s| {
                    $block::<1, T>(p, y, s)
                })
            }
        }
    };
}

legacy_gemm!(
    gemm_q8_0,
    gemm_q8_0_t,
    q8_0_block,
    q8_0::GROUP_BLOCK,
    NONE,
    LEGACY_TILE,
    by_token_count8
);
legacy_gemm!(
    gemm_q4_0,
    gemm_q4_0_t,
    q4_0_block,
    q4_0::GROUP_BLOCK,
    OFFSETS,
    LEGACY_TILE,
    by_token_count8
);

/// Defines `$gemv`, a matrix × vector kernel compiled with `$features` over a legacy block
/// function (`$block::<1, 1>`) through [`for_groups`].
macro_rules! legacy_gemv {
    ($features:literal: $gemv:ident, $block:ident, $group_block:expr) => {
        #[target_feature(enable = $features)]
        pub(super) fn $gemv(cols: usize, w: &[u8], a: &[u8], sums: &[i32], out: &mut [f32]) {
            // SAFETY: the block functions read one group block per group pointer.
            unsafe {
                for_groups(cols, w, a, sums, out, $group_block, |p, y, s| {
                    $block::<1, 1>(p, y, s)
                })
            }
        }
    };
}
pub(super) use legacy_gemv;

legacy_gemv!("avx2,fma,f16c": gemv_q8_0, q8_0_block, q8_0::GROUP_BLOCK);
legacy_gemv!("avx2,fma,f16c": gemv_q5_0, q5_0_block, q5_0::GROUP_BLOCK);

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemv_q4_0(cols: usize, w: &[u8], a: &[u8], sums: &[i32], out: &mut [f32]) {
    // SAFETY: the block function reads one group block per group pointer.
    unsafe {
        for_groups(cols, w, a, sums, out, q4_0::GROUP_BLOCK, |p, y, [s]| {
            q4_0_block::<1, 1>(p, y, [q4_0_offset(s)])
        })
    }
}

/// Group blocks a batch kernel takes apart at a time (9 KB of [`Decoded`], which stays in
/// L1 while every token passes over it).
pub(super) const DECODE_BLOCKS: usize = 32;

/// One legacy group block taken apart for the batch kernels: vector `j` holds elements
/// `4j..4j + 4` of the eight rows (as `u8` with an offset for Q4_0 / Q5_0, as the `i8`
/// quants for Q8_0), `d` the rows' scales as f32. Decoding once per group, instead of once
/// per tile of tokens, takes the nibble and bit shuffling out of the per-token work.
#[derive(Clone, Copy)]
pub(super) struct Decoded {
    pub(super) q: [__m256i; 8],
    pub(super) d: __m256,
}

/// A batch kernel over a legacy layout: decodes the group [`DECODE_BLOCKS`] blocks at a
/// time and runs every tile of up to `tile_tokens` tokens over them, the tile's float
/// sums carried in `out` from one run of blocks to the next (exact: f32 stores).
///
/// # Safety
/// `decode` must only read the `group_block` bytes at its pointer.
#[inline]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn gemm_decoded(
    cols: usize,
    w: &[u8],
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    group_block: usize,
    tile_tokens: usize,
    decode: impl Fn(*const u8) -> Decoded,
    tile: impl Fn(&[Decoded], usize, BatchRows<'_>, &mut [[f32; ROWS]]),
) {
    let nb = cols / QK;
    assert!(
        w.len() >= nb * group_block,
        "a whole group of {cols} columns"
    );
    out.fill([0.0; ROWS]);
    let zero = Decoded {
        q: [_mm256_setzero_si256(); 8],
        d: _mm256_setzero_ps(),
    };
    let mut dec = [zero; DECODE_BLOCKS];
    for b0 in (0..nb).step_by(DECODE_BLOCKS) {
        let m = DECODE_BLOCKS.min(nb - b0);
        for (i, d) in dec[..m].iter_mut().enumerate() {
            // SAFETY: block b0 + i < nb of the group (checked above).
            let p = unsafe { w.as_ptr().add((b0 + i) * group_block) };
            // the weights stream from memory here, once per batch of tokens
            prefetch_far(p, group_block);
            *d = decode(p);
        }
        tiles_of(tile_tokens, acts, out, |a, o| tile(&dec[..m], b0, a, o));
    }
}

/// Tokens a tile's integer loop runs together: each weight vector is loaded from the decoded
/// block once per pair, which keeps the pair's i16 and i32 sums and the tile's float sums in
/// registers (four tokens at once spill).
const PAIR: usize = 2;

/// `T` tokens over decoded blocks `b0..b0 + dec.len()`: for every block and pair of tokens,
/// `isums` gives the integer sums (from the block, the tokens' activation blocks and block
/// sums), and each token's float sum, carried in `out`, takes `isum · (dx · dy)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn decoded_tile<const T: usize>(
    dec: &[Decoded],
    b0: usize,
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
    isums: impl Fn(&Decoded, [&BlockQ8_0; PAIR], [i32; PAIR]) -> [__m256i; PAIR],
) {
    const NO_SUMS: [i32; DECODE_BLOCKS] = [0; DECODE_BLOCKS];
    let m = dec.len();
    let ys: [&[BlockQ8_0]; T] = arr(|t| &blocks::<BlockQ8_0>(acts.bytes(t))[b0..b0 + m]);
    let dys: [&[f32]; T] = arr(|t| &acts.scales(t)[b0..b0 + m]);
    let sums: [&[i32]; T] = arr(|t| match acts.sums(t) {
        [] => &NO_SUMS[..m],
        s => &s[b0..b0 + m],
    });
    // SAFETY: `out[t]` is 8 floats.
    let mut acc: [__m256; T] = arr(|t| unsafe { _mm256_loadu_ps(out[t].as_ptr()) });
    for (i, blk) in dec.iter().enumerate() {
        for t0 in (0..T).step_by(PAIR) {
            let p = PAIR.min(T - t0);
            let y: [&BlockQ8_0; PAIR] = arr(|k| &ys[(t0 + k).min(T - 1)][i]);
            let s: [i32; PAIR] = arr(|k| sums[(t0 + k).min(T - 1)][i]);
            // an odd last token runs twice, its copy dropped
            let isum = isums(blk, y, s);
            for k in 0..p {
                let dy = _mm256_set1_ps(dys[t0 + k][i]);
                acc[t0 + k] = accumulate(acc[t0 + k], isum[k], blk.d, dy);
            }
        }
    }
    for (o, acc) in out.iter_mut().zip(acc) {
        // SAFETY: `o` is 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), acc) };
    }
}

/// The integer sums of a decoded Q4_0 / Q5_0 block against up to [`PAIR`] tokens: unsigned
/// quants × y summed in i16 over `SPLIT` vectors at a time (`SPLIT · 2 · max_q · 127 <
/// 2^15`), minus `off · Σy`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn unsigned_isums<const SPLIT: usize>(
    blk: &Decoded,
    ys: [&BlockQ8_0; PAIR],
    sums: [i32; PAIR],
    off: i32,
) -> [__m256i; PAIR] {
    let ones = _mm256_set1_epi16(1);
    let mut isum = sums.map(|s| _mm256_set1_epi32(-off * s));
    for h in 0..8 / SPLIT {
        let mut s16 = [_mm256_setzero_si256(); PAIR];
        for j in h * SPLIT..(h + 1) * SPLIT {
            for (s16, y) in s16.iter_mut().zip(ys) {
                // SAFETY: activation bytes 4j..4j + 4 of the block's 32.
                let y = unsafe { bcast4(y.qs.as_ptr().add(4 * j)) };
                *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(blk.q[j], y));
            }
        }
        for (isum, &s16) in isum.iter_mut().zip(&s16) {
            *isum = _mm256_add_epi32(*isum, _mm256_madd_epi16(s16, ones));
        }
    }
    isum
}

/// `T` tokens over decoded Q4_0 / Q5_0 blocks (see [`unsigned_isums`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn unsigned_tile<const T: usize, const SPLIT: usize>(
    dec: &[Decoded],
    b0: usize,
    acts: BatchRows<'_>,
    off: i32,
    out: &mut [[f32; ROWS]],
) {
    decoded_tile::<T>(dec, b0, acts, out, |blk, y, s| {
        unsigned_isums::<SPLIT>(blk, y, s, off)
    })
}

/// # Safety
/// `p` must point at a Q5_0 × 8 group block (176 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q5_0_decode(p: *const u8) -> Decoded {
    let low4 = _mm256_set1_epi8(0x0F);
    let sixteen = _mm256_set1_epi8(0x10);
    // SAFETY: the table is 32 bytes.
    let spread = unsafe { ld256(Q5_SPREAD.as_ptr()) };
    let lo_bit = _mm256_set1_epi32(0x0804_0201);
    let hi_bit = _mm256_set1_epi32(0x8040_2010_u32 as i32);
    let fifth = |bits: __m256i, probe: __m256i| {
        _mm256_and_si256(
            _mm256_cmpeq_epi8(_mm256_and_si256(bits, probe), probe),
            sixteen,
        )
    };
    let mut q = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        // SAFETY: chunk c's 8 bit bytes and 32 quant bytes (the caller's contract).
        let (h8, x) = unsafe {
            (
                p.add(16 + 8 * c).cast::<i64>().read_unaligned(),
                ld256(p.add(48 + 32 * c)),
            )
        };
        let bits = _mm256_shuffle_epi8(_mm256_set1_epi64x(h8), spread);
        q[c] = _mm256_or_si256(_mm256_and_si256(x, low4), fifth(bits, lo_bit));
        q[4 + c] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(x, 4), low4),
            fifth(bits, hi_bit),
        );
    }
    // SAFETY: the block's eight f16 scales, its first 16 bytes (the caller's contract).
    let d = unsafe { scales8(p) };
    Decoded { q, d }
}

/// Calls `$tile::<T, ...>(args)` with `T` the tile's token count (1 ..= 4).
macro_rules! tile_by_count {
    ($n:expr, $tile:ident::<T $(, $c:tt)*>($($arg:expr),*)) => {
        match $n {
            0 => {}
            1 => $tile::<1 $(, $c)*>($($arg),*),
            2 => $tile::<2 $(, $c)*>($($arg),*),
            3 => $tile::<3 $(, $c)*>($($arg),*),
            _ => $tile::<4 $(, $c)*>($($arg),*),
        }
    };
}

legacy_gemm!(
    gemm_q5_0_few,
    gemm_q5_0_few_t,
    q5_0_block,
    q5_0::GROUP_BLOCK,
    SUMS,
    GEMM_TOKENS,
    by_token_count
);

/// Most tokens for which the Q5_0 batch kernel takes each block apart per tile of tokens
/// (`gemm_q5_0_few`) rather than once for the batch (`gemm_decoded`).
pub(super) const Q5_0_FEW_TOKENS: usize = 8;

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemm_q5_0(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    if acts.len() <= Q5_0_FEW_TOKENS {
        return gemm_q5_0_few(cols, w, acts, out);
    }
    // SAFETY: the decoder reads one group block; 5-bit values: 4 · 2 · 31 · 127 < 2^15.
    unsafe {
        gemm_decoded(
            cols,
            w,
            acts,
            out,
            q5_0::GROUP_BLOCK,
            GEMM_TOKENS,
            |p| q5_0_decode(p),
            |d, b0, a, o| tile_by_count!(a.len(), unsigned_tile::<T, 4>(d, b0, a, 16, o)),
        )
    }
}

/// Activation bytes `4c..4c + 4` and `16 + 4c..20 + 4c` (the elements of nibble chunk `c`),
/// each broadcast.
///
/// # Safety
/// `c < 4`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn bcast_pair(y: &BlockQ8_0, c: usize) -> (__m256i, __m256i) {
    // SAFETY: bytes 4c..20 + 4c of the 32 (the caller's contract).
    unsafe {
        (
            bcast4(y.qs.as_ptr().add(4 * c)),
            bcast4(y.qs.as_ptr().add(16 + 4 * c)),
        )
    }
}

/// # Safety
/// Each `ps[g]` must point at a Q8_0 × 8 group block (272 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_block<const G: usize, const T: usize>(
    ps: [*const u8; G],
    ys: [&BlockQ8_0; T],
    _sums: [i32; T],
) -> [[__m256i; T]; G] {
    let ones = _mm256_set1_epi16(1);
    let mut isum = [[_mm256_setzero_si256(); T]; G];
    for c in 0..8 {
        for (p, isum) in ps.iter().zip(&mut isum) {
            // SAFETY: chunk c of the block's 256 quant bytes (the caller's contract).
            let x = unsafe { ld256(p.add(16 + 32 * c)) };
            let ax = _mm256_abs_epi8(x);
            for (isum, y) in isum.iter_mut().zip(&ys) {
                // SAFETY: activation bytes 4c..4c + 4 of 32.
                let y = unsafe { bcast4(y.qs.as_ptr().add(4 * c)) };
                let prod = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, x));
                *isum = _mm256_add_epi32(*isum, _mm256_madd_epi16(prod, ones));
            }
        }
    }
    isum
}

/// The integer sums `Σ (q - 8) · y` of Q4_0 × 8 blocks against `T` tokens, given each
/// token's block offset (`interleaved::q4_0_offset`: `-4 · Σy` in both i16 halves).
///
/// The unsigned nibbles × y pairs are summed in i16 (`vpmaddubsw`, at most 2·15·128 per
/// pair), starting from the offset: i16 half `h` of a lane (the elements `j` of its row with
/// `j % 4` in `{2h, 2h + 1}`) ends at `Σ_h (q - 4) · y - 4 · Σ_other y`, at most 16·11·128 +
/// 4·16·128 = 30720 in size, so the wrapping i16 adds give it exactly, and `vpmaddwd` by
/// ones adds the halves to `Σ q·y - 8 · Σy`. Taking the offset in from the start saves the
/// per-token shift and subtraction of `8 · Σy` (6% of the batch kernel on Zen 5).
///
/// # Safety
/// Each `ps[g]` must point at a Q4_0 × 8 group block (144 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_block<const G: usize, const T: usize>(
    ps: [*const u8; G],
    ys: [&BlockQ8_0; T],
    offsets: [i32; T],
) -> [[__m256i; T]; G] {
    let ones = _mm256_set1_epi16(1);
    let low4 = _mm256_set1_epi8(0x0F);
    let mut s16 = [arr::<_, T>(|t| _mm256_set1_epi32(offsets[t])); G];
    for c in 0..4 {
        for (p, s16) in ps.iter().zip(&mut s16) {
            // SAFETY: chunk c of the block's 128 quant bytes (the caller's contract).
            let x = unsafe { ld256(p.add(16 + 32 * c)) };
            let lo = _mm256_and_si256(x, low4);
            let hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
            for (s16, y) in s16.iter_mut().zip(&ys) {
                // SAFETY: activation bytes 4c and 16 + 4c.
                let (y0, y1) = unsafe { bcast_pair(y, c) };
                *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(lo, y0));
                *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(hi, y1));
            }
        }
    }
    s16.map(|s| arr(|t| _mm256_madd_epi16(s[t], ones)))
}

/// Lane `r` (4 bytes) takes row `r`'s bit byte of a Q5_0 × 8 chunk.
const Q5_SPREAD: [i8; 32] = [
    0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7,
];

/// Chunk `c` (< 4) of a Q5_0 × 8 group block as unsigned 5-bit values: elements `4c + k`
/// (low) and `16 + 4c + k` (high) of the eight rows, each byte with its fifth bit.
///
/// # Safety
/// `p` must point at a Q5_0 × 8 group block (176 bytes) and `c < 4`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn q5_0_chunk(p: *const u8, c: usize) -> (__m256i, __m256i) {
    let low4 = _mm256_set1_epi8(0x0F);
    let sixteen = _mm256_set1_epi8(0x10);
    // SAFETY: the table is 32 bytes; chunk c's 8 bit bytes and 32 quant bytes (the caller's
    // contract).
    let (spread, h8, x) = unsafe {
        (
            ld256(Q5_SPREAD.as_ptr()),
            p.add(16 + 8 * c).cast::<i64>().read_unaligned(),
            ld256(p.add(48 + 32 * c)),
        )
    };
    // byte j of a lane tests bit j (low elements) or bit 4 + j (high elements)
    let bits = _mm256_shuffle_epi8(_mm256_set1_epi64x(h8), spread);
    let fifth = |probe: i32| {
        let probe = _mm256_set1_epi32(probe);
        _mm256_and_si256(
            _mm256_cmpeq_epi8(_mm256_and_si256(bits, probe), probe),
            sixteen,
        )
    };
    (
        _mm256_or_si256(_mm256_and_si256(x, low4), fifth(0x0804_0201)),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(x, 4), low4),
            fifth(0x8040_2010_u32 as i32),
        ),
    )
}

/// # Safety
/// Each `ps[g]` must point at a Q5_0 × 8 group block (176 bytes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_block<const G: usize, const T: usize>(
    ps: [*const u8; G],
    ys: [&BlockQ8_0; T],
    sums: [i32; T],
) -> [[__m256i; T]; G] {
    let ones = _mm256_set1_epi16(1);
    // unsigned 5-bit values × y: at most 4 products per i16 (4 × 2·31·128 < 2^15)
    let mut isum: [[__m256i; T]; G] = [arr(|t| _mm256_set1_epi32(-16 * sums[t])); G];
    for half in 0..2 {
        let mut s16 = [[_mm256_setzero_si256(); T]; G];
        for c in 2 * half..2 * half + 2 {
            for (p, s16) in ps.iter().zip(&mut s16) {
                // SAFETY: chunk c < 4 of the group block (the caller's contract).
                let (lo, hi) = unsafe { q5_0_chunk(*p, c) };
                for (s16, y) in s16.iter_mut().zip(&ys) {
                    // SAFETY: activation bytes 4c and 16 + 4c.
                    let (y0, y1) = unsafe { bcast_pair(y, c) };
                    *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(lo, y0));
                    *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(hi, y1));
                }
            }
        }
        for (isum, s16) in isum.iter_mut().zip(&s16) {
            for (i, &s) in isum.iter_mut().zip(s16) {
                *i = _mm256_add_epi32(*i, _mm256_madd_epi16(s, ones));
            }
        }
    }
    isum
}
