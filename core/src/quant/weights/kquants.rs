//! ggml's reference k-quant quantizers (`quantize_row_q{2,3,4,5,6}_K_ref`), which
//! `ggml_quantize_chunk` runs when no importance matrix is given: the scale searches of
//! [`super::search`], then the same rounding (`nearest_int(x / d)`) and bit packing.
//! (Index loops on purpose: they follow ggml's C loop for loop, which is what makes the
//! float operations happen in the same order.)
#![allow(clippy::needless_range_loop)]

use super::search::{make_q3_quants, make_qkx2_quants, make_qx_quants, nearest_int, GROUP_MAX_EPS};
use crate::quant::kquants::{q2_k::BlockQ2K, q3_k::BlockQ3K, q4_k::BlockQ4K, q5_k::BlockQ5K};
use crate::quant::kquants::{q6_k::BlockQ6K, scale_min_k4, QK_K};
use crate::quant::legacy::{h, to_h};

fn blocks<'a, B: bytemuck::Pod>(
    src: &'a [f32],
    dst: &'a mut [u8],
) -> impl Iterator<Item = (&'a [f32], &'a mut B)> {
    src.chunks_exact(QK_K)
        .zip(bytemuck::cast_slice_mut::<u8, B>(dst))
}

pub fn quantize_q2_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in blocks::<BlockQ2K>(src, dst) {
        let mut l = [0u8; QK_K];
        let mut laux = [0u8; 16];
        let mut weights = [0f32; 16];
        let mut mins = [0f32; QK_K / 16];
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            for (w, &v) in weights.iter_mut().zip(xs) {
                *w = libm::fabsf(v);
            }
            let (s, m) = make_qkx2_quants(
                xs,
                3,
                &weights,
                &mut l[16 * j..16 * j + 16],
                &mut laux,
                -0.5,
                0.1,
                15,
                true,
            );
            scales[j] = s;
            mins[j] = m;
            if s > max_scale {
                max_scale = s;
            }
            if m > max_min {
                max_min = m;
            }
        }
        if max_scale > 0.0 {
            let iscale = 15.0 / max_scale;
            for j in 0..QK_K / 16 {
                y.scales[j] = nearest_int(iscale * scales[j]) as u8;
            }
            y.d = to_h(max_scale / 15.0);
        } else {
            y.scales = [0; QK_K / 16];
            y.d = to_h(0.0);
        }
        if max_min > 0.0 {
            let iscale = 15.0 / max_min;
            for j in 0..QK_K / 16 {
                let m = nearest_int(iscale * mins[j]);
                y.scales[j] |= (m << 4) as u8;
            }
            y.dmin = to_h(max_min / 15.0);
        } else {
            y.dmin = to_h(0.0);
        }
        for j in 0..QK_K / 16 {
            let d = h(y.d) * (y.scales[j] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = h(y.dmin) * (y.scales[j] >> 4) as f32;
            for ii in 0..16 {
                l[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
            }
        }
        for j in (0..QK_K).step_by(128) {
            for k in 0..32 {
                y.qs[j / 4 + k] =
                    l[j + k] | (l[j + k + 32] << 2) | (l[j + k + 64] << 4) | (l[j + k + 96] << 6);
            }
        }
    }
}

pub fn quantize_q3_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in blocks::<BlockQ3K>(src, dst) {
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut amax) = (0.0f32, 0.0f32);
        for j in 0..QK_K / 16 {
            scales[j] = make_q3_quants(
                &x[16 * j..16 * j + 16],
                4,
                &mut l[16 * j..16 * j + 16],
                true,
            );
            let scale = libm::fabsf(scales[j]);
            if scale > amax {
                amax = scale;
                max_scale = scales[j];
            }
        }
        y.scales = [0; 12];
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for j in 0..QK_K / 16 {
                let v = nearest_int(iscale * scales[j]) as i8;
                let v = (v.clamp(-32, 31) + 32) as u8;
                if j < 8 {
                    y.scales[j] = v & 0xF;
                } else {
                    y.scales[j - 8] |= (v & 0xF) << 4;
                }
                y.scales[j % 4 + 8] |= (v >> 4) << (2 * (j / 4));
            }
            y.d = to_h(1.0 / iscale);
        } else {
            y.d = to_h(0.0);
        }
        for j in 0..QK_K / 16 {
            let low = if j < 8 {
                y.scales[j] & 0xF
            } else {
                y.scales[j - 8] >> 4
            };
            let sc = (low | (((y.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i32 - 32;
            let d = h(y.d) * sc as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let q = nearest_int(x[16 * j + ii] / d).clamp(-4, 3);
                l[16 * j + ii] = (q + 4) as i8;
            }
        }
        y.hmask = [0; QK_K / 8];
        let (mut m, mut hm) = (0usize, 1u8);
        for q in l.iter_mut() {
            if *q > 3 {
                y.hmask[m] |= hm;
                *q -= 4;
            }
            m += 1;
            if m == QK_K / 8 {
                m = 0;
                hm <<= 1;
            }
        }
        for j in (0..QK_K).step_by(128) {
            for k in 0..32 {
                let p = |o: usize| l[j + k + o] as u8;
                y.qs[j / 4 + k] = p(0) | (p(32) << 2) | (p(64) << 4) | (p(96) << 6);
            }
        }
    }
}

/// Q4_K / Q5_K's shared part: per 32 elements a weighted affine search, then 6-bit scales
/// and mins, then the final quants in `[0, nmax]`. Returns (packed scales, d, dmin, quants).
fn quantize_sub32(
    x: &[f32],
    nmax: i32,
    rmin: f32,
    nstep: i32,
) -> ([u8; 12], [u8; 2], [u8; 2], [u8; QK_K]) {
    let mut l = [0u8; QK_K];
    let mut laux = [0u8; 32];
    let mut weights = [0f32; 32];
    let mut mins = [0f32; QK_K / 32];
    let mut scales = [0f32; QK_K / 32];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..QK_K / 32 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = libm::sqrtf(sum_x2 / 32.0);
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + libm::fabsf(v);
        }
        let (s, m) = make_qkx2_quants(
            xs,
            nmax,
            &weights,
            &mut l[32 * j..32 * j + 32],
            &mut laux,
            rmin,
            0.1,
            nstep,
            false,
        );
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let ls: [u8; 8] = core::array::from_fn(|j| (nearest_int(inv_scale * scales[j]) as u8).min(63));
    let lm: [u8; 8] = core::array::from_fn(|j| (nearest_int(inv_min * mins[j]) as u8).min(63));
    let packed = pack_sub32(&ls, &lm);
    let dh = to_h(max_scale / 63.0);
    let dminh = to_h(max_min / 63.0);
    final_quants_sub32(x, &packed, dh, dminh, nmax, &mut l);
    (packed, dh, dminh, l)
}

/// The quants of Q4_K / Q5_K once the packed scales and super-scales are fixed (a
/// sub-block whose scale is 0 keeps the search's quants, as ggml).
pub(super) fn final_quants_sub32(
    x: &[f32],
    packed: &[u8; 12],
    dh: [u8; 2],
    dminh: [u8; 2],
    nmax: i32,
    l: &mut [u8; QK_K],
) {
    for j in 0..QK_K / 32 {
        let (sc, m) = scale_min_k4(j, packed);
        let d = h(dh) * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = h(dminh) * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / d).clamp(0, nmax) as u8;
        }
    }
}

/// Packs six-bit scales and mins as Q4_K / Q5_K store them.
pub(super) fn pack_sub32(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; 12] {
    let mut packed = [0u8; 12];
    for j in 0..QK_K / 32 {
        let (ls, lm) = (ls[j], lm[j]);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    packed
}

pub fn quantize_q4_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in blocks::<BlockQ4K>(src, dst) {
        let (scales, d, dmin, l) = quantize_sub32(x, 15, -1.0, 20);
        y.scales = scales;
        y.d = d;
        y.dmin = dmin;
        pack_q4_k(y, &l);
    }
}

pub(super) fn pack_q4_k(y: &mut BlockQ4K, l: &[u8; QK_K]) {
    for (n, j) in (0..QK_K).step_by(64).enumerate() {
        for k in 0..32 {
            y.qs[32 * n + k] = l[j + k] | (l[j + k + 32] << 4);
        }
    }
}

pub fn quantize_q5_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in blocks::<BlockQ5K>(src, dst) {
        let (scales, d, dmin, l) = quantize_sub32(x, 31, -0.5, 15);
        y.scales = scales;
        y.d = d;
        y.dmin = dmin;
        pack_q5_k(y, &l);
    }
}

pub(super) fn pack_q5_k(y: &mut BlockQ5K, l: &[u8; QK_K]) {
    {
        y.qh = [0; QK_K / 8];
        let (mut m1, mut m2) = (1u8, 2u8);
        for (nb, n) in (0..QK_K).step_by(64).enumerate() {
            for j in 0..32 {
                let mut l1 = l[n + j];
                if l1 > 15 {
                    l1 -= 16;
                    y.qh[j] |= m1;
                }
                let mut l2 = l[n + j + 32];
                if l2 > 15 {
                    l2 -= 16;
                    y.qh[j] |= m2;
                }
                y.qs[32 * nb + j] = l1 | (l2 << 4);
            }
            m1 = m1.wrapping_shl(2);
            m2 = m2.wrapping_shl(2);
        }
    }
}

pub fn quantize_q6_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in blocks::<BlockQ6K>(src, dst) {
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        for ib in 0..QK_K / 16 {
            let s = make_qx_quants(
                &x[16 * ib..16 * ib + 16],
                32,
                &mut l[16 * ib..16 * ib + 16],
                1,
                None,
            );
            scales[ib] = s;
            let a = libm::fabsf(s);
            if a > max_abs_scale {
                max_abs_scale = a;
                max_scale = s;
            }
        }
        finish_q6_k(x, y, &scales, max_scale, max_abs_scale, &mut l);
    }
}

/// Q6_K once each 16-element group has its scale and search quants: the int8 scales, the
/// final quants, the bit packing.
pub(super) fn finish_q6_k(
    x: &[f32],
    y: &mut BlockQ6K,
    scales: &[f32; QK_K / 16],
    max_scale: f32,
    max_abs_scale: f32,
    l: &mut [i8; QK_K],
) {
    {
        if max_abs_scale < GROUP_MAX_EPS {
            *y = bytemuck::Zeroable::zeroed();
            y.d = to_h(0.0);
            return;
        }
        let iscale = -128.0 / max_scale;
        y.d = to_h(1.0 / iscale);
        for ib in 0..QK_K / 16 {
            y.scales[ib] = nearest_int(iscale * scales[ib]).min(127) as i8;
        }
        for j in 0..QK_K / 16 {
            let d = h(y.d) * y.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let q = nearest_int(x[16 * j + ii] / d).clamp(-32, 31);
                l[16 * j + ii] = (q + 32) as i8;
            }
        }
        for (nb, j) in (0..QK_K).step_by(128).enumerate() {
            let (ql, qh) = (
                &mut y.ql[64 * nb..64 * nb + 64],
                &mut y.qh[32 * nb..32 * nb + 32],
            );
            for k in 0..32 {
                let p = |o: usize| l[j + k + o] as u8;
                ql[k] = (p(0) & 0xF) | ((p(64) & 0xF) << 4);
                ql[k + 32] = (p(32) & 0xF) | ((p(96) & 0xF) << 4);
                qh[k] =
                    (p(0) >> 4) | ((p(32) >> 4) << 2) | ((p(64) >> 4) << 4) | ((p(96) >> 4) << 6);
            }
        }
    }
}
