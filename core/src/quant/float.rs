//! Unquantized element types: F32, F16, BF16 (one element per "block").

use half::{bf16, f16};

pub fn dequantize_f32(src: &[u8], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    }
}

pub fn dequantize_f16(src: &[u8], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *d = f16::from_le_bytes([s[0], s[1]]).to_f32();
    }
}

pub fn dequantize_bf16(src: &[u8], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *d = bf16::from_le_bytes([s[0], s[1]]).to_f32();
    }
}

pub fn quantize_f32(src: &[f32], dst: &mut [u8]) {
    for (d, s) in dst.chunks_exact_mut(4).zip(src) {
        d.copy_from_slice(&s.to_le_bytes());
    }
}

pub fn quantize_f16(src: &[f32], dst: &mut [u8]) {
    for (d, s) in dst.chunks_exact_mut(2).zip(src) {
        d.copy_from_slice(&f16::from_f32(*s).to_le_bytes());
    }
}

pub fn quantize_bf16(src: &[f32], dst: &mut [u8]) {
    for (d, s) in dst.chunks_exact_mut(2).zip(src) {
        d.copy_from_slice(&bf16::from_f32(*s).to_le_bytes());
    }
}

/// F32 · F32, accumulated in f32 (as ggml_vec_dot_f32's scalar path).
pub fn vec_dot_f32(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in w.chunks_exact(4).zip(a.chunks_exact(4)).take(n) {
        sum += f32::from_le_bytes([x[0], x[1], x[2], x[3]])
            * f32::from_le_bytes([y[0], y[1], y[2], y[3]]);
    }
    sum
}

/// F16 · F16 with the products summed in f64 (ggml_vec_dot_f16's scalar path).
pub fn vec_dot_f16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f64;
    for (x, y) in w.chunks_exact(2).zip(a.chunks_exact(2)).take(n) {
        sum += (f16::from_le_bytes([x[0], x[1]]).to_f32()
            * f16::from_le_bytes([y[0], y[1]]).to_f32()) as f64;
    }
    sum as f32
}

/// BF16 · BF16 with the products summed in f64.
pub fn vec_dot_bf16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f64;
    for (x, y) in w.chunks_exact(2).zip(a.chunks_exact(2)).take(n) {
        sum += (bf16::from_le_bytes([x[0], x[1]]).to_f32()
            * bf16::from_le_bytes([y[0], y[1]]).to_f32()) as f64;
    }
    sum as f32
}
