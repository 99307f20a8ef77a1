//! What the CPU can run, detected here in the core: the kernel table's safety rests on it.
//!
//! [`select`](super::select) installs kernels compiled with `#[target_feature]` for every ISA
//! that a [`CpuFeatures`] says the CPU has, so a value claiming a feature the CPU lacks would
//! run illegal instructions from safe code. Hence its fields are private and the only ways to
//! get one are [`CpuFeatures::detect`] (the truth about this CPU), [`CpuFeatures::default`]
//! (no features: the scalar table) and [`CpuFeatures::assume`] (`unsafe`).
//!
//! - x86_64: `cpuid` for what the CPU implements and `xgetbv` (XCR0) for what the OS saves on
//!   a context switch, as `std::is_x86_feature_detected!` does: AVX2, FMA and F16C need the
//!   OS to save the AVX state (XCR0 bits 1-2), as does AVX-VNNI (leaf 7 subleaf 1, EAX bit
//!   4), AVX-512 the opmask and upper-ZMM state too
//!   (bits 5-7).
//! - aarch64: NEON is part of every target Rust builds with it (`target_feature = "neon"`);
//!   the dot-product extension only the OS can tell (its ID registers are privileged): with
//!   std (the `std` feature, or the core's own tests) through
//!   `std::arch::is_aarch64_feature_detected!`, without it only when compiled in
//!   (`-C target-feature=+dotprod`).
//! - wasm32: a module is either built with `simd128` (and `relaxed-simd`) or not: compile time.

use alloc::vec::Vec;

use super::Isa;

/// One CPU feature the kernel tables use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    Avx2,
    Fma,
    F16c,
    Avx512f,
    Avx512bw,
    Avx512vl,
    Avx512vnni,
    /// AVX-VNNI: the VEX-encoded 256-bit `vpdpbusd` (Alder Lake and later client chips,
    /// Sapphire Rapids, Zen 5), without AVX-512.
    AvxVnni,
    Neon,
    Dotprod,
    Simd128,
}

impl Feature {
    pub const ALL: [Feature; 11] = [
        Feature::Avx2,
        Feature::Fma,
        Feature::F16c,
        Feature::Avx512f,
        Feature::Avx512bw,
        Feature::Avx512vl,
        Feature::Avx512vnni,
        Feature::AvxVnni,
        Feature::Neon,
        Feature::Dotprod,
        Feature::Simd128,
    ];

    /// The name `#[target_feature]` and `is_*_feature_detected!` use.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Avx2 => "avx2",
            Feature::Fma => "fma",
            Feature::F16c => "f16c",
            Feature::Avx512f => "avx512f",
            Feature::Avx512bw => "avx512bw",
            Feature::Avx512vl => "avx512vl",
            Feature::Avx512vnni => "avx512vnni",
            Feature::AvxVnni => "avxvnni",
            Feature::Neon => "neon",
            Feature::Dotprod => "dotprod",
            Feature::Simd128 => "simd128",
        }
    }

    fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// What the CPU can run: built only by [`Self::detect`], as empty ([`Self::default`]: the
/// scalar table) or through the `unsafe` [`Self::assume`], so safe code cannot claim a
/// feature the CPU lacks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuFeatures {
    /// One bit per [`Feature`] (`1 << feature as u16`).
    bits: u16,
    /// Bytes of one core's L2 cache, when the frontend knows it (0: unknown). The batch
    /// matmul sizes its blocks of tokens by it.
    l2_bytes: usize,
}

impl CpuFeatures {
    /// The features of the CPU running this (and, on x86, enabled by its OS).
    pub fn detect() -> CpuFeatures {
        let mut f = CpuFeatures::default();
        for feature in detected() {
            f.bits |= feature.bit();
        }
        f
    }

    /// These features plus `feature`.
    ///
    /// # Safety
    /// Every CPU that runs kernels selected with the result must implement `feature`, and
    /// the OS must save its registers across context switches (the x86 AVX and AVX-512
    /// state). `select` then runs code compiled for it: on a CPU without it, that is
    /// undefined behaviour (an illegal instruction at best).
    pub unsafe fn assume(self, feature: Feature) -> CpuFeatures {
        CpuFeatures {
            bits: self.bits | feature.bit(),
            ..self
        }
    }

    /// Whether the CPU has `feature`.
    pub fn has(&self, feature: Feature) -> bool {
        self.bits & feature.bit() != 0
    }

    /// One core's L2 cache in bytes (0: unknown).
    pub fn l2_bytes(&self) -> usize {
        self.l2_bytes
    }

    /// These features with the L2 size the frontend found (a tuning hint only).
    pub fn with_l2_bytes(self, l2_bytes: usize) -> CpuFeatures {
        CpuFeatures { l2_bytes, ..self }
    }

    /// The ISAs these features can run, best first (scalar is always last).
    pub fn available(&self) -> Vec<Isa> {
        use Feature::*;
        let all = |fs: &[Feature]| fs.iter().all(|&f| self.has(f));
        let mut v = Vec::new();
        if cfg!(target_arch = "x86_64") {
            if all(&[Avx512f, Avx512bw, Avx512vl, Avx2, Fma, F16c]) {
                v.push(Isa::Avx512);
            }
            if all(&[Avx2, Fma, F16c, AvxVnni]) {
                v.push(Isa::AvxVnni);
            }
            if all(&[Avx2, Fma, F16c]) {
                v.push(Isa::Avx2);
            }
        }
        if cfg!(target_arch = "aarch64") && self.has(Neon) {
            v.push(Isa::Neon);
        }
        if cfg!(target_arch = "wasm32") && self.has(Simd128) {
            v.push(Isa::Simd128);
        }
        v.push(Isa::Scalar);
        v
    }
}

/// The features this CPU has, from `cpuid` and XCR0 (see the module's notes).
#[cfg(target_arch = "x86_64")]
fn detected() -> Vec<Feature> {
    use core::arch::x86_64::{__cpuid_count, _xgetbv, CpuidResult};
    // `__cpuid_count` is a safe fn in newer Rust, `unsafe` in the older ones we support
    #[allow(unused_unsafe)]
    fn cpuid(leaf: u32, subleaf: u32) -> CpuidResult {
        // SAFETY: every x86_64 CPU implements `cpuid`; a leaf or subleaf above the maximum
        // (checked below before leaf 7 is read) returns other data, it never faults.
        unsafe { __cpuid_count(leaf, subleaf) }
    }
    let bit = |word: u32, n: u32| word & (1 << n) != 0;
    let max_leaf = cpuid(0, 0).eax;
    let leaf1 = cpuid(1, 0);
    let none = CpuidResult {
        eax: 0,
        ebx: 0,
        ecx: 0,
        edx: 0,
    };
    let leaf7 = if max_leaf >= 7 { cpuid(7, 0) } else { none };
    // subleaf 0's EAX is the highest subleaf of leaf 7
    let leaf7_1 = if max_leaf >= 7 && leaf7.eax >= 1 {
        cpuid(7, 1)
    } else {
        none
    };
    // XSAVE (ecx 26) and OSXSAVE (ecx 27: the OS set CR4.OSXSAVE) make `xgetbv` legal
    let xcr0 = if bit(leaf1.ecx, 26) && bit(leaf1.ecx, 27) {
        // SAFETY: `_xgetbv` needs the `xsave` feature and CR4.OSXSAVE, both just checked.
        unsafe { _xgetbv(0) }
    } else {
        0
    };
    let os_avx = xcr0 & 0b110 == 0b110; // SSE and AVX state
    let os_avx512 = os_avx && xcr0 & 0b1110_0000 == 0b1110_0000; // opmask, ZMM0-15 hi, ZMM16-31
    let mut v = Vec::new();
    let mut add = |on: bool, f: Feature| {
        if on {
            v.push(f);
        }
    };
    add(os_avx && bit(leaf7.ebx, 5), Feature::Avx2);
    add(os_avx && bit(leaf1.ecx, 12), Feature::Fma);
    add(os_avx && bit(leaf1.ecx, 29), Feature::F16c);
    add(os_avx512 && bit(leaf7.ebx, 16), Feature::Avx512f);
    add(os_avx512 && bit(leaf7.ebx, 30), Feature::Avx512bw);
    add(os_avx512 && bit(leaf7.ebx, 31), Feature::Avx512vl);
    add(os_avx512 && bit(leaf7.ecx, 11), Feature::Avx512vnni);
    // VEX-encoded: only the AVX state (XCR0 bits 1-2) needs saving
    add(os_avx && bit(leaf7_1.eax, 4), Feature::AvxVnni);
    v
}

/// NEON from the target; dotprod from the target or, with std, from the OS.
#[cfg(target_arch = "aarch64")]
fn detected() -> Vec<Feature> {
    let mut v = Vec::new();
    if cfg!(target_feature = "neon") {
        v.push(Feature::Neon);
    }
    #[cfg(any(test, feature = "std"))]
    let dotprod = std::arch::is_aarch64_feature_detected!("dotprod");
    #[cfg(not(any(test, feature = "std")))]
    let dotprod = cfg!(target_feature = "dotprod");
    if dotprod && cfg!(target_feature = "neon") {
        v.push(Feature::Dotprod);
    }
    v
}

/// simd128 when the module was built with it.
#[cfg(target_arch = "wasm32")]
fn detected() -> Vec<Feature> {
    let mut v = Vec::new();
    if cfg!(target_feature = "simd128") {
        v.push(Feature::Simd128);
    }
    v
}

#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "wasm32"
)))]
fn detected() -> Vec<Feature> {
    Vec::new()
}
