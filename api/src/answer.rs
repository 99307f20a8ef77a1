//! How an answer is read and shaped, for every frontend: whether its reasoning goes apart
//! ([`reasoning_format`]), and its tool calls in OpenAI's shapes: a streamed
//! `delta.tool_calls` entry ([`call_delta_json`]: the call's `index`; its `id`, `type` and
//! `function.name` in its first delta only; `function.arguments` fragments in each) and a
//! whole message's `tool_calls` ([`tool_calls_json`]). The fragments of a call's deltas
//! concatenate to its whole `arguments`.

use serde_json::{json, Map, Value};
use superinfer_template::reasoning::extract_for_format;
use superinfer_template::tools::{CallDelta, ToolCall};

use crate::{Error, Fields};

/// llama-server's `reasoning_format`: `Some(true)` for `auto` and `deepseek` (a thinking
/// model's reasoning goes to `reasoning_content`), `Some(false)` for `none` (it stays in
/// the content), `None` when the request does not say.
pub fn reasoning_format(body: &Map<String, Value>) -> Result<Option<bool>, Error> {
    let Some(name) = Fields(body).str("reasoning_format")? else {
        return Ok(None);
    };
    extract_for_format(name).map(Some).ok_or_else(|| {
        Error::param(
            "reasoning_format",
            format!("'reasoning_format' must be auto, deepseek or none, not '{name}'"),
        )
    })
}

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
    fn reasoning_formats() {
        let f = |v: Value| reasoning_format(v.as_object().unwrap());
        assert_eq!(f(json!({})), Ok(None));
        assert_eq!(f(json!({"reasoning_format": "deepseek"})), Ok(Some(true)));
        assert_eq!(f(json!({"reasoning_format": "none"})), Ok(Some(false)));
        let e = f(json!({"reasoning_format": "raw"})).unwrap_err();
        assert_eq!(
            (e.param.as_deref(), e.code),
            (Some("reasoning_format"), "invalid_value")
        );
    }

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
