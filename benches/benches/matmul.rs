//! Batch matrix × matrix over quantized weights (prompt processing): one thread multiplies a
//! Qwen2.5-0.5B-sized FFN matrix with 512 tokens, reported as tokens per second. Shows the
//! batch kernels (`gemm_*` over the interleaved layouts) on their own, without the rest of a
//! forward pass.
//!
//! `cargo bench -p superinfer-benches --bench matmul -- 'Q5_0'` filters by name;
//! `SUPERINFER_BENCH_FORMATS=Q5_0,Q4_K` picks formats; `SUPERINFER_BENCH_ISAS=avx2,avx512`
//! picks kernel tables (default: the best one). `SUPERINFER_BENCH_TOKENS=8` sets the tokens
//! per batch (the decode step of 8 sequences; default 512); `SUPERINFER_BENCH_SHAPES=head`
//! adds Gemma-3-270M's output matrix (262,144 × 640) and Qwen2.5-1.5B's (151,936 × 1536) to
//! the FFN shapes, `SUPERINFER_BENCH_SHAPES=moe` gpt-oss-20b's expert matrices (2880 × 2880).
//! `SUPERINFER_NO_REPACK=1` keeps every matrix in the row layout (the baseline of a new
//! interleaved layout: the one-row kernel per row and token).
//! Where the table has a kernel of several rows and tokens for a format that keeps the row
//! layout (MXFP4), the same matrix also runs without it (`rows-per-token`: the one-row kernel
//! per token), the baseline it must beat.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;

use superinfer_benches::{random_matrix, tables_from_env, Rng};
use superinfer_runtime::core::ops::matmul::{matmul, BatchAct, QMatrix};
use superinfer_runtime::core::parallel::Sequential;
use superinfer_runtime::core::quant::GgmlType;

const FORMATS: [GgmlType; 7] = [
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::MXFP4,
];

/// Tokens per batch by default (llama-bench's pp512).
const TOKENS: usize = 512;

/// (label, rows, cols): the FFN's up (gate) and down projections of Qwen2.5-0.5B.
const SHAPES: [(&str, usize, usize); 2] = [("up", 4864, 896), ("down", 896, 4864)];

/// Gemma-3-270M's output matrix (its vocabulary × its width), with `SHAPES=head`.
const HEAD: (&str, usize, usize) = ("head", 262_144, 640);

/// Qwen2.5-1.5B's (Q6_K in its Q4_K_M file; Gemma's width is no whole k-quant super-block),
/// with `SHAPES=head`.
const HEAD_1_5B: (&str, usize, usize) = ("head-1.5b", 151_936, 1536);

/// One expert's gate (or up, or down) matrix of gpt-oss-20b, with `SHAPES=moe`.
const EXPERT: (&str, usize, usize) = ("expert", 2880, 2880);

fn matmul_bench(c: &mut Criterion) {
    let formats: Vec<GgmlType> = match std::env::var("SUPERINFER_BENCH_FORMATS") {
        Ok(s) => FORMATS
            .into_iter()
            .filter(|t| s.split(',').any(|n| n.eq_ignore_ascii_case(&t.to_string())))
            .collect(),
        Err(_) => FORMATS.to_vec(),
    };
    let tables = tables_from_env();
    let tokens: usize = std::env::var("SUPERINFER_BENCH_TOKENS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(TOKENS);
    let mut shapes = SHAPES.to_vec();
    if std::env::var("SUPERINFER_BENCH_SHAPES").is_ok_and(|s| s.split(',').any(|n| n == "head")) {
        shapes.push(HEAD);
        shapes.push(HEAD_1_5B);
    }
    if std::env::var("SUPERINFER_BENCH_SHAPES").is_ok_and(|s| s.split(',').any(|n| n == "moe")) {
        shapes.push(EXPERT);
    }
    for ty in formats {
        let mut group = c.benchmark_group(format!("matmul/{ty}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Elements(tokens as u64));
        for ((label, rows, cols), (isa, k)) in shapes
            .iter()
            .copied()
            .flat_map(|s| tables.iter().map(move |t| (s, t)))
        {
            if !cols.is_multiple_of(ty.block_len()) {
                continue;
            }
            let data = random_matrix(ty, rows, cols, 7);
            let mut w = QMatrix::new(ty, rows, cols, &data).unwrap();
            let no_repack = std::env::var("SUPERINFER_NO_REPACK").is_ok_and(|v| v == "1");
            let layout = if !no_repack && w.interleave(k).unwrap() {
                "x8"
            } else {
                "rows"
            };
            let x = Rng::new(11).vec(tokens * cols);
            let mut act = BatchAct::default();
            act.quantize(k, &Sequential, w.act_type(), &x, tokens)
                .unwrap();
            let mut out = vec![0f32; tokens * rows];
            let id = BenchmarkId::new(label, format!("{}-{layout}", isa.name()));
            group.bench_function(id, |b| {
                b.iter(|| matmul(k, &Sequential, &w, &act, tokens, &mut out).unwrap())
            });
            if layout == "rows" && k.vec_dot_rows(ty).is_some() {
                let mut one = k.clone();
                one.clear_vec_dot_rows(ty);
                let id = BenchmarkId::new(label, format!("{}-rows-per-token", isa.name()));
                group.bench_function(id, |b| {
                    b.iter(|| matmul(&one, &Sequential, &w, &act, tokens, &mut out).unwrap())
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, matmul_bench);
criterion_main!(benches);
