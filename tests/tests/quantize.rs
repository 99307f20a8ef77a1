//! `quantize` against llama-quantize: the F32 copy of Qwen2.5-Coder-0.5B (the suite's
//! `f32_copy`) quantized to Q4_0, Q8_0 and Q4_K_M at 2 threads hashes to the SHA-256 of the
//! file the pinned llama-quantize wrote from the same input
//! (tests/fixtures/quantize/qwen2.5-coder-0.5b.json, made by
//! scripts/quantize/make-fixtures.sh): the same metadata, tensor order, per-tensor types
//! (Q4_K_M's mix and its Q5_0 / Q8_0 fallbacks for 896-column rows) and block bytes; and
//! Q4_0 with a synthetic importance matrix (tests/src/imatrix.rs: the weighted Q4_0 / Q4_1
//! quantizers, the imatrix keys, Q4_1 for the first ffn_down layers).

use std::io::Read;
use std::path::Path;

use superinfer_runtime::quantize::{self, QuantizeOptions};
use superinfer_tests::imatrix::synthetic_imatrix;
use superinfer_tests::{f32_copy, fixtures_dir, models_dir, QWEN_05B};

fn sha256_file(path: &Path) -> String {
    let mut f = std::fs::File::open(path).unwrap();
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 8 << 20];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    ctx.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn qwen_f32_copy_quantizes_to_llama_quantize_bytes() {
    let input = f32_copy(QWEN_05B);
    let path = fixtures_dir().join("quantize/qwen2.5-coder-0.5b.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", path.display()));
    let fx: serde_json::Value = serde_json::from_str(&text).unwrap();
    let dir = std::env::temp_dir().join(format!("superinfer-quantize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // the imatrix by a path relative to the models dir: its name is written into the file
    // (`quantize.imatrix.file`), so it must be the one the fixture script gave llama-quantize
    synthetic_imatrix(&superinfer_tests::require_model(QWEN_05B), "qwen2.5-0.5b");
    std::env::set_current_dir(models_dir()).unwrap();
    let mut failures = Vec::new();
    for case in ["Q4_0", "Q8_0", "Q4_K_M", "Q4_0+imatrix"] {
        let want = &fx["outputs"][case];
        let (ty, im) = match case.split_once('+') {
            Some((ty, _)) => (ty, Some("derived/qwen2.5-0.5b-imatrix.gguf".into())),
            None => (case, None),
        };
        let out = dir.join(format!("{ty}.gguf"));
        let (ftype, name) = quantize::parse_ftype(ty).unwrap();
        let opts = QuantizeOptions {
            threads: 2,
            imatrix: im,
            ..QuantizeOptions::new(ftype, name)
        };
        let report = quantize::quantize(&input, &out, &opts, &mut |_| {}).unwrap();
        let size = std::fs::metadata(&out).unwrap().len();
        let sha = sha256_file(&out);
        std::fs::remove_file(&out).unwrap();
        assert_eq!(report.n_tensors, 291);
        if Some(size) != want["size"].as_u64() || Some(sha.as_str()) != want["sha256"].as_str() {
            failures.push(format!(
                "{case}: {size} bytes sha256 {sha}, llama-quantize wrote {} bytes sha256 {}",
                want["size"], want["sha256"]
            ));
        }
    }
    let _ = std::fs::remove_dir(&dir);
    assert!(
        failures.is_empty(),
        "{}\n(the fixture's input was {} bytes, sha256 {}: if {} differs, remake the fixture \
         with scripts/quantize/make-fixtures.sh)",
        failures.join("\n"),
        fx["input"]["size"],
        fx["input"]["sha256"],
        input.display()
    );
}
