//! The conversation as chat templates expect it when it holds tool calls: OpenAI clients send
//! an assistant's `tool_calls[].function.arguments` as a JSON *string*, while the templates
//! (Qwen2.5's `tool_call.arguments | tojson`, Llama 3.1's `| items`) expect the object; so
//! arguments that parse as JSON become the value, as llama.cpp and transformers do.

use serde_json::Value;

/// The messages with each assistant call's `arguments` string parsed into its JSON value
/// (left as it is when it is not JSON).
pub fn prepare_messages(messages: &Value) -> Value {
    let Some(list) = messages.as_array() else {
        return messages.clone();
    };
    let mut out = list.clone();
    for m in &mut out {
        let Some(calls) = m.get_mut("tool_calls").and_then(Value::as_array_mut) else {
            continue;
        };
        for c in calls {
            let Some(f) = c.get_mut("function").and_then(Value::as_object_mut) else {
                continue;
            };
            if let Some(Value::String(s)) = f.get("arguments") {
                if let Ok(v) = serde_json::from_str::<Value>(s) {
                    f.insert("arguments".into(), v);
                }
            }
        }
    }
    Value::Array(out)
}

/// A call's id: 9 letters and digits (the length Mistral's templates demand of the ids they
/// render back), drawn from `seed` (the request's) and the call's index.
pub fn call_id(seed: u64, index: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    // splitmix64: distinct, well-spread ids for nearby seeds and indices
    let mut x = seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    (0..9)
        .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn argument_strings_become_objects() {
        let m = json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "not json"}},
            ]},
        ]);
        let p = prepare_messages(&m);
        assert_eq!(
            p[1]["tool_calls"][0]["function"]["arguments"],
            json!({"x": 1})
        );
        assert_eq!(p[1]["tool_calls"][1]["function"]["arguments"], "not json");
        assert_eq!(p[0], m[0]);
    }

    #[test]
    fn ids_are_nine_alphanumerics_and_differ() {
        let a = call_id(7, 0);
        assert_eq!(a.len(), 9);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, call_id(7, 1));
        assert_ne!(a, call_id(8, 0));
        assert_eq!(a, call_id(7, 0));
    }
}
