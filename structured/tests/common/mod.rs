//! A small byte-level BPE tokenizer (GPT-2 style) for the tests: 256 byte tokens, merges
//! for JSON punctuation and a few words, `<|im_end|>` (control, end of generation) and
//! `<tool_call>` (control) — and helpers that drive a constraint the way a generation
//! does.

#![allow(dead_code)]

use superinfer_core::generate::Constraint;
use superinfer_core::gguf::{GgufFile, GgufWriter, MetaValue};
use superinfer_core::tokenizer::Tokenizer;

fn byte_char(b: u8) -> char {
    let printable = |b: u8| {
        (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
    };
    if printable(b) {
        return char::from(b);
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + rank).unwrap()
}

pub const IM_END: u32 = 256 + MERGES.len() as u32;
pub const TOOL_CALL: u32 = IM_END + 1;

const MERGES: &[(&str, &str)] = &[
    ("{", "\""),
    ("\"", ":"),
    ("\":", " "),
    (",", " "),
    ("n", "a"),
    ("na", "m"),
    ("nam", "e"),
    ("t", "r"),
    ("tr", "u"),
    ("tru", "e"),
];

pub fn tokenizer() -> Tokenizer {
    let enc = |s: &str| s.bytes().map(byte_char).collect::<String>();
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    let mut merges = Vec::new();
    for (a, b) in MERGES {
        merges.push(format!("{} {}", enc(a), enc(b)));
        tokens.push(format!("{}{}", enc(a), enc(b)));
    }
    let mut types = vec![1i32; tokens.len()];
    tokens.push("<|im_end|>".into());
    types.push(3);
    tokens.push("<tool_call>".into());
    types.push(3);
    let mut w = GgufWriter::new();
    w.meta("general.architecture", MetaValue::String("llama".into()))
        .meta("tokenizer.ggml.model", MetaValue::String("gpt2".into()))
        .meta("tokenizer.ggml.pre", MetaValue::String("qwen2".into()))
        .meta("tokenizer.ggml.tokens", MetaValue::strings(tokens))
        .meta("tokenizer.ggml.token_type", MetaValue::i32s(types))
        .meta("tokenizer.ggml.merges", MetaValue::strings(merges))
        .meta("tokenizer.ggml.eos_token_id", MetaValue::U32(IM_END))
        .meta("tokenizer.ggml.add_bos_token", MetaValue::Bool(false));
    let bytes = w.finish().unwrap();
    let f = GgufFile::parse(&bytes).unwrap();
    Tokenizer::from_gguf(&f).unwrap()
}

/// Tiny deterministic generator of pseudo-random numbers.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Generates under `c` with random logits until it ends (or `max` tokens): the allowed
/// token with the largest random logit each time, forced tokens taken as a draft is.
/// Returns the text and whether it ended at end of generation.
pub fn generate(tok: &Tokenizer, c: &mut dyn Constraint, seed: u64, max: usize) -> (String, bool) {
    let mut rng = Rng(seed | 1);
    let mut ids = Vec::new();
    let n = tok.vocab_size();
    let mut draft = Vec::new();
    while ids.len() < max {
        draft.clear();
        c.forced(&mut draft);
        // one "step": the pending position, then each forced token's
        let mut rows = draft.len().max(1);
        let mut i = 0;
        while rows > 0 && ids.len() < max {
            let mut logits: Vec<f32> = (0..n).map(|_| (rng.next() % 1000) as f32).collect();
            if !c.mask(&mut logits) {
                return (tok.decode(&ids, false), true);
            }
            let best = (0..n)
                .filter(|&t| logits[t].is_finite())
                .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
                .expect("the mask allowed a token") as u32;
            if let Some(&d) = draft.get(i) {
                assert_eq!(best, d, "a forced token must be the only one allowed");
            }
            if tok.is_eog(best) {
                return (tok.decode(&ids, false), true);
            }
            c.commit(best);
            ids.push(best);
            rows -= 1;
            i += 1;
        }
    }
    (tok.decode(&ids, false), false)
}
