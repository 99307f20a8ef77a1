//! Models by name from a Hugging Face-style hub, as `llama-cli -hf USER/REPO[:QUANT]` and
//! ollama fetch them: `hf://USER/REPO[:QUANT]` (or `hf://USER/REPO/FILE.gguf`) is resolved
//! to a local file, downloaded once into a cache and found there afterwards.
//!
//! - **Which file**: the hub's listing, `GET {endpoint}/api/models/USER/REPO?blobs=true`
//!   (the commit, every file with its size and LFS SHA-256); the quant tag picks the GGUF
//!   by llama.cpp's rules ([`select`]): case-insensitive, no tag prefers `Q4_K_M`, then
//!   `Q8_0`, then the first; a split model brings all its shards.
//! - **Download**: `{endpoint}/USER/REPO/resolve/COMMIT/PATH`, redirects followed (the token
//!   goes to the hub's host only, never to the CDN it redirects to), resumed with HTTP
//!   ranges from a `.part` file, a progress bar on stderr, size and SHA-256 checked.
//! - **Cache**: [`cache`] (huggingface_hub's layout) under `$SUPERINFER_CACHE/hub`, default
//!   `~/.cache/superinfer/hub`. A model whose files are all there is used without asking the
//!   hub at all; `offline` (`HF_HUB_OFFLINE=1`) never asks it.
//! - **Settings**: `HF_ENDPOINT` (default `https://huggingface.co`), `HF_TOKEN` (sent as
//!   `Authorization: Bearer`), read by [`HubOptions::from_env`].

pub mod cache;
mod download;
mod error;
mod http;
mod progress;
pub mod select;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::HubError;
pub use progress::Progress;

use cache::{Listing, RepoCache};
use select::RepoFile;

/// The hub llama.cpp and huggingface_hub use when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// A model named on a hub: a repository and a quant tag or a file in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelRef {
    /// `USER/REPO`.
    pub repo: String,
    /// The quant tag (`Q4_K_M`), matched case-insensitively.
    pub tag: Option<String>,
    /// A file of the repository, by its path in it (wins over the tag).
    pub file: Option<String>,
}

/// Whether `s` names a model on the hub (`hf://…` or ollama's `hf.co/…`) rather than a path.
pub fn is_hub_name(s: &str) -> bool {
    s.starts_with("hf://") || s.starts_with("hf.co/") || s.starts_with("huggingface.co/")
}

fn valid_repo(repo: &str) -> bool {
    let mut parts = repo.split('/');
    let ok = |p: Option<&str>| {
        p.is_some_and(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
                && !p.starts_with(['.', '-'])
                && !p.ends_with(['.', '-'])
                && !p.contains("..")
        })
    };
    ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
}

impl ModelRef {
    /// `USER/REPO[:TAG]` (as `--hf-repo` and llama.cpp's `-hf` take it) and an optional file
    /// (`--hf-file`).
    pub fn new(repo_with_tag: &str, file: Option<&str>) -> Result<ModelRef, HubError> {
        let (repo, tag) = match repo_with_tag.split_once(':') {
            Some((r, t)) => (r, Some(t)),
            None => (repo_with_tag, None),
        };
        let bad = || HubError::BadName(repo_with_tag.to_string());
        if !valid_repo(repo) || tag.is_some_and(|t| t.is_empty() || t.contains(['/', ':'])) {
            return Err(bad());
        }
        if file.is_some_and(|f| !cache::safe_repo_path(f)) {
            return Err(HubError::BadName(file.unwrap_or_default().to_string()));
        }
        Ok(ModelRef {
            repo: repo.to_string(),
            tag: tag.map(str::to_string),
            file: file.map(str::to_string),
        })
    }

    /// `hf://USER/REPO[:TAG]` or `hf://USER/REPO/PATH/FILE.gguf` (also `hf.co/…`).
    pub fn parse(name: &str) -> Result<ModelRef, HubError> {
        let rest = ["hf://", "hf.co/", "huggingface.co/"]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .ok_or_else(|| HubError::BadName(name.to_string()))?;
        let mut parts = rest.splitn(3, '/');
        let (user, repo, file) = (parts.next(), parts.next(), parts.next());
        match (user, repo, file) {
            (Some(u), Some(r), Some(f)) if !r.contains(':') => {
                ModelRef::new(&format!("{u}/{r}"), Some(f))
            }
            (Some(u), Some(r), None) => ModelRef::new(&format!("{u}/{r}"), None),
            _ => Err(HubError::BadName(name.to_string())),
        }
        .map_err(|_| HubError::BadName(name.to_string()))
    }
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "hf://{}", self.repo)?;
        match (&self.file, &self.tag) {
            (Some(file), _) => write!(f, "/{file}"),
            (None, Some(tag)) => write!(f, ":{tag}"),
            (None, None) => Ok(()),
        }
    }
}

/// Where and how models are fetched.
#[derive(Clone, Debug)]
pub struct HubOptions {
    /// The hub's base URL (no trailing slash needed).
    pub endpoint: String,
    /// Sent as `Authorization: Bearer` to the hub's host.
    pub token: Option<String>,
    /// The cache's root (repositories are `models--USER--REPO` in it).
    pub cache_dir: PathBuf,
    /// Use the cache only.
    pub offline: bool,
    pub progress: Progress,
    /// Further tries of a download whose connection fails (each resumes it).
    pub retries: u32,
    /// Wait before the first retry (doubling after).
    pub retry_delay: Duration,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.is_empty())
}

impl HubOptions {
    /// `HF_ENDPOINT`, `HF_TOKEN`, `HF_HUB_OFFLINE` (1, true, yes, on) and the cache at
    /// `$SUPERINFER_CACHE/hub` (default `~/.cache/superinfer/hub`).
    pub fn from_env() -> HubOptions {
        let root = env("SUPERINFER_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let home = env("HOME")
                    .or_else(|| env("USERPROFILE"))
                    .unwrap_or_default();
                Path::new(&home).join(".cache").join("superinfer")
            });
        let offline = env("HF_HUB_OFFLINE").is_some_and(|v| {
            matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
        });
        HubOptions {
            endpoint: env("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_string()),
            token: env("HF_TOKEN"),
            cache_dir: root.join("hub"),
            offline,
            progress: Progress::Auto,
            retries: 3,
            retry_delay: Duration::from_secs(2),
        }
    }

    fn endpoint(&self) -> &str {
        self.endpoint.trim_end_matches('/')
    }
}

/// `s` with each byte outside `A-Za-z0-9-._~/` percent-encoded.
fn encode_path(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The local path of the model `m` names (a split model: its first shard, the others
/// beside it), downloading what the cache lacks (see the module docs).
pub fn resolve(m: &ModelRef, o: &HubOptions) -> Result<PathBuf, HubError> {
    let rc = RepoCache::new(&o.cache_dir, &m.repo);
    // 1. the cache: the listing saved with the last download, else (a cache another tool
    //    filled) the files of the snapshot refs/main names
    let cached = rc.read_listing().or_else(|| {
        let commit = rc.read_ref()?;
        let files = rc.scan(&commit);
        (!files.is_empty()).then_some(Listing { commit, files })
    });
    if let Some(l) = &cached {
        match select::pick(&m.repo, &l.files, m.tag.as_deref(), m.file.as_deref()) {
            Ok(files) if files.iter().all(|f| rc.has(&l.commit, f)) => {
                return Ok(rc.snapshot(&l.commit, &files[0].path));
            }
            Err(e) if o.offline => return Err(e),
            _ => {}
        }
    }
    if o.offline {
        return Err(HubError::NotCached {
            what: m.to_string(),
            cache: rc.dir,
        });
    }
    // 2. the hub
    let client = http::Client::new(o.endpoint(), o.token.as_deref());
    let url = format!("{}/api/models/{}?blobs=true", o.endpoint(), m.repo);
    let (f, body) = client.get_text(&url)?;
    if !(200..300).contains(&f.status()) {
        return Err(http::status_error(
            &f,
            &body,
            &m.repo,
            &m.repo,
            o.endpoint(),
            client.has_token(),
        ));
    }
    let listing =
        Listing::from_api(&body, "main").map_err(|reason| HubError::BadListing { url, reason })?;
    let files = select::pick(&m.repo, &listing.files, m.tag.as_deref(), m.file.as_deref())?;
    rc.write_listing(&listing)?;
    for f in &files {
        if !rc.has(&listing.commit, f) {
            fetch_file(&client, &rc, &listing.commit, f, m, o)?;
        }
    }
    Ok(rc.snapshot(&listing.commit, &files[0].path))
}

/// Downloads one file of the repository into the cache.
fn fetch_file(
    client: &http::Client,
    rc: &RepoCache,
    commit: &str,
    f: &RepoFile,
    m: &ModelRef,
    o: &HubOptions,
) -> Result<(), HubError> {
    let url = format!(
        "{}/{}/resolve/{}/{}",
        o.endpoint(),
        m.repo,
        commit,
        encode_path(&f.path)
    );
    // content named by its hash lands in blobs/ and is linked from the snapshot; without
    // a hash it lands in the snapshot itself
    let dest = match &f.sha256 {
        Some(sha) => rc.blob(sha),
        None => rc.snapshot(commit, &f.path),
    };
    let job = download::Job {
        url: &url,
        name: &f.path,
        repo: &m.repo,
        endpoint: o.endpoint(),
        dest: &dest,
        size: f.size,
        sha256: f.sha256.as_deref(),
        progress: o.progress,
        retries: o.retries,
        retry_delay: o.retry_delay,
    };
    let whole = std::fs::metadata(&dest).is_ok_and(|md| f.size.is_none_or(|s| md.len() == s));
    if !whole {
        download::download(client, &job)?;
    }
    if f.sha256.is_some() {
        rc.link(&dest, commit, &f.path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let m = ModelRef::parse("hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF:q4_k_m").unwrap();
        assert_eq!(m.repo, "Qwen/Qwen2.5-0.5B-Instruct-GGUF");
        assert_eq!(m.tag.as_deref(), Some("q4_k_m"));
        let m = ModelRef::parse("hf.co/u/r/sub/m-Q8_0.gguf").unwrap();
        assert_eq!(
            (m.repo.as_str(), m.file.as_deref()),
            ("u/r", Some("sub/m-Q8_0.gguf"))
        );
        assert_eq!(m.to_string(), "hf://u/r/sub/m-Q8_0.gguf");
        for bad in [
            "hf://u",
            "hf://u/r:",
            "hf://../r",
            "hf://u/r/../x.gguf",
            "u/r",
            "hf://u/r:a:b",
        ] {
            assert!(ModelRef::parse(bad).is_err(), "{bad}");
        }
        assert!(ModelRef::new("u/r:Q4_0", Some("a.gguf")).is_ok());
        assert!(is_hub_name("hf://u/r") && !is_hub_name("./hf/m.gguf"));
        assert_eq!(encode_path("a b/c+d.gguf"), "a%20b/c%2Bd.gguf");
    }
}
