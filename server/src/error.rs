//! OpenAI error objects: `{"error": {"message", "type", "param", "code"}}` with the status
//! that tells a client whether to retry (4xx: never; 429 and 503: later).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use superinfer_runtime::scheduler::RequestError;

use crate::log::ErrorMessage;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
        }
    }

    /// 400: the request is malformed or a value is out of range.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400 about one parameter.
    pub fn param(param: &str, message: impl Into<String>) -> ApiError {
        ApiError::invalid(message)
            .with_param(param)
            .with_code("invalid_value")
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found_error", message)
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid or missing API key: send it as 'Authorization: Bearer KEY'",
        )
        .with_code("invalid_api_key")
    }

    pub fn loading() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable_error",
            "the model is loading; retry shortly",
        )
        .with_code("loading")
    }

    /// 503 from `/ready` after a shutdown signal: the server finishes its running requests
    /// and takes no more.
    pub fn draining() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable_error",
            "the server is shutting down: send new requests to another replica",
        )
        .with_code("draining")
    }

    /// 500: the server failed (the message says where).
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
            .with_code("internal_error")
    }

    pub fn with_param(mut self, p: &str) -> ApiError {
        self.param = Some(p.to_string());
        self
    }

    pub fn with_code(mut self, c: &'static str) -> ApiError {
        self.code = Some(c);
        self
    }

    pub fn with_status(mut self, s: StatusCode) -> ApiError {
        self.status = s;
        self
    }

    pub fn body(&self) -> serde_json::Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

/// A request field that is wrong (`superinfer-api`): a 400 with its `param` and `code`.
impl From<superinfer_api::Error> for ApiError {
    fn from(e: superinfer_api::Error) -> ApiError {
        ApiError {
            param: e.param,
            ..ApiError::invalid(e.message).with_code(e.code)
        }
    }
}

impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> ApiError {
        let msg = e.to_string();
        let (status, kind) = match &e {
            e if e.is_client_error() => (StatusCode::BAD_REQUEST, "invalid_request_error"),
            RequestError::QueueFull { .. } | RequestError::KvPoolFull { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error")
            }
            RequestError::Closed => (StatusCode::SERVICE_UNAVAILABLE, "unavailable_error"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "server_error"),
        };
        ApiError::new(status, kind, msg).with_code(e.code())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (self.status, Json(self.body())).into_response();
        res.extensions_mut().insert(ErrorMessage(self.message));
        res
    }
}
