//! What a generation request asks besides its prompt: sampling, length, stop strings,
//! `ignore_eos`, log-probabilities, streaming.

use serde_json::{Map, Value};
use superinfer_core::generate::MAX_TOP_LOGPROBS;
use superinfer_core::sampler::SamplerConfig;

use crate::fields::{wrong_type, Fields};
use crate::format::OutputFormat;
use crate::tools::Tools;
use crate::Error;

/// The most stop strings a request may give.
pub const MAX_STOP: usize = 16;

/// Which endpoint's form of the fields a body uses (they differ in `logprobs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`: `logprobs` is a boolean, `top_logprobs` the count.
    Chat,
    /// `/v1/completions`: `logprobs` is the count.
    Completions,
}

/// A generation request's parameters, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct GenParams {
    /// The model the request names, if any (a server checks it is the one it serves).
    pub model: Option<String>,
    pub stream: bool,
    /// `stream_options.include_usage`: a last streamed chunk with the token counts.
    pub include_usage: bool,
    /// `max_completion_tokens`, else `max_tokens`; `None`: until the end of generation or a
    /// full context.
    pub max_tokens: Option<usize>,
    /// llama.cpp's defaults where the request says nothing; `seed` is the request's, else 0
    /// (see [`GenParams::seed`]).
    pub sampling: SamplerConfig,
    /// The request's `seed`, if it gave one (a frontend draws a random one otherwise).
    pub seed: Option<u64>,
    pub stop: Vec<String>,
    /// Go on past end-of-generation tokens (for benchmarks).
    pub ignore_eos: bool,
    /// Top alternatives per token, when log-probabilities are asked for.
    pub logprobs: Option<usize>,
    /// `response_format`, `grammar` or `json_schema`: the shape the output must have.
    pub format: Option<OutputFormat>,
    /// The chat endpoint's `tools`, `tool_choice` and `parallel_tool_calls` (none without
    /// tools, or when the request gives an empty list).
    pub tools: Option<Tools>,
}

impl GenParams {
    /// Parses and checks the fields of `body` (a request's JSON object) other than the
    /// prompt; `n` must be 1.
    pub fn parse(body: &Map<String, Value>, endpoint: Endpoint) -> Result<GenParams, Error> {
        let f = Fields(body);
        let model = f.str("model")?.map(str::to_string);
        if let Some(n) = f.int("n", i64::MIN, i64::MAX)? {
            if n != 1 {
                return Err(Error::param(
                    "n",
                    format!(
                        "'n' must be 1 (one choice per request), got {n}; send several requests instead"
                    ),
                ));
            }
        }
        let format = crate::format::output_format(body)?;
        let tools = match endpoint {
            Endpoint::Chat => crate::tools::tools(body)?,
            Endpoint::Completions => {
                if f.get("tools")
                    .is_some_and(|t| t.as_array().is_none_or(|a| !a.is_empty()))
                {
                    return Err(Error::param(
                        "tools",
                        "'tools' is for /v1/chat/completions (the chat template renders them)",
                    ));
                }
                None
            }
        };
        let stream = f.bool("stream")?.unwrap_or(false);
        let include_usage = match f.get("stream_options") {
            None => false,
            Some(Value::Object(o)) => Fields(o).bool("include_usage")?.unwrap_or(false),
            Some(v) => return Err(wrong_type("stream_options", "an object", v)),
        };
        let max_a = f.int("max_tokens", 0, i64::MAX)?;
        let max_b = f.int("max_completion_tokens", 0, i64::MAX)?;
        let max_tokens = max_b.or(max_a).map(|n| n as usize);
        let seed = seed(&f)?;
        let sampling = sampling(&f, seed.unwrap_or(SamplerConfig::default().seed))?;
        let stop = stop(&f)?;
        let logprobs = logprobs(&f, endpoint)?;
        Ok(GenParams {
            model,
            stream,
            include_usage,
            max_tokens,
            sampling,
            seed,
            stop,
            ignore_eos: f.bool("ignore_eos")?.unwrap_or(false),
            logprobs,
            format,
            tools,
        })
    }

    /// The sampling with the request's seed, or `random()` where it gave none.
    pub fn sampling_seeded(&self, random: impl FnOnce() -> u64) -> SamplerConfig {
        SamplerConfig {
            seed: self.seed.unwrap_or_else(random),
            ..self.sampling.clone()
        }
    }
}

fn seed(f: &Fields) -> Result<Option<u64>, Error> {
    match f.get("seed") {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_i64().map(|x| x as u64))
            .map(Some)
            .ok_or_else(|| Error::param("seed", "'seed' must be an integer")),
        Some(v) => Err(wrong_type("seed", "an integer", v)),
    }
}

/// llama.cpp's defaults, overridden by the request's fields, each within OpenAI's range.
fn sampling(f: &Fields, seed: u64) -> Result<SamplerConfig, Error> {
    let d = SamplerConfig::default();
    let mut s = SamplerConfig {
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
    if s.repeat_penalty == 0.0 {
        return Err(Error::param(
            "repeat_penalty",
            "'repeat_penalty' must be above 0",
        ));
    }
    if s.top_p == 0.0 {
        // OpenAI allows 0: only the most likely token survives
        s.top_p = f32::MIN_POSITIVE;
    }
    Ok(s)
}

fn stop(f: &Fields) -> Result<Vec<String>, Error> {
    let bad = |v: &Value| wrong_type("stop", "a string or a list of strings", v);
    match f.get("stop") {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => {
            if a.len() > MAX_STOP {
                return Err(Error::param(
                    "stop",
                    format!("at most {MAX_STOP} stop strings, got {}", a.len()),
                ));
            }
            a.iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    v => Err(bad(v)),
                })
                .collect()
        }
        Some(v) => Err(bad(v)),
    }
}

fn logprobs(f: &Fields, endpoint: Endpoint) -> Result<Option<usize>, Error> {
    let max_top = MAX_TOP_LOGPROBS as i64;
    Ok(match endpoint {
        Endpoint::Chat => {
            let on = f.bool("logprobs")?.unwrap_or(false);
            let top = f.int("top_logprobs", 0, max_top)?;
            if top.is_some() && !on {
                return Err(Error::param(
                    "top_logprobs",
                    "'top_logprobs' needs 'logprobs': true",
                ));
            }
            on.then(|| top.unwrap_or(0) as usize)
        }
        Endpoint::Completions => f.int("logprobs", 0, max_top)?.map(|n| n as usize),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value, endpoint: Endpoint) -> Result<GenParams, Error> {
        match v {
            Value::Object(m) => GenParams::parse(&m, endpoint),
            _ => unreachable!(),
        }
    }

    fn err(v: Value) -> Error {
        parse(v, Endpoint::Chat).unwrap_err()
    }

    #[test]
    fn defaults_are_llama_cpp_s() {
        let p = parse(json!({"messages": []}), Endpoint::Chat).unwrap();
        assert_eq!(p.sampling, SamplerConfig::default());
        assert_eq!((p.max_tokens, p.seed, p.logprobs), (None, None, None));
        assert!(!p.stream && !p.ignore_eos && p.stop.is_empty());
        assert_eq!(p.sampling_seeded(|| 7).seed, 7);
    }

    #[test]
    fn every_field_reaches_its_type() {
        let p = parse(
            json!({
                "model": "m", "stream": true, "stream_options": {"include_usage": true},
                "max_tokens": 9, "max_completion_tokens": 5, "temperature": 0.5, "top_k": -1,
                "top_p": 0, "min_p": 0.1, "repeat_penalty": 1.1, "frequency_penalty": -1,
                "presence_penalty": 1.5, "repeat_last_n": 32, "seed": -1,
                "stop": ["a", "b"], "ignore_eos": true, "logprobs": true, "top_logprobs": 3,
                "user": "ignored", "tool_choice": "none", "tools": []
            }),
            Endpoint::Chat,
        )
        .unwrap();
        let s = &p.sampling;
        assert_eq!(p.model.as_deref(), Some("m"));
        assert!(p.stream && p.include_usage && p.ignore_eos);
        // max_completion_tokens wins over the older max_tokens
        assert_eq!(p.max_tokens, Some(5));
        assert_eq!(
            (s.temperature, s.top_k, s.min_p, s.repeat_last_n),
            (0.5, 0, 0.1, 32)
        );
        // top_p 0: only the best token survives
        assert_eq!(s.top_p, f32::MIN_POSITIVE);
        assert_eq!(
            (s.repeat_penalty, s.frequency_penalty, s.presence_penalty),
            (1.1, -1.0, 1.5)
        );
        assert_eq!((p.seed, s.seed), (Some(u64::MAX), u64::MAX));
        assert_eq!(p.sampling_seeded(|| unreachable!()).seed, u64::MAX);
        assert_eq!(p.stop, ["a", "b"]);
        assert_eq!(p.logprobs, Some(3));
        let p = parse(json!({"stop": "\n", "logprobs": 2}), Endpoint::Completions).unwrap();
        assert_eq!((p.stop, p.logprobs), (vec!["\n".to_string()], Some(2)));
    }

    #[test]
    fn wrong_types_are_invalid_type_naming_the_field() {
        for (body, param, message) in [
            (
                json!({"temperature": "0.2"}),
                "temperature",
                "'temperature' must be a number, not a string",
            ),
            (
                json!({"max_tokens": "ten"}),
                "max_tokens",
                "'max_tokens' must be an integer, not a string",
            ),
            (
                json!({"top_p": [0.5]}),
                "top_p",
                "'top_p' must be a number, not an array",
            ),
            (
                json!({"stop": 5}),
                "stop",
                "'stop' must be a string or a list of strings, not a number",
            ),
            (
                json!({"stop": ["a", 1]}),
                "stop",
                "'stop' must be a string or a list of strings, not a number",
            ),
            (
                json!({"stream": "yes"}),
                "stream",
                "'stream' must be a boolean, not a string",
            ),
            (
                json!({"seed": "abc"}),
                "seed",
                "'seed' must be an integer, not a string",
            ),
            (
                json!({"ignore_eos": 1}),
                "ignore_eos",
                "'ignore_eos' must be a boolean, not a number",
            ),
            (
                json!({"stream_options": true}),
                "stream_options",
                "'stream_options' must be an object, not a boolean",
            ),
        ] {
            let e = err(body);
            assert_eq!(
                (e.param.as_deref(), e.code, e.message.as_str()),
                (Some(param), "invalid_type", message)
            );
        }
    }

    #[test]
    fn out_of_range_values_are_invalid_value() {
        for (body, param) in [
            (json!({"temperature": -1}), "temperature"),
            (json!({"top_p": 2}), "top_p"),
            (json!({"max_tokens": -5}), "max_tokens"),
            (json!({"n": 2}), "n"),
            (json!({"n": 0}), "n"),
            (
                json!({"logprobs": true, "top_logprobs": 21}),
                "top_logprobs",
            ),
            (json!({"top_logprobs": 2}), "top_logprobs"),
            (json!({"presence_penalty": 3}), "presence_penalty"),
            (json!({"repeat_penalty": 0}), "repeat_penalty"),
            (
                json!({"tools": [{"type": "function"}]}),
                "tools[0].function",
            ),
            (json!({"stop": vec!["x"; MAX_STOP + 1]}), "stop"),
        ] {
            let e = err(body.clone());
            assert_eq!(
                (e.param.as_deref(), e.code),
                (Some(param), "invalid_value"),
                "{body}"
            );
        }
        assert_eq!(
            err(json!({"temperature": 3})).message,
            "'temperature' must be between 0 and 2, got 3"
        );
        let e = parse(json!({"logprobs": 21}), Endpoint::Completions).unwrap_err();
        assert_eq!(e.message, "'logprobs' must be between 0 and 20, got 21");
    }
}
