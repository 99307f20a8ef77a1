//! Scalar f16 row conversion (the KV cache's element type): the reference for the SIMD ones.

use half::f16;

use crate::kernels::F16Ops;

pub const OPS: F16Ops = F16Ops { to_f32, from_f32 };

/// `dst[i] = f32(src[i])`.
pub fn to_f32(src: &[f16], dst: &mut [f32]) {
    dst.iter_mut().zip(src).for_each(|(d, s)| *d = s.to_f32());
}

/// `dst[i] = f16(src[i])`, rounded to nearest even (as ggml's F16 cache writes).
pub fn from_f32(src: &[f32], dst: &mut [f16]) {
    dst.iter_mut()
        .zip(src)
        .for_each(|(d, &s)| *d = f16::from_f32(s));
}
