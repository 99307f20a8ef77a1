//! IQ4_XS and IQ4_NL on a real model: Qwen2.5-0.5B requantized by `tests/src/iq4.rs` (our
//! quantizers, which write ggml's bytes), its perplexity over the first chunks of the GPL-3
//! text against llama-perplexity's on the same file (tests/fixtures/qwen2.5-coder-0.5b/
//! iq4-perplexity.json; how it was made: tests/fixtures/README.md).

use superinfer_runtime::core::gguf::GgufFile;
use superinfer_runtime::core::quant::GgmlType;
use superinfer_runtime::{perplexity, Engine, EngineOptions, PerplexityOptions};
use superinfer_tests::iq4::iq4_qwen05b;
use superinfer_tests::*;

#[test]
fn qwen05b_iq4_perplexity_matches_llama_cpp() {
    let path = iq4_qwen05b();
    let bytes = std::fs::read(&path).unwrap();
    let f = GgufFile::parse(&bytes).unwrap();
    let count = |ty| f.tensors().iter().filter(|t| t.ty == ty).count();
    // 24 FFN down projections in IQ4_XS; q, k, v, o, gate, up of 24 layers and the token
    // embeddings in IQ4_NL
    assert_eq!(count(GgmlType::IQ4_XS), 24);
    assert_eq!(count(GgmlType::IQ4_NL), 6 * 24 + 1);
    drop(bytes);

    let reference = fixture(QWEN_05B, "iq4-perplexity.json");
    let e = Engine::load(
        &path,
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(fixtures_dir().join("texts/gpl-3.txt")).unwrap();
    let tokens = e.tokenizer().encode(&text, true, false).unwrap();
    let chunks = reference["n_chunks"].as_u64().unwrap() as usize;
    let opts = PerplexityOptions {
        n_ctx: reference["ctx"].as_u64().unwrap() as usize,
        max_chunks: chunks,
        ..Default::default()
    };
    let p = perplexity(&e, &tokens, &opts, |_| {}).unwrap();
    assert_eq!(p.chunks, chunks);
    let (want, want_se) = (
        reference["ppl"].as_f64().unwrap(),
        reference["ppl_stderr"].as_f64().unwrap(),
    );
    let rel = (p.ppl() - want).abs() / want;
    let se = p.stderr().unwrap();
    eprintln!(
        "IQ4 Qwen2.5-0.5B: PPL {:.4} +/- {se:.5} (llama.cpp {want} +/- {want_se}), {:.3}% apart",
        p.ppl(),
        100.0 * rel
    );
    assert!(rel < 0.005, "PPL {} vs llama.cpp {want}", p.ppl());
    assert!(
        (se - want_se).abs() / want_se < 0.05,
        "stderr {se} vs {want_se}"
    );
}
