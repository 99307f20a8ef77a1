//! Status codes and the per-thread last error (as `errno` + `strerror`, or SQLite's
//! `sqlite3_errmsg`): every function returns a [`SuperinferStatus`], and on failure the
//! message and a stable code are kept for the calling thread until its next failing call.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use superinfer_runtime::scheduler::RequestError;

/// What a call did.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuperinferStatus {
    Ok = 0,
    /// A null pointer, text that is not UTF-8, or a parameter out of range.
    InvalidArgument = 1,
    /// The model could not be loaded (missing, not a GGUF, unsupported, too large).
    LoadFailed = 2,
    /// The request was refused before it ran (prompt too long, queue full, ...); the code
    /// says which.
    Refused = 3,
    /// The request failed while it ran (the engine failed, or the engine shut down).
    RequestFailed = 4,
    /// A bug in superinfer (a panic caught at the boundary); the message says where.
    Internal = 5,
}

struct LastError {
    code: CString,
    message: CString,
}

thread_local! {
    static LAST: RefCell<LastError> = RefCell::new(LastError {
        code: CString::default(),
        message: CString::default(),
    });
}

/// A failure: its status, stable code and message.
pub(crate) struct Failure {
    pub status: SuperinferStatus,
    pub code: &'static str,
    pub message: String,
}

impl Failure {
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure {
            status: SuperinferStatus::InvalidArgument,
            code: "invalid_argument",
            message: message.into(),
        }
    }

    pub fn request(e: &RequestError) -> Failure {
        let status = match e {
            RequestError::Closed | RequestError::Engine(_) => SuperinferStatus::RequestFailed,
            _ => SuperinferStatus::Refused,
        };
        Failure {
            status,
            code: e.code(),
            message: e.to_string(),
        }
    }
}

fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

fn remember(f: &Failure) {
    LAST.with(|l| {
        *l.borrow_mut() = LastError {
            code: c_string(f.code),
            message: c_string(&f.message),
        }
    });
}

/// Runs `body` at the C boundary: its failure is remembered for the thread and returned as
/// a status; a panic becomes [`SuperinferStatus::Internal`] instead of unwinding into C.
pub(crate) fn boundary(body: impl FnOnce() -> Result<(), Failure>) -> SuperinferStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SuperinferStatus::Ok,
        Ok(Err(f)) => {
            remember(&f);
            f.status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let f = Failure {
                status: SuperinferStatus::Internal,
                code: "internal_error",
                message: format!("internal error (please report it): {what}"),
            };
            remember(&f);
            f.status
        }
    }
}

/// The message of this thread's last failed call ("" if none). Valid until this thread's
/// next failing call.
#[no_mangle]
pub extern "C" fn superinfer_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().message.as_ptr())
}

/// The stable code of this thread's last failed call (`context_length_exceeded`,
/// `queue_full`, `kv_cache_full`, `invalid_argument`, `load_failed`, ...; "" if none).
/// Valid until this thread's next failing call.
#[no_mangle]
pub extern "C" fn superinfer_last_error_code() -> *const c_char {
    LAST.with(|l| l.borrow().code.as_ptr())
}
