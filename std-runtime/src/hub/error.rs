//! Why a model could not be had from the hub, each message saying what to do.

use std::path::PathBuf;

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// A failure of [`super::resolve`].
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(
        "'{0}' is not a model name: write hf://USER/REPO, hf://USER/REPO:QUANT (e.g. \
         hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M) or hf://USER/REPO/FILE.gguf"
    )]
    BadName(String),
    #[error(
        "repository '{repo}' not found on {endpoint} (check the name; a private repository \
         is found only with a token: set HF_TOKEN or --hf-token)"
    )]
    RepoNotFound { repo: String, endpoint: String },
    #[error("{what} needs a token: set HF_TOKEN or pass --hf-token (the hub answered {status})")]
    NeedsToken { what: String, status: u16 },
    #[error(
        "the token was refused for {what} (the hub answered {status}): check HF_TOKEN / --hf-token"
    )]
    TokenRefused { what: String, status: u16 },
    #[error(
        "repository '{repo}' is gated: accept its conditions at {endpoint}/{repo} with your \
         account, then set HF_TOKEN or --hf-token"
    )]
    Gated { repo: String, endpoint: String },
    #[error("repository '{repo}' has no GGUF model file (its .gguf files: {})", list(.ggufs))]
    NoGguf { repo: String, ggufs: Vec<String> },
    #[error("repository '{repo}' has no GGUF file for the quant '{tag}'; available: {}", list(.tags))]
    TagNotFound {
        repo: String,
        tag: String,
        tags: Vec<String>,
    },
    #[error("repository '{repo}' has no file '{file}'; its .gguf files: {}", list(.ggufs))]
    FileNotFound {
        repo: String,
        file: String,
        ggufs: Vec<String>,
    },
    #[error("'{file}' in '{repo}' is a split model, but the repository lacks its shards {}", list(.missing))]
    MissingShards {
        repo: String,
        file: String,
        missing: Vec<String>,
    },
    #[error(
        "cannot reach {url}: {reason} (is the network up? HF_ENDPOINT sets another hub; \
         --offline or HF_HUB_OFFLINE=1 uses the models already in the cache)"
    )]
    Network { url: String, reason: String },
    #[error("{url}: the hub answered HTTP {status}{}", if .body.is_empty() { String::new() } else { format!(": {}", .body) })]
    Http {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: unexpected answer from the hub: {reason}")]
    BadListing { url: String, reason: String },
    #[error(
        "'{file}' downloaded from {url} does not match the hub's checksum (sha256 {expected}, got \
         {got}): the download was deleted; run again to download it anew"
    )]
    Checksum {
        file: String,
        url: String,
        expected: String,
        got: String,
    },
    #[error("'{file}' from {url}: {reason}")]
    Download {
        file: String,
        url: String,
        reason: String,
    },
    #[error(
        "{what} is not in the cache {} and the hub is not asked (--offline or HF_HUB_OFFLINE=1): \
         run once online to download it",
        .cache.display()
    )]
    NotCached { what: String, cache: PathBuf },
    #[error("cache {}: {source}", .path.display())]
    Cache {
        path: PathBuf,
        source: std::io::Error,
    },
}
