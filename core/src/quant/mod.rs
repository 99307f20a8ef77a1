//! Quantized block formats, byte-exact with ggml's layouts, with scalar (reference)
//! quantize / dequantize / dot product. These scalar paths are the oracle every SIMD kernel
//! is tested against.
//!
//! Dot products pair a weight row with an activation row quantized once per matmul, as ggml
//! does (`vec_dot_type`): Q4_0/Q5_0/Q8_0, MXFP4 and IQ4_NL with Q8_0, Q4_1/Q5_1 with Q8_1,
//! the k-quants and IQ4_XS with Q8_K, F16 with F16, BF16 with BF16 and F32 with F32.

pub mod float;
pub mod interleaved;
pub mod iq4;
pub mod kquants;
pub mod legacy;
pub mod mix;
pub mod mxfp4;
mod types;
pub mod weights;

#[cfg(test)]
mod tests;

pub use types::GgmlType;

use crate::error::{Error, Result};

/// Dot product of `n` elements: a weight row and an activation row in the paired format.
pub type VecDotFn = fn(n: usize, w: &[u8], a: &[u8]) -> f32;
/// Several weight rows against several tokens: `out[r · n + t]` = row `r` of `w` · token `t`
/// of `a`, for the `out.len() / n` rows of `w` (ggml's row layout, `cols` columns each) and the
/// `n` activation rows back to back in `a` (each in the paired format). Each value is the
/// table's [`VecDotFn`] of that row and token, bit for bit; the kernel takes a weight block
/// apart once for several tokens or shares an activation block between several rows.
pub type VecDotRowsFn = fn(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]);
/// Quantizes one row (a whole number of blocks).
pub type QuantizeRowFn = fn(src: &[f32], dst: &mut [u8]);
type DequantizeRowFn = fn(src: &[u8], dst: &mut [f32]);

/// The activation format that weight format `ty` dots with.
pub fn vec_dot_type(ty: GgmlType) -> Option<GgmlType> {
    use GgmlType::*;
    Some(match ty {
        F32 => F32,
        F16 => F16,
        BF16 => BF16,
        Q4_0 | Q5_0 | Q8_0 | MXFP4 | IQ4_NL => Q8_0,
        Q4_1 | Q5_1 => Q8_1,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ4_XS => Q8_K,
        _ => return None,
    })
}

/// Scalar reference dot product for weight format `ty`.
pub fn vec_dot_ref(ty: GgmlType) -> Option<VecDotFn> {
    use kquants::*;
    use GgmlType::*;
    Some(match ty {
        F32 => float::vec_dot_f32,
        F16 => float::vec_dot_f16,
        BF16 => float::vec_dot_bf16,
        Q4_0 => legacy::vec_dot_q4_0_q8_0,
        Q4_1 => legacy::vec_dot_q4_1_q8_1,
        Q5_0 => legacy::vec_dot_q5_0_q8_0,
        Q5_1 => legacy::vec_dot_q5_1_q8_1,
        Q8_0 => legacy::vec_dot_q8_0_q8_0,
        MXFP4 => mxfp4::vec_dot_mxfp4_q8_0,
        IQ4_NL => iq4::nl::vec_dot_iq4_nl_q8_0,
        IQ4_XS => iq4::xs::vec_dot_iq4_xs_q8_k,
        Q2_K => |_, w, a| dot_q8_k(w, a, q2_k::unpack),
        Q3_K => |_, w, a| dot_q8_k(w, a, q3_k::unpack),
        Q4_K => |_, w, a| dot_q8_k(w, a, q4_k::unpack),
        Q5_K => |_, w, a| dot_q8_k(w, a, q5_k::unpack),
        Q6_K => |_, w, a| dot_q8_k(w, a, q6_k::unpack),
        _ => return None,
    })
}

/// Scalar reference quantizer for any supported format.
pub fn quantize_row_ref(ty: GgmlType) -> Option<QuantizeRowFn> {
    use kquants::*;
    use GgmlType::*;
    Some(match ty {
        F32 => float::quantize_f32,
        F16 => float::quantize_f16,
        BF16 => float::quantize_bf16,
        Q4_0 => legacy::quantize_q4_0,
        Q4_1 => legacy::quantize_q4_1,
        Q5_0 => legacy::quantize_q5_0,
        Q5_1 => legacy::quantize_q5_1,
        Q8_0 => legacy::quantize_q8_0,
        Q8_1 => legacy::quantize_q8_1,
        MXFP4 => mxfp4::quantize,
        IQ4_NL => iq4::nl::quantize,
        IQ4_XS => iq4::xs::quantize,
        Q2_K => q2_k::quantize,
        Q3_K => q3_k::quantize,
        Q4_K => q4_k::quantize,
        Q5_K => q5_k::quantize,
        Q6_K => q6_k::quantize,
        Q8_K => q8_k::quantize,
        _ => return None,
    })
}

fn dequantize_fn(ty: GgmlType) -> Option<DequantizeRowFn> {
    use kquants::*;
    use GgmlType::*;
    Some(match ty {
        F32 => float::dequantize_f32,
        F16 => float::dequantize_f16,
        BF16 => float::dequantize_bf16,
        Q4_0 => legacy::dequantize_q4_0,
        Q4_1 => legacy::dequantize_q4_1,
        Q5_0 => legacy::dequantize_q5_0,
        Q5_1 => legacy::dequantize_q5_1,
        Q8_0 => legacy::dequantize_q8_0,
        Q8_1 => legacy::dequantize_q8_1,
        MXFP4 => mxfp4::dequantize,
        IQ4_NL => iq4::nl::dequantize,
        IQ4_XS => iq4::xs::dequantize,
        Q2_K => |s, d| dequantize(s, d, q2_k::unpack),
        Q3_K => |s, d| dequantize(s, d, q3_k::unpack),
        Q4_K => |s, d| dequantize(s, d, q4_k::unpack),
        Q5_K => |s, d| dequantize(s, d, q5_k::unpack),
        Q6_K => |s, d| dequantize(s, d, q6_k::unpack),
        Q8_K => q8_k::dequantize,
        _ => return None,
    })
}

/// Checks that `bytes` holds exactly `n` elements of `ty`.
fn check_len(ty: GgmlType, n: usize, bytes: usize) -> Result<()> {
    match ty.bytes_for(n as u64) {
        Some(b) if b == bytes as u64 => Ok(()),
        Some(b) => Err(Error::InvalidArgument(alloc::format!(
            "{n} {ty} values take {b} bytes, got {bytes}"
        ))),
        None => Err(Error::InvalidArgument(alloc::format!(
            "{n} values is not a whole number of {ty} blocks of {}",
            ty.block_len()
        ))),
    }
}

/// Dequantizes `dst.len()` values from `src` (exactly their bytes).
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let f = dequantize_fn(ty)
        .ok_or_else(|| Error::InvalidArgument(alloc::format!("cannot dequantize {ty}")))?;
    check_len(ty, dst.len(), src.len())?;
    f(src, dst);
    Ok(())
}

/// Quantizes `src` into `dst` (exactly the bytes for `src.len()` values).
pub fn quantize_row(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    let f = quantize_row_ref(ty)
        .ok_or_else(|| Error::InvalidArgument(alloc::format!("cannot quantize to {ty}")))?;
    check_len(ty, src.len(), dst.len())?;
    f(src, dst);
    Ok(())
}
