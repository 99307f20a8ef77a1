//! `POST /v1/chat/completions` and `POST /v1/completions`: a request becomes prompt tokens
//! (through the chat template for chat), goes to the scheduler, and its events come back as
//! one JSON response or as server-sent events. A client that goes away drops its ticket,
//! which cancels the request at the next step.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use superinfer_api::Endpoint;
use superinfer_runtime::scheduler::{
    Completion, Event, EventSink, Request, RequestError, Ticket, TokenLogprob, TEXT_ONLY,
};
use superinfer_template::reasoning::Syntax;
use superinfer_template::tools::{prepare_messages, ToolDelta, ToolParser};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::structured;
use super::{blocking, body};
use crate::error::ApiError;
use crate::log::RequestNote;
use crate::metrics::Metrics;
use crate::openai::{self, Answer, Api};
use crate::params::{self, Params, Prompt};
use crate::state::AppState;
use superinfer_api::Plan;

/// Delivers a request's events to its handler.
struct Sink(UnboundedSender<Event>);

impl EventSink for Sink {
    fn send(&mut self, event: Event) -> bool {
        self.0.send(event).is_ok()
    }
}

pub async fn chat(
    State(st): State<Arc<AppState>>,
    note: Option<Extension<RequestNote>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let raw = body(raw)?;
    let s = st.clone();
    let (prompt, p, parser, plan) = blocking(move || {
        let (obj, p) = request(&s, &raw, Endpoint::Chat)?;
        let messages = prepare_messages(&params::messages(&obj)?);
        let ready = s.ready()?;
        let template = &ready.template;
        let mut vars = p.template_vars.clone();
        if let Some(t) = &p.gen.tools {
            // the tools as HF templates read them (`tools`), whatever the choice
            vars.entry("tools").or_insert_with(|| t.raw());
        }
        let text = template
            .render_with(&messages, true, &vars)
            .map_err(|e| ApiError::invalid(e.to_string()).with_code("chat_template_error"))?;
        let plan = superinfer_api::plan(
            &ready.grammars,
            ready.tool_format,
            ready.engine.tokenizer(),
            &p.gen,
        )?;
        // the answer's reasoning, content and calls, split as the template's model writes them
        let extract = p.extract_reasoning.unwrap_or(s.extract_reasoning);
        let parser = ToolParser::new(
            plan.tool_format,
            template.syntax(),
            extract,
            &text,
            superinfer_runtime::random_seed(),
        )
        .with_tools(p.gen.tools.as_ref().map_or_else(Vec::new, |t| {
            t.tools.iter().map(|t| t.name.clone()).collect()
        }));
        Ok((encode(&s, &text)?, p, parser, plan))
    })
    .await?;
    generate(
        st,
        prompt,
        p,
        parser,
        plan,
        Api::Chat,
        t0,
        note.map(|n| n.0),
    )
    .await
}

pub async fn completions(
    State(st): State<Arc<AppState>>,
    note: Option<Extension<RequestNote>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let raw = body(raw)?;
    let s = st.clone();
    let (prompt, p, plan) = blocking(move || {
        let (obj, p) = request(&s, &raw, Endpoint::Completions)?;
        let prompt = match params::prompt(&obj)? {
            Prompt::Text(t) => encode(&s, &t)?,
            Prompt::Tokens(ids) => ids,
        };
        let ready = s.ready()?;
        let plan = superinfer_api::plan(&ready.grammars, None, ready.engine.tokenizer(), &p.gen)?;
        Ok((prompt, p, plan))
    })
    .await?;
    let plain = ToolParser::new(None, Syntax::Plain, false, "", 0);
    generate(
        st,
        prompt,
        p,
        plain,
        plan,
        Api::Completions,
        t0,
        note.map(|n| n.0),
    )
    .await
}

/// A generation request's body and its shared parameters, once the model is loaded and the
/// request names it (or no model).
fn request(
    st: &AppState,
    raw: &[u8],
    endpoint: Endpoint,
) -> Result<(Map<String, Value>, Params), ApiError> {
    let obj = params::object(raw)?;
    st.ready()?;
    let p = Params::parse(&obj, endpoint)?;
    check_model(st, p.gen.model.as_deref())?;
    Ok((obj, p))
}

fn encode(st: &AppState, text: &str) -> Result<Vec<u32>, ApiError> {
    st.ready()?
        .engine
        .encode_prompt(text)
        .map_err(|e| ApiError::invalid(e.to_string()))
}

fn check_model(st: &AppState, model: Option<&str>) -> Result<(), ApiError> {
    match model {
        Some(m) if !st.serves(m) => Err(ApiError::not_found(format!(
            "the model '{m}' does not exist here: this server serves '{}' (GET /v1/models)",
            st.alias
        ))
        .with_param("model")
        .with_code("model_not_found")),
        _ => Ok(()),
    }
}

/// A request in flight: its ticket (dropping it cancels), events and latency bookkeeping.
struct Run {
    st: Arc<AppState>,
    _ticket: Ticket,
    rx: UnboundedReceiver<Event>,
    answer: Answer,
    /// Splits the text into reasoning, content and calls (all content for completions).
    parser: ToolParser,
    t0: Instant,
    last: Option<Instant>,
    /// Tokens generated so far (events with a token of their own).
    generated: usize,
    /// Whether the request asked for log-probabilities.
    want_logprobs: bool,
    /// The request log's note (tokens and how the request ended).
    note: Option<RequestNote>,
    /// Whether the request ended (else dropping the run cancels it).
    ended: bool,
}

impl Run {
    fn on_token(&mut self, id: u32) {
        if id == TEXT_ONLY {
            return;
        }
        let now = Instant::now();
        let m = &self.st.metrics;
        match self.last {
            None => m.ttft.observe(now - self.t0),
            Some(prev) => m.itl.observe(now - prev),
        }
        self.last = Some(now);
        self.generated += 1;
    }

    fn on_done(&mut self, c: &Completion) {
        let m = &self.st.metrics;
        m.e2e.observe(self.t0.elapsed());
        Metrics::add(&m.prompt_tokens, c.prompt_tokens);
        Metrics::add(&m.cached_tokens, c.cached_tokens);
        Metrics::add(&m.generation_tokens, self.generated);
        Metrics::add(&m.draft_tokens, c.drafted_tokens);
        Metrics::add(&m.draft_accepted_tokens, c.accepted_tokens);
        self.end(openai::finish_reason_with(
            c.stop,
            self.parser.calls().len(),
        ));
    }

    /// The request failed: the log line says why.
    fn on_error(&mut self, e: &RequestError) {
        if let Some(n) = &self.note {
            n.error(&e.to_string());
        }
        self.end("error");
    }

    fn end(&mut self, finish: &'static str) {
        self.ended = true;
        self.st.metrics.count_finished(finish);
        if let Some(n) = &self.note {
            n.generation(self.answer.prompt_tokens, self.generated, finish);
        }
    }

    async fn next(&mut self) -> Event {
        self.rx
            .recv()
            .await
            .unwrap_or(Event::Error(RequestError::Closed))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !self.ended {
            // the client went away (its ticket, dropped with the run, cancels the request)
            self.end("cancelled");
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn generate(
    st: Arc<AppState>,
    prompt: Vec<u32>,
    p: Params,
    parser: ToolParser,
    plan: Plan,
    api: Api,
    t0: Instant,
    note: Option<RequestNote>,
) -> Result<Response, ApiError> {
    let ready = st.ready()?;
    let draft_model = p.spec.draft_model(st.draft_max);
    let lookup = p.spec.lookup(st.lookup);
    let p = p.gen;
    let request = Request {
        prompt,
        // without a limit, generation ends at the end of the context
        max_tokens: p.max_tokens.unwrap_or(usize::MAX),
        sampling: p.sampling_seeded(superinfer_runtime::random_seed),
        stop: p.stop,
        ignore_eos: p.ignore_eos,
        logprobs: p.logprobs,
        lookup,
        draft_model,
        constraint: None,
        lora: None,
    };
    let request = structured::attach(request, plan.constraint);
    let prompt_tokens = request.prompt.len();
    let (tx, rx) = unbounded_channel();
    let ticket = ready.client.submit_to(request, Sink(tx)).map_err(|e| {
        let param = api.param_of(&e);
        let mut err = ApiError::from(e);
        err.param = param.map(str::to_string);
        err
    })?;
    st.metrics.set_waiting(ready.client.waiting());
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let prefix = match api {
        Api::Chat => "chatcmpl",
        Api::Completions => "cmpl",
    };
    let answer = Answer {
        id: format!("{prefix}-{:x}{:06x}", st.started, ticket.id),
        created,
        model: st.alias.clone(),
        api,
        prompt_tokens,
    };
    let mut run = Run {
        st: st.clone(),
        _ticket: ticket,
        rx,
        answer,
        parser,
        t0,
        last: None,
        generated: 0,
        want_logprobs: p.logprobs.is_some(),
        note,
        ended: false,
    };
    // a request refused before its first token gets the error's own status
    let first = run.next().await;
    if let Event::Error(e) = first {
        run.end("error");
        return Err(e.into());
    }
    if p.stream {
        Ok(stream(run, first, p.include_usage))
    } else {
        collect(run, first).await
    }
}

fn logprobs_value(api: Api, run: &Run, lps: &[(u32, TokenLogprob)], offset: usize) -> Value {
    let tok = run
        .st
        .ready
        .get()
        .expect("a request runs only once loaded")
        .engine
        .tokenizer();
    match api {
        Api::Chat => json!({
            "content": lps.iter().map(|(id, lp)| openai::chat_logprob(tok, *id, lp)).collect::<Vec<_>>()
        }),
        Api::Completions => {
            let refs: Vec<(u32, &TokenLogprob)> = lps.iter().map(|(id, lp)| (*id, lp)).collect();
            openai::completion_logprobs(tok, &refs, offset)
        }
    }
}

async fn collect(mut run: Run, first: Event) -> Result<Response, ApiError> {
    let mut text = ToolDelta::default();
    let mut lps = Vec::new();
    let mut ev = first;
    loop {
        match ev {
            Event::Token {
                id,
                text: t,
                logprob,
            } => {
                run.on_token(id);
                text.add(run.parser.push(&t));
                if let Some(lp) = logprob {
                    lps.push((id, *lp));
                }
            }
            Event::Done(c) => {
                run.on_done(&c);
                text.add(run.parser.finish());
                let logprobs = run
                    .want_logprobs
                    .then(|| logprobs_value(run.answer.api, &run, &lps, 0));
                let calls = run.parser.calls();
                let body = run.answer.full(
                    text,
                    calls,
                    logprobs,
                    openai::finish_reason_with(c.stop, calls.len()),
                    openai::usage(run.answer.prompt_tokens, run.generated, &c),
                    openai::with_mask(openai::timings(run.generated, &c), structured::mask_of(&c)),
                );
                return Ok(Json(body).into_response());
            }
            Event::Error(e) => {
                run.on_error(&e);
                return Err(e.into());
            }
        }
        ev = run.next().await;
    }
}

/// The state of an SSE response.
struct Streaming {
    run: Run,
    first: Option<Event>,
    queue: VecDeque<SseEvent>,
    include_usage: bool,
    /// Text bytes sent so far (the legacy logprobs' text offsets).
    offset: usize,
    done: bool,
}

fn data(v: &Value) -> SseEvent {
    SseEvent::default().data(v.to_string())
}

impl Streaming {
    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Token { id, text, logprob } => {
                self.run.on_token(id);
                let lps = logprob.map(|lp| {
                    logprobs_value(self.run.answer.api, &self.run, &[(id, *lp)], self.offset)
                });
                self.offset += text.len();
                let d = self.run.parser.push(&text);
                for chunk in self.run.answer.delta_chunks(&d, lps) {
                    self.queue.push_back(data(&chunk));
                }
            }
            Event::Done(c) => {
                self.run.on_done(&c);
                let d = self.run.parser.finish();
                for chunk in self.run.answer.delta_chunks(&d, None) {
                    self.queue.push_back(data(&chunk));
                }
                let a = &self.run.answer;
                let finish = openai::finish_reason_with(c.stop, self.run.parser.calls().len());
                let last = a.chunk("", None, Some(finish));
                self.queue.push_back(data(&last));
                if self.include_usage {
                    let u = a.usage_chunk(
                        openai::usage(a.prompt_tokens, self.run.generated, &c),
                        openai::with_mask(
                            openai::timings(self.run.generated, &c),
                            structured::mask_of(&c),
                        ),
                    );
                    self.queue.push_back(data(&u));
                }
                self.queue.push_back(SseEvent::default().data("[DONE]"));
                self.done = true;
            }
            Event::Error(e) => {
                self.run.on_error(&e);
                let err = ApiError::from(e);
                self.queue.push_back(data(&err.body()));
                self.done = true;
            }
        }
    }
}

fn stream(run: Run, first: Event, include_usage: bool) -> Response {
    let mut s = Streaming {
        run,
        first: Some(first),
        queue: VecDeque::new(),
        include_usage,
        offset: 0,
        done: false,
    };
    if s.run.answer.api == Api::Chat {
        let role = s.run.answer.role_chunk();
        s.queue.push_back(data(&role));
    }
    let events = futures_util::stream::unfold(s, |mut s| async move {
        loop {
            if let Some(e) = s.queue.pop_front() {
                return Some((Ok::<_, Infallible>(e), s));
            }
            if s.done {
                return None;
            }
            let ev = match s.first.take() {
                Some(e) => e,
                None => s.run.next().await,
            };
            s.on_event(ev);
        }
    });
    // a comment every second: a client that went away is noticed even while its request
    // waits for a slot
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(1)))
        .into_response()
}
