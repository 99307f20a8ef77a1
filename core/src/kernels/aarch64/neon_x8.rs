//! NEON + SDOT kernels over the legacy interleaved layouts of `quant::interleaved` (Q8_0,
//! Q4_0 and Q5_0 × 8 rows), and the pieces the k-quant ones (`neon_x8_k.rs`) share.
//!
//! A 4-byte chunk of eight rows is 32 bytes: two 128-bit vectors, rows 0-3 and rows 4-7
//! ("halves"), lane `r` of each holding one row's four bytes. `SDOT` by element
//! ([`sdot_lane`]) multiplies each row's four bytes with the four activation bytes in one
//! 32-bit lane of an activation vector, so one 16-byte activation load serves four chunks
//! ([`dot4`]) and lane `r` of the i32 accumulator is row `r`'s exact integer sum: no
//! horizontal sums. Per row and block the float step is the scalar kernel's,
//! `sum += isum as f32 * (dx * dy)`, with separate multiplies and adds (no fused
//! multiply-add), so the results are the scalar row kernel's bit for bit.
//!
//! The matrix × vector kernels (`gemv_*`) run two groups against one token (sharing the
//! activation loads); the batch kernels (`gemm_*`) run one group against [`TILE`] tokens at
//! a time, unpacking each block's weights once for the tile, every token's sums in
//! registers. Each token's arithmetic is the single-token one, so both give the same bits.
//!
//! `vdotq_laneq_s32` is unstable in Rust 1.95 (`stdarch_neon_dotprod`), so `SDOT` is issued
//! through `asm!`, as in `neon.rs`.

use core::arch::aarch64::*;
use core::arch::asm;

use super::neon::{f16_high, f16_low, fp16};
use crate::quant::interleaved::{q4_0, q5_0, q8_0, BatchRows, ROWS};
use crate::quant::legacy::{blocks, BlockQ8_0, QK};

/// Tokens the batch kernels run over one unpacked block at a time: four tokens' i32 and f32
/// sums (two vectors each per group) plus the weights and activations fit the 32 registers.
pub(super) const TILE: usize = 4;

/// Rows of a group per vector ("half": rows `4h..4h + 4`).
const HALF_ROWS: usize = 4;

// ---- shared helpers ----

/// `acc[r] += Σ_k w[4r + k] · y[4L + k]`: `SDOT` by element, lane `L` of `y` against each
/// row's four bytes of `w`.
///
/// # Safety
/// The CPU must support dotprod (callers are `neon,dotprod` functions).
#[inline(always)]
pub(super) unsafe fn sdot_lane<const L: i32>(
    mut acc: int32x4_t,
    w: int8x16_t,
    y: int8x16_t,
) -> int32x4_t {
    // SAFETY: the caller guarantees dotprod; SDOT touches only these registers (the indexed
    // form takes any of v0-v31 for `y`).
    unsafe {
        asm!("sdot {acc:v}.4s, {w:v}.16b, {y:v}.4b[{l}]",
             acc = inout(vreg) acc, w = in(vreg) w, y = in(vreg) y, l = const L,
             options(pure, nomem, nostack, preserves_flags));
    }
    acc
}

/// `acc[r] += Σ_i` row `r`'s four bytes of `w[i]` · activation bytes `4i..4i + 4` of `y`: four
/// chunks against one 16-byte activation vector.
///
/// # Safety
/// As [`sdot_lane`].
#[inline(always)]
pub(super) unsafe fn dot4(acc: int32x4_t, w: [int8x16_t; 4], y: int8x16_t) -> int32x4_t {
    // SAFETY: the caller's contract.
    unsafe {
        let acc = sdot_lane::<0>(acc, w[0], y);
        let acc = sdot_lane::<1>(acc, w[1], y);
        let acc = sdot_lane::<2>(acc, w[2], y);
        sdot_lane::<3>(acc, w[3], y)
    }
}

/// The 16 bytes at `p`.
///
/// # Safety
/// `p` must be valid for reading 16 bytes (no alignment needed).
#[inline(always)]
pub(super) unsafe fn ld(p: *const u8) -> uint8x16_t {
    // SAFETY: the caller's contract; LD1 has no alignment requirement.
    unsafe { vld1q_u8(p) }
}

/// The 16 int8 at `p`.
///
/// # Safety
/// As [`ld`].
#[inline(always)]
pub(super) unsafe fn ld_s8(p: *const i8) -> int8x16_t {
    // SAFETY: the caller's contract.
    unsafe { vld1q_s8(p) }
}

/// The eight f16 at `p` as f32, rows 0-3 and rows 4-7 (exact).
///
/// # Safety
/// As [`ld`].
#[inline(always)]
pub(super) unsafe fn scales8(p: *const u8) -> [float32x4_t; 2] {
    // SAFETY: the caller's contract; on a little-endian CPU (the only kind `fill_neon`
    // installs these kernels on) the u16 lanes are the format's little-endian f16.
    let v = unsafe { vreinterpretq_u16_u8(ld(p)) };
    [f16_low(v), f16_high(v)]
}

/// `acc + isum · (dx · dy)`, rounded as the scalar kernel rounds it.
#[inline(always)]
fn accumulate(acc: float32x4_t, isum: int32x4_t, dx: float32x4_t, dy: f32) -> float32x4_t {
    // SAFETY: plain NEON, which every caller (a `neon,dotprod` kernel) enables.
    unsafe { vaddq_f32(acc, vmulq_f32(vcvtq_f32_s32(isum), vmulq_n_f32(dx, dy))) }
}

/// Stores a group's eight sums.
#[inline(always)]
pub(super) fn store(out: &mut [f32; ROWS], acc: [float32x4_t; 2]) {
    // SAFETY: `out` is eight floats: two stores of four.
    unsafe {
        vst1q_f32(out.as_mut_ptr(), acc[0]);
        vst1q_f32(out.as_mut_ptr().add(HALF_ROWS), acc[1]);
    }
}

/// Runs `$f::<T>(args)` for the `T` (1 ..= [`TILE`]) that is `$n`, known at compile time.
macro_rules! by_tile {
    ($n:expr, $f:ident::<$($p:ty,)? T>($($arg:expr),*)) => {
        match $n {
            1 => $f::<$($p,)? 1>($($arg),*),
            2 => $f::<$($p,)? 2>($($arg),*),
            3 => $f::<$($p,)? 3>($($arg),*),
            _ => $f::<$($p,)? 4>($($arg),*),
        }
    };
}
pub(super) use by_tile;

/// Repeats `$body` with `$i` a constant bound to each listed value: a loop the compiler
/// cannot keep (LLVM leaves some loops with large bodies rolled, their sums then in memory),
/// whose index can be a const generic argument (an `SDOT` lane).
macro_rules! unroll {
    ($i:ident in [$($n:literal),*] $body:block) => {
        $({
            const $i: usize = $n;
            $body
        })*
    };
}
pub(super) use unroll;

/// `p`, passed through an empty `asm!` the compiler cannot see through: loads from the
/// result are not merged with the same loads from `p` made before. The k-quant kernels read
/// some weight vectors twice, from L1, rather than keep them in registers; merged (the
/// weights are behind a shared reference, so a plain memory clobber does not stop it), those
/// loads would stay live across the whole super-block and be spilled.
#[inline(always)]
pub(super) fn opaque(mut p: *const u8) -> *const u8 {
    // SAFETY: the template is a comment: no instruction, `p` unchanged (never dereferenced,
    // hence `nomem`). Not `pure`, so two calls are not merged either.
    #[allow(clippy::pointers_in_nomem_asm_block)]
    unsafe {
        asm!("/* {p} */", p = inout(reg) p, options(nomem, nostack, preserves_flags))
    }
    p
}

/// Checks a batch call's shapes: `out` is whole groups of one `[f32; ROWS]` per token, and
/// `w` holds those groups (`group_bytes` each).
pub(super) fn check_batch(w: &[u8], group_bytes: usize, acts: &BatchRows<'_>, out: &[[f32; ROWS]]) {
    let n = acts.len();
    assert!(
        n > 0 && out.len().is_multiple_of(n),
        "a batch kernel writes whole groups of {n} tokens, not {}",
        out.len()
    );
    let groups = out.len() / n;
    assert!(
        w.len() >= groups * group_bytes,
        "{groups} groups of {group_bytes} bytes in {} bytes of weights",
        w.len()
    );
}

// ---- the legacy formats ----

/// A legacy interleaved format as the kernels read one group block.
trait LegacyX8 {
    /// Bytes of a group block (eight rows' blocks).
    const GROUP_BLOCK: usize;

    /// The quants of rows `4h..4h + 4` that multiply activation bytes `4i..4i + 4` (first
    /// vector) and `16 + 4i..20 + 4i` (second), signed or, with [`start`](Self::start)
    /// taking the offset off, unsigned.
    ///
    /// # Safety
    /// `p` must point at a group block; `h < 2`, `i < 4`.
    unsafe fn chunk(p: *const u8, h: usize, i: usize) -> [int8x16_t; 2];

    /// The integer sums' starting value against the activation block `y` (every lane): the
    /// quants' offset times `Σy` for formats whose [`chunk`](Self::chunk) is unsigned.
    ///
    /// # Safety
    /// As [`sdot_lane`].
    #[inline(always)]
    unsafe fn start(_y: [int8x16_t; 2]) -> int32x4_t {
        // SAFETY: plain NEON (the caller's contract).
        unsafe { vdupq_n_s32(0) }
    }
}

struct Q8_0;

impl LegacyX8 for Q8_0 {
    const GROUP_BLOCK: usize = q8_0::GROUP_BLOCK;

    /// Chunks `i` and `4 + i` as they are.
    #[inline(always)]
    unsafe fn chunk(p: *const u8, h: usize, i: usize) -> [int8x16_t; 2] {
        // SAFETY: half h of chunks i and 4 + i of the block's 8 (the caller's contract).
        unsafe {
            [
                vreinterpretq_s8_u8(ld(p.add(16 + 32 * i + 16 * h))),
                vreinterpretq_s8_u8(ld(p.add(16 + 32 * (4 + i) + 16 * h))),
            ]
        }
    }
}

struct Q4_0;

impl LegacyX8 for Q4_0 {
    const GROUP_BLOCK: usize = q4_0::GROUP_BLOCK;

    /// Chunk `i`'s low nibbles (elements `4i..4i + 4`) and high ones (`16 + 4i..`),
    /// unsigned: [`start`](Self::start) takes `8 · Σy` off.
    #[inline(always)]
    unsafe fn chunk(p: *const u8, h: usize, i: usize) -> [int8x16_t; 2] {
        // SAFETY: half h of chunk i < 4 of the block (the caller's contract); plain NEON.
        unsafe {
            let x = ld(p.add(16 + 32 * i + 16 * h));
            [
                vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(0x0F))),
                vreinterpretq_s8_u8(vshrq_n_u8::<4>(x)),
            ]
        }
    }

    /// `-8 · Σy` in every lane.
    #[inline(always)]
    unsafe fn start(y: [int8x16_t; 2]) -> int32x4_t {
        // SAFETY: dotprod and NEON (the caller's contract). Lane r sums -8 times bytes
        // 4r..4r + 4 of both halves; two pairwise adds put the total in every lane.
        unsafe {
            let m8 = vdupq_n_s8(-8);
            let s = sdot_lane::<0>(vdupq_n_s32(0), y[0], m8);
            let s = sdot_lane::<0>(s, y[1], m8);
            let s = vpaddq_s32(s, s);
            vpaddq_s32(s, s)
        }
    }
}

struct Q5_0;

/// Lane `r` (4 bytes) takes byte `r` of a 4-byte vector: row `r`'s fifth-bit byte.
const Q5_SPREAD: [u8; 16] = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3];

impl LegacyX8 for Q5_0 {
    const GROUP_BLOCK: usize = q5_0::GROUP_BLOCK;

    /// Chunk `i`'s 5-bit values, signed: a nibble with its fifth bit (bit `k`, or `4 + k`
    /// for the high nibbles, of the row's `qh[i]` byte) is `nibble - 16 + 16 · bit`, i.e.
    /// the nibble with `0xF0` set where the bit is clear.
    #[inline(always)]
    unsafe fn chunk(p: *const u8, h: usize, i: usize) -> [int8x16_t; 2] {
        // SAFETY: the 16-byte table, and rows 4h..4h + 4 of chunk i's eight bit bytes and
        // half h of its 32 quant bytes (the caller's contract); plain NEON.
        unsafe {
            // byte k of each lane tests bit k (low nibbles) or bit 4 + k (high ones)
            let probe_lo = vreinterpretq_u8_u32(vdupq_n_u32(0x0804_0201));
            let probe_hi = vreinterpretq_u8_u32(vdupq_n_u32(0x8040_2010));
            let high = vdupq_n_u8(0xF0);
            let bits = p.add(16 + 8 * i + 4 * h).cast::<u32>().read_unaligned();
            let bits = vqtbl1q_u8(
                vreinterpretq_u8_u32(vdupq_n_u32(bits)),
                ld(Q5_SPREAD.as_ptr()),
            );
            let x = ld(p.add(48 + 32 * i + 16 * h));
            let lo = vorrq_u8(
                vandq_u8(x, vdupq_n_u8(0x0F)),
                vbicq_u8(high, vtstq_u8(bits, probe_lo)),
            );
            let hi = vorrq_u8(vshrq_n_u8::<4>(x), vbicq_u8(high, vtstq_u8(bits, probe_hi)));
            [vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi)]
        }
    }
}

/// The exact integer sums of one group block (`p`) against `T` tokens' activation blocks
/// (`ys`, bytes 0-15 and 16-31): `[t][h]`, lane `r` row `4h + r`. Each chunk is loaded and
/// unpacked once and multiplied with every token.
///
/// # Safety
/// `p` must point at a group block of `F`; the CPU must support dotprod.
#[inline(always)]
unsafe fn block_isums<F: LegacyX8, const T: usize>(
    p: *const u8,
    ys: [[int8x16_t; 2]; T],
) -> [[int32x4_t; 2]; T] {
    // SAFETY: the caller's contract (a group block, dotprod); H < 2, I < 4.
    unsafe {
        let mut acc = [[vdupq_n_s32(0); 2]; T];
        for (acc, y) in acc.iter_mut().zip(ys) {
            let s = F::start(y);
            *acc = [s, s];
        }
        unroll!(H in [0, 1] {
            unroll!(I in [0, 1, 2, 3] {
                let [w0, w1] = F::chunk(p, H, I);
                for (acc, y) in acc.iter_mut().zip(ys) {
                    let a = sdot_lane::<{ I as i32 }>(acc[H], w0, y[0]);
                    acc[H] = sdot_lane::<{ I as i32 }>(a, w1, y[1]);
                }
            });
        });
        acc
    }
}

/// A Q8_0 activation block's quants as two vectors.
#[inline(always)]
fn act(y: &BlockQ8_0) -> [int8x16_t; 2] {
    // SAFETY: loads at 0 and 16 of the 32 quants.
    unsafe { [ld_s8(y.qs.as_ptr()), ld_s8(y.qs.as_ptr().add(16))] }
}

/// `G` (1 or 2) consecutive groups (`group_bytes` apart from `w`) against one token: each
/// row's float sum over every block. Two groups share the activation loads.
///
/// # Safety
/// `w` must hold `G` groups of `ys.len()` blocks; the CPU must support NEON and dotprod.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_groups<F: LegacyX8, const G: usize>(
    w: &[u8],
    group_bytes: usize,
    ys: &[BlockQ8_0],
) -> [[float32x4_t; 2]; G] {
    debug_assert!(G == 1 || G == 2);
    debug_assert!(w.len() >= G * group_bytes && group_bytes == ys.len() * F::GROUP_BLOCK);
    let mut acc = [[vdupq_n_f32(0.0); 2]; G];
    for (b, y) in ys.iter().enumerate() {
        let (y, dy) = (act(y), fp16(y.d));
        // SAFETY: block b of group 0 (and 1), inside `w` (the caller's contract), and each
        // block's eight scales; dotprod is enabled here.
        unsafe {
            let p = w.as_ptr().add(b * F::GROUP_BLOCK);
            let [isum] = block_isums::<F, 1>(p, [y]);
            let dx = scales8(p);
            for h in 0..2 {
                acc[0][h] = accumulate(acc[0][h], isum[h], dx[h], dy);
            }
            if G == 2 {
                let p = p.add(group_bytes);
                let [isum] = block_isums::<F, 1>(p, [y]);
                let dx = scales8(p);
                for h in 0..2 {
                    acc[G - 1][h] = accumulate(acc[G - 1][h], isum[h], dx[h], dy);
                }
            }
        }
    }
    acc
}

/// `out[8g + r] = row r of group g · a`, two groups at a time.
///
/// # Safety
/// The CPU must support NEON and dotprod.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv<F: LegacyX8>(cols: usize, w: &[u8], a: &[u8], out: &mut [f32]) {
    let nb = cols / QK;
    let ys = &blocks::<BlockQ8_0>(a)[..nb];
    let group_bytes = nb * F::GROUP_BLOCK;
    let groups = out.len() / ROWS;
    assert!(
        out.len().is_multiple_of(ROWS) && w.len() >= groups * group_bytes,
        "{} rows of {cols} columns in {} bytes",
        out.len(),
        w.len()
    );
    let mut outs = out.chunks_exact_mut(2 * ROWS);
    for (i, o) in (&mut outs).enumerate() {
        let wg = &w[2 * i * group_bytes..];
        // SAFETY: `wg` holds two groups (checked above); dotprod is enabled here.
        let acc = unsafe { gemv_groups::<F, 2>(wg, group_bytes, ys) };
        for (o, acc) in o.chunks_exact_mut(ROWS).zip(acc) {
            store(o.try_into().expect("eight rows"), acc);
        }
    }
    let o = outs.into_remainder();
    if !o.is_empty() {
        let wg = &w[(groups - 1) * group_bytes..];
        // SAFETY: `wg` holds the last group.
        let [acc] = unsafe { gemv_groups::<F, 1>(wg, group_bytes, ys) };
        store(o.try_into().expect("eight rows"), acc);
    }
}

/// One group (`nb` blocks at `w`) against the `T` tokens of `acts`: each block's weights are
/// unpacked once for all of them.
///
/// # Safety
/// `w` must hold the group's `nb` blocks; the CPU must support NEON and dotprod.
#[inline]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemm_tile<F: LegacyX8, const T: usize>(
    nb: usize,
    w: &[u8],
    acts: BatchRows<'_>,
    out: &mut [[f32; ROWS]],
) {
    debug_assert!(w.len() >= nb * F::GROUP_BLOCK && acts.len() == T && out.len() == T);
    let mut ys: [&[BlockQ8_0]; T] = [&[]; T];
    for (t, ys) in ys.iter_mut().enumerate() {
        *ys = &blocks::<BlockQ8_0>(acts.bytes(t))[..nb];
    }
    let mut acc = [[vdupq_n_f32(0.0); 2]; T];
    #[allow(clippy::needless_range_loop)] // block b of every token
    for b in 0..nb {
        let mut y = [[vdupq_n_s8(0); 2]; T];
        let mut dy = [0.0f32; T];
        for t in 0..T {
            y[t] = act(&ys[t][b]);
            dy[t] = fp16(ys[t][b].d);
        }
        // SAFETY: block b < nb of the group (the caller's contract) and its eight scales;
        // dotprod is enabled here.
        let (isum, dx) = unsafe {
            let p = w.as_ptr().add(b * F::GROUP_BLOCK);
            (block_isums::<F, T>(p, y), scales8(p))
        };
        for t in 0..T {
            for h in 0..2 {
                acc[t][h] = accumulate(acc[t][h], isum[t][h], dx[h], dy[t]);
            }
        }
    }
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
unsafe fn gemm<F: LegacyX8>(cols: usize, w: &[u8], acts: BatchRows<'_>, out: &mut [[f32; ROWS]]) {
    let nb = cols / QK;
    let group_bytes = nb * F::GROUP_BLOCK;
    let n = acts.len();
    check_batch(w, group_bytes, &acts, out);
    for (g, og) in out.chunks_exact_mut(n).enumerate() {
        let wg = &w[g * group_bytes..(g + 1) * group_bytes];
        for (i, o) in og.chunks_mut(TILE).enumerate() {
            let a = acts.slice(i * TILE, i * TILE + o.len());
            // SAFETY: `wg` is the group's nb blocks; dotprod is enabled here.
            unsafe { by_tile!(o.len(), gemm_tile::<F, T>(nb, wg, a, o)) }
        }
    }
}

// ---- the exported kernels ----

/// Defines the matrix × vector and batch kernels of a legacy format.
macro_rules! legacy_kernels {
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

legacy_kernels! {
    Q8_0 => gemv_q8_0, gemm_q8_0;
    Q4_0 => gemv_q4_0, gemm_q4_0;
    Q5_0 => gemv_q5_0, gemm_q5_0;
}
