//! Speed of the row-layout matrix kernels on this target, in GB/s of weights: one token
//! (`matvec`, a decode step) and N tokens (`matmul`, a prompt batch: weight bytes × tokens
//! per second), one thread, through the engine's own `ops::matmul` entry points.
//!
//! Built for wasm32-wasip1 and run under Node by `benches/wasm-kernels.sh` (the browser
//! package's kernels: row layout, no repack); natively it times the best table, in the
//! interleaved layout where that table has one. Arguments: formats to time (`Q5_0 Q8_0`),
//! default Q4_0 Q5_0 Q8_0 Q4_K Q6_K.

use std::time::{Duration, Instant};

use superinfer_core::kernels::{self, CpuFeatures};
use superinfer_core::ops::matmul::{matmul, matvec, ActBuf, BatchAct, QMatrix};
use superinfer_core::parallel::Sequential;
use superinfer_core::quant::{self, GgmlType};

/// (label, rows, cols): Qwen2.5-0.5B's FFN down projection (a few MB: L3 on a desktop core),
/// 128 rows of 1536 columns (about 100-200 KB: L2) and rows of 4864 columns filling 128 MB
/// (rows 0: from DRAM, like a decode step's weights). Columns in whole k-quant blocks.
const SHAPES: [(&str, usize, usize); 3] = [("l2", 128, 1536), ("l3", 896, 4864), ("dram", 0, 4864)];
/// Token counts of the batch runs (the browser package prefills 64 tokens a call).
const TOKENS: [usize; 2] = [8, 64];

struct Rng(u64);

impl Rng {
    fn f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

/// Median seconds of `f` over runs filling about a quarter second.
fn time(mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut once = 0;
    while start.elapsed() < Duration::from_millis(30) {
        f();
        once += 1;
    }
    let per = start.elapsed().as_secs_f64() / once as f64;
    let reps = ((0.05 / per) as usize).max(1);
    let mut t: Vec<f64> = (0..5)
        .map(|_| {
            let s = Instant::now();
            for _ in 0..reps {
                f();
            }
            s.elapsed().as_secs_f64() / reps as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let formats: Vec<GgmlType> = if args.is_empty() {
        use GgmlType::*;
        vec![Q4_0, Q5_0, Q8_0, Q4_K, Q6_K]
    } else {
        args.iter()
            .map(|a| GgmlType::from_name(a).unwrap_or_else(|| panic!("unknown format {a}")))
            .collect()
    };
    let k = kernels::select(&CpuFeatures::detect(), None).expect("a kernel table");
    println!(
        "kernel_speed: isa {}, GB/s of weights (N tokens: bytes x N / s), one thread",
        k.isa().name()
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for ty in formats {
        for (label, rows, cols) in SHAPES {
            let row_bytes = ty.bytes_for(cols as u64).unwrap() as usize;
            let rows = if rows == 0 {
                (128 << 20) / row_bytes / 8 * 8
            } else {
                rows
            };
            let mut data = vec![0u8; rows * row_bytes];
            // 64 distinct rows, repeated (quantizing 128 MB would take longer than timing it)
            for (r, row) in data.chunks_exact_mut(row_bytes).enumerate() {
                if r < 64 {
                    let x: Vec<f32> = (0..cols).map(|_| rng.f32()).collect();
                    quant::quantize_row(ty, &x, row).unwrap();
                }
            }
            for r in 64..rows {
                data.copy_within(
                    (r % 64) * row_bytes..(r % 64 + 1) * row_bytes,
                    r * row_bytes,
                );
            }
            let mut w = QMatrix::new(ty, rows, cols, &data).unwrap();
            w.interleave(&k).unwrap();
            let nmax = TOKENS[TOKENS.len() - 1];
            let x: Vec<f32> = (0..cols * nmax).map(|_| rng.f32()).collect();
            let mut act = ActBuf::default();
            let mut out = vec![0f32; rows * nmax];
            let xq = act.quantize(&k, w.act_type(), &x[..cols]).unwrap();
            let gb = data.len() as f64 / 1e9;
            let t1 = time(|| matvec(&k, &Sequential, &w, xq, &mut out[..rows]).unwrap());
            let mut line = format!(
                "{ty:>5} {label} {rows}x{cols} ({} KB): 1 token {:6.2}",
                data.len() >> 10,
                gb / t1
            );
            let mut batch = BatchAct::default();
            for n in TOKENS {
                batch
                    .quantize(&k, &Sequential, w.act_type(), &x[..n * cols], n)
                    .unwrap();
                let tn =
                    time(|| matmul(&k, &Sequential, &w, &batch, n, &mut out[..n * rows]).unwrap());
                line += &format!("  {n} tokens {:6.2}", gb * n as f64 / tn);
            }
            println!("{line}");
        }
    }
}
