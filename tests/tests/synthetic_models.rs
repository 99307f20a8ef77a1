//! End-to-end runs on tiny synthetic models written by the test: the engine's cached,
//! quantized forward pass against the naive f64 reference, for each architecture variant.

use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::core::quant::GgmlType;
use superinfer_runtime::{Engine, EngineOptions, SessionOptions};
use superinfer_tests::reference;
use superinfer_tests::synth::{self, Spec};

fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y).sum();
    let na: f64 = a.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn check(spec: Spec, tag: &str, min_cos: f64) {
    check_cache(spec, tag, min_cos, KvType::default());
}

/// [`check`] with a KV cache of type `ty`.
fn check_cache(spec: Spec, tag: &str, min_cos: f64, ty: KvType) {
    let path = synth::write_temp(&spec, tag);
    let bytes = std::fs::read(&path).unwrap();
    let tokens: Vec<u32> = (0..14u32).map(|i| (i * 37 + 5) % 262).collect();
    let want = reference::logits_all(&bytes, &tokens);
    for threads in [1, 2] {
        let e = Engine::load(
            &path,
            &EngineOptions {
                threads,
                ..Default::default()
            },
        )
        .unwrap();
        let opts = SessionOptions {
            cache_type_k: ty,
            cache_type_v: ty,
            ..SessionOptions::with_ctx(64)
        };
        let mut s = e.session(&opts).unwrap();
        let mut worst = 1.0f64;
        s.feed_each(&tokens, |i, logits| {
            let c = cosine(logits, &want[i]);
            worst = worst.min(c);
        })
        .unwrap();
        eprintln!("{tag} ({threads} threads): worst logit cosine vs f64 reference = {worst:.6}");
        assert!(worst >= min_cos, "{tag}: cosine {worst} < {min_cos}");
    }
}

#[test]
fn llama_q8_0_matches_reference() {
    check(Spec::llama(), "llama-q8_0", 0.999);
}

#[test]
fn llama_f32_matches_reference() {
    check(
        Spec {
            weight_type: GgmlType::F32,
            ..Spec::llama()
        },
        "llama-f32",
        0.9995,
    );
}

#[test]
fn qwen2_bias_q4_k_matches_reference() {
    check(
        Spec {
            weight_type: GgmlType::Q4_K,
            ..Spec::qwen2()
        },
        "qwen2-q4_k",
        0.999,
    );
}

#[test]
fn gemma3_swa_qknorm_postnorm_tied_matches_reference() {
    check(Spec::gemma3(), "gemma3-q8_0", 0.999);
}

/// gpt-oss's attention pieces on the architectures the engine runs: YaRN RoPE (the ramp
/// between the correction dims inside the head, the magnitude on cos and sin) and
/// attention sinks, with grouped heads, and on gemma3 with sliding-window layers (unscaled,
/// but YaRN's other terms apply).
#[test]
fn yarn_and_attention_sinks_match_reference() {
    let gpt_oss_like = Spec {
        yarn: Some((4.0, 128)),
        attn_sinks: true,
        n_head: 8,
        ..Spec::qwen2()
    };
    check(gpt_oss_like, "qwen2-yarn-sinks", 0.999);
    let swa = Spec {
        yarn: Some((8.0, 64)),
        attn_sinks: true,
        ..Spec::gemma3()
    };
    check(swa, "gemma3-yarn-sinks", 0.999);
    // a quantized cache does not centre the rows of a layer with sinks (with a sink the
    // weights of the values do not sum to one, and a shift of the scores changes them)
    let biased = Spec {
        attn_sinks: true,
        kv_bias_scale: 1.0,
        ..Spec::qwen2()
    };
    check_cache(biased, "qwen2-sinks-q8_0-cache", 0.999, KvType::Q8_0);
}

#[test]
fn qwen3moe_renormalised_top2_matches_reference() {
    check(Spec::qwen3moe(), "qwen3moe-q8_0", 0.999);
}

#[test]
fn qwen2moe_shared_expert_q4_k_matches_reference() {
    check(
        Spec {
            weight_type: GgmlType::Q4_K,
            ..Spec::qwen2moe()
        },
        "qwen2moe-q4_k",
        0.999,
    );
}

#[test]
fn mixtral_q4_0_matches_reference() {
    check(
        Spec {
            weight_type: GgmlType::Q4_0,
            ..Spec::mixtral()
        },
        "mixtral-q4_0",
        0.999,
    );
}

#[test]
fn every_weight_format_runs() {
    for ty in [
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::MXFP4,
    ] {
        let spec = Spec {
            weight_type: ty,
            n_layer: 1,
            ..Spec::llama()
        };
        check(spec, &format!("llama-{}", ty.name()), 0.99);
    }
}

/// A prompt fed as one batch gives the same logits, bit for bit, as the same tokens fed one
/// at a time: batches and decode steps share the flash tiles, whose key blocks do not depend
/// on what else a tile holds (sliding windows included).
#[test]
fn batched_prompt_equals_token_by_token() {
    for (spec, tag) in [
        (Spec::llama(), "batch-llama"),
        (Spec::qwen2(), "batch-qwen2"),
        (Spec::gemma3(), "batch-gemma3"),
        (Spec::qwen3moe(), "batch-qwen3moe"),
        (
            Spec {
                weight_type: GgmlType::Q4_K,
                ..Spec::qwen2moe()
            },
            "batch-qwen2moe",
        ),
        // MXFP4 keeps the row layout: batches run its kernel of several rows and tokens
        (
            Spec {
                weight_type: GgmlType::MXFP4,
                ..Spec::llama()
            },
            "batch-llama-mxfp4",
        ),
    ] {
        let path = synth::write_temp(&spec, tag);
        let e = Engine::load(
            &path,
            &EngineOptions {
                threads: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let tokens: Vec<u32> = (0..100u32).map(|i| (i * 53 + 11) % 262).collect();
        let mut batched = Vec::new();
        let mut s = e.session(&SessionOptions::with_ctx(128)).unwrap();
        s.feed_each(&tokens, |_, l| batched.push(l.to_vec()))
            .unwrap();
        let mut s = e.session(&SessionOptions::with_ctx(128)).unwrap();
        for (i, &t) in tokens.iter().enumerate() {
            s.feed(&[t]).unwrap();
            let same = s
                .logits()
                .iter()
                .zip(&batched[i])
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{tag}: logits of token {i} differ between batch and single steps"
            );
        }
        // and the prompt's last logits through `feed` (only the last computed)
        let mut s = e.session(&SessionOptions::with_ctx(128)).unwrap();
        s.feed(&tokens).unwrap();
        assert_eq!(s.logits(), &batched[tokens.len() - 1][..], "{tag}: feed");
    }
}

/// With every KV cache type, a prompt decoded token by token on one thread, on two threads
/// (past 128 positions the attention tiles of a decode step are spread over the threads) and
/// fed in batches of 70 tokens (tiles of tokens spread over the threads) gives the same
/// logits bit for bit; and each cache type stays close to the F32 one.
#[test]
fn cache_types_agree_across_threads_and_batches() {
    let path = synth::write_temp(&Spec::llama(), "kv-types");
    let tokens: Vec<u32> = (0..150u32).map(|i| (i * 53 + 11) % 262).collect();
    let engines = [1, 2].map(|threads| {
        Engine::load(
            &path,
            &EngineOptions {
                threads,
                ..Default::default()
            },
        )
        .unwrap()
    });
    let mut f32_logits: Vec<Vec<f32>> = Vec::new();
    for ty in KvType::ALL {
        let opts = SessionOptions {
            n_ctx: 160,
            cache_type_k: ty,
            cache_type_v: ty,
        };
        let stepwise = |e: &Engine| {
            let mut s = e.session(&opts).unwrap();
            let mut out = Vec::new();
            for &t in &tokens {
                s.feed(&[t]).unwrap();
                out.push(s.logits().to_vec());
            }
            out
        };
        let one = stepwise(&engines[0]);
        let two = stepwise(&engines[1]);
        let mut batched = Vec::new();
        let mut s = engines[1].session(&opts).unwrap();
        for part in tokens.chunks(70) {
            s.feed_each(part, |_, l| batched.push(l.to_vec())).unwrap();
        }
        for (i, ((a, b), c)) in one.iter().zip(&two).zip(&batched).enumerate() {
            let bits = |x: &Vec<f32>| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(a), bits(b), "{ty}: token {i}, 1 vs 2 threads");
            assert_eq!(bits(a), bits(c), "{ty}: token {i}, batch vs single steps");
        }
        if ty == KvType::F32 {
            f32_logits = one;
        } else {
            let worst = one
                .iter()
                .zip(&f32_logits)
                .map(|(a, b)| cosine(a, &b.iter().map(|&x| x as f64).collect::<Vec<_>>()))
                .fold(1.0f64, f64::min);
            assert!(worst > 0.999, "{ty} cache vs F32: cosine {worst}");
        }
    }
}

/// Biases that dwarf the rest of the keys and values (as Qwen2.5-0.5B's layer-0 key bias
/// does) do not cost a Q8_0 cache its precision: the cache takes a fixed centre from each
/// row before quantizing (exact for the attention), so its logits stay close to the F32
/// cache's, both in one batch (tiled attention) and token by token: a worst relative
/// distance of 0.0075 here, against 0.0135 without the centring.
#[test]
fn q8_0_cache_keeps_its_precision_under_large_biases() {
    let tokens: Vec<u32> = (0..150u32).map(|i| (i * 53 + 11) % 262).collect();
    // worst relative L2 distance of Q8_0-cache logits from F32-cache logits
    let spec = Spec {
        kv_bias_scale: 300.0,
        ..Spec::qwen2()
    };
    let e = Engine::load(
        &synth::write_temp(&spec, "kv-bias"),
        &EngineOptions::default(),
    )
    .unwrap();
    let worst_error = |batch: usize| {
        let run = |ty: KvType| {
            let opts = SessionOptions {
                n_ctx: 160,
                cache_type_k: ty,
                cache_type_v: ty,
            };
            let mut s = e.session(&opts).unwrap();
            let mut out = Vec::new();
            for part in tokens.chunks(batch) {
                s.feed_each(part, |_, l| out.push(l.to_vec())).unwrap();
            }
            out
        };
        let (reference, q8) = (run(KvType::F32), run(KvType::Q8_0));
        q8.iter()
            .zip(&reference)
            .map(|(a, b)| {
                let d: f64 = a
                    .iter()
                    .zip(b)
                    .map(|(x, y)| (x - y) as f64)
                    .map(|d| d * d)
                    .sum();
                let n: f64 = b.iter().map(|&y| y as f64 * y as f64).sum();
                (d / n).sqrt()
            })
            .fold(0.0f64, f64::max)
    };
    for batch in [150, 1] {
        let error = worst_error(batch);
        eprintln!("batches of {batch}: Q8_0 vs F32 cache logits, worst relative error {error:.5}");
        assert!(error < 0.01, "batches of {batch}: {error}");
    }
}

/// `Weights::interleave_into` hands back each piece's source bytes once it is repacked (the
/// std runtime drops them from its resident set as it goes): the pieces, several per
/// matrix over 1 MiB, tile exactly the bytes of every matrix it repacks, each once.
#[test]
fn interleave_into_releases_every_repacked_source_byte_once() {
    use std::sync::Mutex;
    use superinfer_runtime::core::gguf::GgufFile;
    use superinfer_runtime::core::kernels;
    use superinfer_runtime::core::model::Weights;
    use superinfer_runtime::cpu;
    use superinfer_runtime::pool::ThreadPool;

    let spec = Spec {
        n_layer: 2,
        n_ff: 8192, // gate / up / down: 2.1 MiB of Q8_0 each, three pieces
        ..Spec::llama()
    };
    let bytes = synth::build(&spec);
    let base = bytes.as_ptr() as usize;
    let file = GgufFile::parse(&bytes).unwrap();
    let k = kernels::select(&cpu::detect(), None).unwrap();
    let mut arena = Vec::new();
    let mut w = Weights::from_gguf(&file, &k).unwrap();
    let span = |d: &[u8]| (d.as_ptr() as usize - base, d.len());
    let mut want: Vec<(usize, usize)> = w
        .matrices()
        .filter(|m| m.can_interleave(&k))
        .map(|m| span(&m.data))
        .collect();
    if want.is_empty() {
        eprintln!(
            "{}: no interleaved kernels, nothing to repack",
            k.isa().name()
        );
        return;
    }
    arena.resize(w.interleaved_size(&k), 0);
    let released = Mutex::new(Vec::new());
    let pool = ThreadPool::new(2);
    let repacked = w
        .interleave_into(&k, &mut arena, &pool, &|src| {
            released.lock().unwrap().push(span(src))
        })
        .unwrap();
    assert_eq!(repacked, want.iter().map(|&(_, n)| n).sum::<usize>());
    let mut got = released.into_inner().unwrap();
    assert!(got.len() > want.len(), "the large matrices come in pieces");
    // the pieces, in order, are back to back within one matrix and cover it exactly
    got.sort_unstable();
    want.sort_unstable();
    let mut pieces = got.into_iter().peekable();
    for (start, len) in want {
        let mut at = start;
        while at < start + len {
            let (s, n) = pieces.next().expect("a piece of every repacked byte");
            assert_eq!(
                s, at,
                "pieces of the matrix at {start} leave a gap or overlap"
            );
            assert!(n > 0);
            at += n;
        }
        assert_eq!(at, start + len, "a piece runs past the matrix at {start}");
    }
    assert_eq!(pieces.next(), None, "a piece of no repacked matrix");
}
