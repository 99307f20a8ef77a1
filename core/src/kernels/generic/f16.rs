//! Scalar f16 row primitives (the KV cache's element type): the reference for the SIMD ones.

use half::f16;

use crate::kernels::F16Ops;

pub const OPS: F16Ops = F16Ops {
    dots_f32_f16,
    mad_f16,
    scale_f16,
    mad_f32_f16,
    exp_sub,
    to_f32,
};

/// `dst[i] = f32(src[i])`.
pub fn to_f32(src: &[f16], dst: &mut [f32]) {
    dst.iter_mut().zip(src).for_each(|(d, s)| *d = s.to_f32());
}

/// `x[i] = e^(x[i] - m)`.
pub fn exp_sub(x: &mut [f32], m: f32) {
    x.iter_mut().for_each(|v| *v = libm::expf(*v - m));
}

/// `Σ a[i]·b[i]`, accumulated in order in f32 (separate multiply and add).
pub fn dot_f32_f16(a: &[f32], b: &[f16]) -> f32 {
    a.iter().zip(b).fold(0.0, |s, (x, y)| s + x * y.to_f32())
}

/// `out[t] = dot_f32_f16(q, k[t·stride..][..q.len()])` for `t < out.len()`: one head's
/// query against consecutive cache rows. SIMD versions vectorise across rows, so each
/// lane adds in the same order as [`dot_f32_f16`] and the results are bit-identical.
pub fn dots_f32_f16(q: &[f32], k: &[f16], stride: usize, out: &mut [f32]) {
    for (t, o) in out.iter_mut().enumerate() {
        *o = dot_f32_f16(q, &k[t * stride..t * stride + q.len()]);
    }
}

/// `acc[i] = f16(acc[i] + v[i]·s)`.
pub fn mad_f16(acc: &mut [f16], v: &[f16], s: f32) {
    for (a, v) in acc.iter_mut().zip(v) {
        *a = f16::from_f32(a.to_f32() + v.to_f32() * s);
    }
}

/// `acc[i] = f16(acc[i]·s)`.
pub fn scale_f16(acc: &mut [f16], s: f32) {
    for a in acc.iter_mut() {
        *a = f16::from_f32(a.to_f32() * s);
    }
}

/// `acc[i] += v[i]·s` with an f32 accumulator.
pub fn mad_f32_f16(acc: &mut [f32], v: &[f16], s: f32) {
    for (a, v) in acc.iter_mut().zip(v) {
        *a += v.to_f32() * s;
    }
}
