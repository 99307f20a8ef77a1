//! The tool-call grammars of `superinfer-template` compiled by `superinfer-structured` with
//! Qwen2.5's real tokenizer: a call of a listed tool in the model's own format passes every
//! mask token by token, free text before the trigger included when the grammar is lazy;
//! a call of an unlisted tool, or arguments that break the schema, are masked out.

use serde_json::json;
use superinfer_runtime::core::generate::Constraint;
use superinfer_runtime::core::tokenizer::{TokenType, Tokenizer};
use superinfer_structured::{Grammar, Grammars, Trigger};
use superinfer_template::tools::{call_grammar, Mode, ToolFormat, ToolSchema};
use superinfer_tests::{require_model, runtime, QWEN_05B};

/// Feeds `text`'s tokens through `c`: the number of tokens that passed before one was
/// masked out (all of them: the text fits).
fn passes(tok: &Tokenizer, c: &mut dyn Constraint, text: &str) -> (usize, usize) {
    let ids = tok.encode(text, false, true).unwrap();
    let mut logits = vec![0.0f32; tok.vocab_size()];
    for (i, &id) in ids.iter().enumerate() {
        logits.iter_mut().for_each(|x| *x = 0.0);
        if !c.mask(&mut logits) || logits[id as usize] == f32::NEG_INFINITY {
            return (i, ids.len());
        }
        c.commit(id);
    }
    (ids.len(), ids.len())
}

fn special(tok: &Tokenizer, text: &str) -> Option<u32> {
    let id = tok.vocab().find_str(text)?;
    (tok.vocab().token_type(id) == TokenType::Control).then_some(id)
}

#[test]
fn hermes_calls_on_qwen_s_tokenizer() {
    let tok = runtime::load_tokenizer(&require_model(QWEN_05B)).unwrap();
    let grammars = Grammars::new(&tok);
    let weather = json!({"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"], "additionalProperties": false});
    let now = json!({"type": "object", "properties": {}});
    let tools = [
        ToolSchema {
            name: "get_weather",
            parameters: &weather,
        },
        ToolSchema {
            name: "now",
            parameters: &now,
        },
    ];
    let call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let two =
        format!("{call}\n<tool_call>\n{{\"name\": \"now\", \"arguments\": {{}}}}\n</tool_call>");
    let sp = |t: &str| special(&tok, t);

    // required: calls from the first token
    let g = call_grammar(ToolFormat::Hermes, &tools, Mode::Forced, true, &sp);
    assert!(g.triggers.is_empty());
    let c = grammars.compile(&Grammar::Lark(g.lark)).unwrap();
    for text in [call, two.as_str()] {
        let (ok, n) = passes(&tok, &mut *c.constraint(), text);
        assert_eq!(ok, n, "{text:?}");
    }
    for bad in [
        "Sure! <tool_call>",
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Paris\"}}\n</tool_call>",
    ] {
        let (ok, n) = passes(&tok, &mut *c.constraint(), bad);
        assert!(ok < n, "{bad:?} passed");
    }
    // one call only without parallel_tool_calls
    let g = call_grammar(ToolFormat::Hermes, &tools, Mode::Forced, false, &sp);
    let c = grammars.compile(&Grammar::Lark(g.lark)).unwrap();
    let (ok, n) = passes(&tok, &mut *c.constraint(), &two);
    assert!(ok < n);

    // auto: free text, then the trigger engages the grammar
    let g = call_grammar(ToolFormat::Hermes, &tools, Mode::Lazy, true, &sp);
    let triggers: Vec<Trigger> = g.triggers.iter().cloned().map(Trigger::Text).collect();
    let c = grammars.compile(&Grammar::Lark(g.lark)).unwrap();
    for text in [
        call.to_string(),
        format!("Let me look that up.\n{two}"),
        "No tool needed: it is 4.".to_string(),
    ] {
        let (ok, n) = passes(&tok, &mut *c.try_lazy(triggers.clone()).unwrap(), &text);
        assert_eq!(ok, n, "{text:?}");
    }
    let bad = "Let me see. <tool_call>\n{\"name\": \"nope\"";
    let (ok, n) = passes(&tok, &mut *c.try_lazy(triggers).unwrap(), bad);
    assert!(ok < n, "{bad:?} passed");
}
