//! `superinfer gguf-split` and split models through the binary: the shards it writes load
//! from the first one in every command that takes -m (the same text as the whole file),
//! `info` lists them, and bad flags or shard sets end in one clear error line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use superinfer_tests::one_error;
use superinfer_tests::synth::{self, Spec};

fn superinfer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_superinfer"))
        .args(args)
        .output()
        .expect("run superinfer")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fresh_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("superinfer-cli-split-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn run_text(model: &Path) -> String {
    ok(&superinfer(&[
        "run",
        "-m",
        s(model),
        "-p",
        "the cat",
        "-n",
        "12",
        "--temp",
        "0",
        "-t",
        "2",
    ]))
}

#[test]
fn split_then_run_info_bench_and_perplexity() {
    let whole = synth::write_temp(&Spec::llama(), "cli-split");
    let d = fresh_dir("run");
    let prefix = d.join("tiny");
    let out = ok(&superinfer(&[
        "gguf-split",
        "--split-max-tensors",
        "4",
        s(&whole),
        s(&prefix),
    ]));
    let written: Vec<&str> = out.lines().collect();
    let n = written.len();
    assert!(n >= 3, "{out}");
    for (i, line) in written.iter().enumerate() {
        let name = format!("tiny-{:05}-of-{n:05}.gguf", i + 1);
        assert!(line.starts_with("wrote ") && line.contains(&name), "{out}");
        assert!(d.join(&name).is_file());
    }
    let first = d.join(format!("tiny-00001-of-{n:05}.gguf"));
    assert_eq!(run_text(&first), run_text(&whole));

    let info = ok(&superinfer(&["info", "-m", s(&first)]));
    assert!(
        info.contains(&format!("shards:        {n} (gguf-split)")),
        "{info}"
    );
    assert!(
        info.contains(&format!("tiny-{n:05}-of-{n:05}.gguf")),
        "{info}"
    );
    assert!(info.contains("split.count"), "{info}");

    let bench = ok(&superinfer(&[
        "bench",
        "-m",
        s(&first),
        "-p",
        "8",
        "-n",
        "2",
        "-r",
        "1",
        "-o",
        "json",
    ]));
    assert!(bench.contains("\"model_size\""), "{bench}");

    let text = d.join("text.txt");
    std::fs::write(&text, "the cat sat on the mat. ".repeat(40)).unwrap();
    let ppl = |m: &Path| {
        let o = ok(&superinfer(&[
            "perplexity",
            "-m",
            s(m),
            "-f",
            s(&text),
            "-c",
            "64",
            "-t",
            "1",
        ]));
        o.lines().last().unwrap_or_default().to_string()
    };
    assert_eq!(ppl(&first), ppl(&whole));

    // splitting by size; a dry run writes nothing
    let d2 = fresh_dir("size");
    let out = ok(&superinfer(&[
        "gguf-split",
        "--split-max-size",
        "30K",
        "--dry-run",
        s(&whole),
        s(&d2.join("m")),
    ]));
    assert!(
        out.lines().count() >= 2 && out.lines().all(|l| l.starts_with("would write ")),
        "{out}"
    );
    assert_eq!(std::fs::read_dir(&d2).unwrap().count(), 0);
    let out = ok(&superinfer(&[
        "gguf-split",
        "--split-max-size",
        "30K",
        s(&whole),
        s(&d2.join("m")),
    ]));
    let k = out.lines().count();
    assert_eq!(
        run_text(&d2.join(format!("m-00001-of-{k:05}.gguf"))),
        run_text(&whole)
    );

    // the metadata alone in the first shard
    let d4 = fresh_dir("meta-first");
    let out = ok(&superinfer(&[
        "gguf-split",
        "--split-max-tensors",
        "100",
        "--no-tensor-first-split",
        s(&whole),
        s(&d4.join("m")),
    ]));
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.lines().next().unwrap().contains("(0 tensors"), "{out}");
    assert_eq!(
        run_text(&d4.join("m-00001-of-00002.gguf")),
        run_text(&whole)
    );
    let _ = std::fs::remove_dir_all(d4);

    // a split model splits again (from its first shard)
    let d3 = fresh_dir("again");
    let out = ok(&superinfer(&[
        "gguf-split",
        "--split-max-tensors",
        "100",
        s(&first),
        s(&d3.join("one")),
    ]));
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(
        run_text(&d3.join("one-00001-of-00001.gguf")),
        run_text(&whole)
    );
    for d in [d, d2, d3] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn split_errors_are_one_line() {
    let whole = synth::write_temp(&Spec::llama(), "cli-split-err");
    let d = fresh_dir("err");
    let prefix = d.join("m");
    ok(&superinfer(&[
        "gguf-split",
        "--split-max-tensors",
        "8",
        s(&whole),
        s(&prefix),
    ]));
    let shards: Vec<PathBuf> = {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    let n = shards.len();
    assert!(n >= 2);
    // a later shard: names the first
    one_error(
        &superinfer(&["run", "-m", s(&shards[1]), "-p", "hi"]),
        &format!("load the first shard, {}", shards[0].display()),
    );
    // a missing shard, for run, info and serve
    std::fs::remove_file(&shards[n - 1]).unwrap();
    let missing = shards[n - 1].display().to_string();
    one_error(
        &superinfer(&["run", "-m", s(&shards[0]), "-p", "hi"]),
        &missing,
    );
    one_error(&superinfer(&["info", "-m", s(&shards[0])]), &missing);
    // (serve says where it listens before it loads)
    let serve = superinfer(&["serve", "-m", s(&shards[0]), "--port", "0"]);
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(
        !serve.status.success() && !err.contains("panicked"),
        "{err}"
    );
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains(&missing),
        "{err}"
    );
    // bad flags
    one_error(
        &superinfer(&[
            "gguf-split",
            "--split-max-size",
            "12Q",
            s(&whole),
            s(&prefix),
        ]),
        "not a positive size",
    );
    one_error(
        &superinfer(&[
            "gguf-split",
            "--split-max-tensors",
            "0",
            s(&whole),
            s(&prefix),
        ]),
        "at least 1",
    );
    let both = superinfer(&[
        "gguf-split",
        "--split-max-size",
        "1M",
        "--split-max-tensors",
        "3",
        s(&whole),
        s(&prefix),
    ]);
    assert_eq!(both.status.code(), Some(2), "clap usage error");
    one_error(
        &superinfer(&["gguf-split", "/nonexistent/m.gguf", s(&prefix)]),
        "cannot open",
    );
    let _ = std::fs::remove_dir_all(d);
}

/// The repack releases each piece's source pages in whichever shard holds it: loading
/// Qwen2.5-0.5B from four shards peaks within the files, the KV cache and 64 MiB, as the
/// whole file does (`cli.rs`); holding the mapped shards and the repacked copy at once would
/// take some 300 MiB more.
#[test]
#[cfg(target_os = "linux")]
fn split_load_peak_rss_within_files_and_kv_cache() {
    let m = superinfer_tests::require_model(superinfer_tests::QWEN_05B);
    let d = fresh_dir("rss");
    let out = ok(&superinfer(&[
        "gguf-split",
        "--split-max-size",
        "150M",
        s(&m),
        s(&d.join("q")),
    ]));
    let n = out.lines().count();
    assert!(n >= 3, "{out}");
    let first = d.join(format!("q-00001-of-{n:05}.gguf"));
    let files: u64 = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let json = ok(&superinfer(&[
        "bench",
        "-m",
        s(&first),
        "-p",
        "0",
        "-n",
        "1",
        "-r",
        "1",
        "--json",
    ]));
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    let r = &rows[0];
    assert_eq!(
        r["model_size"].as_u64(),
        Some(files),
        "model_size is every shard's"
    );
    let budget = files + r["kv_cache_bytes"].as_u64().unwrap() + (64 << 20);
    let peak = r["load_peak_rss_bytes"].as_u64().unwrap();
    eprintln!(
        "{n} shards: load peak {:.1} MiB, budget {:.1} MiB",
        peak as f64 / (1 << 20) as f64,
        budget as f64 / (1 << 20) as f64
    );
    assert!(peak <= budget, "load peak {peak} > {budget}");
    let _ = std::fs::remove_dir_all(d);
}
