//! HTTP for the hub: ureq (blocking, rustls), redirects followed here rather than by ureq so
//! that the first answer's headers (`X-Linked-Etag`, `X-Linked-Size`: the hub's word on an
//! LFS file, given on its redirect to the CDN) are kept, and the token is sent only to the
//! hub's own host, never to the host a redirect names.

use std::time::Duration;

use ureq::http::Response;
use ureq::Body;

use super::HubError;

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 10;

/// `scheme://host[:port]` of `url`, lower case (the part a token is bound to).
pub fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    format!("{}://{}", scheme, authority).to_ascii_lowercase()
}

/// The URL a `Location` header names, relative to the request's `base`.
pub fn join(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    if let Some(rest) = location.strip_prefix("//") {
        let scheme = base.split_once("://").map_or("https", |(s, _)| s);
        return format!("{scheme}://{rest}");
    }
    let origin = origin(base);
    if location.starts_with('/') {
        return format!("{origin}{location}");
    }
    let path = &base[origin.len().min(base.len())..];
    let path = path.split(['?', '#']).next().unwrap_or("");
    let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
    format!("{origin}{dir}{location}")
}

/// An answer, after redirects.
pub struct Fetched {
    pub response: Response<Body>,
    /// The URL that gave `response`.
    pub url: String,
    /// `X-Linked-Etag` or `ETag` of the first answer that had one, quotes and `W/` removed.
    pub etag: Option<String>,
    /// `X-Linked-Size` of the first answer that had it.
    pub linked_size: Option<u64>,
}

impl Fetched {
    pub fn status(&self) -> u16 {
        self.response.status().as_u16()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.response, name)
    }
}

fn header<'a>(r: &'a Response<Body>, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

fn unquote(etag: &str) -> String {
    etag.trim()
        .trim_start_matches("W/")
        .trim_matches('"')
        .to_string()
}

/// The client: one agent, the token and the hub's origin it belongs to.
pub struct Client {
    agent: ureq::Agent,
    token: Option<String>,
    token_origin: String,
}

impl Client {
    pub fn new(endpoint: &str, token: Option<&str>) -> Client {
        let config = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(concat!("superinfer/", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            // a stalled connection ends the attempt (the download then resumes)
            .timeout_per_read(Some(Duration::from_secs(60)))
            .build();
        Client {
            agent: config.new_agent(),
            token: token.filter(|t| !t.is_empty()).map(str::to_string),
            token_origin: origin(endpoint),
        }
    }

    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// GET `url` (HEAD when `head`), from byte `from` on when it is not 0, following
    /// redirects. Any status comes back as an answer; only a failed connection is an error.
    pub fn get(&self, url: &str, from: u64, head: bool) -> Result<Fetched, HubError> {
        let mut url = url.to_string();
        let (mut etag, mut linked_size) = (None, None);
        for _ in 0..=MAX_REDIRECTS {
            let mut req = if head {
                self.agent.head(&url)
            } else {
                self.agent.get(&url)
            };
            if from > 0 {
                req = req.header("Range", format!("bytes={from}-"));
            }
            if let Some(t) = &self.token {
                if origin(&url) == self.token_origin {
                    req = req.header("Authorization", format!("Bearer {t}"));
                }
            }
            let response = req.call().map_err(|e| network(&url, e))?;
            if etag.is_none() {
                etag = header(&response, "x-linked-etag")
                    .or_else(|| header(&response, "etag"))
                    .map(unquote);
            }
            if linked_size.is_none() {
                linked_size = header(&response, "x-linked-size").and_then(|s| s.parse().ok());
            }
            let status = response.status().as_u16();
            let location = header(&response, "location");
            match (status, location) {
                (301 | 302 | 303 | 307 | 308, Some(loc)) => url = join(&url, loc),
                _ => {
                    return Ok(Fetched {
                        response,
                        url,
                        etag,
                        linked_size,
                    })
                }
            }
        }
        Err(HubError::Network {
            url,
            reason: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    /// GET `url` and its body as text (at most 64 MiB), any status.
    pub fn get_text(&self, url: &str) -> Result<(Fetched, String), HubError> {
        let mut f = self.get(url, 0, false)?;
        let body = f
            .response
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| network(url, e))?;
        Ok((f, body))
    }
}

/// A failed connection, said plainly.
pub fn network(url: &str, e: ureq::Error) -> HubError {
    let reason = match &e {
        ureq::Error::HostNotFound => "host not found".to_string(),
        ureq::Error::ConnectionFailed => "connection failed".to_string(),
        ureq::Error::Timeout(t) => format!("timed out ({t})"),
        ureq::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    };
    HubError::Network {
        url: url.to_string(),
        reason,
    }
}

/// The error for a non-success answer about `what` (a repository or one of its files):
/// the hub's `X-Error-Code` (`RepoNotFound`, `GatedRepo`, `EntryNotFound`) first, then the
/// status.
pub fn status_error(
    f: &Fetched,
    body: &str,
    repo: &str,
    what: &str,
    endpoint: &str,
    has_token: bool,
) -> HubError {
    let status = f.status();
    let code = f.header("x-error-code").unwrap_or("");
    let message = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| body.chars().take(200).collect());
    let endpoint = endpoint.trim_end_matches('/').to_string();
    match (code, status) {
        ("GatedRepo", _) => HubError::Gated {
            repo: repo.to_string(),
            endpoint,
        },
        ("RepoNotFound", _) | (_, 404) if what == repo => HubError::RepoNotFound {
            repo: repo.to_string(),
            endpoint,
        },
        (_, 401 | 403) if has_token => HubError::TokenRefused {
            what: what.to_string(),
            status,
        },
        (_, 401 | 403) => HubError::NeedsToken {
            what: what.to_string(),
            status,
        },
        _ => HubError::Http {
            url: f.url.clone(),
            status,
            body: message,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_joins() {
        assert_eq!(origin("https://HF.co/api/x?y"), "https://hf.co");
        assert_eq!(origin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        let b = "https://hf.co/u/r/resolve/main/m.gguf?x=1";
        assert_eq!(join(b, "https://cdn.x/a"), "https://cdn.x/a");
        assert_eq!(join(b, "//cdn.x/a"), "https://cdn.x/a");
        assert_eq!(join(b, "/api/r"), "https://hf.co/api/r");
        assert_eq!(join(b, "n.gguf"), "https://hf.co/u/r/resolve/main/n.gguf");
    }
}
