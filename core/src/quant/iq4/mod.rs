//! The 4-bit non-linear formats IQ4_NL and IQ4_XS (ggml-common.h `block_iq4_nl`,
//! `block_iq4_xs`): 4-bit codes into the 16-entry table [`KVALUES`] (ggml's `kvalues_iq4nl`),
//! element `j` of a 32-value block in the low nibble of byte `j`, element `j + 16` in its high
//! nibble, as in Q4_0.
//!
//! - [`nl`]: IQ4_NL, blocks of 32 with one f16 scale (18 bytes), dotted with Q8_0 like Q4_0
//!   and MXFP4;
//! - [`xs`]: IQ4_XS, super-blocks of 256 with an f16 scale and a 6-bit scale per 32 values
//!   (136 bytes), dotted with Q8_K like the k-quants.
//!
//! Both quantizers are ggml's `quantize_row_iq4_nl_impl` without an importance matrix (what
//! `llama-quantize` runs without `--imatrix`), in `quantize_impl`.

pub mod nl;
pub mod xs;

use super::kquants::nearest_int;

/// ggml's `kvalues_iq4nl`: the value of each code, ascending.
pub const KVALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// A block's 32 codes' values in element order (low nibbles, then high nibbles).
#[inline]
pub fn unpack32(qs: &[u8; 16]) -> [i8; 32] {
    let mut q = [0i8; 32];
    for j in 0..16 {
        q[j] = KVALUES[(qs[j] & 0x0F) as usize];
        q[j + 16] = KVALUES[(qs[j] >> 4) as usize];
    }
    q
}

/// `Σ KVALUES[code] · q8` over one 32-value block (exact).
#[inline]
pub fn isum32(qs: &[u8; 16], q8: &[i8]) -> i32 {
    let mut s = 0i32;
    for j in 0..16 {
        s += KVALUES[(qs[j] & 0x0F) as usize] as i32 * q8[j] as i32;
        s += KVALUES[(qs[j] >> 4) as usize] as i32 * q8[j + 16] as i32;
    }
    s
}

/// ggml's `best_index_int8` over [`KVALUES`]: the nearest value's code, the upper one on a
/// tie (a NaN `x` gets the top code, as the C comparisons give it).
#[inline]
fn best_index(x: f32) -> u8 {
    let v = |i: usize| KVALUES[i] as f32;
    if x <= v(0) {
        return 0;
    }
    if x >= v(15) {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < v(mav) {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - v(mu - 1) < v(mu) - x {
        (mu - 1) as u8
    } else {
        mu as u8
    }
}

/// ggml's `GROUP_MAX_EPS`: a block whose largest magnitude is below it gets scale 0.
const GROUP_MAX_EPS: f32 = 1e-15;

/// The packed result of [`quantize_impl`] for one super-block of `x.len()` values.
pub(crate) struct Quantized {
    /// The f32 super-block scale (stored as f16 by the caller).
    pub d: f32,
    /// 6-bit block scales biased by 32 (IQ4_XS; unused for one block).
    pub scales: [u8; 8],
    /// Packed codes, 16 bytes per 32 values.
    pub qs: [u8; 128],
}

/// ggml's `quantize_row_iq4_nl_impl` with no importance weights and `ntry` = 7 (what
/// `quantize_iq4_nl` / `quantize_iq4_xs` run): per block of 32 the scale that minimises the
/// `x²`-weighted error over 15 candidate scales; with several blocks (IQ4_XS) the block scales
/// are then quantized to 6 bits against the super-block scale `-max_scale / 32` and the codes
/// chosen again for them. Floats are summed in ggml's order without contraction into FMAs.
pub(crate) fn quantize_impl(x: &[f32]) -> Quantized {
    const NTRY: i32 = 7;
    let n = x.len();
    let nblocks = n / 32;
    let mut out = Quantized {
        d: 0.0,
        scales: [0; 8],
        qs: [0; 128],
    };
    let mut l = [0u8; 256];
    let mut scales = [0.0f32; 8];
    let (mut max_scale, mut amax_scale) = (0.0f32, 0.0f32);
    let v0 = KVALUES[0] as f32;
    for ib in 0..nblocks {
        let xb = &x[32 * ib..32 * ib + 32];
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in xb {
            let ax = libm::fabsf(v);
            if ax > amax {
                amax = ax;
                max = v;
            }
        }
        if amax < GROUP_MAX_EPS {
            scales[ib] = 0.0;
            continue;
        }
        let mut d = -max / v0;
        let mut id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for &v in xb {
            // (ggml keeps these codes, but both branches below choose every code again)
            let q = KVALUES[best_index(id * v) as usize] as f32;
            let w = v * v;
            sumqx += w * q * v;
            sumq2 += w * q * q;
        }
        d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
        let mut best = d * sumqx;
        for itry in -NTRY..=NTRY {
            id = (itry as f32 + v0) / max;
            sumqx = 0.0;
            sumq2 = 0.0;
            for &v in xb {
                let q = KVALUES[best_index(id * v) as usize] as f32;
                let w = v * v;
                sumqx += w * q * v;
                sumq2 += w * q * q;
            }
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if libm::fabsf(d) > amax_scale {
            amax_scale = libm::fabsf(d);
            max_scale = d;
        }
    }
    if nblocks > 1 {
        let d = -max_scale / 32.0;
        // the block scales are quantized against the f32 `d`; the block stores it as f16
        out.d = d;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for ib in 0..nblocks {
            let ls = nearest_int(id * scales[ib]).clamp(-32, 31);
            let dl = d * ls as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for j in 0..32 {
                l[32 * ib + j] = best_index(idl * x[32 * ib + j]);
            }
            out.scales[ib] = (ls + 32) as u8;
        }
    } else {
        out.d = scales[0];
        let id = if scales[0] != 0.0 {
            1.0 / scales[0]
        } else {
            0.0
        };
        for j in 0..n {
            l[j] = best_index(id * x[j]);
        }
    }
    for i in 0..nblocks {
        for j in 0..16 {
            out.qs[16 * i + j] = l[32 * i + j] | (l[32 * i + 16 + j] << 4);
        }
    }
    out
}
