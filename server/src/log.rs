//! Logging: `tracing` events on stderr, as text or one JSON object a line, and the request
//! log: one line per request (method, route, status, latency, and for generation its prompt
//! and completion tokens), written when the response has been sent in full (for a stream:
//! when it ends, so the tokens are counted).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// How log lines look (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `2026-01-01T00:00:00.000000Z  INFO request: method=POST route=/v1/completions ...`
    #[default]
    Text,
    /// One JSON object a line, its fields at the top level.
    Json,
}

/// Sends `tracing` events to stderr in `format`, at `info` and above unless `RUST_LOG` says
/// otherwise (e.g. `RUST_LOG=debug` adds `/health`, `/ready` and `/metrics` requests, `warn` keeps only
/// problems). Does nothing when a subscriber is already set (a second server in a process).
pub fn init(format: LogFormat) -> Result<(), String> {
    use std::io::IsTerminal;
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;

    let filter = match std::env::var("RUST_LOG") {
        Ok(s) if !s.trim().is_empty() => s
            .parse::<Targets>()
            .map_err(|e| format!("RUST_LOG='{s}': {e} (e.g. RUST_LOG=info or RUST_LOG=debug)"))?,
        _ => Targets::new().with_default(LevelFilter::INFO),
    };
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match format {
        LogFormat::Text => registry
            .with(fmt.with_ansi(std::io::stderr().is_terminal()))
            .try_init(),
        LogFormat::Json => registry
            .with(
                fmt.json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false),
            )
            .try_init(),
    };
    Ok(())
}

/// What a request's handler adds to its log line.
#[derive(Default)]
struct Note {
    route: Option<String>,
    tokens: Option<(usize, usize)>,
    finish: Option<&'static str>,
    error: Option<String>,
}

/// A request's log note, shared by the logging middleware and the handler (through the
/// request's extensions).
#[derive(Clone, Default)]
pub struct RequestNote(Arc<Mutex<Note>>);

impl RequestNote {
    fn with<R>(&self, f: impl FnOnce(&mut Note) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A generation request's prompt and completion tokens, and how it ended (`stop`,
    /// `length`, `cancelled`, `error`).
    pub fn generation(&self, prompt: usize, completion: usize, finish: &'static str) {
        self.with(|n| {
            n.tokens = Some((prompt, completion));
            n.finish = Some(finish);
        });
    }

    /// An error after the response's head was sent (a stream's error event).
    pub fn error(&self, message: &str) {
        self.with(|n| n.error = Some(message.to_string()));
    }
}

/// The message of an error response, put in the response's extensions by `ApiError` so the
/// request log can say what went wrong.
#[derive(Clone)]
pub struct ErrorMessage(pub String);

/// Middleware (outermost): gives the request a [`RequestNote`] and logs its line once the
/// response body is done or dropped.
pub async fn requests(mut req: Request, next: Next) -> Response {
    let t0 = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let note = RequestNote::default();
    req.extensions_mut().insert(note.clone());
    let res = next.run(req).await;
    if let Some(ErrorMessage(m)) = res.extensions().get::<ErrorMessage>() {
        note.error(m);
    }
    let line = Line {
        t0,
        method,
        path,
        status: res.status(),
        note,
    };
    res.map(|body| {
        Body::new(Logged {
            body: Some(body),
            line: Some(line),
        })
    })
}

/// Route middleware: records the route's pattern (the request log names routes, not paths).
pub async fn route(req: Request, next: Next) -> Response {
    if let (Some(p), Some(n)) = (
        req.extensions().get::<MatchedPath>(),
        req.extensions().get::<RequestNote>(),
    ) {
        let p = p.as_str().to_string();
        n.with(|n| n.route = Some(p));
    }
    next.run(req).await
}

struct Line {
    t0: Instant,
    method: Method,
    path: String,
    status: StatusCode,
    note: RequestNote,
}

impl Line {
    fn emit(self) {
        let Line {
            t0,
            method,
            path,
            status,
            note,
        } = self;
        let latency_ms = (t0.elapsed().as_secs_f64() * 1e6).round() / 1e3;
        let n = note.with(std::mem::take);
        // no route matched: the path, shortened (it is the client's text)
        let route = n.route.unwrap_or_else(|| path.chars().take(80).collect());
        let status = status.as_u16();
        // (absent fields are left out of the line)
        let (prompt_tokens, completion_tokens) = n.tokens.unzip();
        let error = n.error.as_deref();
        macro_rules! log_line {
            ($level:expr) => {
                tracing::event!(
                    target: "superinfer::request",
                    $level,
                    method = %method,
                    route = %route,
                    status,
                    latency_ms,
                    prompt_tokens,
                    completion_tokens,
                    finish = n.finish,
                    error,
                    "request"
                )
            };
        }
        if matches!(route.as_str(), "/health" | "/ready" | "/metrics") {
            // polled by load balancers and Prometheus (503 while the model loads)
            log_line!(tracing::Level::DEBUG)
        } else if status == 503 || status == 429 {
            // loading, full: the client retries later
            log_line!(tracing::Level::WARN)
        } else if status >= 500 || (status < 400 && error.is_some()) {
            // a server fault, or a stream that failed after its 200
            log_line!(tracing::Level::ERROR)
        } else {
            log_line!(tracing::Level::INFO)
        }
    }
}

/// A response body that writes the request's log line when it ends or is dropped (the
/// inner body first, so whatever it still records is in the line).
struct Logged {
    body: Option<Body>,
    line: Option<Line>,
}

impl http_body::Body for Logged {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        match self.body.as_mut() {
            Some(b) => Pin::new(b).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map(|b| b.size_hint())
            .unwrap_or_else(|| SizeHint::with_exact(0))
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        drop(self.body.take());
        if let Some(line) = self.line.take() {
            line.emit();
        }
    }
}
