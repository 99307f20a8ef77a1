//! Writes a full-size model of a real architecture's shape with random weights, straight in
//! its block formats (no f32 intermediate, streamed to disk): the speed benchmarks' stand-in
//! for models that cannot be downloaded here. Both superinfer and llama.cpp load it.
//!
//!     cargo run --release -p superinfer-benches --bin synth-model -- SHAPE OUT.gguf
//!         [--layers N] [--expert-type q4_0|q4_k|q8_0|mxfp4]
//!
//! Shapes: `gpt-oss-20b` (MXFP4 experts, Q8_0 elsewhere: llama-quantize's MXFP4_MOE mix),
//! `qwen3-30b-a3b` (Q4_0 experts and attention, Q8_0 embeddings and head by default).
//! The scales are set so that each weight row has a standard deviation near `1/sqrt(cols)`,
//! which keeps activations finite through every layer.

use std::io::{BufWriter, Seek, SeekFrom, Write};

use superinfer_runtime::core::gguf::{GgufWriter, MetaValue};
use superinfer_runtime::core::quant::GgmlType;

struct Shape {
    arch: &'static str,
    n_embd: usize,
    n_layer: usize,
    n_head: usize,
    n_head_kv: usize,
    head_dim: usize,
    n_expert: usize,
    n_used: usize,
    n_ff_exp: usize,
    n_vocab: usize,
    expert_type: GgmlType,
    attn_type: GgmlType,
}

fn shape(name: &str) -> Option<Shape> {
    Some(match name {
        "gpt-oss-20b" => Shape {
            arch: "gpt-oss",
            n_embd: 2880,
            n_layer: 24,
            n_head: 64,
            n_head_kv: 8,
            head_dim: 64,
            n_expert: 32,
            n_used: 4,
            n_ff_exp: 2880,
            n_vocab: 201_088,
            expert_type: GgmlType::MXFP4,
            attn_type: GgmlType::Q8_0,
        },
        "qwen3-30b-a3b" => Shape {
            arch: "qwen3moe",
            n_embd: 2048,
            n_layer: 48,
            n_head: 32,
            n_head_kv: 4,
            head_dim: 128,
            n_expert: 128,
            n_used: 8,
            n_ff_exp: 768,
            n_vocab: 151_936,
            expert_type: GgmlType::Q4_0,
            attn_type: GgmlType::Q4_0,
        },
        _ => return None,
    })
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn fill(&mut self, out: &mut [u8]) {
        for c in out.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

/// Random blocks of `ty` for rows of `cols` values, with each block's scale fields set so a
/// row's values have a standard deviation near `1 / sqrt(cols)`.
fn random_blocks(ty: GgmlType, cols: usize, rng: &mut Rng, out: &mut [u8]) {
    let target = 1.0 / (cols as f32).sqrt();
    let f16 = |x: f32| half::f16::from_f32(x).to_le_bytes();
    if ty == GgmlType::F32 {
        for c in out.chunks_exact_mut(4) {
            let u = (rng.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
            c.copy_from_slice(&(u * target * 1.7).to_le_bytes());
        }
        return;
    }
    rng.fill(out);
    let bb = ty.block_bytes();
    for b in out.chunks_exact_mut(bb) {
        match ty {
            // value = d · q, q uniform in [-128, 127] (sd ≈ 74) / [-8, 7] (sd ≈ 4.6)
            GgmlType::Q8_0 => b[..2].copy_from_slice(&f16(target / 74.0)),
            GgmlType::Q4_0 => b[..2].copy_from_slice(&f16(target / 4.6)),
            // d · scale(≈32) · q(sd ≈ 4.6) − dmin · min(≈32)
            GgmlType::Q4_K => {
                b[..2].copy_from_slice(&f16(target / 4.6 / 32.0));
                b[2..4].copy_from_slice(&f16(target / 32.0 / 4.0));
            }
            // E8M0 scale 2^(e-128) (ggml's half) times E2M1 codes (sd ≈ 3.9)
            GgmlType::MXFP4 => {
                let e = 128.0 + (target / 3.9).log2();
                b[0] = e.round().clamp(1.0, 254.0) as u8;
            }
            _ => unreachable!("no random blocks for {ty}"),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: synth-model SHAPE OUT.gguf [--layers N] [--expert-type T]\n\
                 shapes: gpt-oss-20b, qwen3-30b-a3b";
    let (Some(name), Some(out)) = (args.first(), args.get(1)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let Some(mut s) = shape(name) else {
        eprintln!("unknown shape '{name}'\n{usage}");
        std::process::exit(2);
    };
    let mut it = args[2..].iter();
    while let Some(a) = it.next() {
        let v = it.next().unwrap_or_else(|| {
            eprintln!("{a} needs a value\n{usage}");
            std::process::exit(2)
        });
        match a.as_str() {
            "--layers" => s.n_layer = v.parse().expect("--layers N"),
            "--expert-type" => {
                s.expert_type = GgmlType::from_name(v).expect("--expert-type: a ggml type name")
            }
            _ => {
                eprintln!("unknown option {a}\n{usage}");
                std::process::exit(2);
            }
        }
    }
    if let Err(e) = write(&s, out) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn write(s: &Shape, path: &str) -> std::io::Result<()> {
    let mut w = GgufWriter::new();
    let a = s.arch;
    let k = |key: &str| format!("{a}.{key}");
    let u = |v: usize| MetaValue::U32(v as u32);
    w.meta("general.architecture", MetaValue::String(a.into()))
        .meta(
            "general.name",
            MetaValue::String(format!("synthetic {a} shape")),
        )
        .meta(k("context_length"), u(131_072))
        .meta(k("embedding_length"), u(s.n_embd))
        .meta(k("block_count"), u(s.n_layer))
        .meta(k("feed_forward_length"), u(s.n_ff_exp))
        .meta(k("attention.head_count"), u(s.n_head))
        .meta(k("attention.head_count_kv"), u(s.n_head_kv))
        .meta(k("attention.key_length"), u(s.head_dim))
        .meta(k("attention.value_length"), u(s.head_dim))
        .meta(k("attention.layer_norm_rms_epsilon"), MetaValue::F32(1e-5))
        .meta(k("expert_count"), u(s.n_expert))
        .meta(k("expert_used_count"), u(s.n_used))
        .meta(k("expert_feed_forward_length"), u(s.n_ff_exp));
    let oss = a == "gpt-oss";
    if oss {
        w.meta(k("rope.freq_base"), MetaValue::F32(150_000.0))
            .meta(k("attention.sliding_window"), u(128))
            .meta(k("rope.scaling.type"), MetaValue::String("yarn".into()))
            .meta(k("rope.scaling.factor"), MetaValue::F32(32.0))
            .meta(k("rope.scaling.original_context_length"), u(4096));
    } else {
        w.meta(k("rope.freq_base"), MetaValue::F32(1_000_000.0));
    }
    // a byte-level BPE vocabulary of the real size: the 256 byte tokens, filler, specials
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    tokens.extend((256..s.n_vocab - 2).map(|i| format!("tok{i}")));
    tokens.push("<|startoftext|>".into());
    tokens.push("<|endoftext|>".into());
    let mut types = vec![1i32; s.n_vocab];
    types[s.n_vocab - 2] = 3;
    types[s.n_vocab - 1] = 3;
    let pre = if oss { "gpt-4o" } else { "qwen2" };
    w.meta("tokenizer.ggml.model", MetaValue::String("gpt2".into()))
        .meta("tokenizer.ggml.pre", MetaValue::String(pre.into()))
        .meta("tokenizer.ggml.tokens", MetaValue::strings(tokens))
        .meta("tokenizer.ggml.token_type", MetaValue::i32s(types))
        .meta("tokenizer.ggml.merges", MetaValue::strings(["t o", "to k"]))
        .meta("tokenizer.ggml.bos_token_id", u(s.n_vocab - 2))
        .meta("tokenizer.ggml.eos_token_id", u(s.n_vocab - 1));

    // (name, dims, type) of every tensor, then the header, then the data streamed
    let (d, v) = (s.n_embd as u64, s.n_vocab as u64);
    let (q, kv) = (
        (s.n_head * s.head_dim) as u64,
        (s.n_head_kv * s.head_dim) as u64,
    );
    let (f, e) = (s.n_ff_exp as u64, s.n_expert as u64);
    let mut list: Vec<(String, Vec<u64>, GgmlType)> = vec![
        ("token_embd.weight".into(), vec![d, v], GgmlType::Q8_0),
        ("output_norm.weight".into(), vec![d], GgmlType::F32),
        ("output.weight".into(), vec![d, v], GgmlType::Q8_0),
    ];
    for il in 0..s.n_layer {
        let n = |x: &str| format!("blk.{il}.{x}");
        let at = s.attn_type;
        list.push((n("attn_norm.weight"), vec![d], GgmlType::F32));
        list.push((n("attn_q.weight"), vec![d, q], at));
        list.push((n("attn_k.weight"), vec![d, kv], at));
        list.push((n("attn_v.weight"), vec![d, kv], at));
        list.push((n("attn_output.weight"), vec![q, d], at));
        if oss {
            list.push((n("post_attention_norm.weight"), vec![d], GgmlType::F32));
            list.push((n("attn_sinks.weight"), vec![s.n_head as u64], GgmlType::F32));
            for (b, len) in [
                ("attn_q.bias", q),
                ("attn_k.bias", kv),
                ("attn_v.bias", kv),
                ("attn_output.bias", d),
            ] {
                list.push((n(b), vec![len], GgmlType::F32));
            }
            list.push((n("ffn_gate_inp.bias"), vec![e], GgmlType::F32));
            list.push((n("ffn_gate_exps.bias"), vec![f, e], GgmlType::F32));
            list.push((n("ffn_up_exps.bias"), vec![f, e], GgmlType::F32));
            list.push((n("ffn_down_exps.bias"), vec![d, e], GgmlType::F32));
        } else {
            list.push((n("ffn_norm.weight"), vec![d], GgmlType::F32));
            list.push((
                n("attn_q_norm.weight"),
                vec![s.head_dim as u64],
                GgmlType::F32,
            ));
            list.push((
                n("attn_k_norm.weight"),
                vec![s.head_dim as u64],
                GgmlType::F32,
            ));
        }
        list.push((n("ffn_gate_inp.weight"), vec![d, e], GgmlType::F32));
        list.push((n("ffn_gate_exps.weight"), vec![d, f, e], s.expert_type));
        list.push((n("ffn_up_exps.weight"), vec![d, f, e], s.expert_type));
        list.push((n("ffn_down_exps.weight"), vec![f, d, e], s.expert_type));
    }
    for (name, dims, ty) in &list {
        w.declare(name.as_str(), dims, *ty)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
    }
    let (header, offsets) = w.header();
    let file = std::fs::File::create(path)?;
    let mut out = BufWriter::with_capacity(8 << 20, file);
    out.write_all(&header)?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let total: u64 = list
        .iter()
        .map(|(_, dims, ty)| ty.bytes_for(dims.iter().product()).unwrap_or(0))
        .sum();
    let mut written = 0u64;
    let mut shown = u64::MAX;
    let mut buf = Vec::new();
    for ((name, dims, ty), off) in list.iter().zip(offsets) {
        out.seek(SeekFrom::Start(off))?;
        let bytes = ty.bytes_for(dims.iter().product()).unwrap_or(0) as usize;
        // norms are ones, sinks and biases zeros: real models' layers stay stable
        let is_norm = name.ends_with("norm.weight");
        let is_zero = name.ends_with(".bias") || name.ends_with("sinks.weight");
        // a piece of whole rows at a time
        let row = ty.bytes_for(dims[0]).unwrap_or(0) as usize;
        let piece = (64usize << 20) / row.max(1) * row.max(1);
        let mut left = bytes;
        while left > 0 {
            let n = left.min(piece.max(row));
            buf.resize(n, 0);
            if is_norm {
                buf.chunks_exact_mut(4)
                    .for_each(|c| c.copy_from_slice(&1f32.to_le_bytes()));
            } else if is_zero {
                buf.fill(0);
            } else {
                random_blocks(*ty, dims[0] as usize, &mut rng, &mut buf);
            }
            out.write_all(&buf)?;
            left -= n;
        }
        written += bytes as u64;
        let pct = 100 * written / total.max(1);
        if pct != shown {
            shown = pct;
            eprint!("\r{pct:3}% of {:.2} GB", total as f64 / 1e9);
        }
    }
    out.flush()?;
    eprintln!("\nwrote {path}");
    Ok(())
}

/// GPT-2's byte-to-unicode map (byte-level BPE token text).
fn byte_char(b: u8) -> char {
    match b {
        b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF => b as char,
        _ => {
            let mut n = 0u32;
            for c in 0..=255u8 {
                if c == b {
                    return char::from_u32(256 + n).unwrap_or('?');
                }
                if !matches!(c, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF) {
                    n += 1;
                }
            }
            '?'
        }
    }
}
