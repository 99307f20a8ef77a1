#!/usr/bin/env bash
# Speed of the wasm32 simd128 row kernels under Node (the browser package's kernels), in GB/s
# of weights: one token (decode) and N tokens (prompt batches). Builds core's `kernel_speed`
# example for wasm32-wasip1 (into target-cross/) and runs it with scripts/wasi-runner.mjs.
#   benches/wasm-kernels.sh [--relaxed] [FORMAT...]     e.g. benches/wasm-kernels.sh Q5_0 Q8_0
# --relaxed builds with +relaxed-simd too (Node 20 runs it with --experimental-wasm-relaxed-simd).
# Wrap in `flock /tmp/superinfer-cpu.lock` on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR="$root/target-cross"
unset CARGO_ENCODED_RUSTFLAGS
features="+simd128"
# TurboFan from the start: V8 runs a function in its baseline compiler (Liftoff) until the
# optimized code is ready, which would land in some timings
node_flags=(--no-warnings --no-liftoff)
if [ "${1:-}" = "--relaxed" ]; then
    shift
    features="+simd128,+relaxed-simd"
    node_flags+=(--experimental-wasm-relaxed-simd)
    # its own directory (as in scripts/test-cross.sh): other flags, other artifacts
    export CARGO_TARGET_DIR="$root/target-cross/relaxed"
fi
RUSTFLAGS="-C target-feature=$features" \
    cargo build -q --release -p superinfer-core --example kernel_speed --target wasm32-wasip1
node "${node_flags[@]}" scripts/wasi-runner.mjs \
    "$CARGO_TARGET_DIR/wasm32-wasip1/release/examples/kernel_speed.wasm" "$@"
