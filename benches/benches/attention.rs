//! Prompt attention on its own: the flash tiles of a 512-token prompt (causal, F16 cache,
//! every tile of every KV head as a prompt batch runs them, one thread), for the head shapes
//! of Qwen2.5-0.5B (14 heads over 2 KV heads of 64) and Gemma-3-270M (4 heads over 1 KV head
//! of 256), one layer, reported as tokens per second. A decode step at depth 2048 (one
//! token's heads against 2048 cached positions) of each is the third and fourth case.
//!
//! `SUPERINFER_BENCH_ISAS=avx2,avx512` picks kernel tables (default: the best one).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;

use half::f16;
use superinfer_benches::{tables_from_env, Rng};
use superinfer_runtime::core::ops::attention::flash::{tile_tokens, FlashScratch, Tile};
use superinfer_runtime::core::ops::attention::{AttnShape, HeadRows, KvView};

/// (label, query heads, KV heads, head size, tokens attending, cached positions before them)
const CASES: [(&str, usize, usize, usize, usize, usize); 4] = [
    ("qwen05b-pp512", 14, 2, 64, 512, 0),
    ("gemma270m-pp512", 4, 1, 256, 512, 0),
    ("qwen05b-tg@d2048", 14, 2, 64, 1, 2048),
    ("gemma270m-tg@d2048", 4, 1, 256, 1, 2048),
];

fn attention_bench(c: &mut Criterion) {
    let tables = tables_from_env();
    let mut group = c.benchmark_group("attention");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (label, n_head, n_kv, d, n, depth) in CASES {
        let shape = AttnShape {
            n_head,
            n_head_kv: n_kv,
            head_dim_k: d,
            head_dim_v: d,
        };
        let n_pos = depth + n;
        let mut rng = Rng::new(5);
        let cache = |rng: &mut Rng| -> Vec<f16> {
            rng.vec(n_pos * shape.k_row())
                .into_iter()
                .map(f16::from_f32)
                .collect()
        };
        let (k, v) = (cache(&mut rng), cache(&mut rng));
        let q = rng.vec(n * n_head * d);
        let group_heads = n_head / n_kv;
        let tokens = tile_tokens(group_heads);
        group.throughput(Throughput::Elements(n as u64));
        for (isa, kern) in &tables {
            let mut s = FlashScratch::new(shape);
            let id = BenchmarkId::new(label, isa.name());
            group.bench_function(id, |b| {
                b.iter(|| {
                    for t0 in (0..n).step_by(tokens) {
                        for g in 0..n_kv {
                            let mut rows = 0;
                            for t in t0..(t0 + tokens).min(n) {
                                for h in g * group_heads..(g + 1) * group_heads {
                                    let (qr, w) = s.query(rows);
                                    qr.copy_from_slice(&q[(t * n_head + h) * d..][..d]);
                                    *w = 0..depth + t + 1;
                                    rows += 1;
                                }
                            }
                            let head = HeadRows {
                                row: shape.k_row(),
                                at: g * d,
                                dim: d,
                            };
                            let tile = Tile {
                                keys: KvView::F16(&k),
                                k_head: head,
                                values: KvView::F16(&v),
                                v_head: head,
                                scale: 1.0 / (d as f32).sqrt(),
                                softcap: None,
                                n_rows: rows,
                                sinks: None,
                                blocks: None,
                            };
                            (kern.flash())(kern.f16_ops(), &tile, &mut s);
                        }
                    }
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, attention_bench);
criterion_main!(benches);
