//! MXFP4 (ggml type 39, the OCP microscaling format gpt-oss ships its experts in): blocks of 32
//! values, one E8M0 exponent byte `e` and 16 bytes of 4-bit E2M1 codes (element `j` in the low
//! nibble of byte `j`, element `j + 16` in its high nibble), 17 bytes with alignment 1.
//!
//! A code indexes [`KVALUES`], the E2M1 values doubled so they are integers (0, ±0.5, …, ±6
//! become 0, ±1, …, ±12), and the block's scale is `2^(e - 127) / 2` ([`e8m0_half`]), so a
//! value is `KVALUES[code] · e8m0_half(e)`, exactly. Dot products pair a row with Q8_0
//! activations (ggml's `vec_dot_type`): the codes go through the table into int8, and a
//! block's integer sum is scaled once, as ggml's `ggml_vec_dot_mxfp4_q8_0_generic` does.

use bytemuck::{Pod, Zeroable};

use super::legacy::{blocks, blocks_mut, h, BlockQ8_0, QK};

/// One MXFP4 block (ggml's `block_mxfp4`).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockMxfp4 {
    /// E8M0: the scale is `2^(e - 127)` (the doubled table halves it again, [`e8m0_half`]).
    pub e: u8,
    pub qs: [u8; QK / 2],
}

const _: () = assert!(core::mem::size_of::<BlockMxfp4>() == 17);

/// The E2M1 values doubled, by code (ggml's `kvalues_mxfp4`); codes 8.. are the negatives of
/// 0.., and code 8 (-0) is 0.
pub const KVALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// `2^(e - 128)`: half the E8M0 scale, exact for every `e` (ggml's `GGML_E8M0_TO_FP32_HALF`;
/// `e` = 0 and 1 are the subnormals 2^-128 and 2^-127, and 255, which the format reserves for
/// NaN, is 2^127 as in ggml).
#[inline]
pub fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        (e as u32 - 1) << 23
    };
    f32::from_bits(bits)
}

/// The 32 codes' doubled values in element order (low nibbles, then high nibbles).
#[inline]
pub fn unpack(b: &BlockMxfp4) -> [i8; QK] {
    let mut q = [0i8; QK];
    for j in 0..QK / 2 {
        q[j] = KVALUES[(b.qs[j] & 0x0F) as usize];
        q[j + QK / 2] = KVALUES[(b.qs[j] >> 4) as usize];
    }
    q
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockMxfp4>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let d = e8m0_half(b.e);
        for (y, q) in y.iter_mut().zip(unpack(b)) {
            *y = q as f32 * d;
        }
    }
}

/// The exponent byte ggml's `quantize_row_mxfp4_ref` picks for a block whose largest magnitude
/// is `amax`: `(uint8_t)(floorf(log2f(amax)) - 2 + 127)`, 0 for an all-zero block.
///
/// `libm::log2f` rounds differently from glibc's in places, but `floorf` of the two is the same
/// for every positive finite float (checked exhaustively once, and near every power of two by
/// `tests::mxfp4_exponent_matches_the_c_library`): both round `log2f` up to `k` for the same
/// few floats just below `2^k`, so the exponent is not simply the float's own.
///
/// The float-to-`uint8_t` conversion is out of range in C for `amax` below 2^-125 (negative)
/// and for an infinite `amax`; this is what ggml built for x86-64 does there (`cvttss2si`,
/// then the low byte): a negative value wraps (2^-149 gives 232) and infinity gives 0.
pub fn exponent(amax: f32) -> u8 {
    if amax <= 0.0 {
        return 0;
    }
    let v = libm::floorf(libm::log2f(amax)) - 2.0 + 127.0;
    if v.is_finite() {
        v as i32 as u8
    } else {
        0
    }
}

/// The code whose value `KVALUES[i] · d` is nearest `x`, the first one on ties (ggml's
/// `best_index_mxfp4`; a NaN `x` gets code 0).
#[inline]
fn best_index(x: f32, d: f32) -> u8 {
    let mut best = 0;
    let mut best_err = libm::fabsf(KVALUES[0] as f32 * d - x);
    for (i, &k) in KVALUES.iter().enumerate().skip(1) {
        let err = libm::fabsf(k as f32 * d - x);
        if err < best_err {
            best = i as u8;
            best_err = err;
        }
    }
    best
}

/// ggml's `quantize_row_mxfp4_ref`: the exponent from the block's largest magnitude (NaNs do
/// not count), then each value's nearest code.
pub fn quantize(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(blocks_mut::<BlockMxfp4>(dst)) {
        let mut amax = 0.0f32;
        for &v in x {
            // `amax < |v|` as in C: false for NaN
            if amax < libm::fabsf(v) {
                amax = libm::fabsf(v);
            }
        }
        b.e = exponent(amax);
        let d = e8m0_half(b.e);
        for j in 0..QK / 2 {
            b.qs[j] = best_index(x[j], d) | (best_index(x[j + QK / 2], d) << 4);
        }
    }
}

/// A block's scale as the dot products apply it: the activation's f16 scale times
/// [`e8m0_half`] (a power of two: exact unless the product leaves the normal range).
#[inline]
pub fn scale(x: &BlockMxfp4, y: &BlockQ8_0) -> f32 {
    h(y.d) * e8m0_half(x.e)
}

/// A block's exact integer dot product `Σ KVALUES[code] · q8` (`sumi1 + sumi2` in ggml).
#[inline]
pub fn isum(x: &BlockMxfp4, y: &BlockQ8_0) -> i32 {
    unpack(x)
        .iter()
        .zip(&y.qs)
        .map(|(&q, &a)| q as i32 * a as i32)
        .sum()
}

/// MXFP4 · Q8_0, ggml's `ggml_vec_dot_mxfp4_q8_0_generic` bit for bit: per block the exact
/// integer sum, then `sum += d · isum` block after block, rounded twice as C without
/// contraction rounds it (`-ffp-contract=off`; checked once on 1,800 rows against the C).
/// A C compiler that fuses that line into an FMA (GCC's default for GNU C where the target has
/// FMA) can differ from this in the last bit.
pub fn vec_dot_mxfp4_q8_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockMxfp4>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        sum += scale(x, y) * isum(x, y) as f32;
    }
    sum
}
