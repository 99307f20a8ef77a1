//! The gpt-4o (o200k, gpt-oss) pre-tokenizer against llama.cpp's own splitter: the fixture
//! `tests/fixtures/pretokenize/gpt4o.json` holds llama.cpp's pieces (`unicode_regex_split`
//! with the regex `llama-vocab.cpp` gives `tokenizer.ggml.pre = "gpt-4o"`) for every text
//! of a varied corpus; `make-fixture.sh` beside it remade it from the pinned sources.

use superinfer_runtime::core::tokenizer::{pretokenize, Pattern};

#[test]
fn gpt4o_splits_as_llama_cpp() {
    let path = superinfer_tests::fixtures_dir().join("pretokenize/gpt4o.json");
    let json = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cases: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cases = cases.as_array().unwrap();
    assert!(cases.len() > 400, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let want: Vec<&str> = case["pieces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        let got: Vec<&str> = pretokenize(text, Pattern::Gpt4o)
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect();
        if got != want {
            wrong.push(format!(
                "{text:?}\n  llama.cpp: {want:?}\n  ours:      {got:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} texts split differently:\n{}",
        wrong.len(),
        cases.len(),
        wrong[..wrong.len().min(5)].join("\n")
    );
}

#[test]
fn gpt4o_is_the_pre_tokenizer_of_gpt_oss_files() {
    assert_eq!(Pattern::from_pre("gpt-4o"), Some(Pattern::Gpt4o));
}
