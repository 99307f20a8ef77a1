use super::*;
use alloc::vec;
use alloc::vec::Vec;

use bytemuck::Zeroable;
use half::f16;

use crate::kernels::Kernels;
use crate::quant::legacy::{dequantize_q8_0, quantize_q8_0, BlockQ8_0, QK};

fn rand(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// A cache of `rows` values stored as `ty`, and the values it holds (as f64).
enum Stored {
    F32(Vec<f32>),
    F16(Vec<f16>),
    Q8_0(Vec<BlockQ8_0>),
}

impl Stored {
    fn new(ty: KvType, x: &[f32]) -> (Stored, Vec<f64>) {
        match ty {
            KvType::F32 => (
                Stored::F32(x.to_vec()),
                x.iter().map(|&v| v as f64).collect(),
            ),
            KvType::F16 => {
                let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
                let back = h.iter().map(|v| v.to_f64()).collect();
                (Stored::F16(h), back)
            }
            KvType::Q8_0 => {
                let mut b = vec![BlockQ8_0::zeroed(); x.len() / QK];
                quantize_q8_0(x, bytemuck::cast_slice_mut(&mut b));
                let mut back = vec![0.0f32; x.len()];
                dequantize_q8_0(bytemuck::cast_slice(&b), &mut back);
                (Stored::Q8_0(b), back.iter().map(|&v| v as f64).collect())
            }
        }
    }

    fn view(&self) -> KvView<'_> {
        match self {
            Stored::F32(v) => KvView::F32(v),
            Stored::F16(v) => KvView::F16(v),
            Stored::Q8_0(v) => KvView::Q8_0(v),
        }
    }
}

#[test]
fn cache_type_names_round_trip() {
    for t in KvType::ALL {
        assert_eq!(t.name().parse::<KvType>().unwrap(), t);
        assert_eq!(t.name().to_uppercase().parse::<KvType>().unwrap(), t);
    }
    assert!("q4_0".parse::<KvType>().is_err());
    assert_eq!(KvType::default(), KvType::F16);
    assert_eq!(KvType::Q8_0.bytes(64), 68);
}

/// Softmax attention in f64 of query `q` over positions `window` of one KV head of the
/// values a cache holds (`k64` / `v64`, rows of `k_row` / `v_row`); a `sink` logit joins
/// the softmax's denominator only (gpt-oss's attention sinks).
#[allow(clippy::too_many_arguments)]
fn naive(
    q: &[f32],
    k64: &[f64],
    v64: &[f64],
    rows: (usize, usize),
    at: (usize, usize),
    dv: usize,
    window: core::ops::Range<usize>,
    scale: f32,
    cap: Option<f32>,
    sink: Option<f32>,
) -> Vec<f64> {
    let sc: Vec<f64> = window
        .clone()
        .map(|t| {
            let dot: f64 = q
                .iter()
                .enumerate()
                .map(|(i, &x)| x as f64 * k64[t * rows.0 + at.0 + i])
                .sum::<f64>()
                * scale as f64;
            match cap {
                Some(c) => c as f64 * libm::tanh(dot / c as f64),
                None => dot,
            }
        })
        .collect();
    let m = sc.iter().cloned().fold(f64::MIN, f64::max);
    let z: f64 = sc.iter().map(|x| libm::exp(x - m)).sum::<f64>()
        + sink.map_or(0.0, |s| libm::exp(s as f64 - m));
    (0..dv)
        .map(|d| {
            window
                .clone()
                .zip(&sc)
                .map(|(t, x)| libm::exp(x - m) / z * v64[t * rows.1 + at.1 + d])
                .sum()
        })
        .collect()
}

/// The flash kernel on every ISA this host runs, against f64 attention over the values each
/// cache type holds (the query is not quantized, so every type is accurate to f32
/// rounding), for tiles of causal and sliding-window rows of grouped heads, with and without
/// attention sinks, and against the scalar instance bit for bit (the same fused arithmetic
/// and exponential).
#[test]
fn flash_tiles_match_naive_attention_on_every_isa() {
    use crate::kernels::tests::table_or_skip;
    use crate::kernels::Isa;
    use flash::{FlashScratch, Tile};

    let scalar = Kernels::scalar();
    let tables: Vec<Kernels> = [
        Isa::Avx2,
        Isa::AvxVnni,
        Isa::Avx512,
        Isa::Neon,
        Isa::Simd128,
    ]
    .into_iter()
    .filter_map(table_or_skip)
    .collect();
    // (heads, kv heads, dk, dv, softcap, sliding window, sinks)
    let cases = [
        (4, 2, 64, 32, Some(30.0f32), 0, false),
        (7, 1, 64, 64, None, 0, false),
        (2, 2, 32, 40, None, 9, false),
        (4, 1, 256, 256, None, 20, false),
        // a last tile of three rows with values of 40 (fewer rows than lanes: the values
        // accumulate row by row, with a scalar tail on 16 lanes)
        (6, 2, 32, 40, None, 0, false),
        // gpt-oss-like: grouped heads with sinks, sliding window and not (sinks above the
        // scores' maximum rescale the output, those below only add to the sum)
        (8, 2, 64, 64, None, 5, true),
        (8, 2, 64, 64, None, 0, true),
        (6, 3, 32, 40, Some(5.0), 0, true),
        (1, 1, 64, 64, None, 3, true),
    ];
    for (ci, &(n_head, n_head_kv, dk, dv, cap, swa, with_sinks)) in cases.iter().enumerate() {
        let shape = AttnShape {
            n_head,
            n_head_kv,
            head_dim_k: dk,
            head_dim_v: dv,
        };
        let group = n_head / n_head_kv;
        let n_pos = 53; // not whole key blocks
        let k_src: Vec<f32> = rand(n_pos * shape.k_row(), 11 + ci as u64)
            .iter()
            .map(|&x| x * 2.0)
            .collect();
        let v_src = rand(n_pos * shape.v_row(), 21 + ci as u64);
        let q_src = rand(n_pos * n_head * dk, 31 + ci as u64);
        // from far below the scores (no effect) to far above them (the output shrinks)
        let sinks: Vec<f32> = (0..n_head)
            .map(|h| [-20.0, 0.5, 8.0, -1.0, 2.0, 30.0][(h + ci) % 6])
            .collect();
        let sinks = with_sinks.then_some(&sinks[..]);
        let scale = 1.0 / libm::sqrtf(dk as f32);
        for k_type in KvType::ALL {
            for v_type in KvType::ALL {
                if dv % v_type.block() != 0 {
                    continue;
                }
                let (k, k64) = Stored::new(k_type, &k_src);
                let (v, v64) = Stored::new(v_type, &v_src);
                let mut reference: Vec<Vec<f32>> = Vec::new();
                for kern in core::iter::once(&scalar).chain(&tables) {
                    let mut s = FlashScratch::new(shape);
                    let tokens = flash::tile_tokens(group);
                    let mut outs = Vec::new();
                    // the last tokens of the cache, one tile per KV head and run of tokens
                    for t0 in (n_pos.saturating_sub(2 * tokens + 1)..n_pos).step_by(tokens) {
                        for g in 0..n_head_kv {
                            let rows: Vec<(usize, usize)> = (t0..(t0 + tokens).min(n_pos))
                                .flat_map(|t| (g * group..(g + 1) * group).map(move |h| (t, h)))
                                .collect();
                            for (r, &(t, h)) in rows.iter().enumerate() {
                                let (q, w) = s.query(r);
                                q.copy_from_slice(&q_src[(t * n_head + h) * dk..][..dk]);
                                let start = if swa > 0 {
                                    (t + 1).saturating_sub(swa)
                                } else {
                                    0
                                };
                                *w = start..t + 1;
                            }
                            let tile = Tile {
                                keys: k.view(),
                                k_head: HeadRows {
                                    row: shape.k_row(),
                                    at: g * dk,
                                    dim: dk,
                                },
                                values: v.view(),
                                v_head: HeadRows {
                                    row: shape.v_row(),
                                    at: g * dv,
                                    dim: dv,
                                },
                                scale,
                                softcap: cap,
                                n_rows: rows.len(),
                                sinks: sinks.map(|s| &s[g * group..(g + 1) * group]),
                                blocks: None,
                            };
                            (kern.flash())(kern.f16_ops(), &tile, &mut s);
                            for (r, &(t, h)) in rows.iter().enumerate() {
                                let start = if swa > 0 {
                                    (t + 1).saturating_sub(swa)
                                } else {
                                    0
                                };
                                let want = naive(
                                    &q_src[(t * n_head + h) * dk..][..dk],
                                    &k64,
                                    &v64,
                                    (shape.k_row(), shape.v_row()),
                                    (g * dk, g * dv),
                                    dv,
                                    start..t + 1,
                                    scale,
                                    cap,
                                    sinks.map(|s| s[h]),
                                );
                                let got = s.output(r);
                                for (d, (&g, &w)) in got.iter().zip(&want).enumerate() {
                                    assert!(
                                        (g as f64 - w).abs() < 1e-5,
                                        "{} case {ci} K {k_type} V {v_type} token {t} head {h} \
                                         dim {d}: {g} vs {w}",
                                        kern.isa().name()
                                    );
                                }
                                outs.push(got.to_vec());
                            }
                        }
                    }
                    // every instance: the same fused arithmetic and exponential, the same bits
                    if reference.is_empty() {
                        reference = outs;
                    } else {
                        let same = reference
                            .iter()
                            .flatten()
                            .zip(outs.iter().flatten())
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(
                            same,
                            "{} differs from scalar (case {ci}, K {k_type} V {v_type})",
                            kern.isa().name()
                        );
                    }
                }
            }
        }
    }
}
