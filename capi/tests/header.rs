//! `include/superinfer.h` is what cbindgen writes from `src/` now (regenerate it with
//! `SUPERINFER_BLESS=1 cargo test -p superinfer-capi --test header`).

#[test]
fn header_is_generated_from_the_source() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config =
        cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    let mut fresh = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        // the crate root; cbindgen follows its `mod` declarations into the other files
        .with_src(format!("{dir}/src/lib.rs"))
        .generate()
        .expect("cbindgen reads the crate")
        .write(&mut fresh);
    let path = format!("{dir}/include/superinfer.h");
    if std::env::var_os("SUPERINFER_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("writing the header");
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{path} is not what cbindgen writes from src/ now: regenerate it with \
         SUPERINFER_BLESS=1 cargo test -p superinfer-capi --test header"
    );
}
