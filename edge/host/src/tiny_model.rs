//! The tiny llama model the firmware embeds: random weights (seeded xorshift, quantized to
//! Q8_0) under a real vocabulary, the first tokens of another GGUF's byte-level BPE
//! vocabulary (Qwen2.5's: its 256 byte tokens, then the tokens of its first merges, so the
//! merges that build them are kept too) plus its end-of-text token. The same inputs give
//! the same bytes.

use superinfer_core::gguf::{keys, GgufFile, GgufWriter, MetaValue, Value};
use superinfer_core::quant::{self, GgmlType};

/// The model's shape.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Tokens taken from the source vocabulary (its first ids), before the end-of-text token.
    pub n_tokens: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub n_ff: usize,
    pub n_ctx_train: usize,
    pub seed: u64,
}

impl Default for Shape {
    fn default() -> Shape {
        Shape {
            n_tokens: 1024,
            n_embd: 128,
            n_layer: 4,
            n_head: 4,
            n_head_kv: 2,
            n_ff: 384,
            n_ctx_train: 512,
            seed: 20,
        }
    }
}

/// Deterministic pseudo-random numbers (xorshift64).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// GPT-2's byte → printable character mapping (how a byte-level BPE vocabulary spells bytes).
fn byte_char(b: u8) -> char {
    let printable = |b: u8| {
        (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
    };
    if printable(b) {
        return char::from(b);
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + rank).expect("256 + rank < 0xD800")
}

/// Whether a byte-level BPE token's text is whole UTF-8 characters (not a lone lead or
/// continuation byte).
fn is_whole_text(token: &str) -> bool {
    let bytes: Option<Vec<u8>> = token
        .chars()
        .map(|c| (0..=255u8).find(|&b| byte_char(b) == c))
        .collect();
    bytes.is_some_and(|b| core::str::from_utf8(&b).is_ok())
}

/// The vocabulary taken from `src`: tokens, token types and merges.
struct Vocab {
    tokens: Vec<String>,
    types: Vec<i32>,
    merges: Vec<String>,
    eos: u32,
}

fn strings<'a>(f: &GgufFile<'a>, key: &str) -> Result<Vec<&'a str>, String> {
    let arr = f.require_array(key).map_err(|e| e.to_string())?;
    arr.iter()
        .map(|v| match v {
            Value::String(s) => core::str::from_utf8(s).map_err(|e| format!("{key}: {e}")),
            _ => Err(format!("{key}: not an array of strings")),
        })
        .collect()
}

fn take_vocab(src: &GgufFile<'_>, n: usize) -> Result<Vocab, String> {
    let model = src
        .require_str(keys::TOKENIZER_MODEL)
        .map_err(|e| e.to_string())?;
    if model != "gpt2" {
        return Err(format!(
            "the vocabulary source must be a byte-level BPE (gpt2) tokenizer, not '{model}'"
        ));
    }
    let all = strings(src, keys::TOKENIZER_TOKENS)?;
    let eos = src
        .get_u64(keys::TOKENIZER_EOS_ID)
        .map_err(|e| e.to_string())?
        .ok_or("the vocabulary source has no end-of-text token")? as usize;
    if n < 256 || n >= all.len() || eos < n {
        return Err(format!(
            "cannot take {n} of {} tokens (at least the 256 bytes, fewer than the end-of-text id {eos})",
            all.len()
        ));
    }
    let mut tokens: Vec<String> = all[..n].iter().map(|s| s.to_string()).collect();
    let kept: std::collections::HashSet<&str> = all[..n].iter().copied().collect();
    // a merge stays when both halves and their concatenation are kept tokens
    let merges = strings(src, keys::TOKENIZER_MERGES)?
        .into_iter()
        .filter(|m| match m.get(1..).and_then(|r| r.find(' ')) {
            Some(p) => {
                let (l, r) = (&m[..p + 1], &m[p + 2..]);
                kept.contains(l) && kept.contains(r) && kept.contains(&*format!("{l}{r}"))
            }
            None => false,
        })
        .map(str::to_string)
        .collect();
    let mut types = vec![1i32; n];
    tokens.push(all[eos].to_string());
    types.push(3);
    Ok(Vocab {
        tokens,
        types,
        merges,
        eos: n as u32,
    })
}

/// Writes the model; `src` is the GGUF whose vocabulary is taken.
pub fn build(src: &[u8], s: &Shape) -> Result<Vec<u8>, String> {
    let src = GgufFile::parse(src).map_err(|e| format!("vocabulary source: {e}"))?;
    let v = take_vocab(&src, s.n_tokens)?;
    let pre = src
        .get_str(keys::TOKENIZER_PRE)
        .map_err(|e| e.to_string())?
        .unwrap_or("default");
    let n_vocab = v.tokens.len();
    // the output rows of tokens that are not whole characters are zero, so greedy text
    // rarely stops mid-character (random weights would otherwise pick lone bytes often)
    let whole: Vec<bool> = v.tokens.iter().map(|t| is_whole_text(t)).collect();
    let head_dim = s.n_embd / s.n_head;
    let mut w = GgufWriter::new();
    let k = |key: &str| format!("llama.{key}");
    w.meta("general.architecture", MetaValue::String("llama".into()))
        .meta(
            "general.name",
            MetaValue::String("superinfer edge tiny (random weights)".into()),
        )
        .meta(k("context_length"), MetaValue::U32(s.n_ctx_train as u32))
        .meta(k("embedding_length"), MetaValue::U32(s.n_embd as u32))
        .meta(k("block_count"), MetaValue::U32(s.n_layer as u32))
        .meta(k("feed_forward_length"), MetaValue::U32(s.n_ff as u32))
        .meta(k("attention.head_count"), MetaValue::U32(s.n_head as u32))
        .meta(
            k("attention.head_count_kv"),
            MetaValue::U32(s.n_head_kv as u32),
        )
        .meta(k("attention.layer_norm_rms_epsilon"), MetaValue::F32(1e-5))
        .meta(k("rope.freq_base"), MetaValue::F32(10000.0))
        .meta("tokenizer.ggml.model", MetaValue::String("gpt2".into()))
        .meta("tokenizer.ggml.pre", MetaValue::String(pre.into()))
        .meta("tokenizer.ggml.tokens", MetaValue::strings(v.tokens))
        .meta("tokenizer.ggml.token_type", MetaValue::i32s(v.types))
        .meta("tokenizer.ggml.merges", MetaValue::strings(v.merges))
        .meta("tokenizer.ggml.bos_token_id", MetaValue::U32(v.eos))
        .meta("tokenizer.ggml.eos_token_id", MetaValue::U32(v.eos))
        .meta("tokenizer.ggml.add_bos_token", MetaValue::Bool(false));

    let mut rng = Rng::new(s.seed);
    let mut matrix = |w: &mut GgufWriter, name: &str, rows: usize, cols: usize| {
        let scale = 1.7 / (cols as f32).sqrt();
        let mut vals: Vec<f32> = (0..rows * cols).map(|_| rng.uniform() * scale).collect();
        if name == "output.weight" {
            for (row, _) in whole.iter().enumerate().filter(|(_, &w)| !w) {
                vals[row * cols..(row + 1) * cols].fill(0.0);
            }
        }
        let ty = GgmlType::Q8_0;
        let row_bytes = ty.bytes_for(cols as u64).unwrap() as usize;
        let mut data = vec![0u8; row_bytes * rows];
        for (r, out) in data.chunks_mut(row_bytes).enumerate() {
            quant::quantize_row(ty, &vals[r * cols..(r + 1) * cols], out).unwrap();
        }
        w.tensor(name, &[cols as u64, rows as u64], ty, data)
            .unwrap();
    };
    let mut rng2 = Rng::new(s.seed ^ 0xABCD);
    let mut norm = |w: &mut GgufWriter, name: &str, n: usize| {
        let vals: Vec<f32> = (0..n).map(|_| 1.0 + 0.2 * rng2.uniform()).collect();
        w.tensor_f32(name, &[n as u64], &vals).unwrap();
    };
    let (q, kv) = (s.n_head * head_dim, s.n_head_kv * head_dim);
    matrix(&mut w, "token_embd.weight", n_vocab, s.n_embd);
    norm(&mut w, "output_norm.weight", s.n_embd);
    matrix(&mut w, "output.weight", n_vocab, s.n_embd);
    for il in 0..s.n_layer {
        let n = |x: &str| format!("blk.{il}.{x}");
        norm(&mut w, &n("attn_norm.weight"), s.n_embd);
        matrix(&mut w, &n("attn_q.weight"), q, s.n_embd);
        matrix(&mut w, &n("attn_k.weight"), kv, s.n_embd);
        matrix(&mut w, &n("attn_v.weight"), kv, s.n_embd);
        matrix(&mut w, &n("attn_output.weight"), s.n_embd, q);
        norm(&mut w, &n("ffn_norm.weight"), s.n_embd);
        matrix(&mut w, &n("ffn_gate.weight"), s.n_ff, s.n_embd);
        matrix(&mut w, &n("ffn_up.weight"), s.n_ff, s.n_embd);
        matrix(&mut w, &n("ffn_down.weight"), s.n_embd, s.n_ff);
    }
    w.finish().map_err(|e| e.to_string())
}
