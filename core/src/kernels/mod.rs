//! The kernel table: every hot inner loop the forward pass needs, as plain function pointers,
//! filled once by [`select`] from the CPU's features. The scalar kernels in [`generic`] are
//! always present and are the oracle the per-ISA kernels are tested against.
//!
//! The core never detects CPU features itself (it has no OS to ask): the frontend fills a
//! [`CpuFeatures`] (std: `is_x86_feature_detected!`; wasm: compile-time `simd128`).

pub mod generic;

use crate::quant::{GgmlType, QuantizeRowFn, VecDotFn};

/// What the CPU can do, as detected by the frontend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuFeatures {
    pub avx2: bool,
    pub fma: bool,
    pub f16c: bool,
    pub avx512f: bool,
    pub avx512bw: bool,
    pub avx512vl: bool,
    pub avx512vnni: bool,
    pub neon: bool,
    pub dotprod: bool,
    pub simd128: bool,
}

/// Instruction sets a kernel table can be built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    Scalar,
    Avx2,
    Avx512,
    Neon,
    Simd128,
}

impl Isa {
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Neon => "neon",
            Isa::Simd128 => "simd128",
        }
    }

    pub fn from_name(s: &str) -> Option<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon, Isa::Simd128]
            .into_iter()
            .find(|i| i.name() == s)
    }
}

const N_TYPES: usize = 40;

/// Function pointers for one ISA.
#[derive(Clone)]
pub struct Kernels {
    isa: Isa,
    vec_dot: [Option<VecDotFn>; N_TYPES],
    quantize: [Option<QuantizeRowFn>; N_TYPES],
}

impl Kernels {
    /// The scalar table (always available).
    pub fn scalar() -> Kernels {
        let mut k = Kernels {
            isa: Isa::Scalar,
            vec_dot: [None; N_TYPES],
            quantize: [None; N_TYPES],
        };
        generic::fill(&mut k);
        k
    }

    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Dot product of a weight row of type `ty` with an activation row already quantized to
    /// `quant::vec_dot_type(ty)`.
    pub fn vec_dot(&self, ty: GgmlType) -> Option<VecDotFn> {
        self.vec_dot.get(ty.id() as usize).copied().flatten()
    }

    /// Quantizer for an activation format (Q8_0, Q8_1, Q8_K, F16, BF16, F32).
    pub fn quantize_row(&self, ty: GgmlType) -> Option<QuantizeRowFn> {
        self.quantize.get(ty.id() as usize).copied().flatten()
    }

    pub fn set_vec_dot(&mut self, ty: GgmlType, f: VecDotFn) {
        self.vec_dot[ty.id() as usize] = Some(f);
    }

    pub fn set_quantize_row(&mut self, ty: GgmlType, f: QuantizeRowFn) {
        self.quantize[ty.id() as usize] = Some(f);
    }
}

/// The best table for these features, or the one asked for by `force` (an error names an ISA
/// this CPU or build cannot run).
pub fn select(features: &CpuFeatures, force: Option<Isa>) -> Result<Kernels, crate::Error> {
    let _ = features;
    match force {
        None | Some(Isa::Scalar) => Ok(Kernels::scalar()),
        Some(other) => Err(crate::Error::InvalidArgument(alloc::format!(
            "ISA '{}' is not available in this build or on this CPU (available: scalar)",
            other.name()
        ))),
    }
}
