//! A broken mixture-of-experts file is refused at load with a typed error that names the key
//! or tensor at fault, never a panic: each case rewrites one thing of a valid synthetic
//! qwen3moe file (8 experts, 2 used per token).

use superinfer_runtime::core::gguf::{GgufFile, GgufWriter, MetaValue};
use superinfer_runtime::{chain, Engine, EngineOptions};
use superinfer_tests::synth::{self, Spec};

/// The valid file with metadata key `key` set to `value` (`None`: removed) and tensor
/// `tensor` dropped or given other dimensions.
fn variant(
    key: Option<(&str, Option<MetaValue>)>,
    tensor: Option<(&str, Option<Vec<u64>>)>,
) -> Vec<u8> {
    let bytes = synth::build(&Spec::qwen3moe());
    let f = GgufFile::parse(&bytes).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata() {
        match key {
            Some((name, ref value)) if name == *k => {
                if let Some(v) = value {
                    w.meta(*k, v.clone());
                }
            }
            _ => {
                w.meta(*k, MetaValue::from_value(v));
            }
        }
    }
    for t in f.tensors() {
        let data = f.tensor_data(t).to_vec();
        let dims = match tensor {
            Some((name, None)) if name == t.name => continue,
            Some((name, Some(ref dims))) if name == t.name => dims.clone(),
            _ => t.dims.clone(),
        };
        w.tensor(t.name, &dims, t.ty, data).unwrap();
    }
    w.finish().unwrap()
}

/// Loading `bytes` fails, and the error's whole chain mentions every one of `words`.
fn refused(bytes: &[u8], tag: &str, words: &[&str]) {
    let dir = std::env::temp_dir().join(format!("superinfer-moe-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tag}.gguf"));
    std::fs::write(&path, bytes).unwrap();
    let err = match Engine::load(&path, &EngineOptions::default()) {
        Ok(_) => panic!("{tag}: the broken file loaded"),
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
fn the_valid_file_loads() {
    let bytes = variant(None, None);
    let path = std::env::temp_dir().join(format!("superinfer-moe-ok-{}.gguf", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    Engine::load(&path, &EngineOptions::default()).unwrap();
}

#[test]
fn expert_counts_out_of_range_are_refused() {
    let count = "qwen3moe.expert_count";
    let used = "qwen3moe.expert_used_count";
    refused(
        &variant(Some((count, Some(MetaValue::U32(0)))), None),
        "zero-experts",
        &[count],
    );
    refused(
        &variant(Some((count, None)), None),
        "no-expert-count",
        &[count],
    );
    refused(
        &variant(Some((used, Some(MetaValue::U32(0)))), None),
        "zero-used",
        &[used],
    );
    refused(
        &variant(Some((used, Some(MetaValue::U32(9)))), None),
        "top-k-above-experts",
        &[used, "8"],
    );
    refused(&variant(Some((used, None)), None), "no-used-count", &[used]);
    // more experts than the tensors hold
    refused(
        &variant(Some((count, Some(MetaValue::U32(16)))), None),
        "count-above-tensor",
        &["blk.0.ffn_up_exps.weight", "16"],
    );
}

#[test]
fn missing_or_misshapen_expert_tensors_are_named() {
    for name in [
        "blk.1.ffn_gate_exps.weight",
        "blk.0.ffn_down_exps.weight",
        "blk.0.ffn_gate_inp.weight",
    ] {
        refused(&variant(None, Some((name, None))), "missing", &[name]);
    }
    // down's [n_ff, n_embd, experts] given as [n_embd, n_ff, experts]
    let down = "blk.0.ffn_down_exps.weight";
    refused(
        &variant(None, Some((down, Some(vec![256, 128, 8])))),
        "transposed-down",
        &[down],
    );
    // a 2-D tensor where the experts' 3-D one belongs
    let up = "blk.1.ffn_up_exps.weight";
    refused(
        &variant(None, Some((up, Some(vec![256, 1024])))),
        "flat-up",
        &[up],
    );
}

/// Bounded random-mutation fuzzing of a whole MoE model (the tiny gpt-oss fixture: MXFP4
/// experts, router and expert biases, sinks): a mutated header (metadata, tensor directory)
/// must load or fail with an error, never panic, and a file that loads must run a short
/// prompt (an error is fine, a panic or a hang is not).
#[test]
fn mutated_moe_files_never_panic() {
    let good =
        std::fs::read(superinfer_tests::fixtures_dir().join("moe/gpt-oss/model.gguf")).unwrap();
    let header = GgufFile::parse(&good).unwrap().data_offset();
    let dir = std::env::temp_dir().join(format!("superinfer-moe-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mutated.gguf");
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut loaded, mut ran) = (0, 0);
    for _ in 0..1000 {
        let mut b = good.clone();
        for _ in 0..1 + next() % 3 {
            let i = (next() % header as u64) as usize;
            match next() % 3 {
                0 => b[i] = next() as u8,
                1 => b[i] ^= 1 << (next() % 8),
                _ => {
                    let v = [0u64, 1, 2, 9, 16, 513, u32::MAX as u64][(next() % 7) as usize];
                    let end = (i + 4).min(b.len());
                    b[i..end].copy_from_slice(&v.to_le_bytes()[..end - i]);
                }
            }
        }
        std::fs::write(&path, &b).unwrap();
        let Ok(e) = Engine::load(
            &path,
            &EngineOptions {
                threads: 1,
                ..Default::default()
            },
        ) else {
            continue;
        };
        loaded += 1;
        let Ok(mut s) = e.session(&superinfer_runtime::SessionOptions::with_ctx(32)) else {
            continue;
        };
        if s.feed(&[1, 2, 3, 4, 5]).is_ok() {
            ran += 1;
        }
    }
    eprintln!("1000 mutated headers: {loaded} loaded, {ran} ran a prompt");
}
