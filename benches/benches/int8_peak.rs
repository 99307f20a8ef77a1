//! The ceiling of the x86 batch kernels' inner loops: the multiply-accumulate instruction
//! sequences they are built from, alone, on registers and L1 broadcasts, in MACs per
//! second per core. A batch kernel's GMAC/s (`matmul` bench: rows × cols × 512 tokens per
//! iteration) over the matching sequence here says how much of its formulation's peak it
//! reaches; the rest is unpacking, scales and loads.
//!
//! - `q8_sign`: Q8_0 × Q8_0 without VNNI: `vpsignb`, `vpmaddubsw`, `vpmaddwd`, `vpaddd` per
//!   32 MACs (signed × signed bytes have no single AVX2 instruction).
//! - `u4_i16`: a 4-bit unsigned weight × Q8_0 (Q4_0, Q4_K): `vpmaddubsw`, `vpaddw` per 32
//!   MACs, the i16 sums widened once per block.
//! - `f32_fma`: `vfmadd` per 8 MACs, for comparison.
//! - `vnni_256` / `vnni_512` (AVX-512 VNNI): one `vpdpbusd` per 32 / 64 MACs, its
//!   activation operand broadcast from memory (the AVX-512 batch kernels' step).
//!
//! Each runs eight independent accumulators with a fresh broadcast operand per step, as the
//! kernels do per token.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;

const STEPS: usize = 4096;

#[cfg(target_arch = "x86_64")]
mod probes {
    use std::arch::x86_64::*;

    /// Which sequence: 0 `q8_sign`, 1 `u4_i16`, 2 `f32_fma`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn run<const KIND: u32>(steps: usize, src: &[i32; 64]) -> i32 {
        let ones = _mm256_set1_epi16(1);
        let x = _mm256_set1_epi32(0x7f81_05f3);
        let ax = _mm256_abs_epi8(x);
        let mut acc = [_mm256_setzero_si256(); 8];
        for i in 0..steps {
            for (j, acc) in acc.iter_mut().enumerate() {
                // SAFETY: the index is masked into the array.
                let y = _mm256_set1_epi32(unsafe { *src.get_unchecked((i + j) & 63) });
                *acc = match KIND {
                    0 => {
                        let p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, x));
                        _mm256_add_epi32(*acc, _mm256_madd_epi16(p, ones))
                    }
                    1 => _mm256_add_epi16(
                        *acc,
                        _mm256_maddubs_epi16(_mm256_and_si256(x, _mm256_set1_epi8(15)), y),
                    ),
                    _ => _mm256_castps_si256(_mm256_fmadd_ps(
                        _mm256_castsi256_ps(y),
                        _mm256_castsi256_ps(ax),
                        _mm256_castsi256_ps(*acc),
                    )),
                };
            }
        }
        let mut s = acc[0];
        for a in &acc[1..] {
            s = _mm256_xor_si256(s, *a);
        }
        _mm256_extract_epi32(s, 0)
    }

    /// `vpdpbusd` on 256-bit (`WIDE` false) or 512-bit vectors.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub unsafe fn vnni<const WIDE: bool>(steps: usize, src: &[i32; 64]) -> i32 {
        let x = _mm512_set1_epi32(0x7f81_05f3);
        let mut acc = [_mm512_setzero_si512(); 8];
        for i in 0..steps {
            for (j, acc) in acc.iter_mut().enumerate() {
                // SAFETY: the index is masked into the array.
                let y = unsafe { *src.get_unchecked((i + j) & 63) };
                *acc = if WIDE {
                    _mm512_dpbusd_epi32(*acc, x, _mm512_set1_epi32(y))
                } else {
                    let a = _mm512_castsi512_si256(*acc);
                    let p = _mm256_dpbusd_epi32(a, _mm512_castsi512_si256(x), _mm256_set1_epi32(y));
                    _mm512_castsi256_si512(p)
                };
            }
        }
        let mut s = acc[0];
        for a in &acc[1..] {
            s = _mm512_xor_si512(s, *a);
        }
        _mm512_reduce_add_epi32(s)
    }
}

fn int8_peak(c: &mut Criterion) {
    #[cfg(target_arch = "x86_64")]
    {
        if !std::is_x86_feature_detected!("avx2") || !std::is_x86_feature_detected!("fma") {
            return;
        }
        let src: [i32; 64] = std::array::from_fn(|i| (i as i32).wrapping_mul(0x0103_0507) ^ 0x5a);
        let mut g = c.benchmark_group("int8_peak");
        g.sample_size(20)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        type Probe = unsafe fn(usize, &[i32; 64]) -> i32;
        let cases: [(&str, u64, Probe); 3] = [
            ("q8_sign", 32, probes::run::<0>),
            ("u4_i16", 32, probes::run::<1>),
            ("f32_fma", 8, probes::run::<2>),
        ];
        for (name, macs, probe) in cases {
            g.throughput(Throughput::Elements(STEPS as u64 * 8 * macs));
            // SAFETY: AVX2 and FMA were detected above.
            g.bench_function(name, |b| b.iter(|| unsafe { probe(STEPS, &src) }));
        }
        let vnni = ["avx512f", "avx512bw", "avx512vl", "avx512vnni"];
        if std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni")
        {
            let cases: [(&str, u64, Probe); 2] = [
                ("vnni_256", 32, probes::vnni::<false>),
                ("vnni_512", 64, probes::vnni::<true>),
            ];
            for (name, macs, probe) in cases {
                g.throughput(Throughput::Elements(STEPS as u64 * 8 * macs));
                // SAFETY: the AVX-512 features were detected above.
                g.bench_function(name, |b| b.iter(|| unsafe { probe(STEPS, &src) }));
            }
        } else {
            eprintln!("int8_peak: no {} here, VNNI probes skipped", vnni.join("/"));
        }
        g.finish();
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = c;
}

criterion_group!(benches, int8_peak);
criterion_main!(benches);
