//! The middleware of the API routes: the API key, the body's content type, and counting
//! responses by status.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

/// Checks `Authorization: Bearer KEY` when the server has a key.
pub async fn auth(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Some(key) = &st.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if !given.is_some_and(|g| key_matches(g.as_bytes(), key.as_bytes())) {
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(req).await
}

/// Whether `given` is `key`, in a time that depends on the key's length alone: not on where
/// the first differing byte is, nor on whether the lengths match (a wrong guess learns
/// nothing of the key from the answer's timing, not even its length).
pub fn key_matches(given: &[u8], key: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    let mut same = (given.len() as u64).ct_eq(&(key.len() as u64));
    for (i, k) in key.iter().enumerate() {
        // past the end of a shorter guess, zeros (which fail on the length already); the
        // branch depends on the guess's length, which its sender knows
        let g = given.get(i).copied().unwrap_or(0);
        same &= g.ct_eq(k);
    }
    same.into()
}

/// Refuses bodies declared as something other than JSON (415). No Content-Type, and
/// `application/x-www-form-urlencoded` (what `curl -d` sends), are read as JSON.
pub async fn json_body(req: Request, next: Next) -> Response {
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
            .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE)
            .with_code("unsupported_media_type")
            .into_response();
        }
    }
    next.run(req).await
}

/// Counts every response by status (`superinfer_requests_total`).
pub async fn count_status(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    st.metrics.count_status(res.status().as_u16());
    res
}

#[cfg(test)]
mod tests {
    use super::key_matches;

    #[test]
    fn keys_match_exactly() {
        let key = b"s3cret-key";
        assert!(key_matches(b"s3cret-key", key));
        for wrong in [
            &b""[..],
            b"s3cret-kez",
            b"t3cret-key",
            b"s3cret-ke",
            b"s3cret-key ",
            b"s3cret-key\0",
            b"S3CRET-KEY",
        ] {
            assert!(
                !key_matches(wrong, key),
                "{:?}",
                String::from_utf8_lossy(wrong)
            );
        }
        assert!(key_matches(b"", b""));
        assert!(!key_matches(b"x", b""));
    }
}
