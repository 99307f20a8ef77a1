//! What the simd128 row kernels share: loads, lane reductions, f16 scales, the stack buffer
//! activations are prepared in, and the driver that walks rows, tokens and column chunks.
//!
//! The row kernels of several rows and tokens (`legacy.rs`, `kquants.rs`) keep one float
//! sum per (row, token) in a vector lane and add each block's exact integer sum times its
//! scales with the scalar oracle's own operations, so every value is the oracle's bit for bit.
//! What they share per call is done once: the activations are prepared per token (int8
//! quants split into even and odd int16 lanes, block sums, scales as f32) into a stack buffer,
//! a chunk of columns at a time, and every row of the call runs over that chunk.

use core::arch::wasm32::*;
use core::mem::MaybeUninit;

/// Loads 16 bytes at `p` (no alignment needed).
///
/// # Safety
/// `p .. p + 16` must be readable.
#[inline(always)]
pub(super) unsafe fn ld(p: *const u8) -> v128 {
    // SAFETY: the caller's contract.
    unsafe { v128_load(p as *const v128) }
}

/// `ops::exp::exp_poly` on four lanes (the same operations), its multiply-adds `x · y + z`
/// by `madd`: exactly fused for the scalar oracle's bits (the flash tile), or
/// `f32x4.relaxed_madd` (the relaxed build's activation).
#[inline(always)]
pub(super) fn exp_poly4(x: v128, madd: impl Fn(v128, v128, v128) -> v128) -> v128 {
    let c = f32x4_splat;
    // pmax(c, x) is c for a NaN x, as `x.max(c)` and `maxps`
    let x = f32x4_pmin(f32x4_pmax(c(-87.3), x), c(88.7));
    let n = f32x4_nearest(f32x4_mul(x, c(core::f32::consts::LOG2_E)));
    let r = madd(f32x4_neg(n), c(0.693_145_75), x);
    let r = madd(f32x4_neg(n), c(1.428_606_8e-6), r);
    let mut p = c(1.0 / 720.0);
    for k in [1.0f32 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = madd(p, r, c(k));
    }
    // n in [-126, 128]: 2^n split as 2^(n/2)·2^(n - n/2) keeps both factors normal
    let ni = i32x4_trunc_sat_f32x4(n);
    let half = i32x4_shr(ni, 1);
    let pow2 = |e: v128| i32x4_shl(i32x4_add(e, i32x4_splat(127)), 23);
    f32x4_mul(f32x4_mul(p, pow2(half)), pow2(i32x4_sub(ni, half)))
}

/// Sum of the four i32 lanes.
#[inline(always)]
pub(super) fn hsum_i32(v: v128) -> i32 {
    let v = i32x4_add(v, i32x4_shuffle::<2, 3, 0, 1>(v, v));
    let v = i32x4_add(v, i32x4_shuffle::<1, 0, 3, 2>(v, v));
    i32x4_extract_lane::<0>(v)
}

/// `[Σ p[0], Σ p[1], Σ p[2], Σ p[3]]` (each the sum of its four i32 lanes).
#[inline(always)]
pub(super) fn reduce4(p: [v128; 4]) -> v128 {
    let a = i32x4_add(
        i32x4_shuffle::<0, 4, 1, 5>(p[0], p[1]),
        i32x4_shuffle::<2, 6, 3, 7>(p[0], p[1]),
    );
    let b = i32x4_add(
        i32x4_shuffle::<0, 4, 1, 5>(p[2], p[3]),
        i32x4_shuffle::<2, 6, 3, 7>(p[2], p[3]),
    );
    i32x4_add(
        i32x4_shuffle::<0, 1, 4, 5>(a, b),
        i32x4_shuffle::<2, 3, 6, 7>(a, b),
    )
}

/// `Σ w[i] · a[i]` of four int16 vectors against four at `a`, in i32 lanes.
///
/// # Safety
/// `a` must point to four readable vectors.
#[inline(always)]
pub(super) unsafe fn dot4(w: [v128; 4], a: *const v128) -> v128 {
    // SAFETY: the caller's contract.
    let a: [v128; 4] = unsafe { [*a, *a.add(1), *a.add(2), *a.add(3)] };
    i32x4_add(
        i32x4_add(i32x4_dot_i16x8(w[0], a[0]), i32x4_dot_i16x8(w[1], a[1])),
        i32x4_add(i32x4_dot_i16x8(w[2], a[2]), i32x4_dot_i16x8(w[3], a[3])),
    )
}

/// `v`, after storing it to `slot`: a store is ordered with the loads around it in V8's
/// graph, so the work `v` is made of runs before the loads written after it. TurboFan issues
/// a loop body's loads first and places pure operations just before their use; with four
/// rows' worth of loads in flight the 16 xmm registers run out and everything spills.
#[inline(always)]
pub(super) fn fence(slot: &mut v128, v: v128) -> v128 {
    // SAFETY: a valid, aligned local.
    unsafe { core::ptr::write_volatile(slot, v) };
    v
}

/// The 16 int8 lanes of `v` as int16: `[even bytes, odd bytes]`.
#[inline(always)]
pub(super) fn split_i8(v: v128) -> [v128; 2] {
    [i16x8_shr(i16x8_shl(v, 8), 8), i16x8_shr(v, 8)]
}

/// The four int16 vectors of 16 packed 4-bit quants (Q4_0, Q5_0, Q4_K) read as int16 lanes:
/// low nibbles (even, odd elements), high nibbles (even, odd).
#[inline(always)]
#[cfg(not(target_feature = "relaxed-simd"))]
pub(super) fn nibbles(v: v128) -> [v128; 4] {
    let m = i16x8_splat(0x0F);
    [
        v128_and(v, m),
        v128_and(u16x8_shr(v, 8), m),
        v128_and(u16x8_shr(v, 4), m),
        u16x8_shr(v, 12),
    ]
}

/// 2^112: an f16's exponent and mantissa bits moved to an f32's places read 2^-112 times the
/// value (normals and subnormals alike).
pub(super) const F16_REBIAS: f32 = f32::from_bits(0x7780_0000);

/// An f16's bits as the f32 bits of its value times 2^-112 (sign kept), exact for every finite
/// f16; multiplying by a scale prepared times 2^112 ([`F16_REBIAS`]) gives the correctly
/// rounded product of the two values, as converting first would. Infinities and NaNs come out
/// finite: callers check for them with [`f16_special`].
#[inline(always)]
pub(super) fn f16_bits(h: u16) -> f32 {
    f32::from_bits(((h as i16 as i32) << 13) as u32 & 0x8FFF_E000)
}

/// [`f16_bits`] of the f16 in the low half of each i32 lane (sign-extended or not).
#[inline(always)]
pub(super) fn f16_bits4(v: v128) -> v128 {
    v128_and(i32x4_shl(v, 13), u32x4_splat(0x8FFF_E000))
}

/// Whether the f16 `h` is an infinity or a NaN.
#[inline(always)]
pub(super) fn f16_special(h: u16) -> bool {
    h & 0x7C00 == 0x7C00
}

/// f16 bits (the low half of each u32 lane, zero-extended) to f32, exactly, infinities and NaNs
/// included (NaNs quieted, as the `half` crate converts them).
#[inline(always)]
pub(super) fn f16_to_f32(v: v128) -> v128 {
    let abs = v128_and(v, u32x4_splat(0x7FFF));
    let sign = i32x4_shl(v128_and(v, u32x4_splat(0x8000)), 16);
    let bits = i32x4_shl(abs, 13);
    let finite = f32x4_mul(bits, f32x4_splat(F16_REBIAS));
    let quiet = v128_and(i32x4_gt(abs, i32x4_splat(0x7C00)), u32x4_splat(0x0040_0000));
    let special = v128_or(v128_or(bits, u32x4_splat(0x7F80_0000)), quiet);
    let is_special = i32x4_gt(abs, i32x4_splat(0x7BFF));
    v128_or(v128_bitselect(special, finite, is_special), sign)
}

/// Reads the little-endian u16 at `p`.
///
/// # Safety
/// `p .. p + 2` must be readable.
#[inline(always)]
pub(super) unsafe fn rd16(p: *const u8) -> u16 {
    // SAFETY: the caller's contract.
    unsafe { (p as *const u16).read_unaligned() }
}

/// Reads the little-endian u32 at `p`.
///
/// # Safety
/// `p .. p + 4` must be readable.
#[inline(always)]
pub(super) unsafe fn rd32(p: *const u32) -> u32 {
    // SAFETY: the caller's contract.
    unsafe { p.read_unaligned() }
}

/// Vectors in the preparation buffer (16 KiB: the prepared activations of a chunk of columns
/// stay in L1 while the call's rows pass over them).
pub(super) const PREP_VECTORS: usize = 1024;

/// 32-bit values of each kind (block sums, scales) in the preparation buffer: a kernel's
/// [`RowKernel::PREP_BLOCKS`] is at most this.
pub(super) const PREP_SCALARS: usize = PREP_VECTORS / 2;

/// A stack buffer for prepared activations: `PREP_VECTORS` vectors and `PREP_SCALARS` 32-bit
/// values of each of two kinds (sums, scales). Left uninitialised: a kernel reads only what
/// it wrote.
pub(super) struct Prep {
    q: MaybeUninit<[v128; PREP_VECTORS]>,
    sums: MaybeUninit<[i32; PREP_SCALARS]>,
    scales: MaybeUninit<[f32; PREP_SCALARS]>,
}

impl Prep {
    #[inline(always)]
    pub(super) fn new() -> Self {
        Prep {
            q: MaybeUninit::uninit(),
            sums: MaybeUninit::uninit(),
            scales: MaybeUninit::uninit(),
        }
    }

    #[inline(always)]
    pub(super) fn q(&mut self) -> *mut v128 {
        self.q.as_mut_ptr() as *mut v128
    }

    #[inline(always)]
    pub(super) fn sums(&mut self) -> *mut i32 {
        self.sums.as_mut_ptr() as *mut i32
    }

    #[inline(always)]
    pub(super) fn scales(&mut self) -> *mut f32 {
        self.scales.as_mut_ptr() as *mut f32
    }
}

/// What a row kernel family provides to [`drive`]: how many blocks of its format a chunk of
/// prepared activations holds for `t` tokens, how to prepare them, and its two tiles.
pub(super) trait RowKernel {
    /// Elements per weight block.
    const QK: usize;
    /// Bytes per weight block.
    const BYTES: usize;
    /// Bytes per activation block.
    const ACT_BYTES: usize;
    /// Blocks of one token's activations the [`Prep`] buffer holds (at most
    /// [`PREP_SCALARS`]).
    const PREP_BLOCKS: usize;

    /// Prepares blocks `b0..b1` of the `t` tokens at `a` (rows of `a_row` bytes) into `p`,
    /// block-major (`[block][token]`).
    ///
    /// # Safety
    /// The tokens' rows must hold block `b1 - 1`; `(b1 - b0) · t <= PREP_BLOCKS`.
    unsafe fn prepare(p: &mut Prep, a: *const u8, a_row: usize, t: usize, b0: usize, b1: usize);

    /// Four rows (at `w + i · stride`, each from its first block) against one prepared
    /// token: adds each row's blocks `b0..b1` to its lane of `acc`; returns the sums and
    /// whether any of those blocks had an f16 scale that is an infinity or a NaN. (A base and
    /// a stride rather than four pointers: V8 keeps loop values in 12 or so registers.)
    ///
    /// # Safety
    /// The rows must hold block `b1 - 1`; `p` must hold those blocks of one token.
    unsafe fn rows4(
        w: *const u8,
        stride: usize,
        p: &mut Prep,
        b0: usize,
        b1: usize,
        acc: v128,
    ) -> (v128, bool);

    /// Whether a weight block has an f16 scale that is an infinity or a NaN.
    fn has_special(block: &[u8]) -> bool;

    /// One row against `4 · H` prepared tokens (lane `t` of `acc[h]`: token `4h + t`),
    /// likewise: each block taken apart once for all of them.
    ///
    /// # Safety
    /// As [`Self::rows4`], with `p` holding `4 · H` tokens.
    unsafe fn tokens<const H: usize>(
        w: *const u8,
        p: &mut Prep,
        b0: usize,
        b1: usize,
        acc: [v128; H],
    ) -> ([v128; H], bool);
}

/// `out[r · n + t] = row r · token t` for the rows of `w` and the `n` token rows of `a` (the
/// [`crate::quant::VecDotRowsFn`] contract) through `K`'s tiles: tokens eight or four at a
/// time against each row, the rest one at a time against four rows at a time, over chunks of columns whose
/// prepared activations fit the [`Prep`] buffer (each lane's sum stored and reloaded between
/// chunks: the same bits). A row with an infinite or NaN f16 scale is computed again by the
/// scalar oracle `reference`.
///
/// # Safety
/// The CPU must support simd128.
#[inline(always)]
pub(super) unsafe fn drive<K: RowKernel>(
    cols: usize,
    w: &[u8],
    a: &[u8],
    n: usize,
    out: &mut [f32],
    reference: crate::quant::VecDotFn,
) {
    if n == 0 || out.is_empty() {
        return;
    }
    let nb = cols / K::QK;
    let row_bytes = nb * K::BYTES;
    let a_row = nb * K::ACT_BYTES;
    let rows = out.len() / n;
    assert!(
        w.len() >= rows * row_bytes && a.len() >= n * a_row && out.len() == rows * n,
        "row kernel: {rows} rows of {row_bytes} bytes, {n} tokens of {a_row}"
    );
    if nb == 0 {
        out.fill(0.0);
        return;
    }
    const { assert!(K::PREP_BLOCKS <= PREP_SCALARS) };
    let mut p = Prep::new();
    let mut special = false;
    let (wp, ap, op) = (w.as_ptr(), a.as_ptr(), out.as_mut_ptr());
    let mut t0 = 0;
    while t0 < n {
        let tn = match n - t0 {
            8.. => 8,
            4.. => 4,
            _ => 1,
        };
        let chunk = K::PREP_BLOCKS / tn;
        let mut b0 = 0;
        while b0 < nb {
            let b1 = (b0 + chunk).min(nb);
            // SAFETY: the assert above bounds every row, token and output
            // touched: rows < rows, tokens t0 .. t0 + tn <= n, blocks < nb; the chunk fits the
            // buffer (b1 - b0 <= PREP_BLOCKS / tn).
            unsafe {
                K::prepare(&mut p, ap.add(t0 * a_row), a_row, tn, b0, b1);
                if tn > 1 {
                    for r in 0..rows {
                        let o = op.add(r * n + t0) as *mut v128;
                        let w = wp.add(r * row_bytes);
                        let load = |h: usize| {
                            if b0 == 0 {
                                f32x4_splat(0.0)
                            } else {
                                v128_load(o.add(h))
                            }
                        };
                        if tn == 8 {
                            let (acc, s) = K::tokens::<2>(w, &mut p, b0, b1, [load(0), load(1)]);
                            special |= s;
                            v128_store(o, acc[0]);
                            v128_store(o.add(1), acc[1]);
                        } else {
                            let (acc, s) = K::tokens::<1>(w, &mut p, b0, b1, [load(0)]);
                            special |= s;
                            v128_store(o, acc[0]);
                        }
                    }
                } else {
                    // quad k takes rows k, q + k, 2q + k, 3q + k: four long sequential streams
                    // through the weights (the hardware prefetcher follows them from DRAM;
                    // four neighbouring rows would start four short ones every quad); the
                    // last rows % 4 rows one at a time (in all four lanes, lane 0 stored)
                    let q = rows / 4;
                    for k in 0..q + rows % 4 {
                        let (idx, real, stride) = if k < q {
                            ([k, q + k, 2 * q + k, 3 * q + k], 4, q * row_bytes)
                        } else {
                            ([3 * q + k; 4], 1, 0)
                        };
                        let acc = if b0 == 0 {
                            f32x4_splat(0.0)
                        } else {
                            load4(op, idx, real, n, t0)
                        };
                        let w = wp.add(idx[0] * row_bytes);
                        let (acc, s) = K::rows4(w, stride, &mut p, b0, b1, acc);
                        special |= s;
                        store4(op, idx, real, n, t0, acc);
                    }
                }
            }
            b0 = b1;
        }
        t0 += tn;
    }
    if special {
        redo_special::<K>(cols, w, a, n, out, reference);
    }
}

/// The sums of the first `real` rows of `idx` for token `t` (`out[idx[i] · n + t]`) as lanes
/// (the other lanes 0).
///
/// # Safety
/// Those values must be readable.
#[inline(always)]
unsafe fn load4(out: *const f32, idx: [usize; 4], real: usize, n: usize, t: usize) -> v128 {
    let mut v = [0f32; 4];
    for (v, &r) in v.iter_mut().zip(&idx).take(real) {
        // SAFETY: the caller's contract.
        *v = unsafe { *out.add(r * n + t) };
    }
    f32x4(v[0], v[1], v[2], v[3])
}

/// Stores [`load4`]'s lanes back.
///
/// # Safety
/// As [`load4`], writable.
#[inline(always)]
unsafe fn store4(out: *mut f32, idx: [usize; 4], real: usize, n: usize, t: usize, v: v128) {
    let v = [
        f32x4_extract_lane::<0>(v),
        f32x4_extract_lane::<1>(v),
        f32x4_extract_lane::<2>(v),
        f32x4_extract_lane::<3>(v),
    ];
    for (v, &r) in v.iter().zip(&idx).take(real) {
        // SAFETY: the caller's contract.
        unsafe { *out.add(r * n + t) = *v };
    }
}

/// Computes again, with the scalar oracle, every row of the call that has an infinite or NaN
/// f16 scale (the fast scale arithmetic assumes finite ones).
fn redo_special<K: RowKernel>(
    cols: usize,
    w: &[u8],
    a: &[u8],
    n: usize,
    out: &mut [f32],
    reference: crate::quant::VecDotFn,
) {
    let nb = cols / K::QK;
    let (row_bytes, a_row) = (nb * K::BYTES, nb * K::ACT_BYTES);
    let rows = out.len() / n;
    for r in 0..rows {
        let row = &w[r * row_bytes..(r + 1) * row_bytes];
        if row.chunks_exact(K::BYTES).any(K::has_special) {
            for t in 0..n {
                out[r * n + t] = reference(cols, row, &a[t * a_row..(t + 1) * a_row]);
            }
        }
    }
}
