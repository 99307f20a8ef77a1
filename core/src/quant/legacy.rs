//! The 32-element "legacy" formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 (ggml-common.h).
//! All blocks have alignment 1, so any byte slice of whole blocks can be viewed as blocks.

use bytemuck::{Pod, Zeroable};
use half::f16;

pub const QK: usize = 32;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4_0 {
    pub d: [u8; 2],
    pub qs: [u8; QK / 2],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4_1 {
    pub d: [u8; 2],
    pub m: [u8; 2],
    pub qs: [u8; QK / 2],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5_0 {
    pub d: [u8; 2],
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5_1 {
    pub d: [u8; 2],
    pub m: [u8; 2],
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ8_0 {
    pub d: [u8; 2],
    pub qs: [i8; QK],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockQ8_1 {
    pub d: [u8; 2],
    /// d * sum(qs)
    pub s: [u8; 2],
    pub qs: [i8; QK],
}

const _: () = assert!(core::mem::size_of::<BlockQ4_0>() == 18);
const _: () = assert!(core::mem::size_of::<BlockQ4_1>() == 20);
const _: () = assert!(core::mem::size_of::<BlockQ5_0>() == 22);
const _: () = assert!(core::mem::size_of::<BlockQ5_1>() == 24);
const _: () = assert!(core::mem::size_of::<BlockQ8_0>() == 34);
const _: () = assert!(core::mem::size_of::<BlockQ8_1>() == 36);

#[inline]
pub fn h(b: [u8; 2]) -> f32 {
    f16::from_le_bytes(b).to_f32()
}

#[inline]
pub fn to_h(x: f32) -> [u8; 2] {
    f16::from_f32(x).to_le_bytes()
}

/// Blocks of a byte slice (the caller has checked the length is a whole number of blocks).
#[inline]
pub fn blocks<B: Pod>(bytes: &[u8]) -> &[B] {
    bytemuck::cast_slice(bytes)
}

#[inline]
pub fn blocks_mut<B: Pod>(bytes: &mut [u8]) -> &mut [B] {
    bytemuck::cast_slice_mut(bytes)
}

// ---- unpacking to integer quants (shared by dequantize and dot) ----

/// Q4_0 quants in [-8, 7], element order.
#[inline]
pub fn unpack_q4_0(b: &BlockQ4_0) -> [i8; QK] {
    let mut q = [0i8; QK];
    for j in 0..QK / 2 {
        q[j] = (b.qs[j] & 0x0F) as i8 - 8;
        q[j + QK / 2] = (b.qs[j] >> 4) as i8 - 8;
    }
    q
}

#[inline]
fn unpack_nibbles(qs: &[u8; QK / 2]) -> [u8; QK] {
    let mut q = [0u8; QK];
    for j in 0..QK / 2 {
        q[j] = qs[j] & 0x0F;
        q[j + QK / 2] = qs[j] >> 4;
    }
    q
}

/// 5-bit quants in [0, 31] (the high bit from `qh`).
#[inline]
fn unpack_5bit(qh: [u8; 4], qs: &[u8; QK / 2]) -> [u8; QK] {
    let qh = u32::from_le_bytes(qh);
    let mut q = unpack_nibbles(qs);
    for j in 0..QK / 2 {
        q[j] |= (((qh >> j) << 4) & 0x10) as u8;
        q[j + QK / 2] |= ((qh >> (j + 12)) & 0x10) as u8;
    }
    q
}

// ---- dequantize ----

pub fn dequantize_q4_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ4_0>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let d = h(b.d);
        for (y, q) in y.iter_mut().zip(unpack_q4_0(b)) {
            *y = q as f32 * d;
        }
    }
}

pub fn dequantize_q4_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ4_1>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let (d, m) = (h(b.d), h(b.m));
        for (y, q) in y.iter_mut().zip(unpack_nibbles(&b.qs)) {
            *y = q as f32 * d + m;
        }
    }
}

pub fn dequantize_q5_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ5_0>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let d = h(b.d);
        for (y, q) in y.iter_mut().zip(unpack_5bit(b.qh, &b.qs)) {
            *y = (q as i32 - 16) as f32 * d;
        }
    }
}

pub fn dequantize_q5_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ5_1>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let (d, m) = (h(b.d), h(b.m));
        for (y, q) in y.iter_mut().zip(unpack_5bit(b.qh, &b.qs)) {
            *y = q as f32 * d + m;
        }
    }
}

pub fn dequantize_q8_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ8_0>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let d = h(b.d);
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = q as f32 * d;
        }
    }
}

pub fn dequantize_q8_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ8_1>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let d = h(b.d);
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = q as f32 * d;
        }
    }
}

// ---- quantize ----
//
// Weight formats follow ggml's `quantize_row_*_ref`. The activation formats Q8_0 and Q8_1
// follow ggml's SIMD quantizers (x86 and ARM), which are what llama.cpp runs: `id = 127/amax`
// and round-to-nearest-even (the plain-C reference differs in the last bit on ties).

/// The value of largest magnitude, with its sign (the first one on ties).
pub(crate) fn signed_absmax(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if libm::fabsf(v) > amax {
            amax = libm::fabsf(v);
            max = v;
        }
    }
    max
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter()
        .fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

fn inv(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

pub fn quantize_q4_0(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(blocks_mut::<BlockQ4_0>(dst)) {
        let d = signed_absmax(x) / -8.0;
        let id = inv(d);
        b.d = to_h(d);
        for j in 0..QK / 2 {
            let q0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
            let q1 = ((x[j + QK / 2] * id + 8.5) as i8).min(15) as u8;
            b.qs[j] = q0 | (q1 << 4);
        }
    }
}

pub fn quantize_q4_1(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(blocks_mut::<BlockQ4_1>(dst)) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inv(d);
        b.d = to_h(d);
        b.m = to_h(min);
        for j in 0..QK / 2 {
            let q0 = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
            let q1 = (((x[j + QK / 2] - min) * id + 0.5) as i8).min(15) as u8;
            b.qs[j] = q0 | (q1 << 4);
        }
    }
}

fn pack_5bit(q: &[u8; QK], qh: &mut [u8; 4], qs: &mut [u8; QK / 2]) {
    let mut h = 0u32;
    for j in 0..QK / 2 {
        let (q0, q1) = (q[j], q[j + QK / 2]);
        qs[j] = (q0 & 0x0F) | ((q1 & 0x0F) << 4);
        h |= (((q0 & 0x10) >> 4) as u32) << j;
        h |= (((q1 & 0x10) >> 4) as u32) << (j + QK / 2);
    }
    *qh = h.to_le_bytes();
}

pub fn quantize_q5_0(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(blocks_mut::<BlockQ5_0>(dst)) {
        let d = signed_absmax(x) / -16.0;
        let id = inv(d);
        b.d = to_h(d);
        let mut q = [0u8; QK];
        for (q, &v) in q.iter_mut().zip(x) {
            *q = ((v * id + 16.5) as i8).min(31) as u8;
        }
        pack_5bit(&q, &mut b.qh, &mut b.qs);
    }
}

pub fn quantize_q5_1(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(blocks_mut::<BlockQ5_1>(dst)) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inv(d);
        b.d = to_h(d);
        b.m = to_h(min);
        let mut q = [0u8; QK];
        for (q, &v) in q.iter_mut().zip(x) {
            *q = (((v - min) * id + 0.5) as i8).min(31) as u8;
        }
        pack_5bit(&q, &mut b.qh, &mut b.qs);
    }
}

fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |m, &v| m.max(libm::fabsf(v)))
}

pub fn quantize_q8_0(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(blocks_mut::<BlockQ8_0>(dst)) {
        let amax = amax(x);
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b.d = to_h(d);
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = crate::quant::kquants::nearest_int(v * id) as i8;
        }
    }
}

pub fn quantize_q8_1(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(blocks_mut::<BlockQ8_1>(dst)) {
        let amax = amax(x);
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b.d = to_h(d);
        let mut sum = 0i32;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = crate::quant::kquants::nearest_int(v * id) as i8;
            sum += *q as i32;
        }
        b.s = to_h(sum as f32 * d);
    }
}

// ---- dot products against Q8_0 / Q8_1 activations ----

fn isum(a: &[i8; QK], b: &[i8; QK]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
}

fn usum(a: &[u8; QK], b: &[i8; QK]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
}

pub fn vec_dot_q4_0_q8_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ4_0>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        sum += isum(&unpack_q4_0(x), &y.qs) as f32 * (h(x.d) * h(y.d));
    }
    sum
}

pub fn vec_dot_q4_1_q8_1(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ4_1>(w).iter().zip(blocks::<BlockQ8_1>(a)) {
        sum += usum(&unpack_nibbles(&x.qs), &y.qs) as f32 * (h(x.d) * h(y.d)) + h(x.m) * h(y.s);
    }
    sum
}

pub fn vec_dot_q5_0_q8_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ5_0>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        let q = unpack_5bit(x.qh, &x.qs);
        let s: i32 = q
            .iter()
            .zip(&y.qs)
            .map(|(&q, &a)| (q as i32 - 16) * a as i32)
            .sum();
        sum += s as f32 * (h(x.d) * h(y.d));
    }
    sum
}

pub fn vec_dot_q5_1_q8_1(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ5_1>(w).iter().zip(blocks::<BlockQ8_1>(a)) {
        sum += usum(&unpack_5bit(x.qh, &x.qs), &y.qs) as f32 * (h(x.d) * h(y.d)) + h(x.m) * h(y.s);
    }
    sum
}

pub fn vec_dot_q8_0_q8_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockQ8_0>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        sum += isum(&x.qs, &y.qs) as f32 * (h(x.d) * h(y.d));
    }
    sum
}
