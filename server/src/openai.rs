//! The OpenAI shapes of responses: completion objects, stream chunks, usage, log-probabilities,
//! plus llama-server's `timings`.

use serde_json::{json, Value};
use superinfer_runtime::core::generate::MaskStats;
use superinfer_runtime::core::tokenizer::Tokenizer;
use superinfer_runtime::scheduler::{Completion, RequestError, TokenLogprob};
use superinfer_runtime::StopReason;
use superinfer_template::tools::{ToolCall, ToolDelta};

/// Which endpoint a generation answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Chat,
    Completions,
}

impl Api {
    /// The request parameter a refusal is about (the prompt's field differs by endpoint).
    pub fn param_of(self, e: &RequestError) -> Option<&'static str> {
        match (e, self) {
            (RequestError::EmptyPrompt | RequestError::PromptTooLong { .. }, Api::Chat) => {
                Some("messages")
            }
            (RequestError::EmptyPrompt | RequestError::PromptTooLong { .. }, _) => Some("prompt"),
            (RequestError::InvalidLogprobs(_), Api::Chat) => Some("top_logprobs"),
            (RequestError::InvalidLogprobs(_), _) => Some("logprobs"),
            _ => None,
        }
    }
}

/// What a response is made of, gathered from the request's events.
pub struct Answer {
    pub id: String,
    pub created: u64,
    pub model: String,
    pub api: Api,
    pub prompt_tokens: usize,
}

pub fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Length | StopReason::ContextFull => "length",
        _ => "stop",
    }
}

/// The finish reason of an answer that made `calls` calls: `tool_calls` when it made any
/// and was not cut short.
pub fn finish_reason_with(stop: StopReason, calls: usize) -> &'static str {
    superinfer_api::finish_with_calls(finish_reason(stop), calls)
}

/// `timings` with the constraint's cost, when the request had one: `mask_ms` (`median`,
/// `p99`, `max` of the per-token masks, and the `first`) and `grammar_ms` (the compile, 0
/// from the cache).
pub fn with_mask(mut timings: Value, mask: Option<&MaskStats>) -> Value {
    if let Some(m) = mask {
        let ms = |us: u32| f64::from(us) / 1e3;
        timings["mask_ms"] = json!({
            "median": ms(m.median_us),
            "p99": ms(m.p99_us),
            "max": ms(m.max_us),
            "first": ms(m.first_mask_us),
            "n": m.masks,
        });
        timings["grammar_ms"] = json!(ms(m.compile_us));
    }
    timings
}

pub fn usage(prompt_tokens: usize, generated: usize, c: &Completion) -> Value {
    json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": generated,
        "total_tokens": prompt_tokens + generated,
        "prompt_tokens_details": { "cached_tokens": c.cached_tokens },
    })
}

/// llama-server's `timings` object.
pub fn timings(generated: usize, c: &Completion) -> Value {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let rate = |n: usize, d: std::time::Duration| {
        if d.as_secs_f64() > 0.0 {
            n as f64 / d.as_secs_f64()
        } else {
            0.0
        }
    };
    let prompt_n = c.prompt_tokens - c.cached_tokens;
    json!({
        "cache_n": c.cached_tokens,
        "prompt_n": prompt_n,
        "prompt_ms": ms(c.prompt_time),
        "prompt_per_second": rate(prompt_n, c.prompt_time),
        "predicted_n": generated,
        "predicted_ms": ms(c.generate_time),
        "predicted_per_second": rate(generated.saturating_sub(1), c.generate_time),
        "queue_ms": ms(c.queue_time),
        "draft_n": c.drafted_tokens,
        "draft_n_accepted": c.accepted_tokens,
    })
}

fn piece(tok: &Tokenizer, id: u32) -> (String, Vec<u8>) {
    let bytes = tok.token_to_piece(id, true).to_vec();
    (String::from_utf8_lossy(&bytes).into_owned(), bytes)
}

/// One token's entry of a chat completion's `logprobs.content`.
pub fn chat_logprob(tok: &Tokenizer, id: u32, lp: &TokenLogprob) -> Value {
    let entry = |id: u32, logprob: f32| {
        let (text, bytes) = piece(tok, id);
        json!({ "token": text, "logprob": logprob, "bytes": bytes })
    };
    let mut v = entry(id, lp.logprob);
    v["top_logprobs"] = lp.top.iter().map(|&(t, l)| entry(t, l)).collect();
    v
}

/// The legacy completions endpoint's `logprobs` object for some tokens; `offset` is the
/// text offset of the first.
pub fn completion_logprobs(
    tok: &Tokenizer,
    tokens: &[(u32, &TokenLogprob)],
    mut offset: usize,
) -> Value {
    let mut texts = Vec::new();
    let mut lps = Vec::new();
    let mut tops = Vec::new();
    let mut offsets = Vec::new();
    for &(id, lp) in tokens {
        let (text, _) = piece(tok, id);
        offsets.push(offset);
        offset += text.len();
        texts.push(text);
        lps.push(lp.logprob);
        let mut top = serde_json::Map::new();
        for &(t, l) in &lp.top {
            top.insert(piece(tok, t).0, json!(l));
        }
        tops.push(Value::Object(top));
    }
    json!({
        "tokens": texts,
        "token_logprobs": lps,
        "top_logprobs": tops,
        "text_offset": offsets,
    })
}

impl Answer {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.api, chunk) {
            (Api::Chat, false) => "chat.completion",
            (Api::Chat, true) => "chat.completion.chunk",
            (Api::Completions, _) => "text_completion",
        }
    }

    fn envelope(&self, chunk: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": concat!("superinfer-", env!("CARGO_PKG_VERSION")),
            "choices": choices,
        })
    }

    /// A streamed piece of text (with its tokens' log-probabilities, if asked for).
    pub fn chunk(&self, text: &str, logprobs: Option<Value>, finish: Option<&str>) -> Value {
        let choice = match self.api {
            Api::Chat => {
                let delta = if finish.is_some() && text.is_empty() {
                    json!({})
                } else {
                    json!({ "content": text })
                };
                json!({ "index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish })
            }
            Api::Completions => {
                json!({ "index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish })
            }
        };
        self.envelope(true, json!([choice]))
    }

    /// The chunks a piece of the answer makes: for chat, its reasoning
    /// (`delta.reasoning_content`, as llama-server streams it), its content, then its
    /// calls (`delta.tool_calls`); the log-probabilities of the token go with the first. A
    /// token that adds no text but has log-probabilities still gets a chunk.
    pub fn delta_chunks(&self, d: &ToolDelta, mut logprobs: Option<Value>) -> Vec<Value> {
        let mut out = Vec::new();
        if self.api == Api::Chat && !d.reasoning.is_empty() {
            let delta = json!({ "reasoning_content": d.reasoning });
            let choice = json!({ "index": 0, "delta": delta, "logprobs": logprobs.take(), "finish_reason": null });
            out.push(self.envelope(true, json!([choice])));
        }
        if !d.content.is_empty() || logprobs.is_some() && out.is_empty() && d.calls.is_empty() {
            out.push(self.chunk(&d.content, logprobs.take(), None));
        }
        if self.api == Api::Chat && !d.calls.is_empty() {
            let calls: Vec<Value> = d
                .calls
                .iter()
                .map(superinfer_api::call_delta_json)
                .collect();
            let delta = json!({ "tool_calls": calls });
            let choice = json!({ "index": 0, "delta": delta, "logprobs": logprobs.take(), "finish_reason": null });
            out.push(self.envelope(true, json!([choice])));
        }
        out
    }

    /// The first chunk of a chat stream: the assistant's role.
    pub fn role_chunk(&self) -> Value {
        let choice = json!({
            "index": 0,
            "delta": { "role": "assistant", "content": "" },
            "logprobs": null,
            "finish_reason": null,
        });
        self.envelope(true, json!([choice]))
    }

    /// The last chunk of a stream with `include_usage`: no choices, the usage.
    pub fn usage_chunk(&self, usage: Value, timings: Value) -> Value {
        let mut v = self.envelope(true, json!([]));
        v["usage"] = usage;
        v["timings"] = timings;
        v
    }

    /// A whole (non-streamed) response; a chat message has `reasoning_content` when the
    /// answer reasoned (as llama-server's), and `tool_calls` when it called tools (its
    /// `content` is then null if it wrote none).
    pub fn full(
        &self,
        answer: ToolDelta,
        calls: &[ToolCall],
        logprobs: Option<Value>,
        finish: &str,
        usage: Value,
        timings: Value,
    ) -> Value {
        let choice = match self.api {
            Api::Chat => {
                let mut message = json!({ "role": "assistant", "content": answer.content });
                if !answer.reasoning.is_empty() {
                    message["reasoning_content"] = json!(answer.reasoning);
                }
                if !calls.is_empty() {
                    if answer.content.is_empty() {
                        message["content"] = Value::Null;
                    }
                    message["tool_calls"] = superinfer_api::tool_calls_json(calls);
                }
                json!({
                    "index": 0,
                    "message": message,
                    "logprobs": logprobs,
                    "finish_reason": finish,
                })
            }
            Api::Completions => json!({
                "index": 0,
                "text": answer.content,
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
        };
        let mut v = self.envelope(false, json!([choice]));
        v["usage"] = usage;
        v["timings"] = timings;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use superinfer_template::reasoning::Syntax;
    use superinfer_template::tools::{ToolFormat, ToolParser};

    fn answer(api: Api) -> Answer {
        Answer {
            id: "x".into(),
            created: 0,
            model: "m".into(),
            api,
            prompt_tokens: 1,
        }
    }

    /// The pieces of a gpt-oss answer as the detokenizer gives them out (one per token).
    const HARMONY: [&str; 12] = [
        "<|channel|>",
        "analysis",
        "<|message|>",
        "Think",
        " hard",
        "<|end|>",
        "<|start|>",
        "assistant",
        "<|channel|>",
        "final",
        "<|message|>",
        "Four.",
    ];

    /// A streamed chat answer's deltas add up to the whole response's fields, reasoning in
    /// `reasoning_content` and the final channel in `content`.
    #[test]
    fn streamed_deltas_add_up_to_the_whole_message() {
        let a = answer(Api::Chat);
        let prompt = "<|start|>user<|message|>2+2?<|end|><|start|>assistant";
        let mut p = ToolParser::new(None, Syntax::Harmony, true, prompt, 0);
        let (mut reasoning, mut content) = (String::new(), String::new());
        let mut chunks = Vec::new();
        for piece in HARMONY {
            chunks.extend(a.delta_chunks(&p.push(piece), None));
        }
        chunks.extend(a.delta_chunks(&p.finish(), None));
        for c in &chunks {
            let delta = &c["choices"][0]["delta"];
            assert_eq!(c["object"], "chat.completion.chunk");
            reasoning.push_str(delta["reasoning_content"].as_str().unwrap_or(""));
            content.push_str(delta["content"].as_str().unwrap_or(""));
        }
        assert_eq!(
            (reasoning.as_str(), content.as_str()),
            ("Think hard", "Four.")
        );
        let (whole, _) =
            ToolParser::parse(None, Syntax::Harmony, true, prompt, &HARMONY.concat(), 0);
        let full = a.full(whole, &[], None, "stop", json!({}), json!({}));
        let msg = &full["choices"][0]["message"];
        assert_eq!(msg["reasoning_content"], "Think hard");
        assert_eq!(msg["content"], "Four.");
        // reasoning_format none: the raw channels in the content, no reasoning field
        let (raw, _) =
            ToolParser::parse(None, Syntax::Harmony, false, prompt, &HARMONY.concat(), 0);
        let full = a.full(raw, &[], None, "stop", json!({}), json!({}));
        let msg = &full["choices"][0]["message"];
        assert!(msg.get("reasoning_content").is_none());
        assert_eq!(
            msg["content"],
            "<|channel|>analysis<|message|>Think hard<|end|>Four."
        );
    }

    #[test]
    fn a_token_without_text_keeps_its_logprobs() {
        let a = answer(Api::Chat);
        let lp = json!({"content": []});
        let chunks = a.delta_chunks(&ToolDelta::default(), Some(lp.clone()));
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0]["choices"][0]["logprobs"], lp);
        assert!(a.delta_chunks(&ToolDelta::default(), None).is_empty());
        // completions have no reasoning field: the text is the content
        let c = answer(Api::Completions).delta_chunks(
            &ToolDelta {
                content: "hi".into(),
                ..ToolDelta::default()
            },
            None,
        );
        assert_eq!(c[0]["choices"][0]["text"], "hi");
    }

    /// Streamed `tool_calls` deltas: id and name once, in the call's first delta; the
    /// arguments' fragments add up to the whole response's; `content` null without text.
    #[test]
    fn streamed_calls_add_up_to_the_whole_message() {
        let a = answer(Api::Chat);
        let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        let mut p = ToolParser::new(Some(ToolFormat::Hermes), Syntax::Plain, true, "", 3);
        let mut chunks = Vec::new();
        for piece in text.split_inclusive(['"', ' ']) {
            chunks.extend(a.delta_chunks(&p.push(piece), None));
        }
        chunks.extend(a.delta_chunks(&p.finish(), None));
        let (mut ids, mut names, mut args) = (Vec::new(), Vec::new(), String::new());
        for c in &chunks {
            let delta = &c["choices"][0]["delta"];
            assert!(delta.get("content").is_none(), "{c}");
            for call in delta["tool_calls"].as_array().unwrap() {
                assert_eq!(call["index"], 0);
                if let Some(id) = call["id"].as_str() {
                    ids.push(id.to_string());
                    assert_eq!(call["type"], "function");
                }
                if let Some(n) = call["function"]["name"].as_str() {
                    names.push(n.to_string());
                }
                args.push_str(call["function"]["arguments"].as_str().unwrap());
            }
        }
        let (whole, calls) =
            ToolParser::parse(Some(ToolFormat::Hermes), Syntax::Plain, true, "", text, 3);
        let full = a.full(whole, &calls, None, "tool_calls", json!({}), json!({}));
        let msg = &full["choices"][0]["message"];
        assert_eq!(msg["content"], Value::Null);
        assert_eq!(full["choices"][0]["finish_reason"], "tool_calls");
        let call = &msg["tool_calls"][0];
        assert_eq!(ids, [call["id"].as_str().unwrap()]);
        assert_eq!(names, ["get_weather"]);
        assert_eq!(args, call["function"]["arguments"].as_str().unwrap());
        assert_eq!(args, "{\"city\": \"Paris\"}");
    }

    #[test]
    fn finish_reasons_and_mask_timings() {
        assert_eq!(finish_reason_with(StopReason::Length, 1), "length");
        let m = MaskStats {
            masks: 10,
            median_us: 50,
            p99_us: 900,
            max_us: 1500,
            first_mask_us: 20,
            compile_us: 3000,
        };
        let t = with_mask(json!({"predicted_n": 10}), Some(&m));
        assert_eq!(t["mask_ms"]["p99"], 0.9);
        assert_eq!(t["mask_ms"]["max"], 1.5);
        assert_eq!(t["grammar_ms"], 3.0);
        assert!(with_mask(json!({}), None).get("mask_ms").is_none());
    }
}
