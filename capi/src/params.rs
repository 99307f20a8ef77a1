//! The parameter structs C fills (after `*_default`), and their conversion into the
//! runtime's options with every field checked.

use std::ffi::{c_char, CStr};

use superinfer_runtime::core::sampler::SamplerConfig;
use superinfer_runtime::{EngineOptions, SchedulerOptions};

use crate::error::Failure;

/// How an engine is loaded and how many requests it runs at once. Start from
/// `superinfer_engine_params_default`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SuperinferEngineParams {
    /// Worker threads (0: one per core).
    pub threads: u32,
    /// Requests decoded together in one step (llama.cpp's `-np`); more wait in a queue.
    pub n_parallel: u32,
    /// One request's context, prompt + generated tokens (0: min(4096, the trained context)).
    pub n_ctx: u32,
    /// Requests that may wait for a slot; more are refused (`queue_full`).
    pub max_queue: u32,
}

/// One request's sampling and stopping rules. Start from `superinfer_params_default`
/// (greedy, 128 tokens).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SuperinferParams {
    /// Tokens to generate at most.
    pub max_tokens: u32,
    /// 0: greedy (the most likely token every time).
    pub temperature: f32,
    /// 0: off.
    pub top_k: u32,
    /// 1: off.
    pub top_p: f32,
    /// 0: off.
    pub min_p: f32,
    /// 1: off.
    pub repeat_penalty: f32,
    pub seed: u64,
    /// Keep generating through end-of-generation tokens.
    pub ignore_eos: bool,
    /// `n_stop` UTF-8 strings that end generation when the output contains one (not
    /// included in the output); may be null when `n_stop` is 0.
    pub stop: *const *const c_char,
    pub n_stop: usize,
}

impl Default for SuperinferEngineParams {
    fn default() -> Self {
        let s = SchedulerOptions::default();
        SuperinferEngineParams {
            threads: 0,
            n_parallel: s.n_parallel as u32,
            n_ctx: 0,
            max_queue: s.max_queue as u32,
        }
    }
}

impl Default for SuperinferParams {
    fn default() -> Self {
        SuperinferParams {
            max_tokens: 128,
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            seed: 0,
            ignore_eos: false,
            stop: std::ptr::null(),
            n_stop: 0,
        }
    }
}

impl SuperinferEngineParams {
    pub(crate) fn options(&self) -> Result<(EngineOptions, SchedulerOptions), Failure> {
        if self.n_parallel == 0 {
            return Err(Failure::invalid("n_parallel must be at least 1"));
        }
        if self.max_queue == 0 {
            return Err(Failure::invalid("max_queue must be at least 1"));
        }
        let engine = EngineOptions {
            threads: self.threads as usize,
            ..Default::default()
        };
        let scheduler = SchedulerOptions {
            n_parallel: self.n_parallel as usize,
            n_ctx: self.n_ctx as usize,
            max_queue: self.max_queue as usize,
            ..Default::default()
        };
        Ok((engine, scheduler))
    }
}

impl SuperinferParams {
    pub(crate) fn sampling(&self) -> SamplerConfig {
        SamplerConfig {
            temperature: self.temperature,
            top_k: self.top_k as usize,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            seed: self.seed,
            ..SamplerConfig::default()
        }
    }

    /// The stop strings.
    ///
    /// # Safety
    /// `stop` points to `n_stop` readable pointers, each null or a NUL-terminated string
    /// (checked for null and UTF-8 here).
    pub(crate) unsafe fn stop_strings(&self) -> Result<Vec<String>, Failure> {
        if self.n_stop == 0 {
            return Ok(Vec::new());
        }
        if self.stop.is_null() {
            return Err(Failure::invalid("stop is null but n_stop is not 0"));
        }
        // SAFETY: the caller's contract: `stop` points to `n_stop` pointers.
        let ptrs = unsafe { std::slice::from_raw_parts(self.stop, self.n_stop) };
        ptrs.iter()
            .enumerate()
            .map(|(i, &p)| {
                // SAFETY: each pointer is null (refused) or a NUL-terminated string.
                unsafe { text(p) }
                    .map(str::to_owned)
                    .map_err(|m| Failure::invalid(format!("stop[{i}]: {m}")))
            })
            .collect()
    }
}

/// A C string as UTF-8.
///
/// # Safety
/// `p` is null (refused) or points to a NUL-terminated string that lives as long as `'a`.
pub(crate) unsafe fn text<'a>(p: *const c_char) -> Result<&'a str, String> {
    if p.is_null() {
        return Err("a null string".into());
    }
    // SAFETY: non-null, NUL-terminated by the caller's contract.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str()
        .map_err(|e| format!("not UTF-8 (byte {})", e.valid_up_to()))
}

/// Fills `out` with the engine defaults (all cores, 4 requests at once, context
/// min(4096, trained), a queue of 64).
///
/// # Safety
/// `out` is null (ignored) or points to writable memory for the struct.
#[no_mangle]
pub unsafe extern "C" fn superinfer_engine_params_default(out: *mut SuperinferEngineParams) {
    if !out.is_null() {
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { out.write(SuperinferEngineParams::default()) }
    }
}

/// Fills `out` with the request defaults: greedy, at most 128 tokens, no stop strings.
///
/// # Safety
/// `out` is null (ignored) or points to writable memory for the struct.
#[no_mangle]
pub unsafe extern "C" fn superinfer_params_default(out: *mut SuperinferParams) {
    if !out.is_null() {
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { out.write(SuperinferParams::default()) }
    }
}
