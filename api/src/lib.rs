//! The fields of a generation request, as the OpenAI API names them, parsed strictly into
//! superinfer's types: one parser for `superinfer serve` and the npm package, so that a
//! request means the same everywhere and every mistake is an [`Error`] naming the parameter
//! (`'temperature' must be a number, not a string`), never a silently ignored wrong type.
//!
//! Unknown fields are ignored (as OpenAI-compatible servers do: clients send extras such as
//! `user` or `metadata`); `null` counts as absent. The server maps an [`Error`] to a 400
//! error object (`message`, `param`, `code`), the npm package to a rejected promise with the
//! same `code`.
//!
//! What a request's output must follow is planned here too, once for every frontend:
//! [`plan()`] compiles its `response_format` or its tools' call grammar into a constraint
//! factory (a grammar that cannot be compiled is an [`Error`] with its code), and
//! [`call_delta_json`] / [`tool_calls_json`] give an answer's calls OpenAI's shapes.
//!
//! ```
//! use superinfer_api::{object, Endpoint, GenParams};
//! let body = object(br#"{"prompt": "Hi", "temperature": 0, "stop": "\n"}"#).unwrap();
//! let p = GenParams::parse(&body, Endpoint::Completions).unwrap();
//! assert_eq!((p.sampling.temperature, p.stop.as_slice()), (0.0, &["\n".to_string()][..]));
//! let body = object(br#"{"prompt": "Hi", "temperature": "0.2"}"#).unwrap();
//! let e = GenParams::parse(&body, Endpoint::Completions).unwrap_err();
//! assert_eq!((e.param.as_deref(), e.code), (Some("temperature"), "invalid_type"));
//! assert_eq!(e.message, "'temperature' must be a number, not a string");
//! ```

mod answer;
mod fields;
mod format;
mod params;
mod plan;
mod prompt;
mod tools;

use std::fmt;

pub use answer::{call_delta_json, reasoning_format, tool_calls_json};
pub use fields::{object, Fields};
pub use format::{output_format, OutputFormat};
pub use params::{Endpoint, GenParams, MAX_STOP};
pub use plan::{finish_with_calls, grammar_error, plan, Factory, Plan};
pub use prompt::{messages, prompt, Prompt};
pub use tools::{tools, Tool, ToolChoice, Tools};

/// What is wrong with a request: a message that says what to send instead, the parameter
/// it is about (`messages[1].content` for a nested one), and a stable code:
///
/// - `invalid_json`: the body is not a JSON object;
/// - `invalid_type`: a field of the wrong JSON type;
/// - `invalid_value`: a value out of range or not supported;
/// - `missing_required_parameter`: `prompt` or `messages` is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub message: String,
    pub param: Option<String>,
    pub code: &'static str,
}

impl Error {
    /// A bad value of `param`.
    pub fn param(param: &str, message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
            param: Some(param.to_string()),
            code: "invalid_value",
        }
    }

    pub fn with_param(mut self, param: &str) -> Error {
        self.param = Some(param.to_string());
        self
    }

    pub fn with_code(mut self, code: &'static str) -> Error {
        self.code = code;
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
