//! OpenAI tool calling: `tools` (functions with a name, a description and a JSON Schema for
//! their arguments), `tool_choice` (`none`, `auto`, `required`, or one function by name) and
//! `parallel_tool_calls`, checked. A named function that `tools` does not hold is a 400
//! naming it (llama-server silently falls back to `auto` there).

use serde_json::{Map, Value};

use crate::fields::{wrong_type, Fields};
use crate::Error;

/// One function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// The JSON Schema of its arguments (an empty object schema when none was given).
    pub parameters: Value,
    /// The tool as the request gave it (`{"type": "function", "function": {...}}`), for the
    /// chat template.
    pub raw: Value,
}

/// Whether and which tools the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// No call: the answer is text.
    None,
    /// The model decides (the default with tools).
    Auto,
    /// At least one call.
    Required,
    /// A call of this function.
    Named(String),
}

/// A request's tools, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Tools {
    pub tools: Vec<Tool>,
    pub choice: ToolChoice,
    /// `parallel_tool_calls` (default true): several calls in one answer.
    pub parallel: bool,
}

impl Tools {
    /// The tools as the request gave them, for the chat template's `tools` variable.
    pub fn raw(&self) -> Value {
        Value::Array(self.tools.iter().map(|t| t.raw.clone()).collect())
    }

    /// The tools a call may name: the one named by `tool_choice`, else all.
    pub fn callable(&self) -> Vec<&Tool> {
        match &self.choice {
            ToolChoice::Named(n) => self.tools.iter().filter(|t| &t.name == n).collect(),
            _ => self.tools.iter().collect(),
        }
    }
}

/// The request's tools: `None` when it gives none (an empty list is none). `tool_choice`
/// `required` or a named function without tools is a 400; `functions` (the API's older
/// form) is refused with a pointer to `tools`.
pub fn tools(body: &Map<String, Value>) -> Result<Option<Tools>, Error> {
    let f = Fields(body);
    if f.get("functions").is_some() || f.get("function_call").is_some() {
        let name = if f.get("functions").is_some() {
            "functions"
        } else {
            "function_call"
        };
        return Err(Error::param(
            name,
            format!("'{name}' is the API's deprecated form: send 'tools' and 'tool_choice'"),
        ));
    }
    let list = match f.get("tools") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, t)| tool(i, t))
            .collect::<Result<Vec<_>, _>>()?,
        Some(v) => return Err(wrong_type("tools", "an array of tools", v)),
    };
    for (i, t) in list.iter().enumerate() {
        if list[..i].iter().any(|u| u.name == t.name) {
            return Err(Error::param(
                &format!("tools[{i}].function.name"),
                format!("two tools are named '{}'", t.name),
            ));
        }
    }
    let choice = tool_choice(&f)?;
    let parallel = f.bool("parallel_tool_calls")?.unwrap_or(true);
    if list.is_empty() {
        return match choice {
            None | Some(ToolChoice::None | ToolChoice::Auto) => Ok(None),
            Some(_) => Err(Error::param(
                "tool_choice",
                "'tool_choice' asks for a tool call, but the request gives no 'tools'",
            )),
        };
    }
    let choice = choice.unwrap_or(ToolChoice::Auto);
    if let ToolChoice::Named(n) = &choice {
        if !list.iter().any(|t| &t.name == n) {
            let names: Vec<&str> = list.iter().map(|t| t.name.as_str()).collect();
            return Err(Error::param(
                "tool_choice",
                format!(
                    "'tool_choice' names the function '{n}', which is not in 'tools' ({})",
                    names.join(", ")
                ),
            )
            .with_code("unknown_tool"));
        }
    }
    Ok(Some(Tools {
        tools: list,
        choice,
        parallel,
    }))
}

fn tool(i: usize, t: &Value) -> Result<Tool, Error> {
    let at = format!("tools[{i}]");
    let Value::Object(m) = t else {
        return Err(wrong_type(&at, "an object", t));
    };
    let f = Fields(m);
    match f
        .str("type")
        .map_err(|e| e.with_param(&format!("{at}.type")))?
    {
        Some("function") => {}
        Some(other) => {
            return Err(Error::param(
                &format!("{at}.type"),
                format!("tools of type '{other}' are not supported (function only)"),
            ))
        }
        None => {
            return Err(Error::param(
                &format!("{at}.type"),
                format!("{at} has no 'type' (\"function\")"),
            ))
        }
    }
    let fp = format!("{at}.function");
    let func = f
        .map("function")
        .map_err(|e| e.with_param(&fp))?
        .ok_or_else(|| Error::param(&fp, format!("{at} has no 'function'")))?;
    let ff = Fields(func);
    let name = ff
        .str("name")
        .map_err(|e| e.with_param(&format!("{fp}.name")))?
        .ok_or_else(|| Error::param(&format!("{fp}.name"), format!("{fp} has no 'name'")))?;
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    {
        return Err(Error::param(
            &format!("{fp}.name"),
            format!("the function name '{name}' must be 1 to 64 letters, digits, '_', '-' or '.'"),
        ));
    }
    let description = ff
        .str("description")
        .map_err(|e| e.with_param(&format!("{fp}.description")))?
        .map(str::to_string);
    let parameters = match ff.get("parameters") {
        None => serde_json::json!({"type": "object", "properties": {}}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(v) => {
            return Err(wrong_type(
                &format!("{fp}.parameters"),
                "a JSON Schema object",
                v,
            ))
        }
    };
    Ok(Tool {
        name: name.to_string(),
        description,
        parameters,
        raw: t.clone(),
    })
}

fn tool_choice(f: &Fields) -> Result<Option<ToolChoice>, Error> {
    const P: &str = "tool_choice";
    match f.get(P) {
        None => Ok(None),
        Some(Value::String(s)) => match s.as_str() {
            "none" => Ok(Some(ToolChoice::None)),
            "auto" => Ok(Some(ToolChoice::Auto)),
            "required" => Ok(Some(ToolChoice::Required)),
            other => Err(Error::param(
                P,
                format!(
                    "'tool_choice' must be none, auto, required or {{\"type\": \"function\", \
                     \"function\": {{\"name\": ...}}}}, not '{other}'"
                ),
            )),
        },
        Some(Value::Object(o)) => {
            let of = Fields(o);
            match of.str("type").map_err(|e| e.with_param(P))? {
                Some("function") => {}
                _ => {
                    return Err(Error::param(
                        P,
                        "'tool_choice' as an object must be {\"type\": \"function\", \
                         \"function\": {\"name\": ...}}",
                    ))
                }
            }
            let name = of
                .map("function")
                .map_err(|e| e.with_param(P))?
                .and_then(|func| func.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    Error::param(P, "'tool_choice.function' needs the function's 'name'")
                })?;
            Ok(Some(ToolChoice::Named(name.to_string())))
        }
        Some(v) => Err(wrong_type(P, "a string or an object", v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Option<Tools>, Error> {
        tools(v.as_object().unwrap())
    }

    fn weather() -> Value {
        json!({"type": "function", "function": {"name": "get_weather", "description": "Weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})
    }

    #[test]
    fn tools_and_choices() {
        assert_eq!(parse(json!({})).unwrap(), None);
        assert_eq!(
            parse(json!({"tools": [], "tool_choice": "none"})).unwrap(),
            None
        );
        let t = parse(json!({"tools": [weather()]})).unwrap().unwrap();
        assert_eq!(t.choice, ToolChoice::Auto);
        assert!(t.parallel);
        assert_eq!(t.tools[0].name, "get_weather");
        assert_eq!(t.tools[0].description.as_deref(), Some("Weather"));
        assert_eq!(
            t.tools[0].parameters["properties"]["city"]["type"],
            "string"
        );
        assert_eq!(t.raw(), json!([weather()]));
        let t = parse(
            json!({"tools": [weather(), {"type": "function", "function": {"name": "now"}}],
            "tool_choice": {"type": "function", "function": {"name": "now"}},
            "parallel_tool_calls": false}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(t.choice, ToolChoice::Named("now".into()));
        assert!(!t.parallel);
        assert_eq!(t.callable().len(), 1);
        assert_eq!(
            t.tools[1].parameters,
            json!({"type": "object", "properties": {}})
        );
        for (c, want) in [
            ("none", ToolChoice::None),
            ("auto", ToolChoice::Auto),
            ("required", ToolChoice::Required),
        ] {
            let t = parse(json!({"tools": [weather()], "tool_choice": c}))
                .unwrap()
                .unwrap();
            assert_eq!(t.choice, want);
        }
    }

    #[test]
    fn mistakes_name_the_field() {
        for (body, param, code) in [
            (json!({"tools": {}}), "tools", "invalid_type"),
            (json!({"tools": [5]}), "tools[0]", "invalid_type"),
            (
                json!({"tools": [{"type": "retrieval"}]}),
                "tools[0].type",
                "invalid_value",
            ),
            (
                json!({"tools": [{"type": "function"}]}),
                "tools[0].function",
                "invalid_value",
            ),
            (
                json!({"tools": [{"type": "function", "function": {"name": "a b"}}]}),
                "tools[0].function.name",
                "invalid_value",
            ),
            (
                json!({"tools": [{"type": "function", "function": {"name": "a", "parameters": 1}}]}),
                "tools[0].function.parameters",
                "invalid_type",
            ),
            (
                json!({"tools": [weather(), weather()]}),
                "tools[1].function.name",
                "invalid_value",
            ),
            (
                json!({"tools": [weather()], "tool_choice": "always"}),
                "tool_choice",
                "invalid_value",
            ),
            (
                json!({"tools": [weather()], "tool_choice": 3}),
                "tool_choice",
                "invalid_type",
            ),
            (
                json!({"tools": [weather()], "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
                "tool_choice",
                "unknown_tool",
            ),
            (
                json!({"tool_choice": "required"}),
                "tool_choice",
                "invalid_value",
            ),
            (json!({"functions": []}), "functions", "invalid_value"),
            (
                json!({"tools": [weather()], "parallel_tool_calls": "yes"}),
                "parallel_tool_calls",
                "invalid_type",
            ),
        ] {
            let e = parse(body.clone()).unwrap_err();
            assert_eq!((e.param.as_deref(), e.code), (Some(param), code), "{body}");
        }
        let e = parse(json!({"tools": [weather()], "tool_choice": {"type": "function", "function": {"name": "nope"}}}))
            .unwrap_err();
        assert!(
            e.message.contains("'nope'") && e.message.contains("get_weather"),
            "{e}"
        );
    }
}
