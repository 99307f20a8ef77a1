//! Tiny synthetic GGUF models, written by the tests themselves: random weights in any
//! format, a byte-level BPE vocabulary, and the metadata of a chosen architecture.

use superinfer_runtime::core::gguf::{GgufWriter, MetaValue};
use superinfer_runtime::core::quant::{self, GgmlType};

/// What to build.
#[derive(Debug, Clone)]
pub struct Spec {
    pub arch: &'static str,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub n_ctx_train: usize,
    pub weight_type: GgmlType,
    pub qkv_bias: bool,
    /// Standard deviation of the random k / v biases (the q bias's is 0.3).
    pub kv_bias_scale: f32,
    pub qk_norm: bool,
    pub post_norms: bool,
    pub tied: bool,
    pub sliding_window: usize,
    /// YaRN RoPE scaling: (factor, original context length).
    pub yarn: Option<(f32, usize)>,
    /// Attention sinks (`attn_sinks.weight`, one logit per query head) in every layer.
    pub attn_sinks: bool,
    pub seed: u64,
    /// A mixture of experts in every layer instead of the dense FFN.
    pub experts: Option<MoeSpec>,
}

/// The experts of a synthetic mixture.
#[derive(Debug, Clone, Copy)]
pub struct MoeSpec {
    pub n_expert: usize,
    pub n_used: usize,
    /// Each expert's feed-forward width.
    pub n_ff: usize,
    /// A shared expert with its sigmoid gate (qwen2moe).
    pub shared: bool,
}

impl Spec {
    pub fn llama() -> Spec {
        Spec {
            arch: "llama",
            n_embd: 256,
            n_layer: 2,
            n_head: 4,
            n_head_kv: 2,
            head_dim: 64,
            n_ff: 512,
            n_ctx_train: 256,
            weight_type: GgmlType::Q8_0,
            qkv_bias: false,
            kv_bias_scale: 0.3,
            qk_norm: false,
            post_norms: false,
            tied: false,
            sliding_window: 0,
            yarn: None,
            attn_sinks: false,
            seed: 1,
            experts: None,
        }
    }

    /// Qwen3-MoE: QK-norm, 8 experts of which each token uses 2, renormalised.
    pub fn qwen3moe() -> Spec {
        Spec {
            arch: "qwen3moe",
            qk_norm: true,
            experts: Some(MoeSpec {
                n_expert: 8,
                n_used: 2,
                n_ff: 128,
                shared: false,
            }),
            ..Spec::llama()
        }
    }

    /// Qwen2-MoE: q/k/v biases, 8 experts top-4 unnormalised, and a shared expert.
    pub fn qwen2moe() -> Spec {
        Spec {
            arch: "qwen2moe",
            qkv_bias: true,
            experts: Some(MoeSpec {
                n_expert: 8,
                n_used: 4,
                n_ff: 256,
                shared: true,
            }),
            ..Spec::llama()
        }
    }

    /// Mixtral: llama with 4 experts top-2.
    pub fn mixtral() -> Spec {
        Spec {
            experts: Some(MoeSpec {
                n_expert: 4,
                n_used: 2,
                n_ff: 256,
                shared: false,
            }),
            ..Spec::llama()
        }
    }

    pub fn qwen2() -> Spec {
        Spec {
            arch: "qwen2",
            qkv_bias: true,
            ..Spec::llama()
        }
    }

    pub fn gemma3() -> Spec {
        Spec {
            arch: "gemma3",
            n_layer: 7,
            n_head_kv: 1,
            head_dim: 32,
            qk_norm: true,
            post_norms: true,
            tied: true,
            sliding_window: 4,
            ..Spec::llama()
        }
    }
}

/// Deterministic pseudo-random numbers (xorshift) for weights.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// GPT-2's byte → printable character mapping (the vocabulary's spelling of raw bytes).
pub fn byte_char(b: u8) -> char {
    let printable = |b: u8| {
        (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
    };
    if printable(b) {
        return char::from(b);
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + rank).unwrap()
}

/// Number of tokens of the synthetic vocabulary: 256 bytes, a few merges, 2 specials.
pub fn vocab() -> (Vec<String>, Vec<String>, Vec<i32>) {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    let sp = byte_char(b' ');
    let merges_src = [
        ("t", "h"),
        ("th", "e"),
        (&*sp.to_string(), "the"),
        ("i", "n"),
        ("a", "n"),
        ("e", "r"),
    ];
    let mut merges = Vec::new();
    for (a, b) in merges_src {
        merges.push(format!("{a} {b}"));
        tokens.push(format!("{a}{b}"));
    }
    let mut types = vec![1i32; tokens.len()];
    tokens.push("<|bos|>".into());
    types.push(3);
    tokens.push("<|eos|>".into());
    types.push(3);
    (tokens, merges, types)
}

fn randn(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.uniform() * scale).collect()
}

/// Builds the model file.
pub fn build(s: &Spec) -> Vec<u8> {
    let mut rng = Rng::new(s.seed);
    let (tokens, merges, types) = vocab();
    let n_vocab = tokens.len();
    let mut w = GgufWriter::new();
    let a = s.arch;
    let k = |key: &str| format!("{a}.{key}");
    w.meta("general.architecture", MetaValue::String(a.into()))
        .meta("general.name", MetaValue::String(format!("synthetic {a}")))
        .meta(k("context_length"), MetaValue::U32(s.n_ctx_train as u32))
        .meta(k("embedding_length"), MetaValue::U32(s.n_embd as u32))
        .meta(k("block_count"), MetaValue::U32(s.n_layer as u32))
        .meta(k("feed_forward_length"), MetaValue::U32(s.n_ff as u32))
        .meta(k("attention.head_count"), MetaValue::U32(s.n_head as u32))
        .meta(
            k("attention.head_count_kv"),
            MetaValue::U32(s.n_head_kv as u32),
        )
        .meta(k("attention.key_length"), MetaValue::U32(s.head_dim as u32))
        .meta(
            k("attention.value_length"),
            MetaValue::U32(s.head_dim as u32),
        )
        .meta(k("attention.layer_norm_rms_epsilon"), MetaValue::F32(1e-6))
        .meta(k("rope.freq_base"), MetaValue::F32(10000.0))
        .meta("tokenizer.ggml.model", MetaValue::String("gpt2".into()))
        .meta("tokenizer.ggml.pre", MetaValue::String("qwen2".into()))
        .meta("tokenizer.ggml.tokens", MetaValue::strings(tokens))
        .meta("tokenizer.ggml.token_type", MetaValue::i32s(types))
        .meta("tokenizer.ggml.merges", MetaValue::strings(merges))
        .meta(
            "tokenizer.ggml.bos_token_id",
            MetaValue::U32(n_vocab as u32 - 2),
        )
        .meta(
            "tokenizer.ggml.eos_token_id",
            MetaValue::U32(n_vocab as u32 - 1),
        )
        .meta("tokenizer.ggml.add_bos_token", MetaValue::Bool(true));
    if let Some(e) = &s.experts {
        w.meta(k("expert_count"), MetaValue::U32(e.n_expert as u32))
            .meta(k("expert_used_count"), MetaValue::U32(e.n_used as u32))
            .meta(
                k("expert_feed_forward_length"),
                MetaValue::U32(e.n_ff as u32),
            );
        if e.shared {
            w.meta(
                k("expert_shared_feed_forward_length"),
                MetaValue::U32(s.n_ff as u32),
            );
        }
    }
    if let Some((factor, n_orig)) = s.yarn {
        w.meta(k("rope.scaling.type"), MetaValue::String("yarn".into()))
            .meta(k("rope.scaling.factor"), MetaValue::F32(factor))
            .meta(
                k("rope.scaling.original_context_length"),
                MetaValue::U32(n_orig as u32),
            );
    }
    if s.sliding_window > 0 {
        w.meta(
            k("attention.sliding_window"),
            MetaValue::U32(s.sliding_window as u32),
        );
    }

    // random weights of any shape: `dims[0]` columns, the other dimensions rows
    let mut matrix = |w: &mut GgufWriter, name: &str, dims: &[u64], ty: GgmlType| {
        let cols = dims[0] as usize;
        let rows = dims[1..].iter().product::<u64>() as usize;
        let scale = 1.0 / (cols as f32).sqrt() * 1.7;
        let vals = randn(&mut rng, rows * cols, scale);
        let row_bytes = ty.bytes_for(cols as u64).unwrap() as usize;
        let mut data = vec![0u8; row_bytes * rows];
        for (r, out) in data.chunks_mut(row_bytes).enumerate() {
            quant::quantize_row(ty, &vals[r * cols..(r + 1) * cols], out).unwrap();
        }
        w.tensor(name, dims, ty, data).unwrap();
    };

    let mut rng2 = Rng::new(s.seed ^ 0xABCD);
    let mut norm = |w: &mut GgufWriter, name: &str, n: usize| {
        let vals: Vec<f32> = (0..n).map(|_| 1.0 + 0.2 * rng2.uniform()).collect();
        w.tensor_f32(name, &[n as u64], &vals).unwrap();
    };

    let (q, kv) = (s.n_head * s.head_dim, s.n_head_kv * s.head_dim);
    let wt = s.weight_type;
    matrix(
        &mut w,
        "token_embd.weight",
        &[s.n_embd as u64, n_vocab as u64],
        GgmlType::Q8_0,
    );
    norm(&mut w, "output_norm.weight", s.n_embd);
    if !s.tied {
        matrix(
            &mut w,
            "output.weight",
            &[s.n_embd as u64, n_vocab as u64],
            wt,
        );
    }
    for il in 0..s.n_layer {
        let n = |x: &str| format!("blk.{il}.{x}");
        norm(&mut w, &n("attn_norm.weight"), s.n_embd);
        matrix(
            &mut w,
            &n("attn_q.weight"),
            &[s.n_embd as u64, q as u64],
            wt,
        );
        matrix(
            &mut w,
            &n("attn_k.weight"),
            &[s.n_embd as u64, kv as u64],
            wt,
        );
        matrix(
            &mut w,
            &n("attn_v.weight"),
            &[s.n_embd as u64, kv as u64],
            wt,
        );
        matrix(
            &mut w,
            &n("attn_output.weight"),
            &[q as u64, s.n_embd as u64],
            wt,
        );
        if s.qkv_bias {
            for (b, len, scale) in [
                ("attn_q.bias", q, 0.3),
                ("attn_k.bias", kv, s.kv_bias_scale),
                ("attn_v.bias", kv, s.kv_bias_scale),
            ] {
                let v = randn(
                    &mut Rng::new(s.seed + il as u64 * 7 + len as u64),
                    len,
                    scale,
                );
                w.tensor_f32(n(b), &[len as u64], &v).unwrap();
            }
        }
        if s.attn_sinks {
            // around the scores' range: some heads' sinks dominate, some barely count
            let v = randn(&mut Rng::new(s.seed ^ (il as u64 + 99)), s.n_head, 3.0);
            w.tensor_f32(n("attn_sinks.weight"), &[s.n_head as u64], &v)
                .unwrap();
        }
        if s.qk_norm {
            norm(&mut w, &n("attn_q_norm.weight"), s.head_dim);
            norm(&mut w, &n("attn_k_norm.weight"), s.head_dim);
        }
        if s.post_norms {
            norm(&mut w, &n("post_attention_norm.weight"), s.n_embd);
            norm(&mut w, &n("post_ffw_norm.weight"), s.n_embd);
        }
        norm(&mut w, &n("ffn_norm.weight"), s.n_embd);
        let Some(e) = &s.experts else {
            matrix(
                &mut w,
                &n("ffn_gate.weight"),
                &[s.n_embd as u64, s.n_ff as u64],
                wt,
            );
            matrix(
                &mut w,
                &n("ffn_up.weight"),
                &[s.n_embd as u64, s.n_ff as u64],
                wt,
            );
            matrix(
                &mut w,
                &n("ffn_down.weight"),
                &[s.n_ff as u64, s.n_embd as u64],
                wt,
            );
            continue;
        };
        let (d, f, x) = (s.n_embd as u64, e.n_ff as u64, e.n_expert as u64);
        matrix(
            &mut w,
            &n("ffn_gate_inp.weight"),
            &[s.n_embd as u64, e.n_expert as u64],
            GgmlType::F32,
        );
        for (name, dims) in [
            ("ffn_gate_exps.weight", [d, f, x]),
            ("ffn_up_exps.weight", [d, f, x]),
            ("ffn_down_exps.weight", [f, d, x]),
        ] {
            matrix(&mut w, &n(name), &dims, wt);
        }
        if e.shared {
            matrix(&mut w, &n("ffn_gate_inp_shexp.weight"), &[d], GgmlType::F32);
            matrix(
                &mut w,
                &n("ffn_gate_shexp.weight"),
                &[s.n_embd as u64, s.n_ff as u64],
                wt,
            );
            matrix(
                &mut w,
                &n("ffn_up_shexp.weight"),
                &[s.n_embd as u64, s.n_ff as u64],
                wt,
            );
            matrix(
                &mut w,
                &n("ffn_down_shexp.weight"),
                &[s.n_ff as u64, s.n_embd as u64],
                wt,
            );
        }
    }
    w.finish().unwrap()
}

/// Writes the model to a fresh temp file and returns its path.
pub fn write_temp(s: &Spec, tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("superinfer-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{tag}.gguf"));
    std::fs::write(&p, build(s)).unwrap();
    p
}
