//! A small JSON Schema validator for the keywords the structured-output tests use (type,
//! properties, required, additionalProperties, items, minItems, maxItems, enum, const,
//! anyOf, pattern, minLength, maxLength, minimum, maximum): independent of the engine's
//! grammar compiler, so a test checks the output against the schema's meaning.

use serde_json::Value;

/// Why `v` does not validate against `schema` (`None`: it does). Patterns are checked by
/// `pattern_ok`.
pub fn validate(
    schema: &Value,
    v: &Value,
    pattern_ok: &dyn Fn(&str, &str) -> bool,
) -> Option<String> {
    let path = String::from("$");
    check(schema, v, &path, pattern_ok)
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

fn check(s: &Value, v: &Value, at: &str, pat: &dyn Fn(&str, &str) -> bool) -> Option<String> {
    let fail = |m: String| Some(format!("{at}: {m}"));
    // a boolean schema (`true`) allows anything
    let s = s.as_object()?;
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_ok(t, v),
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)),
            _ => false,
        };
        if !ok {
            return fail(format!("{v} is not of type {t}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return fail(format!("{v} is not one of {e:?}"));
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            return fail(format!("{v} is not {c}"));
        }
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        if any.iter().all(|a| check(a, v, at, pat).is_some()) {
            return fail(format!("{v} matches none of anyOf"));
        }
    }
    if let Some(x) = v.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
            if x < min {
                return fail(format!("{x} < minimum {min}"));
            }
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
            if x > max {
                return fail(format!("{x} > maximum {max}"));
            }
        }
    }
    if let Some(text) = v.as_str() {
        let n = text.chars().count() as u64;
        if s.get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| n < m)
        {
            return fail(format!("{text:?} is shorter than minLength"));
        }
        if s.get("maxLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| n > m)
        {
            return fail(format!("{text:?} is longer than maxLength"));
        }
        if let Some(p) = s.get("pattern").and_then(Value::as_str) {
            if !pat(p, text) {
                return fail(format!("{text:?} does not match {p:?}"));
            }
        }
    }
    if let Some(items) = v.as_array() {
        let n = items.len() as u64;
        if s.get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|m| n < m)
        {
            return fail(format!("{n} items, fewer than minItems"));
        }
        if s.get("maxItems")
            .and_then(Value::as_u64)
            .is_some_and(|m| n > m)
        {
            return fail(format!("{n} items, more than maxItems"));
        }
        if let Some(is) = s.get("items") {
            for (i, x) in items.iter().enumerate() {
                if let Some(e) = check(is, x, &format!("{at}[{i}]"), pat) {
                    return Some(e);
                }
            }
        }
    }
    if let Some(o) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap_or_default();
            if !o.contains_key(r) {
                return fail(format!("required property {r:?} is missing"));
            }
        }
        for (k, x) in o {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => {
                    if let Some(e) = check(ps, x, &format!("{at}.{k}"), pat) {
                        return Some(e);
                    }
                }
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return fail(format!("property {k:?} is not allowed"));
                }
                None => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn catches_what_it_checks() {
        let any = |_: &str, _: &str| true;
        let s = json!({"type": "object", "properties": {"a": {"type": "integer", "maximum": 3}},
                       "required": ["a"], "additionalProperties": false});
        assert!(validate(&s, &json!({"a": 2}), &any).is_none());
        assert!(validate(&s, &json!({"a": 4}), &any).is_some());
        assert!(validate(&s, &json!({"a": 1, "b": 1}), &any).is_some());
        assert!(validate(&s, &json!({}), &any).is_some());
        assert!(validate(&s, &json!({"a": 1.5}), &any).is_some());
        let arr = json!({"type": "array", "items": {"enum": ["x"]}, "maxItems": 1});
        assert!(validate(&arr, &json!(["x", "x"]), &any).is_some());
        assert!(validate(&arr, &json!(["y"]), &any).is_some());
        let a = json!({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]});
        assert!(validate(&a, &json!("abc"), &any).is_some());
        assert!(validate(&a, &json!(7), &any).is_none());
    }
}
