//! The structured crate on a small synthetic tokenizer: each grammar kind compiles,
//! enforces itself and fails with the right code; the cache; lazy triggers.

mod common;

use std::sync::Arc;

use common::{generate, tokenizer};
use serde_json::{json, Value};
use superinfer_structured::{Grammar, Grammars, Trigger};

fn grammars() -> Grammars {
    Grammars::new(&tokenizer())
}

#[test]
fn json_schema_outputs_validate() {
    let tok = tokenizer();
    let g = Grammars::new(&tok);
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "n": {"type": "integer", "minimum": 1, "maximum": 9},
            "ok": {"type": "boolean"},
            "kind": {"enum": ["a", "b"]}
        },
        "required": ["name", "n", "ok", "kind"],
        "additionalProperties": false
    });
    let c = g.compile(&Grammar::JsonSchema(schema)).unwrap();
    for seed in 1..6 {
        let mut con = c.constraint();
        let (text, ended) = generate(&tok, &mut *con, seed, 200);
        assert!(ended, "seed {seed}: no end within 200 tokens: {text:?}");
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let n = v["n"].as_i64().unwrap();
        assert!((1..=9).contains(&n), "{text}");
        assert!(v["name"].as_str().unwrap().chars().count() <= 8, "{text}");
        assert!(v["ok"].is_boolean(), "{text}");
        assert!(["a", "b"].contains(&v["kind"].as_str().unwrap()), "{text}");
        assert!(c.accepts(&text), "{text}");
        let st = con.stats().unwrap();
        assert!(st.masks > 0 && st.max_us >= st.median_us, "{st:?}");
    }
    assert!(!c.accepts("{\"name\": \"x\"}"));
}

#[test]
fn fixed_keys_are_forced() {
    let tok = tokenizer();
    let g = Grammars::new(&tok);
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "boolean"}},
        "required": ["name"],
        "additionalProperties": false
    });
    let c = g.compile(&Grammar::JsonSchema(schema)).unwrap();
    let mut con = c.constraint();
    let mut forced = Vec::new();
    con.forced(&mut forced);
    // `{"name": ` is forced from the start
    assert!(forced.len() >= 3, "{forced:?}");
    assert_eq!(tok.decode(&forced, false), "{\"name\": ");
}

#[test]
fn json_object_regex_lark() {
    let tok = tokenizer();
    let g = Grammars::new(&tok);
    let obj = g.compile(&Grammar::JsonObject).unwrap();
    assert!(obj.accepts("{\"a\": [1, 2]}"));
    assert!(!obj.accepts("[1]"));
    let mut con = obj.constraint();
    let (text, _) = generate(&tok, &mut *con, 7, 60);
    assert!(text.starts_with('{'), "{text:?}");

    let rx = g
        .compile(&Grammar::Regex("[0-9]{3}-[a-c]+".into()))
        .unwrap();
    assert!(rx.accepts("123-abca"));
    assert!(!rx.accepts("12-a"));
    for seed in 1..4 {
        let mut con = rx.constraint();
        let (text, _) = generate(&tok, &mut *con, seed, 12);
        assert!(text.len() >= 5 && text.as_bytes()[3] == b'-', "{text:?}");
        assert!(text[..3].bytes().all(|b| b.is_ascii_digit()), "{text:?}");
    }

    let lark = g
        .compile(&Grammar::Lark(
            "start: greeting \" \" NAME\ngreeting: \"hi\" | \"hello\"\nNAME: /[a-z]{1,5}/\n".into(),
        ))
        .unwrap();
    assert!(lark.accepts("hello bob"));
    assert!(!lark.accepts("hey bob"));
    let mut con = lark.constraint();
    let (text, ended) = generate(&tok, &mut *con, 3, 20);
    assert!(ended && lark.accepts(&text), "{text:?}");
}

#[test]
fn errors_have_codes() {
    let g = grammars();
    let e = g
        .compile(&Grammar::JsonSchema(
            json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}, "propertyNames": {"maxLength": 3}}),
        ))
        .unwrap_err();
    assert_eq!(e.code, "unsupported_schema_keyword", "{e}");
    assert!(e.keyword.is_some(), "{e:?}");
    assert!(e.message.contains(e.keyword.as_deref().unwrap()), "{e}");

    let e = g
        .compile(&Grammar::JsonSchema(
            json!({"type": "string", "format": "no-such-format"}),
        ))
        .unwrap_err();
    assert_eq!(e.code, "unsupported_schema_keyword", "{e}");
    assert_eq!(e.keyword.as_deref(), Some("format"));

    // a oneOf whose branches may both match is refused naming it; a discriminated one
    // (Pydantic's tagged unions: a required property with a distinct const per branch) is
    // exact as an anyOf and compiles
    let overlapping = json!({"oneOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]}]});
    let e = g.compile(&Grammar::JsonSchema(overlapping)).unwrap_err();
    assert_eq!(
        (e.code, e.keyword.as_deref()),
        ("unsupported_schema_keyword", Some("oneOf")),
        "{e}"
    );
    let tagged = json!({
        "$defs": {
            "Cat": {"type": "object", "required": ["kind", "lives"], "additionalProperties": false,
                    "properties": {"kind": {"const": "cat", "type": "string"}, "lives": {"type": "integer"}}},
            "Dog": {"type": "object", "required": ["kind", "good"], "additionalProperties": false,
                    "properties": {"kind": {"const": "dog", "type": "string"}, "good": {"type": "boolean"}}}},
        "type": "object", "required": ["pet"], "additionalProperties": false,
        "properties": {"pet": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
                               "discriminator": {"propertyName": "kind",
                                                 "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}}}}});
    let c = g.compile(&Grammar::JsonSchema(tagged)).unwrap();
    assert!(c.accepts(r#"{"pet": {"kind": "dog", "good": true}}"#));
    assert!(!c.accepts(r#"{"pet": {"kind": "dog", "lives": 9}}"#));

    let e = g
        .compile(&Grammar::JsonSchema(json!({"type": "nonsense"})))
        .unwrap_err();
    assert_eq!(e.code, "invalid_schema", "{e}");
    let e = g.compile(&Grammar::JsonSchema(json!([1, 2]))).unwrap_err();
    assert_eq!(e.code, "invalid_schema", "{e}");

    let e = g.compile(&Grammar::Lark("start: foo".into())).unwrap_err();
    assert_eq!(e.code, "invalid_grammar", "{e}");
    let e = g.compile(&Grammar::Regex("(".into())).unwrap_err();
    assert_eq!(e.code, "invalid_grammar", "{e}");
    let e = g.compile(&Grammar::Gbnf("root ::= x".into())).unwrap_err();
    assert_eq!(e.code, "invalid_grammar", "{e}");
    // Display names the code
    assert!(e.to_string().contains("invalid_grammar"));
}

#[test]
fn too_large_is_refused() {
    let g = grammars();
    // over 1 MiB of schema
    let props: serde_json::Map<String, Value> = (0..40_000)
        .map(|i| (format!("property_{i:06}"), json!({"type": "string"})))
        .collect();
    let e = g
        .compile(&Grammar::JsonSchema(
            json!({"type": "object", "properties": props}),
        ))
        .unwrap_err();
    assert_eq!(e.code, "grammar_too_large", "{e}");
    // nesting
    let mut v = json!({"type": "integer"});
    for _ in 0..70 {
        v = json!({"type": "array", "items": v});
    }
    let e = g.compile(&Grammar::JsonSchema(v)).unwrap_err();
    assert_eq!(e.code, "grammar_too_large", "{e}");
    let deep = format!("{}a{}", "(".repeat(80), ")".repeat(80));
    assert_eq!(
        g.compile(&Grammar::Regex(deep)).unwrap_err().code,
        "grammar_too_large"
    );
}

#[test]
fn pathological_grammars_are_bounded() {
    let tok = tokenizer();
    let g = Grammars::new(&tok);
    let t0 = std::time::Instant::now();
    // exponential alternation: (a|aa)* ambiguity, and a regex whose DFA explodes
    let cases = [
        Grammar::Lark("start: x*\nx: \"a\" | \"a\" \"a\" | x x\n".into()),
        Grammar::Regex("(a|b)*a(a|b){20}".into()),
        Grammar::Regex("(x+x+)+y".into()),
    ];
    for case in cases {
        match g.compile(&case) {
            Err(e) => assert_eq!(e.code, "grammar_too_large", "{e}"),
            Ok(c) => {
                let mut con = c.constraint();
                let t = std::time::Instant::now();
                let _ = generate(&tok, &mut *con, 5, 40);
                assert!(t.elapsed().as_secs() < 10, "{case:?}: {:?}", t.elapsed());
            }
        }
    }
    assert!(t0.elapsed().as_secs() < 30, "{:?}", t0.elapsed());
}

#[test]
fn cache_returns_the_same_compile() {
    let g = grammars();
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let a = g.compile(&Grammar::JsonSchema(s.clone())).unwrap();
    let b = g.compile(&Grammar::JsonSchema(s)).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    let c = g.compile(&Grammar::JsonObject).unwrap();
    assert!(!Arc::ptr_eq(&a, &c));
    // errors are cached too, and stay errors
    let e1 = g.compile(&Grammar::Regex("(".into())).unwrap_err();
    let e2 = g.compile(&Grammar::Regex("(".into())).unwrap_err();
    assert_eq!(e1, e2);
}

#[test]
fn lazy_text_trigger() {
    let tok = tokenizer();
    let g = Grammars::new(&tok);
    let c = g
        .compile(&Grammar::JsonSchema(json!({
            "type": "object",
            "properties": {"name": {"type": "boolean"}},
            "required": ["name"],
            "additionalProperties": false
        })))
        .unwrap();
    // free text: any token, and it may end
    let mut free = c.lazy(vec![Trigger::Text("CALL".into())]);
    let mut logits = vec![0f32; tok.vocab_size()];
    assert!(free.mask(&mut logits));
    let allowed = logits.iter().filter(|l| l.is_finite()).count();
    // every token but the bytes that cannot begin a UTF-8 character
    assert!(allowed > 180, "free text allows {allowed}");
    for id in tok.encode("Hello, world! {}", false, false).unwrap() {
        assert!(logits[id as usize].is_finite(), "token {id}");
    }
    assert!(logits[common::IM_END as usize].is_finite());
    // after "xx CALL" the grammar applies: `{"name": ` is forced
    for id in tok.encode("xx CALL", false, false).unwrap() {
        let mut l = vec![0f32; tok.vocab_size()];
        assert!(free.mask(&mut l));
        assert!(l[id as usize].is_finite());
        free.commit(id);
    }
    let mut forced = Vec::new();
    free.forced(&mut forced);
    assert_eq!(tok.decode(&forced, false), "{\"name\": ", "{forced:?}");
    let (text, ended) = generate(&tok, &mut *free, 3, 40);
    assert!(ended);
    assert!(
        text == "{\"name\": true}" || text == "{\"name\": false}",
        "{text:?}"
    );
}

#[test]
fn lazy_token_trigger() {
    let tok = tokenizer();
    let g = Grammars::new(&tok);
    let c = g.compile(&Grammar::Regex("[0-9]+;".into())).unwrap();
    let mut con = c.lazy(vec![Trigger::Token(common::TOOL_CALL)]);
    let mut l = vec![0f32; tok.vocab_size()];
    assert!(con.mask(&mut l));
    assert!(l[common::TOOL_CALL as usize].is_finite());
    // text first, then the trigger token
    for id in tok.encode("ab", false, false).unwrap() {
        let mut l = vec![0f32; tok.vocab_size()];
        assert!(con.mask(&mut l));
        con.commit(id);
    }
    let mut l = vec![0f32; tok.vocab_size()];
    assert!(con.mask(&mut l));
    assert!(l[common::TOOL_CALL as usize].is_finite());
    con.commit(common::TOOL_CALL);
    let (text, _) = generate(&tok, &mut *con, 9, 20);
    assert!(!text.is_empty() && text.ends_with(';'), "{text:?}");
    assert!(
        text[..text.len() - 1].bytes().all(|b| b.is_ascii_digit()),
        "{text:?}"
    );
    // no trigger, bad id
    assert_eq!(c.try_lazy(vec![]).err().unwrap().code, "invalid_grammar");
    assert!(c.try_lazy(vec![Trigger::Token(1 << 30)]).is_err());
}

#[test]
fn gbnf_fixtures_compile_and_check() {
    let g = grammars();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gbnf");
    // (fixture, accepted, rejected)
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "json.gbnf",
            &["{\"a\": [1, 2.5, \"x\"]}", "{}"],
            &["[1]", "{a: 1}"],
        ),
        (
            "arithmetic.gbnf",
            &["1+2*(x-4)=7\n"],
            &["1++2=3\n", "1+2\n"],
        ),
        ("list.gbnf", &["- one\n- two\n"], &["one\n"]),
        ("chess.gbnf", &["1. e4 e5\n2. Nf3 Nc6\n"], &["1. e9 e5\n"]),
        ("c.gbnf", &["int main(){return 0;}"], &["main(){}"]),
        ("japanese.gbnf", &["こんにちは"], &["hello"]),
        ("json_arr.gbnf", &["[\n{\"a\": 1}]"], &["{}"]),
        ("english.gbnf", &["Hello, world!"], &["héllo"]),
    ];
    for (file, good, bad) in cases {
        let text = std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("fixture {file}: {e}"));
        let c = g
            .compile(&Grammar::Gbnf(text))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        for s in *good {
            assert!(c.accepts(s), "{file} refuses {s:?}");
        }
        for s in *bad {
            assert!(!c.accepts(s), "{file} accepts {s:?}");
        }
    }
}
