//! Grammar mask speed at a real vocabulary: compiles the schemas of `benches/structured/`
//! (and `json_object`) for a model's tokenizer, then generates under each with random
//! logits (the allowed token with the largest one each time; forced tokens as a draft), and
//! prints the compile time and the per-token mask time the worker thread took (median, p99,
//! max over the runs' tokens), the first mask, and the tokens forced.
//!
//!     mask_speed MODEL.gguf [RUNS] [TOKENS]

use std::time::Instant;

use serde_json::Value;
use superinfer_runtime::core::generate::Constraint;
use superinfer_runtime::load_tokenizer;
use superinfer_structured::{Grammar, Grammars};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Generates `max` tokens at most under `c`; returns (tokens, forced tokens).
fn generate(
    c: &mut dyn Constraint,
    n: usize,
    is_eog: impl Fn(u32) -> bool,
    seed: u64,
    max: usize,
) -> (usize, usize) {
    let mut rng = Rng(seed | 1);
    let mut logits = vec![0f32; n];
    let (mut tokens, mut forced) = (0, 0);
    let mut draft = Vec::new();
    while tokens < max {
        draft.clear();
        c.forced(&mut draft);
        forced += draft.len();
        for _ in 0..draft.len().max(1) {
            for l in logits.iter_mut() {
                *l = (rng.next() >> 40) as f32;
            }
            if !c.mask(&mut logits) {
                return (tokens, forced);
            }
            let best = (0..n)
                .filter(|&t| logits[t].is_finite())
                .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
                .unwrap_or(0) as u32;
            if is_eog(best) {
                return (tokens, forced);
            }
            c.commit(best);
            tokens += 1;
        }
    }
    (tokens, forced)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(model) = args.get(1) else {
        eprintln!("usage: mask_speed MODEL.gguf [RUNS] [TOKENS]");
        std::process::exit(2);
    };
    let runs: u64 = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(3);
    let max: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(200);
    let tok = load_tokenizer(model.as_ref()).unwrap_or_else(|e| panic!("{model}: {e}"));
    let t = Instant::now();
    let grammars = Grammars::new(&tok);
    println!(
        "vocabulary {} tokens; token trie and parser factory {:.0} ms",
        tok.vocab_size(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/structured");
    let mut cases: Vec<(String, Grammar)> = vec![("json_object".into(), Grammar::JsonObject)];
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        cases.push((name, Grammar::JsonSchema(v["schema"].clone())));
    }
    println!(
        "{:<12} {:>10} {:>7} {:>10} {:>8} {:>8} {:>8} {:>9}",
        "grammar", "compile ms", "tokens", "forced", "med µs", "p99 µs", "max µs", "first µs"
    );
    let n = tok.vocab_size();
    let mut all = Vec::new();
    for (name, g) in cases {
        let t = Instant::now();
        let c = match grammars.compile(&g) {
            Ok(c) => c,
            Err(e) => {
                println!("{name:<12} error: {e}");
                continue;
            }
        };
        let compile = t.elapsed().as_secs_f64() * 1e3;
        let (mut tokens, mut forced) = (0, 0);
        let (mut meds, mut p99, mut mx, mut first) = (Vec::new(), 0, 0, 0);
        for seed in 0..runs {
            let mut con = c.constraint();
            let (t, f) = generate(&mut *con, n, |id| tok.is_eog(id), seed * 7919 + 1, max);
            tokens += t;
            forced += f;
            if let Some(s) = con.stats() {
                meds.push(s.median_us);
                p99 = p99.max(s.p99_us);
                mx = mx.max(s.max_us);
                first = first.max(s.first_mask_us);
                all.push(s);
            }
        }
        meds.sort_unstable();
        let med = meds.get(meds.len() / 2).copied().unwrap_or(0);
        println!(
            "{name:<12} {compile:>10.1} {tokens:>7} {forced:>10} {med:>8} {p99:>8} {mx:>8} {first:>9}"
        );
    }
    let masks: usize = all.iter().map(|s| s.masks).sum();
    println!(
        "{masks} masks; p99 over runs at most {} µs, max {} µs",
        all.iter().map(|s| s.p99_us).max().unwrap_or(0),
        all.iter().map(|s| s.max_us).max().unwrap_or(0)
    );
}
