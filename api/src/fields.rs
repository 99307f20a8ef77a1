//! A request body's JSON object and typed access to its fields: each accessor says what the
//! field must be, so a wrong type is an error naming the field and both types.

use serde_json::{Map, Value};

use crate::Error;

/// The JSON object of a request body (`invalid_json` if it is not valid JSON, or not an
/// object).
pub fn object(body: &[u8]) -> Result<Map<String, Value>, Error> {
    let invalid = |message: String| Error {
        message,
        param: None,
        code: "invalid_json",
    };
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| invalid(format!("the request body is not valid JSON: {e}")))?;
    match v {
        Value::Object(m) => Ok(m),
        other => Err(invalid(format!(
            "the request body must be a JSON object, not {}",
            type_name(&other)
        ))),
    }
}

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `'name' must be WANT, not a TYPE` (`invalid_type`).
pub(crate) fn wrong_type(name: &str, want: &str, got: &Value) -> Error {
    Error::param(
        name,
        format!("'{name}' must be {want}, not {}", type_name(got)),
    )
    .with_code("invalid_type")
}

/// Typed access to a body's fields; `null` counts as absent.
pub struct Fields<'a>(pub &'a Map<String, Value>);

impl<'a> Fields<'a> {
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    pub fn bool(&self, name: &str) -> Result<Option<bool>, Error> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(wrong_type(name, "a boolean", v)),
        }
    }

    pub fn str(&self, name: &str) -> Result<Option<&'a str>, Error> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(wrong_type(name, "a string", v)),
        }
    }

    /// A JSON object.
    pub fn map(&self, name: &str) -> Result<Option<&'a Map<String, Value>>, Error> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(v) => Err(wrong_type(name, "an object", v)),
        }
    }

    /// A number within `[lo, hi]`.
    pub fn num(&self, name: &str, lo: f64, hi: f64) -> Result<Option<f32>, Error> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                if !(lo..=hi).contains(&x) {
                    return Err(Error::param(
                        name,
                        format!("'{name}' must be between {lo} and {hi}, got {n}"),
                    ));
                }
                Ok(Some(x as f32))
            }
            Some(v) => Err(wrong_type(name, "a number", v)),
        }
    }

    /// An integer within `[lo, hi]` (a number with no fraction, such as `4.0`, counts).
    pub fn int(&self, name: &str, lo: i64, hi: i64) -> Result<Option<i64>, Error> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => {
                let x = n
                    .as_i64()
                    .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                    .ok_or_else(|| wrong_type(name, "an integer", &Value::Number(n.clone())))?;
                if !(lo..=hi).contains(&x) {
                    return Err(Error::param(
                        name,
                        format!("'{name}' must be between {lo} and {hi}, got {x}"),
                    ));
                }
                Ok(Some(x))
            }
            Some(v) => Err(wrong_type(name, "an integer", v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn bodies_that_are_not_objects() {
        let e = object(b"[1, 2]").unwrap_err();
        assert_eq!(e.code, "invalid_json");
        assert_eq!(
            e.message,
            "the request body must be a JSON object, not an array"
        );
        let e = object(b"{\"a\": ").unwrap_err();
        assert!(
            e.message
                .starts_with("the request body is not valid JSON: "),
            "{e}"
        );
        assert_eq!(e.param, None);
    }

    #[test]
    fn typed_fields_name_the_field_and_both_types() {
        let m = map(json!({"b": 1, "s": true, "n": "x", "i": 2.5, "ok": 3.0, "nothing": null}));
        let f = Fields(&m);
        let e = f.bool("b").unwrap_err();
        assert_eq!(
            (e.message.as_str(), e.code),
            ("'b' must be a boolean, not a number", "invalid_type")
        );
        assert_eq!(
            f.str("s").unwrap_err().message,
            "'s' must be a string, not a boolean"
        );
        assert_eq!(
            f.num("n", 0.0, 1.0).unwrap_err().param.as_deref(),
            Some("n")
        );
        assert_eq!(
            f.int("i", 0, 9).unwrap_err().message,
            "'i' must be an integer, not a number"
        );
        assert_eq!(f.int("ok", 0, 9).unwrap(), Some(3));
        let e = f.int("ok", 4, 9).unwrap_err();
        assert_eq!(
            (e.message.as_str(), e.code),
            ("'ok' must be between 4 and 9, got 3", "invalid_value")
        );
        // null and absent are the same
        assert_eq!(f.num("nothing", 0.0, 1.0).unwrap(), None);
        assert_eq!(f.bool("absent").unwrap(), None);
    }
}
