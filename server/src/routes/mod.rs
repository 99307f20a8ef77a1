//! The HTTP routes. Generation lives in [`generate`]; the small endpoints are here.

pub mod generate;
pub mod structured;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use superinfer_api::Fields;

use crate::error::ApiError;
use crate::params;
use crate::state::AppState;

/// A request's body, or the error for one that could not be read (413 over the limit).
pub fn body(raw: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    raw.map_err(|r| {
        let status = r.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::invalid(format!("the request body is too large: {}", r.body_text()))
                .with_status(status)
                .with_code("request_too_large")
        } else {
            ApiError::invalid(format!(
                "the request body could not be read: {}",
                r.body_text()
            ))
        }
    })
}

/// Runs CPU work (parsing a big body, tokenizing, rendering a chat template) on tokio's
/// blocking pool: on the two async workers it would stall every stream they serve.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(ApiError::internal(format!(
            "the request's work failed: {e}"
        )))
    })
}

/// Liveness (llama-server's `/health`): 200 once the model is loaded, 503 while it loads;
/// still 200 while the server drains.
pub async fn health(State(st): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    st.ready()?;
    Ok(Json(json!({ "status": "ok" })))
}

/// Readiness: 200 while the server takes new work; 503 while the model loads and, after a
/// shutdown signal, while it drains (a router or Kubernetes stops sending requests here).
pub async fn ready(State(st): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    st.ready()?;
    if st.draining.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(ApiError::draining());
    }
    Ok(Json(json!({ "status": "ready" })))
}

pub async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        st.metrics.render(),
    )
        .into_response()
}

pub async fn models(State(st): State<Arc<AppState>>) -> Json<Value> {
    let mut model = json!({
        "id": st.alias,
        "object": "model",
        "created": st.started,
        "owned_by": "superinfer",
    });
    if let Some(r) = st.ready.get() {
        let c = r.engine.config();
        model["meta"] = json!({
            "architecture": r.engine.arch_name(),
            "n_vocab": c.n_vocab,
            "n_ctx_train": c.n_ctx_train,
            "n_embd": c.n_embd,
            "size": r.engine.file_size(),
            "n_ctx": r.client.n_ctx(),
        });
    }
    Json(json!({ "object": "list", "data": [model] }))
}

pub async fn props(State(st): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let r = st.ready()?;
    Ok(Json(json!({
        "chat_template": r.template.source(),
        "bos_token": r.template.bos_token(),
        "eos_token": r.template.eos_token(),
        "n_ctx": r.client.n_ctx(),
        "total_slots": r.n_parallel,
        "model_alias": st.alias,
        "model_path": st.model_path.display().to_string(),
        "build_info": concat!("superinfer ", env!("CARGO_PKG_VERSION")),
    })))
}

pub async fn tokenize(
    State(st): State<Arc<AppState>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let raw = body(raw)?;
    blocking(move || {
        let obj = params::object(&raw)?;
        let r = st.ready()?;
        let f = Fields(&obj);
        let content = f
            .str("content")?
            .ok_or_else(|| ApiError::param("content", "'content' is required"))?;
        let add_special = f.bool("add_special")?.unwrap_or(false);
        let parse_special = f.bool("parse_special")?.unwrap_or(true);
        let tokens = r
            .engine
            .tokenizer()
            .encode(content, add_special, parse_special)
            .map_err(|e| ApiError::invalid(e.to_string()))?;
        // (serialized here: a million ids take a while too)
        Ok(Json(json!({ "tokens": tokens })).into_response())
    })
    .await
}

pub async fn detokenize(
    State(st): State<Arc<AppState>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let raw = body(raw)?;
    blocking(move || {
        let obj = params::object(&raw)?;
        let r = st.ready()?;
        let tok = r.engine.tokenizer();
        let ids = match Fields(&obj).get("tokens") {
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_u64()
                        .filter(|&id| (id as usize) < tok.vocab_size())
                        .map(|id| id as u32)
                })
                .collect::<Option<Vec<u32>>>()
                .ok_or_else(|| {
                    ApiError::param(
                        "tokens",
                        format!("'tokens' must be token ids below {}", tok.vocab_size()),
                    )
                })?,
            _ => {
                return Err(ApiError::param(
                    "tokens",
                    "'tokens' must be an array of token ids",
                ))
            }
        };
        Ok(Json(json!({ "content": tok.decode(&ids, true) })).into_response())
    })
    .await
}

pub async fn apply_template(
    State(st): State<Arc<AppState>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let raw = body(raw)?;
    blocking(move || {
        let obj = params::object(&raw)?;
        let r = st.ready()?;
        let messages = superinfer_template::tools::prepare_messages(&params::messages(&obj)?);
        let add = Fields(&obj).bool("add_generation_prompt")?.unwrap_or(true);
        let mut vars = params::template_vars(&obj)?;
        // the tools as the chat endpoint renders them
        if let Some(t) = superinfer_api::tools(&obj)? {
            vars.entry("tools").or_insert_with(|| t.raw());
        }
        let prompt = r
            .template
            .render_with(&messages, add, &vars)
            .map_err(|e| ApiError::invalid(e.to_string()).with_code("chat_template_error"))?;
        Ok(Json(json!({ "prompt": prompt })).into_response())
    })
    .await
}

pub async fn not_found() -> ApiError {
    ApiError::not_found(
        "no such route (see GET /v1/models, POST /v1/chat/completions, POST /v1/completions)",
    )
    .with_code("not_found")
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::invalid("this route does not take that method")
        .with_status(StatusCode::METHOD_NOT_ALLOWED)
        .with_code("method_not_allowed")
}
