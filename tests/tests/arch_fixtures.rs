//! Agreement with llama.cpp (the pinned build, F16 KV cache, flash attention) on the dense
//! architectures beyond the llama family's plain shape, using tiny random models committed
//! with llama.cpp's outputs on them in tests/fixtures/archs (made by
//! scripts/archs/make-fixtures.sh: scripts/archs/make-tiny.py, the pinned llama-quantize,
//! scripts/moe/llama-fixtures.cpp):
//!
//! - phi3 (Q8_0): fused QKV, fused gate/up, partial rotary dims, LongRoPE's long factors and
//!   attention factor (the fixtures' 512-position context exceeds the original 256);
//! - gemma2 (Q8_0): attention and final logit soft-capping, sliding window on even layers,
//!   post-norms, embedding scale, tied output;
//! - granite (Q4_K): embedding, residual, attention and logit scales, attention output bias;
//! - olmo2 (Q8_0): no pre-norms, post-norms, QK-norm over the whole projection, OLMo 3's
//!   sliding window (3 local layers, 1 global);
//! - exaone, internlm2, xverse (Q8_0): the llama graph under other names (EXAONE with NeoX
//!   RoPE and llama-3-style `rope_freqs` factors).
//!
//! Per model: teacher-forced top-1 on ≥ 99% of decisive positions and mean KL ≤ 0.01 nats,
//! greedy continuations equal up to near-ties (`superinfer_tests::agreement`), at 1 and 2
//! threads; logits that do not depend on what shares the step (`superinfer_tests::batch`).
//! And what is not run is refused at load, by name.

use std::path::{Path, PathBuf};

use superinfer_runtime::core::gguf::{GgufFile, GgufWriter, MetaValue};
use superinfer_runtime::core::model::SUPPORTED_ARCHS;
use superinfer_runtime::core::ops::attention::KvType;
use superinfer_runtime::{chain, Engine, EngineOptions, SessionOptions};
use superinfer_tests::agreement::{greedy_matches, load, teacher_forced_agrees};
use superinfer_tests::batch::check_invariance;
use superinfer_tests::*;

fn dir(name: &str) -> PathBuf {
    fixtures_dir().join("archs").join(name)
}

fn cases(name: &str) -> serde_json::Value {
    fixture((&format!("archs/{name}"), "", ""), "generate.json")
}

/// A committed tiny model, checked to be the file its fixture was made from.
fn tiny(name: &str) -> PathBuf {
    let p = dir(name).join("model.gguf");
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    let want = std::fs::read_to_string(dir(name).join("model.sha256")).unwrap();
    assert_eq!(
        sha256::hex(&bytes),
        want.trim(),
        "{} is not the file the fixture was made from",
        p.display()
    );
    p
}

fn agrees(name: &str) {
    let c = cases(name);
    for threads in [1, 2] {
        let e = load(&tiny(name), threads);
        let label = format!(
            "{name} ({threads} thread{})",
            if threads > 1 { "s" } else { "" }
        );
        teacher_forced_agrees(&e, &c, &label);
        greedy_matches(&e, &c, &label);
    }
}

fn batch_invariant(name: &str) {
    let e = load(&tiny(name), 2);
    let prompts: Vec<Vec<u32>> = cases(name)
        .as_array()
        .unwrap()
        .iter()
        .map(|c| ids(&c["prompt_ids"]))
        .collect();
    check_invariance(&e, &prompts, KvType::F16, name);
}

macro_rules! arch_tests {
    ($($arch:ident),*) => {$(
        mod $arch {
            #[test]
            fn agrees_with_llama_cpp() {
                super::agrees(stringify!($arch));
            }

            #[test]
            fn batch_invariant() {
                super::batch_invariant(stringify!($arch));
            }
        }
    )*};
}

arch_tests!(phi3, gemma2, granite, olmo2, exaone, internlm2, xverse);

/// LongRoPE takes its long factors only for contexts beyond the original one (256 in the
/// tiny phi3): the same tokens give other logits at a context of 256 than at 512, and the
/// same at 300 as at 512.
#[test]
fn phi3_long_factors_follow_the_context() {
    let e = load(&tiny("phi3"), 1);
    let seq = superinfer_tests::agreement::sequence(&cases("phi3")[0]);
    let last = |n_ctx: usize| {
        let mut s = e.session(&SessionOptions::with_ctx(n_ctx)).unwrap();
        let mut out = Vec::new();
        s.feed_each(&seq, |_, l| out = l.to_vec()).unwrap();
        out
    };
    let (short, long, longer) = (last(256), last(300), last(512));
    assert_eq!(long, longer, "both contexts are beyond the original one");
    let diff = short
        .iter()
        .zip(&long)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        diff > 1e-2,
        "short and long factors give the same logits ({diff})"
    );
}

/// The tiny `name` model with metadata `key` set to `value` (`None`: removed) and with
/// `extra` tensors added (F32 vectors).
fn variant(name: &str, key: &str, value: Option<MetaValue>, extra: &[(&str, usize)]) -> Vec<u8> {
    let bytes = std::fs::read(tiny(name)).unwrap();
    let f = GgufFile::parse(&bytes).unwrap();
    let mut w = GgufWriter::new();
    let mut seen = false;
    for (k, v) in f.metadata() {
        if *k == key {
            seen = true;
            if let Some(v) = &value {
                w.meta(*k, v.clone());
            }
        } else {
            w.meta(*k, MetaValue::from_value(v));
        }
    }
    if let (false, Some(v)) = (seen, &value) {
        w.meta(key, v.clone());
    }
    for t in f.tensors() {
        let data = f.tensor_data(t).to_vec();
        w.tensor(t.name, &t.dims, t.ty, data).unwrap();
    }
    for &(tensor, len) in extra {
        let data: Vec<u8> = (0..len).flat_map(|_| 0.5f32.to_le_bytes()).collect();
        let ty = superinfer_runtime::core::quant::GgmlType::F32;
        w.tensor(tensor, &[len as u64], ty, data).unwrap();
    }
    w.finish().unwrap()
}

/// Loading `bytes` fails, and the error's whole chain mentions every one of `words`.
fn refused(bytes: &[u8], tag: &str, words: &[&str]) {
    let dir = std::env::temp_dir().join(format!("superinfer-arch-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path: &Path = &dir.join(format!("{tag}.gguf"));
    std::fs::write(path, bytes).unwrap();
    let err = match Engine::load(path, &EngineOptions::default()) {
        Ok(_) => panic!("{tag}: the file loaded"),
        Err(e) => chain(&e),
    };
    eprintln!("{tag}: {err}");
    for w in words {
        assert!(
            err.contains(w),
            "{tag}: the error does not name '{w}': {err}"
        );
    }
}

#[test]
fn refusals_name_what_is_not_run() {
    // an architecture we do not run: its name and every supported one
    let arch = Some(MetaValue::String("starcoder2".into()));
    let bytes = variant("phi3", "general.architecture", arch, &[]);
    let supported: Vec<&str> = SUPPORTED_ARCHS
        .split(", ")
        .map(|a| a.split(' ').next().unwrap())
        .collect();
    assert!(supported.len() >= 15, "{supported:?}");
    let mut words = vec!["starcoder2"];
    words.extend(&supported);
    refused(&bytes, "unknown-arch", &words);
    for a in [
        "phi3",
        "gemma2",
        "granite",
        "olmo2",
        "exaone",
        "internlm2",
        "xverse",
        "llama",
    ] {
        assert!(supported.contains(&a), "{a} missing from {SUPPORTED_ARCHS}");
    }

    // Granite without RoPE (`rope.scaling.finetuned` false, as its hybrid models)
    let no_rope = variant(
        "granite",
        "granite.rope.scaling.finetuned",
        Some(MetaValue::Bool(false)),
        &[],
    );
    refused(
        &no_rope,
        "granite-no-rope",
        &["granite.rope.scaling.finetuned", "RoPE"],
    );
    // Granite without its required logit scale
    let no_scale = variant("granite", "granite.logit_scale", None, &[]);
    refused(
        &no_scale,
        "granite-no-logit-scale",
        &["granite.logit_scale"],
    );
    // feed-forward biases (which llama.cpp's Granite may load) are refused, not ignored
    let bias = variant(
        "granite",
        "general.name",
        None,
        &[("blk.0.ffn_up.bias", 256)],
    );
    refused(&bias, "granite-ffn-bias", &["blk.0.ffn_up.bias", "biases"]);
    // a fused QKV of the wrong height
    let qkv = variant(
        "phi3",
        "phi3.attention.head_count_kv",
        Some(MetaValue::U32(4)),
        &[],
    );
    refused(&qkv, "phi3-qkv-shape", &["blk.0.attn_qkv.weight"]);
}
