//! Batch matrix × matrix over quantized weights (prompt processing): one thread multiplies a
//! Qwen2.5-0.5B-sized FFN matrix with 512 tokens, reported as tokens per second. Shows the
//! batch kernels (`gemm_*` over the interleaved layouts) on their own, without the rest of a
//! forward pass.
//!
//! `cargo bench -p superinfer-benches --bench matmul -- 'Q5_0'` filters by name;
//! `SUPERINFER_BENCH_FORMATS=Q5_0,Q4_K` picks formats; `SUPERINFER_BENCH_ISAS=avx2,avx512`
//! picks kernel tables (default: the best one).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;

use superinfer_benches::{random_matrix, tables_from_env, Rng};
use superinfer_runtime::core::ops::matmul::{matmul, BatchAct, QMatrix};
use superinfer_runtime::core::parallel::Sequential;
use superinfer_runtime::core::quant::GgmlType;

const FORMATS: [GgmlType; 5] = [
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
];

/// Tokens per batch (llama-bench's pp512).
const TOKENS: usize = 512;

/// (label, rows, cols): the FFN's up (gate) and down projections of Qwen2.5-0.5B.
const SHAPES: [(&str, usize, usize); 2] = [("up", 4864, 896), ("down", 896, 4864)];

fn matmul_bench(c: &mut Criterion) {
    let formats: Vec<GgmlType> = match std::env::var("SUPERINFER_BENCH_FORMATS") {
        Ok(s) => FORMATS
            .into_iter()
            .filter(|t| s.split(',').any(|n| n.eq_ignore_ascii_case(&t.to_string())))
            .collect(),
        Err(_) => FORMATS.to_vec(),
    };
    let tables = tables_from_env();
    for ty in formats {
        let mut group = c.benchmark_group(format!("matmul/{ty}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Elements(TOKENS as u64));
        for ((label, rows, cols), (isa, k)) in SHAPES
            .into_iter()
            .flat_map(|s| tables.iter().map(move |t| (s, t)))
        {
            if !cols.is_multiple_of(ty.block_len()) {
                continue;
            }
            let data = random_matrix(ty, rows, cols, 7);
            let mut w = QMatrix::new(ty, rows, cols, &data).unwrap();
            let layout = if w.interleave(k).unwrap() {
                "x8"
            } else {
                "rows"
            };
            let x = Rng::new(11).vec(TOKENS * cols);
            let mut act = BatchAct::default();
            act.quantize(k, &Sequential, w.act_type(), &x, TOKENS)
                .unwrap();
            let mut out = vec![0f32; TOKENS * rows];
            let id = BenchmarkId::new(label, format!("{}-{layout}", isa.name()));
            group.bench_function(id, |b| {
                b.iter(|| matmul(k, &Sequential, &w, &act, TOKENS, &mut out).unwrap())
            });
        }
        group.finish();
    }
}

criterion_group!(benches, matmul_bench);
criterion_main!(benches);
