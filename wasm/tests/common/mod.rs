//! The package's engine and the native one on the same model file, for the tests that
//! compare them.

use superinfer_core::generate::ContextOptions;
use superinfer_core::parallel::Sequential;
use superinfer_runtime::{Engine as Native, EngineOptions};
use superinfer_wasm::buffer::ModelBuffer;
use superinfer_wasm::engine::Engine as Package;

static SEQ: Sequential = Sequential;

/// Qwen2.5-0.5B loaded natively (`threads`, the weights as the file has them: the package
/// does not repack) and into the package's engine (its kernels, a context of `n_ctx`).
pub fn load_both(threads: usize, n_ctx: usize) -> (Native, Package) {
    let path = superinfer_tests::require_model(superinfer_tests::QWEN_05B);
    let native = Native::load(
        &path,
        &EngineOptions {
            threads,
            no_repack: true,
            ..Default::default()
        },
    )
    .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let mut buf = ModelBuffer::with_parts(&[bytes.len()]).unwrap();
    let at = buf.place(0).unwrap();
    // SAFETY: `place` put the one part at `at` with room for its bytes; nothing borrows
    // the buffer now.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.ptr().add(at), bytes.len()) };
    drop(bytes);
    let opts = ContextOptions {
        n_ctx,
        ..Default::default()
    };
    let pkg = Package::load(buf, native.kernels().clone(), &SEQ, &opts).unwrap();
    (native, pkg)
}
