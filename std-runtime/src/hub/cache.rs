//! The download cache, in huggingface_hub's layout (so the tools that read one read the
//! other): `<root>/models--USER--REPO/` holds `refs/main` (the commit the files came from),
//! `blobs/<sha256>` (the content, named by its hash; `<sha256>.part` while it downloads),
//! and `snapshots/<commit>/<path in repo>` (links to the blobs, by the repository's file
//! names, so a split model's shards sit side by side). superinfer adds
//! `superinfer-listing.json`: the repository's file list at that commit, so that a model
//! already downloaded is found again without asking the hub.

use std::path::{Path, PathBuf};

use super::select::RepoFile;
use super::HubError;

/// The repository's files at one commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    pub commit: String,
    pub files: Vec<RepoFile>,
}

fn is_hex(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|c| c.is_ascii_hexdigit())
}

/// A SHA-256 as the hub writes it (64 hex digits), lower case.
pub fn sha256_hex(s: &str) -> Option<String> {
    let s = s.strip_prefix("sha256:").unwrap_or(s);
    is_hex(s, 64).then(|| s.to_ascii_lowercase())
}

/// Whether `path` (from the hub) is a safe relative path: no `..`, no absolute or empty
/// parts, no backslashes.
pub fn safe_repo_path(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\\')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains(':'))
}

impl Listing {
    /// The hub's answer to `GET /api/models/USER/REPO?blobs=true`: `sha` (the commit) and
    /// `siblings` (`rfilename`, `size`, `lfs.sha256`); also accepts the tree listing
    /// (`/api/models/USER/REPO/tree/REV`: an array of `path`, `size`, `lfs.oid`), whose
    /// commit is then `fallback_commit`.
    pub fn from_api(body: &str, fallback_commit: &str) -> Result<Listing, String> {
        let v: serde_json::Value =
            serde_json::from_str(body).map_err(|e| format!("not JSON ({e})"))?;
        let (commit, items) = match &v {
            serde_json::Value::Array(items) => (fallback_commit.to_string(), items),
            v => {
                let items = v
                    .get("siblings")
                    .and_then(|s| s.as_array())
                    .ok_or("no 'siblings' list")?;
                let commit = v
                    .get("sha")
                    .and_then(|s| s.as_str())
                    .unwrap_or(fallback_commit);
                (commit.to_string(), items)
            }
        };
        if !safe_repo_path(&commit) || commit.contains('/') {
            return Err(format!("bad commit '{commit}'"));
        }
        let mut files = Vec::new();
        for it in items {
            if it
                .get("type")
                .and_then(|t| t.as_str())
                .is_some_and(|t| t != "file")
            {
                continue;
            }
            let Some(path) = it
                .get("rfilename")
                .or_else(|| it.get("path"))
                .and_then(|p| p.as_str())
            else {
                continue;
            };
            if !safe_repo_path(path) {
                continue;
            }
            let lfs = it.get("lfs");
            let sha256 = lfs
                .and_then(|l| l.get("sha256").or_else(|| l.get("oid")))
                .and_then(|s| s.as_str())
                .and_then(sha256_hex);
            let size = lfs
                .and_then(|l| l.get("size"))
                .or_else(|| it.get("size"))
                .and_then(|s| s.as_u64());
            files.push(RepoFile {
                path: path.to_string(),
                size,
                sha256,
            });
        }
        Ok(Listing { commit, files })
    }

    fn to_json(&self) -> String {
        let files: Vec<serde_json::Value> = self
            .files
            .iter()
            .map(|f| serde_json::json!({"path": f.path, "size": f.size, "sha256": f.sha256}))
            .collect();
        serde_json::json!({"commit": self.commit, "files": files}).to_string()
    }

    fn from_json(s: &str) -> Option<Listing> {
        let v: serde_json::Value = serde_json::from_str(s).ok()?;
        let commit = v.get("commit")?.as_str()?.to_string();
        let files = v
            .get("files")?
            .as_array()?
            .iter()
            .filter_map(|f| {
                let path = f.get("path")?.as_str()?;
                safe_repo_path(path).then(|| RepoFile {
                    path: path.to_string(),
                    size: f.get("size").and_then(|s| s.as_u64()),
                    sha256: f
                        .get("sha256")
                        .and_then(|s| s.as_str())
                        .and_then(sha256_hex),
                })
            })
            .collect();
        safe_repo_path(&commit).then_some(Listing { commit, files })
    }
}

/// One repository's folder in the cache.
pub struct RepoCache {
    pub dir: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> HubError + '_ {
    move |source| HubError::Cache {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename (never half a file).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), HubError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

impl RepoCache {
    pub fn new(root: &Path, repo: &str) -> RepoCache {
        RepoCache {
            dir: root.join(format!("models--{}", repo.replace('/', "--"))),
        }
    }

    pub fn snapshot(&self, commit: &str, path: &str) -> PathBuf {
        let mut p = self.dir.join("snapshots").join(commit);
        p.extend(path.split('/'));
        p
    }

    pub fn blob(&self, sha256: &str) -> PathBuf {
        self.dir.join("blobs").join(sha256)
    }

    /// Whether the file is in the snapshot whole (its listed size, when listed).
    pub fn has(&self, commit: &str, f: &RepoFile) -> bool {
        std::fs::metadata(self.snapshot(commit, &f.path))
            .is_ok_and(|m| m.is_file() && f.size.is_none_or(|s| m.len() == s))
    }

    /// The commit `refs/main` names.
    pub fn read_ref(&self) -> Option<String> {
        let s = std::fs::read_to_string(self.dir.join("refs").join("main")).ok()?;
        let s = s.trim();
        (safe_repo_path(s) && !s.contains('/')).then(|| s.to_string())
    }

    pub fn write_ref(&self, commit: &str) -> Result<(), HubError> {
        write_atomic(&self.dir.join("refs").join("main"), commit.as_bytes())
    }

    fn listing_path(&self) -> PathBuf {
        self.dir.join("superinfer-listing.json")
    }

    pub fn read_listing(&self) -> Option<Listing> {
        Listing::from_json(&std::fs::read_to_string(self.listing_path()).ok()?)
    }

    pub fn write_listing(&self, l: &Listing) -> Result<(), HubError> {
        write_atomic(&self.listing_path(), l.to_json().as_bytes())?;
        self.write_ref(&l.commit)
    }

    /// The files of the snapshot of `commit` on disk (for a cache another tool filled,
    /// without superinfer's listing).
    pub fn scan(&self, commit: &str) -> Vec<RepoFile> {
        let root = self.dir.join("snapshots").join(commit);
        let mut out = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.is_file() {
                    let rel = p.strip_prefix(&root).ok().and_then(|r| {
                        let parts: Option<Vec<&str>> =
                            r.components().map(|c| c.as_os_str().to_str()).collect();
                        parts.map(|p| p.join("/"))
                    });
                    if let Some(path) = rel.filter(|r| !r.ends_with(".part")) {
                        out.push(RepoFile {
                            path,
                            size: None,
                            sha256: None,
                        });
                    }
                }
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// Puts the downloaded blob at its snapshot path: a relative symlink where the system
    /// has them, else a hard link, else a copy.
    pub fn link(&self, blob: &Path, commit: &str, path: &str) -> Result<PathBuf, HubError> {
        let dest = self.snapshot(commit, path);
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        let _ = std::fs::remove_file(&dest);
        #[cfg(unix)]
        {
            let ups = 2 + path.split('/').count() - 1;
            let mut target = PathBuf::new();
            for _ in 0..ups {
                target.push("..");
            }
            target.push("blobs");
            target.push(blob.file_name().unwrap_or_default());
            if std::os::unix::fs::symlink(&target, &dest).is_ok() {
                return Ok(dest);
            }
        }
        if std::fs::hard_link(blob, &dest).is_err() {
            std::fs::copy(blob, &dest).map_err(io(&dest))?;
        }
        Ok(dest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_listing_and_its_cache_copy() {
        let sha = "a".repeat(64);
        let body = format!(
            r#"{{"id":"u/r","sha":"{c}","siblings":[{{"rfilename":"README.md","size":10}},
            {{"rfilename":"m-Q4_K_M.gguf","size":99,"lfs":{{"sha256":"{sha}","size":99}}}},
            {{"rfilename":"../evil.gguf"}}]}}"#,
            c = "0123456789abcdef0123456789abcdef01234567"
        );
        let l = Listing::from_api(&body, "main").unwrap();
        assert_eq!(l.commit, "0123456789abcdef0123456789abcdef01234567");
        assert_eq!(l.files.len(), 2);
        assert_eq!(l.files[1].sha256.as_deref(), Some(sha.as_str()));
        assert_eq!(l.files[1].size, Some(99));
        assert_eq!(Listing::from_json(&l.to_json()), Some(l));
        let tree = format!(
            r#"[{{"type":"directory","path":"d"}},{{"type":"file","path":"d/x.gguf","size":5,"lfs":{{"oid":"{sha}","size":5}}}}]"#
        );
        let t = Listing::from_api(&tree, "main").unwrap();
        assert_eq!((t.commit.as_str(), t.files.len()), ("main", 1));
        assert!(Listing::from_api("{}", "main").is_err());
    }
}
