//! The kernel table: every hot inner loop the forward pass needs, as plain function pointers,
//! filled once by [`select`] from the CPU's features. The scalar kernels in [`generic`] are
//! always present and are the oracle the per-ISA kernels are tested against.
//!
//! The core detects the CPU's features itself ([`CpuFeatures::detect`]: `cpuid` and XCR0 on
//! x86, the target's features elsewhere), and safe code cannot claim one the CPU lacks: the
//! table runs code compiled for exactly what a [`CpuFeatures`] says.

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod features;
pub mod generic;
#[cfg(target_arch = "wasm32")]
mod wasm32;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
pub(crate) mod tests;

pub use features::{CpuFeatures, Feature};

use crate::ops::attention::flash::FlashFn;
use crate::quant::interleaved::{BatchQ8_0Fn, GemmX8Fn, GemvX8Fn, StoreTileFn};
use crate::quant::{GgmlType, QuantizeRowFn, VecDotFn, VecDotRowsFn};

/// Instruction sets a kernel table can be built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    Scalar,
    Avx2,
    /// AVX2 with AVX-VNNI's 256-bit `vpdpbusd` in the interleaved kernels.
    AvxVnni,
    Avx512,
    Neon,
    Simd128,
}

impl Isa {
    /// Every ISA a kernel table can be built for, on any target.
    pub const ALL: [Isa; 6] = [
        Isa::Scalar,
        Isa::Avx2,
        Isa::AvxVnni,
        Isa::Avx512,
        Isa::Neon,
        Isa::Simd128,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::AvxVnni => "avx-vnni",
            Isa::Avx512 => "avx512",
            Isa::Neon => "neon",
            Isa::Simd128 => "simd128",
        }
    }

    pub fn from_name(s: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name() == s)
    }

    /// Every ISA's name, `", "`-separated (for messages about an unknown one).
    pub fn names() -> alloc::string::String {
        let names: alloc::vec::Vec<&str> = Isa::ALL.iter().map(|i| i.name()).collect();
        names.join(", ")
    }
}

const N_TYPES: usize = 40;

/// Row conversions of f16 data (the KV cache).
#[derive(Clone, Copy)]
pub struct F16Ops {
    /// `dst[i] = f32(src[i])` (exact).
    pub to_f32: fn(src: &[half::f16], dst: &mut [f32]),
    /// `dst[i] = f16(src[i])`, rounded to nearest even (the cache writes).
    pub from_f32: fn(src: &[f32], dst: &mut [half::f16]),
}

/// Function pointers for one ISA.
#[derive(Clone)]
pub struct Kernels {
    isa: Isa,
    vec_dot: [Option<VecDotFn>; N_TYPES],
    vec_dot_rows: [Option<VecDotRowsFn>; N_TYPES],
    quantize: [Option<QuantizeRowFn>; N_TYPES],
    batch_q8_0: Option<BatchQ8_0Fn>,
    gemv_x8: [Option<GemvX8Fn>; N_TYPES],
    gemm_x8: [Option<GemmX8Fn>; N_TYPES],
    store_tile: StoreTileFn,
    gemm_groups: usize,
    f16: F16Ops,
    swiglu: fn(gate: &mut [f32], up: &[f32]),
    geglu: fn(gate: &mut [f32], up: &[f32]),
    swiglu_oai: fn(gate: &mut [f32], up: &[f32]),
    flash: FlashFn,
    l2_bytes: usize,
}

/// The L2 size assumed when the frontend did not detect one.
const DEFAULT_L2_BYTES: usize = 512 << 10;

impl Kernels {
    /// The scalar table (always available).
    pub fn scalar() -> Kernels {
        let mut k = Kernels {
            isa: Isa::Scalar,
            vec_dot: [None; N_TYPES],
            vec_dot_rows: [None; N_TYPES],
            quantize: [None; N_TYPES],
            batch_q8_0: None,
            gemv_x8: [None; N_TYPES],
            gemm_x8: [None; N_TYPES],
            store_tile: crate::quant::interleaved::store_tile,
            gemm_groups: 2,
            f16: generic::f16::OPS,
            swiglu: crate::ops::activation::swiglu,
            geglu: crate::ops::activation::geglu,
            swiglu_oai: crate::ops::activation::swiglu_oai,
            flash: crate::ops::attention::flash::tile,
            l2_bytes: DEFAULT_L2_BYTES,
        };
        generic::fill(&mut k);
        k
    }

    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// One core's L2 cache in bytes (detected, or a common size when unknown).
    pub fn l2_bytes(&self) -> usize {
        self.l2_bytes
    }

    /// Dot product of a weight row of type `ty` with an activation row already quantized to
    /// `quant::vec_dot_type(ty)`.
    pub fn vec_dot(&self, ty: GgmlType) -> Option<VecDotFn> {
        self.vec_dot.get(ty.id() as usize).copied().flatten()
    }

    /// Several rows of the row layout against several tokens at once (`VecDotRowsFn`), where
    /// the ISA has such a kernel for `ty` (wasm, which keeps the row layout); without one, the
    /// products run [`Self::vec_dot`] per row and token.
    pub fn vec_dot_rows(&self, ty: GgmlType) -> Option<VecDotRowsFn> {
        self.vec_dot_rows.get(ty.id() as usize).copied().flatten()
    }

    pub fn set_vec_dot_rows(&mut self, ty: GgmlType, f: VecDotRowsFn) {
        self.vec_dot_rows[ty.id() as usize] = Some(f);
    }

    /// Takes a kernel of several rows back out (a wider ISA's table built on a narrower one's,
    /// where its own one-row kernel is the better choice).
    pub fn clear_vec_dot_rows(&mut self, ty: GgmlType) {
        self.vec_dot_rows[ty.id() as usize] = None;
    }

    /// Quantizer for an activation format (Q8_0, Q8_1, Q8_K, F16, BF16, F32).
    pub fn quantize_row(&self, ty: GgmlType) -> Option<QuantizeRowFn> {
        self.quantize.get(ty.id() as usize).copied().flatten()
    }

    /// Matrix × vector over the interleaved layout of `ty` (`quant::interleaved`), when this
    /// ISA has one: weights of such a type are repacked at load.
    pub fn gemv_x8(&self, ty: GgmlType) -> Option<GemvX8Fn> {
        self.gemv_x8.get(ty.id() as usize).copied().flatten()
    }

    pub fn set_gemv_x8(&mut self, ty: GgmlType, f: GemvX8Fn) {
        self.gemv_x8[ty.id() as usize] = Some(f);
    }

    /// Several tokens at once over one interleaved group (prompt processing), when this ISA
    /// has such a kernel for `ty`; without one, a batch runs [`Self::gemv_x8`] per token.
    pub fn gemm_x8(&self, ty: GgmlType) -> Option<GemmX8Fn> {
        self.gemm_x8.get(ty.id() as usize).copied().flatten()
    }

    pub fn set_gemm_x8(&mut self, ty: GgmlType, f: GemmX8Fn) {
        self.gemm_x8[ty.id() as usize] = Some(f);
    }

    /// The f16 row primitives.
    /// How the batch kernels' output tiles reach the token-major result.
    pub fn store_tile(&self) -> StoreTileFn {
        self.store_tile
    }

    pub fn set_store_tile(&mut self, f: StoreTileFn) {
        self.store_tile = f;
    }

    /// Groups a batch kernel call should get where it can (the AVX-512 kernels run quads of
    /// groups on two 512-bit vectors; one group per call leaves a tile in L1 for the others).
    pub fn gemm_groups(&self) -> usize {
        self.gemm_groups
    }

    pub fn set_gemm_groups(&mut self, groups: usize) {
        self.gemm_groups = groups.max(1);
    }

    pub fn f16_ops(&self) -> &F16Ops {
        &self.f16
    }

    pub fn set_f16_ops(&mut self, ops: F16Ops) {
        self.f16 = ops;
    }

    /// `gate[i] = silu(gate[i]) · up[i]`.
    pub fn swiglu(&self) -> fn(&mut [f32], &[f32]) {
        self.swiglu
    }

    pub fn set_swiglu(&mut self, f: fn(&mut [f32], &[f32])) {
        self.swiglu = f;
    }

    /// `gate[i] = gelu(gate[i]) · up[i]` (ggml's f16 GELU table).
    pub fn geglu(&self) -> fn(&mut [f32], &[f32]) {
        self.geglu
    }

    pub fn set_geglu(&mut self, f: fn(&mut [f32], &[f32])) {
        self.geglu = f;
    }

    /// gpt-oss's clamped SwiGLU, `activation::swiglu_oai` (scalar on every ISA: ggml's CPU
    /// op is scalar with libm's `expf`, which a vector exponential would not reproduce).
    pub fn swiglu_oai(&self) -> fn(&mut [f32], &[f32]) {
        self.swiglu_oai
    }

    /// One tile of attention (`ops::attention::flash`).
    pub fn flash(&self) -> FlashFn {
        self.flash
    }

    pub fn set_flash(&mut self, f: FlashFn) {
        self.flash = f;
    }

    pub fn set_vec_dot(&mut self, ty: GgmlType, f: VecDotFn) {
        self.vec_dot[ty.id() as usize] = Some(f);
    }

    pub fn set_quantize_row(&mut self, ty: GgmlType, f: QuantizeRowFn) {
        self.quantize[ty.id() as usize] = Some(f);
    }

    /// The fused Q8_0 quantizer of batch rows, where the ISA has one (without it the batch
    /// takes [`Self::quantize_row`] and the block sums, offsets and scales one after another).
    pub fn batch_q8_0(&self) -> Option<BatchQ8_0Fn> {
        self.batch_q8_0
    }

    pub fn set_batch_q8_0(&mut self, f: BatchQ8_0Fn) {
        self.batch_q8_0 = Some(f);
    }
}

/// The best table for these features, or the one asked for by `force` (an error names an ISA
/// this CPU or build cannot run).
pub fn select(features: &CpuFeatures, force: Option<Isa>) -> Result<Kernels, crate::Error> {
    let available = features.available();
    let isa = match force {
        None => available[0],
        Some(isa) if available.contains(&isa) => isa,
        Some(other) => {
            let names: alloc::vec::Vec<&str> = available.iter().map(|i| i.name()).collect();
            return Err(crate::Error::InvalidArgument(alloc::format!(
                "ISA '{}' is not available in this build or on this CPU (available: {})",
                other.name(),
                names.join(", ")
            )));
        }
    };
    let mut k = Kernels::scalar();
    k.isa = isa;
    if features.l2_bytes() > 0 {
        k.l2_bytes = features.l2_bytes();
    }
    // `isa` is in `available()`, which lists an ISA only when `features` has every target
    // feature its kernels are compiled for; and a `CpuFeatures` has only features detected on
    // this CPU (or `assume`d by a caller who vouched for them): the `fill_*` contracts hold.
    match isa {
        Isa::Scalar => {}
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2, FMA and F16C are present (`available`, above).
        Isa::Avx2 => unsafe { x86::fill_avx2(&mut k, features) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-VNNI with AVX2, FMA and F16C is present (`available`, above).
        Isa::AvxVnni => unsafe { x86::fill_avx_vnni(&mut k, features) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512 F/BW/VL with AVX2, FMA and F16C are present (`available`, above).
        Isa::Avx512 => unsafe { x86::fill_avx512(&mut k, features) },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: NEON is present (`available`, above); dotprod is checked inside.
        Isa::Neon => unsafe { aarch64::fill_neon(&mut k, features) },
        #[cfg(target_arch = "wasm32")]
        // SAFETY: the module was built with simd128 (`available`, above).
        Isa::Simd128 => unsafe { wasm32::fill_simd128(&mut k, features) },
        #[allow(unreachable_patterns)]
        _ => {
            return Err(crate::Error::InvalidArgument(alloc::format!(
                "ISA '{}' has no kernels for this target",
                isa.name()
            )))
        }
    }
    Ok(k)
}
