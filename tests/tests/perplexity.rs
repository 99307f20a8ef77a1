//! Perplexity against llama-perplexity's values in tests/fixtures (`-c 512` over the GPL-3
//! text), and the method itself on a synthetic model.

use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::perplexity::nll;
use superinfer_runtime::{perplexity, Engine, EngineOptions, PerplexityOptions, SessionOptions};
use superinfer_tests::*;

fn engine(path: &std::path::Path) -> Engine {
    Engine::load(
        path,
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Our perplexity of the GPL-3 text against llama-perplexity's recorded in the model's
/// `perplexity.json`: the whole text (`whole`: 14 chunks, minutes on two cores) or its first
/// 4 chunks (`first_4_chunks`, recorded with `--chunks 4`).
fn matches_llama_cpp(model: (&str, &str, &str), whole: bool) {
    let file = fixture(model, "perplexity.json");
    let reference = if whole {
        &file
    } else {
        &file["first_4_chunks"]
    };
    let e = engine(&require_model(model));
    let text = std::fs::read_to_string(fixtures_dir().join("texts/gpl-3.txt")).unwrap();
    let tokens = e.tokenizer().encode(&text, true, false).unwrap();
    let want_chunks = reference["n_chunks"].as_u64().unwrap() as usize;
    let opts = PerplexityOptions {
        n_ctx: file["ctx"].as_u64().unwrap() as usize,
        max_chunks: if whole { 0 } else { want_chunks },
        ..Default::default()
    };
    let mut running = Vec::new();
    let p = perplexity(&e, &tokens, &opts, |p| running.push(p.ppl())).unwrap();
    assert_eq!(p.chunks, want_chunks, "{}: chunks", model.0);
    assert_eq!(p.count, want_chunks * (opts.n_ctx / 2 - 1));
    let (want, want_se) = (
        reference["ppl"].as_f64().unwrap(),
        reference["ppl_stderr"].as_f64().unwrap(),
    );
    let rel = (p.ppl() - want).abs() / want;
    eprintln!(
        "{}: PPL {:.4} +/- {:.5} (llama.cpp {want} +/- {want_se}), {:.3}% apart; running {running:.4?}",
        model.0,
        p.ppl(),
        p.stderr().unwrap(),
        100.0 * rel
    );
    assert!(
        rel < 0.005,
        "{}: PPL {} vs llama.cpp {want}",
        model.0,
        p.ppl()
    );
    let se = p.stderr().unwrap();
    assert!(
        (se - want_se).abs() / want_se < 0.05,
        "{}: stderr {se} vs {want_se}",
        model.0
    );
}

#[test]
fn qwen05b_perplexity_matches_llama_cpp() {
    matches_llama_cpp(QWEN_05B, false);
}

#[test]
fn gemma3_perplexity_matches_llama_cpp() {
    matches_llama_cpp(GEMMA3_270M, false);
}

/// The whole text (14 chunks) on both models: about 5 minutes on two Zen 3 cores, so it runs
/// on demand (`cargo test -p superinfer-tests --test perplexity -- --ignored`), not in CI.
#[test]
#[ignore = "minutes on 2 cores: 14 chunks on two models; run with --ignored"]
fn whole_text_perplexity_matches_llama_cpp() {
    matches_llama_cpp(QWEN_05B, true);
    matches_llama_cpp(GEMMA3_270M, true);
}

/// A Q8_0 KV cache (keys and values Hadamard-rotated as llama.cpp does, and centred: see
/// `core/src/model/kv_centre.rs`) costs little: over the first 4 chunks of the text its
/// perplexity is 6.2407, 0.6% above ours with the F16 cache (6.2031) and 0.8% above
/// llama.cpp's (6.1921); over all 14 chunks it was within 0.5% of llama.cpp's F16 5.3184.
/// llama.cpp's own Q8_0 cache costs more: with the pinned build
/// (`benches/build-llama-cpp.sh`), `llama-perplexity -c 512 --chunks 4 -ctk q8_0 -ctv q8_0`
/// gives 6.4173 ± 0.44373, 3.6% above its F16 (all 14 chunks: 5.5084 against 5.3184; ours
/// gave 5.5114 there before the centring, 6.29 instead of 5.89 over the first three chunks
/// without the rotation).
#[test]
fn qwen05b_q8_0_cache_perplexity_matches_the_f16_cache() {
    const LLAMA_CPP_F16: f64 = 6.1921;
    const LLAMA_CPP_Q8_0: f64 = 6.4173;
    let e = engine(&require_model(QWEN_05B));
    let text = std::fs::read_to_string(fixtures_dir().join("texts/gpl-3.txt")).unwrap();
    let tokens = e.tokenizer().encode(&text, true, false).unwrap();
    let opts = PerplexityOptions {
        cache_type_k: KvType::Q8_0,
        cache_type_v: KvType::Q8_0,
        max_chunks: 4,
        ..Default::default()
    };
    let p = perplexity(&e, &tokens, &opts, |_| {}).unwrap().ppl();
    let rel = (p - LLAMA_CPP_F16).abs() / LLAMA_CPP_F16;
    eprintln!(
        "Q8_0 cache: PPL {p:.4} vs llama.cpp {LLAMA_CPP_F16} with F16 ({:.2}%), \
         {LLAMA_CPP_Q8_0} with Q8_0",
        100.0 * rel
    );
    assert!(
        rel < 0.012,
        "Q8_0-cache perplexity {p} vs llama.cpp's F16-cache {LLAMA_CPP_F16}"
    );
    assert!(p < LLAMA_CPP_Q8_0);
}

/// The chunked, half-scored computation equals scoring each chunk by hand from teacher-forced
/// logits (BOS in front when the model adds one), with batches smaller than a chunk.
#[test]
fn perplexity_is_the_mean_nll_of_second_halves() {
    for (spec, tag) in [
        (synth::Spec::llama(), "ppl-llama"),
        (synth::Spec::gemma3(), "ppl-gemma"),
    ] {
        let e = engine(&synth::write_temp(&spec, tag));
        let tokens: Vec<u32> = (0..70u32).map(|i| (i * 37 + 5) % 262).collect();
        let opts = PerplexityOptions {
            n_ctx: 16,
            n_batch: 4,
            ..Default::default()
        };
        let p = perplexity(&e, &tokens, &opts, |_| {}).unwrap();
        assert_eq!(p.chunks, 4);

        let bos = e.tokenizer().bos().filter(|_| e.tokenizer().add_bos());
        let (mut sum, mut n) = (0.0f64, 0);
        let mut s = e.session(&SessionOptions::with_ctx(16)).unwrap();
        for chunk in tokens.chunks_exact(16).take(4) {
            let mut input = chunk.to_vec();
            if let Some(b) = bos {
                input[0] = b;
            }
            s.reset();
            s.feed_each(&input, |j, logits| {
                if (8..15).contains(&j) {
                    sum += nll(logits, chunk[j + 1]);
                    n += 1;
                }
            })
            .unwrap();
        }
        assert_eq!(p.count, n);
        let want = (sum / n as f64).exp();
        assert!(
            (p.ppl() - want).abs() <= 1e-9 * want,
            "{tag}: {} vs {want}",
            p.ppl()
        );
    }
}

#[test]
fn perplexity_rejects_bad_options() {
    let e = engine(&synth::write_temp(&synth::Spec::llama(), "ppl-bad"));
    let tokens: Vec<u32> = (0..40).collect();
    let run = |n_ctx, n_batch| {
        let opts = PerplexityOptions {
            n_ctx,
            n_batch,
            ..Default::default()
        };
        perplexity(&e, &tokens, &opts, |_| {})
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    assert!(run(32, 32).contains("needs at least 64"), "{}", run(32, 32));
    assert!(run(16, 6).contains("must divide"), "{}", run(16, 6));
    assert!(run(1, 1).contains("too small"), "{}", run(1, 1));
}
