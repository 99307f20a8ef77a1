//! `superinfer quantize` through the binary on synthetic models: a model it writes loads
//! and reports the chosen types, and bad input (not a GGUF, unknown or unsupported type,
//! output = input, an unwritable output, a quantized input without --allow-requantize,
//! a missing or corrupt --imatrix) ends in one clear error line and a non-zero exit, never a panic.

use std::path::PathBuf;
use std::process::{Command, Output};

use superinfer_runtime::core::quant::GgmlType;
use superinfer_tests::one_error;
use superinfer_tests::synth::{self, Spec};

fn superinfer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_superinfer"))
        .args(args)
        .output()
        .expect("run superinfer")
}

fn model(tag: &str, weight_type: GgmlType) -> PathBuf {
    synth::write_temp(
        &Spec {
            n_layer: 2,
            weight_type,
            ..Spec::llama()
        },
        tag,
    )
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("superinfer-q-{}-{name}", std::process::id()))
}

#[test]
fn quantizes_a_model_that_then_loads() {
    let input = model("q-f32", GgmlType::F32);
    let out = temp("q4km.gguf");
    // (the synthetic models' token embeddings are Q8_0 whatever the other weights are)
    let o = superinfer(&[
        "quantize",
        "--allow-requantize",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
        "q4_k_m",
        "-t",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("as Q4_K_M using 2 threads"), "{stderr}");
    // one progress line per tensor, llama-quantize's format
    assert!(
        stderr.contains("blk.0.ffn_down.weight") && stderr.contains("converting to q6_K .."),
        "{stderr}"
    );
    assert!(stderr.contains("quant size  ="), "{stderr}");
    let info = superinfer(&["info", "-m", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.status.success(),
        "{}",
        String::from_utf8_lossy(&info.stderr)
    );
    assert!(text.contains("Q4_K") && text.contains("Q6_K"), "{text}");
    std::fs::remove_file(&out).unwrap();
    // no temporary file is left beside it
    let leftovers = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.contains(&format!("superinfer-q-{}-q4km", std::process::id())) && n.contains(".tmp")
        })
        .count();
    assert_eq!(leftovers, 0);
}

#[test]
fn bad_input_is_one_clear_error() {
    let f32 = model("q-bad-f32", GgmlType::F32);
    let q8 = model("q-bad-q8", GgmlType::Q8_0);
    let (f32s, q8s) = (f32.to_str().unwrap(), q8.to_str().unwrap());
    let out = temp("bad-out.gguf");
    let outs = out.to_str().unwrap();
    let text = temp("not-a-model.gguf");
    std::fs::write(&text, b"hello, this is not a model\n").unwrap();

    one_error(
        &superinfer(&["quantize", text.to_str().unwrap(), outs, "Q4_0"]),
        "GGUF",
    );
    one_error(
        &superinfer(&["quantize", "/nonexistent/in.gguf", outs, "Q4_0"]),
        "/nonexistent/in.gguf",
    );
    let o = superinfer(&["quantize", f32s, outs, "Q9_9"]);
    one_error(&o, "unknown type 'Q9_9'");
    one_error(&o, "Q4_K_M");
    one_error(
        &superinfer(&["quantize", f32s, outs, "IQ2_XXS"]),
        "IQ2_XXS is not supported yet",
    );
    one_error(&superinfer(&["quantize", f32s, f32s, "Q4_0"]), "same file");
    one_error(
        &superinfer(&[
            "quantize",
            "--allow-requantize",
            f32s,
            "/nonexistent/dir/out.gguf",
            "Q4_0",
        ]),
        "cannot write '/nonexistent/dir/out.gguf'",
    );
    one_error(
        &superinfer(&["quantize", q8s, outs, "Q4_0"]),
        "requantizing from type q8_0 is disabled",
    );
    one_error(
        &superinfer(&[
            "quantize",
            "--imatrix",
            "/nonexistent/im.gguf",
            f32s,
            outs,
            "Q4_K_M",
        ]),
        "cannot read imatrix /nonexistent/im.gguf",
    );
    let junk = temp("junk-imatrix.dat");
    std::fs::write(&junk, [1u8, 0, 0, 0, 200, 0]).unwrap();
    one_error(
        &superinfer(&[
            "quantize",
            "--imatrix",
            junk.to_str().unwrap(),
            f32s,
            outs,
            "Q4_K_M",
        ]),
        "truncated as a legacy imatrix",
    );
    std::fs::remove_file(&junk).unwrap();
    one_error(
        &superinfer(&[
            "quantize",
            "--output-tensor-type",
            "q3_x",
            f32s,
            outs,
            "Q4_0",
        ]),
        "unsupported tensor type 'q3_x'",
    );
    assert!(!out.exists(), "no output is left after a failure");
    // the same quantized input is accepted with --allow-requantize
    let o = superinfer(&[
        "quantize",
        "--allow-requantize",
        q8s,
        outs,
        "Q4_0",
        "-t",
        "2",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_file(&out).unwrap();
    std::fs::remove_file(&text).unwrap();
}
