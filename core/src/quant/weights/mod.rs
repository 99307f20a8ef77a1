//! Weight quantizers that write the bytes ggml's `ggml_quantize_chunk` writes with no
//! importance matrix, i.e. what `llama-quantize` puts in a model file. They are slower
//! than [`super::quantize_row_ref`]'s (the k-quants search their scales as ggml does), and
//! [`super::quantize_row_ref`] stays as it is: the engine's activation formats follow ggml's
//! SIMD quantizers, and the tests' synthetic models were built with it.

pub mod kquants;
pub mod legacy;
pub mod search;
pub mod weighted;

#[cfg(test)]
mod tests;

use super::{GgmlType, QuantizeRowFn};
use crate::error::{Error, Result};

/// Every type [`quantize`] writes.
pub const SUPPORTED: [GgmlType; 16] = {
    use GgmlType::*;
    [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
        MXFP4,
    ]
};

/// The quantizer of `ty`, as `ggml_quantize_chunk` runs it without an importance matrix.
pub fn quantizer(ty: GgmlType) -> Option<QuantizeRowFn> {
    use super::{float, iq4, legacy as base, mxfp4};
    use GgmlType::*;
    Some(match ty {
        F32 => float::quantize_f32,
        F16 => float::quantize_f16,
        BF16 => float::quantize_bf16,
        Q4_0 => base::quantize_q4_0,
        Q4_1 => legacy::quantize_q4_1,
        Q5_0 => base::quantize_q5_0,
        Q5_1 => legacy::quantize_q5_1,
        Q8_0 => legacy::quantize_q8_0,
        Q2_K => kquants::quantize_q2_k,
        Q3_K => kquants::quantize_q3_k,
        Q4_K => kquants::quantize_q4_k,
        Q5_K => kquants::quantize_q5_k,
        Q6_K => kquants::quantize_q6_k,
        IQ4_NL => iq4::nl::quantize,
        IQ4_XS => iq4::xs::quantize,
        MXFP4 => mxfp4::quantize,
        _ => return None,
    })
}

/// Quantizes `src` (whole rows of `ty`'s blocks) into `dst` (exactly their bytes).
pub fn quantize(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    let f = quantizer(ty)
        .ok_or_else(|| Error::InvalidArgument(alloc::format!("cannot quantize weights to {ty}")))?;
    super::check_len(ty, src.len(), dst.len())?;
    f(src, dst);
    Ok(())
}

/// Whether [`quantize_rows`] takes an importance matrix for `ty` (the types ggml ignores it
/// for count: F32/F16/BF16, Q8_0, MXFP4).
pub fn supports_imatrix(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q4_K | Q5_K | Q6_K | MXFP4
    )
}

/// Quantizes whole rows of `n_per_row` values as `ggml_quantize_chunk` does, with the
/// importance matrix `imatrix` (one weight per column) when given.
pub fn quantize_rows(
    ty: GgmlType,
    src: &[f32],
    dst: &mut [u8],
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> Result<()> {
    use GgmlType::*;
    type Weighted = fn(&[f32], &mut [u8], &[f32]);
    let weighted: Option<Weighted> = match ty {
        Q4_0 => Some(weighted::quantize_q4_0),
        Q4_1 => Some(weighted::quantize_q4_1),
        Q5_0 => Some(weighted::quantize_q5_0),
        Q5_1 => Some(weighted::quantize_q5_1),
        Q4_K => Some(weighted::quantize_q4_k),
        Q5_K => Some(weighted::quantize_q5_k),
        Q6_K => Some(weighted::quantize_q6_k),
        _ => None,
    };
    let (Some(qw), Some(f)) = (imatrix, weighted) else {
        if imatrix.is_some() && !supports_imatrix(ty) {
            return Err(Error::InvalidArgument(alloc::format!(
                "an importance matrix is not supported yet for {ty}"
            )));
        }
        return quantize(ty, src, dst);
    };
    super::check_len(ty, src.len(), dst.len())?;
    if n_per_row == 0 || !src.len().is_multiple_of(n_per_row) || qw.len() != n_per_row {
        return Err(Error::InvalidArgument(alloc::format!(
            "{} values are not rows of {n_per_row} with {} importance weights",
            src.len(),
            qw.len()
        )));
    }
    let row_bytes = dst.len() / (src.len() / n_per_row);
    for (x, y) in src
        .chunks_exact(n_per_row)
        .zip(dst.chunks_exact_mut(row_bytes))
    {
        f(x, y, qw);
    }
    Ok(())
}
