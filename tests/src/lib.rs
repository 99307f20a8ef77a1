//! Shared helpers of the integration tests: where the real models and llama.cpp fixtures
//! live, the checks against those fixtures, a writer of tiny synthetic models and the
//! upcycled mixture-of-experts model.

pub mod agreement;
pub mod batch;
pub mod imatrix;
pub mod iq4;
pub mod json_schema;
pub mod lora;
pub mod reference;
pub mod sha256;
pub mod synth;
pub mod upcycle;

use std::path::{Path, PathBuf};

pub use superinfer_runtime as runtime;

/// The real models the suite runs against: (fixture dir, file name, fetch-script name).
pub const QWEN_05B: (&str, &str, &str) = (
    "qwen2.5-coder-0.5b",
    "qwen2.5-coder-0.5b-instruct.gguf",
    "qwen2.5-0.5b",
);
pub const GEMMA3_270M: (&str, &str, &str) =
    ("gemma-3-270m", "gemma-3-270m-q4_k_m.gguf", "gemma3-270m");
pub const QWEN_15B: (&str, &str, &str) = (
    "qwen2.5-coder-1.5b",
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "qwen2.5-1.5b",
);

/// `$SUPERINFER_MODELS`, else `~/.cache/superinfer/models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("SUPERINFER_MODELS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/superinfer/models"),
    }
}

/// `$SUPERINFER_FIXTURES`, else `tests/fixtures` in this repository (llama.cpp's reference
/// outputs; how they were made: `tests/fixtures/README.md`). The default must resolve inside
/// the repository (a symlink to elsewhere panics): a clone's tests read only the clone.
pub fn fixtures_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SUPERINFER_FIXTURES") {
        return PathBuf::from(d);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = manifest.join("fixtures");
    let inside = |p: &Path| {
        let repo = manifest.parent().and_then(|r| r.canonicalize().ok());
        match (p.canonicalize(), repo) {
            (Ok(p), Some(repo)) => Some(p.starts_with(repo)),
            _ => None,
        }
    };
    match inside(&dir) {
        Some(true) => dir,
        Some(false) => panic!(
            "the fixture dir {} resolves outside the repository: the tests read only files of \
             the clone; put the fixtures back in tests/fixtures (git checkout tests/fixtures) or \
             set SUPERINFER_FIXTURES to use others on purpose",
            dir.display()
        ),
        None => panic!(
            "the fixture dir {} is missing: it is part of the repository \
             (git checkout tests/fixtures), or set SUPERINFER_FIXTURES",
            dir.display()
        ),
    }
}

/// The path of a real model; fails the test (never skips it) when the model is missing.
pub fn require_model(model: (&str, &str, &str)) -> PathBuf {
    let p = models_dir().join(model.1);
    assert!(
        p.is_file(),
        "model {} not found at {}: run `scripts/fetch-models.sh {}` first (or set SUPERINFER_MODELS)",
        model.2,
        p.display(),
        model.2
    );
    p
}

/// A copy of the real model `model` with every tensor dequantized to F32 (metadata as it
/// is, `general.file_type` 0: all F32), written once under `models_dir()/derived/` and
/// reused: products over F32 weights take f32 activations, with no int8 rounding. Fails the
/// test when the model is missing.
pub fn f32_copy(model: (&str, &str, &str)) -> PathBuf {
    use runtime::core::gguf::{GgufFile, GgufWriter, MetaValue};
    use runtime::core::quant;
    let dst = models_dir()
        .join("derived")
        .join(format!("{}-F32.gguf", model.2));
    if dst.is_file() {
        return dst;
    }
    let bytes = std::fs::read(require_model(model)).unwrap();
    let f = GgufFile::parse(&bytes).unwrap();
    let mut w = GgufWriter::new();
    for (key, value) in f.metadata() {
        w.meta(*key, MetaValue::from_value(value));
    }
    w.meta("general.file_type", MetaValue::U32(0));
    for t in f.tensors() {
        let mut values = vec![0f32; t.n_elements() as usize];
        quant::dequantize_row(t.ty, f.tensor_data(t), &mut values).unwrap();
        w.tensor_f32(t.name, &t.dims, &values).unwrap();
    }
    let out = w.finish().unwrap();
    drop(w);
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    let tmp = dst.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, out).unwrap();
    std::fs::rename(&tmp, &dst).unwrap();
    dst
}

/// Parses a fixture JSON file of a model.
pub fn fixture(model: (&str, &str, &str), file: &str) -> serde_json::Value {
    let p = fixtures_dir().join(model.0).join(file);
    let text = std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad fixture {}: {e}", p.display()))
}

pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|x| x.as_u64().expect("token id") as u32)
        .collect()
}

/// Log-softmax over the whole vocabulary, in f64.
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    let lse = max + sum.ln();
    logits.iter().map(|&l| l as f64 - lse).collect()
}

pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

/// The vocab-only GGUF files of llama.cpp's tokenizer test suite (`models/ggml-vocab-*.gguf`
/// with their `.inp`/`.out` cases, from the pinned llama-cpp-python sdist), as
/// `scripts/fetch-vocabs.sh` unpacks them under `models_dir()/llama-vocab`; fails the test
/// (never skips it) when they are missing.
pub fn require_vocab_dir() -> PathBuf {
    let d = models_dir().join("llama-vocab");
    assert!(
        d.join("ggml-vocab-gpt-2.gguf.inp").is_file(),
        "llama.cpp's vocab test files not found in {}: run `scripts/fetch-vocabs.sh` first \
         (or set SUPERINFER_MODELS)",
        d.display()
    );
    d
}

/// A command that failed cleanly: a non-zero exit and one `error:` line on stderr mentioning
/// `needle`, no panic (what the CLI's bad-input tests assert).
pub fn one_error(out: &std::process::Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure; stderr: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("internal error"),
        "{stderr}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "want one error line, got: {stderr}");
    assert!(
        lines[0].starts_with("error:") && lines[0].contains(needle),
        "'{needle}' not in: {stderr}"
    );
}
