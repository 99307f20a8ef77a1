//! Helpers shared by the criterion benches: random quantized matrices and the kernel tables
//! this CPU can run.

use superinfer_runtime::core::kernels::{self, Isa, Kernels};
use superinfer_runtime::core::quant::{self, GgmlType};

/// A small xorshift generator (benches need reproducible data, not good randomness).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// Uniform in [-1, 1).
    pub fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next_f32()).collect()
    }
}

/// `rows × cols` random weights quantized to `ty`.
pub fn random_matrix(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let row_bytes = ty.bytes_for(cols as u64).expect("cols fit the block size") as usize;
    let mut out = vec![0u8; rows * row_bytes];
    let mut rng = Rng::new(seed);
    // one random row pattern per 64 rows keeps setup fast for big matrices; the bytes still
    // differ per row because every row gets its own scale
    let base = rng.vec(cols);
    for (r, dst) in out.chunks_exact_mut(row_bytes).enumerate() {
        let s = 0.5 + (r % 97) as f32 / 97.0;
        let src: Vec<f32> = base
            .iter()
            .enumerate()
            .map(|(i, v)| v * s + if (i + r) % 61 == 0 { 0.7 } else { 0.0 })
            .collect();
        quant::quantize_row(ty, &src, dst).expect("quantizable");
    }
    out
}

/// Every kernel table this CPU can run, best first.
pub fn tables() -> Vec<(Isa, Kernels)> {
    let f = superinfer_runtime::cpu::detect();
    f.available()
        .into_iter()
        .filter_map(|isa| kernels::select(&f, Some(isa)).ok().map(|k| (isa, k)))
        .collect()
}

/// The kernel tables `SUPERINFER_BENCH_ISAS` names (e.g. `avx2,avx512`), or the best one.
pub fn tables_from_env() -> Vec<(Isa, Kernels)> {
    match std::env::var("SUPERINFER_BENCH_ISAS") {
        Ok(s) => tables()
            .into_iter()
            .filter(|(isa, _)| s.split(',').any(|n| n.eq_ignore_ascii_case(isa.name())))
            .collect(),
        Err(_) => tables().into_iter().take(1).collect(),
    }
}
