//! A synthetic importance matrix for a model, in llama-imatrix's GGUF format (`NAME.in_sum2`
//! and `NAME.counts` per 2-D weight but the token embeddings; `imatrix.datasets`,
//! `imatrix.chunk_count`, `imatrix.chunk_size`): deterministic, so llama-quantize and
//! `superinfer quantize` can be run on the same file offline and in the tests.

use std::path::{Path, PathBuf};

use superinfer_runtime::core::gguf::{GgufFile, GgufWriter, MetaValue};

/// Writes (once) the synthetic imatrix of `model_file` to `models_dir()/derived/TAG-imatrix.gguf`.
pub fn synthetic_imatrix(model_file: &Path, tag: &str) -> PathBuf {
    let dst = crate::models_dir()
        .join("derived")
        .join(format!("{tag}-imatrix.gguf"));
    if dst.is_file() {
        return dst;
    }
    let bytes = std::fs::read(model_file).unwrap();
    let f = GgufFile::parse(&bytes).unwrap();
    let mut w = GgufWriter::new();
    w.meta("imatrix.datasets", MetaValue::strings(["synthetic"]));
    w.meta("imatrix.chunk_count", MetaValue::U32(10));
    w.meta("imatrix.chunk_size", MetaValue::U32(512));
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    for t in f.tensors() {
        if t.dims.len() < 2 || !t.name.ends_with(".weight") || t.name == "token_embd.weight" {
            continue;
        }
        let n_expert = t.dims.get(2).copied().unwrap_or(1) as usize;
        let count = 5120.0f32;
        let sums: Vec<f32> = (0..t.dims[0] as usize * n_expert)
            .map(|_| count * (0.01 + 4.0 * next() * next()))
            .collect();
        w.tensor_f32(
            format!("{}.in_sum2", t.name),
            &[t.dims[0], n_expert as u64],
            &sums,
        )
        .unwrap();
        w.tensor_f32(
            format!("{}.counts", t.name),
            &[1, n_expert as u64],
            &vec![count; n_expert],
        )
        .unwrap();
    }
    // (the writer pads the last tensor too, as llama.cpp's reader expects)
    let out = w.finish().unwrap();
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    let tmp = dst.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, out).unwrap();
    std::fs::rename(&tmp, &dst).unwrap();
    dst
}
