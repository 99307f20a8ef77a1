//! Request bodies: JSON parsed and checked field by field, so that every mistake is a 400
//! naming the parameter (never a 500, never a silently ignored wrong type).

use serde_json::{Map, Value};
use superinfer_runtime::core::sampler::SamplerConfig;
use superinfer_runtime::scheduler::{Lookup, MAX_DRAFT_TOKENS, MAX_LOOKUP_NGRAM, MAX_TOP_LOGPROBS};

use crate::error::ApiError;

/// What both endpoints take besides the prompt.
#[derive(Debug, Clone)]
pub struct GenParams {
    pub model: Option<String>,
    pub stream: bool,
    pub include_usage: bool,
    pub max_tokens: Option<usize>,
    pub sampling: SamplerConfig,
    pub stop: Vec<String>,
    pub ignore_eos: bool,
    /// Top alternatives per token, when log-probabilities are asked for.
    pub logprobs: Option<usize>,
    /// Speculative decoding: `speculative` (false turns off the server's draft model or
    /// prompt lookup), `lookup_ngram` (prompt lookup for this request; 0 = off) and
    /// `draft_max`.
    pub speculative: Option<bool>,
    pub lookup_ngram: Option<usize>,
    pub draft_max: Option<usize>,
}

/// The most stop strings a request may give.
const MAX_STOP: usize = 16;

/// A completion's prompt: text, or token ids.
#[derive(Debug, Clone)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<u32>),
}

/// The JSON object of a request body.
pub fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::invalid(format!("the request body is not valid JSON: {e}"))
            .with_code("invalid_json")
    })?;
    match v {
        Value::Object(m) => Ok(m),
        other => Err(ApiError::invalid(format!(
            "the request body must be a JSON object, not {}",
            type_name(&other)
        ))
        .with_code("invalid_json")),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn wrong_type(name: &str, want: &str, got: &Value) -> ApiError {
    ApiError::param(
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

    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(wrong_type(name, "a boolean", v)),
        }
    }

    pub fn str(&self, name: &str) -> Result<Option<&'a str>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(wrong_type(name, "a string", v)),
        }
    }

    /// A number within `[lo, hi]`.
    pub fn num(&self, name: &str, lo: f64, hi: f64) -> Result<Option<f32>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                if !(lo..=hi).contains(&x) {
                    return Err(ApiError::param(
                        name,
                        format!("'{name}' must be between {lo} and {hi}, got {n}"),
                    ));
                }
                Ok(Some(x as f32))
            }
            Some(v) => Err(wrong_type(name, "a number", v)),
        }
    }

    /// An integer within `[lo, hi]`.
    pub fn int(&self, name: &str, lo: i64, hi: i64) -> Result<Option<i64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => {
                let x = n
                    .as_i64()
                    .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                    .ok_or_else(|| wrong_type(name, "an integer", &Value::Number(n.clone())))?;
                if !(lo..=hi).contains(&x) {
                    return Err(ApiError::param(
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

/// The sampling, stop and streaming fields shared by both endpoints; `chat` selects the
/// chat endpoint's form of `logprobs` (a boolean and `top_logprobs`) over the completions
/// endpoint's (an integer).
pub fn gen_params(body: &Map<String, Value>, chat: bool) -> Result<GenParams, ApiError> {
    let f = Fields(body);
    let model = f.str("model")?.map(str::to_string);
    if let Some(n) = f.int("n", i64::MIN, i64::MAX)? {
        if n != 1 {
            return Err(ApiError::param(
                "n",
                format!("'n' must be 1 (one choice per request), got {n}; send several requests instead"),
            ));
        }
    }
    for unsupported in ["tools", "functions", "tool_choice"] {
        if let Some(v) = f.get(unsupported) {
            if v.as_array().is_none_or(|a| !a.is_empty())
                && !(unsupported == "tool_choice" && v == "none")
            {
                return Err(ApiError::param(
                    unsupported,
                    format!("'{unsupported}' is not supported: this server has no tool calling"),
                ));
            }
        }
    }
    let stream = f.bool("stream")?.unwrap_or(false);
    let include_usage = match f.get("stream_options") {
        None => false,
        Some(Value::Object(o)) => Fields(o).bool("include_usage")?.unwrap_or(false),
        Some(v) => return Err(wrong_type("stream_options", "an object", v)),
    };
    let max_a = f.int("max_tokens", 0, i64::MAX)?;
    let max_b = f.int("max_completion_tokens", 0, i64::MAX)?;
    let max_tokens = max_b.or(max_a).map(|n| n as usize);

    let d = SamplerConfig::default();
    let seed = match f.get("seed") {
        None => superinfer_runtime::random_seed(),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_i64().map(|x| x as u64))
            .ok_or_else(|| ApiError::param("seed", "'seed' must be an integer"))?,
        Some(v) => return Err(wrong_type("seed", "an integer", v)),
    };
    let mut sampling = SamplerConfig {
        temperature: f.num("temperature", 0.0, 2.0)?.unwrap_or(d.temperature),
        top_k: f
            .int("top_k", -1, i64::from(u32::MAX))?
            .map_or(d.top_k, |k| k.max(0) as usize),
        top_p: f.num("top_p", 0.0, 1.0)?.unwrap_or(d.top_p),
        min_p: f.num("min_p", 0.0, 1.0)?.unwrap_or(d.min_p),
        repeat_penalty: f
            .num("repeat_penalty", 0.0, 10.0)?
            .unwrap_or(d.repeat_penalty),
        frequency_penalty: f
            .num("frequency_penalty", -2.0, 2.0)?
            .unwrap_or(d.frequency_penalty),
        presence_penalty: f
            .num("presence_penalty", -2.0, 2.0)?
            .unwrap_or(d.presence_penalty),
        repeat_last_n: f
            .int("repeat_last_n", 0, 1 << 20)?
            .map_or(d.repeat_last_n, |n| n as usize),
        seed,
    };
    if sampling.repeat_penalty == 0.0 {
        return Err(ApiError::param(
            "repeat_penalty",
            "'repeat_penalty' must be above 0",
        ));
    }
    if sampling.top_p == 0.0 {
        // OpenAI allows 0: only the most likely token survives
        sampling.top_p = f32::MIN_POSITIVE;
    }

    let stop = match f.get("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => {
            if a.len() > MAX_STOP {
                return Err(ApiError::param(
                    "stop",
                    format!("at most {MAX_STOP} stop strings, got {}", a.len()),
                ));
            }
            a.iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    v => Err(wrong_type("stop", "a string or a list of strings", v)),
                })
                .collect::<Result<_, _>>()?
        }
        Some(v) => return Err(wrong_type("stop", "a string or a list of strings", v)),
    };
    let max_top = MAX_TOP_LOGPROBS as i64;
    let logprobs = if chat {
        let on = f.bool("logprobs")?.unwrap_or(false);
        let top = f.int("top_logprobs", 0, max_top)?;
        if top.is_some() && !on {
            return Err(ApiError::param(
                "top_logprobs",
                "'top_logprobs' needs 'logprobs': true",
            ));
        }
        on.then(|| top.unwrap_or(0) as usize)
    } else {
        f.int("logprobs", 0, max_top)?.map(|n| n as usize)
    };
    Ok(GenParams {
        model,
        stream,
        include_usage,
        max_tokens,
        sampling,
        stop,
        ignore_eos: f.bool("ignore_eos")?.unwrap_or(false),
        logprobs,
        speculative: f.bool("speculative")?,
        lookup_ngram: f
            .int("lookup_ngram", 0, MAX_LOOKUP_NGRAM as i64)?
            .map(|n| n as usize),
        draft_max: f
            .int("draft_max", 1, MAX_DRAFT_TOKENS as i64)?
            .map(|n| n as usize),
    })
}

/// The chat endpoint's `messages`, checked and with text-part contents joined into strings
/// (one newline between parts), ready for the chat template.
pub fn messages(body: &Map<String, Value>) -> Result<Value, ApiError> {
    let list = match Fields(body).get("messages") {
        None => {
            return Err(ApiError::param("messages", "'messages' is required")
                .with_code("missing_required_parameter"))
        }
        Some(Value::Array(a)) => a,
        Some(v) => return Err(wrong_type("messages", "an array of messages", v)),
    };
    if list.is_empty() {
        return Err(ApiError::param(
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
            .ok_or_else(|| ApiError::param(&format!("{at}.role"), format!("{at} has no 'role'")))?;
        if !matches!(role, "system" | "developer" | "user" | "assistant" | "tool") {
            return Err(ApiError::param(
                &format!("{at}.role"),
                format!("unknown role '{role}' (system, developer, user, assistant or tool)"),
            ));
        }
        let content = match f.get("content") {
            None if role == "assistant" => String::new(),
            None => {
                return Err(ApiError::param(
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

fn text_parts(parts: &[Value], at: &str) -> Result<String, ApiError> {
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
                None => return Err(ApiError::param(&pat, format!("{pat} has no 'text'"))),
            },
            Some(other) => {
                return Err(ApiError::param(
                    &pat,
                    format!("content parts of type '{other}' are not supported (text only)"),
                ))
            }
            None => return Err(ApiError::param(&pat, format!("{pat} has no 'type'"))),
        }
    }
    Ok(texts.join("\n"))
}

/// The completions endpoint's `prompt`: a string, a list of one string, or token ids.
pub fn prompt(body: &Map<String, Value>) -> Result<Prompt, ApiError> {
    let bad = |v: &Value| {
        wrong_type(
            "prompt",
            "a string, a list of one string or a list of token ids",
            v,
        )
    };
    match Fields(body).get("prompt") {
        None => Err(ApiError::param("prompt", "'prompt' is required")
            .with_code("missing_required_parameter")),
        Some(Value::String(s)) => Ok(Prompt::Text(s.clone())),
        Some(Value::Array(a)) => match a.as_slice() {
            [Value::String(s)] => Ok(Prompt::Text(s.clone())),
            [Value::Array(ids)] => token_ids(ids).ok_or_else(|| bad(&a[0])),
            [] => Err(ApiError::param("prompt", "'prompt' is empty")),
            [Value::String(_) | Value::Array(_), ..] => Err(ApiError::param(
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

impl GenParams {
    /// How many tokens a step the request drafts with the server's draft model (whose
    /// default is `server`): none when the request turns speculation off or asks for prompt
    /// lookup (`lookup_ngram`), else its own `draft_max` or the server's.
    pub fn draft_model(&self, server: Option<usize>) -> Option<usize> {
        if self.speculative == Some(false) || self.lookup_ngram.is_some() {
            return None;
        }
        Some(self.draft_max.unwrap_or(server?))
    }

    /// The request's prompt lookup: its own `lookup_ngram` (0: none), else the server's
    /// default unless `speculative` is false; `draft_max` overrides the length either way.
    pub fn lookup(&self, server: Option<Lookup>) -> Option<Lookup> {
        if self.speculative == Some(false) {
            return None;
        }
        let l = match self.lookup_ngram {
            Some(0) => return None,
            Some(ngram) => Lookup {
                ngram,
                draft_max: server.map_or(16, |s| s.draft_max),
            },
            None => server?,
        };
        Some(Lookup {
            draft_max: self.draft_max.unwrap_or(l.draft_max),
            ..l
        })
    }
}
