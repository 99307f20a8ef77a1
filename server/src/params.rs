//! Request bodies. The fields every frontend shares (sampling, length, stop strings,
//! `ignore_eos`, log-probabilities, the prompt) are parsed by `superinfer-api`, the one
//! strict parser the npm package uses too: every mistake is a 400 naming the parameter.
//! Here: the server's own fields, for speculative decoding per request, and llama-server's
//! `reasoning_format`.

use serde_json::{Map, Value};
use superinfer_api::{Endpoint, Fields, GenParams};
use superinfer_runtime::scheduler::{Lookup, MAX_DRAFT_TOKENS, MAX_LOOKUP_NGRAM};

pub use superinfer_api::{messages, object, prompt, Prompt};

use crate::error::ApiError;

/// What a generation request asks besides its prompt.
#[derive(Debug, Clone)]
pub struct Params {
    pub gen: GenParams,
    pub spec: Speculation,
    /// `reasoning_format`: whether the answer's reasoning goes to `reasoning_content`
    /// (`auto`, `deepseek`) or stays in the content (`none`); `None`: the server's default.
    pub extract_reasoning: Option<bool>,
    /// More variables for the chat template: `chat_template_kwargs`, and `reasoning_effort`
    /// (gpt-oss's `Reasoning: low|medium|high`), as llama-server sets them.
    pub template_vars: Map<String, Value>,
}

impl Params {
    pub fn parse(body: &Map<String, Value>, endpoint: Endpoint) -> Result<Params, ApiError> {
        Ok(Params {
            gen: GenParams::parse(body, endpoint)?,
            spec: Speculation::parse(body)?,
            extract_reasoning: superinfer_api::reasoning_format(body)?,
            template_vars: template_vars(body)?,
        })
    }
}

/// A request's variables for the chat template, as llama-server's
/// `oaicompat_chat_params_parse` makes them: the `chat_template_kwargs` object, then
/// `reasoning_effort` as `reasoning_effort` and `reasoning_strength` (`"none"` instead turns
/// thinking off: `enable_thinking` false).
pub fn template_vars(body: &Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    let f = Fields(body);
    let mut vars = f.map("chat_template_kwargs")?.cloned().unwrap_or_default();
    match f.str("reasoning_effort")? {
        Some("none") => {
            vars.remove("reasoning_effort");
            vars.insert("enable_thinking".into(), Value::Bool(false));
        }
        Some(e) if !e.is_empty() => {
            vars.insert("reasoning_effort".into(), e.into());
            vars.insert("reasoning_strength".into(), e.into());
        }
        _ => {}
    }
    Ok(vars)
}

/// Speculative decoding: `speculative` (false turns off the server's draft model or prompt
/// lookup), `lookup_ngram` (prompt lookup for this request; 0 = off) and `draft_max`.
#[derive(Debug, Clone)]
pub struct Speculation {
    pub speculative: Option<bool>,
    pub lookup_ngram: Option<usize>,
    pub draft_max: Option<usize>,
}

impl Speculation {
    pub fn parse(body: &Map<String, Value>) -> Result<Speculation, ApiError> {
        let f = Fields(body);
        Ok(Speculation {
            speculative: f.bool("speculative")?,
            lookup_ngram: f
                .int("lookup_ngram", 0, MAX_LOOKUP_NGRAM as i64)?
                .map(|n| n as usize),
            draft_max: f
                .int("draft_max", 1, MAX_DRAFT_TOKENS as i64)?
                .map(|n| n as usize),
        })
    }

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
