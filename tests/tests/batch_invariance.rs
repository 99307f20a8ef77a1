//! Batch invariance on the real models: a sequence's greedy tokens and logits are bit-identical
//! whether it runs alone, among seven other sequences of different lengths (prompt chunks of
//! some mixed with decode tokens of others in one step), or with its prompt cut into chunks
//! of different sizes and passes of a smaller scratch.

use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::{Engine, EngineOptions};
use superinfer_tests::batch::check_invariance;
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
