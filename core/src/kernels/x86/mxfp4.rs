//! MXFP4 · Q8_0 on AVX2 and AVX-512 VNNI: the kernels of [`super::table4`] over the doubled
//! E2M1 table and E8M0 scales (llama.cpp's x86 `ggml_vec_dot_mxfp4_q8_0` bits; its rounding
//! and the check against ggml are described there).

use super::table4::{dot_avx2, dot_avx512, rows_avx2};
use crate::quant::mxfp4::BlockMxfp4;

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot_mxfp4_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot_avx2::<BlockMxfp4>(w, a)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_mxfp4_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot_avx512::<BlockMxfp4>(w, a)
}

/// Several rows against several tokens (`crate::quant::VecDotRowsFn`): `out[r · n + t]` is
/// [`dot_mxfp4_avx2`] of row `r` and token `t`, bit for bit (the row layout's prompt
/// processing, where the interleaved layout is not used: `--no-repack`, rows not in whole
/// groups of eight).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn rows_mxfp4_avx2(cols: usize, w: &[u8], a: &[u8], n: usize, out: &mut [f32]) {
    rows_avx2::<BlockMxfp4>(cols, w, a, n, out)
}
