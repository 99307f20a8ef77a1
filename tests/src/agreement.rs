//! The agreement checks against llama.cpp's `generate.json` fixtures (format:
//! tests/fixtures/README.md), shared by the dense models' test (llamacpp_fixtures.rs) and the
//! mixture-of-experts one (moe_fixtures.rs).

use std::ops::ControlFlow;
use std::path::Path;

use superinfer_runtime::core::model::lora::LoraSet;
use superinfer_runtime::core::sampler::{Sampler, SamplerConfig};
use superinfer_runtime::{Engine, EngineOptions, SessionOptions, StopReason};

use crate::{argmax, ids, log_softmax};

/// llama.cpp's top-2 log-probs closer than this make its argmax a near-tie.
pub const TIE: f64 = 0.05;

/// Loads a model with `threads` workers; a load error fails the test with its causes.
pub fn load(path: &Path, threads: usize) -> Engine {
    Engine::load(
        path,
        &EngineOptions {
            threads,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}", superinfer_runtime::chain(&e)))
}

/// `positions[i] = {pos, top: [[id, logprob], ...]}`
pub fn top(pos: &serde_json::Value) -> Vec<(u32, f64)> {
    pos["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[0].as_u64().unwrap() as u32, e[1].as_f64().unwrap()))
        .collect()
}

/// A fixture case's whole sequence: its prompt, then llama.cpp's continuation.
pub fn sequence(case: &serde_json::Value) -> Vec<u32> {
    let mut seq = ids(&case["prompt_ids"]);
    seq.extend(ids(&case["generated_ids"]));
    seq
}

/// Teacher-forced: at every position of every sequence compare our next-token distribution
/// with llama.cpp's top-32; top-1 must agree at ≥ 99% of the decisive positions (not a
/// near-tie for llama.cpp) and the mean KL(llama.cpp ‖ ours) over the 32 listed tokens must
/// be ≤ 0.01 nats.
pub fn teacher_forced_agrees(e: &Engine, cases: &serde_json::Value, label: &str) {
    teacher_forced_agrees_lora(e, cases, label, None)
}

/// [`teacher_forced_agrees`] under the LoRA adapters `lora` (llama.cpp's fixture made with
/// the same adapters and scales).
pub fn teacher_forced_agrees_lora(
    e: &Engine,
    cases: &serde_json::Value,
    label: &str,
    lora: Option<LoraSet>,
) {
    let (mut decisive, mut agree, mut kl_sum, mut kl_n, mut kl_max) =
        (0usize, 0usize, 0.0f64, 0usize, 0.0f64);
    for case in cases.as_array().unwrap() {
        let seq = sequence(case);
        let positions = case["positions"].as_array().unwrap();
        assert_eq!(positions.len(), seq.len(), "fixture positions vs tokens");
        let mut s = e.session(&SessionOptions::with_ctx(512)).unwrap();
        s.set_lora(lora.clone());
        s.feed_each(&seq, |i, logits| {
            let refs = top(&positions[i]);
            let lp = log_softmax(logits);
            let ours = argmax(logits);
            if refs[0].1 - refs[1].1 >= TIE {
                decisive += 1;
                if ours == refs[0].0 {
                    agree += 1;
                } else {
                    eprintln!(
                        "  {label}: position {i}: llama.cpp top {:?} ours {ours} ({:.3})",
                        &refs[..2],
                        lp[ours as usize]
                    );
                }
            }
            let kl: f64 = refs
                .iter()
                .map(|&(t, l)| l.exp() * (l - lp[t as usize]))
                .sum();
            kl_sum += kl;
            kl_n += 1;
            kl_max = kl_max.max(kl);
        })
        .unwrap();
    }
    let rate = agree as f64 / decisive as f64;
    let mean_kl = kl_sum / kl_n as f64;
    eprintln!(
        "{label}: top-1 agreement {agree}/{decisive} = {:.2}% on decisive positions; mean KL {mean_kl:.5} nats (max {kl_max:.4}) over {kl_n} positions",
        rate * 100.0
    );
    assert!(
        decisive > 50,
        "{label}: too few decisive positions to judge"
    );
    assert!(
        rate >= 0.99,
        "{label}: top-1 agreement {:.2}% < 99%",
        rate * 100.0
    );
    assert!(mean_kl <= 0.01, "{label}: mean KL {mean_kl} > 0.01");
}

/// Greedy generation through the public API equals llama.cpp's continuation until a position
/// where llama.cpp itself rates our token within `TIE` of its best (a near-tie, where rounding
/// decides): there the two continuations may part, and comparing stops. llama.cpp generated
/// token by token but computed `positions` in one batch, and its two paths round differently,
/// so its generated token is not always its own teacher-forced top-1; the rule covers that.
pub fn greedy_matches(e: &Engine, cases: &serde_json::Value, label: &str) {
    greedy_matches_or_reference(e, cases, label, None)
}

/// [`greedy_matches`], where a divergence beyond a near-tie is also accepted when the exact
/// f64 reference (`reference::logits_all` over the model file's bytes `model`) chooses our
/// token there: then llama.cpp, not this engine, departs from the exact result (a
/// mixture's router can turn a small rounding difference into another expert).
pub fn greedy_matches_or_reference(
    e: &Engine,
    cases: &serde_json::Value,
    label: &str,
    model: Option<&[u8]>,
) {
    let mut failures = Vec::new();
    for case in cases.as_array().unwrap() {
        let prompt = ids(&case["prompt_ids"]);
        let want = ids(&case["generated_ids"]);
        let positions = case["positions"].as_array().unwrap();
        let mut s = e.session(&SessionOptions::with_ctx(512)).unwrap();
        let mut sampler = Sampler::new(SamplerConfig::greedy()).unwrap();
        let mut got = Vec::new();
        let stats = s
            .generate(&prompt, want.len(), &mut sampler, |ev| {
                if ev.id != u32::MAX {
                    got.push(ev.id);
                }
                ControlFlow::Continue(())
            })
            .unwrap();
        if stats.stop == StopReason::EndOfGeneration {
            // the EOG token is not streamed; llama.cpp's list includes it
            got.push(
                *want
                    .get(got.len())
                    .filter(|&&t| e.tokenizer().is_eog(t))
                    .unwrap_or(&u32::MAX),
            );
        }
        match got.iter().zip(&want).position(|(a, b)| a != b) {
            None if got.len() == want.len() => eprintln!(
                "{label}: greedy continuation identical ({} tokens)",
                want.len()
            ),
            None => failures.push(format!(
                "{:?}: {} tokens generated, llama.cpp {}",
                case["prompt"],
                got.len(),
                want.len()
            )),
            Some(j) => {
                let refs = top(&positions[prompt.len() - 1 + j]);
                // llama.cpp's own log-prob of our token, from its top-32
                let ours = refs.iter().find(|r| r.0 == got[j]).map(|r| r.1);
                let behind = ours.map(|l| refs[0].1 - l);
                eprintln!(
                    "{label}: greedy diverges at generated token {j}: ours {} is {} behind llama.cpp's teacher-forced top-1{}",
                    got[j],
                    behind.map_or("not in the top-32".into(), |b| format!("{b:.4}")),
                    if want[j] != refs[0].0 { " (llama.cpp's generated token is not its own teacher-forced top-1)" } else { "" }
                );
                let exact = |m: &[u8]| {
                    let seq = [&prompt[..], &got[..j]].concat();
                    let all = crate::reference::logits_all(m, &seq);
                    let last = &all[seq.len() - 1];
                    (0..last.len()).max_by(|&a, &b| last[a].total_cmp(&last[b]))
                };
                let referee = model.map(exact);
                if let Some(Some(t)) = referee {
                    eprintln!(
                        "{label}: the f64 reference's top-1 there is {t} ({})",
                        if t as u32 == got[j] {
                            "ours"
                        } else if t as u32 == want[j] {
                            "llama.cpp's"
                        } else {
                            "neither"
                        }
                    );
                }
                let reference_sides_with_us = referee == Some(Some(got[j] as usize));
                if behind.is_none_or(|b| b >= TIE) && !reference_sides_with_us {
                    failures.push(format!(
                        "{:?} (prompt ids {:?}…): token {j} is {} (llama.cpp {}), not within {TIE} of llama.cpp's top-1 there",
                        case["prompt"],
                        &prompt[..prompt.len().min(4)],
                        got[j],
                        want[j]
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{label}: {}", failures.join("; "));
}
