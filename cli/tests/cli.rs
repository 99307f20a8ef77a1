//! The `superinfer` binary on synthetic models: outputs, and bad input giving one clear
//! error line and a non-zero exit (never a panic); and its memory on a real model.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use superinfer_tests::synth::{self, Spec};

fn superinfer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_superinfer"))
        .args(args)
        .output()
        .expect("run superinfer")
}

fn model(tag: &str) -> PathBuf {
    synth::write_temp(
        &Spec {
            n_layer: 1,
            ..Spec::llama()
        },
        tag,
    )
}

/// Asserts a failure with exactly one `error:` line on stderr and no panic.
fn assert_clean_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "expected failure, got success; stderr: {stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("internal error"),
        "panic: {stderr}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "want one error line, got: {stderr}");
    assert!(lines[0].starts_with("error:"), "{stderr}");
    assert!(
        lines[0].to_lowercase().contains(needle),
        "'{needle}' not in: {stderr}"
    );
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn missing_file() {
    let out = superinfer(&["run", "-m", "/nonexistent/model.gguf", "-p", "hi"]);
    assert_clean_error(&out, "cannot open");
}

#[test]
fn truncated_gguf() {
    let good = std::fs::read(model("trunc-src")).unwrap();
    let p = std::env::temp_dir().join(format!("superinfer-trunc-{}.gguf", std::process::id()));
    for cut in [10, good.len() / 3, good.len() - 7] {
        write(&p, &good[..cut]);
        let out = superinfer(&["run", "-m", p.to_str().unwrap(), "-p", "hi", "-n", "2"]);
        assert_clean_error(&out, "gguf");
    }
}

#[test]
fn corrupt_tensor_offset() {
    let mut b = std::fs::read(model("offset-src")).unwrap();
    // the offset field follows name, n_dims, dims and type of the directory entry
    let name = b"blk.0.ffn_down.weight";
    let mut key = (name.len() as u64).to_le_bytes().to_vec();
    key.extend_from_slice(name);
    let at = b.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    let off = at + 4 + 2 * 8 + 4;
    b[off..off + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let p = std::env::temp_dir().join(format!("superinfer-offset-{}.gguf", std::process::id()));
    write(&p, &b);
    let out = superinfer(&["run", "-m", p.to_str().unwrap(), "-p", "hi"]);
    assert_clean_error(&out, "outside the file");
}

#[test]
fn unknown_architecture() {
    let p = synth::write_temp(
        &Spec {
            arch: "mamba9",
            n_layer: 1,
            ..Spec::llama()
        },
        "unknown-arch",
    );
    let out = superinfer(&["run", "-m", p.to_str().unwrap(), "-p", "hi"]);
    assert_clean_error(&out, "unknown model architecture 'mamba9'");
}

#[test]
fn prompt_longer_than_context() {
    let p = model("ctx");
    let prompt = "word ".repeat(100);
    let out = superinfer(&[
        "run",
        "-m",
        p.to_str().unwrap(),
        "-p",
        &prompt,
        "-c",
        "16",
        "-n",
        "4",
    ]);
    assert_clean_error(&out, "context");
    // a context over the trained one is refused too
    let out = superinfer(&["run", "-m", p.to_str().unwrap(), "-p", "hi", "-c", "100000"]);
    assert_clean_error(&out, "context");
}

#[test]
fn bad_flags() {
    let out = superinfer(&["run", "--bogus"]);
    assert!(!out.status.success());
    let p = model("flags");
    let out = superinfer(&["run", "-m", p.to_str().unwrap(), "-p", "hi", "--top-p", "7"]);
    assert_clean_error(&out, "top_p");
    let out = superinfer(&["run", "-m", p.to_str().unwrap(), "-p", "hi", "--isa", "mmx"]);
    assert_clean_error(&out, "mmx");
}

#[test]
fn tokenize_prints_json_ids() {
    let p = model("tok");
    let out = superinfer(&["tokenize", "-m", p.to_str().unwrap(), "-p", "the"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<u32> = serde_json_ids(&out.stdout);
    let (tokens, _, _) = synth::vocab();
    // BOS (add_bos_token = true) then the merged " the"-less "the" token
    assert_eq!(ids[0] as usize, tokens.len() - 2);
    assert_eq!(tokens[ids[1] as usize], "the");
    assert_eq!(ids.len(), 2);
    let out = superinfer(&[
        "tokenize",
        "-m",
        p.to_str().unwrap(),
        "-p",
        "the",
        "--no-bos",
    ]);
    assert_eq!(serde_json_ids(&out.stdout).len(), 1);
}

fn serde_json_ids(stdout: &[u8]) -> Vec<u32> {
    let s = String::from_utf8_lossy(stdout);
    let s = s.trim();
    assert!(
        s.starts_with('[') && s.ends_with(']'),
        "not a JSON array: {s}"
    );
    s[1..s.len() - 1]
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| x.trim().parse().unwrap())
        .collect()
}

#[test]
fn run_generates_and_reports() {
    let p = model("run");
    let args = [
        "run",
        "-m",
        p.to_str().unwrap(),
        "-p",
        "the",
        "-n",
        "8",
        "--temp",
        "0.9",
        "--seed",
        "7",
        "-t",
        "2",
    ];
    let a = superinfer(&args);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let b = superinfer(&args);
    assert_eq!(a.stdout, b.stdout, "same seed, same text");
    let err = String::from_utf8_lossy(&a.stderr);
    assert!(err.contains("tok/s") && err.contains("isa:"), "{err}");
}

/// `run --ignore-eos --stop TEXT -n N` on a real model: the model's own end is masked, the
/// answer goes on to `-n`, and a stop string past the model's end cuts it there (the
/// scheduler and the package apply the same rules: wasm/tests/frontends.rs).
#[test]
fn run_stops_at_strings_and_ignores_eos() {
    let m = superinfer_tests::require_model(superinfer_tests::QWEN_05B);
    let prompt = "<|im_start|>user\nWhat is the capital of France? One short sentence.<|im_end|>\n\
                  <|im_start|>assistant\n";
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "-m",
            m.to_str().unwrap(),
            "-p",
            prompt,
            "--temp",
            "0",
        ];
        args.extend_from_slice(extra);
        let out = superinfer(&args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        let text = String::from_utf8(out.stdout).unwrap();
        // `run` ends its output with a newline of its own
        (text.strip_suffix('\n').unwrap().to_string(), err)
    };
    let (ends, err) = run(&["-n", "48"]);
    assert!(err.contains("stop: EndOfGeneration"), "{err}");
    let (longer, err) = run(&["-n", "40", "--ignore-eos"]);
    assert!(
        err.contains("stop: Length") && err.contains("generation: 40 tokens"),
        "{err}"
    );
    assert!(
        longer.starts_with(&ends) && longer.len() > ends.len(),
        "{ends:?} / {longer:?}"
    );
    // three characters whose first appearance is past the model's own end
    let from = ends.len();
    let (stop, cut) = longer[from..]
        .char_indices()
        .map(|(i, _)| longer[from + i..].chars().take(3).collect::<String>())
        .filter(|s| s.chars().count() == 3)
        .find_map(|s| longer.find(&s).filter(|&at| at > from).map(|at| (s, at)))
        .expect("a stop string past the end");
    let (cut_text, err) = run(&[
        "-n",
        "40",
        "--ignore-eos",
        "--stop",
        "zzz-not-there",
        "--stop",
        &stop,
    ]);
    assert!(err.contains("stop: StopSequence"), "{err}");
    assert_eq!(cut_text, longer[..cut], "stop {stop:?}");
}

#[test]
fn info_describes_the_model() {
    let p = model("info");
    let out = superinfer(&["info", "-m", p.to_str().unwrap()]);
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("architecture:  llama") && s.contains("n_layer:       1") && s.contains("Q8_0"),
        "{s}"
    );
}

#[test]
fn bench_reports_llama_bench_fields() {
    let p = model("bench");
    let rows = bench_json(
        &p,
        &["-p", "8", "-n", "4", "-t", "1,2", "-r", "2", "--json"],
    );
    // pp and tg for each of the two thread counts
    assert_eq!(rows.len(), 4);
    let mut seen = Vec::new();
    for r in rows {
        let (np, ng, t) = (
            r["n_prompt"].as_u64().unwrap(),
            r["n_gen"].as_u64().unwrap(),
            r["n_threads"].as_u64().unwrap(),
        );
        seen.push((np, ng, t));
        assert!(r["model_filename"].as_str().unwrap().ends_with(".gguf"));
        let samples = r["samples_ts"].as_array().unwrap();
        assert_eq!(samples.len(), 2, "one sample per repetition");
        let mean = samples.iter().map(|s| s.as_f64().unwrap()).sum::<f64>() / 2.0;
        assert!((r["avg_ts"].as_f64().unwrap() - mean).abs() <= 1e-9 * mean.max(1.0));
        assert!(r["avg_ts"].as_f64().unwrap() > 0.0);
        assert!(r["stddev_ts"].as_f64().unwrap() >= 0.0);
        assert!(r["bytes_per_token"].as_u64().unwrap() > 0);
        assert!(!r["isa"].as_str().unwrap().is_empty());
    }
    seen.sort();
    assert_eq!(seen, vec![(0, 4, 1), (0, 4, 2), (8, 0, 1), (8, 0, 2)]);
    // -n 0 skips tg, as in llama-bench
    let out = superinfer(&[
        "bench",
        "-m",
        p.to_str().unwrap(),
        "-p",
        "4",
        "-n",
        "0",
        "-r",
        "1",
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["n_gen"], 0);
}

/// `superinfer bench -m p ARGS` (JSON output), which must succeed: its rows.
fn bench_json(p: &std::path::Path, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["bench", "-m", p.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = superinfer(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON array");
    v.as_array().expect("one JSON array").clone()
}

#[test]
fn bench_at_depth_with_a_quantized_cache() {
    let p = model("bench-depth");
    let rows = bench_json(
        &p,
        &[
            "-p", "4", "-n", "4", "-d", "0,24", "-r", "1", "--ctk", "q8_0", "--ctv", "f32",
            "--json",
        ],
    );
    let depths: Vec<u64> = rows
        .iter()
        .map(|r| r["n_depth"].as_u64().unwrap())
        .collect();
    assert_eq!(depths, [0, 0, 24, 24], "pp and tg at each depth");
    for r in rows {
        assert_eq!(r["type_k"], "q8_0");
        assert_eq!(r["type_v"], "f32");
        // the pool holds whole blocks of 16 positions
        let n_ctx = (r["n_depth"].as_u64().unwrap() + 4).next_multiple_of(16);
        // 1 layer, 2 KV heads of 64: Q8_0 keys 34 bytes per 32 values, f32 values 4 bytes
        let want = n_ctx * (128 / 32 * 34 + 128 * 4);
        assert_eq!(r["kv_cache_bytes"].as_u64().unwrap(), want);
        assert!(r["peak_rss_bytes"].as_u64().unwrap() > 0);
        assert!(r["load_peak_rss_bytes"].as_u64().unwrap() > 0);
    }
    let out = superinfer(&["bench", "-m", p.to_str().unwrap(), "--ctk", "q4_1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("q8_0"));
}

#[test]
fn bench_runs_sequences_in_parallel() {
    let p = model("bench-np");
    let rows = bench_json(
        &p,
        &[
            "-np", "1,3", "-p", "8", "-n", "4", "-r", "1", "-t", "2", "--json",
        ],
    );
    let shape: Vec<(u64, u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["n_parallel"].as_u64().unwrap(),
                r["n_prompt"].as_u64().unwrap(),
                r["n_gen"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(shape, [(1, 8, 0), (1, 0, 4), (3, 8, 0), (3, 0, 4)]);
    for r in &rows {
        let (avg, per_seq) = (
            r["avg_ts"].as_f64().unwrap(),
            r["per_seq_ts"].as_f64().unwrap(),
        );
        assert!(avg > 0.0);
        let np = r["n_parallel"].as_f64().unwrap();
        assert!(
            (per_seq * np - avg).abs() < 1e-6 * avg,
            "aggregate = per sequence x n"
        );
    }
    for (args, says) in [
        (&["-np", "0"][..], "at least 1"),
        (&["-np", "2", "-d", "8"][..], "-d is not supported with -np"),
        (&["-np", "2", "-p", "0"][..], "needs a prompt"),
    ] {
        let mut all = vec!["bench", "-m", p.to_str().unwrap(), "-r", "1"];
        all.extend_from_slice(args);
        let out = superinfer(&all);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The whole process's peak resident memory, load included, stays within the model file,
/// the KV cache and 64 MiB on Qwen2.5-0.5B as shipped: `load_peak_rss_bytes` is VmHWM right
/// after loading. This holds only while the repack drops each piece's source pages as it
/// goes; holding the mapped source and the repacked copy at once peaked at ~756 MiB for the
/// 469 MiB file.
#[test]
#[cfg(target_os = "linux")]
fn load_peak_rss_within_file_and_kv_cache() {
    let m = superinfer_tests::require_model(superinfer_tests::QWEN_05B);
    let file = std::fs::metadata(&m).unwrap().len();
    let rows = bench_json(&m, &["-p", "0", "-n", "1", "-r", "1", "--json"]);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let budget = file + r["kv_cache_bytes"].as_u64().unwrap() + (64 << 20);
    for field in ["load_peak_rss_bytes", "peak_rss_bytes"] {
        let peak = r[field].as_u64().expect(field);
        eprintln!(
            "{field}: {:.1} MiB (budget {:.1} MiB)",
            mib(peak),
            mib(budget)
        );
        assert!(
            peak <= budget,
            "{field} {:.1} MiB > file {:.1} MiB + KV cache + 64 MiB",
            mib(peak),
            mib(file)
        );
    }
}

#[test]
fn bench_bad_flags() {
    let p = model("bench-flags");
    let m = p.to_str().unwrap();
    assert_clean_error(&superinfer(&["bench", "-m", m, "-r", "0"]), "repetitions");
    assert_clean_error(&superinfer(&["bench", "-m", m, "-t", "0"]), "thread");
    assert_clean_error(&superinfer(&["bench", "-m", m, "--isa", "mmx"]), "mmx");
    assert_clean_error(
        &superinfer(&["bench", "-m", m, "-p", "100000", "-n", "0"]),
        "context",
    );
}

#[test]
fn isas_lists_the_default_first_and_scalar_last() {
    let out = superinfer(&["isas"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = text.lines().collect();
    assert_eq!(names.last(), Some(&"scalar"), "{text}");
    for n in &names {
        assert!(
            ["avx512", "avx-vnni", "avx2", "neon", "simd128", "scalar"].contains(n),
            "unknown ISA name {n}"
        );
    }
    // every listed ISA can be forced
    let m = model("isas");
    for n in names {
        let out = superinfer(&[
            "bench",
            "-m",
            m.to_str().unwrap(),
            "-p",
            "0",
            "-n",
            "2",
            "-r",
            "1",
            "--isa",
            n,
        ]);
        assert!(
            out.status.success(),
            "--isa {n}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn perplexity_prints_running_and_final_estimates() {
    let m = model("ppl");
    let dir = std::env::temp_dir().join(format!("superinfer-cli-ppl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("text.txt");
    // synthetic vocabulary: one token per byte-ish piece; plenty of tokens for 3 chunks of 16
    write(
        &text,
        "the quick brown fox jumps over the lazy dog. "
            .repeat(8)
            .as_bytes(),
    );
    let m = m.to_str().unwrap();
    let t = text.to_str().unwrap();
    let out = superinfer(&["perplexity", "-m", m, "-f", t, "-c", "16", "-b", "8"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("[1]"), "{stdout}");
    let last = stdout.lines().last().unwrap();
    let ppl: f64 = last
        .strip_prefix("Final estimate: PPL = ")
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    // a tiny random model: perplexity at least 1, and finite
    assert!(ppl.is_finite() && ppl >= 1.0, "{stdout}");

    assert_clean_error(
        &superinfer(&["perplexity", "-m", m, "-f", t, "-c", "4096"]),
        "needs at least",
    );
    assert_clean_error(
        &superinfer(&["perplexity", "-m", m, "-f", t, "-c", "16", "-b", "5"]),
        "must divide",
    );
    assert_clean_error(
        &superinfer(&["perplexity", "-m", m, "-f", "/nonexistent/text"]),
        "/nonexistent/text",
    );
}

#[test]
fn speculative_flags() {
    let p = model("spec");
    let m = p.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "-m",
            m,
            "-p",
            "the theory",
            "-n",
            "24",
            "--temp",
            "0",
        ];
        args.extend_from_slice(extra);
        superinfer(&args)
    };
    assert_clean_error(
        &run(&["--model-draft", m, "--lookup-ngram", "3"]),
        "choose one",
    );
    assert_clean_error(
        &run(&["--lookup-ngram", "3", "--draft-p-min", "2"]),
        "probability",
    );
    assert_clean_error(
        &run(&["--model-draft", m, "--draft-min", "5", "--draft-max", "2"]),
        "--draft-min",
    );
    assert_clean_error(&run(&["--model-draft", "/nonexistent.gguf"]), "draft model");
    // greedy output is the same plainly, with lookup, with a draft model (itself) and with
    // --draft-max 0 (which decodes plainly)
    let plain = run(&[]);
    assert!(plain.status.success());
    for extra in [
        &["--lookup-ngram", "2"][..],
        &["--model-draft", m, "--draft-max", "4"],
        &["--lookup-ngram", "2", "--draft-max", "0"],
    ] {
        let out = run(extra);
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.stdout, plain.stdout, "{extra:?}");
    }
}

/// `embed` on all-MiniLM-L6-v2 (a Hugging Face directory): one JSON line per text, in order,
/// unit vectors of 384; a directory that is not a model gives one clear error line.
#[test]
fn embed_prints_json_lines() {
    let dir = superinfer_tests::models_dir().join("all-minilm-l6-v2");
    assert!(
        dir.join("model.safetensors").is_file(),
        "run scripts/fetch-models.sh minilm first"
    );
    let out = superinfer(&[
        "embed",
        "-m",
        dir.to_str().unwrap(),
        "-p",
        "A cat.",
        "-p",
        "Ein Hund.",
        "-t",
        "2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["index"], i);
        let v: Vec<f64> = l["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(v.len(), 384);
        let n: f64 = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((n - 1.0).abs() < 1e-5, "norm {n}");
    }
    let empty = std::env::temp_dir().join(format!("superinfer-embed-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let out = superinfer(&["embed", "-m", empty.to_str().unwrap(), "-p", "x"]);
    assert_clean_error(&out, "config.json");
}
