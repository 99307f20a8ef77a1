//! llama.cpp's tokenizer test suite (tests/test-tokenizer-0.cpp): every vocab-only file of the
//! pinned sources' `models/` that has cases (`.inp`: texts separated by
//! `\n__ggml_vocab_test__\n`; `.out`: one line of token ids per text) is loaded from its metadata
//! alone and every text must tokenize to exactly llama.cpp's ids, with the test's flags
//! (`add_special = false`, `parse_special = false`). The files come from
//! `scripts/fetch-vocabs.sh` (scripts/test.sh runs it).

use superinfer_runtime::core::gguf::GgufFile;
use superinfer_runtime::core::tokenizer::Tokenizer;

/// The files with cases in llama-cpp-python 0.3.36's llama.cpp (aquila, baichuan, gpt-neox and
/// nomic-bert-moe have none).
const VOCABS: &[&str] = &[
    "bert-bge",
    "command-r",
    "deepseek-coder",
    "deepseek-llm",
    "falcon",
    "gemma-4",
    "gpt-2",
    "llama-bpe",
    "llama-spm",
    "mpt",
    "phi-3",
    "qwen2",
    "qwen35",
    "refact",
    "starcoder",
];

/// test-tokenizer-0.cpp's `read_tests`: (text, ids) pairs.
fn cases(inp: &str, out: &str) -> Vec<(String, Vec<u32>)> {
    let sep = "\n__ggml_vocab_test__\n";
    let mut texts = Vec::new();
    let mut pos = 0;
    while pos < inp.len() {
        match inp[pos..].find(sep) {
            Some(n) => {
                texts.push(inp[pos..pos + n].to_string());
                pos += n + sep.len();
            }
            None => {
                texts.push(inp[pos..].to_string());
                break;
            }
        }
    }
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        texts.len(),
        lines.len(),
        "input and output have different numbers of tests"
    );
    texts
        .into_iter()
        .zip(lines)
        .map(|(t, l)| {
            let ids = l
                .split_whitespace()
                .map(|x| x.parse().expect("token id"))
                .collect();
            (t, ids)
        })
        .collect()
}

#[test]
fn every_vocab_tokenizes_as_llama_cpp() {
    let dir = superinfer_tests::require_vocab_dir();
    let mut report = Vec::new();
    let mut total = 0;
    for name in VOCABS {
        let path = dir.join(format!("ggml-vocab-{name}.gguf"));
        let read = |ext: &str| {
            let p = path.with_extension(format!("gguf{ext}"));
            std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        let bytes = read("");
        let inp = String::from_utf8(read(".inp")).expect("utf-8 .inp");
        let out = String::from_utf8(read(".out")).expect("utf-8 .out");
        let file = GgufFile::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let tok = match Tokenizer::from_gguf(&file) {
            Ok(t) => t,
            Err(e) => {
                report.push(format!("{name}: does not load: {e}"));
                continue;
            }
        };
        let cases = cases(&inp, &out);
        assert!(cases.len() >= 30, "{name}: only {} cases", cases.len());
        total += cases.len();
        let wrong: Vec<String> = cases
            .iter()
            .filter_map(|(text, want)| {
                let got = tok.encode(text, false, false).expect("encode");
                (&got != want)
                    .then(|| format!("  {text:?}\n    llama.cpp: {want:?}\n    ours:      {got:?}"))
            })
            .collect();
        if !wrong.is_empty() {
            report.push(format!(
                "{name}: {} of {} cases differ:\n{}",
                wrong.len(),
                cases.len(),
                wrong[..wrong.len().min(3)].join("\n")
            ));
        }
    }
    assert!(
        report.is_empty(),
        "{} of {} vocabularies fail:\n{}",
        report.len(),
        VOCABS.len(),
        report.join("\n")
    );
    assert!(total > 15 * 30, "{total} cases");
}

#[test]
fn every_vocab_file_with_cases_is_tested() {
    let dir = superinfer_tests::require_vocab_dir();
    let mut with_cases: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().ok()?;
            let stem = n.strip_prefix("ggml-vocab-")?.strip_suffix(".gguf.inp")?;
            Some(stem.to_string())
        })
        .collect();
    with_cases.sort();
    assert_eq!(with_cases, VOCABS);
}

/// The vocab-only files llama.cpp ships without cases (aquila and gpt-neox: BPE with no
/// `tokenizer.ggml.pre`, i.e. llama.cpp's "default" rule; baichuan: SentencePiece;
/// nomic-bert-moe: T5's unigram with its precompiled charsmap), against llama-tokenize's ids on
/// the qwen35 case texts (tests/fixtures/vocab-suite/extra.json, made by make-fixture.sh there).
#[test]
fn vocabs_without_cases_tokenize_as_llama_tokenize() {
    let dir = superinfer_tests::require_vocab_dir();
    let path = superinfer_tests::fixtures_dir().join("vocab-suite/extra.json");
    let json = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let all: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut report = Vec::new();
    for (name, cases) in all.as_object().unwrap() {
        let p = dir.join(format!("ggml-vocab-{name}.gguf"));
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let file = GgufFile::parse(&bytes).unwrap();
        let tok = match Tokenizer::from_gguf(&file) {
            Ok(t) => t,
            Err(e) => {
                report.push(format!("{name}: does not load: {e}"));
                continue;
            }
        };
        let cases = cases.as_array().unwrap();
        assert!(cases.len() >= 40, "{name}: {} cases", cases.len());
        let wrong: Vec<String> = cases
            .iter()
            .filter_map(|c| {
                let text = c["text"].as_str().unwrap();
                let want = superinfer_tests::ids(&c["ids"]);
                let got = tok.encode(text, false, false).expect("encode");
                (got != want)
                    .then(|| format!("  {text:?}\n    llama.cpp: {want:?}\n    ours:      {got:?}"))
            })
            .collect();
        if !wrong.is_empty() {
            report.push(format!(
                "{name}: {} of {} differ:\n{}",
                wrong.len(),
                cases.len(),
                wrong[..wrong.len().min(3)].join("\n")
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
