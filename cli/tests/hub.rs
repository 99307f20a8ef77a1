//! Models by name (`hf://USER/REPO[:QUANT]`, `--hf-repo`) against a local stand-in for the
//! Hugging Face hub (`hub/mock.rs`: the hub's URL layout, its 302 to a CDN on another host,
//! ranges, ETags): the quant picked, the download resumed after a dropped connection, a
//! checksum mismatch leaving nothing in the cache, the cache reused without the network,
//! split models' shards all fetched, and the errors for unknown, private and offline
//! repositories.

#[path = "hub/mock.rs"]
mod mock;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mock::{sha256, Hub, Repo, TOKEN};
use superinfer_runtime::core::gguf::{shard_file_name, write_shards, GgufFile, SplitBy};
use superinfer_runtime::hub::{resolve, HubError, HubOptions, ModelRef, Progress};
use superinfer_runtime::ModelFiles;
use superinfer_tests::synth::{self, Spec};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn tiny(spec: Spec) -> Vec<u8> {
    synth::build(&Spec { n_layer: 1, ..spec })
}

/// A fresh cache directory for one test.
fn cache(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("superinfer-hub-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn opts(hub: &Hub, cache: &Path) -> HubOptions {
    HubOptions {
        endpoint: hub.url.clone(),
        token: None,
        cache_dir: cache.to_path_buf(),
        offline: false,
        progress: Progress::Quiet,
        retries: 2,
        retry_delay: Duration::from_millis(10),
    }
}

fn get(name: &str, o: &HubOptions) -> Result<PathBuf, HubError> {
    resolve(&ModelRef::parse(name).unwrap(), o)
}

/// A repository with a llama (Q4_K_M), a qwen2 (Q8_0), a projector and a README.
fn hub_with_models() -> (Hub, Vec<u8>, Vec<u8>) {
    let hub = Hub::start();
    let (llama, qwen) = (tiny(Spec::llama()), tiny(Spec::qwen2()));
    hub.add(
        "u/tiny-GGUF",
        Repo {
            commit: COMMIT.into(),
            files: vec![
                ("README.md".into(), b"# tiny".to_vec()),
                ("mmproj-tiny-F16.gguf".into(), b"not a model".to_vec()),
                ("tiny-Q8_0.gguf".into(), qwen.clone()),
                ("tiny-Q4_K_M.gguf".into(), llama.clone()),
            ],
            ..Repo::default()
        },
    );
    (hub, llama, qwen)
}

#[test]
fn picks_the_quant_downloads_and_reuses_the_cache() {
    let (hub, llama, qwen) = hub_with_models();
    let dir = cache("pick");
    let mut o = opts(&hub, &dir);
    o.token = Some(TOKEN.into());

    // no tag: Q4_K_M (llama.cpp's preference), in the snapshot by its repository name
    let p = get("hf://u/tiny-GGUF", &o).unwrap();
    assert!(p.ends_with(format!(
        "models--u--tiny-GGUF/snapshots/{COMMIT}/tiny-Q4_K_M.gguf"
    )));
    assert_eq!(std::fs::read(&p).unwrap(), llama);
    assert!(dir
        .join("models--u--tiny-GGUF/blobs")
        .join(sha256(&llama))
        .is_file());
    let files = ModelFiles::open(&p).unwrap();
    assert_eq!(
        files
            .parse()
            .unwrap()
            .get_str("general.architecture")
            .unwrap(),
        Some("llama")
    );

    // a tag, any case
    let q = get("hf://u/tiny-GGUF:q8_0", &o).unwrap();
    assert_eq!(std::fs::read(&q).unwrap(), qwen);

    // the token went to the hub only, never to the CDN the hub redirected to; every file
    // came from the CDN through resolve/COMMIT
    let log = hub.log();
    assert!(log.iter().any(|r| r.cdn));
    for r in &log {
        assert_eq!(r.method, "GET");
        assert_eq!(r.auth.is_some(), !r.cdn, "{r:?}");
        if !r.cdn && !r.path.starts_with("/api/") {
            assert!(
                r.path
                    .starts_with(&format!("/u/tiny-GGUF/resolve/{COMMIT}/")),
                "{r:?}"
            );
        }
    }

    // again: from the cache, not one request, online or offline
    let n = hub.log().len();
    assert_eq!(get("hf://u/tiny-GGUF:Q4_K_M", &o).unwrap(), p);
    o.offline = true;
    assert_eq!(get("hf://u/tiny-GGUF", &o).unwrap(), p);
    assert_eq!(get("hf://u/tiny-GGUF/tiny-Q8_0.gguf", &o).unwrap(), q);
    assert_eq!(hub.log().len(), n);
    // offline, a quant the repository has but the cache lacks, and one it does not have
    o.offline = true;
    let _ = std::fs::remove_file(&q);
    let e = get("hf://u/tiny-GGUF:Q8_0", &o).unwrap_err().to_string();
    assert!(
        e.contains("not in the cache") && e.contains("--offline"),
        "{e}"
    );
    let e = get("hf://u/tiny-GGUF:IQ4_XS", &o).unwrap_err().to_string();
    assert!(e.contains("'IQ4_XS'") && e.contains("Q8_0, Q4_K_M"), "{e}");
    assert_eq!(hub.log().len(), n);
    // online, the missing file comes back (the blob is still there: no download)
    o.offline = false;
    assert_eq!(
        std::fs::read(get("hf://u/tiny-GGUF:Q8_0", &o).unwrap()).unwrap(),
        qwen
    );
    assert!(hub.log()[n..].iter().all(|r| !r.cdn));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resumes_after_a_dropped_connection() {
    let (hub, llama, _) = hub_with_models();
    let cdn_path = "/cdn/u--tiny-GGUF/tiny-Q4_K_M.gguf".to_string();
    let dir = cache("resume");
    let mut o = opts(&hub, &dir);

    // one try only: the connection drops half-way, the half stays in the .part
    o.retries = 0;
    hub.state.drop_once.lock().unwrap().insert(cdn_path.clone());
    let e = get("hf://u/tiny-GGUF", &o).unwrap_err().to_string();
    assert!(e.contains("run again to resume"), "{e}");
    let part = dir
        .join("models--u--tiny-GGUF/blobs")
        .join(format!("{}.part", sha256(&llama)));
    let half = std::fs::metadata(&part).unwrap().len();
    assert!(half > 0 && half < llama.len() as u64, "{half}");

    // the next run asks for the rest only
    let p = get("hf://u/tiny-GGUF", &o).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), llama);
    assert!(!part.exists());
    let ranges: Vec<Option<String>> = hub
        .log()
        .iter()
        .filter(|r| r.cdn)
        .map(|r| r.range.clone())
        .collect();
    assert_eq!(ranges, [None, Some(format!("bytes={half}-"))]);

    // with retries, within one run
    let dir2 = cache("resume2");
    let mut o = opts(&hub, &dir2);
    o.retries = 2;
    hub.state.drop_once.lock().unwrap().insert(cdn_path);
    let n = hub.log().len();
    let p = get("hf://u/tiny-GGUF", &o).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), llama);
    let cdn: Vec<_> = hub.log()[n..].iter().filter(|r| r.cdn).cloned().collect();
    assert_eq!(cdn.len(), 2);
    assert!(cdn[1].range.as_deref().is_some_and(|r| r != "bytes=0-"));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}

#[test]
fn a_checksum_mismatch_leaves_nothing_in_the_cache() {
    let hub = Hub::start();
    let model = tiny(Spec::llama());
    hub.add(
        "u/bad",
        Repo {
            commit: COMMIT.into(),
            files: vec![("bad-Q4_K_M.gguf".into(), model)],
            wrong_sha: ["bad-Q4_K_M.gguf".to_string()].into(),
            ..Repo::default()
        },
    );
    let dir = cache("checksum");
    let e = get("hf://u/bad", &opts(&hub, &dir)).unwrap_err();
    assert!(matches!(e, HubError::Checksum { .. }), "{e}");
    assert!(e.to_string().contains("run again"), "{e}");
    let blobs: Vec<_> = std::fs::read_dir(dir.join("models--u--bad/blobs"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(blobs.is_empty(), "{blobs:?}");
    assert!(!dir
        .join(format!("models--u--bad/snapshots/{COMMIT}/bad-Q4_K_M.gguf"))
        .exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_split_model_brings_all_its_shards() {
    let hub = Hub::start();
    let whole = tiny(Spec::llama());
    let shards = write_shards(&GgufFile::parse(&whole).unwrap(), SplitBy::Tensors(4)).unwrap();
    assert!(shards.len() >= 3, "{}", shards.len());
    let n = shards.len() as u16;
    let mut files: Vec<(String, Vec<u8>)> = shards
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let name = shard_file_name("Q8_0/tiny-Q8_0", i as u16, n);
            (name, b.clone())
        })
        .collect();
    files.reverse(); // listed in any order
    files.push(("tiny-Q4_K_M.gguf".into(), whole.clone()));
    hub.add(
        "u/split",
        Repo {
            commit: COMMIT.into(),
            files,
            ..Repo::default()
        },
    );
    let dir = cache("split");
    let p = get("hf://u/split:Q8_0", &opts(&hub, &dir)).unwrap();
    assert!(
        p.ends_with(shard_file_name("Q8_0/tiny-Q8_0", 0, n)),
        "{}",
        p.display()
    );
    let files = ModelFiles::open(&p).unwrap();
    assert_eq!(files.len(), shards.len());
    let joined = files.parse().unwrap();
    let one = GgufFile::parse(&whole).unwrap();
    assert_eq!(joined.tensors().len(), one.tensors().len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_say_what_to_do() {
    let (hub, _, _) = hub_with_models();
    hub.add(
        "u/private",
        Repo {
            commit: COMMIT.into(),
            files: vec![("p-Q4_K_M.gguf".into(), tiny(Spec::llama()))],
            private: true,
            ..Repo::default()
        },
    );
    hub.add(
        "u/no-gguf",
        Repo {
            commit: COMMIT.into(),
            files: vec![("model.safetensors".into(), vec![0; 8])],
            ..Repo::default()
        },
    );
    let dir = cache("errors");
    let mut o = opts(&hub, &dir);
    let err = |name: &str, o: &HubOptions| get(name, o).unwrap_err().to_string();

    let e = err("hf://u/nope", &o);
    assert!(
        e.contains("'u/nope' not found") && e.contains("HF_TOKEN"),
        "{e}"
    );
    let e = err("hf://u/private", &o);
    assert!(e.contains("needs a token") && e.contains("HF_TOKEN"), "{e}");
    o.token = Some("hf_wrong".into());
    let e = err("hf://u/private", &o);
    assert!(e.contains("token was refused"), "{e}");
    o.token = Some(TOKEN.into());
    assert!(get("hf://u/private", &o).is_ok());
    let e = err("hf://u/tiny-GGUF:Q5_K_S", &o);
    assert!(e.contains("no GGUF file for the quant 'Q5_K_S'"), "{e}");
    assert!(e.contains("available: Q8_0, Q4_K_M"), "{e}");
    let e = err("hf://u/tiny-GGUF/other.gguf", &o);
    assert!(
        e.contains("no file 'other.gguf'") && e.contains("tiny-Q8_0.gguf"),
        "{e}"
    );
    let e = err("hf://u/no-gguf", &o);
    assert!(e.contains("no GGUF model file"), "{e}");
    o.offline = true;
    let e = err("hf://u/never-fetched", &o);
    assert!(
        e.contains("not in the cache") && e.contains("run once online"),
        "{e}"
    );

    // nothing listening: the network, said so
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let o = HubOptions {
        endpoint: url,
        ..opts(&hub, &dir)
    };
    let e = err("hf://u/tiny-GGUF", &o);
    assert!(e.contains("cannot reach") && e.contains("--offline"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The binary: `-m hf://…`, llama.cpp's `-hf`/`-hff`, `--offline`, and an error line.
#[test]
fn the_cli_takes_hub_names() {
    let (hub, _, _) = hub_with_models();
    let dir = cache("cli");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_superinfer"))
            .args(args)
            .env("HF_ENDPOINT", &hub.url)
            .env("SUPERINFER_CACHE", &dir)
            .env_remove("HF_TOKEN")
            .env_remove("HF_HUB_OFFLINE")
            .output()
            .unwrap()
    };
    let out = run(&["info", "-m", "hf://u/tiny-GGUF:Q8_0"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("qwen2"), "{stdout}");
    assert!(dir.join("hub/models--u--tiny-GGUF").is_dir());
    let out = run(&[
        "info",
        "-hf",
        "u/tiny-GGUF",
        "-hff",
        "tiny-Q8_0.gguf",
        "--offline",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["tokenize", "--hf-repo", "u/nope:Q4_0", "-p", "hi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.starts_with("error: repository 'u/nope' not found"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
