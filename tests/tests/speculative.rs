//! Speculative decoding is exact.
//!
//! - Greedy: the tokens are the same with a draft model, with prompt lookup and without
//!   either, on the real models (Qwen2.5-Coder-1.5B drafted by Qwen2.5-Coder-0.5B: the
//!   llama.cpp fixture prompts and the prompts of `benches/spec.py`) and on synthetic ones
//!   (a draft that is mostly wrong, so rollbacks happen at every step).
//! - Sampling: the emitted tokens follow the target's distribution (chi-square against the
//!   exact distribution, computed from the target's logits, on a synthetic model).
//! - Refusals: a draft with another vocabulary is a clear error; limits beyond the context
//!   or a zero draft decode plainly.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::OnceLock;

use superinfer_runtime::core::quant::GgmlType;
use superinfer_runtime::core::sampler::{Sampler, SamplerConfig};
use superinfer_runtime::speculative::{DraftModel, DraftOptions, DynDrafter, LookupDrafter};
use superinfer_runtime::{
    Engine, EngineOptions, GenerateStats, Session, SessionOptions, StopReason,
};
use superinfer_tests::synth::{self, Spec};
use superinfer_tests::*;

/// The tests of this file run one at a time: each engine's thread pool takes every core, and
/// two pools spinning on two cores slow each other down many times over.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn engine(p: &std::path::Path) -> Engine {
    Engine::load(p, &EngineOptions::default()).unwrap()
}

/// Greedy decoding of `n` tokens after `prompt` in `s` (reset first: the prompt then comes
/// from its prefix cache), with `drafter` or without.
fn greedy(
    s: &mut Session<'_>,
    prompt: &[u32],
    n: usize,
    drafter: Option<&mut DynDrafter<'_>>,
) -> (Vec<u32>, GenerateStats) {
    s.reset();
    let mut sampler = Sampler::new(SamplerConfig::greedy()).unwrap();
    let mut out = Vec::new();
    let stats = s
        .generate_with(prompt, &n.into(), &mut sampler, drafter, |ev| {
            // (u32::MAX: the decoder's held-back text at the end, not a token)
            if ev.id != u32::MAX {
                out.push(ev.id);
            }
            ControlFlow::Continue(())
        })
        .unwrap();
    // the cache holds the prompt and the output, but for a last token not yet fed (drafted
    // tokens that were refused are gone)
    assert_eq!(&s.tokens()[..prompt.len()], prompt);
    let fed = &s.tokens()[prompt.len()..];
    assert!(out.starts_with(fed) && out.len() - fed.len() <= 1);
    (out, stats)
}

/// Plain, lookup and (when given) draft-model greedy decoding agree; returns the
/// speculative runs' (drafted, accepted) counts. `vocab`: the draft's `--draft-vocab`.
fn agree(
    target: &Engine,
    draft: Option<&Engine>,
    vocab: Option<usize>,
    prompt: &[u32],
    n: usize,
    what: &str,
) -> Vec<(usize, usize)> {
    let t0 = std::time::Instant::now();
    let n_ctx = target.config().n_ctx_train.min(1024);
    let mut s = target.session(&SessionOptions::with_ctx(n_ctx)).unwrap();
    let (plain, _) = greedy(&mut s, prompt, n, None);
    let mut counts = Vec::new();
    // lookup at its longest, by its schedule (the same drafts every run) and priced (the
    // lengths depend on the times measured), and a draft model at a middle length (the
    // synthetic test below covers more lengths)
    for lookup in [LookupDrafter::new(3, 16).fixed(), LookupDrafter::new(3, 16)] {
        let mut lookup = lookup;
        let (got, st) = greedy(&mut s, prompt, n, Some(&mut lookup));
        assert_eq!(got, plain, "{what}: prompt lookup changed the output");
        counts.push((st.drafted, st.accepted));
    }
    if let Some(d) = draft {
        let opts = DraftOptions {
            max: 8,
            min: 0,
            p_min: 0.0,
            vocab,
            adaptive: true,
        };
        let mut dm = DraftModel::new(target, d, n_ctx, &SamplerConfig::greedy(), opts).unwrap();
        let (got, st) = greedy(&mut s, prompt, n, Some(&mut dm));
        assert_eq!(got, plain, "{what}: the draft model changed the output");
        assert!(st.drafted > 0, "{what}: the draft model drafted nothing");
        counts.push((st.drafted, st.accepted));
    }
    eprintln!(
        "{:?}: {counts:?} (drafted, accepted) in {:.1?}",
        what.lines().last().unwrap_or(""),
        t0.elapsed()
    );
    counts
}

#[test]
fn greedy_output_is_the_same_with_a_draft_model_with_lookup_and_without() {
    let _serial = serial();
    let target = engine(&require_model(QWEN_15B));
    let draft = engine(&require_model(QWEN_05B));
    let mut totals = (0, 0);
    for case in fixture(QWEN_15B, "generate.json").as_array().unwrap() {
        let prompt = ids(&case["prompt_ids"]);
        for (d, a) in agree(
            &target,
            Some(&draft),
            None,
            &prompt,
            48,
            case["prompt"].as_str().unwrap(),
        ) {
            totals.0 += d;
            totals.1 += a;
        }
    }
    // one bench prompt of each kind (an edit: lookup's case; a completion: the draft
    // model's; a summary), not all eight: the 1.5B target decodes at a few tens of tokens
    // per second on CI's two cores, and each prompt is decoded four times
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../benches/spec_prompts");
    for name in ["edit-rust.txt", "complete-python.txt", "summary-readme.txt"] {
        let f = dir.join(name);
        let prompt = target
            .encode_prompt(&std::fs::read_to_string(&f).unwrap())
            .unwrap();
        // the bench prompts with the draft scoring a prefix of its vocabulary
        let what = f.display().to_string();
        for (d, a) in agree(&target, Some(&draft), Some(32_768), &prompt, 40, &what) {
            totals.0 += d;
            totals.1 += a;
        }
    }
    // both kinds of drafts were accepted and refused many times over (drafted 472, accepted
    // 248 when this was written)
    eprintln!("drafted {}, accepted {}", totals.0, totals.1);
    assert!(totals.1 > 150 && totals.0 - totals.1 > 150, "{totals:?}");
}

fn synthetic(tag: &str, spec: Spec) -> &'static PathBuf {
    static PATHS: OnceLock<std::sync::Mutex<Vec<(String, &'static PathBuf)>>> = OnceLock::new();
    let paths = PATHS.get_or_init(Default::default);
    let mut paths = paths.lock().unwrap();
    if let Some((_, p)) = paths.iter().find(|(t, _)| t == tag) {
        return p;
    }
    let p: &'static PathBuf = Box::leak(Box::new(synth::write_temp(&spec, tag)));
    paths.push((tag.to_string(), p));
    p
}

fn synth_target() -> Engine {
    engine(synthetic("spec-target", Spec::qwen2()))
}

/// A draft of the same vocabulary: another random model (mostly wrong) or the target's
/// weights in another format (mostly right).
fn synth_draft(other: bool) -> Engine {
    if other {
        engine(synthetic(
            "spec-draft-other",
            Spec {
                seed: 7,
                ..Spec::qwen2()
            },
        ))
    } else {
        engine(synthetic(
            "spec-draft-q4",
            Spec {
                weight_type: GgmlType::Q4_0,
                ..Spec::qwen2()
            },
        ))
    }
}

#[test]
fn greedy_output_is_the_same_on_synthetic_models_whatever_the_draft() {
    let _serial = serial();
    let target = synth_target();
    let mut s = target.session(&SessionOptions::with_ctx(256)).unwrap();
    for other in [true, false] {
        let draft = synth_draft(other);
        for text in ["the theory", "an inner", "abc abc abc", "x"] {
            let prompt = target.encode_prompt(text).unwrap();
            let (plain, _) = greedy(&mut s, &prompt, 60, None);
            for max in [1, 2, 5, 16] {
                for priced in [true, false] {
                    let mut lookup = LookupDrafter::new(3, max);
                    if !priced {
                        lookup = lookup.fixed();
                    }
                    let (got, _) = greedy(&mut s, &prompt, 60, Some(&mut lookup));
                    let how = if priced { "priced" } else { "scheduled" };
                    assert_eq!(got, plain, "{text}: prompt lookup ({how}, draft-max {max})");
                }
                // a draft scoring only a prefix of its vocabulary proposes other tokens,
                // never another output
                for (p_min, vocab) in [(0.0, None), (0.5, None), (0.0, Some(64))] {
                    let opts = DraftOptions {
                        max,
                        min: 0,
                        p_min,
                        vocab,
                        adaptive: true,
                    };
                    let g = SamplerConfig::greedy();
                    let mut dm = DraftModel::new(&target, &draft, 256, &g, opts).unwrap();
                    let (got, st) = greedy(&mut s, &prompt, 60, Some(&mut dm));
                    let how = format!("max {max}, p-min {p_min}, vocab {vocab:?}");
                    assert_eq!(got, plain, "{text}: draft model ({how})");
                    if p_min == 0.0 {
                        assert!(st.drafted > 0, "{text}: nothing drafted ({how})");
                    }
                }
            }
        }
    }
}

/// Critical value of chi-square with `df` degrees of freedom at 0.1% (Wilson–Hilferty).
fn chi_square_critical(df: usize) -> f64 {
    let k = df as f64;
    let z = 3.090; // the normal's 99.9% quantile
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

/// Chi-square of `counts` against `expected` probabilities, cells with under 5 expected
/// draws merged into one. Returns (statistic, degrees of freedom).
fn chi_square(counts: &[u64], expected: &[f64], n: u64) -> (f64, usize) {
    let (mut stat, mut cells) = (0.0, 0usize);
    let (mut rest_o, mut rest_e) = (0.0, 0.0);
    for (&c, &p) in counts.iter().zip(expected) {
        let e = p * n as f64;
        if e < 5.0 {
            rest_o += c as f64;
            rest_e += e;
        } else {
            stat += (c as f64 - e).powi(2) / e;
            cells += 1;
        }
    }
    if rest_e > 0.0 {
        stat += (rest_o - rest_e).powi(2) / rest_e.max(1e-9);
        cells += 1;
    }
    (stat, cells.saturating_sub(1))
}

/// The sampler's distribution (probability per token id) after `tokens`.
fn exact(e: &Engine, cfg: &SamplerConfig, tokens: &[u32]) -> Vec<f64> {
    let mut s = e.session(&SessionOptions::with_ctx(64)).unwrap();
    s.feed(tokens).unwrap();
    let mut logits = s.logits().to_vec();
    let mut sampler = Sampler::new(cfg.clone()).unwrap();
    let mut p = vec![0.0; logits.len()];
    for c in sampler.distribution(&mut logits, tokens) {
        p[c.id as usize] = c.p as f64;
    }
    p
}

#[test]
fn sampled_output_follows_the_targets_distribution() {
    let _serial = serial();
    let target = synth_target();
    let draft = synth_draft(false);
    let cfg = SamplerConfig {
        temperature: 1.5,
        top_k: 6,
        top_p: 1.0,
        min_p: 0.0,
        ..SamplerConfig::default()
    };
    let n_vocab = target.config().n_vocab;
    let eos = target.tokenizer().eos().unwrap();
    // a prompt after which the first two tokens cannot end generation; the exact marginals
    // of the 2nd and 3rd tokens after it (the 3rd may be the end token)
    let (prompt, p2, p3) = ["the", "an", "in the", "her", "x"]
        .iter()
        .find_map(|text| {
            let prompt = target.encode_prompt(text).unwrap();
            let p1 = exact(&target, &cfg, &prompt);
            let (mut p2, mut p3) = (vec![0.0; n_vocab], vec![0.0; n_vocab]);
            for (t1, &a) in p1.iter().enumerate().filter(|(_, &a)| a > 0.0) {
                let mut h = prompt.clone();
                h.push(t1 as u32);
                let q = exact(&target, &cfg, &h);
                for (t2, &b) in q.iter().enumerate().filter(|(_, &b)| b > 0.0) {
                    p2[t2] += a * b;
                    h.push(t2 as u32);
                    for (t3, &c) in exact(&target, &cfg, &h).iter().enumerate() {
                        p3[t3] += a * b * c;
                    }
                    h.pop();
                }
            }
            (p1[eos as usize] == 0.0 && p2[eos as usize] == 0.0).then_some((prompt, p2, p3))
        })
        .expect("a prompt whose first tokens cannot be the end token");
    let n = 4000u64;
    let (mut c2, mut c3) = (vec![0u64; n_vocab], vec![0u64; n_vocab]);
    let mut s = target.session(&SessionOptions::with_ctx(64)).unwrap();
    let (mut drafted, mut accepted) = (0, 0);
    for seed in 0..n {
        let cfg = SamplerConfig {
            seed,
            ..cfg.clone()
        };
        let mut sampler = Sampler::new(cfg.clone()).unwrap();
        let mut dm = DraftModel::new(
            &target,
            &draft,
            64,
            &cfg,
            DraftOptions {
                max: 2,
                min: 0,
                p_min: 0.0,
                vocab: None,
                adaptive: true,
            },
        )
        .unwrap();
        s.reset();
        let mut out = Vec::new();
        let st = s
            .generate_with(&prompt, &3.into(), &mut sampler, Some(&mut dm), |ev| {
                if ev.id != u32::MAX {
                    out.push(ev.id);
                }
                ControlFlow::Continue(())
            })
            .unwrap();
        if st.stop == StopReason::EndOfGeneration {
            out.push(eos);
        }
        assert_eq!(out.len(), 3);
        drafted += st.drafted;
        accepted += st.accepted;
        c2[out[1] as usize] += 1;
        c3[out[2] as usize] += 1;
    }
    assert!(
        accepted > 500 && drafted - accepted > 500,
        "drafted {drafted}, accepted {accepted}"
    );
    for (what, c, p) in [("2nd", &c2, &p2), ("3rd", &c3, &p3)] {
        let (stat, df) = chi_square(c, p, n);
        let crit = chi_square_critical(df);
        assert!(
            stat < crit,
            "{what} token: chi-square {stat:.1} over {df} df (critical {crit:.1})"
        );
    }
}

#[test]
fn bad_drafts_are_refused_or_decode_plainly() {
    let _serial = serial();
    let target = engine(&require_model(QWEN_05B));
    let gemma = engine(&require_model(GEMMA3_270M));
    let err = DraftModel::new(
        &target,
        &gemma,
        256,
        &SamplerConfig::greedy(),
        DraftOptions::default(),
    )
    .err()
    .expect("a draft with another vocabulary must be refused");
    assert!(err.to_string().contains("tokenizer"), "{err}");

    // a draft far longer than the context, and a zero-length one, decode to the same tokens
    let prompt = target
        .encode_prompt("fn main() {\n    println!(\"hello\");\n}\nfn main() {")
        .unwrap();
    let n_ctx = prompt.len() + 20;
    let run = |d: Option<&mut DynDrafter<'_>>| {
        let mut s = target.session(&SessionOptions::with_ctx(n_ctx)).unwrap();
        let mut sampler = Sampler::new(SamplerConfig::greedy()).unwrap();
        let mut out = Vec::new();
        let st = s
            .generate_with(&prompt, &1000.into(), &mut sampler, d, |ev| {
                if ev.id != u32::MAX {
                    out.push(ev.id);
                }
                ControlFlow::Continue(())
            })
            .unwrap();
        (out, st.stop)
    };
    let (plain, stop) = run(None);
    let mut lookup = LookupDrafter::new(4, 100_000);
    assert_eq!(run(Some(&mut lookup)), (plain.clone(), stop));
    let mut zero = LookupDrafter::new(4, 0);
    assert_eq!(run(Some(&mut zero)), (plain.clone(), stop));
    let self_draft = engine(&require_model(QWEN_05B));
    let mut dm = DraftModel::new(
        &target,
        &self_draft,
        n_ctx,
        &SamplerConfig::greedy(),
        DraftOptions {
            max: 100_000,
            min: 100_000,
            p_min: 1.0,
            vocab: None,
            adaptive: true,
        },
    )
    .unwrap();
    assert_eq!(run(Some(&mut dm)), (plain, stop));
}
