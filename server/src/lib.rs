//! `superinfer serve`: an OpenAI-compatible HTTP server over the scheduler.
//!
//! The server binds its port at once and loads the model on the engine thread (`/health`
//! answers 503 until it is ready). The engine thread then runs the [`Scheduler`] — every
//! request advances in one batched step per token, with chunked prefill and prefix caching —
//! while the HTTP handlers (axum on a small tokio runtime) only parse, tokenize, submit and
//! stream. Each request's events reach its handler over a channel; a client that goes away
//! cancels its request at the next step.
//!
//! [`Scheduler`]: superinfer_runtime::Scheduler

mod error;
mod metrics;
mod openai;
mod params;
mod routes;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use superinfer_runtime::scheduler::Lookup;
use superinfer_runtime::speculative::DraftOptions;
use superinfer_runtime::{EngineOptions, SchedulerOptions};

pub use error::ApiError;
use state::{AppState, EngineSetup};

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub model: PathBuf,
    pub engine: EngineOptions,
    pub scheduler: SchedulerOptions,
    pub host: String,
    pub port: u16,
    /// Requests must carry `Authorization: Bearer KEY` (all routes but `/health` and
    /// `/metrics`).
    pub api_key: Option<String>,
    /// The model's name in the API (default: the file's name).
    pub alias: Option<String>,
    /// A Jinja file that replaces the model's chat template.
    pub chat_template: Option<PathBuf>,
    /// Largest request body in bytes.
    pub body_limit: usize,
    /// Speculative decoding by prompt lookup for requests that do not say otherwise.
    pub lookup: Option<Lookup>,
    /// A draft model for speculative decoding (requests use it unless they say
    /// `"speculative": false` or ask for prompt lookup), and how it drafts.
    pub draft: Option<(PathBuf, DraftOptions)>,
}

/// Serves until Ctrl-C or SIGTERM; an error if the port cannot be bound or the model
/// cannot be loaded.
pub fn serve(o: ServeOptions) -> Result<(), String> {
    let alias = o.alias.clone().unwrap_or_else(|| {
        o.model
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into())
    });
    let state = Arc::new(AppState {
        alias,
        model_path: o.model.clone(),
        api_key: o.api_key.clone().filter(|k| !k.is_empty()),
        lookup: o.lookup,
        draft_max: o.draft.as_ref().map(|(_, d)| d.max),
        metrics: Default::default(),
        ready: OnceLock::new(),
        started: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        stop: Default::default(),
    });
    // the HTTP side is light: two workers leave the cores to the engine's thread pool
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    rt.block_on(run(o, state))
}

async fn run(o: ServeOptions, state: Arc<AppState>) -> Result<(), String> {
    let addr = format!("{}:{}", o.host, o.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e} (choose another --port or --host)"))?;
    let local: SocketAddr = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!(
        "superinfer serve: listening on http://{local} (loading {})",
        o.model.display()
    );

    // tells the HTTP side to stop when the engine thread ends early (its error comes back
    // through the thread's join handle)
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<()>();
    let setup = EngineSetup {
        engine: o.engine.clone(),
        scheduler: o.scheduler.clone(),
        chat_template: o.chat_template.clone(),
        draft: o.draft.clone(),
    };
    let st = state.clone();
    let engine = std::thread::Builder::new()
        .name("superinfer-engine".into())
        .spawn(move || {
            let r = state::engine_thread(st, setup);
            if r.is_err() {
                let _ = failed_tx.send(());
            }
            r
        })
        .map_err(|e| format!("starting the engine thread: {e}"))?;

    let app = router(state.clone(), o.body_limit);
    let stopping = state.clone();
    let shutdown = async move {
        tokio::select! {
            _ = shutdown_signal() => eprintln!("superinfer serve: shutting down"),
            _ = failed_rx => {},
        }
        // ends the running streams (they get an error event), so connections close
        stopping.stop.store(true, Ordering::Relaxed);
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| format!("server error: {e}"))?;
    state.stop.store(true, Ordering::Relaxed);
    engine
        .join()
        .map_err(|_| "the engine thread panicked".to_string())?
}

fn router(state: Arc<AppState>, body_limit: usize) -> Router {
    use routes::generate::{chat, completions};
    let api = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/completions", post(completions))
        .route("/v1/models", get(routes::models))
        .route("/models", get(routes::models))
        .route("/props", get(routes::props))
        .route("/tokenize", post(routes::tokenize))
        .route("/detokenize", post(routes::detokenize))
        .route("/apply-template", post(routes::apply_template))
        .route_layer(middleware::from_fn(json_body))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .route("/health", get(routes::health))
        .route("/metrics", get(routes::metrics))
        .merge(api)
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(state.clone(), count_status))
        .with_state(state)
}

/// Checks `Authorization: Bearer KEY` when the server has a key.
async fn auth(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Some(key) = &st.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if given != Some(key.as_str()) {
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(req).await
}

/// Refuses bodies declared as something other than JSON (415). No Content-Type, and
/// `application/x-www-form-urlencoded` (what `curl -d` sends), are read as JSON.
async fn json_body(req: Request, next: Next) -> Response {
    if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
        let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
        let mime = ct.split(';').next().unwrap_or("").trim();
        let json = mime == "application/json"
            || mime.ends_with("+json")
            || mime == "application/x-www-form-urlencoded";
        if !json {
            return ApiError::invalid(format!(
                "the body must be JSON (Content-Type: application/json), not '{mime}'"
            ))
            .with_status(axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE)
            .with_code("unsupported_media_type")
            .into_response();
        }
    }
    next.run(req).await
}

/// Counts every response by status (`superinfer_requests_total`).
async fn count_status(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    st.metrics.count_status(res.status().as_u16());
    res
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
