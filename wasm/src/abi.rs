//! The exports the JavaScript glue (`js/src/wasm.js`) calls: plain numbers in and out,
//! strings and JSON through linear memory. A call that returns `i32` returns `-1` on failure
//! and leaves `{code, message}` as the result; the result of the last call is read with
//! `si_result_ptr` / `si_result_len` (valid until the next call).
//!
//! One engine per instance (one per worker). In the threaded build the engine's worker is
//! thread 0 and the only one that calls these; helpers only run `threads.rs`'s loop.

use std::cell::RefCell;

use serde_json::Value;
use superinfer_core::kernels::{self, CpuFeatures, Kernels};

use crate::buffer::ModelBuffer;
use crate::engine::{context_options, Engine};
use crate::errors::{Failure, Result};
use crate::probe;

#[derive(Default)]
struct State {
    /// The model file being filled, before `si_model_load` takes it.
    buffer: Option<ModelBuffer>,
    engine: Option<Engine>,
    result: Vec<u8>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// The kernels this build runs: simd128 when compiled with it (all current browsers and
/// Node have it), else scalar.
pub fn kernels() -> Kernels {
    kernels::select(&CpuFeatures::detect(), None).unwrap_or_else(|_| Kernels::scalar())
}

/// Runs `f` on the state; `Ok(text)` becomes the result and returns `ok`, an error becomes
/// the result as JSON and returns -1.
fn call(ok: i32, f: impl FnOnce(&mut State) -> Result<String>) -> i32 {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let (code, out) = match f(&mut s) {
            Ok(text) => (ok, text),
            Err(e) => (-1, e.to_json()),
        };
        s.result = out.into_bytes();
        code
    })
}

/// # Safety
/// `ptr..ptr + len` is memory this module allocated with `si_alloc` and JS filled.
unsafe fn input<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { core::slice::from_raw_parts(ptr, len) }
}

/// # Safety
/// As `input`.
unsafe fn json(ptr: *const u8, len: usize) -> Result<Value> {
    if len == 0 {
        return Ok(Value::Null);
    }
    // SAFETY: the caller's contract.
    serde_json::from_slice(unsafe { input(ptr, len) })
        .map_err(|e| Failure::new("invalid_argument", format!("bad request JSON: {e}")))
}

/// # Safety
/// As `input`.
unsafe fn text<'a>(ptr: *const u8, len: usize) -> Result<&'a str> {
    // SAFETY: the caller's contract.
    core::str::from_utf8(unsafe { input(ptr, len) })
        .map_err(|_| Failure::new("invalid_argument", "text is not UTF-8"))
}

fn engine(s: &mut State) -> Result<&mut Engine> {
    s.engine
        .as_mut()
        .ok_or_else(|| Failure::new("no_model", "no model is loaded (load one first)"))
}

/// Allocates `len` bytes for an argument (free with `si_free`); 0 when memory is exhausted.
#[no_mangle]
pub extern "C" fn si_alloc(len: usize) -> *mut u8 {
    let mut v = Vec::<u8>::new();
    if v.try_reserve_exact(len.max(1)).is_err() {
        return core::ptr::null_mut();
    }
    let mut v = core::mem::ManuallyDrop::new(v);
    v.as_mut_ptr()
}

/// # Safety
/// `ptr` came from `si_alloc(len)` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn si_free(ptr: *mut u8, len: usize) {
    // SAFETY: the caller's contract: a Vec of capacity len.max(1) allocated by si_alloc.
    drop(unsafe { Vec::from_raw_parts(ptr, 0, len.max(1)) });
}

#[no_mangle]
pub extern "C" fn si_result_ptr() -> *const u8 {
    STATE.with(|s| s.borrow().result.as_ptr())
}

#[no_mangle]
pub extern "C" fn si_result_len() -> usize {
    STATE.with(|s| s.borrow().result.len())
}

/// Refuses a file whose size alone does not fit (before anything is allocated); the size is
/// an f64 because it may exceed 32 bits.
#[no_mangle]
pub extern "C" fn si_check_size(size: f64) -> i32 {
    call(0, |_| probe::check_size(size as u64).map(|_| String::new()))
}

/// Drops any loaded model and allocates the buffer for a file of `size` bytes; returns its
/// address (the result holds it too), or 0 with the error as the result.
#[no_mangle]
pub extern "C" fn si_model_alloc(size: usize) -> usize {
    alloc_parts(|| Ok(vec![size]))
}

/// [`si_model_alloc`] for a model in parts (a JSON array of their sizes: one file's byte
/// ranges, or the shards of a split model); each part's place is `si_model_place`'s.
///
/// # Safety
/// As `input`.
#[no_mangle]
pub unsafe extern "C" fn si_model_alloc_parts(ptr: *const u8, len: usize) -> usize {
    alloc_parts(|| {
        // SAFETY: the caller's contract.
        let v = unsafe { json(ptr, len) }?;
        v.as_array()
            .and_then(|a| a.iter().map(|x| x.as_u64().map(|n| n as usize)).collect())
            .ok_or_else(|| {
                Failure::new(
                    "invalid_argument",
                    "part sizes must be an array of integers",
                )
            })
    })
}

fn alloc_parts(sizes: impl FnOnce() -> Result<Vec<usize>>) -> usize {
    let mut at = 0;
    call(0, |s| {
        s.engine = None;
        s.buffer = None;
        let b = ModelBuffer::with_parts(&sizes()?)?;
        at = b.ptr() as usize;
        s.buffer = Some(b);
        Ok(at.to_string())
    });
    at
}

/// Where part `i` of the model buffer goes, as an offset from its address (parts are placed
/// in order, each before its bytes are written); -1 on failure. An f64: offsets may pass 2 GB.
#[no_mangle]
pub extern "C" fn si_model_place(i: usize) -> f64 {
    let mut at = -1.0;
    call(0, |s| {
        let b = s
            .buffer
            .as_mut()
            .ok_or_else(|| Failure::new("invalid_argument", "no model buffer (si_model_alloc)"))?;
        at = b.place(i)? as f64;
        Ok(String::new())
    });
    at
}

/// Checks the header once `loaded` bytes of the parts are filled (in order): 0 = not all of
/// the header yet (every shard's, for a split model), 1 = checked (the result is its summary
/// as JSON), -1 = refused (bad magic, unknown architecture, unsupported tensor type, too
/// large for wasm32, shards missing or out of order...).
///
/// # Safety
/// `opts_ptr`/`opts_len` as `input` (the load options as JSON: `n_ctx`, `n_batch`).
#[no_mangle]
pub unsafe extern "C" fn si_model_probe(
    loaded: usize,
    opts_ptr: *const u8,
    opts_len: usize,
) -> i32 {
    let mut status = 0;
    let r = call(0, |s| {
        // SAFETY: the caller's contract.
        let opts = context_options(&unsafe { json(opts_ptr, opts_len) }?);
        let b = s
            .buffer
            .as_mut()
            .ok_or_else(|| Failure::new("invalid_argument", "no model buffer (si_model_alloc)"))?;
        match probe::probe(b, loaded, &kernels(), &opts)? {
            Some(v) => {
                status = 1;
                Ok(v.to_string())
            }
            None => Ok(String::new()),
        }
    });
    if r < 0 {
        r
    } else {
        status
    }
}

/// Builds the engine over the filled buffer; the result is `info()` as JSON.
///
/// # Safety
/// As [`si_model_probe`].
#[no_mangle]
pub unsafe extern "C" fn si_model_load(opts_ptr: *const u8, opts_len: usize) -> i32 {
    call(1, |s| {
        // SAFETY: the caller's contract.
        let opts = context_options(&unsafe { json(opts_ptr, opts_len) }?);
        let b = s
            .buffer
            .take()
            .ok_or_else(|| Failure::new("invalid_argument", "no model buffer (si_model_alloc)"))?;
        let e = Engine::load(b, kernels(), crate::threads::parallel(), &opts)?;
        let info = e.info().to_string();
        s.engine = Some(e);
        Ok(info)
    })
}

/// Frees the model and its buffer.
#[no_mangle]
pub extern "C" fn si_model_free() {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.engine = None;
        s.buffer = None;
    });
}

/// Token ids of a text, as a JSON array.
///
/// # Safety
/// As `input`.
#[no_mangle]
pub unsafe extern "C" fn si_tokenize(
    ptr: *const u8,
    len: usize,
    add_special: i32,
    parse_special: i32,
) -> i32 {
    call(1, |s| {
        // SAFETY: the caller's contract.
        let t = unsafe { text(ptr, len) }?;
        let ids = engine(s)?.tokenize(t, add_special != 0, parse_special != 0)?;
        Ok(serde_json::to_string(&ids).expect("ids serialize"))
    })
}

/// The text of token ids given as a JSON array.
///
/// # Safety
/// As `input`.
#[no_mangle]
pub unsafe extern "C" fn si_detokenize(ptr: *const u8, len: usize, special: i32) -> i32 {
    call(1, |s| {
        // SAFETY: the caller's contract.
        let v = unsafe { json(ptr, len) }?;
        let ids: Vec<u32> = v
            .as_array()
            .and_then(|a| a.iter().map(|x| x.as_u64().map(|t| t as u32)).collect())
            .ok_or_else(|| {
                Failure::new("invalid_argument", "token ids must be an array of integers")
            })?;
        engine(s)?.detokenize(&ids, special != 0)
    })
}

/// The prompt text of a conversation under the chat template: `{messages, tools?}` (or the
/// array of messages alone).
///
/// # Safety
/// As `input`.
#[no_mangle]
pub unsafe extern "C" fn si_render_chat(ptr: *const u8, len: usize) -> i32 {
    call(1, |s| {
        // SAFETY: the caller's contract.
        let v = unsafe { json(ptr, len) }?;
        match v.get("messages") {
            Some(m) => engine(s)?.render_chat(m, v.get("tools")),
            None => engine(s)?.render_chat(&v, None),
        }
    })
}

/// Starts a generation (request JSON: see `Engine::begin`); the result is
/// `{prompt_tokens, cached_tokens}`.
///
/// # Safety
/// As `input`.
#[no_mangle]
pub unsafe extern "C" fn si_begin(ptr: *const u8, len: usize) -> i32 {
    call(1, |s| {
        // SAFETY: the caller's contract.
        let v = unsafe { json(ptr, len) }?;
        Ok(engine(s)?.begin(&v)?.to_string())
    })
}

/// Evaluates up to `n` more prompt tokens; returns how many remain (or -1).
#[no_mangle]
pub extern "C" fn si_prefill(n: usize) -> i32 {
    let mut left = 0;
    let r = call(0, |s| {
        left = engine(s)?.prefill(n)?;
        Ok(String::new())
    });
    if r < 0 {
        r
    } else {
        left as i32
    }
}

/// The next step: the result is `{id, ids, text, finish, generated, reasoning, content,
/// tool_calls}` (`Engine::next_token`).
#[no_mangle]
pub extern "C" fn si_next() -> i32 {
    call(1, |s| Ok(engine(s)?.next_token()?.to_string()))
}

/// Ends the answer: what was held back, the whole answer's calls and its finish reason
/// (`Engine::end`).
#[no_mangle]
pub extern "C" fn si_end() -> i32 {
    call(1, |s| Ok(engine(s)?.end()?.to_string()))
}

/// The engine's description (`info()`), as JSON.
#[no_mangle]
pub extern "C" fn si_info() -> i32 {
    call(1, |s| Ok(engine(s)?.info().to_string()))
}
