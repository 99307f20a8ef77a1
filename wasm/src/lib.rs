// `memory_atomic_wait32` / `notify` are unstable; the threaded build is compiled with
// RUSTC_BOOTSTRAP=1 anyway (its std is rebuilt with -Z build-std), see build.sh
#![cfg_attr(
    all(target_arch = "wasm32", target_feature = "atomics"),
    feature(stdarch_wasm_atomic_wait)
)]
//! superinfer in the browser and Node: the engine compiled to `wasm32-unknown-unknown`
//! behind a small C ABI ([`abi`]), driven from a Web Worker (or a Node `worker_threads`
//! worker) by the npm package in `js/` (build: `wasm/build.sh`; docs: `wasm/README.md`).
//!
//! - [`buffer`]: the model file's one copy, allocated once in linear memory and filled by JS
//!   chunk by chunk as it downloads;
//! - [`probe`]: the header check while the download streams (not GGUF, unknown architecture,
//!   unsupported tensor type, too large for wasm32's 4 GB);
//! - [`engine`]: `superinfer_core::generate` over the borrowed bytes (the one forward path),
//!   the chat template, and generation token by token so JS can stop it between tokens;
//! - [`errors`]: the typed codes the JS promises reject with;
//! - [`threads`]: core's `Parallel` over workers sharing the memory (the threaded build);
//! - [`random`]: the bytes `getrandom` draws hash seeds from on wasm32.

pub mod abi;
pub mod buffer;
pub mod engine;
pub mod errors;
pub mod probe;
pub mod random;
pub mod threads;
