//! The KV cache: every layer's keys and values, one row per position, in the element type
//! chosen per session (llama.cpp's `--cache-type-k` / `--cache-type-v`, F16 by default).

use alloc::vec;
use alloc::vec::Vec;

use bytemuck::Zeroable;
use half::f16;

use super::kv_centre::Centres;
use super::weights::Weights;
use crate::error::{Error, Result};
use crate::kernels::Kernels;
use crate::ops::attention::{rotation, KvLayer, KvType, KvView};
use crate::quant::legacy::{quantize_q8_0, BlockQ8_0, QK};
use crate::quant::GgmlType;

/// One layer's keys or values.
enum Rows {
    F32(Vec<f32>),
    F16(Vec<f16>),
    Q8_0(Vec<BlockQ8_0>),
}

impl Rows {
    fn new(ty: KvType, n: usize) -> Rows {
        match ty {
            KvType::F32 => Rows::F32(vec![0.0; n]),
            KvType::F16 => Rows::F16(vec![f16::ZERO; n]),
            KvType::Q8_0 => Rows::Q8_0(vec![BlockQ8_0::zeroed(); n / QK]),
        }
    }

    fn view(&self) -> KvView<'_> {
        match self {
            Rows::F32(r) => KvView::F32(r),
            Rows::F16(r) => KvView::F16(r),
            Rows::Q8_0(r) => KvView::Q8_0(r),
        }
    }

    /// Stores `x` as row `pos` (rows of `x.len()` values), rounded or quantized as
    /// llama.cpp's cache writes do (Q8_0 with the activation quantizer).
    fn store(&mut self, k: &Kernels, pos: usize, x: &[f32]) {
        let n = x.len();
        match self {
            Rows::F32(r) => r[pos * n..(pos + 1) * n].copy_from_slice(x),
            Rows::F16(r) => (k.f16_ops().from_f32)(x, &mut r[pos * n..(pos + 1) * n]),
            Rows::Q8_0(r) => {
                let dst = bytemuck::cast_slice_mut(&mut r[pos * n / QK..(pos + 1) * n / QK]);
                match k.quantize_row(GgmlType::Q8_0) {
                    Some(quantize) => quantize(x, dst),
                    None => quantize_q8_0(x, dst),
                }
            }
        }
    }
}

pub struct KvCache {
    n_ctx: usize,
    types: [KvType; 2],
    /// Hadamard rotation sizes of keys (and queries) and of values, for quantized caches.
    rotations: [Option<usize>; 2],
    /// Fixed vectors taken from rows before a quantized cache stores them.
    centres: Centres,
    k: Vec<Rows>,
    v: Vec<Rows>,
}

impl KvCache {
    /// A cache of `n_ctx` positions for the model `w` with keys stored as `k_type` and
    /// values as `v_type`. Block types need head dimensions that are whole blocks.
    pub fn new(w: &Weights<'_>, n_ctx: usize, k_type: KvType, v_type: KvType) -> Result<KvCache> {
        let c = &w.config;
        for (what, ty, dim) in [("K", k_type, c.head_dim_k), ("V", v_type, c.head_dim_v)] {
            if !dim.is_multiple_of(ty.block()) {
                return Err(Error::InvalidArgument(alloc::format!(
                    "a {ty} {what} cache needs head dimensions that are multiples of {}; this \
                     model's is {dim}",
                    ty.block()
                )));
            }
        }
        let (k_row, v_row) = c.kv_row();
        let types = [k_type, v_type];
        let rotations = [
            rotation::key_rotation(k_type, c.head_dim_k),
            rotation::value_rotation(v_type, c.head_dim_v),
        ];
        Ok(KvCache {
            n_ctx,
            types,
            rotations,
            centres: Centres::new(w, n_ctx, types, rotations),
            k: (0..c.n_layer)
                .map(|_| Rows::new(k_type, n_ctx * k_row))
                .collect(),
            v: (0..c.n_layer)
                .map(|_| Rows::new(v_type, n_ctx * v_row))
                .collect(),
        })
    }

    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// The key and value types.
    pub fn types(&self) -> (KvType, KvType) {
        (self.types[0], self.types[1])
    }

    /// Size of the Hadamard rotation applied to queries and keys before they meet the
    /// cache (quantized key caches, as llama.cpp), if any.
    pub fn key_rotation(&self) -> Option<usize> {
        self.rotations[0]
    }

    /// Size of the Hadamard rotation applied to values before the cache and to the attention
    /// output after it (quantized value caches), if any.
    pub fn value_rotation(&self) -> Option<usize> {
        self.rotations[1]
    }

    /// Bytes held by the cache.
    pub fn bytes(&self) -> usize {
        self.k
            .iter()
            .chain(&self.v)
            .map(|r| match r {
                Rows::F32(r) => 4 * r.len(),
                Rows::F16(r) => 2 * r.len(),
                Rows::Q8_0(r) => core::mem::size_of_val(&r[..]),
            })
            .sum()
    }

    /// Writes position `pos`'s key and value rows of layer `il`.
    pub fn store(&mut self, kern: &Kernels, il: usize, pos: usize, k: &[f32], v: &[f32]) {
        let (kr, vr) = (&mut self.k[il], &mut self.v[il]);
        self.centres.store(il, k, v, |k, v| {
            kr.store(kern, pos, k);
            vr.store(kern, pos, v);
        });
    }

    /// Brings layer `il`'s attention output (one token's, all query heads) from the cache's
    /// frame back to the model's: undoes the value rotation and adds back the value centre
    /// of a quantized value cache.
    pub fn finish_output(&self, il: usize, out: &mut [f32]) {
        if let Some(n) = self.value_rotation() {
            rotation::hadamard(out, n);
        }
        self.centres.restore_output(il, out);
    }

    /// Layer `il` as attention reads it.
    pub fn layer(&self, il: usize) -> KvLayer<'_> {
        KvLayer {
            k: self.k[il].view(),
            v: self.v[il].view(),
        }
    }
}
