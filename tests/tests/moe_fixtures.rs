//! Agreement with llama.cpp (the pinned build, F16 KV cache, flash attention) on
//! mixture-of-experts models, using the reference outputs in tests/fixtures/moe (how they were
//! made: tests/fixtures/README.md, scripts/moe/):
//!
//! - tiny random models of each MoE architecture (gpt-oss in MXFP4, Qwen3-MoE in Q4_K,
//!   Qwen2-MoE with its shared expert in Q8_0, Mixtral in Q4_0), committed with their fixtures:
//!   random weights exercise every term, so agreement is a strict test;
//! - Qwen2.5-0.5B upcycled into a qwen2moe file (`superinfer_tests::upcycle`): written into
//!   the models cache, checked to be the very file llama.cpp saw, and compared both with
//!   llama.cpp and with the dense model it came from.
//!
//! Per model: teacher-forced top-1 on ≥ 99% of decisive positions and mean KL ≤ 0.01 nats,
//! greedy continuations equal up to near-ties (`superinfer_tests::agreement`), at 1 and 2
//! threads; logits that do not depend on what shares the step (`superinfer_tests::batch`).

use std::path::PathBuf;
use std::sync::OnceLock;

use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::{Engine, SessionOptions};
use superinfer_tests::agreement::{
    self, greedy_matches_or_reference, load, sequence, teacher_forced_agrees,
};
use superinfer_tests::batch::check_invariance;
use superinfer_tests::upcycle::upcycled_qwen05b;
use superinfer_tests::*;

/// A fixture dir under tests/fixtures/moe/.
fn dir(name: &str) -> PathBuf {
    fixtures_dir().join("moe").join(name)
}

fn cases(name: &str) -> serde_json::Value {
    fixture((&format!("moe/{name}"), "", ""), "generate.json")
}

/// The sha256 recorded beside a fixture: that of the model file llama.cpp ran.
fn recorded_sha256(name: &str) -> String {
    let p = dir(name).join("model.sha256");
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
        .trim()
        .to_string()
}

/// A committed tiny model, checked to be the file its fixture was made from.
fn tiny(name: &str) -> PathBuf {
    let p = dir(name).join("model.gguf");
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    assert_eq!(
        sha256::hex(&bytes),
        recorded_sha256(name),
        "{} is not the file the fixture was made from",
        p.display()
    );
    p
}

fn agrees(path: &std::path::Path, name: &str, threads: usize) {
    let e = load(path, threads);
    let label = format!(
        "{name} ({threads} thread{})",
        if threads > 1 { "s" } else { "" }
    );
    let c = cases(name);
    teacher_forced_agrees(&e, &c, &label);
    // the f64 reference knows the tiny softmax-routed mixtures (not gpt-oss's sinks and
    // YaRN; the upcycled 0.5B model would take it minutes)
    let bytes = std::fs::read(path).unwrap();
    let exact = ["qwen3moe", "qwen2moe", "mixtral"]
        .contains(&name)
        .then_some(&bytes[..]);
    greedy_matches_or_reference(&e, &c, &label, exact);
}

/// Every fixture prompt run alone, together and chunked gives bit-identical logits: the
/// experts' grouping of a step's tokens must not change any token's result.
fn batch_invariant(path: &std::path::Path, name: &str) {
    let e = load(path, 2);
    let prompts: Vec<Vec<u32>> = cases(name)
        .as_array()
        .unwrap()
        .iter()
        .map(|c| ids(&c["prompt_ids"]))
        .collect();
    check_invariance(&e, &prompts, KvType::F16, name);
}

#[test]
fn gpt_oss_1_thread() {
    agrees(&tiny("gpt-oss"), "gpt-oss", 1);
}

#[test]
fn gpt_oss_2_threads() {
    agrees(&tiny("gpt-oss"), "gpt-oss", 2);
}

#[test]
fn gpt_oss_batch_invariant() {
    batch_invariant(&tiny("gpt-oss"), "gpt-oss");
}

#[test]
fn qwen3moe_1_thread() {
    agrees(&tiny("qwen3moe"), "qwen3moe", 1);
}

#[test]
fn qwen3moe_2_threads() {
    agrees(&tiny("qwen3moe"), "qwen3moe", 2);
}

#[test]
fn qwen3moe_batch_invariant() {
    batch_invariant(&tiny("qwen3moe"), "qwen3moe");
}

#[test]
fn qwen2moe_1_thread() {
    agrees(&tiny("qwen2moe"), "qwen2moe", 1);
}

#[test]
fn qwen2moe_2_threads() {
    agrees(&tiny("qwen2moe"), "qwen2moe", 2);
}

#[test]
fn qwen2moe_batch_invariant() {
    batch_invariant(&tiny("qwen2moe"), "qwen2moe");
}

#[test]
fn mixtral_1_thread() {
    agrees(&tiny("mixtral"), "mixtral", 1);
}

#[test]
fn mixtral_2_threads() {
    agrees(&tiny("mixtral"), "mixtral", 2);
}

#[test]
fn mixtral_batch_invariant() {
    batch_invariant(&tiny("mixtral"), "mixtral");
}

const UPCYCLED: &str = "upcycled-qwen2.5-0.5b";

/// The upcycled Qwen2.5-0.5B, made (once) by this repository's converter and checked to be
/// byte for byte the file the fixture was made from.
fn upcycled() -> PathBuf {
    static CHECKED: OnceLock<(PathBuf, String)> = OnceLock::new();
    let (p, sha) = CHECKED.get_or_init(|| {
        let p = upcycled_qwen05b();
        let sha = sha256::hex(&std::fs::read(&p).unwrap());
        (p, sha)
    });
    assert_eq!(
        *sha,
        recorded_sha256(UPCYCLED),
        "{} differs from the file llama.cpp ran for the fixture: the converter \
         (tests/src/upcycle.rs) or the dense model changed; delete the file to remake it, or \
         remake the fixture (scripts/moe/make-fixtures.sh upcycled)",
        p.display()
    );
    p.clone()
}

/// (At 2 threads only: the tiny models cover 1 and 2 threads; this one is for real text.)
#[test]
fn upcycled_2_threads() {
    agrees(&upcycled(), UPCYCLED, 2);
}

#[test]
fn upcycled_batch_invariant() {
    batch_invariant(&upcycled(), UPCYCLED);
}

/// The upcycled model computes the dense model's function (its experts are copies of the
/// dense FFN and their weights sum to 1): our logits on it equal our logits on the dense
/// file up to rounding, at every position of the fixture's sequences. Rounding here means
/// what llama.cpp itself shows between the two files (its MoE path multiplies in other
/// kernels): mean KL ≈ 4e-3 over the positions before the greedy continuations part, top-1
/// equal on all decisive positions but one. An engine whose experts run the dense kernels is
/// far closer (printed); a wrong weighting or a misread expert changes the function and is far
/// beyond these bounds.
#[test]
fn upcycled_equals_dense() {
    let dense = load(&require_model(QWEN_05B), 2);
    let moe = load(&upcycled(), 2);
    let logits = |e: &Engine, seq: &[u32]| {
        let mut out = Vec::new();
        let mut s = e.session(&SessionOptions::with_ctx(512)).unwrap();
        s.feed_each(seq, |_, l| out.push(l.to_vec())).unwrap();
        out
    };
    let (mut n, mut max_diff, mut kl_sum, mut kl_max) = (0usize, 0.0f32, 0.0f64, 0.0f64);
    let (mut decisive, mut agree) = (0usize, 0usize);
    for case in cases(UPCYCLED).as_array().unwrap() {
        let seq = sequence(case);
        for (a, b) in logits(&dense, &seq).iter().zip(logits(&moe, &seq)) {
            let d = a.iter().zip(&b).map(|(x, y)| (x - y).abs());
            max_diff = max_diff.max(d.fold(0.0, f32::max));
            let (la, lb) = (log_softmax(a), log_softmax(&b));
            let kl: f64 = la.iter().zip(&lb).map(|(p, q)| p.exp() * (p - q)).sum();
            kl_sum += kl;
            kl_max = kl_max.max(kl);
            let top = argmax(a) as usize;
            let second = la
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != top)
                .map(|(_, &l)| l)
                .fold(f64::NEG_INFINITY, f64::max);
            if la[top] - second >= agreement::TIE {
                decisive += 1;
                agree += usize::from(argmax(&b) as usize == top);
            }
            n += 1;
        }
    }
    let mean_kl = kl_sum / n as f64;
    let rate = agree as f64 / decisive as f64;
    eprintln!(
        "upcycled vs dense over {n} positions: max |Δlogit| {max_diff:.5}, mean KL {mean_kl:.2e} \
         (max {kl_max:.2e}), top-1 equal at {agree}/{decisive} decisive positions"
    );
    assert!(decisive > 100, "too few decisive positions to judge");
    assert!(
        rate >= 0.99,
        "top-1 equal at {:.2}% < 99% of decisive positions: the MoE path is not the dense \
         model's function",
        rate * 100.0
    );
    assert!(
        mean_kl <= 0.01,
        "mean KL {mean_kl} > 0.01 from the dense model"
    );
}
