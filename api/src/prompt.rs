//! A request's prompt: the chat endpoint's `messages` (for the chat template), or the
//! completions endpoint's `prompt` (text or token ids).

use serde_json::{Map, Value};

use crate::fields::{wrong_type, Fields};
use crate::Error;

/// A completion's prompt: text, or token ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<u32>),
}

/// The chat endpoint's `messages`, checked and with text-part contents joined into strings
/// (one newline between parts), ready for the chat template: an array of objects with
/// `role` (`developer` becomes `system`), `content` and whatever else each message carries.
pub fn messages(body: &Map<String, Value>) -> Result<Value, Error> {
    let list = match Fields(body).get("messages") {
        None => {
            return Err(Error::param("messages", "'messages' is required")
                .with_code("missing_required_parameter"))
        }
        Some(Value::Array(a)) => a,
        Some(v) => return Err(wrong_type("messages", "an array of messages", v)),
    };
    if list.is_empty() {
        return Err(Error::param(
            "messages",
            "'messages' must hold at least one message",
        ));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, m) in list.iter().enumerate() {
        let at = format!("messages[{i}]");
        let Value::Object(m) = m else {
            return Err(wrong_type(&at, "an object", m));
        };
        let f = Fields(m);
        let role = f
            .str("role")
            .map_err(|e| e.with_param(&format!("{at}.role")))?
            .ok_or_else(|| Error::param(&format!("{at}.role"), format!("{at} has no 'role'")))?;
        if !matches!(role, "system" | "developer" | "user" | "assistant" | "tool") {
            return Err(Error::param(
                &format!("{at}.role"),
                format!("unknown role '{role}' (system, developer, user, assistant or tool)"),
            ));
        }
        let content = match f.get("content") {
            None if role == "assistant" => String::new(),
            None => {
                return Err(Error::param(
                    &format!("{at}.content"),
                    format!("{at} ({role}) has no 'content'"),
                ))
            }
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => text_parts(parts, &at)?,
            Some(v) => {
                return Err(wrong_type(
                    &format!("{at}.content"),
                    "a string or an array of text parts",
                    v,
                ))
            }
        };
        let mut msg = m.clone();
        // the templates know "system"; OpenAI's newer name for it is "developer"
        let role = if role == "developer" { "system" } else { role };
        msg.insert("role".into(), Value::String(role.to_string()));
        msg.insert("content".into(), Value::String(content));
        out.push(Value::Object(msg));
    }
    Ok(Value::Array(out))
}

fn text_parts(parts: &[Value], at: &str) -> Result<String, Error> {
    let mut texts = Vec::with_capacity(parts.len());
    for (j, p) in parts.iter().enumerate() {
        let pat = format!("{at}.content[{j}]");
        let Value::Object(p) = p else {
            return Err(wrong_type(&pat, "an object", p));
        };
        let f = Fields(p);
        match f.str("type").map_err(|e| e.with_param(&pat))? {
            Some("text") => match f.str("text").map_err(|e| e.with_param(&pat))? {
                Some(t) => texts.push(t),
                None => return Err(Error::param(&pat, format!("{pat} has no 'text'"))),
            },
            Some(other) => {
                return Err(Error::param(
                    &pat,
                    format!("content parts of type '{other}' are not supported (text only)"),
                ))
            }
            None => return Err(Error::param(&pat, format!("{pat} has no 'type'"))),
        }
    }
    Ok(texts.join("\n"))
}

/// The completions endpoint's `prompt`: a string, a list of one string, or token ids (a
/// list of them, or a list of one such list). Token ids are not checked against a
/// vocabulary here.
pub fn prompt(body: &Map<String, Value>) -> Result<Prompt, Error> {
    let bad = |v: &Value| {
        wrong_type(
            "prompt",
            "a string, a list of one string or a list of token ids",
            v,
        )
    };
    match Fields(body).get("prompt") {
        None => {
            Err(Error::param("prompt", "'prompt' is required")
                .with_code("missing_required_parameter"))
        }
        Some(Value::String(s)) => Ok(Prompt::Text(s.clone())),
        Some(Value::Array(a)) => match a.as_slice() {
            [Value::String(s)] => Ok(Prompt::Text(s.clone())),
            [Value::Array(ids)] => token_ids(ids).ok_or_else(|| bad(&a[0])),
            [] => Err(Error::param("prompt", "'prompt' is empty")),
            [Value::String(_) | Value::Array(_), ..] => Err(Error::param(
                "prompt",
                format!("{} prompts in one request: send one per request", a.len()),
            )),
            ids => token_ids(ids).ok_or_else(|| bad(&Value::Array(a.clone()))),
        },
        Some(v) => Err(bad(v)),
    }
}

fn token_ids(ids: &[Value]) -> Option<Prompt> {
    ids.iter()
        .map(|v| v.as_u64().and_then(|x| u32::try_from(x).ok()))
        .collect::<Option<Vec<u32>>>()
        .map(Prompt::Tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn prompt_forms() {
        let p = |v: Value| prompt(&body(json!({ "prompt": v })));
        assert_eq!(p(json!("hi")).unwrap(), Prompt::Text("hi".into()));
        assert_eq!(p(json!(["hi"])).unwrap(), Prompt::Text("hi".into()));
        assert_eq!(p(json!([1, 2])).unwrap(), Prompt::Tokens(vec![1, 2]));
        assert_eq!(p(json!([[3]])).unwrap(), Prompt::Tokens(vec![3]));
        for (v, code) in [
            (json!(5), "invalid_type"),
            (json!([1, -2]), "invalid_type"),
            (json!([1, 1u64 << 33]), "invalid_type"),
            (json!([]), "invalid_value"),
            (json!(["a", "b"]), "invalid_value"),
        ] {
            let e = p(v.clone()).unwrap_err();
            assert_eq!((e.param.as_deref(), e.code), (Some("prompt"), code), "{v}");
        }
        let e = prompt(&body(json!({}))).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            ("missing_required_parameter", "'prompt' is required")
        );
    }

    #[test]
    fn messages_are_checked_and_text_parts_joined() {
        let m = messages(&body(json!({"messages": [
            {"role": "developer", "content": "S", "name": "x"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant"},
        ]})))
        .unwrap();
        assert_eq!(
            m,
            json!([
                {"role": "system", "content": "S", "name": "x"},
                {"role": "user", "content": "a\nb"},
                {"role": "assistant", "content": ""},
            ])
        );
    }

    #[test]
    fn bad_messages_name_the_nested_param() {
        for (msgs, param, code) in [
            (json!("not a list"), "messages", "invalid_type"),
            (json!([]), "messages", "invalid_value"),
            (json!([5]), "messages[0]", "invalid_type"),
            (
                json!([{"content": "x"}]),
                "messages[0].role",
                "invalid_value",
            ),
            (
                json!([{"role": 1, "content": "x"}]),
                "messages[0].role",
                "invalid_type",
            ),
            (
                json!([{"role": "wizard", "content": "x"}]),
                "messages[0].role",
                "invalid_value",
            ),
            (
                json!([{"role": "user"}]),
                "messages[0].content",
                "invalid_value",
            ),
            (
                json!([{"role": "user", "content": 5}]),
                "messages[0].content",
                "invalid_type",
            ),
            (
                json!([{"role": "user", "content": [{"type": "image_url"}]}]),
                "messages[0].content[0]",
                "invalid_value",
            ),
        ] {
            let e = messages(&body(json!({ "messages": msgs }))).unwrap_err();
            assert_eq!((e.param.as_deref(), e.code), (Some(param), code), "{msgs}");
        }
        let e = messages(&body(json!({}))).unwrap_err();
        assert_eq!(e.code, "missing_required_parameter");
    }
}
