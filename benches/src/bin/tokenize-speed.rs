//! Tokenizer throughput: encodes a text (default: the GPL, tests/fixtures/texts/gpl-3.txt,
//! repeated to about 1 MiB) with the tokenizer of a GGUF file (a model or a vocab-only file)
//! and prints tokens/s and MB/s, best of a few rounds.
//!
//!     tokenize-speed MODEL.gguf [TEXT_FILE] [ROUNDS]

use std::time::Instant;

use superinfer_runtime::core::gguf::GgufFile;
use superinfer_runtime::core::tokenizer::Tokenizer;

const GPL: &str = include_str!("../../../tests/fixtures/texts/gpl-3.txt");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(model) = args.get(1) else {
        eprintln!("usage: tokenize-speed MODEL.gguf [TEXT_FILE] [ROUNDS]");
        std::process::exit(2);
    };
    let bytes = std::fs::read(model).unwrap_or_else(|e| panic!("{model}: {e}"));
    let file = GgufFile::parse(&bytes).unwrap_or_else(|e| panic!("{model}: {e}"));
    let tok = Tokenizer::from_gguf(&file).unwrap_or_else(|e| panic!("{model}: {e}"));
    let base = match args.get(2) {
        Some(p) => std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}")),
        None => GPL.to_string(),
    };
    let rounds: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(5);
    let mut text = String::new();
    while text.len() < 1 << 20 {
        text.push_str(&base);
    }
    let mut best = f64::MAX;
    let mut n = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        n = tok.encode(&text, false, false).expect("encode").len();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{model}: {} bytes -> {n} tokens in {:.1} ms: {:.0} tokens/s, {:.1} MB/s",
        text.len(),
        best * 1e3,
        n as f64 / best,
        text.len() as f64 / best / 1e6
    );
}
