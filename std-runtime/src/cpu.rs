//! The CPU's features (detected by the core, at engine creation) with the L2 size the OS
//! reports, and the `SUPERINFER_ISA` override.

use superinfer_core::kernels::{CpuFeatures, Isa};

/// What this CPU supports ([`CpuFeatures::detect`]) and its L2 size from sysfs.
pub fn detect() -> CpuFeatures {
    CpuFeatures::detect().with_l2_bytes(l2_bytes().unwrap_or(0))
}

/// One core's L2 cache size from Linux's sysfs (`cache/index*/` of cpu0 with level 2 and a
/// data or unified type), if this system tells.
fn l2_bytes() -> Option<usize> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        if level.trim() != "2" || kind.trim() == "Instruction" {
            continue;
        }
        let size = size.trim();
        let (digits, unit) = size.split_at(
            size.find(|c: char| !c.is_ascii_digit())
                .unwrap_or(size.len()),
        );
        let n: usize = digits.parse().ok()?;
        return Some(match unit {
            "K" => n << 10,
            "M" => n << 20,
            "" => n,
            _ => return None,
        });
    }
    None
}

/// The ISA forced by the `SUPERINFER_ISA` environment variable, if set.
pub fn isa_from_env() -> Result<Option<Isa>, String> {
    match std::env::var("SUPERINFER_ISA") {
        Ok(s) if !s.is_empty() => Isa::from_name(&s)
            .map(Some)
            .ok_or_else(|| format!("SUPERINFER_ISA='{s}' is not one of {}", Isa::names())),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use superinfer_core::kernels::Feature;

    /// The core's own detection (cpuid and XCR0) agrees with std's on every feature the
    /// kernel tables use.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn detection_agrees_with_std() {
        let f = super::detect();
        for feature in Feature::ALL {
            let std = match feature {
                Feature::Avx2 => std::is_x86_feature_detected!("avx2"),
                Feature::Fma => std::is_x86_feature_detected!("fma"),
                Feature::F16c => std::is_x86_feature_detected!("f16c"),
                Feature::Avx512f => std::is_x86_feature_detected!("avx512f"),
                Feature::Avx512bw => std::is_x86_feature_detected!("avx512bw"),
                Feature::Avx512vl => std::is_x86_feature_detected!("avx512vl"),
                Feature::Avx512vnni => std::is_x86_feature_detected!("avx512vnni"),
                Feature::AvxVnni => std::is_x86_feature_detected!("avxvnni"),
                Feature::Neon | Feature::Dotprod | Feature::Simd128 => false,
            };
            assert_eq!(f.has(feature), std, "{}", feature.name());
        }
    }

    #[test]
    #[cfg(target_arch = "aarch64")]
    fn detection_agrees_with_std() {
        let f = super::detect();
        assert_eq!(
            f.has(Feature::Neon),
            std::arch::is_aarch64_feature_detected!("neon")
        );
        assert_eq!(
            f.has(Feature::Dotprod),
            std::arch::is_aarch64_feature_detected!("dotprod")
        );
    }
}
