//! One file downloaded into the cache: into `DEST.part`, resumed with an HTTP range where a
//! `.part` is left (from a dropped connection, here or in an earlier run), hashed as it
//! arrives, checked against the hub's size and SHA-256, then renamed to `DEST`. A file
//! that fails its checksum is deleted, never left in the cache.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ring::digest::{Context, SHA256};

use super::cache::sha256_hex;
use super::http::{status_error, Client};
use super::progress::{Bar, Progress};
use super::HubError;

/// What to download and how.
pub struct Job<'a> {
    pub url: &'a str,
    /// Shown in the progress and in errors (the path in the repository).
    pub name: &'a str,
    pub repo: &'a str,
    pub endpoint: &'a str,
    pub dest: &'a Path,
    pub size: Option<u64>,
    pub sha256: Option<&'a str>,
    pub progress: Progress,
    pub retries: u32,
    pub retry_delay: Duration,
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The path of the partial download of `dest`.
pub fn part_path(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_os_string();
    s.push(".part");
    PathBuf::from(s)
}

/// The hash of the first `len` bytes already in `part`.
fn hash_prefix(part: &Path, len: u64) -> std::io::Result<Context> {
    let mut ctx = Context::new(&SHA256);
    let mut f = File::open(part)?.take(len);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(ctx);
        }
        ctx.update(&buf[..n]);
    }
}

/// The start of a `Content-Range: bytes START-END/TOTAL` header.
fn range_start(v: Option<&str>) -> Option<u64> {
    v?.trim()
        .strip_prefix("bytes ")?
        .split('-')
        .next()?
        .trim()
        .parse()
        .ok()
}

enum Attempt {
    /// The whole file is in the `.part`.
    Done,
    /// The connection failed; what was received stays in the `.part`.
    Retry(String),
}

/// Downloads the job's file to `job.dest` (see the module docs).
pub fn download(client: &Client, job: &Job) -> Result<(), HubError> {
    let part = part_path(job.dest);
    if let Some(dir) = part.parent() {
        std::fs::create_dir_all(dir).map_err(|source| HubError::Cache {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let cache_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| HubError::Cache { path, source }
    };
    let mut expected_sha = job.sha256.map(str::to_string);
    let mut hashed: Option<(Context, u64)> = None;
    let mut last = String::new();
    for attempt in 0..=job.retries {
        if attempt > 0 {
            std::thread::sleep(job.retry_delay * (1 << (attempt - 1).min(4)));
        }
        let mut have = std::fs::metadata(&part).map_or(0, |m| m.len());
        if job.size.is_some_and(|s| have > s) {
            std::fs::remove_file(&part).map_err(cache_err(&part))?;
            have = 0;
        }
        match fetch(client, job, &part, have, &mut expected_sha, &mut hashed)? {
            Attempt::Done => return finish(job, &part, expected_sha.as_deref(), hashed),
            Attempt::Retry(why) => last = why,
        }
    }
    Err(HubError::Download {
        file: job.name.to_string(),
        url: job.url.to_string(),
        reason: format!(
            "{last} ({} tries; what arrived is kept in {}: run again to resume)",
            job.retries + 1,
            part.display()
        ),
    })
}

/// One request: appends what arrives to `part`, which holds `have` bytes.
fn fetch(
    client: &Client,
    job: &Job,
    part: &Path,
    mut have: u64,
    expected_sha: &mut Option<String>,
    hashed: &mut Option<(Context, u64)>,
) -> Result<Attempt, HubError> {
    let cache_err = |source| HubError::Cache {
        path: part.to_path_buf(),
        source,
    };
    if have > 0 && job.size == Some(have) {
        return Ok(Attempt::Done);
    }
    let mut f = match client.get(job.url, have, false) {
        Ok(f) => f,
        Err(HubError::Network { reason, .. }) => return Ok(Attempt::Retry(reason)),
        Err(e) => return Err(e),
    };
    if expected_sha.is_none() {
        *expected_sha = f.etag.as_deref().and_then(sha256_hex);
    }
    let status = f.status();
    let mut file = match status {
        206 if have > 0 && range_start(f.header("content-range")) == Some(have) => {
            OpenOptions::new()
                .append(true)
                .open(part)
                .map_err(cache_err)?
        }
        200 | 206 => {
            // the server sent the file from its start (or an unexpected range)
            have = 0;
            *hashed = None;
            if status == 206 && range_start(f.header("content-range")) != Some(0) {
                return Ok(Attempt::Retry(format!(
                    "the server answered a range request with {:?}",
                    f.header("content-range")
                )));
            }
            File::create(part).map_err(cache_err)?
        }
        // the range starts at the end: the `.part` is whole (the checks that follow say)
        416 if have > 0 => return Ok(Attempt::Done),
        500..=599 => return Ok(Attempt::Retry(format!("the server answered {status}"))),
        _ => {
            let body = f
                .response
                .body_mut()
                .with_config()
                .limit(1 << 16)
                .read_to_string()
                .unwrap_or_default();
            return Err(status_error(
                &f,
                &body,
                job.repo,
                &format!("{} in {}", job.name, job.repo),
                job.endpoint,
                client.has_token(),
            ));
        }
    };
    let (mut ctx, at) = match hashed.take() {
        Some((ctx, at)) if at == have => (ctx, at),
        _ => (hash_prefix(part, have).map_err(cache_err)?, have),
    };
    debug_assert_eq!(at, have);
    let content_length = f
        .header("content-length")
        .and_then(|s| s.parse::<u64>().ok());
    let total = job
        .size
        .or(content_length.map(|n| have + n))
        .or(f.linked_size);
    let mut bar = Bar::new(job.name, total, have, job.progress);
    let mut reader = f.response.into_body().into_reader();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                file.write_all(&buf[..n]).map_err(cache_err)?;
                ctx.update(&buf[..n]);
                have += n as u64;
                bar.update(have);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                file.flush().map_err(cache_err)?;
                bar.finish(have, false);
                *hashed = Some((ctx, have));
                let of = total.map_or(String::new(), |t| format!(" of {t}"));
                return Ok(Attempt::Retry(format!(
                    "connection lost after {have}{of} bytes ({e})"
                )));
            }
        }
    }
    file.flush().map_err(cache_err)?;
    bar.finish(have, true);
    *hashed = Some((ctx, have));
    Ok(Attempt::Done)
}

/// Checks the whole `.part` (size, SHA-256) and renames it to the destination.
fn finish(
    job: &Job,
    part: &Path,
    expected_sha: Option<&str>,
    hashed: Option<(Context, u64)>,
) -> Result<(), HubError> {
    let cache_err = |source| HubError::Cache {
        path: part.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(part).map_err(cache_err)?.len();
    if let Some(size) = job.size.filter(|&s| s != len) {
        std::fs::remove_file(part).map_err(cache_err)?;
        return Err(HubError::Download {
            file: job.name.to_string(),
            url: job.url.to_string(),
            reason: format!(
                "{len} bytes arrived where the hub lists {size}: the download was deleted; run again"
            ),
        });
    }
    if let Some(want) = expected_sha {
        let ctx = match hashed {
            Some((ctx, at)) if at == len => ctx,
            _ => hash_prefix(part, len).map_err(cache_err)?,
        };
        let got = hex(ctx.finish().as_ref());
        if got != want {
            std::fs::remove_file(part).map_err(cache_err)?;
            return Err(HubError::Checksum {
                file: job.name.to_string(),
                url: job.url.to_string(),
                expected: want.to_string(),
                got,
            });
        }
    }
    std::fs::rename(part, job.dest).map_err(|source| HubError::Cache {
        path: job.dest.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_start() {
        assert_eq!(range_start(Some("bytes 100-199/200")), Some(100));
        assert_eq!(range_start(Some("bytes */200")), None);
        assert_eq!(range_start(None), None);
    }
}
