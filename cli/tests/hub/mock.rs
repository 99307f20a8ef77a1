//! A stand-in for the Hugging Face hub, in-process on 127.0.0.1 (no hub is reachable in CI):
//! two listeners, the hub and a "CDN" on another port, with the hub's URL layout and headers.
//! `GET /api/models/USER/REPO` lists the files (`sha`, `siblings` with `lfs.sha256`);
//! `GET /USER/REPO/resolve/COMMIT/PATH` answers 302 to the CDN with `X-Linked-Etag` and
//! `X-Linked-Size`; the CDN serves the bytes with `ETag` and `Range` (206). Unknown repos
//! answer 404 with `X-Error-Code: RepoNotFound`, private ones 401 without the token. A
//! file can be set to drop its connection half-way once. Every request is logged.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

pub fn sha256(b: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, b)
        .as_ref()
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

#[derive(Default)]
pub struct Repo {
    pub commit: String,
    pub files: Vec<(String, Vec<u8>)>,
    /// Answers 401 without `Authorization: Bearer <TOKEN>`.
    pub private: bool,
    /// Paths whose listed sha256 is wrong.
    pub wrong_sha: HashSet<String>,
}

#[derive(Clone, Debug)]
pub struct Req {
    pub cdn: bool,
    pub method: String,
    pub path: String,
    pub range: Option<String>,
    pub auth: Option<String>,
}

pub const TOKEN: &str = "hf_test_token";

#[derive(Default)]
pub struct State {
    pub repos: Mutex<HashMap<String, Repo>>,
    /// CDN paths that send half their body and close, once.
    pub drop_once: Mutex<HashSet<String>>,
    pub log: Mutex<Vec<Req>>,
}

pub struct Hub {
    pub url: String,
    pub state: Arc<State>,
}

impl Hub {
    pub fn start() -> Hub {
        let state = Arc::new(State::default());
        let hub = TcpListener::bind("127.0.0.1:0").unwrap();
        let cdn = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}", hub.local_addr().unwrap().port());
        let cdn_url = format!("http://127.0.0.1:{}", cdn.local_addr().unwrap().port());
        for (listener, is_cdn) in [(hub, false), (cdn, true)] {
            let (state, cdn_url) = (state.clone(), cdn_url.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming().flatten() {
                    let (state, cdn_url) = (state.clone(), cdn_url.clone());
                    std::thread::spawn(move || {
                        let _ = serve(conn, is_cdn, &state, &cdn_url);
                    });
                }
            });
        }
        Hub { url, state }
    }

    pub fn add(&self, name: &str, repo: Repo) {
        self.state
            .repos
            .lock()
            .unwrap()
            .insert(name.to_string(), repo);
    }

    pub fn log(&self) -> Vec<Req> {
        self.state.log.lock().unwrap().clone()
    }
}

fn respond(
    c: &mut TcpStream,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut h = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        h += &format!("{k}: {v}\r\n");
    }
    h += "\r\n";
    c.write_all(h.as_bytes())?;
    c.write_all(body)
}

fn error(c: &mut TcpStream, status: &str, code: &str, msg: &str) -> std::io::Result<()> {
    let body = format!("{{\"error\":\"{msg}\"}}");
    respond(
        c,
        status,
        &[
            ("Content-Type", "application/json".into()),
            ("X-Error-Code", code.into()),
        ],
        body.as_bytes(),
    )
}

fn serve(mut c: TcpStream, is_cdn: bool, state: &State, cdn_url: &str) -> std::io::Result<()> {
    let mut r = BufReader::new(c.try_clone()?);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let path = target.split('?').next().unwrap_or("").to_string();
    let req = Req {
        cdn: is_cdn,
        method,
        path: path.clone(),
        range: headers.get("range").cloned(),
        auth: headers.get("authorization").cloned(),
    };
    state.log.lock().unwrap().push(req.clone());
    let repos = state.repos.lock().unwrap();
    let authorized = req.auth.as_deref() == Some(format!("Bearer {TOKEN}").as_str());
    if is_cdn {
        // /cdn/USER--REPO/PATH
        let Some(rest) = path.strip_prefix("/cdn/") else {
            return respond(&mut c, "404 Not Found", &[], b"");
        };
        let (name, file) = rest.split_once('/').unwrap_or((rest, ""));
        let Some(bytes) = repos
            .get(&name.replace("--", "/"))
            .and_then(|r| r.files.iter().find(|(p, _)| p == file))
            .map(|(_, b)| b.clone())
        else {
            return respond(&mut c, "404 Not Found", &[], b"");
        };
        drop(repos);
        let etag = ("ETag", format!("\"{}\"", sha256(&bytes)));
        let from: usize = req
            .range
            .as_deref()
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.strip_suffix('-'))
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        if from >= bytes.len() && from > 0 {
            let cr = ("Content-Range", format!("bytes */{}", bytes.len()));
            return respond(&mut c, "416 Range Not Satisfiable", &[cr], b"");
        }
        let body = &bytes[from..];
        let (status, mut hs) = if req.range.is_some() {
            let cr = format!("bytes {from}-{}/{}", bytes.len() - 1, bytes.len());
            ("206 Partial Content", vec![("Content-Range", cr)])
        } else {
            ("200 OK", vec![])
        };
        hs.push(etag);
        hs.push(("Accept-Ranges", "bytes".into()));
        if state.drop_once.lock().unwrap().remove(&path) {
            // the whole length announced, half of it sent, then the connection closes
            let h = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            c.write_all(h.as_bytes())?;
            c.write_all(&body[..body.len() / 2])?;
            c.flush()?;
            return c.shutdown(std::net::Shutdown::Both);
        }
        return respond(&mut c, status, &hs, body);
    }
    // the hub: /api/models/USER/REPO, /USER/REPO/resolve/REV/PATH
    let (name, file) = match path.strip_prefix("/api/models/") {
        Some(rest) => (rest.to_string(), None),
        None => {
            let mut it = path.trim_start_matches('/').splitn(5, '/');
            let (u, r, kw, _rev, f) = (it.next(), it.next(), it.next(), it.next(), it.next());
            match (u, r, kw, f) {
                (Some(u), Some(r), Some("resolve"), Some(f)) => (format!("{u}/{r}"), Some(f)),
                _ => return error(&mut c, "404 Not Found", "", "no such route"),
            }
        }
    };
    let Some(repo) = repos.get(&name) else {
        return error(
            &mut c,
            "404 Not Found",
            "RepoNotFound",
            "Repository not found",
        );
    };
    if repo.private && !authorized {
        let status = if req.auth.is_some() {
            "403 Forbidden"
        } else {
            "401 Unauthorized"
        };
        return error(
            &mut c,
            status,
            "",
            "Invalid credentials in Authorization header",
        );
    }
    match file {
        None => {
            let siblings: Vec<String> = repo
                .files
                .iter()
                .map(|(p, b)| {
                    let sha = if repo.wrong_sha.contains(p) {
                        "0".repeat(64)
                    } else {
                        sha256(b)
                    };
                    format!(
                        r#"{{"rfilename":"{p}","size":{n},"blobId":"x","lfs":{{"sha256":"{sha}","size":{n},"pointerSize":134}}}}"#,
                        n = b.len()
                    )
                })
                .collect();
            let body = format!(
                r#"{{"id":"{name}","sha":"{}","siblings":[{}]}}"#,
                repo.commit,
                siblings.join(",")
            );
            respond(
                &mut c,
                "200 OK",
                &[("Content-Type", "application/json".into())],
                body.as_bytes(),
            )
        }
        Some(f) => {
            let Some((_, b)) = repo.files.iter().find(|(p, _)| p == f) else {
                return error(&mut c, "404 Not Found", "EntryNotFound", "Entry not found");
            };
            let hs = [
                (
                    "Location",
                    format!("{cdn_url}/cdn/{}/{f}?sig=abc", name.replace('/', "--")),
                ),
                ("X-Linked-Etag", format!("\"{}\"", sha256(b))),
                ("X-Linked-Size", b.len().to_string()),
                ("X-Repo-Commit", repo.commit.clone()),
                (
                    "ETag",
                    "\"0123456789abcdef0123456789abcdef01234567\"".into(),
                ),
            ];
            respond(&mut c, "302 Found", &hs, b"")
        }
    }
}
