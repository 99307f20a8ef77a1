//! IQ4_NL (ggml type 20): blocks of 32 values, an f16 scale `d` and 16 bytes of codes into
//! [`super::KVALUES`]; a value is `d · KVALUES[code]`. Dot products pair a row with Q8_0 activations
//! (ggml's `vec_dot_type`), a block's integer sum scaled once, as ggml's
//! `ggml_vec_dot_iq4_nl_q8_0_generic` does.

use bytemuck::{Pod, Zeroable};

use super::{isum32, quantize_impl, unpack32};
use crate::quant::legacy::{blocks, blocks_mut, h, to_h, BlockQ8_0, QK};

/// One IQ4_NL block (ggml's `block_iq4_nl`).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub struct BlockIq4Nl {
    pub d: [u8; 2],
    pub qs: [u8; QK / 2],
}

const _: () = assert!(core::mem::size_of::<BlockIq4Nl>() == 18);

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockIq4Nl>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let d = h(b.d);
        for (y, q) in y.iter_mut().zip(unpack32(&b.qs)) {
            *y = d * q as f32;
        }
    }
}

/// ggml's `quantize_iq4_nl` without an importance matrix (what `llama-quantize` writes).
pub fn quantize(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(QK).zip(blocks_mut::<BlockIq4Nl>(dst)) {
        let q = quantize_impl(x);
        b.d = to_h(q.d);
        b.qs.copy_from_slice(&q.qs[..QK / 2]);
    }
}

/// A block's scale as the dot products apply it: the activation's f16 scale times the
/// weight's (`GGML_CPU_FP16_TO_FP32(y.d) * GGML_CPU_FP16_TO_FP32(x.d)`).
#[inline]
pub fn scale(x: &BlockIq4Nl, y: &BlockQ8_0) -> f32 {
    h(y.d) * h(x.d)
}

/// A block's exact integer dot product (`sumi1 + sumi2` in ggml).
#[inline]
pub fn isum(x: &BlockIq4Nl, y: &BlockQ8_0) -> i32 {
    isum32(&x.qs, &y.qs)
}

/// IQ4_NL · Q8_0, ggml's `ggml_vec_dot_iq4_nl_q8_0_generic` bit for bit (without
/// contraction, as [`crate::quant::mxfp4::vec_dot_mxfp4_q8_0`]): per block the exact integer
/// sum, then `sum += d · isum` block after block.
pub fn vec_dot_iq4_nl_q8_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in blocks::<BlockIq4Nl>(w).iter().zip(blocks::<BlockQ8_0>(a)) {
        sum += scale(x, y) * isum(x, y) as f32;
    }
    sum
}
