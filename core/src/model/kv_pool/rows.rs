//! One layer's cached keys or values: `n` rows of one position's values (all KV heads), in
//! the element type chosen for the cache (llama.cpp's `--cache-type-k` / `--cache-type-v`).

use alloc::vec;
use alloc::vec::Vec;

use bytemuck::Zeroable;
use half::f16;

use crate::kernels::Kernels;
use crate::ops::attention::{KvType, KvView};
use crate::quant::legacy::{quantize_q8_0, BlockQ8_0, QK};
use crate::quant::GgmlType;

pub(super) enum Rows {
    F32(Vec<f32>),
    F16(Vec<f16>),
    Q8_0(Vec<BlockQ8_0>),
}

impl Rows {
    /// `n` values (whole rows) of type `ty`, zeroed.
    pub(super) fn new(ty: KvType, n: usize) -> Rows {
        match ty {
            KvType::F32 => Rows::F32(vec![0.0; n]),
            KvType::F16 => Rows::F16(vec![f16::ZERO; n]),
            KvType::Q8_0 => Rows::Q8_0(vec![BlockQ8_0::zeroed(); n / QK]),
        }
    }

    pub(super) fn view(&self) -> KvView<'_> {
        match self {
            Rows::F32(r) => KvView::F32(r),
            Rows::F16(r) => KvView::F16(r),
            Rows::Q8_0(r) => KvView::Q8_0(r),
        }
    }

    pub(super) fn bytes(&self) -> usize {
        match self {
            Rows::F32(r) => 4 * r.len(),
            Rows::F16(r) => 2 * r.len(),
            Rows::Q8_0(r) => core::mem::size_of_val(&r[..]),
        }
    }

    /// Stores `x` as row `at` (rows of `x.len()` values), rounded or quantized as llama.cpp's
    /// cache writes do (Q8_0 with the activation quantizer).
    pub(super) fn store(&mut self, k: &Kernels, at: usize, x: &[f32]) {
        let n = x.len();
        match self {
            Rows::F32(r) => r[at * n..(at + 1) * n].copy_from_slice(x),
            Rows::F16(r) => (k.f16_ops().from_f32)(x, &mut r[at * n..(at + 1) * n]),
            Rows::Q8_0(r) => {
                let dst = bytemuck::cast_slice_mut(&mut r[at * n / QK..(at + 1) * n / QK]);
                match k.quantize_row(GgmlType::Q8_0) {
                    Some(quantize) => quantize(x, dst),
                    None => quantize_q8_0(x, dst),
                }
            }
        }
    }

    /// Copies `count` rows of `row` values from row `src` to row `dst`.
    pub(super) fn copy_rows(&mut self, row: usize, src: usize, dst: usize, count: usize) {
        let (s, d, n) = (src * row, dst * row, count * row);
        match self {
            Rows::F32(r) => r.copy_within(s..s + n, d),
            Rows::F16(r) => r.copy_within(s..s + n, d),
            Rows::Q8_0(r) => r.copy_within(s / QK..(s + n) / QK, d / QK),
        }
    }
}
