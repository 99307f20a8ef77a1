//! The package's engine (natively) with a response format and with tools, on Qwen2.5-0.5B:
//! a JSON-schema answer parses and fits the schema and ends when the value does; a schema
//! the engine cannot enforce fails with its code and `param`; a named tool choice gives one
//! call in OpenAI's shape, whose streamed deltas concatenate to the whole call, and the
//! finish reason `tool_calls`.

use serde_json::{json, Value};
mod common;

use superinfer_wasm::engine::Engine as Package;

fn package() -> Package {
    common::load_both(1, 1024).1
}

/// What a whole generation gave: the steps' results, then `end`'s.
struct Run {
    steps: Vec<Value>,
    end: Value,
}

impl Run {
    fn field(&self, key: &str) -> String {
        let mut s: String = self
            .steps
            .iter()
            .map(|t| t[key].as_str().unwrap().to_string())
            .collect();
        // `end` has no token text of its own
        s.push_str(self.end[key].as_str().unwrap_or(""));
        s
    }

    /// The streamed `tool_calls` deltas concatenated by index into whole calls.
    fn streamed_calls(&self) -> Vec<Value> {
        let mut calls: Vec<Value> = Vec::new();
        for d in self.steps.iter().chain([&self.end]) {
            for c in d["tool_calls"].as_array().unwrap() {
                let i = c["index"].as_u64().unwrap() as usize;
                if let Some(id) = c.get("id") {
                    assert_eq!(calls.len(), i, "a call's first delta comes once, in order");
                    assert_eq!(c["type"], "function");
                    calls.push(json!({"id": id, "type": "function",
                        "function": {"name": c["function"]["name"], "arguments": ""}}));
                } else {
                    assert!(c["function"].get("name").is_none(), "{c}");
                }
                let args = calls[i]["function"]["arguments"]
                    .as_str()
                    .unwrap()
                    .to_string()
                    + c["function"]["arguments"].as_str().unwrap();
                calls[i]["function"]["arguments"] = json!(args);
            }
        }
        calls
    }
}

fn run(e: &mut Package, req: Value) -> Run {
    e.begin(&req).unwrap();
    while e.prefill(64).unwrap() > 0 {}
    let mut steps = Vec::new();
    loop {
        let t = e.next_token().unwrap();
        let done = !t["finish"].is_null();
        steps.push(t);
        if done {
            break;
        }
    }
    Run {
        steps,
        end: e.end().unwrap(),
    }
}

#[test]
fn response_formats_and_tool_calls() {
    let mut e = package();
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 30},
            "population": {"type": "integer", "minimum": 0},
            "size": {"enum": ["small", "medium", "large"]}
        },
        "required": ["city", "population", "size"],
        "additionalProperties": false
    });
    let chat = json!([{"role": "user", "content": "Tell me about a city in France."}]);
    let r = run(
        &mut e,
        json!({"messages": chat, "temperature": 0, "max_tokens": 100,
            "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}}),
    );
    let text = r.field("content");
    assert_eq!(text, r.field("text"), "a JSON answer is all content");
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["city", "population", "size"], "{text}");
    assert!(v["population"].as_u64().is_some(), "{text}");
    assert!(["small", "medium", "large"].contains(&v["size"].as_str().unwrap()));
    assert_eq!(
        r.end["finish_reason"], "stop",
        "the answer ends with the value"
    );
    assert_eq!(r.end["calls"], json!([]));

    // a keyword the engine cannot enforce, an invalid schema, a bad grammar: coded failures
    for (req, code, param) in [
        (
            json!({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "format": "no-such-format"}}}}),
            "unsupported_schema_keyword",
            "format",
        ),
        (
            json!({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}}}),
            "invalid_schema",
            "response_format",
        ),
        (
            json!({"grammar": "root ::= x"}),
            "invalid_grammar",
            "grammar",
        ),
    ] {
        let mut body = req.clone();
        body["messages"] = chat.clone();
        let f = e.begin(&body).unwrap_err();
        assert_eq!((f.code, f.param.as_deref()), (code, Some(param)), "{req}");
    }

    // a named tool: one call, its arguments fitting the tool's schema
    let tools = json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "get_time",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}
    ]);
    let r = run(
        &mut e,
        json!({"messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "temperature": 0, "seed": 5, "max_tokens": 60, "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    );
    assert_eq!(r.end["finish_reason"], "tool_calls");
    let calls = r.end["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(args["city"].is_string(), "{args}");
    assert_eq!(r.field("content").trim(), "", "the call is not content");
    assert_eq!(r.streamed_calls(), *calls);
    assert!(
        r.field("text").contains("<tool_call>"),
        "the model's own format"
    );
}
