//! Browser bindings. For now this exposes GGUF inspection over an `ArrayBuffer`; generation
//! (an `Engine` over the same zero-copy core, in a worker) is not built yet.

use wasm_bindgen::prelude::*;

use superinfer_core::gguf::{keys, GgufFile};

/// The crate version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// Parses a GGUF file's header and returns "architecture, tensor count" as a short summary,
/// or throws the parse error.
#[wasm_bindgen(js_name = describeGguf)]
pub fn describe_gguf(bytes: &[u8]) -> Result<String, JsError> {
    let f = GgufFile::parse(bytes).map_err(|e| JsError::new(&e.to_string()))?;
    let arch = f
        .get_str(keys::GENERAL_ARCHITECTURE)
        .ok()
        .flatten()
        .unwrap_or("unknown");
    Ok(format!(
        "{arch}, {} tensors, GGUF v{}",
        f.tensors().len(),
        f.version()
    ))
}
