//! The C example (`examples/stream.c`), compiled with the system C compiler against this
//! build's `libsuperinfer.so` and run on Qwen2.5-0.5B: its greedy answer is the one
//! `superinfer run` gives (the runtime's single-sequence session, as `run` drives it), and
//! four C threads on one engine at once all get that same answer. Bad input through the
//! ABI (a missing model, a null prompt, a prompt over the context) is a status and a message.

use std::ffi::{c_char, CStr, CString};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Command;

use superinfer::*;
use superinfer_runtime::core::sampler::{Sampler, SamplerConfig};
use superinfer_runtime::{Engine, EngineOptions, SessionOptions};
use superinfer_tests::{require_model, QWEN_05B};

const PROMPT: &str = "The three most useful kitchen tools are";
const N: usize = 40;

/// The compiled example, run without cargo's `LD_LIBRARY_PATH` (which lists `target/<profile>`
/// too, where a libsuperinfer.so of another profile may lie): it finds the library by its
/// rpath.
fn example(bin: &Path) -> Command {
    let mut c = Command::new(bin);
    c.env_remove("LD_LIBRARY_PATH");
    c
}

/// `target/<profile>/deps`, beside this test: where cargo built the libsuperinfer.so of
/// this test's profile (the copy in `target/<profile>` is the last one built by name, e.g.
/// an unoptimized `cargo build -p superinfer-capi`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().to_path_buf()
}

fn build_example(out: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    assert!(
        lib.join("libsuperinfer.so").exists(),
        "no libsuperinfer.so in {}",
        lib.display()
    );
    let bin = out.join("stream");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&bin)
        .arg(root.join("examples/stream.c"))
        .arg(format!("-I{}", root.join("include").display()))
        .arg(format!("-L{}", lib.display()))
        .arg("-lsuperinfer")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lpthread")
        .status()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(st.success(), "compiling examples/stream.c failed");
    bin
}

/// What `superinfer run -p PROMPT -n N --temp 0` prints: the runtime's session, greedy.
fn run_answer(model: &Path) -> String {
    let e = Engine::load(
        model,
        &EngineOptions {
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let prompt = e.encode_prompt(PROMPT).unwrap();
    let mut s = e.session(&SessionOptions::default()).unwrap();
    let mut sampler = Sampler::new(SamplerConfig::greedy()).unwrap();
    let mut text = String::new();
    s.generate(&prompt, N, &mut sampler, |ev| {
        text.push_str(ev.text);
        ControlFlow::Continue(())
    })
    .unwrap();
    text
}

#[test]
fn c_example_streams_what_run_prints() {
    let model = require_model(QWEN_05B);
    let want = run_answer(&model);
    assert!(want.len() > 20, "{want:?}");
    let dir = std::env::temp_dir().join(format!("superinfer-capi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = build_example(&dir);

    let out = example(&bin)
        .arg(&model)
        .arg(PROMPT)
        .arg(N.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);

    let out = example(&bin)
        .arg(&model)
        .arg(PROMPT)
        .arg(N.to_string())
        .arg("4")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let answers: Vec<&str> = text.split("--- thread ").skip(1).collect();
    assert_eq!(answers.len(), 4, "{text}");
    for (i, a) in answers.iter().enumerate() {
        let body = a.split_once('\n').unwrap().1;
        assert_eq!(body.strip_suffix('\n').unwrap(), want, "thread {i}");
    }

    let out = example(&bin)
        .arg(dir.join("missing.gguf"))
        .arg(PROMPT)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("missing.gguf") && err.contains("load_failed"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn last_error() -> (String, String) {
    // SAFETY: both functions return NUL-terminated strings that live until this thread's
    // next failing call.
    let s = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    (s(superinfer_last_error_code()), s(superinfer_last_error()))
}

/// The ABI's errors, called from Rust as a C program would: statuses, codes and messages,
/// and the engine keeps serving after each.
#[test]
fn bad_input_is_a_status_and_a_message() {
    let model = CString::new(require_model(QWEN_05B).to_str().unwrap()).unwrap();
    let mut ep = std::mem::MaybeUninit::uninit();
    // SAFETY: all pointers below are valid as each function's contract asks.
    unsafe {
        superinfer_engine_params_default(ep.as_mut_ptr());
        let mut ep = ep.assume_init();
        ep.threads = 2;
        ep.n_ctx = 64;
        let mut bad = ep;
        bad.n_parallel = 0;
        let mut engine = std::ptr::null_mut();
        let st = superinfer_engine_load(model.as_ptr(), &bad, &mut engine);
        assert_eq!(st, SuperinferStatus::InvalidArgument);
        assert!(last_error().1.contains("n_parallel"), "{:?}", last_error());
        assert_eq!(
            superinfer_engine_load(model.as_ptr(), &ep, &mut engine),
            SuperinferStatus::Ok
        );
        assert_eq!(superinfer_n_ctx(engine), 64);

        let mut done = std::mem::zeroed::<SuperinferCompletion>();
        let st = superinfer_generate(
            engine,
            std::ptr::null(),
            std::ptr::null(),
            None,
            std::ptr::null_mut(),
            &mut done,
        );
        assert_eq!(st, SuperinferStatus::InvalidArgument);
        assert_eq!(last_error().0, "invalid_argument");

        let long = CString::new("word ".repeat(200)).unwrap();
        let st = superinfer_generate(
            engine,
            long.as_ptr(),
            std::ptr::null(),
            None,
            std::ptr::null_mut(),
            &mut done,
        );
        assert_eq!(st, SuperinferStatus::Refused);
        assert_eq!(last_error().0, "context_length_exceeded");

        let mut p = std::mem::zeroed();
        superinfer_params_default(&mut p);
        p.n_stop = 1; // with a null array
        let hi = CString::new("Hello").unwrap();
        let st = superinfer_generate(
            engine,
            hi.as_ptr(),
            &p,
            None,
            std::ptr::null_mut(),
            &mut done,
        );
        assert_eq!(st, SuperinferStatus::InvalidArgument);
        assert!(last_error().1.contains("stop"), "{:?}", last_error());

        // still serving: a pulled stream, cancelled after its first token
        p.n_stop = 0;
        p.max_tokens = 30;
        let mut req = std::ptr::null_mut();
        assert_eq!(
            superinfer_submit(engine, hi.as_ptr(), &p, &mut req),
            SuperinferStatus::Ok
        );
        let mut ev = std::mem::zeroed();
        let mut fin = false;
        assert_eq!(
            superinfer_request_next(req, &mut ev, &mut done, &mut fin),
            SuperinferStatus::Ok
        );
        assert!(!fin);
        superinfer_request_cancel(req);
        let mut tokens = 1;
        while !fin {
            assert_eq!(
                superinfer_request_next(req, &mut ev, &mut done, &mut fin),
                SuperinferStatus::Ok
            );
            tokens += usize::from(!fin);
        }
        assert_eq!(done.finish, SuperinferFinish::Cancelled);
        assert!(tokens < 30 && done.generated_tokens < 30, "{tokens}");
        superinfer_request_free(req);
        superinfer_engine_free(engine);
    }
}
