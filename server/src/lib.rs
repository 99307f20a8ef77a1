//! `superinfer serve`: an OpenAI-compatible HTTP server over the scheduler.
//!
//! The server binds its port at once and loads the model on the engine thread (`/health`
//! answers 503 until it is ready). The engine thread then runs the [`Scheduler`] — every
//! request advances in one batched step per token, with chunked prefill and prefix caching —
//! while the HTTP handlers (axum on two tokio workers) parse, submit and stream; parsing big
//! bodies, tokenizing and rendering chat templates run on tokio's blocking pool, so the
//! workers keep every stream flowing. Each request's events reach its handler over a
//! channel; a client that goes away cancels its request at the next step.
//!
//! SIGTERM (or Ctrl-C) drains: no new connections, the running requests finish, then
//! [`serve`] returns; a second signal or `shutdown_timeout` ends them at once.
//!
//! [`Scheduler`]: superinfer_runtime::Scheduler

mod error;
mod log;
mod metrics;
mod middleware;
mod openai;
mod params;
mod routes;
mod serve_error;
mod shutdown;
mod state;

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::DefaultBodyLimit;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{get, post};
use axum::Router;
use superinfer_runtime::scheduler::Lookup;
use superinfer_runtime::speculative::DraftOptions;
use superinfer_runtime::{EngineOptions, SchedulerOptions};

pub use error::ApiError;
pub use log::LogFormat;
use metrics::Metrics;
pub use middleware::key_matches;
pub use serve_error::ServeError;
use shutdown::Signals;
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
    /// Chat answers' reasoning in `reasoning_content` unless a request says
    /// `"reasoning_format": "none"` (`--reasoning-format`).
    pub extract_reasoning: bool,
    /// Largest request body in bytes.
    pub body_limit: usize,
    /// Speculative decoding by prompt lookup for requests that do not say otherwise.
    pub lookup: Option<Lookup>,
    /// A draft model for speculative decoding (requests use it unless they say
    /// `"speculative": false` or ask for prompt lookup), and how it drafts.
    pub draft: Option<(PathBuf, DraftOptions)>,
    /// How log lines look (stderr).
    pub log_format: LogFormat,
    /// After SIGTERM, how long running requests may take to finish before they are ended.
    pub shutdown_timeout: Duration,
    /// After SIGTERM, how long to keep accepting connections with `/ready` answering 503
    /// before the drain starts (a load balancer's time to notice).
    pub drain_delay: Duration,
}

/// Serves until SIGTERM or Ctrl-C (then drains: see the crate's documentation); an error if
/// the port cannot be bound or the model cannot be loaded.
pub fn serve(o: ServeOptions) -> Result<(), ServeError> {
    log::init(o.log_format).map_err(ServeError::Logging)?;
    let alias = o.alias.clone().unwrap_or_else(|| {
        o.model
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into())
    });
    let metrics = Metrics::new(&alias);
    let state = Arc::new(AppState {
        alias,
        model_path: o.model.clone(),
        api_key: o.api_key.clone().filter(|k| !k.is_empty()),
        lookup: o.lookup,
        draft_max: o.draft.as_ref().map(|(_, d)| d.max),
        extract_reasoning: o.extract_reasoning,
        metrics,
        ready: OnceLock::new(),
        started: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        stop: Default::default(),
        draining: Default::default(),
    });
    // the HTTP side is light: two workers leave the cores to the engine's thread pool
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let r = rt.block_on(run(o, state));
    // a tokenization still running on the blocking pool (its client gone) is not waited for
    rt.shutdown_timeout(Duration::from_secs(1));
    r
}

async fn run(o: ServeOptions, state: Arc<AppState>) -> Result<(), ServeError> {
    let signals = Signals::catch();
    let addr = format!("{}:{}", o.host, o.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: addr.clone(),
            source,
        })?;
    let local: SocketAddr = listener.local_addr().map_err(ServeError::Http)?;
    tracing::info!(
        "listening on http://{local} (loading {})",
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
        .map_err(ServeError::EngineThread)?;

    let app = router(state.clone(), o.body_limit);
    let mut first = signals.clone();
    let timeout = o.shutdown_timeout;
    let delay = o.drain_delay;
    let st = state.clone();
    let drain = async move {
        tokio::select! {
            _ = first.nth(1) => {
                st.draining.store(true, Ordering::Relaxed);
                if !delay.is_zero() {
                    tracing::info!(
                        "draining: /ready answers 503; connections are still accepted for {} s",
                        delay.as_secs_f64()
                    );
                    // a second signal cuts the delay short
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = first.nth(2) => {}
                    }
                }
                tracing::info!(
                    "shutting down: no new connections; the running requests finish (up to {} s, \
                     a second signal ends them now)",
                    timeout.as_secs_f64()
                )
            }
            _ = failed_rx => {},
        }
    };
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(drain)
        .into_future();
    tokio::pin!(server);
    let mut served = Ok(());
    let forced = tokio::select! {
        r = &mut server => {
            served = r;
            None
        }
        why = signals.force(timeout) => Some(why),
    };
    if let Some(why) = forced {
        tracing::warn!("{why}: ending the running requests");
        // their streams end with an error event, and their connections close
        state.stop.store(true, Ordering::Relaxed);
        let _ = tokio::time::timeout(Duration::from_secs(2), &mut server).await;
    }
    state.stop.store(true, Ordering::Relaxed);
    // the engine's error first: the server stopped because of it
    engine.join().map_err(|_| ServeError::EnginePanicked)??;
    served.map_err(ServeError::Http)?;
    tracing::info!("stopped");
    Ok(())
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
        .route_layer(from_fn(middleware::json_body))
        .route_layer(from_fn_with_state(state.clone(), middleware::auth));
    Router::new()
        .route("/health", get(routes::health))
        .route("/ready", get(routes::ready))
        .route("/metrics", get(routes::metrics))
        .merge(api)
        .route_layer(from_fn(log::route))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(from_fn_with_state(state.clone(), middleware::count_status))
        .layer(from_fn(log::requests))
        .with_state(state)
}
