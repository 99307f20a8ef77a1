//! Matrix × vector over quantized weights, per format and ISA, reported as GB/s of weight
//! bytes: `l2` keeps the matrix in cache (the kernel's compute speed), `dram` streams a matrix
//! three times the size of a typical L3 (what token generation sees).
//!
//! `cargo bench -p superinfer-benches --bench kernels -- 'Q4_0'` filters by name.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;

use superinfer_benches::{random_matrix, tables, Rng};
use superinfer_runtime::core::ops::matmul::{matvec, ActBuf, QMatrix};
use superinfer_runtime::core::parallel::Sequential;
use superinfer_runtime::core::quant::GgmlType;
use superinfer_runtime::pool::ThreadPool;

const FORMATS: [GgmlType; 14] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::MXFP4,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::F32,
];

/// (label, rows, cols): about 0.5 MB of Q4_0 in cache, about 100 MB of weights in DRAM.
/// Rows come in whole groups of eight, so formats with an interleaved layout use it in both.
fn shapes(ty: GgmlType) -> [(&'static str, usize, usize); 2] {
    let cols = 2048;
    let row_bytes = ty.bytes_for(cols as u64).unwrap() as usize;
    let dram_rows = (100 << 20) / row_bytes / 8 * 8;
    [("l2", 256, cols), ("dram", dram_rows, cols)]
}

fn matvec_bench(c: &mut Criterion) {
    let formats: Vec<GgmlType> = match std::env::var("SUPERINFER_BENCH_FORMATS") {
        Ok(s) => FORMATS
            .into_iter()
            .filter(|t| s.split(',').any(|n| n.eq_ignore_ascii_case(&t.to_string())))
            .collect(),
        Err(_) => FORMATS.to_vec(),
    };
    let pool = ThreadPool::new(2);
    for ty in formats {
        let mut group = c.benchmark_group(format!("matvec/{ty}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        for (label, rows, cols) in shapes(ty) {
            let data = random_matrix(ty, rows, cols, 7);
            let w = QMatrix::new(ty, rows, cols, &data).unwrap();
            let x = Rng::new(11).vec(cols);
            let mut out = vec![0f32; rows];
            group.throughput(Throughput::Bytes(data.len() as u64));
            for (isa, k) in tables() {
                let mut act = ActBuf::default();
                let xq = act.quantize(&k, w.act_type(), &x).unwrap();
                // the matrix as the engine holds it: interleaved where this ISA has a kernel
                let mut w = w.clone();
                let layout = if w.interleave(&k).unwrap() {
                    "x8"
                } else {
                    "rows"
                };
                let id = |t: &str| {
                    BenchmarkId::new(format!("{label}-{t}"), format!("{}-{layout}", isa.name()))
                };
                group.bench_function(id("1t"), |b| {
                    b.iter(|| matvec(&k, &Sequential, &w, xq, &mut out).unwrap())
                });
                if label == "dram" {
                    group.bench_function(id("2t"), |b| {
                        b.iter(|| matvec(&k, &pool, &w, xq, &mut out).unwrap())
                    });
                }
            }
        }
        group.finish();
    }
}

criterion_group!(benches, matvec_bench);
criterion_main!(benches);
