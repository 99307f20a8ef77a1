//! ggml's `quantize_row_q{4_1,5_1,8_0}_ref`, expression for expression. (Q4_0 and Q5_0 are
//! [`crate::quant::legacy`]'s; the activation quantizer there for Q8_0 follows ggml's SIMD
//! path instead, which rounds differently from the reference that writes model files.)

use crate::quant::legacy::{to_h, BlockQ4_1, BlockQ5_1, BlockQ8_0, QK};

fn blocks_of<B: bytemuck::Pod>(dst: &mut [u8]) -> &mut [B] {
    bytemuck::cast_slice_mut(dst)
}

/// (min, max) as ggml's loop finds them (`v < min`, `v > max` from ±FLT_MAX).
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

pub fn quantize_q4_1(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK).zip(blocks_of::<BlockQ4_1>(dst)) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = to_h(d);
        y.m = to_h(min);
        for j in 0..QK / 2 {
            let x0 = (x[j] - min) * id;
            let x1 = (x[j + QK / 2] - min) * id;
            let q0 = ((x0 + 0.5) as i8).min(15) as u8;
            let q1 = ((x1 + 0.5) as i8).min(15) as u8;
            y.qs[j] = q0 | (q1 << 4);
        }
    }
}

pub fn quantize_q5_1(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK).zip(blocks_of::<BlockQ5_1>(dst)) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = to_h(d);
        y.m = to_h(min);
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            let q0 = ((x[j] - min) * id + 0.5) as u8;
            let q1 = ((x[j + QK / 2] - min) * id + 0.5) as u8;
            y.qs[j] = (q0 & 0x0F) | ((q1 & 0x0F) << 4);
            qh |= (((q0 & 0x10) >> 4) as u32) << j;
            qh |= (((q1 & 0x10) >> 4) as u32) << (j + QK / 2);
        }
        y.qh = qh.to_le_bytes();
    }
}

pub fn quantize_q8_0(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK).zip(blocks_of::<BlockQ8_0>(dst)) {
        let mut amax = 0.0f32;
        for &v in x {
            let a = libm::fabsf(v);
            amax = if amax > a { amax } else { a };
        }
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        y.d = to_h(d);
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = libm::roundf(v * id) as i8;
        }
    }
}
