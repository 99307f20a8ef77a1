//! Batch invariance on the real models: a sequence's greedy tokens and logits are bit-identical
//! whether it runs alone, among seven other sequences of different lengths (prompt chunks of
//! some mixed with decode tokens of others in one step), or with its prompt cut into chunks
//! of different sizes and passes of a smaller scratch (and on a synthetic Q5_K model).

use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::core::quant::GgmlType;
use superinfer_runtime::{Engine, EngineOptions};
use superinfer_tests::batch::check_invariance;
use superinfer_tests::synth::{self, Spec};
use superinfer_tests::*;

fn prompts(e: &Engine, model: (&str, &str, &str)) -> Vec<Vec<u32>> {
    let mut p: Vec<Vec<u32>> = fixture(model, "generate.json")
        .as_array()
        .unwrap()
        .iter()
        .map(|c| ids(&c["prompt_ids"]))
        .collect();
    let text = std::fs::read_to_string(fixtures_dir().join("texts/gpl-3.txt")).unwrap();
    let all = e.tokenizer().encode(&text, true, false).unwrap();
    for (at, n) in [(0, 40), (500, 97), (1200, 213), (2000, 17), (3000, 150)] {
        p.push(all[at..at + n].to_vec());
    }
    p.truncate(8);
    p
}

fn invariance(model: (&str, &str, &str), kv: KvType) {
    let e = Engine::load(
        &require_model(model),
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let prompts = prompts(&e, model);
    check_invariance(&e, &prompts, kv, model.2);
}

#[test]
fn qwen05b_logits_do_not_depend_on_the_batch() {
    invariance(QWEN_05B, KvType::F16);
}

#[test]
fn gemma3_logits_do_not_depend_on_the_batch() {
    invariance(GEMMA3_270M, KvType::F16);
}

#[test]
fn qwen05b_q8_0_cache_logits_do_not_depend_on_the_batch() {
    invariance(QWEN_05B, KvType::Q8_0);
}

/// A tiny synthetic llama with Q5_K weights (no real model of that format is fetched): its
/// matrices run the interleaved Q5_K × 8 kernels, one token's and several tokens', and a
/// sequence's logits are the same bits alone, among others and chunked, as on the real
/// models.
#[test]
fn synthetic_q5_k_logits_do_not_depend_on_the_batch() {
    let spec = Spec {
        weight_type: GgmlType::Q5_K,
        // `check_invariance`'s pool holds 1024 positions per sequence
        n_ctx_train: 1024,
        ..Spec::llama()
    };
    let path = synth::write_temp(&spec, "batch-invariance-q5_k");
    let e = Engine::load(
        &path,
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let prompts: Vec<Vec<u32>> = [40u32, 97, 13, 150, 1, 60, 33, 200]
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| (j * 37 + 11 * i as u32 + 5) % 262).collect())
        .collect();
    check_invariance(&e, &prompts, KvType::F16, "synthetic llama q5_k");
}
