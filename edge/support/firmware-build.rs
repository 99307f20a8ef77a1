//! The build script of every firmware crate (`build = "../support/firmware-build.rs"`): puts
//! the crate's memory.x where the linker finds it, and picks the model to embed:
//! `EDGE_MODEL` (a GGUF path), by default the tiny model `scripts/test-edge.sh` writes to
//! `edge/target/tiny-model/tiny.gguf`.
use std::path::PathBuf;
use std::{env, fs};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let memory = manifest.join("memory.x");
    fs::copy(&memory, out.join("memory.x"))
        .unwrap_or_else(|e| panic!("cannot copy {}: {e}", memory.display()));
    println!("cargo:rustc-link-search={}", out.display());
    // the runtime crate's linker script (it includes memory.x)
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
    println!("cargo:rerun-if-changed=memory.x");
    println!("cargo:rerun-if-changed=../support/firmware-build.rs");

    let default = manifest.join("../target/tiny-model/tiny.gguf");
    println!("cargo:rerun-if-env-changed=EDGE_MODEL");
    let model = env::var_os("EDGE_MODEL").map_or(default, PathBuf::from);
    let model = fs::canonicalize(&model).unwrap_or_else(|_| {
        panic!(
            "no model to embed at {}: write the tiny model with \
             `cargo run --release -p superinfer-edge-host -- tiny-model` (in edge/), \
             or set EDGE_MODEL to a GGUF file",
            model.display()
        )
    });
    println!("cargo:rerun-if-changed={}", model.display());
    println!("cargo:rustc-env=EDGE_MODEL_PATH={}", model.display());
}
