//! Pre-tokenizer throughput (MB/s of text split into words) of gpt-4o (o200k: gpt-oss)
//! against the cl100k-shaped llama3 one and qwen2's, on two texts: English (the GPL, 35 KB,
//! repeated to 1 MiB) and the mixed-script pre-tokenizer corpus (tests/fixtures/pretokenize/
//! corpus.json's texts joined, repeated to 1 MiB: scripts, digits, emoji, marks, whitespace).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;

use superinfer_runtime::core::tokenizer::{pretokenize, Pattern};

const GPL: &str = include_str!("../../tests/fixtures/texts/gpl-3.txt");
const CORPUS: &str = include_str!("../../tests/fixtures/pretokenize/corpus.json");

fn repeat_to(text: &str, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + text.len());
    while s.len() < bytes {
        s.push_str(text);
    }
    s
}

fn pretokenize_bench(c: &mut Criterion) {
    // the corpus file is a JSON array of strings: its raw text (quotes, escapes and all) is
    // as mixed as its contents, which is what this measures
    let texts = [
        ("english", repeat_to(GPL, 1 << 20)),
        ("mixed", repeat_to(CORPUS, 1 << 20)),
    ];
    let mut group = c.benchmark_group("pretokenize");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (label, text) in &texts {
        group.throughput(Throughput::Bytes(text.len() as u64));
        for (name, p) in [
            ("gpt4o", Pattern::Gpt4o),
            ("llama3-cl100k", Pattern::Llama3),
            ("qwen2", Pattern::Qwen2),
        ] {
            group.bench_with_input(BenchmarkId::new(name, label), text, |b, t| {
                b.iter(|| pretokenize(t, p).len())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, pretokenize_bench);
criterion_main!(benches);
