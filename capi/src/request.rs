//! Requests: submitted from any thread, streamed through a callback on the caller's own
//! thread ([`superinfer_generate`]) or pulled event by event ([`superinfer_submit`] +
//! [`superinfer_request_next`]), cancelled from any thread.

use std::ffi::{c_char, c_void};
use std::sync::Mutex;

use superinfer_runtime::core::generate::StopReason;
use superinfer_runtime::scheduler::{Canceller, Completion, Event, Handle, Request, TEXT_ONLY};

use crate::error::{boundary, Failure, SuperinferStatus};
use crate::params::{self, SuperinferParams};
use crate::{engine_ref, prompt_tokens, SuperinferEngine};

/// Why a request ended.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuperinferFinish {
    /// The model ended its answer (an end-of-generation token).
    Stop = 0,
    /// The output reached one of the request's stop strings.
    StopSequence = 1,
    /// `max_tokens` were generated.
    Length = 2,
    /// The sequence's context is full.
    ContextFull = 3,
    /// Cancelled (`superinfer_request_cancel`, or the callback returned false).
    Cancelled = 4,
}

/// How a request ended, with its token counts and times.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SuperinferCompletion {
    pub finish: SuperinferFinish,
    pub prompt_tokens: u32,
    /// Prompt tokens whose keys and values came from the prefix cache.
    pub cached_tokens: u32,
    pub generated_tokens: u32,
    /// Waiting for a slot, the prompt, and generation, in milliseconds.
    pub queue_ms: f64,
    pub prompt_ms: f64,
    pub generate_ms: f64,
}

/// One streamed token.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SuperinferEvent {
    /// The token's id, or `UINT32_MAX` for text held back until the end (no token of its own).
    pub token: u32,
    /// The text it completes, NUL-terminated (empty while a character is split across
    /// tokens or might start a stop string); valid until the request's next call.
    pub text: *const c_char,
    pub text_len: usize,
}

/// Called for every streamed token with its id, its text (`len` bytes, NUL-terminated) and
/// `user`; return false to cancel the request. Runs on the thread that called
/// `superinfer_generate`.
pub type SuperinferTokenCallback = Option<
    unsafe extern "C" fn(user: *mut c_void, token: u32, text: *const c_char, len: usize) -> bool,
>;

/// A submitted request (opaque): pull its events with `superinfer_request_next` on one
/// thread at a time; cancel it from any thread; free it once.
pub struct SuperinferRequest {
    canceller: Canceller,
    state: Mutex<Stream>,
}

struct Stream {
    handle: Handle,
    /// The last event's text, NUL-terminated.
    text: Vec<u8>,
    /// How it ended, once it has.
    end: Option<Result<SuperinferCompletion, (SuperinferStatus, &'static str, String)>>,
}

enum Next {
    Token(u32),
    Done(SuperinferCompletion),
}

impl Stream {
    /// The next event: a token (its text in `self.text`) or the end.
    fn next(&mut self) -> Result<Next, Failure> {
        if self.end.is_none() {
            let ev = self.handle.events.recv().unwrap_or(Event::Error(
                superinfer_runtime::scheduler::RequestError::Closed,
            ));
            match ev {
                Event::Token { id, text, .. } => {
                    self.text.clear();
                    self.text.extend_from_slice(text.as_bytes());
                    self.text.push(0);
                    return Ok(Next::Token(id));
                }
                Event::Done(c) => self.end = Some(Ok(completion(&c))),
                Event::Error(e) => {
                    let f = Failure::request(&e);
                    self.end = Some(Err((f.status, f.code, f.message)));
                }
            }
        }
        match self.end.as_ref() {
            Some(Ok(c)) => Ok(Next::Done(*c)),
            Some(Err((status, code, message))) => Err(Failure {
                status: *status,
                code,
                message: message.clone(),
            }),
            None => unreachable!("set above"),
        }
    }

    fn text_len(&self) -> usize {
        self.text.len().saturating_sub(1)
    }
}

fn completion(c: &Completion) -> SuperinferCompletion {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    SuperinferCompletion {
        finish: match c.stop {
            StopReason::EndOfGeneration => SuperinferFinish::Stop,
            StopReason::StopSequence => SuperinferFinish::StopSequence,
            StopReason::Length => SuperinferFinish::Length,
            StopReason::ContextFull => SuperinferFinish::ContextFull,
            StopReason::Cancelled => SuperinferFinish::Cancelled,
        },
        prompt_tokens: c.prompt_tokens as u32,
        cached_tokens: c.cached_tokens as u32,
        generated_tokens: c.generated_tokens as u32,
        queue_ms: ms(c.queue_time),
        prompt_ms: ms(c.prompt_time),
        generate_ms: ms(c.generate_time),
    }
}

/// Submits `prompt` (BOS added as the model wants) with `params` (null: defaults).
///
/// # Safety
/// `engine` is a live engine; `prompt` a NUL-terminated string; `params` null or readable
/// (its `stop` array as `SuperinferParams` says).
unsafe fn submit(
    engine: *const SuperinferEngine,
    prompt: *const c_char,
    params: *const SuperinferParams,
) -> Result<SuperinferRequest, Failure> {
    // SAFETY: live or null (refused), by contract.
    let e = unsafe { engine_ref(engine) }?;
    // SAFETY: NUL-terminated or null (refused), by contract.
    let text =
        unsafe { params::text(prompt) }.map_err(|m| Failure::invalid(format!("prompt: {m}")))?;
    let p = if params.is_null() {
        SuperinferParams::default()
    } else {
        // SAFETY: non-null and readable by contract.
        unsafe { params.read() }
    };
    let mut r = Request::greedy(prompt_tokens(e, text, true)?, p.max_tokens as usize);
    r.sampling = p.sampling();
    r.ignore_eos = p.ignore_eos;
    // SAFETY: the `stop` array's contract is the caller's.
    r.stop = unsafe { p.stop_strings() }?;
    let handle = e.service.submit(r).map_err(|e| Failure::request(&e))?;
    Ok(SuperinferRequest {
        canceller: handle.canceller(),
        state: Mutex::new(Stream {
            handle,
            text: vec![0],
            end: None,
        }),
    })
}

/// Generates a completion of `prompt` on the calling thread: `callback` (may be null) gets
/// every token as it comes, `*completion` (may be null) how it ended. Many threads may call
/// this at once on one engine: their requests share its batched steps.
///
/// # Safety
/// `engine` is a live engine; `prompt` a NUL-terminated string; `params` null or readable;
/// `callback` null or a function safe to call with `user`; `completion` null or writable.
#[no_mangle]
pub unsafe extern "C" fn superinfer_generate(
    engine: *const SuperinferEngine,
    prompt: *const c_char,
    params: *const SuperinferParams,
    callback: SuperinferTokenCallback,
    user: *mut c_void,
    completion: *mut SuperinferCompletion,
) -> SuperinferStatus {
    boundary(|| {
        // SAFETY: forwarded contract.
        let req = unsafe { submit(engine, prompt, params) }?;
        let mut s = req.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match s.next()? {
                Next::Token(id) => {
                    if let Some(cb) = callback {
                        let len = s.text_len();
                        // SAFETY: the callback is safe to call with `user` (contract); the
                        // text is NUL-terminated and lives until the next event.
                        let go = unsafe { cb(user, id, s.text.as_ptr().cast(), len) };
                        if !go {
                            req.canceller.cancel();
                        }
                    }
                }
                Next::Done(c) => {
                    if !completion.is_null() {
                        // SAFETY: non-null and writable by contract.
                        unsafe { completion.write(c) };
                    }
                    return Ok(());
                }
            }
        }
    })
}

/// Submits a request and returns at once; `*out` is its handle (pull its tokens with
/// `superinfer_request_next`, free it with `superinfer_request_free`). Refusals (prompt
/// too long, queue full, bad parameters) come back here, as `SUPERINFER_STATUS_REFUSED`.
///
/// # Safety
/// As `superinfer_generate` for `engine`, `prompt` and `params`; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn superinfer_submit(
    engine: *const SuperinferEngine,
    prompt: *const c_char,
    params: *const SuperinferParams,
    out: *mut *mut SuperinferRequest,
) -> SuperinferStatus {
    boundary(|| {
        if out.is_null() {
            return Err(Failure::invalid("out is null"));
        }
        // SAFETY: forwarded contract.
        let req = unsafe { submit(engine, prompt, params) }?;
        // SAFETY: non-null and writable by contract.
        unsafe { out.write(Box::into_raw(Box::new(req))) };
        Ok(())
    })
}

/// Waits for the request's next event. A token: `*done` is false and `*event` holds it. The
/// end: `*done` is true and `*completion` (may be null) says how it ended; calling again
/// returns the end again. A request that failed returns its error status here.
///
/// # Safety
/// `request` is a live request handle; `event` and `done` writable; `completion` null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn superinfer_request_next(
    request: *mut SuperinferRequest,
    event: *mut SuperinferEvent,
    completion: *mut SuperinferCompletion,
    done: *mut bool,
) -> SuperinferStatus {
    boundary(|| {
        // SAFETY: live or null (refused), by contract.
        let req = unsafe { request.as_ref() }.ok_or_else(|| Failure::invalid("request is null"))?;
        if event.is_null() || done.is_null() {
            return Err(Failure::invalid("event or done is null"));
        }
        let mut s = req.state.lock().unwrap_or_else(|p| p.into_inner());
        match s.next()? {
            Next::Token(id) => {
                let ev = SuperinferEvent {
                    token: if id == TEXT_ONLY { u32::MAX } else { id },
                    text: s.text.as_ptr().cast(),
                    text_len: s.text_len(),
                };
                // SAFETY: writable by contract.
                unsafe {
                    event.write(ev);
                    done.write(false);
                }
            }
            Next::Done(c) => {
                // SAFETY: writable (or null for `completion`) by contract.
                unsafe {
                    if !completion.is_null() {
                        completion.write(c);
                    }
                    done.write(true);
                }
            }
        }
        Ok(())
    })
}

/// Asks the engine to stop the request at its next step (its stream then ends with
/// `SUPERINFER_FINISH_CANCELLED`). Safe from any thread, also while another thread waits in
/// `superinfer_request_next`. Null is ignored.
///
/// # Safety
/// `request` is null or a live request handle.
#[no_mangle]
pub unsafe extern "C" fn superinfer_request_cancel(request: *const SuperinferRequest) {
    // SAFETY: null or live, by contract.
    if let Some(r) = unsafe { request.as_ref() } {
        r.canceller.cancel();
    }
}

/// Frees a request handle (cancelling the request if it still runs). Null is ignored.
///
/// # Safety
/// `request` is null or a handle `superinfer_submit` returned, not yet freed, that no other
/// thread is using.
#[no_mangle]
pub unsafe extern "C" fn superinfer_request_free(request: *mut SuperinferRequest) {
    if !request.is_null() {
        // SAFETY: from Box::into_raw in superinfer_submit, freed only here.
        drop(unsafe { Box::from_raw(request) });
    }
}
