//! CPU feature detection (once, at engine creation) and the `SUPERINFER_ISA` override.

use superinfer_core::kernels::{CpuFeatures, Isa};

/// Detects what this CPU supports.
pub fn detect() -> CpuFeatures {
    #[allow(unused_mut)]
    let mut f = CpuFeatures::default();
    #[cfg(target_arch = "x86_64")]
    {
        f.avx2 = std::is_x86_feature_detected!("avx2");
        f.fma = std::is_x86_feature_detected!("fma");
        f.f16c = std::is_x86_feature_detected!("f16c");
        f.avx512f = std::is_x86_feature_detected!("avx512f");
        f.avx512bw = std::is_x86_feature_detected!("avx512bw");
        f.avx512vl = std::is_x86_feature_detected!("avx512vl");
        f.avx512vnni = std::is_x86_feature_detected!("avx512vnni");
    }
    #[cfg(target_arch = "aarch64")]
    {
        f.neon = std::arch::is_aarch64_feature_detected!("neon");
        f.dotprod = std::arch::is_aarch64_feature_detected!("dotprod");
    }
    f
}

/// The ISA forced by the `SUPERINFER_ISA` environment variable, if set.
pub fn isa_from_env() -> Result<Option<Isa>, String> {
    match std::env::var("SUPERINFER_ISA") {
        Ok(s) if !s.is_empty() => Isa::from_name(&s).map(Some).ok_or_else(|| {
            format!("SUPERINFER_ISA='{s}' is not one of scalar, avx2, avx512, neon, simd128")
        }),
        _ => Ok(None),
    }
}
