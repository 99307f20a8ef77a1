//! Tokenizer unit tests on tiny vocabularies written with the GGUF writer.

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::*;
use crate::gguf::{GgufWriter, MetaValue};

/// (text, type, score)
fn spm_file(tokens: &[(&str, i32, f32)], add_space_prefix: bool) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.meta("tokenizer.ggml.model", MetaValue::String("llama".into()))
        .meta(
            "tokenizer.ggml.tokens",
            MetaValue::strings(tokens.iter().map(|t| t.0)),
        )
        .meta(
            "tokenizer.ggml.token_type",
            MetaValue::i32s(tokens.iter().map(|t| t.1)),
        )
        .meta(
            "tokenizer.ggml.scores",
            MetaValue::f32s(tokens.iter().map(|t| t.2)),
        )
        .meta("tokenizer.ggml.bos_token_id", MetaValue::U32(1))
        .meta("tokenizer.ggml.eos_token_id", MetaValue::U32(2))
        .meta(
            "tokenizer.ggml.add_space_prefix",
            MetaValue::Bool(add_space_prefix),
        );
    w.finish().unwrap()
}

fn spm_vocab() -> Vec<(String, i32, f32)> {
    let mut v: Vec<(String, i32, f32)> = vec![
        ("<unk>".into(), 2, 0.0),
        ("<s>".into(), 3, 0.0),
        ("</s>".into(), 3, 0.0),
        ("<ctrl>".into(), 3, 0.0),
        ("<user>".into(), 4, 0.0),
    ];
    for b in 0..=255u8 {
        v.push((alloc::format!("<0x{b:02X}>"), 6, 0.0));
    }
    for (t, s) in [
        ("▁", -1.0),
        ("h", -2.0),
        ("e", -2.0),
        ("l", -2.0),
        ("o", -2.0),
        ("he", -3.0),
        ("ll", -1.5),
        ("llo", -1.0),
        ("hello", -0.5),
        ("▁hello", -0.1),
        ("w", -2.0),
    ] {
        v.push((t.into(), 1, s));
    }
    v
}

fn spm() -> Tokenizer {
    let v = spm_vocab();
    let t: Vec<(&str, i32, f32)> = v.iter().map(|(a, b, c)| (a.as_str(), *b, *c)).collect();
    let bytes = spm_file(&t, true);
    Tokenizer::from_gguf(&GgufFile::parse(&bytes).unwrap()).unwrap()
}

fn ids_of(t: &Tokenizer, texts: &[&str]) -> Vec<u32> {
    texts
        .iter()
        .map(|s| t.vocab().find_str(s).unwrap())
        .collect()
}

#[test]
fn spm_merges_by_score_and_adds_bos_and_space_prefix() {
    let t = spm();
    assert_eq!(
        t.encode("hello", true, false).unwrap(),
        [vec![1], ids_of(&t, &["▁hello"])].concat()
    );
    // "hell": merges "ll" (-1.5) first, then "he" (-3.0); "▁h" and "ell" are not tokens
    assert_eq!(
        t.encode("hell", false, false).unwrap(),
        ids_of(&t, &["▁", "he", "ll"])
    );
    // "hello" prefers the single highest-scoring chain up to "▁hello"
    assert_eq!(
        t.encode("hello", false, false).unwrap(),
        ids_of(&t, &["▁hello"])
    );
    assert_eq!(
        t.decode(&t.encode("hello hello", false, false).unwrap(), false),
        " hello hello"
    );
}

#[test]
fn spm_byte_fallback_and_streaming_utf8() {
    let t = spm();
    let ids = t.encode("hé", false, false).unwrap();
    // é = C3 A9 has no token: two byte tokens
    assert_eq!(ids, ids_of(&t, &["▁", "h", "<0xC3>", "<0xA9>"]));
    let mut d = StreamDecoder::new(false);
    let parts: Vec<String> = ids.iter().map(|&i| d.push(&t, i).unwrap()).collect();
    assert_eq!(parts, [" ", "h", "", "é"]);
    assert_eq!(d.flush(), "");
    // a lone continuation byte can never complete: it becomes U+FFFD, not a stall
    let mut d = StreamDecoder::new(false);
    let a9 = t.vocab().find_str("<0xA9>").unwrap();
    assert_eq!(d.push(&t, a9).unwrap(), "\u{FFFD}");
    let c3 = t.vocab().find_str("<0xC3>").unwrap();
    assert_eq!(d.push(&t, c3).unwrap(), "");
    assert_eq!(d.flush(), "\u{FFFD}");
}

#[test]
fn special_tokens_control_only_when_parsing_user_defined_always() {
    let t = spm();
    let ctrl = t.vocab().find_str("<ctrl>").unwrap();
    let user = t.vocab().find_str("<user>").unwrap();
    let with = t.encode("hello<ctrl>hello<user>", false, true).unwrap();
    assert!(with.contains(&ctrl) && with.contains(&user));
    let without = t.encode("hello<ctrl>hello<user>", false, false).unwrap();
    assert!(!without.contains(&ctrl) && without.contains(&user));
    // control tokens render only with special = true
    assert_eq!(t.token_to_piece(ctrl, false), b"");
    assert_eq!(t.token_to_piece(ctrl, true), b"<ctrl>");
    assert!(t.is_eog(2) && !t.is_eog(ctrl));
}

#[test]
fn encode_prompt_parses_specials_and_adds_bos_once() {
    let t = spm();
    let hello = ids_of(&t, &["▁hello"]);
    // BOS added (the model wants one), and not again when the text starts with it
    assert_eq!(
        t.encode_prompt("hello").unwrap(),
        [vec![1], hello.clone()].concat()
    );
    assert_eq!(
        t.encode_prompt("<s>hello").unwrap(),
        [vec![1], hello.clone()].concat()
    );
    // special tokens in the text are parsed; BOS later in the text is not "at the start"
    let ctrl = t.vocab().find_str("<ctrl>").unwrap();
    assert_eq!(
        t.encode_prompt("<ctrl>hello").unwrap(),
        [vec![1, ctrl], hello.clone()].concat()
    );
    assert_eq!(t.encode_prompt("hello<s>").unwrap()[..2], [1, hello[0]]);
    // a model without BOS: nothing added
    let b = bpe();
    let end = b.vocab().find_str("<|im_end|>").unwrap();
    assert_eq!(
        b.encode_prompt("a<|im_end|>").unwrap(),
        [ids_of(&b, &["a"]), vec![end]].concat()
    );
}

fn bpe() -> Tokenizer {
    bpe_with("qwen2", &["<|im_end|>"])
}

/// A byte-level BPE with the pre-tokenizer `pre` and the control tokens `controls`.
fn bpe_with(pre: &str, controls: &[&str]) -> Tokenizer {
    let map = bpe::ByteMap::new();
    let mut tokens: Vec<String> = (0..=255u8)
        .map(|b| {
            let mut s = String::new();
            map.encode(&[b], &mut s);
            s
        })
        .collect();
    let sp = tokens[b' ' as usize].clone();
    let merges = [
        ("a".to_string(), "b".to_string()),
        ("b".into(), "c".into()),
        ("ab".into(), "c".into()),
        (sp.clone(), "abc".into()),
    ];
    for (l, r) in &merges {
        tokens.push(alloc::format!("{l}{r}"));
    }
    let mut types = vec![1i32; tokens.len()];
    for c in controls {
        tokens.push(c.to_string());
        types.push(3);
    }
    let mut w = GgufWriter::new();
    w.meta("tokenizer.ggml.model", MetaValue::String("gpt2".into()))
        .meta("tokenizer.ggml.pre", MetaValue::String(pre.into()))
        .meta("tokenizer.ggml.tokens", MetaValue::strings(tokens))
        .meta("tokenizer.ggml.token_type", MetaValue::i32s(types))
        .meta(
            "tokenizer.ggml.merges",
            MetaValue::strings(merges.iter().map(|(l, r)| alloc::format!("{l} {r}"))),
        );
    let bytes = w.finish().unwrap();
    Tokenizer::from_gguf(&GgufFile::parse(&bytes).unwrap()).unwrap()
}

#[test]
fn bpe_applies_merges_by_rank() {
    let t = bpe();
    // "abc": rank 0 merges a+b, then ab+c (rank 2) — b+c (rank 1) never applies
    assert_eq!(t.encode("abc", false, false).unwrap(), ids_of(&t, &["abc"]));
    // "bc" alone merges with rank 1
    assert_eq!(t.encode("bc", false, false).unwrap(), ids_of(&t, &["bc"]));
    let mut sp_abc = String::new();
    bpe::ByteMap::new().encode(b" abc", &mut sp_abc);
    assert_eq!(
        t.encode("x abc", false, false).unwrap(),
        ids_of(&t, &["x", &sp_abc])
    );
    // no BOS by default for BPE; the EOG text is a control token
    assert_eq!(t.encode("", true, false).unwrap(), Vec::<u32>::new());
    let end = t.vocab().find_str("<|im_end|>").unwrap();
    assert!(t.is_eog(end) && t.is_control(end));
    assert_eq!(
        t.encode("a<|im_end|>", false, true).unwrap(),
        [ids_of(&t, &["a"]), vec![end]].concat()
    );
}

#[test]
fn bpe_round_trips_any_text() {
    let t = bpe();
    for text in ["héllo wörld 😀", "  \t\n\n x", "日本語", "a'll'VE 123"] {
        let ids = t.encode(text, false, false).unwrap();
        assert_eq!(t.decode(&ids, false), text);
    }
}

#[test]
fn unknown_tokenizer_model_is_an_error() {
    let mut w = GgufWriter::new();
    w.meta(
        "tokenizer.ggml.model",
        MetaValue::String("wordpiece9".into()),
    )
    .meta("tokenizer.ggml.tokens", MetaValue::strings(["a"]));
    let bytes = w.finish().unwrap();
    assert!(matches!(
        Tokenizer::from_gguf(&GgufFile::parse(&bytes).unwrap()),
        Err(Error::Tokenizer(_))
    ));
}

#[test]
fn harmony_markers_are_rendered_and_only_return_and_call_end_generation() {
    let marks = ["<|start|>", "<|channel|>", "<|message|>", "<|end|>"];
    let t = bpe_with(
        "gpt-4o",
        &[
            marks[0],
            marks[1],
            marks[2],
            marks[3],
            "<|return|>",
            "<|call|>",
        ],
    );
    let id = |s: &str| t.vocab().find_str(s).unwrap();
    for m in marks {
        // user-defined: rendered without `special`, parsed without `parse_special`
        assert_eq!(t.token_to_piece(id(m), false), m.as_bytes(), "{m}");
        assert!(!t.is_eog(id(m)) && !t.is_control(id(m)), "{m}");
        assert_eq!(t.encode(m, false, false).unwrap(), vec![id(m)]);
    }
    for m in ["<|return|>", "<|call|>"] {
        assert!(t.is_eog(id(m)) && t.is_control(id(m)), "{m}");
        assert_eq!(t.token_to_piece(id(m), false), b"");
    }
    // without <|return|> and <|call|> (not Harmony), <|end|> still ends generation
    let t = bpe_with("gpt-4o", &["<|end|>"]);
    assert!(t.is_eog(t.vocab().find_str("<|end|>").unwrap()));
}

/// The code point classes the pre-tokenizers use are llama.cpp's (its unicode-data.cpp, dumped
/// by tests/fixtures/pretokenize/harness.cpp), for every code point.
#[test]
fn unicode_classes_are_llama_cpps() {
    let json = include_str!("../../../tests/fixtures/pretokenize/classes.json");
    let mut want = vec![b'O'; 0x110000];
    let body = json.trim().trim_start_matches("[[").trim_end_matches("]]");
    for range in body.split("],[") {
        let f: Vec<&str> = range.split(',').collect();
        let (a, b): (usize, usize) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        let class = f[2].trim_matches('"').as_bytes()[0];
        want[a..=b].fill(class);
    }
    let mut wrong = Vec::new();
    for (cp, &w) in want.iter().enumerate() {
        let Some(c) = char::from_u32(cp as u32) else {
            continue;
        };
        let got = if unicode::is_whitespace(c) {
            b'S'
        } else if unicode::is_letter(c) {
            b'L'
        } else if unicode::is_number(c) {
            b'N'
        } else {
            b'O'
        };
        if got != w {
            wrong.push((cp, got as char, w as char));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} differ, first {:x?}",
        wrong.len(),
        &wrong[..wrong.len().min(8)]
    );
}
