//! An answer's tool calls in OpenAI's shapes, for every frontend: a streamed
//! `delta.tool_calls` entry ([`call_delta_json`]: the call's `index`; its `id`, `type` and
//! `function.name` in its first delta only; `function.arguments` fragments in each) and a
//! whole message's `tool_calls` ([`tool_calls_json`]). The fragments of a call's deltas
//! concatenate to its whole `arguments`.

use serde_json::{json, Value};
use superinfer_template::tools::{CallDelta, ToolCall};

/// One call's entry of a streamed `delta.tool_calls`.
pub fn call_delta_json(c: &CallDelta) -> Value {
    let mut v = json!({ "index": c.index });
    if let Some(id) = &c.id {
        v["id"] = json!(id);
        v["type"] = json!("function");
    }
    let mut f = json!({ "arguments": c.arguments });
    if let Some(name) = &c.name {
        f["name"] = json!(name);
    }
    v["function"] = f;
    v
}

/// A whole answer's `tool_calls`.
pub fn tool_calls_json(calls: &[ToolCall]) -> Value {
    calls
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "type": "function",
                "function": { "name": c.name, "arguments": c.arguments },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_delta_names_the_call_and_later_ones_add_arguments() {
        let first = call_delta_json(&CallDelta {
            index: 1,
            id: Some("abc".into()),
            name: Some("f".into()),
            arguments: String::new(),
        });
        assert_eq!(
            first,
            json!({"index": 1, "id": "abc", "type": "function",
                "function": {"name": "f", "arguments": ""}})
        );
        let more = call_delta_json(&CallDelta {
            index: 1,
            id: None,
            name: None,
            arguments: "{\"a\"".into(),
        });
        assert_eq!(
            more,
            json!({"index": 1, "function": {"arguments": "{\"a\""}})
        );
        let whole = tool_calls_json(&[ToolCall {
            id: "abc".into(),
            name: "f".into(),
            arguments: "{\"a\": 1}".into(),
        }]);
        assert_eq!(
            whole,
            json!([{"id": "abc", "type": "function",
                "function": {"name": "f", "arguments": "{\"a\": 1}"}}])
        );
    }
}
