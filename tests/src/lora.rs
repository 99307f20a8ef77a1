//! Random LoRA adapters for a base model, written in llama.cpp's GGUF LoRA format
//! (`general.type = adapter`, `adapter.type = lora`, `adapter.lora.alpha`, F16 tensors
//! `<base>.lora_a` `[n_in, r]` and `<base>.lora_b` `[r, n_out]`), byte for byte the same from
//! the same spec: the tests regenerate the adapters the fixtures in tests/fixtures/lora were
//! made with (scripts/lora/make-fixtures.sh writes them with the `lora-adapters` binary)
//! instead of committing megabytes.
//!
//! Values as PEFT initialises and training leaves them, at a scale that visibly moves the
//! logits: `A` kaiming-uniform (`±1/√n_in`, PEFT's `kaiming_uniform_(a=√5)`), `B` normal
//! with standard deviation `b_std` (a trained `B` is no longer zero), from splitmix64.

use superinfer_runtime::core::gguf::{GgufFile, GgufWriter, MetaValue};
use superinfer_runtime::core::quant::{self, GgmlType};

/// One random adapter.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    pub rank: usize,
    pub alpha: f32,
    pub b_std: f32,
    pub seed: u64,
    /// Base tensors of every layer it changes (`attn_q`, ..., `ffn_down`).
    pub targets: &'static [&'static str],
}

const ALL: &[&str] = &[
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
];

/// The adapters of the fixtures and the benchmark: ranks 8, 16, 32 and 64, on attention
/// and FFN projections (rank 32 on a subset, as adapters are often trained).
pub const SPECS: [Spec; 4] = [
    Spec {
        name: "r8",
        rank: 8,
        alpha: 16.0,
        b_std: 0.02,
        seed: 8,
        targets: ALL,
    },
    Spec {
        name: "r16",
        rank: 16,
        alpha: 32.0,
        b_std: 0.016,
        seed: 16,
        targets: ALL,
    },
    Spec {
        name: "r32",
        rank: 32,
        alpha: 32.0,
        b_std: 0.02,
        seed: 32,
        targets: &["attn_q", "attn_v", "attn_output", "ffn_down"],
    },
    Spec {
        name: "r64",
        rank: 64,
        alpha: 64.0,
        b_std: 0.012,
        seed: 64,
        targets: ALL,
    },
];

/// The spec named `name` in [`SPECS`].
pub fn spec(name: &str) -> Spec {
    *SPECS
        .iter()
        .find(|s| s.name == name)
        .expect("a known adapter")
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 24 bits.
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Standard normal (Box-Muller, in f64 for the same bits everywhere).
    fn normal(&mut self) -> f32 {
        let u1 = ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }
}

fn f16_bytes(v: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; v.len() * 2];
    quant::quantize_row(GgmlType::F16, v, &mut out).expect("F16 quantizes any length");
    out
}

/// The adapter file of `spec` for the base model `base` (its `general.architecture`, its
/// layers' shapes).
pub fn adapter(base: &GgufFile<'_>, spec: &Spec) -> Vec<u8> {
    let arch = base
        .get_str("general.architecture")
        .ok()
        .flatten()
        .expect("the base names its architecture")
        .to_string();
    let n_layer = base
        .get_u64(&format!("{arch}.block_count"))
        .ok()
        .flatten()
        .expect("the base has a block count") as usize;
    let mut w = GgufWriter::new();
    w.meta("general.architecture", MetaValue::String(arch.clone()));
    w.meta("general.type", MetaValue::String("adapter".into()));
    w.meta(
        "general.name",
        MetaValue::String(format!("random-{}", spec.name)),
    );
    w.meta("adapter.type", MetaValue::String("lora".into()));
    w.meta("adapter.lora.alpha", MetaValue::F32(spec.alpha));
    let mut rng = Rng(spec.seed);
    let r = spec.rank;
    for il in 0..n_layer {
        for t in spec.targets {
            let name = format!("blk.{il}.{t}.weight");
            let dims = &base.tensor(&name).expect("a base tensor").dims;
            let (n_in, n_out) = (dims[0] as usize, dims[1] as usize);
            let bound = 1.0 / (n_in as f32).sqrt();
            let a: Vec<f32> = (0..r * n_in)
                .map(|_| (2.0 * rng.unit() - 1.0) * bound)
                .collect();
            let b: Vec<f32> = (0..n_out * r).map(|_| rng.normal() * spec.b_std).collect();
            w.tensor(
                format!("{name}.lora_a"),
                &[n_in as u64, r as u64],
                GgmlType::F16,
                f16_bytes(&a),
            )
            .expect("A's bytes");
            w.tensor(
                format!("{name}.lora_b"),
                &[r as u64, n_out as u64],
                GgmlType::F16,
                f16_bytes(&b),
            )
            .expect("B's bytes");
        }
    }
    w.finish().expect("an adapter file")
}
