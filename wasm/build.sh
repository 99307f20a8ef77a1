#!/usr/bin/env bash
# Builds the npm package into wasm/pkg/: the engine for wasm32-unknown-unknown with simd128
# (release), the JS sources and types, package.json and README.md; with --pack, also
# `npm pack`s it (wasm/pkg/superinfer-VERSION.tgz, printed on the last line).
# Needs: rustup (the wasm32-unknown-unknown target is added if missing); npm for --pack.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)
export CARGO_TARGET_DIR="${SUPERINFER_WASM_TARGET_DIR:-$root/target/wasm}"
# host flags (e.g. -C target-cpu=native) must not reach the wasm build
unset CARGO_ENCODED_RUSTFLAGS
export RUSTFLAGS="-C target-feature=+simd128"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    rustup target add wasm32-unknown-unknown
fi
cargo build --release -p superinfer-wasm --target wasm32-unknown-unknown

rm -rf pkg
mkdir -p pkg
cp js/src/*.js js/src/*.d.ts js/package.json README.md pkg/
cp "$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/superinfer_wasm.wasm" pkg/superinfer.wasm
echo "wasm/pkg: superinfer.wasm $(stat -c %s pkg/superinfer.wasm) bytes"
if [ "${1:-}" = "--pack" ]; then
    (cd pkg && npm pack --silent | tail -n 1 | sed "s|^|$PWD/|")
fi
