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

/// The general regex engine (llama.cpp's `std::regex` fallback, emulated) on gpt-4o's regex
/// gives llama.cpp's pieces too: the same fixture, no hand-written splitter.
#[test]
fn general_regex_engine_splits_gpt4o_as_llama_cpp() {
    use superinfer_runtime::core::tokenizer::PreTokenizer;
    const GPT4O: &str = "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    let pre = PreTokenizer::general(&[GPT4O]).unwrap();
    assert_eq!(pre.single_pattern(), None);
    let path = superinfer_tests::fixtures_dir().join("pretokenize/gpt4o.json");
    let json = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cases: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut wrong = Vec::new();
    for case in cases.as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let want: Vec<&str> = case["pieces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        let got: Vec<&str> = pre
            .split(text)
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
        "{} texts differ:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(5)].join("\n")
    );
}

/// The hand-written splitters of the rules llama.cpp hand-codes (qwen2, qwen35, llama3) agree
/// with the general engine on the same regexes over the mixed-script corpus.
#[test]
fn hand_written_splitters_agree_with_the_general_engine() {
    use superinfer_runtime::core::tokenizer::PreTokenizer;
    let path = superinfer_tests::fixtures_dir().join("pretokenize/gpt4o.json");
    let json = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cases: serde_json::Value = serde_json::from_str(&json).unwrap();
    let regexes = [
        ("qwen2", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
        ("qwen35", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
        ("llama-bpe", "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
    ];
    let mut wrong = Vec::new();
    for (name, re) in regexes {
        let hand = PreTokenizer::from_pre(name).unwrap();
        assert!(hand.single_pattern().is_some(), "{name}");
        let general = PreTokenizer::general(&[re]).unwrap();
        for case in cases.as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let (h, g) = (hand.split(text), general.split(text));
            if h != g {
                wrong.push(format!(
                    "{name}: {text:?}\n  hand:    {h:?}\n  general: {g:?}"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} differ:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(5)].join("\n")
    );
}
