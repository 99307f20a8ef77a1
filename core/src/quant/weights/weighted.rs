//! ggml's quantizers with an importance matrix (`quantize_row_*_impl` with
//! `quant_weights`), one row at a time: `qw` holds one weight per column of the row (the
//! mean squared activation of that column, from llama-imatrix). Types without an importance
//! path here are refused by [`super::supports_imatrix`].

use super::kquants::{final_quants_sub32, finish_q6_k, pack_q4_k, pack_q5_k, pack_sub32};
use super::search::{make_qkx3_quants, make_qp_quants, make_qx_quants};
use crate::quant::kquants::{q4_k::BlockQ4K, q5_k::BlockQ5K, q6_k::BlockQ6K, QK_K};
use crate::quant::legacy::{to_h, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, QK};

/// The row's mean square (`sigma2` of the 32-element formats).
fn sigma2_of_row(x: &[f32]) -> f32 {
    let mut sum_x2 = 0.0f32;
    for &v in x {
        sum_x2 += v * v;
    }
    sum_x2 / x.len() as f32
}

fn block_weights(xb: &[f32], qw: &[f32], sigma2: f32) -> [f32; QK] {
    core::array::from_fn(|j| qw[j] * libm::sqrtf(sigma2 + xb[j] * xb[j]))
}

fn pack_5bit(l: &[u8; QK], qs: &mut [u8; 16], qh_out: &mut [u8; 4]) {
    let mut qh = 0u32;
    for j in 0..16 {
        let (xi0, xi1) = (l[j], l[j + 16]);
        qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
        qh |= (((xi0 & 0x10) >> 4) as u32) << j;
        qh |= (((xi1 & 0x10) >> 4) as u32) << (j + 16);
    }
    *qh_out = qh.to_le_bytes();
}

pub fn quantize_q4_0(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let sigma2 = sigma2_of_row(x);
    let blocks = bytemuck::cast_slice_mut::<u8, BlockQ4_0>(dst);
    for (ib, y) in blocks.iter_mut().enumerate() {
        let xb = &x[QK * ib..QK * ib + QK];
        let w = block_weights(xb, &qw[QK * ib..], sigma2);
        let mut l = [0i8; QK];
        let d = make_qx_quants(xb, 8, &mut l, 1, Some(&w));
        y.d = to_h(d);
        for j in 0..16 {
            y.qs[j] = (l[j] as u8) | ((l[j + 16] as u8) << 4);
        }
    }
}

pub fn quantize_q5_0(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let sigma2 = sigma2_of_row(x);
    let blocks = bytemuck::cast_slice_mut::<u8, BlockQ5_0>(dst);
    for (ib, y) in blocks.iter_mut().enumerate() {
        let xb = &x[QK * ib..QK * ib + QK];
        let w = block_weights(xb, &qw[QK * ib..], sigma2);
        let mut l = [0i8; QK];
        let d = make_qx_quants(xb, 16, &mut l, 1, Some(&w));
        y.d = to_h(d);
        let lu: [u8; QK] = core::array::from_fn(|j| l[j] as u8);
        pack_5bit(&lu, &mut y.qs, &mut y.qh);
    }
}

/// Q4_1 / Q5_1: the affine search with weights; returns (d, min) per block.
fn affine_block(xb: &[f32], w: &[f32; QK], nmax: i32, l: &mut [u8; QK]) -> (f32, f32) {
    let mut laux = [0u8; QK];
    make_qkx3_quants(xb, nmax, Some(w), l, &mut laux, -0.9, 0.05, 36, false)
}

pub fn quantize_q4_1(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let sigma2 = sigma2_of_row(x);
    let blocks = bytemuck::cast_slice_mut::<u8, BlockQ4_1>(dst);
    for (ib, y) in blocks.iter_mut().enumerate() {
        let xb = &x[QK * ib..QK * ib + QK];
        let w = block_weights(xb, &qw[QK * ib..], sigma2);
        let mut l = [0u8; QK];
        let (d, min) = affine_block(xb, &w, 15, &mut l);
        y.d = to_h(d);
        y.m = to_h(-min);
        for j in 0..16 {
            y.qs[j] = l[j] | (l[j + 16] << 4);
        }
    }
}

pub fn quantize_q5_1(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let sigma2 = sigma2_of_row(x);
    let blocks = bytemuck::cast_slice_mut::<u8, BlockQ5_1>(dst);
    for (ib, y) in blocks.iter_mut().enumerate() {
        let xb = &x[QK * ib..QK * ib + QK];
        let w = block_weights(xb, &qw[QK * ib..], sigma2);
        let mut l = [0u8; QK];
        let (d, min) = affine_block(xb, &w, 31, &mut l);
        y.d = to_h(d);
        y.m = to_h(-min);
        pack_5bit(&l, &mut y.qs, &mut y.qh);
    }
}

/// Q4_K / Q5_K's weighted part: per 32 elements an affine search weighted by
/// `qw · sqrt(sigma2 + x²)`, then the scales and mins themselves quantized to six bits by
/// `make_qp_quants` weighted by each sub-block's total weight.
/// (`clamp`: Q5_K caps the six-bit scales at 63, Q4_K stores `make_qp_quants`' as they are.)
fn sub32_weighted(
    x: &[f32],
    qw: &[f32],
    nmax: i32,
    clamp: bool,
) -> ([u8; 12], [u8; 2], [u8; 2], [u8; QK_K]) {
    let mut l = [0u8; QK_K];
    let mut laux = [0u8; 32];
    let mut sw = [0f32; 8];
    let mut mins = [0f32; 8];
    let mut scales = [0f32; 8];
    let mut sum_x2 = 0.0f32;
    for &v in x {
        sum_x2 += v * v;
    }
    let sigma2 = 2.0 * sum_x2 / QK_K as f32;
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let w: [f32; 32] =
            core::array::from_fn(|k| qw[32 * j + k] * libm::sqrtf(sigma2 + xs[k] * xs[k]));
        let mut sumw = 0.0f32;
        for &v in &w {
            sumw += v;
        }
        sw[j] = sumw;
        let (s, m) = make_qkx3_quants(
            xs,
            nmax,
            Some(&w),
            &mut l[32 * j..32 * j + 32],
            &mut laux,
            -0.9,
            0.05,
            36,
            false,
        );
        scales[j] = s;
        mins[j] = m;
    }
    let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
    let d_block = make_qp_quants(&scales, 63, &mut ls, &sw);
    let m_block = make_qp_quants(&mins, 63, &mut lm, &sw);
    let (ls, lm) = if clamp {
        (ls.map(|v| v.min(63)), lm.map(|v| v.min(63)))
    } else {
        (ls, lm)
    };
    let packed = pack_sub32(&ls, &lm);
    let (dh, dminh) = (to_h(d_block), to_h(m_block));
    final_quants_sub32(x, &packed, dh, dminh, nmax, &mut l);
    (packed, dh, dminh, l)
}

pub fn quantize_q4_k(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let blocks = bytemuck::cast_slice_mut::<u8, BlockQ4K>(dst);
    for (i, y) in blocks.iter_mut().enumerate() {
        let xb = &x[QK_K * i..QK_K * i + QK_K];
        let (scales, d, dmin, l) = sub32_weighted(xb, &qw[QK_K * i..], 15, false);
        y.scales = scales;
        y.d = d;
        y.dmin = dmin;
        pack_q4_k(y, &l);
    }
}

pub fn quantize_q5_k(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let blocks = bytemuck::cast_slice_mut::<u8, BlockQ5K>(dst);
    for (i, y) in blocks.iter_mut().enumerate() {
        let xb = &x[QK_K * i..QK_K * i + QK_K];
        let (scales, d, dmin, l) = sub32_weighted(xb, &qw[QK_K * i..], 31, true);
        y.scales = scales;
        y.d = d;
        y.dmin = dmin;
        pack_q5_k(y, &l);
    }
}

pub fn quantize_q6_k(x: &[f32], dst: &mut [u8], qw: &[f32]) {
    let blocks = bytemuck::cast_slice_mut::<u8, BlockQ6K>(dst);
    for (i, y) in blocks.iter_mut().enumerate() {
        let xb = &x[QK_K * i..QK_K * i + QK_K];
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        for ib in 0..QK_K / 16 {
            let w = &qw[QK_K * i + 16 * ib..QK_K * i + 16 * ib + 16];
            let s = make_qx_quants(
                &xb[16 * ib..16 * ib + 16],
                32,
                &mut l[16 * ib..16 * ib + 16],
                1,
                Some(w),
            );
            scales[ib] = s;
            let a = libm::fabsf(s);
            if a > max_abs_scale {
                max_abs_scale = a;
                max_scale = s;
            }
        }
        finish_q6_k(xb, y, &scales, max_scale, max_abs_scale, &mut l);
    }
}
