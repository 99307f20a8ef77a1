//! What shape the output must have: OpenAI's `response_format` (`text`, `json_object`,
//! `json_schema`) and llama-server's `grammar` (GBNF) and `json_schema` fields, checked into
//! one [`OutputFormat`]. Whether a schema's keywords can be enforced is the grammar engine's
//! business (a 400 naming the keyword); here only the request's shape is checked.

use serde_json::{Map, Value};

use crate::fields::{wrong_type, Fields};
use crate::Error;

/// The constraint a request puts on its output.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputFormat {
    /// Any JSON object (`{"type": "json_object"}`).
    JsonObject,
    /// JSON that fits a JSON Schema (`json_schema`, or `json_object` with a `schema`, as
    /// llama-server accepts it, or llama-server's top-level `json_schema`).
    JsonSchema {
        /// The schema's `name` (OpenAI requires one; kept for logs).
        name: Option<String>,
        schema: Value,
        /// OpenAI's `strict`: the schema is enforced either way here.
        strict: bool,
    },
    /// A llama.cpp GBNF grammar (llama-server's `grammar`).
    Gbnf(String),
}

/// The request's output format, if it asks for one: `response_format` (`text` is none),
/// `grammar` or `json_schema`. Asking for two is a 400 (they would contradict each other).
pub fn output_format(body: &Map<String, Value>) -> Result<Option<OutputFormat>, Error> {
    let f = Fields(body);
    let mut found: Vec<(&str, OutputFormat)> = Vec::new();
    if let Some(rf) = f.map("response_format")? {
        if let Some(fmt) = response_format(rf)? {
            found.push(("response_format", fmt));
        }
    }
    if let Some(g) = f.str("grammar")? {
        if g.trim().is_empty() {
            return Err(Error::param("grammar", "'grammar' is empty"));
        }
        found.push(("grammar", OutputFormat::Gbnf(g.to_string())));
    }
    if let Some(s) = f.get("json_schema") {
        found.push((
            "json_schema",
            OutputFormat::JsonSchema {
                name: None,
                schema: schema_value("json_schema", s)?,
                strict: true,
            },
        ));
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop().map(|(_, f)| f)),
        _ => {
            let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
            Err(Error::param(
                found[1].0,
                format!(
                    "'{}' and '{}' both constrain the output: give one",
                    names[0], names[1]
                ),
            ))
        }
    }
}

/// A schema: an object, or `true` (anything goes); `false` and other types are refused.
fn schema_value(param: &str, v: &Value) -> Result<Value, Error> {
    match v {
        Value::Object(_) | Value::Bool(true) => Ok(v.clone()),
        Value::Bool(false) => Err(Error::param(
            param,
            format!("'{param}' is false: no output would fit it"),
        )
        .with_code("invalid_schema")),
        v => Err(wrong_type(param, "a JSON Schema object", v)),
    }
}

fn response_format(rf: &Map<String, Value>) -> Result<Option<OutputFormat>, Error> {
    const P: &str = "response_format";
    let f = Fields(rf);
    let ty = f
        .str("type")
        .map_err(|e| e.with_param("response_format.type"))?
        .ok_or_else(|| {
            Error::param(
                "response_format.type",
                "'response_format' needs a 'type': text, json_object or json_schema",
            )
        })?;
    match ty {
        "text" => Ok(None),
        "json_object" => match f.get("schema") {
            // llama-server's extension: a schema inside json_object
            Some(s) => Ok(Some(OutputFormat::JsonSchema {
                name: None,
                schema: schema_value("response_format.schema", s)?,
                strict: true,
            })),
            None => Ok(Some(OutputFormat::JsonObject)),
        },
        "json_schema" => {
            let js = f
                .map("json_schema")
                .map_err(|e| e.with_param("response_format.json_schema"))?
                .ok_or_else(|| {
                    Error::param(
                        "response_format.json_schema",
                        "'response_format' of type json_schema needs 'json_schema': \
                         {\"name\": ..., \"schema\": {...}}",
                    )
                })?;
            let jf = Fields(js);
            let name = jf
                .str("name")
                .map_err(|e| e.with_param("response_format.json_schema.name"))?
                .map(str::to_string);
            let strict = jf
                .bool("strict")
                .map_err(|e| e.with_param("response_format.json_schema.strict"))?
                .unwrap_or(false);
            // no schema: any JSON (OpenAI requires one; llama-server takes the object then)
            let schema = match jf.get("schema") {
                Some(s) => schema_value("response_format.json_schema.schema", s)?,
                None => return Ok(Some(OutputFormat::JsonObject)),
            };
            Ok(Some(OutputFormat::JsonSchema {
                name,
                schema,
                strict,
            }))
        }
        other => Err(Error::param(
            &format!("{P}.type"),
            format!(
                "'response_format.type' must be text, json_object or json_schema, not '{other}'"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Option<OutputFormat>, Error> {
        output_format(v.as_object().unwrap())
    }

    #[test]
    fn every_form_of_the_format() {
        assert_eq!(parse(json!({})).unwrap(), None);
        assert_eq!(
            parse(json!({"response_format": {"type": "text"}})).unwrap(),
            None
        );
        assert_eq!(
            parse(json!({"response_format": {"type": "json_object"}})).unwrap(),
            Some(OutputFormat::JsonObject)
        );
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        assert_eq!(
            parse(json!({"response_format": {"type": "json_object", "schema": schema}})).unwrap(),
            Some(OutputFormat::JsonSchema {
                name: None,
                schema: schema.clone(),
                strict: true
            })
        );
        assert_eq!(
            parse(
                json!({"response_format": {"type": "json_schema", "json_schema":
                {"name": "A", "schema": schema, "strict": true}}})
            )
            .unwrap(),
            Some(OutputFormat::JsonSchema {
                name: Some("A".into()),
                schema: schema.clone(),
                strict: true
            })
        );
        assert_eq!(
            parse(json!({"json_schema": schema})).unwrap(),
            Some(OutputFormat::JsonSchema {
                name: None,
                schema,
                strict: true
            })
        );
        assert_eq!(
            parse(json!({"grammar": "root ::= \"a\""})).unwrap(),
            Some(OutputFormat::Gbnf("root ::= \"a\"".into()))
        );
    }

    #[test]
    fn mistakes_name_the_field() {
        for (body, param, code) in [
            (
                json!({"response_format": "json"}),
                "response_format",
                "invalid_type",
            ),
            (
                json!({"response_format": {}}),
                "response_format.type",
                "invalid_value",
            ),
            (
                json!({"response_format": {"type": "yaml"}}),
                "response_format.type",
                "invalid_value",
            ),
            (
                json!({"response_format": {"type": "json_schema"}}),
                "response_format.json_schema",
                "invalid_value",
            ),
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"schema": 5}}}),
                "response_format.json_schema.schema",
                "invalid_type",
            ),
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"schema": false}}}),
                "response_format.json_schema.schema",
                "invalid_schema",
            ),
            (json!({"grammar": 5}), "grammar", "invalid_type"),
            (json!({"grammar": " "}), "grammar", "invalid_value"),
            (
                json!({"grammar": "root ::= \"a\"", "json_schema": {}}),
                "json_schema",
                "invalid_value",
            ),
        ] {
            let e = parse(body.clone()).unwrap_err();
            assert_eq!((e.param.as_deref(), e.code), (Some(param), code), "{body}");
        }
    }
}
