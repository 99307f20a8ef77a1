//! LoRA adapters on Qwen2.5-Coder-0.5B against llama.cpp (tests/fixtures/lora, made by
//! scripts/lora/make-fixtures.sh with the pinned llama.cpp's llama_adapter_lora_init and
//! llama_set_adapters_lora): the random adapters of `superinfer_tests::lora` are regenerated
//! here byte for byte (their sha256 checked against the files llama.cpp read), and
//!
//! - teacher-forced top-1 agrees on ≥ 99% of decisive positions with mean KL ≤ 0.01 nats,
//!   for the rank-8 and rank-64 adapters and for two adapters summed (rank 8 at 1, rank 16
//!   at 0.5), while the adapters move the distribution well beyond that (KL > 0.01);
//! - the base model is unchanged by a session's adapters coming and going;
//! - a step mixing two adapters and none gives every sequence the bits it gets alone;
//! - bad adapters are typed errors naming the problem, never a panic.

use std::sync::{Arc, Mutex, OnceLock};

use superinfer_runtime::core::gguf::{GgufFile, GgufWriter, MetaValue};
use superinfer_runtime::core::model::lora::{Lora, LoraAdapter, LoraError, LoraSet};
use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::core::quant::GgmlType;
use superinfer_runtime::core::Error;
use superinfer_runtime::{Engine, SessionOptions};
use superinfer_tests::agreement::{load, sequence, teacher_forced_agrees_lora};
use superinfer_tests::batch::{bits, run_lora, Plan};
use superinfer_tests::lora::{adapter, spec};
use superinfer_tests::*;

struct Base {
    engine: Engine,
    bytes: Vec<u8>,
}

fn base() -> &'static Base {
    static B: OnceLock<Base> = OnceLock::new();
    B.get_or_init(|| {
        let path = require_model(QWEN_05B);
        Base {
            engine: load(&path, 2),
            bytes: std::fs::read(&path).unwrap(),
        }
    })
}

/// An adapter regenerated and loaded, by name.
type Loaded = (String, Arc<LoraAdapter>);

/// The adapter `name` regenerated, checked to be the file llama.cpp read.
fn adapter_of(name: &str) -> Arc<LoraAdapter> {
    static CACHE: OnceLock<Mutex<Vec<Loaded>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some((_, a)) = cache.lock().unwrap().iter().find(|(n, _)| n == name) {
        return a.clone();
    }
    let b = base();
    let f = GgufFile::parse(&b.bytes).unwrap();
    let bytes = adapter(&f, &spec(name));
    let recorded = std::fs::read_to_string(fixtures_dir().join("lora/adapters.sha256")).unwrap();
    let want = recorded
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .and_then(|l| l.split_whitespace().next())
        .expect("a recorded adapter");
    assert_eq!(
        sha256::hex(&bytes),
        want,
        "adapter {name} is not the file the fixture was made with"
    );
    let a = b.engine.lora_from_bytes(&bytes).unwrap();
    cache.lock().unwrap().push((name.into(), a.clone()));
    a
}

fn set(items: &[(&str, f32)]) -> Option<LoraSet> {
    LoraSet::new(
        items
            .iter()
            .map(|&(n, scale)| Lora {
                adapter: adapter_of(n),
                scale,
            })
            .collect(),
    )
}

fn cases(name: &str) -> serde_json::Value {
    fixture((&format!("lora/{name}"), "", ""), "generate.json")
}

/// Mean KL(adapted ‖ base) over the fixture's positions: how far the adapters move the
/// model (it must be well above the agreement tolerance for the test to mean anything).
fn kl_from_base(cases: &serde_json::Value, lora: Option<LoraSet>) -> f64 {
    let e = &base().engine;
    let (mut sum, mut n) = (0.0, 0);
    for case in cases.as_array().unwrap() {
        let seq = sequence(case);
        let rows = |set: Option<LoraSet>| {
            let mut s = e.session(&SessionOptions::with_ctx(512)).unwrap();
            s.set_lora(set);
            let mut out = Vec::new();
            s.feed_each(&seq, |_, l| out.push(log_softmax(l))).unwrap();
            out
        };
        let (adapted, plain) = (rows(lora.clone()), rows(None));
        for (p, q) in adapted.iter().zip(&plain) {
            sum += p.iter().zip(q).map(|(a, b)| a.exp() * (a - b)).sum::<f64>();
            n += 1;
        }
    }
    sum / n as f64
}

#[test]
fn agrees_with_llama_cpp() {
    let model_sha = std::fs::read_to_string(fixtures_dir().join("lora/model.sha256")).unwrap();
    assert_eq!(
        sha256::hex(&base().bytes),
        model_sha.trim(),
        "the base model is not the file the fixtures were made with"
    );
    for (name, items) in [
        ("r8", &[("r8", 1.0)][..]),
        ("r64", &[("r64", 1.0)][..]),
        ("sum", &[("r8", 1.0), ("r16", 0.5)][..]),
    ] {
        let c = cases(name);
        let lora = set(items);
        teacher_forced_agrees_lora(&base().engine, &c, &format!("LoRA {name}"), lora.clone());
        let kl = kl_from_base(&c, lora);
        eprintln!("LoRA {name}: mean KL(adapted || base) {kl:.4} nats");
        assert!(kl > 0.01, "LoRA {name} barely changes the model (KL {kl})");
    }
}

/// Sequences under the rank-8 adapter, the rank-64 one and none share steps (prompt chunks
/// beside decode tokens): each gets the bits it gets alone.
#[test]
fn batch_invariant_across_adapters() {
    let e = &base().engine;
    let tok = e.tokenizer();
    let texts = [
        "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
        "The capital of France is",
        "// A binary search over a sorted slice\nfn search(",
    ];
    let prompts: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| tok.encode_prompt(t).unwrap())
        .collect();
    let sets = [set(&[("r8", 1.0)]), set(&[("r64", 0.75)]), None];
    let alone: Vec<_> = (0..3)
        .map(|i| {
            let plan = Plan {
                prompt: prompts[i].clone(),
                start: 0,
                chunks: vec![prompts[i].len()],
            };
            run_lora(e, &[plan], &sets[i..=i], 512, KvType::F16).remove(0)
        })
        .collect();
    let plans: Vec<Plan> = (0..3)
        .map(|i| Plan {
            prompt: prompts[i].clone(),
            start: i,
            chunks: vec![3, 5, 7],
        })
        .collect();
    let together = run_lora(e, &plans, &sets, 48, KvType::F16);
    for i in 0..3 {
        assert_eq!(together[i].1, alone[i].1, "sequence {i}: tokens");
        assert!(
            bits(&together[i].0) == bits(&alone[i].0),
            "sequence {i}: logits differ when sharing steps"
        );
    }
    // the adapters change what the sequences compute
    let r8_as_base = run_lora(e, &plans[..1], &[], 48, KvType::F16).remove(0);
    assert!(bits(&r8_as_base.0) != bits(&alone[0].0));
}

/// A session's adapters coming and going leave the base model as it was.
#[test]
fn base_model_unchanged() {
    let e = &base().engine;
    let prompt = e.tokenizer().encode_prompt("Once upon a time").unwrap();
    let logits = |s: &mut superinfer_runtime::Session<'_>| {
        s.feed(&prompt).unwrap();
        s.logits().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    };
    let mut plain = e.session(&SessionOptions::with_ctx(64)).unwrap();
    let want = logits(&mut plain);
    let mut s = e.session(&SessionOptions::with_ctx(64)).unwrap();
    s.set_lora(set(&[("r8", 1.0)]));
    let adapted = logits(&mut s);
    assert_ne!(adapted, want);
    s.set_lora(None);
    assert!(s.tokens().is_empty(), "a new adapter set starts over");
    assert_eq!(logits(&mut s), want);
}

/// A one-pair adapter for `blk.0.attn_q.weight` with the given A and B dims.
fn tiny(arch: &str, general_type: &str, a: [u64; 2], b: [u64; 2]) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.meta("general.architecture", MetaValue::String(arch.into()));
    w.meta("general.type", MetaValue::String(general_type.into()));
    w.meta("adapter.type", MetaValue::String("lora".into()));
    w.meta("adapter.lora.alpha", MetaValue::F32(8.0));
    let f32s = |d: [u64; 2]| vec![0.0f32; (d[0] * d[1]) as usize];
    w.tensor_f32("blk.0.attn_q.weight.lora_a", &a, &f32s(a))
        .unwrap();
    w.tensor_f32("blk.0.attn_q.weight.lora_b", &b, &f32s(b))
        .unwrap();
    w.finish().unwrap()
}

fn lora_err(bytes: &[u8]) -> LoraError {
    match base().engine.lora_from_bytes(bytes) {
        Err(Error::Lora(e)) => {
            eprintln!("{e}");
            *e
        }
        Err(e) => panic!("not a LoRA error: {e}"),
        Ok(_) => panic!("a bad adapter was accepted"),
    }
}

#[test]
fn bad_adapters_are_typed_errors() {
    let d = base().engine.config().n_embd as u64;
    // the good one loads
    let good = tiny("qwen2", "adapter", [d, 4], [4, d]);
    let a = base().engine.lora_from_bytes(&good).unwrap();
    assert_eq!((a.pairs(), a.max_rank()), (1, 4));

    assert!(matches!(
        lora_err(&tiny("llama", "adapter", [d, 4], [4, d])),
        LoraError::Architecture { .. }
    ));
    assert!(matches!(
        lora_err(&tiny("qwen2", "model", [d, 4], [4, d])),
        LoraError::NotAnAdapter { .. }
    ));
    // an adapter for a model of another hidden size (Qwen2.5-1.5B's 1536)
    match lora_err(&tiny("qwen2", "adapter", [1536, 4], [4, 1536])) {
        LoraError::Shape { tensor, .. } => assert_eq!(tensor, "blk.0.attn_q.weight.lora_a"),
        e => panic!("{e:?}"),
    }
    assert!(matches!(
        lora_err(&tiny("qwen2", "adapter", [d, 4], [8, d])),
        LoraError::RankMismatch { a: 4, b: 8, .. }
    ));
    match base()
        .engine
        .lora_from_bytes(&tiny("qwen2", "adapter", [d, 0], [0, d]))
    {
        Err(Error::Lora(e)) => match *e {
            LoraError::ZeroRank { tensor } => assert_eq!(tensor, "blk.0.attn_q.weight"),
            e => panic!("rank 0: {e}"),
        },
        // a GGUF reader may refuse an empty dimension before the adapter is looked at
        Err(e) => eprintln!("rank 0: {e}"),
        Ok(_) => panic!("a rank-0 adapter was accepted"),
    }
    // one half of a pair, a tensor the model lacks, an unsupported one
    let mut w = GgufWriter::new();
    w.meta("general.architecture", MetaValue::String("qwen2".into()));
    w.meta("general.type", MetaValue::String("adapter".into()));
    w.meta("adapter.type", MetaValue::String("lora".into()));
    w.tensor_f32(
        "blk.0.attn_q.weight.lora_a",
        &[d, 2],
        &vec![0.0; 2 * d as usize],
    )
    .unwrap();
    assert!(matches!(
        lora_err(&w.finish().unwrap()),
        LoraError::MissingHalf {
            missing: "lora_b",
            ..
        }
    ));
    for (name, want) in [
        ("blk.99.attn_q.weight", "lora_no_base_tensor"),
        ("output.weight", "lora_unsupported"),
    ] {
        let mut w = GgufWriter::new();
        w.meta("general.architecture", MetaValue::String("qwen2".into()));
        w.meta("general.type", MetaValue::String("adapter".into()));
        w.meta("adapter.type", MetaValue::String("lora".into()));
        w.tensor(
            format!("{name}.lora_a"),
            &[d, 2],
            GgmlType::F32,
            vec![0; 8 * d as usize],
        )
        .unwrap();
        w.tensor(
            format!("{name}.lora_b"),
            &[2, d],
            GgmlType::F32,
            vec![0; 8 * d as usize],
        )
        .unwrap();
        assert_eq!(lora_err(&w.finish().unwrap()).code(), want);
    }
    // a truncated file: the GGUF reader's typed error
    let cut = &good[..good.len() - 100];
    match base().engine.lora_from_bytes(cut) {
        Err(e @ (Error::Truncated { .. } | Error::TensorOutOfBounds { .. })) => eprintln!("{e}"),
        Err(e) => panic!("truncated: unexpected error {e}"),
        Ok(_) => panic!("a truncated adapter was accepted"),
    }
}

/// Through the scheduler: requests under an adapter and without one share steps and each
/// gets what a session gets alone; a prompt cached under one adapter set is not taken by a
/// request under another (the prefix cache is keyed by the set).
#[test]
fn scheduler_requests_carry_adapters() {
    use superinfer_runtime::core::sampler::{Sampler, SamplerConfig};
    use superinfer_runtime::scheduler::Request;
    use superinfer_runtime::{Scheduler, SchedulerOptions};
    let e = &base().engine;
    let prompt = e
        .tokenizer()
        .encode_prompt(
            "A list of the planets of the solar system, from the Sun outwards: Mercury, Venus,",
        )
        .unwrap();
    let alone = |lora: Option<LoraSet>| {
        let mut s = e.session(&SessionOptions::with_ctx(128)).unwrap();
        s.set_lora(lora);
        let mut sampler = Sampler::new(SamplerConfig::greedy()).unwrap();
        let mut ids = Vec::new();
        s.generate(&prompt, 8, &mut sampler, |ev| {
            ids.push(ev.id);
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
        ids
    };
    let r8 = set(&[("r8", 1.0)]);
    let (want_r8, want_base) = (alone(r8.clone()), alone(None));
    let mut sched = Scheduler::new(
        e,
        &SchedulerOptions {
            n_parallel: 2,
            n_ctx: 128,
            ..Default::default()
        },
    )
    .unwrap();
    let submit = |sched: &mut Scheduler<'_>, lora: Option<LoraSet>| {
        let mut r = Request::greedy(prompt.clone(), 8);
        r.ignore_eos = true;
        r.lora = lora;
        sched.submit(r).unwrap()
    };
    let (h1, h2) = (submit(&mut sched, r8.clone()), submit(&mut sched, None));
    sched.run_until_idle().unwrap();
    let (got_r8, _, c1) = h1.wait().unwrap();
    let (got_base, _, _) = h2.wait().unwrap();
    let same = |a: &[u32], b: &[u32]| {
        let n = a.len().min(b.len());
        n > 0 && a[..n] == b[..n]
    };
    assert!(same(&got_r8, &want_r8), "{got_r8:?} vs {want_r8:?}");
    assert!(same(&got_base, &want_base), "{got_base:?} vs {want_base:?}");
    assert_eq!(c1.cached_tokens, 0);
    // the prompt's blocks are cached now under both keys; a request under a third set (the
    // same adapter at another scale) takes none of them, one under r8 takes them
    let h3 = submit(&mut sched, set(&[("r8", 0.5)]));
    sched.run_until_idle().unwrap();
    assert_eq!(h3.wait().unwrap().2.cached_tokens, 0);
    let h4 = submit(&mut sched, r8);
    sched.run_until_idle().unwrap();
    let (got, _, c4) = h4.wait().unwrap();
    assert!(
        c4.cached_tokens > 0,
        "the same adapter set reuses its cached prefix"
    );
    assert_eq!(got, got_r8);
}
