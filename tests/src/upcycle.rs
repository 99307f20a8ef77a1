//! An "upcycled" mixture-of-experts model made from a dense one: Qwen2.5-0.5B (`qwen2`) turned
//! into a `qwen2moe` file whose every layer's dense FFN is copied, byte for byte, into
//! `EXPERTS` identical experts behind a random router. Its outputs equal the dense model's up
//! to rounding, and llama.cpp runs it, so it checks the MoE forward pass on a real model that
//! writes real text (tests/tests/moe_fixtures.rs; the fixture was made from this very file,
//! tests/fixtures/README.md).
//!
//! Why it equals the dense model: llama.cpp's qwen2moe (src/models/qwen2moe.cpp) weighs the
//! selected experts by the softmax over ALL router logits, top-k taken from it and NOT
//! renormalised. With every expert selected (`expert_used_count` = `expert_count`) the weights
//! are the whole softmax, which sums to 1, so Σ w_i FFN(x) = FFN(x) up to f32 rounding,
//! whatever the router says. The loader requires the shared expert (and its sigmoid gate):
//! its down projection is all zeros, so it adds exactly 0. The attention, norms, embeddings
//! and output are the dense file's tensors unchanged (qwen2moe's attention is qwen2's: q/k/v
//! biases, NEOX rope, head_dim = n_embd / n_head).

use std::path::PathBuf;
use std::sync::Mutex;

use superinfer_runtime::core::gguf::{GgufFile, GgufWriter, MetaValue};

use crate::synth::Rng;

/// Experts per layer, all of them used for every token.
pub const EXPERTS: usize = 4;
/// The shared expert's width (its output is zero: see the module doc).
const SHARED_FF: u64 = 32;

/// The upcycled file's bytes, from the dense `qwen2` file's.
pub fn upcycle(dense: &[u8]) -> Result<Vec<u8>, String> {
    let f = GgufFile::parse(dense).map_err(|e| e.to_string())?;
    let arch = f
        .get_str("general.architecture")
        .map_err(|e| e.to_string())?;
    if arch != Some("qwen2") {
        return Err(format!("expected a qwen2 model, found {arch:?}"));
    }
    let n_embd = f
        .get_u64("qwen2.embedding_length")
        .map_err(|e| e.to_string())?
        .ok_or("no qwen2.embedding_length")?;
    let n_ff = f
        .get_u64("qwen2.feed_forward_length")
        .map_err(|e| e.to_string())?
        .ok_or("no qwen2.feed_forward_length")?;
    let mut w = GgufWriter::new();
    for (key, value) in f.metadata() {
        let value = MetaValue::from_value(value);
        match *key {
            "general.architecture" => w.meta(*key, MetaValue::String("qwen2moe".into())),
            "general.name" => {
                let name = f.get_str(key).ok().flatten().unwrap_or("Qwen2");
                w.meta(
                    *key,
                    MetaValue::String(format!("{name} (upcycled: {EXPERTS} identical experts)")),
                )
            }
            k if k.starts_with("qwen2.") => w.meta(format!("qwen2moe.{}", &k[6..]), value),
            k => w.meta(k, value),
        };
    }
    let e = EXPERTS as u64;
    w.meta("qwen2moe.expert_count", MetaValue::U32(e as u32))
        .meta("qwen2moe.expert_used_count", MetaValue::U32(e as u32))
        .meta(
            "qwen2moe.expert_feed_forward_length",
            MetaValue::U32(n_ff as u32),
        )
        .meta(
            "qwen2moe.expert_shared_feed_forward_length",
            MetaValue::U32(SHARED_FF as u32),
        );

    let mut rng = Rng::new(2025);
    let mut random = |n: u64, scale: f32| -> Vec<f32> {
        (0..n).map(|_| rng.uniform() * scale).collect::<Vec<_>>()
    };
    let err = |e: superinfer_runtime::core::Error| e.to_string();
    for t in f.tensors() {
        let data = f.tensor_data(t);
        let Some((layer, role)) = t
            .name
            .strip_prefix("blk.")
            .and_then(|r| r.split_once('.'))
            .filter(|(_, role)| role.starts_with("ffn_") && *role != "ffn_norm.weight")
        else {
            w.tensor(t.name, &t.dims, t.ty, data.to_vec())
                .map_err(err)?;
            continue;
        };
        let n = |x: &str| format!("blk.{layer}.{x}");
        let exps = match role {
            "ffn_gate.weight" => "ffn_gate_exps.weight",
            "ffn_up.weight" => "ffn_up_exps.weight",
            "ffn_down.weight" => "ffn_down_exps.weight",
            other => return Err(format!("unexpected dense tensor blk.{layer}.{other}")),
        };
        if role == "ffn_gate.weight" {
            // the router (a small random one: any router gives the same result) and the shared
            // expert, written before the experts as llama.cpp's converter does
            w.tensor_f32(
                n("ffn_gate_inp.weight"),
                &[n_embd, e],
                &random(n_embd * e, 0.05),
            )
            .map_err(err)?;
            w.tensor_f32(
                n("ffn_gate_inp_shexp.weight"),
                &[n_embd],
                &random(n_embd, 0.05),
            )
            .map_err(err)?;
            for s in ["ffn_gate_shexp.weight", "ffn_up_shexp.weight"] {
                let v = random(n_embd * SHARED_FF, 0.05);
                w.tensor_f32(n(s), &[n_embd, SHARED_FF], &v).map_err(err)?;
            }
            let zeros = vec![0f32; (n_embd * SHARED_FF) as usize];
            w.tensor_f32(n("ffn_down_shexp.weight"), &[SHARED_FF, n_embd], &zeros)
                .map_err(err)?;
        }
        if t.dims.len() != 2 {
            return Err(format!("{}: expected a 2-D weight", t.name));
        }
        let mut dims = t.dims.clone();
        dims.push(e);
        w.tensor(n(exps), &dims, t.ty, data.repeat(EXPERTS))
            .map_err(err)?;
    }
    w.finish().map_err(err)
}

/// The upcycled Qwen2.5-0.5B in `models_dir()/derived/`, made once from the dense model (which
/// must be there: `scripts/fetch-models.sh qwen2.5-0.5b`) and reused.
pub fn upcycled_qwen05b() -> PathBuf {
    // the tests of one binary run on threads of one process: one writes, the others wait
    static MAKING: Mutex<()> = Mutex::new(());
    let _making = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let dst = crate::models_dir()
        .join("derived")
        .join("qwen2.5-0.5b-upcycled-qwen2moe.gguf");
    if !dst.is_file() {
        let dense = std::fs::read(crate::require_model(crate::QWEN_05B)).unwrap();
        let out = upcycle(&dense).unwrap_or_else(|e| panic!("upcycling Qwen2.5-0.5B: {e}"));
        write_atomic(&dst, &out);
    }
    dst
}

/// Writes `bytes` to `dst` through a temporary file and a rename, so that no reader (another
/// test process) sees a partial file.
pub fn write_atomic(dst: &std::path::Path, bytes: &[u8]) {
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    let tmp = dst.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dst).unwrap();
}
